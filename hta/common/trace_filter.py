"""HTA's event filters, for this package's per-rank events tables and for any frame.

A filter is called as ``f(df)`` or ``f(df, symbol_table)`` and returns the selected rows
(the frame's own index kept). Filters behave as HTA's (``hta.common.trace_filter`` of
HTA 0.5 and main):

- a frame without the column a filter needs comes back unchanged, with a warning naming
  the column (HTA's rule: a filter never breaks a chain of filters);
- a bad argument raises when the filter is made: ``TypeError`` for a value of the wrong
  type (``IterationFilter("b")``), ``ValueError`` for a wrong value (a time range whose
  start is after its end), each saying what to pass;
- names are matched with ``re.match`` (from the start), on text (a ``name`` column of
  text, or ``s_name`` after ``decode_symbol_ids``) or on symbol ids with a symbol table
  (given to the filter or at the call; any object with ``get_sym_table()``,
  ``get_sym_id_map()`` or ``sym_index``).

Where this differs from HTA, on purpose:

- :class:`TimeRangeFilter` takes µs, as HTA. This package's tables hold integer ns (they
  have a ``kind`` column); on them the µs range is compared in ns. Any other frame is
  compared in the range's own unit, as HTA does. ``unit="ns"`` gives the range in ns.
- :class:`IterationIndexFilter` counts negative indices from the end (``-1``: the last
  step); HTA selects nothing for them.
- A filter that selects nothing returns the frame's empty slice, its columns kept; HTA
  returns ``pd.DataFrame()`` with no columns.
- :class:`GPUKernelFilter` on this package's tables keeps GPU work by the rule table's
  ``kind`` (kernels, copies, memsets); HTA keeps every row with a stream and a correlation
  (GPU user annotations too). On other frames it applies HTA's rule. With a symbol table,
  both add the ``Event Sync`` / ``Context Sync`` records, as HTA does.
- :class:`MemCopyEventFilter` without a copy type keeps every copy; a type
  (``"Memcpy HtoD"``) keeps the copies named so, or named so followed by the memory kinds
  in parentheses (``Memcpy HtoD (Pageable -> Device)``, Kineto's current names).
"""

from __future__ import annotations

import logging
import numbers
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import pandas as pd

from hta.model.rules import GPU_KINDS, GPU_WORK_KINDS
from hta.model.trace import text_name_columns
from hta.model.vocabulary import whole_numbers

logger = logging.getLogger(__name__)

__all__ = ["CPUOperatorFilter", "CompositeFilter", "Filter", "FirstIterationFilter",
           "GPUKernelFilter", "IterationFilter", "IterationIndexFilter",
           "MemCopyEventFilter", "NameFilter", "NameIdColumnFilter",
           "NameStringColumnFilter", "QueryFilter", "RankFilter", "TimeRangeFilter",
           "ZeroDurationFilter"]

#: The kinds of memory copies (every direction).
COPY_KINDS = tuple(k for k in GPU_WORK_KINDS if k.startswith("memcpy"))
#: Names of the device-wide synchronisation records HTA counts as GPU events.
SYNC_EVENT_NAMES = ("Event Sync", "Context Sync")


def _missing(df: pd.DataFrame, column: str, who: str) -> bool:
    """Whether ``df`` lacks ``column``; if so, warn that ``who`` keeps every row."""
    if column in df.columns:
        return False
    logger.warning("%s: the frame has no '%s' column; every row is kept", who, column)
    return True


def _nothing(df: pd.DataFrame) -> pd.DataFrame:
    """The empty slice of ``df``: no rows, the same columns."""
    return df.iloc[0:0]


def _is_package_table(df: pd.DataFrame) -> bool:
    """Whether ``df`` is (a slice of) this package's events table: it has ``kind``."""
    return "kind" in df.columns


def _sym_index(table: Any) -> dict[str, int]:
    """Name -> id of a symbol table (``t.symbol_table``, ours or HTA's)."""
    index = getattr(table, "sym_index", None)
    if isinstance(index, dict):
        return index
    if hasattr(table, "get_sym_id_map"):
        return dict(table.get_sym_id_map())
    raise TypeError(f"symbol_table must be a symbol table (t.symbol_table), got "
                    f"{type(table).__name__}")


