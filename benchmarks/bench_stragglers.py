#!/usr/bin/env python3
"""Straggler analysis benchmark: matching collectives across many ranks.

Builds the per-rank kernel table that :func:`hta.analysis.stragglers.rank_collectives`
returns for a job of ``--ranks`` ranks with ``--collectives`` collectives each (half
carrying ``Seq``, half matched by order, random start lags, one late rank), then times
:func:`~hta.analysis.stragglers.match_collectives` and
:func:`~hta.analysis.stragglers.straggler_summary` ``--repeat`` times and prints the median
wall time and the time per million kernels. With ``--trace-dir DIR`` it times
:func:`~hta.analysis.stragglers.collective_arrivals` on that job instead (loading not
included). This is a benchmark: it reports, it never asserts.

    python benchmarks/bench_stragglers.py --ranks 64 --collectives 20000
    python benchmarks/bench_stragglers.py --trace-dir ../shared/traces/hta/trace_filter
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_time  # noqa: E402

from hta.analysis.stragglers import (  # noqa: E402
    KERNEL_COLUMNS,
    collective_arrivals,
    match_collectives,
    straggler_summary,
)

NAME = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def kernel_table(ranks: int, collectives: int, seed: int = 0) -> pd.DataFrame:
    """``ranks`` x ``collectives`` kernels: the first half with Seq, the rest without."""
    rng = np.random.default_rng(seed)
    n = ranks * collectives
    rank = np.repeat(np.arange(ranks), collectives)
    j = np.tile(np.arange(collectives), ranks)
    nominal = j * 200_000
    lag = rng.integers(0, 5_000, n) + np.where(rank == ranks // 2, 30_000, 0)
    start = nominal + lag
    end = nominal + 35_000 + 40_000
    with_seq = j < collectives // 2
    return pd.DataFrame({
        "rank": rank, "process_group": np.where(j % 2 == 0, "0", "1"),
        "process_group_desc": "", "group_ranks": "",
        "seq": np.where(with_seq, j, -1), "name": "allreduce", "kernel": NAME,
        "stream": 20, "iteration": j // 100, "start_ns": start, "end_ns": end,
        "in_msg_nelems": 1.0,
    }, columns=KERNEL_COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--collectives", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace-dir", type=Path)
    args = parser.parse_args()
    if args.trace_dir:
        from hta.job.load import load_trace

        trace = load_trace(args.trace_dir, progress=False, cache=False)
        wall = median_time(lambda: straggler_summary(collective_arrivals(trace)), args.repeat)
        print(f"{args.trace_dir}: collective_arrivals + summary {wall:.3f} s (median)")
        return
    kernels = kernel_table(args.ranks, args.collectives)
    wall = median_time(lambda: straggler_summary(match_collectives(kernels)), args.repeat)
    per_m = wall / (len(kernels) / 1e6)
    print(f"{args.ranks} ranks x {args.collectives} collectives = {len(kernels):,} kernels: "
          f"match + summary {wall:.3f} s (median of {args.repeat}), {per_m:.3f} s per "
          f"million kernels")


if __name__ == "__main__":
    main()
