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

from hta.model.arrays import distinct

try:  # the compiled pass (hta/analysis/whatif/_native/schedule.c), where it was built
    from hta.analysis.whatif import _schedule  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the install
    _schedule = None


def native_schedule_available() -> bool:
    """Whether the compiled schedule is built and not switched off (``HTA_NATIVE=0``)."""
    return _schedule is not None and os.environ.get("HTA_NATIVE", "1") not in ("0", "", "false")


@dataclass(frozen=True)
class Schedule:
    """Per node: its scheduled time ``t`` (ns); its binding edge ``via`` (-1: source; when
    asked for, as by default); ``root`` (when asked for): the source its chain of binding
    edges starts from."""

    t: np.ndarray
    via: np.ndarray | None
    root: np.ndarray | None = None


def schedule(num_nodes: int, src: np.ndarray, dst: np.ndarray, delay: np.ndarray,
             base: np.ndarray, chain_order: np.ndarray | None = None,
             roots: bool = False, indptr: np.ndarray | None = None,
             binding: bool = True) -> Schedule:
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
        indptr: :func:`edge_offsets` of these very ``src`` and ``dst`` (checked when it
            was made), for a caller that schedules the same edges again with other
            delays; None: made here.
        binding: give each node's binding edge ``via`` (False: ``via`` is None, for a
            caller that reads the times alone, as a prediction does: the compiled pass
            then neither allocates nor fills it, a node-sized array spared).
    """
    n = int(num_nodes)
    src = np.asarray(src, dtype=np.int64)
    delay = np.asarray(delay, dtype=np.int64)
    if indptr is None:
        indptr = edge_offsets(n, src, dst)
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return Schedule(z, z.copy() if binding else None, z.copy() if roots else None)
    if native_schedule_available():
        return _native(indptr, src, delay, base, roots, binding)
    indeg = np.diff(indptr)
    single = indeg == 1
    multi = np.flatnonzero(indeg >= 2)
    del indeg  # each n-sized temporary goes as soon as it is used: a job graph has millions
    via, anchor, total = _chains(single, indptr, src, delay, chain_order)
    anchor_t = np.asarray(base, dtype=np.int64).copy()
    root_of = np.arange(n) if roots else None  # per anchor, its root
    if multi.size:
        _multi_loop(multi, indptr, src, delay, anchor, total, anchor_t, via, root_of)
    del single, multi, indptr
    t = anchor_t[anchor]
    t += total
    return Schedule(t=t, via=via if binding else None,
                    root=root_of[anchor] if root_of is not None else None)


def edge_offsets(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Where each node's incoming edges start among edges sorted by destination (``n +
    1`` offsets: node ``v``'s are ``indptr[v]:indptr[v + 1]``), once the edges are checked
    to be what :func:`schedule` needs: each from a lower to a higher node id, sorted by
    ``dst``."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.size and not (src < dst).all():
        raise ValueError("schedule needs every edge to go from a lower to a higher node id")
    if src.size > 1 and (dst[1:] < dst[:-1]).any():
        raise ValueError("schedule needs the edges sorted by destination")
    indptr = np.zeros(int(num_nodes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=int(num_nodes)), out=indptr[1:])
    return indptr


def _chains(single: np.ndarray, indptr: np.ndarray, src: np.ndarray, delay: np.ndarray,
            chain_order: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node: its binding edge when it has a single predecessor (``via``, -1 else),
    its ``anchor`` (the node without exactly one predecessor its chain of single
    predecessors starts from: itself for such a node) and the delay ``total`` from the
    anchor's time to its own (:func:`schedule`, pure-Python engine)."""
    n = single.size
    via = np.full(n, -1, dtype=np.int64)
    via[single] = indptr[:-1][single]
    pred = np.full(n, -1, dtype=np.int64)
    pred[single] = src[via[single]]
    d_in = np.zeros(n, dtype=np.int64)
    d_in[single] = delay[via[single]]
    head, run_acc, link = _runs(single, pred, d_in, chain_order)
    jump, acc = _jumps(single & ~link, pred, d_in, head, run_acc)
    del pred, d_in, link
    anchor = jump[head]
    del jump
    total = acc[head]
    del acc, head
    total += run_acc
    return via, anchor, total


