"""A rank's side-table columns as arrays, converted once per rank.

The collective args (``collective_args``) are read by the collective table, the
communication kernels and the straggler matching, each for a few columns of the rows of
its kernels. Taking those rows out of the table (a ``take`` per Arrow column) and turning
each text column into Python strings cost more than the rest of each reader; here each
column is converted once per rank (:func:`hta.model.derived.derived`) and the readers
index the arrays.
"""

from __future__ import annotations

import numpy as np

from hta.model.derived import derived
from hta.model.trace import RankTrace


def side_text(rt: RankTrace, table: str, column: str) -> np.ndarray:
    """Column ``column`` of side table ``table``, one Python string per row (as
    ``astype(str)`` gives them: a missing value is ``"nan"``), read-only."""
    return derived(rt, ("side_text", table, column),
                   lambda: rt.tables[table][column].astype(str).to_numpy(dtype=object))


def side_strings(rt: RankTrace, table: str, column: str) -> np.ndarray:
    """Column ``column`` of side table ``table``, one Python string per row with ``""``
    where the value is missing (the recorded shapes of ``op_args``), read-only."""
    return derived(rt, ("side_strings", table, column),
                   lambda: rt.tables[table][column].to_numpy(dtype=object, na_value=""))


def side_number(rt: RankTrace, table: str, column: str) -> np.ndarray:
    """Column ``column`` of side table ``table`` as float64 (missing: NaN), read-only."""
    return derived(rt, ("side_number", table, column),
                   lambda: rt.tables[table][column].to_numpy(dtype=float))


__all__ = ["side_number", "side_strings", "side_text"]