def _ids_matching(table: Any, pattern: str) -> list[int]:
    """Ids of the symbols matching ``pattern`` (``re.match``)."""
    regex = re.compile(pattern)
    return [i for s, i in _sym_index(table).items() if regex.match(s)]


def _is_text(series: pd.Series) -> bool:
    return bool(pd.api.types.is_string_dtype(series))


class Filter(ABC):
    """A callable selecting rows of an events table."""

    @abstractmethod
    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        """The selected rows of ``df``."""


class IterationFilter(Filter):
    """Events of the given profiler step numbers (the ``iteration`` column)."""

    def __init__(self, iterations: int | Sequence[int]) -> None:
        self.iterations = whole_numbers(iterations, "iterations")

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        if _missing(df, "iteration", "IterationFilter"):
            return df
        return df.loc[df["iteration"].isin(self.iterations)]


class IterationIndexFilter(Filter):
    """Events of the i-th profiler steps of the frame: 0 is its first step, -1 its last.

    Events outside any step (iteration -1) are never counted as a step; a frame with no
    step comes back whole, as in HTA. Indices beyond the steps select nothing.
    """

    def __init__(self, iteration_index: int | Sequence[int]) -> None:
        self.iteration_index = whole_numbers(iteration_index, "iteration_index")

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        if _missing(df, "iteration", "IterationIndexFilter"):
            return df
        steps = sorted(int(i) for i in pd.unique(df["iteration"]) if i >= 0)
        if not steps:
            return df
        chosen = [steps[i] for i in self.iteration_index if -len(steps) <= i < len(steps)]
        if not chosen:
            logger.warning("IterationIndexFilter: indices %s select none of the %d steps",
                           self.iteration_index, len(steps))
            return _nothing(df)
        return df.loc[df["iteration"].isin(chosen)]


class FirstIterationFilter(IterationIndexFilter):
    """Events of the first profiler step."""

    def __init__(self) -> None:
        super().__init__(0)


class RankFilter(Filter):
    """Rows of the given ranks (a ``rank`` column, as a concatenation of ranks has)."""

    def __init__(self, ranks: int | Sequence[int]) -> None:
        self.ranks = whole_numbers(ranks, "ranks")

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        if _missing(df, "rank", "RankFilter"):
            return df
        return df.loc[df["rank"].isin(self.ranks)]


class TimeRangeFilter(Filter):
    """Events starting at or after ``start`` and ending at or before ``end``.

    ``time_range`` is ``(start, end)`` in µs like HTA's; ``unit="ns"`` takes ns. On this
    package's tables (integer ns) the range is compared in ns; on other frames, in its
    own unit (HTA's frames hold µs).
    """

    def __init__(self, time_range: tuple[int, int], unit: str = "us") -> None:
        if unit not in ("us", "ns"):
            raise ValueError(f"unit must be 'us' or 'ns', not {unit!r}")
        if (not isinstance(time_range, (tuple, list)) or len(time_range) != 2
                or not all(isinstance(t, numbers.Real) and not isinstance(t, bool)
                           for t in time_range)):
            raise ValueError(f"time_range must be a tuple (start, end) of two numbers, got "
                             f"{time_range!r}")
        if time_range[0] > time_range[1]:
            raise ValueError(f"time_range starts after it ends: {time_range!r}; give "
                             "(start, end) with start <= end")
        self.unit = unit
        self.time_start, self.time_end = time_range[0], time_range[1]

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        if _missing(df, "ts", "TimeRangeFilter"):
            return df
        start, end = self.time_start, self.time_end
        if self.unit == "us" and _is_package_table(df):
            start, end = int(round(start * 1000)), int(round(end * 1000))
        ends = df["ts"] + df["dur"] if "dur" in df.columns else df["ts"]
        return df.loc[df["ts"].ge(start) & ends.le(end)]


