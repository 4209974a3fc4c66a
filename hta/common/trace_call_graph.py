"""HTA's ``CallGraph``, over the call-stack links this package's loader computes.

Every events table already holds each event's ``parent`` (row of the enclosing event on
its thread, -1 at the top) and ``depth``. :class:`CallGraph` answers stack questions from
those columns; it computes nothing of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["CallGraph"]


class CallGraph:
    """Call stacks of the given ranks of a loaded trace (an
    :class:`hta.common.trace.Trace` or ``analyzer.t``)."""

    def __init__(self, trace: Any, ranks: Iterable[int] | None = None) -> None:
        self.trace = trace
        self.ranks = list(ranks) if ranks is not None else list(trace.get_ranks())
        self._parents = {r: trace.get_trace(r)["parent"].to_numpy() for r in self.ranks}

    def _parent(self, rank: int) -> np.ndarray:
        if rank not in self._parents:
            raise KeyError(f"rank {rank} is not in this call graph; ranks: {self.ranks}")
        return self._parents[rank]

    def get_path_to_root(self, index: int, rank: int | None = None) -> list[int]:
        """Rows from ``index`` up to its outermost enclosing event."""
        parent = self._parent(self.ranks[0] if rank is None else rank)
        path = [int(index)]
        while parent[path[-1]] >= 0:
            path.append(int(parent[path[-1]]))
        return path

    def get_stack_of_node(self, index: int, rank: int | None = None) -> list[int]:
        """Rows enclosing ``index``, outermost first, ending with ``index``."""
        return self.get_path_to_root(index, rank)[::-1]

    def get_children(self, index: int, rank: int | None = None) -> list[int]:
        """Rows directly under ``index``."""
        parent = self._parent(self.ranks[0] if rank is None else rank)
        return [int(i) for i in np.flatnonzero(parent == index)]

    def get_call_stack_df(self, rank: int) -> pd.DataFrame:
        """``index``, ``parent`` and ``depth`` of the rank's events."""
        return self.trace.get_trace(rank)[["index", "parent", "depth"]].copy()
