#!/usr/bin/env python3
"""Operator performance benchmark: ``get_op_performance`` (and the category split) on one
rank of about ``--events-per-rank`` trace events (1 000 000 by default).

The rank is generated with ``python -m hta.synthetic`` (kept in ``--tmp-dir`` when given,
and reused), whose operators carry ``Input Dims``/``Input type``; ``--trace-dir`` runs on
an existing folder instead. The job is loaded once (timed apart), then each analysis runs
``--repeat`` times; the median wall time is reported with the time per million complete
events. Target: under 1 s for a 1M-event rank. This is a benchmark: it reports, it never
asserts.

    python benchmarks/bench_perf.py
    python benchmarks/bench_perf.py --tmp-dir bench_out/perf --repeat 5
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_time  # noqa: E402

from hta.analysis.perf.op_performance import op_performance  # noqa: E402
from hta.analysis.perf.summary import category_time, op_performance_summary  # noqa: E402
from hta.model.selection import Selection  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402


def _generate(folder: Path, events: int) -> Path:
    if not any(folder.glob("*.json*")):
        subprocess.run([sys.executable, "-m", "hta.synthetic", str(folder), "--ranks", "1",
                        "--events-per-rank", str(events)], check=True, cwd=REPO_ROOT)
    return folder


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one line per analysis."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events-per-rank", type=int, default=1_000_000)
    parser.add_argument("--tmp-dir", type=Path)
    parser.add_argument("--trace-dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.trace_dir or _generate(args.tmp_dir or Path(scratch), args.events_per_rank)
        start = time.perf_counter()
        analyzer = TraceAnalysis(folder, cache=False, progress=False)
        load_s = time.perf_counter() - start
        rt = analyzer.t.rank(analyzer.ranks[0])
        n = len(rt.events)
        rows = op_performance(analyzer.t, Selection.of(rt.rank))
        print(f"{folder}: {n:,} complete events, {len(rows):,} operator calls with GPU "
              f"work, {int(rows['flops'].notna().sum()):,} modelled; loaded in {load_s:.1f} s")
        for label, fn in (
            ("get_op_performance", lambda: op_performance(analyzer.t, Selection.of(rt.rank))),
            ("op_performance_summary", lambda: op_performance_summary(rows)),
            ("category_time", lambda: category_time(analyzer.t, Selection.of(rt.rank))),
        ):
            secs = median_time(fn, args.repeat)
            print(f"  {label:28s} {secs:7.3f} s   {secs / (n / 1e6):7.3f} s per 1M events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
