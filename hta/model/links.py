"""Vectorised construction of the links between events of one rank.

* call stacks: ``parent`` and ``depth`` of every CPU-side event on its (pid, tid);
* launches: ``index_correlation`` between a runtime call and the GPU work it enqueued; a
  graph launch and every kernel, copy and memset its replay ran share one correlation id,
  so each of them links to the launch (:func:`graph_replayed` tells them apart);
* enclosing operator: ``op_index``, the innermost ``cpu_op`` around a launch (and, through
  the launch, around its GPU work);
* iterations: the ``ProfilerStep#N`` that contains each event.

All of them are computed with sorts and binary searches over whole columns: no Python
loop runs per event.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd

from hta.model.arrays import distinct
from hta.model.symbol_masks import symbol_ids, symbol_mask

NO_LINK = -1

try:  # the compiled walk (hta/model/_native/stack.c), where a C compiler built it
    from hta.model import _stack  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the install
    _stack = None


def native_walk_available() -> bool:
    """Whether the compiled stack walk is built and not switched off (``HTA_NATIVE=0``)."""
    return _stack is not None and os.environ.get("HTA_NATIVE", "1") not in ("0", "", "false")


def _group_ids(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Dense id of each (first, second) pair, by hashing (no sort)."""
    if first.size and second.size:
        lo1, hi1 = int(first.min()), int(first.max())
        lo2, hi2 = int(second.min()), int(second.max())
        width = hi2 - lo2 + 1
        if (hi1 - lo1 + 1) * width < 2**62:  # one hash pass over a combined key
            key = (first.astype(np.int64) - lo1) * width + (second.astype(np.int64) - lo2)
            return pd.factorize(key)[0].astype(np.int64)
    a, a_uniq = pd.factorize(first)
    b, b_uniq = pd.factorize(second)
    combined, _ = pd.factorize(a.astype(np.int64) * max(len(b_uniq), 1) + b)
    return combined.astype(np.int64)


