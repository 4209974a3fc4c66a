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

from hta.model.derived import derived
from hta.model.trace import RankTrace


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
    (:func:`side_text` with missing values as ``""``), and the code of ``""`` (a code no
    row has when no row is empty): equal texts, equal codes; read-only, once per rank."""
    def convert() -> tuple[np.ndarray, int]:
        codes, uniq = pd.factorize(side_text(rt, table, column, missing=""))
        codes.flags.writeable = False
        found = np.flatnonzero(np.asarray(uniq, dtype=object) == "")
        return codes, int(found[0]) if found.size else len(uniq)

    return derived(rt, ("side_codes", table, column), convert, small=False)


def side_number(rt: RankTrace, table: str, column: str) -> np.ndarray:
    """Column ``column`` of side table ``table`` as float64 (missing: NaN), read-only."""
    return derived(rt, ("side_number", table, column),
                   lambda: rt.tables[table][column].to_numpy(dtype=float), small=False)


__all__ = ["side_codes", "side_number", "side_text"]
