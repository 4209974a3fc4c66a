#!/usr/bin/env python3
"""Memory timeline benchmark: timeline, summary (peak and operators live at it) and the
thinned figure on a rank with many ``[memory]`` events.

Two inputs, each timed apart from its loading:

* ``built``: a rank made in memory with ``--events`` memory events (1 000 000 by default:
  allocations each freed after a random lifetime, on one CUDA device) on a thread with
  ``--events // 10`` CPU operators (each with a nested child);
* ``--trace-dir DIR``: a real job (e.g. ``../shared/traces/hta/df_index_resolver``).

Prints, per input, the median wall time over ``--repeat`` runs of ``memory_timeline``,
``memory_summary`` and ``memory_timeline_figure``, the points drawn against the rows of the
timeline, and the figure's HTML size without plotly.js. A benchmark: it reports, it never
asserts.

    python benchmarks/bench_memory.py
    python benchmarks/bench_memory.py --trace-dir ../shared/traces/hta/df_index_resolver
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import timed  # noqa: E402

from hta.analysis.memory import memory_summary, memory_timeline  # noqa: E402
from hta.model.rules import KINDS  # noqa: E402
from hta.model.trace import RankTrace, Trace  # noqa: E402
from hta.plots.memory import memory_timeline_figure  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

BASE = 1_700_000_000_000_000_000


def built_rank(n: int, seed: int = 0) -> Trace:
    """``n`` memory events (``n // 2`` blocks, each allocated then freed) and ``n // 10``
    operator pairs on one thread, over ``n * 1000`` ns."""
    rng = np.random.default_rng(seed)
    span = n * 1_000
    ops = max(1, n // 10)
    root_ts = BASE + np.arange(ops, dtype=np.int64) * (span // ops)
    ts = np.column_stack([root_ts, root_ts + 100]).ravel()
    end = np.column_stack([root_ts + (span // ops) * 8 // 10, root_ts + 400]).ravel()
    m = ts.size
    parent = np.full(m, -1, dtype=np.int64)
    parent[1::2] = np.arange(0, m, 2)
    events = pd.DataFrame({
        "index": np.arange(m), "ts": ts, "dur": end - ts, "end": end,
        "cat": np.zeros(m, np.int32), "name": (np.arange(m) % 40).astype(np.int32),
        "pid": 1, "tid": 1, "parent": parent, "depth": (np.arange(m) % 2).astype(np.int32),
        "iteration": np.zeros(m, np.int64),
        "kind": pd.Categorical(np.full(m, "cpu_op"), categories=list(KINDS)),
    })
    blocks = n // 2
    start = BASE + rng.integers(0, span, blocks)
    life = rng.exponential(span / 200, blocks).astype(np.int64) + 1
    size = rng.integers(512, 1 << 24, blocks)
    t = np.r_[start, start + life]
    nbytes = np.r_[size, -size]
    addr = np.r_[np.arange(blocks), np.arange(blocks)] * 4096
    order = np.argsort(t, kind="stable")
    t, nbytes, addr = t[order], nbytes[order], addr[order]
    total = np.cumsum(nbytes)
    k = t.size
    instants = pd.DataFrame({
        "ts": t, "name": np.full(k, 40, np.int32), "cat": np.full(k, 41, np.int32),
        "pid": 1, "tid": 1, "scope": np.full(k, 41, np.int32), "addr": addr,
        "bytes": nbytes.astype(np.float64), "total_allocated": total.astype(np.float64),
        "total_reserved": np.maximum.accumulate(total).astype(np.float64),
        "device_type": 1, "device_id": 0,
    })
    symbols = [f"aten::op_{i}" for i in range(40)] + ["[memory]", "cpu_instant_event"]
    rt = RankTrace(rank=0, events=events, symbols=symbols, tables={"instants": instants},
                   meta={})
    return Trace({0: rt})


def bench(label: str, trace: Trace, repeat: int) -> dict[str, Any]:
    tl_s, tl = timed(lambda: memory_timeline(trace), repeat)
    sum_s, summary = timed(lambda: memory_summary(trace), repeat)
    fig_s, fig = timed(lambda: memory_timeline_figure(tl, summary), repeat)
    drawn = sum(len(d.y) for d in fig.data if d.mode == "lines")
    html = fig.to_html(include_plotlyjs=False, full_html=False)
    return {"input": label, "timeline_rows": len(tl), "timeline_s": round(tl_s, 4),
            "summary_s": round(sum_s, 4), "figure_s": round(fig_s, 4),
            "points_drawn": drawn, "html_mb": round(len(html.encode()) / 1e6, 2),
            "peak_bytes": [int(x) for x in summary["peak_allocated_bytes"]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--trace-dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON line per input")
    args = parser.parse_args(argv)
    rows = [bench("built", built_rank(args.events), args.repeat)]
    if args.trace_dir:
        a = TraceAnalysis(trace_dir=args.trace_dir, progress=False)
        rows.append(bench(str(args.trace_dir), a.t, args.repeat))
    for row in rows:
        print(json.dumps(row) if args.json else
              "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
