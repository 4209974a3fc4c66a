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

Cost: where the optional extension ``hta.analysis.whatif._schedule`` is built (a C
compiler at install), one compiled pass over the nodes in id order, O(nodes + edges):
about 15 ms for a million nodes. Without it (or with ``HTA_NATIVE=0``), chains of
single-predecessor nodes (most of a trace) are collapsed with pointer jumping in
O(n log n) vectorised steps, as :mod:`hta.analysis.critical_path.longest` does, after runs
of nodes that each hang from the one before (most of a thread or a stream) are summed with
one cumulative sum; a Python loop visits only the nodes with two or more predecessors, in
id order. Both give the same times, binding edges and roots.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

try:  # the compiled pass (hta/analysis/whatif/_native/schedule.c), where it was built
    from hta.analysis.whatif import _schedule  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the install
    _schedule = None


def native_schedule_available() -> bool:
    """Whether the compiled schedule is built and not switched off (``HTA_NATIVE=0``)."""
    return _schedule is not None and os.environ.get("HTA_NATIVE", "1") not in ("0", "", "false")


@dataclass(frozen=True)
class Schedule:
    """Per node: its scheduled time ``t`` (ns) and binding edge ``via`` (-1: source);
    ``root`` (when asked for): the source its chain of binding edges starts from."""

    t: np.ndarray
    via: np.ndarray
    root: np.ndarray | None = None