class NameStringColumnFilter(Filter):
    """Events whose name text matches ``name_pattern`` (``re.match``): the ``name`` column
    when it holds text, else ``s_name``. A frame with neither comes back unchanged."""

    def __init__(self, name_pattern: str, name_column: str | None = None) -> None:
        self.name_pattern = name_pattern
        self.name_column = name_column

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        column = self.name_column or text_name_columns(df)[0]
        if not column or column not in df.columns or not _is_text(df[column]):
            logger.warning("NameStringColumnFilter: the frame has no name column of text "
                           "(name or s_name); every row is kept. Decode the ids first "
                           "(Trace.decode_symbol_ids()) or pass the symbol table")
            return df
        return df.loc[df[column].str.match(self.name_pattern).fillna(False).astype(bool)]


class NameIdColumnFilter(Filter):
    """Events whose ``name`` id is that of a symbol matching ``name_pattern``; needs the
    symbol table at the call (without it the frame comes back unchanged)."""

    def __init__(self, name_pattern: str, name_column: str = "name") -> None:
        self.name_pattern = name_pattern
        self.name_column = name_column

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        if symbol_table is None:
            logger.warning("NameIdColumnFilter needs the symbol table to match ids; every "
                           "row is kept")
            return df
        if _missing(df, self.name_column, "NameIdColumnFilter"):
            return df
        return df.loc[df[self.name_column].isin(_ids_matching(symbol_table, self.name_pattern))]


class NameFilter(Filter):
    """Events whose name matches a regular expression from its start (``re.match``).

    With a symbol table (given here or at the call, the call's first) the ids in the
    ``name`` column are matched; without one, the text in ``name_column`` (default: the
    ``name`` column if it holds text, else ``s_name``).
    """

    def __init__(self, name_pattern: str, symbol_table: Any = None,
                 name_column: str | None = None) -> None:
        if isinstance(symbol_table, str) and name_column is None:
            # this package's earlier order was (pattern, name_column, symbol_table)
            symbol_table, name_column = None, symbol_table
        self.name_pattern = name_pattern
        self.symbol_table = symbol_table
        self.name_column = name_column

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        if df.empty:
            return df
        table = symbol_table if symbol_table is not None else self.symbol_table
        column = self.name_column
        if column is not None and column in df.columns and _is_text(df[column]):
            return NameStringColumnFilter(self.name_pattern, column)(df)
        if table is not None:
            return NameIdColumnFilter(self.name_pattern, column or "name")(df, table)
        return NameStringColumnFilter(self.name_pattern,
                                      None if column in (None, "name") else column)(df)


class QueryFilter(Filter):
    """Rows matching a ``DataFrame.query`` expression."""

    def __init__(self, query_str: str) -> None:
        self.filter_query = query_str

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        return df.query(self.filter_query)


#: Rows whose duration is not zero (HTA's name).
ZeroDurationFilter = QueryFilter("dur > 0")


def _sync_records(df: pd.DataFrame, symbol_table: Any) -> pd.Series:
    """Rows that are ``Event Sync`` / ``Context Sync`` records (by id, or by text)."""
    if "name" not in df.columns:
        return pd.Series(False, index=df.index)
    if _is_text(df["name"]):
        return df["name"].isin(SYNC_EVENT_NAMES)
    index = _sym_index(symbol_table)
    return df["name"].isin([index[n] for n in SYNC_EVENT_NAMES if n in index])


def _gpu_rows(df: pd.DataFrame, symbol_table: Any) -> pd.Series | None:
    """Which rows run on the GPU, or None when the frame cannot say (no kind, no stream)."""
    if _is_package_table(df):
        on_gpu = df["kind"].isin(GPU_WORK_KINDS)
        if symbol_table is not None:
            on_gpu |= df["kind"].isin(GPU_KINDS - GPU_WORK_KINDS) & _sync_records(df, symbol_table)
        return on_gpu
    if "stream" not in df.columns:
        return None
    on_gpu = df["stream"].ge(0)
    if "correlation" in df.columns:
        on_gpu &= df["correlation"].ge(0)
    if symbol_table is not None:
        on_gpu |= _sync_records(df, symbol_table)
    return on_gpu


def _unknown_device(df: pd.DataFrame, who: str) -> pd.DataFrame:
    """``df`` whole, with the warning that it says nothing of where its events ran."""
    logger.warning("%s: the frame has no 'kind' nor 'stream' column; every row is kept", who)
    return df


