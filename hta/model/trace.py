"""The trace model: one :class:`RankTrace` per rank, gathered in a :class:`Trace`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from hta.model import schema
from hta.model.rules import GPU_WORK_KINDS, RuleSet, classify, kinds
from hta.model.vocabulary import Ranks, selected_ranks

logger = logging.getLogger(__name__)

#: Side tables of a rank (see :mod:`hta.model.schema`), each keyed by ``index`` (the row
#: of the event it describes) or, for the events that are not complete events, holding
#: its own rows.
ARG_TABLES = tuple(schema.ARG_TABLES)
EVENT_TABLES = tuple(schema.EVENT_TABLES)
#: Side-table columns holding ids into the symbol table.
SYMBOL_TABLE_COLUMNS = schema.SYMBOL_COLUMNS
#: Event columns holding row numbers of other events (-1: no link).
LINK_COLUMNS = schema.LINK_COLUMNS


@dataclass
class RankTrace:
    """Everything known about one rank.

    ``events`` holds one row per complete (``ph == "X"``) event, sorted by start time;
    see :mod:`hta.model.schema` for its columns. ``symbols`` decodes the ``name`` and
    ``cat`` ids. Arg tables (``kernel_args`` ...) hold typed args for the events that
    have them, keyed by ``index``. ``meta`` holds the rank's metadata.
    """

    rank: int
    events: pd.DataFrame
    symbols: list[str]
    tables: dict[str, pd.DataFrame]
    meta: dict[str, Any]
    unclassified: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    #: bumped by every change made in place (``classify``, ``remap_symbols``), so values
    #: derived from the events table (:mod:`hta.model.derived`) are computed again
    generation: int = field(default=0, compare=False, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "events" and isinstance(value, pd.DataFrame):
            plain_labels(value)
            self.__dict__.pop("_columns", None)
        super().__setattr__(name, value)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_columns", None)  # arrays over the events' own: rebuilt when read
        return state

    # -- columns as arrays ----------------------------------------------------------
    def column(self, name: str) -> np.ndarray:
        """The events' column ``name`` as a read-only NumPy array (what
        ``events[name].to_numpy()`` gives), kept for the next call while the events table
        and :attr:`generation` stay the same: the analyses read the same few columns
        thousands of times per rank, and each pandas lookup costs tens of microseconds. A
        column changed in place by hand is not seen (as with :mod:`hta.model.derived`):
        assign ``events`` anew, or bump ``generation``."""
        arrays = self._arrays()
        array = arrays.get(name)
        if array is None:
            array = arrays[name] = _read_only(self.events[name].to_numpy())
        return array

    def kind_codes(self) -> np.ndarray:
        """The codes of the ``kind`` column (positions in :data:`hta.model.schema.KINDS`),
        read-only, kept as :meth:`column` keeps a column."""
        arrays = self._arrays()
        codes = arrays.get(_KIND_CODES)
        if codes is None:
            codes = arrays[_KIND_CODES] = _read_only(self.events["kind"].array.codes)
        return codes

    def _arrays(self) -> dict[str, np.ndarray]:
        kept = self.__dict__.get("_columns")
        if kept is None or kept[0] is not self.events or kept[1] != self.generation:
            kept = self.__dict__["_columns"] = (self.events, self.generation, {})
        return kept[2]

    # -- convenience ------------------------------------------------------------------
    def decoded(self, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """The events table with ``name`` and ``cat`` as strings instead of ids."""
        df = self.events if columns is None else self.events[list(columns)]
        df = df.copy()
        sym = np.asarray(self.symbols, dtype=object)
        for col in ("name", "cat"):
            if col in df:
                df[col] = sym[df[col].to_numpy()]
        return df

    @property
    def time_origin_ns(self) -> int:
        """What the loader added to the file's timestamps to make them epoch ns
        (``baseTimeNanoseconds`` when the file's times are relative to it, else 0), as
        it stored it in ``meta['time_origin_ns']``; writers of amended copies of the
        file subtract it."""
        origin = self.meta.get("time_origin_ns")
        if origin is None:
            raise ValueError(f"rank {self.rank}: its metadata has no time origin; load the "
                             "trace again (without an old cache entry)")
        return int(origin)

    def table(self, name: str) -> pd.DataFrame:
        """One side table (``kernel_args``, ``instants``, ``flows``, ...)."""
        return self.tables[name]

    def gpu_work(self) -> pd.DataFrame:
        """Rows that occupy a GPU engine: kernels, copies and memsets."""
        kind = self.events["kind"]
        return self.events[kind.isin(GPU_WORK_KINDS)]

    # -- joins: links and side tables ------------------------------------------------
    # ``index`` is the row's position in ``events``: loading numbers the rows so and
    # :meth:`filter_rows` renumbers them (tests/test_rank_joins.py checks it on every
    # shared trace). Links and side tables name rows by ``index``, so these joins are
    # plain lookups; analyses use them instead of mapping ``index`` values themselves.
    def link(self, name: str) -> np.ndarray:
        """A link column (``parent``, ``index_correlation``, ``op_index``) as row
        positions of ``events``, int64; -1 where the event has no such link."""
        if name not in LINK_COLUMNS:
            raise KeyError(f"{name!r} is not a link column; one of {', '.join(LINK_COLUMNS)}")
        if name not in self.events:
            return np.full(len(self.events), -1, dtype=np.int64)
        return self.column(name).astype(np.int64)

    def side_rows(self, table: str) -> tuple[pd.DataFrame, np.ndarray]:
        """Side table ``table`` (``collective_args``, ``memory_args`` ...; empty when the
        rank has none) and, per row of it, the ``events`` row it describes (-1 when out
        of range)."""
        frame = self.tables.get(table)
        if frame is None or not len(frame) or "index" not in frame:
            empty = frame.iloc[:0] if frame is not None else pd.DataFrame({"index": []})
            return empty, np.zeros(0, dtype=np.int64)
        rows = frame["index"].to_numpy(np.int64)
        return frame, np.where((rows >= 0) & (rows < len(self.events)), rows, -1)

    def side_row_of_event(self, table: str) -> tuple[pd.DataFrame, np.ndarray]:
        """Side table ``table`` and, per ``events`` row, the row of the table that
        describes it (-1: none; the last one when several do)."""
        frame, rows = self.side_rows(table)
        out = np.full(len(self.events), -1, dtype=np.int64)
        ok = rows >= 0
        out[rows[ok]] = np.flatnonzero(ok)
        return frame, out

    def classify(self, rules: RuleSet) -> None:
        """(Re)compute the ``kind`` column from a rule table; ``unclassified`` follows
        when it is first read (it needs every kernel family rule tried on every kernel
        name, the kind only the rules that can change it: most of a small job's load)."""
        codes = kinds(self.symbols, self.events["cat"].to_numpy(),
                      self.events["name"].to_numpy(), rules, self._collective_rows())
        self.events["kind"] = pd.Categorical.from_codes(codes, dtype=schema.KIND_DTYPE)
        self.classified_by(rules)

    def classified_by(self, rules: RuleSet) -> None:
        """Note that the ``kind`` column holds ``rules``' kinds (the loader builds it with
        the other columns): ``unclassified`` is then computed from them when first read."""
        self.__dict__["_unclassified_rules"] = rules
        self.generation += 1

    def _collective_rows(self) -> np.ndarray | None:
        coll = self.tables.get("collective_args")
        return coll["index"].to_numpy() if coll is not None and len(coll) else None

    def _get_unclassified(self) -> np.ndarray:
        rules = self.__dict__.get("_unclassified_rules")
        if rules is not None:  # classified, not read since: the rules' answer, now
            _, found = classify(self.symbols, self.events["cat"].to_numpy(),
                                self.events["name"].to_numpy(), rules, self._collective_rows())
            self._set_unclassified(found)
        return self.__dict__["_unclassified"]

    def _set_unclassified(self, value: np.ndarray) -> None:
        self.__dict__["_unclassified"] = value
        self.__dict__["_unclassified_rules"] = None

    def remap_symbols(self, mapping: np.ndarray, symbols: list[str]) -> None:
        """Point every symbol-id column (events and side tables) at a shared table."""
        if np.array_equal(mapping, np.arange(len(mapping))):
            self.symbols = symbols  # ids already match: nothing to rewrite
            return
        self.generation += 1
        if len(self.events):
            for col in ("name", "cat"):
                self.events[col] = mapping[self.events[col].to_numpy()].astype(np.int32)
        for table, cols in SYMBOL_TABLE_COLUMNS.items():
            frame = self.tables.get(table)
            if frame is None or not len(frame):
                continue
            frame = frame.copy()
            for col in cols:
                if col in frame:
                    frame[col] = mapping[frame[col].to_numpy(dtype=np.int64)].astype(np.int32)
            self.tables[table] = frame
        self.symbols = symbols

    def filter_rows(self, keep: np.ndarray) -> None:
        """Keep only the events where ``keep`` is true, renumbering ``index`` and every
        link (``parent``, ``index_correlation``, ``op_index``; a link to a dropped row
        becomes -1) and the ``index`` of the arg tables."""
        keep = np.asarray(keep, dtype=bool)
        if keep.all():
            return
        unclassified = self.unclassified  # computed (when pending) before rows move
        new_index = np.full(len(keep) + 1, -1, dtype=np.int64)  # last slot: -1 stays -1
        new_index[np.flatnonzero(keep)] = np.arange(int(keep.sum()), dtype=np.int64)
        events = self.events[keep].reset_index(drop=True)
        events["index"] = np.arange(len(events), dtype=events["index"].dtype)
        for col in LINK_COLUMNS:
            if col in events:
                events[col] = new_index[events[col].to_numpy()].astype(events[col].dtype)
        for name in ARG_TABLES:
            frame = self.tables.get(name)
            if frame is None or "index" not in frame or not len(frame):
                continue
            mapped = new_index[frame["index"].to_numpy(dtype=np.int64)]
            frame = frame[mapped >= 0].copy()
            frame["index"] = mapped[mapped >= 0]
            self.tables[name] = frame.reset_index(drop=True)
        if len(unclassified) == len(keep):
            self.unclassified = unclassified[keep]
        self.events = events


#: Kernels that matched no kind rule (counted as computation), per events row: computed
#: when first read after :meth:`RankTrace.classify` (a field of the dataclass all the
#: same: the constructor takes it and comparisons and copies see it).
RankTrace.unclassified = property(  # type: ignore[assignment]
    RankTrace._get_unclassified, RankTrace._set_unclassified)


class Trace:
    """All loaded ranks of a job, sharing one symbol table (HTA's ``analyzer.t``)."""

    def __init__(self, ranks: dict[int, RankTrace], *, trace_dir: str = "",
                 skipped: dict[str, str] | None = None, workers: int | None = None,
                 progress: bool = False) -> None:
        self.trace_dir = trace_dir
        self.skipped: dict[str, str] = dict(skipped or {})
        #: worker processes a costly visit of many ranks may spread over
        #: (:mod:`hta.model.spread`; ``None``: the CPUs this process may use, 1: none)
        self.workers = workers
        #: whether such a spread visit shows a progress bar
        self.progress = progress
        self.symbols: list[str] = []
        self._symbol_index: dict[str, int] = {}
        self.ranks: dict[int, RankTrace] = {}
        for rank in sorted(ranks):
            self.add(ranks[rank])

    def add(self, rank_trace: RankTrace) -> None:
        """Add a rank, moving its names into the shared symbol table."""
        rank_trace.remap_symbols(self._intern(rank_trace.symbols), self.symbols)
        self.ranks[rank_trace.rank] = rank_trace

    def _intern(self, symbols: Sequence[str]) -> np.ndarray:
        """The shared id of each of a rank's symbols, adding the unseen ones."""
        return intern_symbols(self.symbols, self._symbol_index, symbols)

    # -- HTA-compatible accessors -----------------------------------------------------
    def get_trace(self, rank: int) -> pd.DataFrame:
        """The events table of one rank (ids in ``name``/``cat``), as HTA's ``t.get_trace``."""
        return self.rank(rank).events

    def get_all_traces(self) -> dict[int, pd.DataFrame]:
        """Events tables of all ranks."""
        return {r: rt.events for r, rt in self.ranks.items()}

    def get_ranks(self) -> list[int]:
        """The loaded ranks, ascending."""
        return sorted(self.ranks)

    def rank_events(self, rank: int) -> int:
        """How many events one rank holds."""
        return len(self.rank(rank).events)

    @property
    def symbol_table(self) -> SymbolView:
        """HTA-style view: ``sym_table`` (id -> name) and ``sym_index`` (name -> id)."""
        return SymbolView(self.symbols, self._symbol_index)

    def meta(self, rank: int) -> dict[str, Any]:
        """One rank's metadata (``source``, device properties, warnings ...)."""
        return self.rank(rank).meta

    def add_transform(self, transform: Callable[[RankTrace], None]) -> None:
        """Apply ``transform`` (a function changing a rank in place) to every rank now; a
        distributed job applies it to each rank where and when the rank is read."""
        for rt in self:
            transform(rt)

    def to_memory(self) -> Trace:
        """This trace: its ranks are already in memory."""
        return self

    def close(self) -> None:
        """Nothing to free: an in-memory trace holds nothing outside this process."""

    def rank(self, rank: int) -> RankTrace:
        """One rank's :class:`RankTrace`; a clear error names the ranks that exist."""
        try:
            return self.ranks[rank]
        except KeyError:
            raise KeyError(
                f"rank {rank} is not loaded; loaded ranks: {self.get_ranks()}"
            ) from None

    def selected_ranks(self, ranks: Ranks = None) -> list[int]:
        """``ranks`` as a sorted list of loaded ranks (all when ``None``/``ALL``); an
        unknown rank raises naming the loaded ones
        (:func:`hta.model.vocabulary.selected_ranks`)."""
        return selected_ranks(self.get_ranks(), ranks)

    def map_ranks(self, fn: Callable[..., Any], ranks: Ranks = None,
                  args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
                  description: str = "") -> list[Any]:
        """The runner's transport (internal: analyses call :func:`hta.model.runner.run`)
        on ranks held in this process: one call ``fn(self, ranks, *args, **kwargs)`` with
        ``ranks`` as given, returned as a one-element list. A distributed job
        (:class:`hta.job.distributed.DistributedJob`) has the same method and runs ``fn``
        once per rank where the rank is."""
        del description  # nothing runs elsewhere, so nothing is lost or shown
        return [fn(self, ranks, *args, **dict(kwargs or {}))]

    def __iter__(self) -> Iterator[RankTrace]:
        return iter(self.ranks[r] for r in self.get_ranks())

    def __len__(self) -> int:
        return len(self.ranks)


class RankMapper(Protocol):
    """What the runner (:func:`hta.model.runner.run`) needs of a job: its transport, a
    ``map_ranks`` method (an in-memory :class:`Trace` and a distributed job both have
    it; the whole interface they share is :class:`hta.model.job.Job`)."""

    def map_ranks(self, fn: Callable[..., Any], ranks: Ranks = None,
                  args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
                  description: str = "") -> list[Any]:
        """``fn`` over the selected ranks, where they are; the per-call results."""
        ...


_KIND_CODES = "kind codes"  # RankTrace._arrays' key of the kind codes (no column's name)


def _read_only(array: np.ndarray) -> np.ndarray:
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def plain_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its column labels held as Python strings (an ``object`` index), in
    place. pandas 3 keeps them as Arrow strings by default, so that every column lookup
    takes an Arrow scalar out of the index, which doubles its cost; the analyses look up
    thousands of columns per rank. The labels stay the same."""
    if len(frame.columns) and frame.columns.dtype != object:
        frame.columns = pd.Index(frame.columns.tolist(), dtype=object)
    return frame


def thread_keys(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (pid, tid) pair of the events' ``pid`` and ``tid`` columns: equal
    exactly for the events of one thread."""
    return pid.astype(np.int64) * (1 << 32) + tid.astype(np.int64)


def intern_symbols(table: list[str], index: dict[str, int], symbols: Sequence[str]
                   ) -> np.ndarray:
    """The id in ``table`` of each of ``symbols``, appending the unseen ones to ``table``
    (and ``index``, text -> id)."""
    mapping = np.empty(len(symbols), dtype=np.int64)
    for i, text in enumerate(symbols):
        sid = index.get(text)
        if sid is None:
            sid = len(table)
            index[text] = sid
            table.append(text)
        mapping[i] = sid
    return mapping


def concat_frames(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per-rank frames in order, one frame: the non-empty ones concatenated (the first,
    empty, frame when all are empty)."""
    filled = [f for f in frames if len(f)]
    if not filled:
        return frames[0]
    if len(filled) == 1:
        return filled[0]
    return pd.concat(filled, ignore_index=True)


def text_name_columns(df: pd.DataFrame) -> tuple[str, str]:
    """The columns of ``df`` holding events' names and categories as text: ``name`` /
    ``cat`` when they hold text, else ``s_name`` / ``s_cat`` (what
    :meth:`SymbolView.add_symbols_to_trace_df` writes); ``""`` when neither does."""
    def pick(*columns: str) -> str:
        return next((c for c in columns
                     if c in df.columns and pd.api.types.is_string_dtype(df[c])), "")

    return pick("name", "s_name"), pick("cat", "s_cat")


@dataclass(frozen=True)
class SymbolView:
    """Read-only symbol table with the attribute names HTA notebooks use."""

    sym_table: list[str]
    sym_index: dict[str, int]

    def get_sym_id_map(self) -> dict[str, int]:
        """Name -> id."""
        return self.sym_index

    def get_sym_table(self) -> list[str]:
        """Id -> name."""
        return self.sym_table

    def get_sym_index(self) -> dict[str, int]:
        """Name -> id (HTA's spelling)."""
        return self.sym_index

    def find_matched_symbols(self, patterns: list[str]) -> list[str]:
        """Symbols containing any of the given substrings."""
        return [s for s in self.sym_table if any(p in s for p in patterns)]

    def add_symbols_to_trace_df(self, trace_df: pd.DataFrame, col: str) -> None:
        """Replace the ids in ``trace_df[col]`` by their text, in place (as HTA does)."""
        table = np.asarray(self.sym_table + [""], dtype=object)
        ids = trace_df[col].to_numpy(dtype=np.int64)
        ids = np.where((ids >= 0) & (ids < len(self.sym_table)), ids, len(self.sym_table))
        trace_df[col] = table[ids]
