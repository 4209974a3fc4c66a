"""A rank's side-table columns as arrays, converted once per rank.

The collective args (``collective_args``) and the recorded shapes (``op_args``) are read
by several analyses, each for a few columns of the rows of its events (the collective
table, the communication kernels, the operator calls, the one-time costs). Taking those
rows out of the table (a ``take`` per Arrow column) and turning each text column into
Python strings cost more than the rest of each reader; here each column is converted once
per rank (:func:`hta.model.derived.derived`) and the readers index the arrays. They are
steps on the way to a rank's tables, not kept beyond the ranks being visited nor carried
back from workers (``small=False``): the tables made from them are.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hta.model.derived import derived
from hta.model.trace import RankTrace


def side_slots(rt: RankTrace, table: str) -> tuple[pd.DataFrame, np.ndarray]:
    """:meth:`~hta.model.trace.RankTrace.side_row_of_event` (the table, and per event its
    row of it, -1 for none), the slots read-only and made once per rank while its events
    table is the same (:func:`hta.model.derived.derived`; a side table is replaced only
    with the events, as :meth:`~hta.model.trace.RankTrace.filter_rows` does, or with a new
    generation): a rank's rules ask for them several times."""
    frame, _ = rt.side_rows(table)
    return frame, derived(rt, ("side_slots", table), lambda: rt.side_row_of_event(table)[1],
                          small=False)


def side_text(rt: RankTrace, table: str, column: str, missing: str | None = None
              ) -> np.ndarray:
    """Column ``column`` of side table ``table``, one Python string per row, read-only. A
    missing value is ``missing``, or with ``None`` the text ``astype(str)`` gives it
    (``"nan"``)."""
    def convert() -> np.ndarray:
        values = rt.tables[table][column]
        if missing is None:
            return values.astype(str).to_numpy(dtype=object)
        return values.to_numpy(dtype=object, na_value=missing)

    return derived(rt, ("side_text", table, column, missing), convert, small=False)


def side_codes(rt: RankTrace, table: str, column: str) -> tuple[np.ndarray, int]:
    """Column ``column`` of side table ``table`` as one integer per distinct text
    (:func:`side_text` with missing values as ``""``), numbered by first appearance, and
    the code of ``""`` (a code no row has when no row is empty): equal texts, equal codes;
    read-only, once per rank. Texts held by Arrow are encoded there, without a Python
    string each."""
    def convert() -> tuple[np.ndarray, int]:
        values = rt.tables[table][column].array
        if isinstance(values, pd.arrays.ArrowStringArray):
            arrow = pa.array(values)
            if isinstance(arrow, pa.ChunkedArray):
                arrow = arrow.combine_chunks()
            encoded = pc.dictionary_encode(pc.fill_null(arrow, ""))
            codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            uniq = encoded.dictionary.to_numpy(zero_copy_only=False)
        else:
            codes, uniq = pd.factorize(side_text(rt, table, column, missing=""))
        codes.flags.writeable = False
        found = np.flatnonzero(np.asarray(uniq, dtype=object) == "")
        return codes, int(found[0]) if found.size else len(uniq)

    return derived(rt, ("side_codes", table, column), convert, small=False)


def side_text_of(rt: RankTrace, table: str, column: str, rows: np.ndarray,
                 missing: str) -> np.ndarray:
    """:func:`side_text` of some rows of the table only (``rows``), converted alone: for a
    reader of a few rows, where the whole column's strings would cost more than the
    reader."""
    values = rt.tables[table][column].array.take(np.asarray(rows, dtype=np.int64))
    return values.to_numpy(dtype=object, na_value=missing)


def side_number(rt: RankTrace, table: str, column: str) -> np.ndarray:
    """Column ``column`` of side table ``table`` as float64 (missing: NaN), read-only."""
    return derived(rt, ("side_number", table, column),
                   lambda: rt.tables[table][column].to_numpy(dtype=float), small=False)


__all__ = ["side_codes", "side_number", "side_slots", "side_text", "side_text_of"]
