"""Vectorised construction of the links between events of one rank.

* call stacks: ``parent`` and ``depth`` of every CPU-side event on its (pid, tid);
* launches: ``index_correlation`` between a runtime call and the GPU work it enqueued;
* enclosing operator: ``op_index``, the innermost ``cpu_op`` around a launch (and, through
  the launch, around its GPU work);
* iterations: the ``ProfilerStep#N`` that contains each event.

All of them are computed with sorts and binary searches over whole columns: no Python
loop runs per event.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

NO_LINK = -1


def _group_ids(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Dense id of each (first, second) pair, by hashing (no sort)."""
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
    such events are counted and returned as the third value.
    """
    n = ts.shape[0]
    parent = np.full(n, NO_LINK, dtype=np.int64)
    depth = np.full(n, NO_LINK, dtype=np.int32)
    rows = np.flatnonzero(cpu)
    if rows.shape[0] == 0:
        return parent, depth, 0
    thread = _group_ids(pid[rows], tid[rows])
    order = np.lexsort((-end[rows], ts[rows], thread))
    rows, thread = rows[order], thread[order]
    local_parent, local_depth = _stack_pass(
        ts[rows].tolist(), end[rows].tolist(),
        np.r_[True, thread[1:] != thread[:-1]].tolist(),
    )
    lp = np.asarray(local_parent, dtype=np.int64)
    has = lp >= 0
    parent[rows] = np.where(has, rows[np.clip(lp, 0, None)], NO_LINK)
    depth[rows] = np.asarray(local_depth, dtype=np.int32)
    ends = end[rows]
    partial = int(np.count_nonzero(has & (ends[np.clip(lp, 0, None)] < ends)))
    return parent, depth, partial


def _stack_pass(
    ts: list[int], end: list[int], new_thread: list[bool]
) -> tuple[list[int], list[int]]:
    """The stack walk over events sorted by (thread, start, -end); positions in, out."""
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
    for sid, text in enumerate(symbols):
        match = STEP_PATTERN.match(text)
        if match:
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
