"""A result table that also answers HTA's per-rank indexing.

HTA returns some results as ``{rank: DataFrame}``; this package returns one table with a
``rank`` column. :class:`PerRankFrame` is that table, unchanged for every DataFrame use,
except that ``result[r]`` with an int ``r`` that is not a column name returns rank ``r``'s
rows (index renumbered from 0, as HTA's per-rank frame), so ``result[0]`` works as in
HTA's notebooks. ``result.per_rank()`` gives the whole dict. Anything derived from it
(a selection, a copy, arithmetic) is a plain DataFrame.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["PerRankFrame", "per_rank_frame"]


class PerRankFrame(pd.DataFrame):
    """A DataFrame with a ``rank`` column; an int key that is no column selects a rank."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def __getitem__(self, key: Any) -> Any:
        if (isinstance(key, (int, np.integer)) and not isinstance(key, bool)
                and key not in self.columns and "rank" in self.columns):
            return self.rank_frame(int(key))
        return super().__getitem__(key)

    def rank_frame(self, rank: int) -> pd.DataFrame:
        """Rank ``rank``'s rows, index from 0; a rank without rows raises ``KeyError``."""
        ranks = pd.DataFrame.__getitem__(self, "rank")
        rows = pd.DataFrame(self.loc[ranks == rank]).reset_index(drop=True)
        if rows.empty:
            present = sorted(int(r) for r in ranks.unique())
            raise KeyError(f"no rows for rank {rank}; ranks in this result: {present}")
        return rows

    def per_rank(self) -> dict[int, pd.DataFrame]:
        """``{rank: rows}`` for every rank in the table (HTA's form)."""
        ranks = pd.DataFrame.__getitem__(self, "rank")
        return {int(r): self.rank_frame(int(r)) for r in sorted(ranks.unique())}


def per_rank_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as a :class:`PerRankFrame` when it has a ``rank`` column, else unchanged."""
    if "rank" not in df.columns:
        return df
    out = PerRankFrame(df)
    out.attrs.update(df.attrs)
    return out