def schedule(num_nodes: int, src: np.ndarray, dst: np.ndarray, delay: np.ndarray,
             base: np.ndarray, chain_order: np.ndarray | None = None,
             roots: bool = False) -> Schedule:
    """Earliest-start times of a DAG given with ``src < dst`` on every edge.

    Args:
        num_nodes: node ids are ``0 .. num_nodes - 1``.
        src, dst: edge endpoints (int64), sorted by ``dst``, then ``src``.
        delay: per edge, the time (ns) from the start of ``src`` to the earliest start of
            ``dst`` that the edge allows.
        base: per node, the time of a node without predecessors.
        chain_order: a permutation of the node ids in which chains of single-predecessor
            nodes mostly follow one another (each rank's nodes together, for a job graph
            whose ids interleave the ranks by time); None: the ids' order. Only how fast.
        roots: also give each node's ``root``, the source its binding edges lead back to.
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
        return Schedule(z, z.copy(), z.copy() if roots else None)
    indeg = np.bincount(dst, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(indeg, out=indptr[1:])
    if native_schedule_available():
        return _native(indptr, src, delay, base, roots)
    single = indeg == 1
    via = np.full(n, -1, dtype=np.int64)
    via[single] = indptr[:-1][single]
    pred = np.full(n, -1, dtype=np.int64)
    pred[single] = src[via[single]]
    d_in = np.zeros(n, dtype=np.int64)
    d_in[single] = delay[via[single]]
    ids = np.arange(n)
    # runs of nodes each hanging from the one before it in chain_order: a segmented
    # cumulative sum
    order = ids if chain_order is None else np.asarray(chain_order, dtype=np.int64)
    before = np.empty(n, dtype=np.int64)
    before[order] = np.concatenate([[-1], order[:-1]])
    link = single & (pred == before)
    link_o = link[order]
    head_o = np.maximum.accumulate(np.where(link_o, 0, ids))
    csum_o = np.cumsum(np.where(link_o, d_in[order], 0))
    head = np.empty(n, dtype=np.int64)
    head[order] = order[head_o]
    run_acc = np.empty(n, dtype=np.int64)
    run_acc[order] = csum_o - csum_o[head_o]
    # the other single-predecessor nodes: pointer jumping to their anchor (a node without
    # exactly one predecessor), gathering the delay on the way
    jump = ids.copy()
    acc = np.zeros(n, dtype=np.int64)
    rest = np.flatnonzero(single & ~link)
    p_rest = pred[rest]
    jump[rest] = head[p_rest]
    acc[rest] = run_acc[p_rest] + d_in[rest]
    is_chain = single & ~link
    active = rest[is_chain[jump[rest]]]
    while active.size:
        nxt = jump[active]
        acc[active] += acc[nxt]
        jump[active] = jump[nxt]
        active = active[is_chain[jump[active]]]
    anchor = jump[head]
    total = acc[head] + run_acc
    anchor_t = np.asarray(base, dtype=np.int64).copy()
    multi = np.flatnonzero(indeg >= 2)
    root_of = ids.copy()  # per anchor (a source or a multi-predecessor node), its root
    if multi.size:
        _multi_loop(multi, indptr, src, delay, anchor, total, anchor_t, via,
                    root_of if roots else None)
    return Schedule(t=anchor_t[anchor] + total, via=via,
                    root=root_of[anchor] if roots else None)


def _native(indptr: np.ndarray, src: np.ndarray, delay: np.ndarray, base: np.ndarray,
            roots: bool) -> Schedule:
    """:func:`schedule` by the compiled pass (same answer)."""
    n = indptr.size - 1
    t = np.empty(n, dtype=np.int64)
    via = np.empty(n, dtype=np.int64)
    root = np.empty(n, dtype=np.int64)
    _schedule.run(np.ascontiguousarray(indptr), np.ascontiguousarray(src),
                  np.ascontiguousarray(delay), np.ascontiguousarray(base, dtype=np.int64),
                  t, via, root)
    return Schedule(t=t, via=via, root=root if roots else None)


def _multi_loop(multi: np.ndarray, indptr: np.ndarray, src: np.ndarray, delay: np.ndarray,
                anchor: np.ndarray, total: np.ndarray, anchor_t: np.ndarray,
                via: np.ndarray, root_of: np.ndarray | None = None) -> None:
    """Times of the nodes with several predecessors, in id order (fills ``anchor_t`` and
    ``via`` of those nodes, and ``root_of`` when given: the source each one's binding
    edges lead back to). ``t(u) = anchor_t[anchor[u]] + total[u]``; the anchors are
    numbered compactly (the multi-predecessor nodes first, then the others, which are
    sources) so the loop only handles lists of their size."""
    lo = indptr[multi]
    hi = indptr[multi + 1]
    edges = index_ranges(lo, hi)
    u = src[edges]
    a_of_u = anchor[u]
    compact = np.full(anchor_t.size, -1, dtype=np.int64)
    compact[multi] = np.arange(multi.size)
    others = np.unique(a_of_u[compact[a_of_u] < 0])
    compact[others] = multi.size + np.arange(others.size)
    u_anchor = compact[a_of_u].tolist()
    part = (total[u] + delay[edges]).tolist()
    bounds = np.r_[0, np.cumsum(hi - lo)].tolist()
    at = [0] * multi.size + anchor_t[others].tolist()
    chosen = [0] * multi.size
    for k in range(multi.size):
        a, b = bounds[k], bounds[k + 1]
        if b - a == 2:  # most such nodes: a launch and a stream predecessor
            c0 = at[u_anchor[a]] + part[a]
            c1 = at[u_anchor[a + 1]] + part[a + 1]
            if c1 >= c0:  # ties: the later edge (the higher predecessor id)
                at[k], chosen[k] = c1, a + 1
            else:
                at[k], chosen[k] = c0, a
            continue
        cand = [at[x] + y for x, y in zip(u_anchor[a:b], part[a:b], strict=True)]
        best = max(cand)
        at[k] = best
        chosen[k] = b - 1 - cand[::-1].index(best)
    anchor_t[multi] = np.asarray(at[:multi.size], dtype=np.int64)
    via[multi] = edges[np.asarray(chosen, dtype=np.int64)]
    if root_of is not None:
        # a multi node's root is its chosen predecessor's anchor's root (anchors before it)
        m = multi.size
        root_c = list(range(m + others.size))
        for k in range(m):
            a = u_anchor[chosen[k]]
            root_c[k] = root_c[a] if a < m else a
        nodes = np.concatenate([multi, others])
        root_of[multi] = nodes[np.asarray(root_c[:m], dtype=np.int64)]


def index_ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(lo[i], hi[i])`` for every i, vectorised."""
    counts = hi - lo
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return np.repeat(lo - offsets[:-1], counts) + np.arange(offsets[-1])
