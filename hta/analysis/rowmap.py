"""Walks up the ``parent`` links of one rank's events.

The ``parent`` link as row positions comes from :meth:`hta.model.trace.RankTrace.link`
(``index`` is the row's position; -1: no parent); these helpers follow it upwards for
many rows at once.
"""

from __future__ import annotations

import numpy as np


def has_marked_ancestor(parent: np.ndarray, rows: np.ndarray, mark: np.ndarray
                        ) -> np.ndarray:
    """Per row of ``rows``: whether a strict ancestor (``parent`` as positions) is marked
    in ``mark`` (a bool per position). Each row's walk up stops at its first marked
    ancestor, so rows whose parent is marked cost one step."""
    found = np.zeros(rows.size, dtype=bool)
    anc = parent[rows]
    live = anc >= 0
    while live.any():
        safe = np.where(live, anc, 0)
        found |= live & mark[safe]
        anc = np.where(live & ~found, parent[safe], -1)
        live = anc >= 0
    return found


def nearest_marked_ancestor(parent: np.ndarray, rows: np.ndarray, mark: np.ndarray
                            ) -> np.ndarray:
    """Per row of ``rows`` (-1 allowed: none): the position of its innermost strict
    ancestor marked in ``mark`` (a bool per position), -1 when none is."""
    found = np.full(rows.size, -1, dtype=np.int64)
    anc = np.where(rows >= 0, parent[np.clip(rows, 0, None)], -1)
    live = anc >= 0
    while live.any():
        safe = np.where(live, anc, 0)
        hit = live & mark[safe]
        found[hit] = safe[hit]
        anc = np.where(live & ~hit, parent[safe], -1)
        live = anc >= 0
    return found


def ancestor_pairs(parent: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, ancestor) for every ancestor of each of ``rows``, the row itself included;
    ``parent``: the ``parent`` link as positions
    (:meth:`~hta.model.trace.RankTrace.link`)."""
    out_row, out_anc = [rows], [rows]
    cur = parent[rows]
    live = cur >= 0
    base = rows
    while live.any():
        base, cur = base[live], cur[live]
        out_row.append(base)
        out_anc.append(cur)
        cur = parent[cur]
        live = cur >= 0
    return np.concatenate(out_row), np.concatenate(out_anc)