def call_stacks(
    ts: np.ndarray, end: np.ndarray, pid: np.ndarray, tid: np.ndarray, cpu: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """Parent row and depth of each CPU event; -1 for roots and for non-CPU rows.

    Events of one thread are ordered by start, longer first on ties, and pushed on a
    stack after popping every event that ended at or before their start. The event left
    on top is the parent. When an event outlives its parent (the two overlap without
    nesting, which real traces do by a few ns) it still counts as the parent's child;
    such events are counted and returned as the third value. The walk itself is
    computed with whole-column operations (:func:`stack_positions`).
    """
    n = ts.shape[0]
    parent = np.full(n, NO_LINK, dtype=np.int64)
    depth = np.full(n, NO_LINK, dtype=np.int32)
    rows = np.flatnonzero(cpu)
    if rows.shape[0] == 0:
        return parent, depth, 0
    thread = _group_ids(pid[rows], tid[rows])
    r_ts, r_end = ts[rows], end[rows]
    order = _thread_order(thread, r_ts, r_end)
    rows, thread = rows[order], thread[order]
    r_ts, r_end = r_ts[order], r_end[order]
    lp, ld = stack_positions(r_ts, r_end, np.r_[True, thread[1:] != thread[:-1]])
    has = lp >= 0
    safe = np.where(has, lp, 0)
    parent[rows] = np.where(has, rows[safe], NO_LINK)
    depth[rows] = ld
    partial = int(np.count_nonzero(has & (r_end[safe] < r_end)))
    return parent, depth, partial


def _thread_order(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The order by (thread, start, -end). Rows already sorted by start (as a rank's events
    are) only need a stable sort by thread and the ties on start put longest first."""
    if ts.shape[0] < 2 or not bool(np.all(ts[1:] >= ts[:-1])):
        return np.lexsort((-end, ts, thread))
    small = np.int16 if int(thread.max()) < 2**15 else np.int64
    order = np.argsort(thread.astype(small), kind="stable")
    s_thread, s_ts, s_end = thread[order], ts[order], end[order]
    tie = (s_thread[1:] == s_thread[:-1]) & (s_ts[1:] == s_ts[:-1])
    unsorted = tie & (s_end[1:] > s_end[:-1])
    if not unsorted.any():
        return order
    # Only the runs of equal (thread, start) need their ends ordered.
    in_run = np.zeros(order.shape[0], dtype=bool)
    in_run[1:] |= tie
    in_run[:-1] |= tie
    at = np.flatnonzero(in_run)
    run = np.cumsum(np.r_[True, ~tie][at])  # a run is contiguous within `at`
    order[at] = order[at][np.lexsort((-s_end[at], run))]
    return order


def stack_positions(
    ts: np.ndarray, end: np.ndarray, new_thread: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The per-event stack walk, as positions: each event sorted by (thread, start, -end)
    is pushed after popping every event that ended at or before its start, and the event
    left on top is its parent. Compiled where the optional extension ``hta.model._stack``
    is built, else over whole columns as follows.

    ``new_thread`` marks the first event of each thread. Event ``j`` leaves the stack at
    the first position ``p > j`` of its thread whose start is at or after its end (its
    *close slot*), unless an event pushed above it is still there: then it leaves when
    that one does. So the slots, once every slot is raised to the largest slot of the
    events inside its span (a fixpoint that only events overlapping without nesting
    change), form a nesting of intervals, and the walk's depth is the number of open
    intervals and its parent the last event one level up.
    """
    m = ts.shape[0]
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    if native_walk_available():
        parent = np.empty(m, dtype=np.int64)
        depth = np.empty(m, dtype=np.int32)
        _stack.walk(np.ascontiguousarray(ts, dtype=np.int64),
                    np.ascontiguousarray(end, dtype=np.int64),
                    np.ascontiguousarray(new_thread, dtype=np.uint8), parent, depth)
        return parent, depth
    pos = np.arange(m, dtype=np.int64)
    first = np.flatnonzero(new_thread)
    block = np.cumsum(new_thread, dtype=np.int64) - 1
    block_end = np.r_[first[1:], m][block]
    close = _close_slots(ts, end, block, pos, block_end)
    depth, parent = _nesting(close, pos)
    if not _is_nesting(close, parent, pos):
        depth, parent = _nesting(_close_crossings(close, pos), pos)
    return parent, depth.astype(np.int32)


def _close_slots(ts: np.ndarray, end: np.ndarray, block: np.ndarray, pos: np.ndarray,
                 block_end: np.ndarray) -> np.ndarray:
    """First position after each event, in its thread, starting at or after its end."""
    lo = int(ts.min())
    span = max(int(end.max()), int(ts.max())) - lo + 1
    nblocks = int(block[-1]) + 1
    if span > 0 and nblocks <= (2**62) // span:
        offset = block * span - lo
        slot = np.searchsorted(ts + offset, end + offset, side="left")
    else:  # keys would overflow: search thread by thread
        slot = np.empty(ts.shape[0], dtype=np.int64)
        starts = np.r_[0, np.flatnonzero(np.diff(block)) + 1, ts.shape[0]]
        for a, b in zip(starts[:-1], starts[1:]):
            slot[a:b] = a + np.searchsorted(ts[a:b], end[a:b], side="left")
    np.maximum(slot, pos + 1, out=slot)
    np.minimum(slot, block_end, out=slot)
    return slot


def _nesting(close: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth (open intervals at each start) and the last earlier event one level up."""
    m = pos.shape[0]
    closed_by = np.cumsum(np.bincount(close, minlength=m + 1)[:m])
    depth = pos - closed_by
    dtype = np.int16 if int(depth.max()) < 2**15 else np.int64
    by_depth = np.argsort(depth.astype(dtype), kind="stable")
    keys = depth[by_depth] * (m + 1) + by_depth
    # Searching in key order (sorted needles) keeps the binary searches in cache.
    first_inner = int(np.searchsorted(keys, m + 1, side="left"))
    at = np.searchsorted(keys, keys[first_inner:] - (m + 1), side="left") - 1
    parent = np.full(m, NO_LINK, dtype=np.int64)
    parent[by_depth[first_inner:]] = by_depth[at]
    return depth, parent


def _is_nesting(close: np.ndarray, parent: np.ndarray, pos: np.ndarray) -> bool:
    """Whether every event's parent is open at its start and closes no earlier than it
    (then the intervals nest, and the parents are the walk's)."""
    inner = parent >= 0
    up = close[parent[inner]]
    return bool(np.all(up > pos[inner]) and np.all(close[inner] <= up))


def _close_crossings(close: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Raise each close slot to the largest slot inside its span, until nothing moves.

    Each round takes the maximum over the previous round's slots, so after ``k`` rounds a
    slot reflects chains of up to ``2**k`` crossing events: it settles within about
    ``log2(m) + 2`` rounds (real traces need one or two).
    """
    current = close
    while True:
        raised = np.maximum(close, _range_max(current, pos + 1, current - 1))
        if np.array_equal(raised, current):
            return current
        current = raised


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo:hi + 1]) for each pair (a sparse table); -1 where the range is empty."""
    m = values.shape[0]
    dtype = np.int32 if m < 2**31 else np.int64
    levels = [values.astype(dtype)]
    width = 1
    while 2 * width <= m:
        prev = levels[-1]
        levels.append(np.maximum(prev[:-width], prev[width:]))
        width *= 2
    out = np.full(lo.shape[0], -1, dtype=np.int64)
    ok = np.flatnonzero(hi >= lo)
    if ok.size == 0:
        return out
    a, b = lo[ok], hi[ok]
    k = np.floor(np.log2((b - a + 1).astype(np.float64))).astype(np.int64)
    for level in distinct(k):
        sel = k == level
        table = levels[int(level)]
        aa, bb = a[sel], b[sel]
        out[ok[sel]] = np.maximum(table[aa], table[bb - (1 << int(level)) + 1])
    return out


def correlation_or_external_id(cols: dict[str, np.ndarray], runtime: np.ndarray,
                               gpu: np.ndarray) -> np.ndarray:
    """The ``correlation`` column, or, on a trace whose runtime calls and GPU work carry
    no correlation at all but an ``External id`` of their own (one per runtime call,
    shared with the GPU work it enqueued, as ``ac2g`` flows of that id also say: some
    ROCm traces), the external ids of those rows in its place."""
    corr = cols["correlation"]
    ext = cols.get("external_id")
    if ext is None or (corr[runtime | gpu] >= 0).any():
        return corr
    r_ext = ext[runtime & (ext >= 0)]
    if r_ext.size == 0 or distinct(r_ext).size != r_ext.size:
        return corr  # ids shared by several calls: an operator's, not a launch's
    g_ext = ext[gpu & (ext >= 0)]
    if not np.isin(g_ext, r_ext).any():
        return corr
    out = corr.copy()
    use = (runtime | gpu) & (ext >= 0)
    out[use] = ext[use]
    return out


def correlation_links(
    correlation: np.ndarray, runtime: np.ndarray, gpu: np.ndarray
) -> np.ndarray:
    """``index_correlation``: GPU row -> its runtime call; runtime call -> first GPU row.

    A graph launch enqueues many kernels under one correlation id: each kernel points to
    the launch, and the launch points to the first kernel.
    """
    n = correlation.shape[0]
    out = np.full(n, NO_LINK, dtype=np.int64)
    r_rows = np.flatnonzero(runtime & (correlation >= 0))
    g_rows = np.flatnonzero(gpu & (correlation >= 0))
    if r_rows.size == 0 or g_rows.size == 0:
        return out
    r_order = np.argsort(correlation[r_rows], kind="stable")
    r_sorted_rows = r_rows[r_order]
    r_corr = correlation[r_sorted_rows]
    g_corr = correlation[g_rows]
    pos = np.clip(np.searchsorted(r_corr, g_corr), 0, r_corr.shape[0] - 1)
    hit = r_corr[pos] == g_corr
    out[g_rows[hit]] = r_sorted_rows[pos[hit]]
    g_order = np.argsort(g_corr, kind="stable")  # g_rows ascending, so first = lowest row
    g_sorted_rows = g_rows[g_order]
    g_sorted_corr = g_corr[g_order]
    pos = np.clip(np.searchsorted(g_sorted_corr, r_corr), 0, g_sorted_corr.shape[0] - 1)
    hit = g_sorted_corr[pos] == r_corr
    out[r_sorted_rows[hit]] = g_sorted_rows[pos[hit]]
    return out


#: Runtime and driver calls that replay a CUDA or HIP graph (Kineto writes the replayed
#: kernels, copies and memsets with the correlation id of this call).
GRAPH_LAUNCH = re.compile(r"^(cudaGraphLaunch(_v\d+)?(_ptsz)?|cuGraphLaunch(_ptsz)?"
                          r"|hipGraphLaunch(_spt)?)$")


def _graph_launch_name(name: str) -> bool:
    return "GraphLaunch" in name and GRAPH_LAUNCH.match(name) is not None


def graph_replayed(symbols: list[str], name: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """Which rows were enqueued by a graph launch: ``launch`` holds each row's
    ``index_correlation`` as a position (-1 when unlinked), ``name`` the symbol ids of
    every row. (A graph launch's own link names its first kernel, so it is not marked.)"""
    is_graph = symbol_mask(symbols, _graph_launch_name)
    out = np.zeros(launch.shape[0], dtype=bool)
    linked = np.flatnonzero(launch >= 0)
    if linked.size and is_graph.any():
        out[linked] = is_graph[name[launch[linked]]]
    return out


def enclosing_ops(parent: np.ndarray, is_op: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the innermost ancestor whose ``is_op`` is true (or -1)."""
    cur = parent[rows].copy()
    result = np.full(rows.shape[0], NO_LINK, dtype=np.int64)
    active = cur >= 0
    while active.any():
        idx = np.flatnonzero(active)
        c = cur[idx]
        found = is_op[c]
        result[idx[found]] = c[found]
        nxt = parent[c]
        cur[idx] = nxt
        active[idx] = ~found & (nxt >= 0)
    return result


STEP_PATTERN = re.compile(r"^ProfilerStep#(\d+)$")


def step_spans(
    symbols: list[str], name: np.ndarray, candidates: np.ndarray, ts: np.ndarray,
    end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, step number) of the ``ProfilerStep#N`` spans, sorted by start."""
    step_of_symbol = np.full(len(symbols), -1, dtype=np.int64)
    for sid in symbol_ids(symbols, STEP_PATTERN.match).tolist():
        if match := STEP_PATTERN.match(symbols[sid]):
            step_of_symbol[sid] = int(match.group(1))
    if not (step_of_symbol >= 0).any():
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    rows = np.flatnonzero(candidates & (step_of_symbol[name] >= 0))
    order = np.argsort(ts[rows], kind="stable")
    rows = rows[order]
    return ts[rows], end[rows], step_of_symbol[name[rows]]


def assign_iterations(
    ts: np.ndarray, starts: np.ndarray, ends: np.ndarray, numbers: np.ndarray
) -> np.ndarray:
    """Step number of the span containing each timestamp; -1 outside every span."""
    out = np.full(ts.shape[0], NO_LINK, dtype=np.int64)
    if starts.size == 0:
        return out
    i = np.searchsorted(starts, ts, side="right") - 1
    ok = i >= 0
    ic = np.clip(i, 0, None)
    ok &= ts < ends[ic]
    out[ok] = numbers[ic[ok]]
    return out
