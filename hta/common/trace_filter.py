"""HTA's event filters, applied to this package's per-rank events tables.

A filter is called as ``f(df)`` or ``f(df, symbol_table)`` and returns the selected
rows. They select on the columns this package's tables have: ``iteration`` (the
``ProfilerStep`` number, -1 outside a step), ``ts``/``dur`` (integer ns), ``kind`` (the
rule table's kind of each event) and ``name``/``cat`` (symbol ids, or text after
``decode_symbol_ids``); :class:`RankFilter` needs a ``rank`` column.

Differences from HTA: :class:`TimeRangeFilter` takes µs as HTA does (``unit="ns"`` for
ns); :class:`GPUKernelFilter` keeps the GPU work of the rule table (kernels, copies,
memsets), :class:`CPUOperatorFilter` keeps what is not GPU work.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence

import pandas as pd

from hta.model.rules import GPU_KINDS, GPU_WORK_KINDS
from hta.model.trace import SymbolView

__all__ = ["CPUOperatorFilter", "CompositeFilter", "Filter", "FirstIterationFilter",
           "GPUKernelFilter", "IterationFilter", "IterationIndexFilter",
           "MemCopyEventFilter", "NameFilter", "QueryFilter", "RankFilter",
           "TimeRangeFilter"]


def _as_list(value: int | Sequence[int]) -> list[int]:
    return [int(value)] if isinstance(value, int) else [int(v) for v in value]


class Filter(ABC):
    """A callable selecting rows of an events table."""

    @abstractmethod
    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        """The selected rows of ``df``."""


class IterationFilter(Filter):
    """Events of the given profiler step numbers."""

    def __init__(self, iterations: int | Sequence[int]) -> None:
        self.iterations = _as_list(iterations)

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        return df.loc[df["iteration"].isin(self.iterations)]


class IterationIndexFilter(Filter):
    """Events of the i-th profiler steps (0 = the first step of the table; steps out of
    range are ignored)."""

    def __init__(self, iteration_index: int | Sequence[int]) -> None:
        self.iteration_index = _as_list(iteration_index)

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        steps = sorted(int(i) for i in df["iteration"].unique() if i >= 0)
        chosen = [steps[i] for i in self.iteration_index if -len(steps) <= i < len(steps)]
        return df.loc[df["iteration"].isin(chosen)]


class FirstIterationFilter(IterationIndexFilter):
    """Events of the first profiler step."""

    def __init__(self) -> None:
        super().__init__(0)


class RankFilter(Filter):
    """Rows of the given ranks (the table needs a ``rank`` column, as a concatenation of
    several ranks has)."""

    def __init__(self, ranks: int | Sequence[int]) -> None:
        self.ranks = _as_list(ranks)

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        if "rank" not in df.columns:
            raise KeyError("RankFilter needs a 'rank' column: concatenate the ranks' tables "
                           "with their rank, or pick the rank with t.get_trace(rank)")
        return df.loc[df["rank"].isin(self.ranks)]


class TimeRangeFilter(Filter):
    """Events starting at or after ``start`` and ending at or before ``end``.

    ``time_range`` is in µs like HTA's (the tables hold ns); ``unit="ns"`` takes ns.
    """

    def __init__(self, time_range: tuple[int, int], unit: str = "us") -> None:
        if unit not in ("us", "ns"):
            raise ValueError(f"unit must be 'us' or 'ns', not {unit!r}")
        scale = 1000 if unit == "us" else 1
        self.time_start = int(time_range[0]) * scale
        self.time_end = int(time_range[1]) * scale

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        return df.loc[df["ts"].ge(self.time_start) & (df["ts"] + df["dur"]).le(self.time_end)]


class NameFilter(Filter):
    """Events whose name matches a regular expression from its start (``re.match``).

    Works on text names (``s_name`` after ``decode_symbol_ids``, or a text ``name``) and
    on ids (needs the symbol table, given here or at the call).
    """

    def __init__(self, name_pattern: str, name_column: str = "name",
                 symbol_table: SymbolView | None = None) -> None:
        self.name_pattern = name_pattern
        self.name_column = name_column
        self.symbol_table = symbol_table

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        col = self.name_column
        if df[col].dtype == object:
            return df.loc[df[col].str.match(self.name_pattern)]
        table = symbol_table or self.symbol_table
        if table is None:
            decoded = f"s_{col}"
            if decoded in df.columns:
                return df.loc[df[decoded].str.match(self.name_pattern)]
            raise ValueError(f"NameFilter on ids in '{col}' needs the symbol table: "
                             "NameFilter(pattern, symbol_table=t.symbol_table)")
        pattern = re.compile(self.name_pattern)
        ids = [i for i, s in enumerate(table.get_sym_table()) if pattern.match(s)]
        return df.loc[df[col].isin(ids)]


class QueryFilter(Filter):
    """Rows matching a ``DataFrame.query`` expression."""

    def __init__(self, query_str: str) -> None:
        self.filter_query = query_str

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        return df.query(self.filter_query)


class GPUKernelFilter(Filter):
    """GPU work: kernels, memory copies and memsets (by the rule table's ``kind``)."""

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        return df.loc[df["kind"].isin(GPU_WORK_KINDS)]


class CPUOperatorFilter(Filter):
    """Events that do not run on the GPU (operators, runtime calls, annotations)."""

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        return df.loc[~df["kind"].isin(GPU_KINDS)]


class MemCopyEventFilter(Filter):
    """Memory copies (every direction), by the rule table's ``kind``."""

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        return df.loc[df["kind"].astype(str).str.startswith("memcpy")]


class CompositeFilter(Filter):
    """Several filters applied one after the other."""

    def __init__(self, filters: Sequence[Filter]) -> None:
        self.filters = list(filters)

    def __call__(self, df: pd.DataFrame, symbol_table: SymbolView | None = None
                 ) -> pd.DataFrame:
        for f in self.filters:
            df = f(df, symbol_table)
        return df
