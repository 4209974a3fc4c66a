"""What the decoders write decoded columns into.

Both decoders (the native scanner's :class:`~hta.kineto.native.Builder` and the
pure-Python one in :mod:`hta.kineto.pydecode`) and the side-table builders fill one
accumulator per piece of a file. They see it through this protocol, so neither needs
to import the module that implements it (:class:`hta.kineto.pydecode.Accumulator`).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from hta.kineto.columns import Table
from hta.kineto.symbols import SymbolTable


class ColumnSink(Protocol):
    """The accumulator of one decoded piece: interned symbols, columns, side tables."""

    symbols: SymbolTable
    warnings: list[str]
    kernel_cats: set[str]
    memory_cats: set[str]
    op_cats: set[str]
    sync_cats: set[str]
    missing_ts: int

    def ids_column(self, values: list[Any]) -> np.ndarray:
        """Stable ids of pid/tid values (names get negative ids)."""

    def _id_of(self, value: Any) -> int:
        """The id of one pid/tid value."""

    def _rows_for(self, cats: set[str], cat_ids: np.ndarray) -> np.ndarray:
        """Positions of the rows whose category is one of ``cats``."""

    def add_table(self, name: str, table: Table, keep: np.ndarray | None = None) -> None:
        """Append rows to side table ``name``."""

    def add_complete(self, dur_us: np.ndarray, columns: dict[str, np.ndarray]) -> np.ndarray:
        """Append complete events; returns their row ids."""

    def add_phase(self, group: str, decoder: Any, events: Any, count: int) -> None:
        """Add the events of one phase group."""
