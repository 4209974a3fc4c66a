#!/usr/bin/env python3
"""Straggler causes and pipeline bubbles benchmark: time against ranks and events.

For each ``--ranks`` count, writes two generated jobs whose ranks wait for each other
(:mod:`hta.synthetic.coupled`): ``slow_worker`` (data parallel, one all-reduce a step,
the last rank 1.3x slower) and ``1f1b`` (one pipeline of all the ranks), ``--steps`` steps
each, loads them in memory, and times the first call of
``get_straggler_causes(replay=False)`` and of ``get_pipeline_bubbles()`` (all three tables)
in a fresh analyzer (``--repeat`` loads; the median), then prints the time per rank and
per million events, so a linear cost reads as a flat column. A benchmark: it reports, it
never asserts.

    python benchmarks/bench_distributed.py --ranks 16,64 --steps 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from hta.synthetic.coupled import generate_coupled_job  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

CALLS: dict[str, tuple[str, Callable[[TraceAnalysis], Any]]] = {
    "slow_worker": ("get_straggler_causes", lambda ta: ta.get_straggler_causes(replay=False)),
    "1f1b": ("get_pipeline_bubbles", lambda ta: ta.get_pipeline_bubbles()),
}


def first_call(folder: Path, call: Callable[[TraceAnalysis], Any], repeat: int
               ) -> tuple[float, int, Any]:
    """Median time (s) of ``call`` on a freshly loaded analyzer, the events, the answer."""
    times, events, answer = [], 0, None
    for _ in range(repeat):
        ta = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
        events = sum(len(ta.t.rank(r).events) for r in ta.t.get_ranks())
        start = time.perf_counter()
        answer = call(ta)
        times.append(time.perf_counter() - start)
    return statistics.median(times), events, answer


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="16,64", help="comma-separated rank counts")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--micro-batches", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print(f"{'shape':12} {'analysis':22} {'ranks':>5} {'events':>9} {'time (s)':>9} "
          f"{'ms/rank':>8} {'s/M events':>10}  answer")
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in (int(r) for r in args.ranks.split(",")):
            for shape, (name, call) in CALLS.items():
                folder = Path(tmp) / f"{shape}-{ranks}"
                generate_coupled_job(folder, shape, ranks=ranks, steps=args.steps,
                                     micro_batches=args.micro_batches)
                t, events, answer = first_call(folder, call, args.repeat)
                print(f"{shape:12} {name:22} {ranks:5d} {events:9,d} {t:9.3f} "
                      f"{1e3 * t / ranks:8.2f} {t / events * 1e6:10.2f}  {len(answer)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
