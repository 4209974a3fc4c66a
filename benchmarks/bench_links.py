"""The linking step: the call-stack walk before and after it went whole-column.

Decodes each trace once, then times, in this process (median of ``-n`` repeats):

* ``walk``: the per-event stack walk alone (:func:`previous_stack_pass`, the previous
  implementation) against ``links.stack_positions`` on the same
  sorted columns, over whole columns (``walk numpy``) and compiled (``walk native``,
  when ``hta.model._stack`` is built);
* ``call_stacks``: the previous whole function (sort, per-event walk, scatter) against
  today's ``links.call_stacks`` (compiled walk when built);
* ``build_rank``: sorting, classifying and linking a decoded file (today's code).

Usage: ``python benchmarks/bench_links.py TRACE.json.gz [...] [-n 7]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial
from pathlib import Path

import numpy as np
from timing import median_time

from hta.kineto.decode import decode_trace
from hta.model import build, links
from hta.model.rules import CPU_KINDS, GPU_KINDS, RuleSet


def previous_stack_pass(
    ts: list[int], end: list[int], new_thread: list[bool]
) -> tuple[list[int], list[int]]:
    """The per-event stack walk as it was, over events sorted by (thread, start, -end)."""
    m = len(ts)
    parent = [-1] * m
    depth = [0] * m
    stack_end: list[int] = []
    stack_pos: list[int] = []
    for p in range(m):
        if new_thread[p]:
            stack_end.clear()
            stack_pos.clear()
        start = ts[p]
        while stack_end and stack_end[-1] <= start:
            stack_end.pop()
            stack_pos.pop()
        if stack_pos:
            parent[p] = stack_pos[-1]
            depth[p] = len(stack_pos)
        stack_end.append(end[p])
        stack_pos.append(p)
    return parent, depth


def previous_call_stacks(ts: np.ndarray, end: np.ndarray, pid: np.ndarray, tid: np.ndarray,
                         cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``links.call_stacks`` as it was: a lexsort, then the per-event walk."""
    n = ts.shape[0]
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.full(n, -1, dtype=np.int32)
    rows = np.flatnonzero(cpu)
    if rows.shape[0] == 0:
        return parent, depth, 0
    thread = links._group_ids(pid[rows], tid[rows])
    order = np.lexsort((-end[rows], ts[rows], thread))
    rows, thread = rows[order], thread[order]
    lp_list, ld_list = previous_stack_pass(ts[rows].tolist(), end[rows].tolist(),
                                           np.r_[True, thread[1:] != thread[:-1]].tolist())
    lp = np.asarray(lp_list, dtype=np.int64)
    has = lp >= 0
    parent[rows] = np.where(has, rows[np.clip(lp, 0, None)], -1)
    depth[rows] = np.asarray(ld_list, dtype=np.int32)
    ends = end[rows]
    return parent, depth, int(np.count_nonzero(has & (ends[np.clip(lp, 0, None)] < ends)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("-n", "--runs", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"{'trace':28} {'CPU rows':>9} {'step':12} {'before ms':>10} {'after ms':>9} "
          f"{'speed-up':>8}")
    for path in args.traces:
        decoded = decode_trace(Path(path), workers=1)
        rt = build.build_rank(decoded, 0, RuleSet(()))
        ev = rt.events
        kinds = ev["kind"].astype(str).to_numpy()
        cpu = (np.isin(kinds, list(CPU_KINDS | {"other"})) & ~np.isin(kinds, list(GPU_KINDS))
               & (ev["pid"].to_numpy() >= 0))
        cols = (ev["ts"].to_numpy(), ev["end"].to_numpy(), ev["pid"].to_numpy(),
                ev["tid"].to_numpy(), cpu)
        new, old = links.call_stacks(*cols), previous_call_stacks(*cols)
        assert all(np.array_equal(a, b) for a, b in zip(new[:2], old[:2])) and new[2] == old[2]
        rows = np.flatnonzero(cpu)
        thread = links._group_ids(cols[2][rows], cols[3][rows])
        order = np.lexsort((-cols[1][rows], cols[0][rows], thread))
        s_ts, s_end, s_thread = cols[0][rows][order], cols[1][rows][order], thread[order]
        first = np.r_[True, s_thread[1:] != s_thread[:-1]]
        ts_l, end_l, first_l = s_ts.tolist(), s_end.tolist(), first.tolist()
        walk_before = median_time(partial(previous_stack_pass, ts_l, end_l, first_l), args.runs)
        native = links.native_walk_available()
        os.environ["HTA_NATIVE"] = "0"
        rows_out = [("walk numpy", walk_before,
                     median_time(partial(links.stack_positions, s_ts, s_end, first), args.runs))]
        os.environ.pop("HTA_NATIVE")
        if native:
            rows_out.append(("walk native", walk_before, median_time(
                partial(links.stack_positions, s_ts, s_end, first), args.runs)))
        rows_out.append(("call_stacks", median_time(partial(previous_call_stacks, *cols),
                                                    args.runs),
                         median_time(partial(links.call_stacks, *cols), args.runs)))
        build_times = []
        for _ in range(max(1, args.runs // 2)):
            fresh = decode_trace(Path(path), workers=1)  # build_rank consumes its input
            start = time.perf_counter()
            build.build_rank(fresh, 0, RuleSet(()))
            build_times.append(time.perf_counter() - start)
        build_s = statistics.median(build_times)
        name = Path(path).name[:28]
        for step, before, after in rows_out:
            print(f"{name:28} {rows.size:9d} {step:12} {before * 1e3:10.1f} {after * 1e3:9.1f} "
                  f"{before / after:7.1f}x")
        print(f"{name:28} {rows.size:9d} {'build_rank':12} {'':10} {build_s * 1e3:9.1f}")


if __name__ == "__main__":
    main()