class GPUKernelFilter(Filter):
    """GPU work: kernels, copies and memsets (this package's ``kind``; on other frames,
    HTA's rule: a stream and a correlation). With a symbol table, also the device-wide
    ``Event Sync`` / ``Context Sync`` records, as HTA."""

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        on_gpu = _gpu_rows(df, symbol_table)
        return _unknown_device(df, "GPUKernelFilter") if on_gpu is None else df.loc[on_gpu]


class CPUOperatorFilter(Filter):
    """Events that do not run on the GPU (operators, runtime calls, annotations). On this
    package's tables: every kind but GPU work, GPU annotations and GPU-side sync records;
    on other frames, HTA's rule (no stream; with a symbol table, not a sync record)."""

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        if _is_package_table(df):
            return df.loc[~df["kind"].isin(GPU_KINDS)]
        if "stream" not in df.columns:
            return _unknown_device(df, "CPUOperatorFilter")
        if symbol_table is None:
            return df.loc[df["stream"].eq(-1)]
        return df.loc[~_gpu_rows(df, symbol_table)]  # type: ignore[operator]


def _copy_rows(df: pd.DataFrame, table: Any) -> pd.Series | None:
    """Which rows are memory copies, or None when the frame cannot say."""
    if _is_package_table(df):
        return df["kind"].isin(COPY_KINDS)
    if "cat" not in df.columns:
        return None
    if _is_text(df["cat"]):
        return df["cat"].eq("gpu_memcpy")
    if table is None:
        text = text_name_columns(df)[1]
        return df[text].eq("gpu_memcpy") if text else None
    return df["cat"].eq(_sym_index(table).get("gpu_memcpy", -1))


def _names_of_type(df: pd.DataFrame, table: Any, copy_type: str) -> pd.Series | None:
    """Which rows are named ``copy_type`` (or ``copy_type (...)``), or None."""
    pattern = re.escape(copy_type) + r"(?: \(.*\))?$"
    if "name" in df.columns and _is_text(df["name"]):
        return df["name"].str.match(pattern).fillna(False).astype(bool)
    if table is not None and "name" in df.columns:
        return df["name"].isin(_ids_matching(table, pattern))
    text = text_name_columns(df)[0]
    return df[text].str.match(pattern).fillna(False).astype(bool) if text else None


class MemCopyEventFilter(Filter):
    """Memory copies: all of them, or those of one type (``"Memcpy HtoD"``,
    ``"Memcpy DtoH"``, ``"Memcpy DtoD"`` ..., matched on the name; Kineto's memory kinds
    in parentheses after it are allowed)."""

    def __init__(self, memory_copy_type: str | None = None, symbol_table: Any = None) -> None:
        if memory_copy_type is not None and not isinstance(memory_copy_type, str):
            raise TypeError(f"memory_copy_type must be a name such as 'Memcpy HtoD', got "
                            f"{memory_copy_type!r}")
        self.memory_copy_type = memory_copy_type
        self.symbol_table = symbol_table

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        if df.empty:
            return df
        table = symbol_table if symbol_table is not None else self.symbol_table
        copies = _copy_rows(df, table)
        if copies is None:
            logger.warning("MemCopyEventFilter: the frame says no category (no 'kind', no "
                           "'cat' text nor symbol table); every row is kept")
            return df
        if self.memory_copy_type is not None:
            named = _names_of_type(df, table, self.memory_copy_type)
            if named is None:
                logger.warning("MemCopyEventFilter: no name text nor symbol table to match "
                               "%r; every copy is kept", self.memory_copy_type)
            else:
                copies &= named
        return df.loc[copies]


class CompositeFilter(Filter):
    """Several filters applied one after the other."""

    def __init__(self, filters: Sequence[Filter]) -> None:
        for f in filters:
            if not isinstance(f, Filter):
                raise TypeError(f"CompositeFilter takes filters (instances of Filter), got "
                                f"{type(f).__name__}: {f!r}")
            if f is self:
                raise ValueError("a CompositeFilter cannot contain itself")
        self.filters = list(filters)

    def __call__(self, df: pd.DataFrame, symbol_table: Any = None) -> pd.DataFrame:
        for f in self.filters:
            df = f(df, symbol_table)
        return df
