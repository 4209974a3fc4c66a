"""HTA's ``TraceSymbolTable``: a symbol table a user can build (``add_symbols``).

A loaded trace's table is ``t.symbol_table`` (a read-only
:class:`hta.model.trace.SymbolView`); this class is the same view over lists the caller
fills, for frames built by hand (the ids of a ``name`` column and the names they stand
for), as HTA's notebooks and tests do::

    table = TraceSymbolTable()
    table.add_symbols(["aten::mm", "nccl:all_reduce"])
    NameFilter("aten::")(df, table)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from hta.model.trace import SymbolView

__all__ = ["TraceSymbolTable"]


class TraceSymbolTable(SymbolView):
    """A symbol table that grows: each new name gets the next id.

    Args:
        symbols: names to add, in order (ids 0, 1, ...).
    """

    def __init__(self, symbols: Iterable[str] = ()) -> None:
        object.__setattr__(self, "sym_table", [])
        object.__setattr__(self, "sym_index", {})
        self.add_symbols(symbols)

    def __hash__(self) -> int:
        return id(self)

    def is_empty(self) -> bool:
        """Whether the table holds no symbol."""
        return not self.sym_table

    def add_symbols(self, symbols: Iterable[str]) -> None:
        """Add the names not yet in the table, in order; a name already there keeps its id."""
        for name in symbols:
            if not isinstance(name, str):
                raise TypeError(f"a symbol is a str, got {type(name).__name__}: {name!r}")
            if name not in self.sym_index:
                self.sym_index[name] = len(self.sym_table)
                self.sym_table.append(name)

    def add_symbols_mp(self, symbols_list: Iterable[Iterable[str]]) -> None:
        """Add several lists of names (HTA spreads them over processes; adding names is
        cheap next to that, so here they are added in order, in this process)."""
        for symbols in symbols_list:
            self.add_symbols(symbols)

    def find_matches(self, patterns: Sequence[str]) -> list[int]:
        """Ids of the symbols containing any of the given substrings."""
        return [self.sym_index[s] for s in self.find_matched_symbols(list(patterns))]

    def get_symbol_names(self, symbol_ids: Iterable[int]) -> dict[int, str]:
        """Id -> name of the given ids (ids outside the table are left out)."""
        n = len(self.sym_table)
        return {int(i): self.sym_table[int(i)] for i in symbol_ids if 0 <= int(i) < n}

    def get_sym_table_series(self) -> pd.Series:
        """Id -> name, as a Series indexed by id."""
        return pd.Series(self.sym_table, dtype=object)

    def get_sym_index_series(self) -> pd.Series:
        """Name -> id, as a Series indexed by name."""
        return pd.Series(self.sym_index, dtype="int64")

    def to_csv_file(self, file_path: str | os.PathLike[str]) -> None:
        """Write the names, one row each in id order, to a CSV file with a ``symbol``
        column (what :meth:`from_csv_file` reads)."""
        pd.DataFrame({"symbol": self.sym_table}).to_csv(file_path, index=True)

    #: HTA's name of :meth:`to_csv_file`.
    _to_csv_file = to_csv_file

    @staticmethod
    def from_csv_file(file_path: str | os.PathLike[str]) -> TraceSymbolTable:
        """A table of the names in a CSV file's ``symbol`` column, in row order."""
        if not os.path.exists(file_path):
            raise FileNotFoundError(f"symbol table file not found: {file_path}")
        frame = pd.read_csv(file_path, keep_default_na=False)
        if "symbol" not in frame.columns:
            raise ValueError(f"{file_path}: no 'symbol' column (columns: "
                             f"{list(frame.columns)})")
        return TraceSymbolTable(str(v) for v in frame["symbol"])

    @staticmethod
    def combine_symbol_tables(tables: Iterable[SymbolView]) -> TraceSymbolTable:
        """One table holding every name of ``tables``: the first table's ids kept, the
        names new in each later table appended."""
        out = TraceSymbolTable()
        for table in tables:
            out.add_symbols(table.get_sym_table())
        return out

    @staticmethod
    def clone(symbol_table: SymbolView) -> TraceSymbolTable:
        """A copy of ``symbol_table`` with the same ids; adding to one leaves the other."""
        return TraceSymbolTable(symbol_table.get_sym_table())

    @staticmethod
    def create_from_df(df: pd.DataFrame) -> TraceSymbolTable:
        """A table of the text in ``df``'s ``cat`` and ``name`` columns (the categories
        first, then the names, each in order of first appearance). ``ValueError`` when
        either column is missing or does not hold text."""
        for col in ("cat", "name"):
            if col not in df.columns:
                raise ValueError(f"create_from_df needs 'name' and 'cat' columns of text; "
                                 f"'{col}' is missing")
            if not pd.api.types.is_string_dtype(df[col]):
                raise ValueError(f"create_from_df needs 'name' and 'cat' columns of text; "
                                 f"'{col}' holds {df[col].dtype}")
        return TraceSymbolTable([*pd.unique(df["cat"]), *pd.unique(df["name"])])

    @staticmethod
    def create_from_symbol_id_map(symbol_id_map: Mapping[str, int]) -> TraceSymbolTable:
        """A table giving each name its id in ``symbol_id_map``; ids the map skips get the
        placeholder name ``Undefined-<id>``."""
        if not symbol_id_map:
            return TraceSymbolTable()
        by_id = {int(i): name for name, i in symbol_id_map.items()}
        if min(by_id) < 0:
            raise ValueError(f"symbol ids start at 0; got {min(by_id)}")
        return TraceSymbolTable(by_id.get(i, f"Undefined-{i}") for i in range(max(by_id) + 1))

    def encode_df(self, df: pd.DataFrame) -> None:
        """Replace the text in ``df``'s ``name`` and ``cat`` columns by ids, in place;
        ``KeyError`` names a text the table does not hold."""
        for col in ("name", "cat"):
            if col in df.columns and pd.api.types.is_string_dtype(df[col]):
                unknown = sorted(set(df[col]) - set(self.sym_index))
                if unknown:
                    raise KeyError(f"'{col}' holds names the symbol table lacks: "
                                   f"{unknown[:5]}; add them first (add_symbols)")
                df[col] = df[col].map(self.sym_index).astype("int64")

    def decode_df(self, df: pd.DataFrame, create_new_columns: bool = True) -> None:
        """Write the text of the ids in ``df``'s ``name`` and ``cat`` columns, in place:
        into ``s_name`` / ``s_cat`` (or over the ids with ``create_new_columns=False``)."""
        for col in ("name", "cat"):
            if col in df.columns and pd.api.types.is_integer_dtype(df[col]):
                target = f"s_{col}" if create_new_columns else col
                df[target] = df[col]
                self.add_symbols_to_trace_df(df, target)

    def update_encoded_df(self, df: pd.DataFrame, old_symbol_table: SymbolView) -> None:
        """Re-encode ``df``'s ``name`` and ``cat`` ids, written with ``old_symbol_table``,
        with this table's ids, in place (every name must be in this table)."""
        old = old_symbol_table.get_sym_table()
        for col in ("cat", "name"):
            if col in df.columns:
                df[col] = [self.sym_index[old[int(i)]] for i in df[col]]
