#!/usr/bin/env python3
"""Collectives benchmark: the per-call performance table and the two communication
findings on a loaded job.

Times, ``--repeat`` times each (median printed, with the time per million events of one
rank): :func:`hta.analysis.collectives.rank_collective_performance` on the first rank,
:func:`hta.analysis.findings.communication.check_exposed` on it, and the job rule
:func:`hta.analysis.findings.collective_bw.check_collective_bw` over every rank. Loading
is not included. This is a benchmark: it reports, it never asserts.

    python -m hta.synthetic --ranks 2 --events-per-rank 1000000 --steps 4 /tmp/big
    python benchmarks/bench_collectives.py /tmp/big
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_time  # noqa: E402

from hta.analysis.collectives import rank_collective_performance  # noqa: E402
from hta.analysis.findings.collective_bw import check_collective_bw  # noqa: E402
from hta.analysis.findings.communication import check_exposed  # noqa: E402
from hta.job.load import load_trace  # noqa: E402
from hta.model.selection import Selection  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    trace = load_trace(args.trace_dir, progress=False, cache=False)
    ranks = trace.get_ranks()
    rt = trace.rank(ranks[0])
    n = len(rt.events)
    calls = len(rank_collective_performance(rt))
    print(f"{args.trace_dir}: {len(ranks)} ranks, rank {rt.rank}: {n:,} events, "
          f"{calls:,} collective calls")
    for label, fn in (
            ("rank_collective_performance (one rank)", lambda: rank_collective_performance(rt)),
            ("check_exposed (one rank)", lambda: check_exposed(rt, None)),
            ("check_collective_bw (all ranks)", lambda: check_collective_bw(
                trace, Selection.of(ranks)))):
        t = median_time(fn, args.repeat)
        print(f"{label:42s} {t:8.3f} s   {t / n * 1e6:8.3f} s per million events of a rank")
    return 0


if __name__ == "__main__":
    sys.exit(main())