def _runs(single: np.ndarray, pred: np.ndarray, d_in: np.ndarray,
          chain_order: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of nodes each hanging from the one before it in ``chain_order`` (a segmented
    cumulative sum): per node, the ``head`` of its run, the delay ``run_acc`` from the
    head to it, and whether it hangs from the node before it (``link``)."""
    n = single.size
    ids = np.arange(n)
    order = ids if chain_order is None else np.asarray(chain_order, dtype=np.int64)
    before = np.empty(n, dtype=np.int64)
    before[order] = np.concatenate([[-1], order[:-1]])
    link = single & (pred == before)
    del before
    link_o = link[order]
    head_o = np.maximum.accumulate(np.where(link_o, 0, ids))
    del ids
    csum_o = np.cumsum(np.where(link_o, d_in[order], 0))
    del link_o
    head = np.empty(n, dtype=np.int64)
    head[order] = order[head_o]
    run_acc = np.empty(n, dtype=np.int64)
    run_acc[order] = csum_o - csum_o[head_o]
    return head, run_acc, link


def _jumps(is_chain: np.ndarray, pred: np.ndarray, d_in: np.ndarray, head: np.ndarray,
           run_acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The single-predecessor nodes not linked to the node before them (``is_chain``):
    pointer jumping to their anchor (a node without exactly one predecessor), gathering
    the delay on the way. Per node: where it jumped to (``jump``; a head of a run, whose
    own ``jump`` is its anchor) and the delay ``acc`` gathered."""
    n = is_chain.size
    jump = np.arange(n)
    acc = np.zeros(n, dtype=np.int64)
    rest = np.flatnonzero(is_chain)
    p_rest = pred[rest]
    jump[rest] = head[p_rest]
    acc[rest] = run_acc[p_rest] + d_in[rest]
    del p_rest
    active = rest[is_chain[jump[rest]]]
    del rest
    while active.size:
        nxt = jump[active]
        acc[active] += acc[nxt]
        jump[active] = jump[nxt]
        active = active[is_chain[jump[active]]]
    return jump, acc


def _native(indptr: np.ndarray, src: np.ndarray, delay: np.ndarray, base: np.ndarray,
            roots: bool, binding: bool = True) -> Schedule:
    """:func:`schedule` by the compiled pass (same answer); the binding edges and roots
    it is not asked for are not allocated (an empty array: the pass leaves them)."""
    n = indptr.size - 1
    t = np.empty(n, dtype=np.int64)
    via = np.empty(n if binding else 0, dtype=np.int64)
    root = np.empty(n if roots else 0, dtype=np.int64)
    _schedule.run(np.ascontiguousarray(indptr), np.ascontiguousarray(src),
                  np.ascontiguousarray(delay), np.ascontiguousarray(base, dtype=np.int64),
                  t, via, root)
    return Schedule(t=t, via=via if binding else None, root=root if roots else None)


def edited_times(indptr: np.ndarray, src: np.ndarray, delay: np.ndarray, keep: np.ndarray,
                 added: tuple[np.ndarray, np.ndarray, np.ndarray],
                 base: np.ndarray) -> np.ndarray:
    """The times :func:`schedule` gives the edges as a change leaves them (those of
    ``indptr`` and ``src`` where ``keep``, plus the ``added`` ``(src, dst, delay)``
    sorted by destination; every float ``delay`` rounded to the nearest integer, at
    least 0), by the compiled pass, without making that edge list: a job graph's
    edge-sized copies spared (:func:`native_schedule_available` must be true)."""
    if _schedule is None:  # pragma: no cover - callers ask native_schedule_available
        raise RuntimeError("the compiled schedule is not built")
    a_src, a_dst, a_delay = added
    t = np.empty(indptr.size - 1, dtype=np.int64)
    _schedule.edited(np.ascontiguousarray(indptr, dtype=np.int64),
                     np.ascontiguousarray(src, dtype=np.int64),
                     np.ascontiguousarray(delay, dtype=np.float64),
                     np.ascontiguousarray(keep, dtype=np.bool_).view(np.uint8),
                     np.ascontiguousarray(a_src, dtype=np.int64),
                     np.ascontiguousarray(a_dst, dtype=np.int64),
                     np.ascontiguousarray(a_delay, dtype=np.float64),
                     np.ascontiguousarray(base, dtype=np.int64), t)
    return t


#: Multi-predecessor nodes whose edges :func:`_multi_loop` turns into Python lists at a
#: time (the lists cost about 40 bytes an item: a job graph's millions at once would
#: hold hundreds of MB).
MULTI_CHUNK = 65_536


def _multi_loop(multi: np.ndarray, indptr: np.ndarray, src: np.ndarray, delay: np.ndarray,
                anchor: np.ndarray, total: np.ndarray, anchor_t: np.ndarray,
                via: np.ndarray, root_of: np.ndarray | None = None) -> None:
    """Times of the nodes with several predecessors, in id order (fills ``anchor_t`` and
    ``via`` of those nodes, and ``root_of`` when given: the source each one's binding
    edges lead back to). ``t(u) = anchor_t[anchor[u]] + total[u]``; the anchors are
    numbered compactly (the multi-predecessor nodes first, then the others, which are
    sources) so the loop only handles lists of their size, :data:`MULTI_CHUNK` nodes'
    edges at a time."""
    lo = indptr[multi]
    hi = indptr[multi + 1]
    edges = index_ranges(lo, hi)
    u = src[edges]
    u_anchor, others = _compact_anchors(multi, anchor[u], anchor_t.size)
    part = total[u] + delay[edges]
    del u
    bounds = np.r_[0, np.cumsum(hi - lo)]
    del lo, hi
    at = [0] * multi.size + anchor_t[others].tolist()
    chosen = np.empty(multi.size, dtype=np.int64)
    for k0 in range(0, multi.size, MULTI_CHUNK):
        k1 = min(k0 + MULTI_CHUNK, multi.size)
        e0, e1 = int(bounds[k0]), int(bounds[k1])
        chosen[k0:k1] = e0 + np.asarray(_bind(
            k0, (bounds[k0:k1 + 1] - e0).tolist(), u_anchor[e0:e1].tolist(),
            part[e0:e1].tolist(), at), dtype=np.int64)
    anchor_t[multi] = np.asarray(at[:multi.size], dtype=np.int64)
    via[multi] = edges[chosen]
    if root_of is not None:
        # a multi node's root is its chosen predecessor's anchor's root (anchors before it)
        m = multi.size
        root_c = list(range(m + others.size))
        for k, a in enumerate(u_anchor[chosen].tolist()):
            root_c[k] = root_c[a] if a < m else a
        nodes = np.concatenate([multi, others])
        root_of[multi] = nodes[np.asarray(root_c[:m], dtype=np.int64)]


def _compact_anchors(multi: np.ndarray, a_of_u: np.ndarray, n: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The anchors ``a_of_u`` (node ids, of ``n``) numbered compactly: the
    multi-predecessor nodes ``multi`` first (0 .. len(multi) - 1, in their order), then
    the ``others`` (sources, ascending); returns the numbers and ``others``."""
    compact = np.full(n, -1, dtype=np.int64)
    compact[multi] = np.arange(multi.size)
    others = distinct(a_of_u[compact[a_of_u] < 0])
    compact[others] = multi.size + np.arange(others.size)
    return compact[a_of_u], others


def _bind(k0: int, bounds: list[int], u_anchor: list[int], part: list[int], at: list[int]
          ) -> list[int]:
    """The times of multi-predecessor nodes ``k0 ..`` (compact numbers; ``bounds``: their
    edges' ranges in ``u_anchor`` and ``part``), written into ``at``, and the position of
    each one's binding edge in the lists: the latest ``at[u_anchor] + part``, on ties the
    later edge (the higher predecessor id)."""
    chosen = [0] * (len(bounds) - 1)
    for j in range(len(chosen)):
        a, b = bounds[j], bounds[j + 1]
        k = k0 + j
        if b - a == 2:  # most such nodes: a launch and a stream predecessor
            c0 = at[u_anchor[a]] + part[a]
            c1 = at[u_anchor[a + 1]] + part[a + 1]
            if c1 >= c0:  # ties: the later edge (the higher predecessor id)
                at[k], chosen[j] = c1, a + 1
            else:
                at[k], chosen[j] = c0, a
            continue
        cand = [at[x] + y for x, y in zip(u_anchor[a:b], part[a:b], strict=True)]
        best = max(cand)
        at[k] = best
        chosen[j] = b - 1 - cand[::-1].index(best)
    return chosen


def index_ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(lo[i], hi[i])`` for every i, vectorised."""
    counts = hi - lo
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return np.repeat(lo - offsets[:-1], counts) + np.arange(offsets[-1])
