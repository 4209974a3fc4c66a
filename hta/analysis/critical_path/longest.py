"""Longest path in a node-weighted DAG whose node numbering is a topological order.

The graph is given as edge arrays with every edge going from a lower to a higher node
id (the critical path graph numbers its nodes that way, see :mod:`.graph`). Every edge
into node ``v`` has the same weight ``w(v)``, so the recurrence is

    dist(v) = 0                                   if v has no predecessor
    dist(v) = w(v) + max(dist(u) for u -> v)      otherwise

Ties go to the predecessor with the highest id, i.e. the latest one in time: the one the
node really waited for. Example: edges 0->1, 0->2, 1->2 with w = [0, 5, 1] give
dist = [0, 5, 6] and the path 0, 1, 2.

Cost: linear in nodes plus edges. Chains of single-predecessor nodes (most of a trace:
CPU threads between launches, GPU events) are collapsed with pointer jumping in
O(n log n) vectorised steps; a Python loop then visits only the nodes with two or more
predecessors, in id order, and one walk back recovers the path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LongestPath:
    """``dist`` and ``pred`` per node, and the path (node ids, in order)."""

    dist: np.ndarray
    pred: np.ndarray
    path: np.ndarray


def longest_path(num_nodes: int, src: np.ndarray, dst: np.ndarray,
                 weight: np.ndarray) -> LongestPath:
    """Longest path of a DAG given with ``src < dst`` for every edge.

    Args:
        num_nodes: number of nodes, ids ``0 .. num_nodes - 1``.
        src, dst: edge endpoints (int64), sorted by ``dst``.
        weight: ``w(v)`` per node (int64, >= 0), the weight of every edge into ``v``.

    Returns:
        :class:`LongestPath`; ``path`` ends at the node with the largest ``dist`` (the
        latest such node on ties) and is empty when there are no nodes.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.size and not (src < dst).all():
        raise ValueError("longest_path needs every edge to go from a lower to a higher node "
                         "id (a topological numbering)")
    if src.size > 1 and (np.diff(dst) < 0).any():
        order = np.argsort(dst, kind="stable")
        src, dst = src[order], dst[order]
    n = int(num_nodes)
    weight = np.asarray(weight, dtype=np.int64)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return LongestPath(empty, empty.copy(), empty.copy())
    indeg = np.bincount(dst, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(indeg, out=indptr[1:])

    pred, jump, acc = _collapse_chains(n, src, indptr, indeg, weight)
    anchor_dist = _anchor_distances(n, src, indptr, indeg, weight, pred, jump, acc)
    dist = anchor_dist[jump] + acc
    return LongestPath(dist=dist, pred=pred, path=_walk_back(pred, dist))


def _collapse_chains(n: int, src: np.ndarray, indptr: np.ndarray, indeg: np.ndarray,
                     weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Single-predecessor nodes inherit from their predecessor: collapse the chains.

    Returns ``(pred, jump, acc)``: the predecessor of single-predecessor nodes (-1 for
    others), each node's anchor (a node without exactly one predecessor) and the weight
    gathered from the anchor (exclusive) to the node (inclusive).
    """
    single = indeg == 1
    pred = np.full(n, -1, dtype=np.int64)
    pred[single] = src[indptr[:-1][single]]
    jump = np.where(single, pred, np.arange(n))
    acc = np.where(single, weight, 0)
    active = np.flatnonzero(single)
    while active.size:
        nxt = jump[active]
        acc[active] += acc[nxt]
        jump[active] = jump[nxt]
        active = active[single[jump[active]]]
    return pred, jump, acc


def _anchor_distances(n: int, src: np.ndarray, indptr: np.ndarray, indeg: np.ndarray,
                      weight: np.ndarray, pred: np.ndarray, jump: np.ndarray,
                      acc: np.ndarray) -> np.ndarray:
    """Distances of the anchors (0 for sources); sets ``pred`` of the nodes with several
    predecessors (the latest one on ties)."""
    anchor_dist = np.zeros(n, dtype=np.int64)
    multi = np.flatnonzero(indeg >= 2)
    if multi.size:
        # the edges into multi-predecessor nodes, grouped by destination (src is dst-sorted)
        counts = indeg[multi]
        offsets = np.zeros(multi.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        edge = np.repeat(indptr[multi] - offsets[:-1], counts) + np.arange(offsets[-1])
        u = src[edge]
        compact = np.full(n, -1, dtype=np.int64)
        compact[multi] = np.arange(multi.size)
        # dist(u) = dist(anchor(u)) + acc(u); a source anchor has dist 0
        u_anchor = compact[jump[u]].tolist()
        u_acc = acc[u].tolist()
        u_id = u.tolist()
        off = offsets.tolist()
        w_multi = weight[multi].tolist()
        ad = [0] * multi.size
        chosen = [0] * multi.size
        for k in range(multi.size):
            best = -1
            best_u = -1
            for j in range(off[k], off[k + 1]):
                ca = u_anchor[j]
                d = (ad[ca] if ca >= 0 else 0) + u_acc[j]
                if d > best or (d == best and u_id[j] > best_u):
                    best = d
                    best_u = u_id[j]
            ad[k] = best + w_multi[k]
            chosen[k] = best_u
        anchor_dist[multi] = ad
        pred[multi] = chosen
    return anchor_dist


def _walk_back(pred: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """The path ending at the node with the largest ``dist`` (the latest on ties)."""
    end = int(np.flatnonzero(dist == dist.max())[-1])
    pred_l = pred.tolist()
    path = []
    v = end
    while v >= 0:
        path.append(v)
        v = pred_l[v]
    path.reverse()
    return np.asarray(path, dtype=np.int64)
