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

from collections.abc import Iterable, Sequence

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

    def find_matches(self, patterns: Sequence[str]) -> list[int]:
        """Ids of the symbols containing any of the given substrings."""
        return [self.sym_index[s] for s in self.find_matched_symbols(list(patterns))]

    def get_symbol_names(self, symbol_ids: Iterable[int]) -> dict[int, str]:
        """Id -> name of the given ids (ids outside the table are left out)."""
        n = len(self.sym_table)
        return {int(i): self.sym_table[int(i)] for i in symbol_ids if 0 <= int(i) < n}
