"""Earliest-start schedule of a DAG with a delay on every edge.

The graph is given as edge arrays with every edge going from a lower to a higher node id
(a topological numbering, as the critical path graph numbers its nodes). Node ``v`` is
scheduled at

    t(v) = base(v)                                  if v has no predecessor
    t(v) = max(t(u) + delay(u -> v) for u -> v)     otherwise

and ``via(v)`` is the edge that set it (the *binding* edge; on ties the one from the
predecessor with the highest id, the latest in time), -1 for sources. Example: edges
0->1 (delay 5), 0->2 (delay 2), 1->2 (delay 1) with base 0 give t = [0, 5, 6] and
via(2) = the edge 1->2.

Cost: chains of single-predecessor nodes (most of a trace) are collapsed with pointer
jumping in O(n log n) vectorised steps, as :mod:`hta.analysis.critical_path.longest`
does; a Python loop visits only the nodes with two or more predecessors, in id order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Schedule:
    """Per node: its scheduled time ``t`` (ns) and binding edge ``via`` (-1: source)."""

    t: np.ndarray
    via: np.ndarray


def schedule(num_nodes: int, src: np.ndarray, dst: np.ndarray, delay: np.ndarray,
             base: np.ndarray) -> Schedule:
    """Earliest-start times of a DAG given with ``src < dst`` on every edge.

    Args:
        num_nodes: node ids are ``0 .. num_nodes - 1``.
        src, dst: edge endpoints (int64), sorted by ``dst`` (ties in any order).
        delay: per edge, the time (ns) from the start of ``src`` to the earliest start of
            ``dst`` that the edge allows.
        base: per node, the time of a node without predecessors.
    """
    n = int(num_nodes)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    delay = np.asarray(delay, dtype=np.int64)
    if src.size and not (src < dst).all():
        raise ValueError("schedule needs every edge to go from a lower to a higher node id")
    if src.size > 1 and (np.diff(dst) < 0).any():
        raise ValueError("schedule needs the edges sorted by destination")
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return Schedule(z, z.copy())
    indeg = np.bincount(dst, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(indeg, out=indptr[1:])
    single = indeg == 1
    via = np.full(n, -1, dtype=np.int64)
    via[single] = indptr[:-1][single]
    # pointer jumping: every node's anchor (a node without exactly one predecessor) and
    # the delay gathered from the anchor to the node
    jump = np.arange(n)
    jump[single] = src[via[single]]
    acc = np.zeros(n, dtype=np.int64)
    acc[single] = delay[via[single]]
    active = np.flatnonzero(single)
    while active.size:
        nxt = jump[active]
        acc[active] += acc[nxt]
        jump[active] = jump[nxt]
        active = active[single[jump[active]]]
    anchor_t = np.asarray(base, dtype=np.int64).copy()
    multi = np.flatnonzero(indeg >= 2)
    if multi.size:
        _multi_loop(multi, indptr, src, delay, jump, acc, anchor_t, via)
    return Schedule(t=anchor_t[jump] + acc, via=via)


def _multi_loop(multi: np.ndarray, indptr: np.ndarray, src: np.ndarray, delay: np.ndarray,
                jump: np.ndarray, acc: np.ndarray, anchor_t: np.ndarray,
                via: np.ndarray) -> None:
    """Times of the nodes with several predecessors, in id order (fills ``anchor_t`` and
    ``via`` of those nodes)."""
    lo = indptr[multi].tolist()
    hi = indptr[multi + 1].tolist()
    edges = _ranges(indptr[multi], indptr[multi + 1])
    u = src[edges]
    u_anchor = jump[u].tolist()
    base_part = (acc[u] + delay[edges]).tolist()
    u_id = u.tolist()
    e_id = edges.tolist()
    at = anchor_t.tolist()
    chosen = [0] * multi.size
    times = [0] * multi.size
    pos = 0
    multi_l = multi.tolist()
    for k in range(len(multi_l)):
        best = None
        best_u = -1
        best_e = -1
        for j in range(pos, pos + hi[k] - lo[k]):
            d = at[u_anchor[j]] + base_part[j]
            if best is None or d > best or (d == best and u_id[j] > best_u):
                best, best_u, best_e = d, u_id[j], e_id[j]
        pos += hi[k] - lo[k]
        at[multi_l[k]] = best
        times[k] = best
        chosen[k] = best_e
    anchor_t[multi] = times
    via[multi] = chosen


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(lo[i], hi[i])`` for every i, vectorised."""
    counts = hi - lo
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return np.repeat(lo - offsets[:-1], counts) + np.arange(offsets[-1])
