"""From ``index`` values (what links and side tables hold) to row positions.

Links between events (``parent``, ``index_correlation``, ``op_index``) and the side
tables (``memory_args``, ``op_args`` ...) name rows by their ``index`` value. That value is
the row's position right after loading, but not after rows were dropped (for example
``include_last_profiler_step=False``). :class:`RowMap` turns index values into positions in
both cases, with ``-1`` for values that name no remaining row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

NO_ROW = -1


class RowMap:
    """Positions of the rows of one events table, looked up by ``index`` value."""

    def __init__(self, events: pd.DataFrame) -> None:
        index = events["index"].to_numpy()
        n = index.shape[0]
        self.n = n
        self.identity = bool(n == 0 or (index[0] == 0 and index[-1] == n - 1
                                        and np.array_equal(index, np.arange(n))))
        if self.identity:
            self._lookup = None
        else:
            self._lookup = np.full(int(index.max()) + 1, NO_ROW, dtype=np.int64)
            self._lookup[index] = np.arange(n, dtype=np.int64)

    def positions(self, values: np.ndarray) -> np.ndarray:
        """Row position of each index value; ``-1`` for ``-1`` and for dropped rows."""
        values = np.asarray(values, dtype=np.int64)
        if self.identity:
            return np.where((values >= 0) & (values < self.n), values, NO_ROW)
        lookup = self._lookup
        assert lookup is not None
        inside = (values >= 0) & (values < lookup.shape[0])
        return np.where(inside, lookup[np.clip(values, 0, lookup.shape[0] - 1)], NO_ROW)

    def column(self, events: pd.DataFrame, name: str) -> np.ndarray:
        """A link column (``parent``, ``index_correlation``, ``op_index``) as positions."""
        return self.positions(events[name].to_numpy())


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


def ancestor_pairs(parent: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, ancestor) for every ancestor of each of ``rows``, the row itself included;
    ``parent``: the ``parent`` link as positions (:meth:`RowMap.column`)."""
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
