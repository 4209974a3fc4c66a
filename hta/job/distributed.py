"""Ranks kept where they were loaded, and per-rank work run next to them.

A :class:`DistributedJob` holds a job whose ranks are not in this process. It is not a
:class:`~hta.model.trace.Trace` (no subclass, no in-memory ranks): it *has* a
:class:`RankHandle` per rank and an executor, and offers the interface both share,
:class:`hta.model.job.Job`. Each handle is

* with local processes, an Arrow folder (the cache entry, or a temporary one) that a
  worker process wrote;
* on a Dask cluster, a Dask future of the rank held in the memory of the worker that
  loaded it (Dask manages that memory, spills it to the worker's disk under pressure,
  and loads the rank again on another worker if its worker is lost).

Two ways to use the ranks:

* :meth:`DistributedJob.map_ranks` (the runner's transport: analyses use it through
  :func:`hta.model.runner.run`): run a per-rank function next to the data, in the
  Dask worker that holds the rank or in a local worker process that reads the rank's
  Arrow folder, and bring back only its result (a small DataFrame). The same call on an
  in-memory :class:`~hta.model.trace.Trace` is one call over its ranks.
* :meth:`DistributedJob.rank` (and ``get_trace(r)``, iterating): reads one whole rank into
  this process, explicitly, and keeps it in a small LRU of recently used ranks
  (:data:`RESIDENT_FRACTION` of the available memory, at least one rank), so going over
  the ranks one after the other never holds more than that. Metadata
  (:meth:`DistributedJob.meta`) is known without reading a rank.

What needs all of one rank's events in memory: loading it (decode and build), and every
analysis of that rank; about ``bytes_per_event`` x events (see docs/scaling.md). No step
needs every rank at once unless the analysis itself gathers them.
"""

from __future__ import annotations

import logging
import shutil
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hta.errors import TraceLoadError
from hta.job.arrow_files import ArrowTables
from hta.job.cache import read_entry
from hta.job.executors import Executor, WorkerDiedError, available_memory
from hta.job.rank_load import (
    KeptRank,
    LoadResult,
    LoadTask,
    kept_summary,
    load_rank,
    load_rank_kept,
    task_source,
)
from hta.kineto.files import trace_location
from hta.model.trace import (
    RankTrace,
    SymbolView,
    Trace,
    intern_symbols,
)
from hta.model.vocabulary import Ranks, selected_ranks

logger = logging.getLogger(__name__)

#: Client-side LRU of ranks read into this process: this fraction of the available memory.
RESIDENT_FRACTION = 0.1

Transform = Callable[[RankTrace], None]


@dataclass(frozen=True)
class RankHandle:
    """Where one loaded rank is, and how to load it again if it is gone."""

    rank: int
    source: str  # the trace file (path or fsspec URL)
    entry: str  # Arrow folder of the loaded rank ("" when none was written)
    worker: str  # Dask worker address that loaded it ("" = this machine)
    temporary: bool  # the entry is a temporary folder (not the cache)
    events: int
    nbytes: int  # in-memory size of the rank (bytes)
    task: LoadTask = field(repr=False)
    ref: Any = field(default=None, compare=False, repr=False)  # Dask future of the rank

    @property
    def name(self) -> str:
        """The trace file's name."""
        return trace_location(self.source).name


@dataclass(frozen=True)
class RankCall:
    """One per-rank call: ``fn(one_rank_trace, [rank], *args, **kwargs)`` after the
    ``transforms`` were applied to (a copy of) the rank."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    transforms: tuple[Transform, ...] = ()


class _Resident:
    """A thread-safe LRU of ranks bounded by their total size (at least one is kept)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._items: OrderedDict[Any, tuple[RankTrace, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> RankTrace | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Any, rt: RankTrace, nbytes: int) -> None:
        with self._lock:
            self._items[key] = (rt, nbytes)
            self._items.move_to_end(key)
            total = sum(n for _, n in self._items.values())
            while len(self._items) > 1 and total > self.budget:
                _, (_, n) = self._items.popitem(last=False)
                total -= n

    def pop(self, key: Any) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def keys(self) -> list[Any]:
        with self._lock:
            return list(self._items)


# -- worker side ------------------------------------------------------------------------


def open_rank(handle: RankHandle) -> RankTrace:
    """The rank of ``handle``, read in this process from its Arrow folder, or, when the
    folder is gone, loaded again from the trace file. The result must not be modified."""
    rt = read_entry(Path(handle.entry)) if handle.entry else None
    if rt is None:
        logger.warning("rank %d: its loaded copy %s is gone; loading %s again", handle.rank,
                       handle.entry or "(none)", handle.source)
        rt, _ = load_rank(handle.task, store=False)
    rt.meta["source"] = task_source(handle.task)  # the entry may name another copy
    return rt


def _rank_of(data: RankHandle | KeptRank | RankTrace) -> RankTrace:
    if isinstance(data, KeptRank):
        return data.rank_trace
    if isinstance(data, RankHandle):
        return open_rank(data)
    return data


def _private_copy(rt: RankTrace) -> RankTrace:
    """A copy whose tables may be replaced without touching ``rt`` (data is shared)."""
    return RankTrace(rank=rt.rank, events=rt.events.copy(deep=False), symbols=list(rt.symbols),
                     tables=_copy_tables(rt.tables), meta=dict(rt.meta),
                     unclassified=rt.unclassified)


def _copy_tables(tables: Any) -> Any:
    """A shallow copy of a rank's side tables (tables not yet converted stay so)."""
    return tables.copy() if isinstance(tables, ArrowTables) else dict(tables)


def fetch_rank(data: RankHandle | KeptRank, call: RankCall) -> RankTrace:
    """The rank (from a handle, or as a Dask worker holds it), transforms applied."""
    rt = _private_copy(_rank_of(data))
    for transform in call.transforms:
        transform(rt)
    return rt


def run_on_rank(data: RankHandle | KeptRank, call: RankCall) -> Any:
    """Worker side of :meth:`DistributedJob.map_ranks`: the call on a one-rank trace."""
    rt = fetch_rank(data, call)
    return call.fn(Trace({rt.rank: rt}), [rt.rank], *call.args, **call.kwargs)


def _keep_rank(data: RankHandle | KeptRank, call: RankCall) -> Any:
    """Worker side of :meth:`DistributedJob.keep_ranks`: ``fn(rank, item)``."""
    return call.fn(fetch_rank(data, call), *call.args)


def _value(outcome: Any) -> Any:
    """An outcome's value; its error raised."""
    if not outcome.ok:
        raise outcome.error
    return outcome.result


def _nothing(value: Any) -> None:
    """No summary."""
    return None


# -- client side ------------------------------------------------------------------------


class _LazyEvents(Mapping[int, pd.DataFrame]):
    """``get_all_traces()`` of a distributed job: each rank's events read when looked up."""

    def __init__(self, job: DistributedJob) -> None:
        self._job = job

    def __getitem__(self, rank: int) -> pd.DataFrame:
        return self._job.rank(rank).events

    def __iter__(self) -> Iterator[int]:
        return iter(self._job.get_ranks())

    def __len__(self) -> int:
        return len(self._job)


class DistributedJob:
    """A job whose ranks stay where they were loaded (see the module docstring).

    It is not a :class:`~hta.model.trace.Trace`: it holds the rank handles and the
    executor, and offers the :class:`hta.model.job.Job` interface. ``handles`` maps each
    rank to its :class:`RankHandle`; ``executor`` runs per-rank work (:meth:`map_ranks`)
    and fetches ranks. ``transforms`` are applied to every rank when it is read
    (``include_last_profiler_step=False`` adds one). ``close()`` (also run when the job
    is garbage-collected) deletes temporary entries and frees worker memory.
    """

    def __init__(self, handles: Mapping[int, RankHandle], executor: Executor, *,
                 symbols: Mapping[int, list[str]], meta: Mapping[int, dict[str, Any]],
                 trace_dir: str = "", skipped: Mapping[str, str] | None = None,
                 progress: bool = True, resident_bytes: int | None = None) -> None:
        self.trace_dir = trace_dir
        self.skipped: dict[str, str] = dict(skipped or {})
        self.executor = executor
        self.progress = progress
        self.handles: dict[int, RankHandle] = {r: handles[r] for r in sorted(handles)}
        self.transforms: list[Transform] = []
        self.symbols: list[str] = []
        self._symbol_index: dict[str, int] = {}
        for rank in self.handles:
            self._intern(symbols[rank])
        self._meta: dict[int, dict[str, Any]] = {r: dict(meta[r]) for r in self.handles}
        biggest = max((h.nbytes for h in self.handles.values()), default=0)
        budget = resident_bytes if resident_bytes is not None else max(
            biggest, int(RESIDENT_FRACTION * available_memory()))
        self._resident = _Resident(budget)
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _release, executor,
                                           list(self.handles.values()))

    @classmethod
    def from_results(cls, results: Mapping[int, LoadResult], tasks: Mapping[int, LoadTask],
                     executor: Executor, **kwargs: Any) -> DistributedJob:
        """A distributed job from what the loading workers reported."""
        handles = {
            r: RankHandle(rank=r, source=res.path, entry=res.entry, worker=res.worker,
                          temporary=res.temporary, events=res.events, nbytes=res.nbytes,
                          task=tasks[r], ref=res.ref)
            for r, res in results.items()
        }
        return cls(handles, executor, symbols={r: res.symbols for r, res in results.items()},
                   meta={r: res.meta for r, res in results.items()}, **kwargs)

    def _intern(self, symbols: Sequence[str]) -> np.ndarray:
        return intern_symbols(self.symbols, self._symbol_index, symbols)

    # -- what is known without reading a rank ---------------------------------------------
    def get_ranks(self) -> list[int]:
        """The loaded ranks, ascending."""
        return list(self.handles)

    def selected_ranks(self, ranks: Ranks = None) -> list[int]:
        """``ranks`` as a sorted list of loaded ranks (all when ``None``/``ALL``); an
        unknown rank raises ``KeyError`` naming the loaded ones."""
        return selected_ranks(self.get_ranks(), ranks)

    def meta(self, rank: int) -> dict[str, Any]:
        """One rank's metadata, kept here since loading (the rank is not read)."""
        self.selected_ranks(rank)
        return self._meta[rank]

    def rank_events(self, rank: int) -> int:
        """How many events one rank held when it was loaded (before the transforms;
        the rank is not read)."""
        self.selected_ranks(rank)
        return self.handles[rank].events

    @property
    def symbol_table(self) -> SymbolView:
        """HTA-style view: ``sym_table`` (id -> name) and ``sym_index`` (name -> id)."""
        return SymbolView(self.symbols, self._symbol_index)

    def __len__(self) -> int:
        return len(self.handles)

    # -- per-rank work next to the data ----------------------------------------------
    def map_ranks(self, fn: Callable[..., Any], ranks: Ranks = None,
                  args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
                  description: str = "") -> list[Any]:
        """``fn(one_rank_trace, [rank], *args, **kwargs)`` for each selected rank, run
        where the rank is; the results in rank order.

        A rank whose worker dies (twice) or whose data cannot be read again is left out,
        reported in ``skipped`` under its file, and logged. Any other exception raised by
        ``fn`` is raised here (the runner's failure policy, ``run(errors=...)``, then
        decides).
        """
        selected = self.selected_ranks(ranks)
        what = description or getattr(fn, "__name__", "per-rank work")
        call = RankCall(fn, tuple(args), dict(kwargs or {}), tuple(self.transforms))
        outcomes = self._map(run_on_rank, call, selected, what, self.progress)
        lost = [i for i, o in enumerate(outcomes) if isinstance(o.error, WorkerDiedError)]
        if lost and self.executor.remote:
            # The rank held by a worker may be what was lost: load it again, then retry.
            again = [selected[i] for i in lost]
            self._reload(again)
            for i, outcome in zip(lost, self._map(run_on_rank, call, again, what, False)):
                outcomes[i] = outcome
        values = []
        for rank, outcome in zip(selected, outcomes):
            if outcome.ok:
                values.append(outcome.value)
                continue
            error = outcome.error
            if not isinstance(error, (WorkerDiedError, TraceLoadError)):
                raise error
            source = self.handles[rank].source
            self.skipped[source] = f"rank {rank} left out of {what}: {error}"
            logger.warning("rank %d left out of %s: %s", rank, what, error)
        return values

    # -- values kept next to the ranks (the runner's Kept) -----------------------------
    @property
    def keeps_remotely(self) -> bool:
        """Whether values made from the ranks stay on the workers (Dask); local worker
        processes keep nothing between calls, so :class:`hta.model.runner.Kept` keeps
        their values in this process."""
        return bool(self.executor.remote)

    def keep_ranks(self, fn: Callable[[RankTrace, Any], Any], items: Mapping[int, Any],
                   summary: Callable[[Any], Any] | None, description: str = ""
                   ) -> dict[int, tuple[Any, Any]]:
        """Per rank of ``items``: ``fn(rank, item)`` kept on the worker holding the rank
        (transforms applied first), as ``(reference, summary(value))``. Internal: the
        runner's :func:`~hta.model.runner.keep` calls it."""
        ranks = list(items)
        call = [RankCall(fn, (items[r],), {}, tuple(self.transforms)) for r in ranks]
        return self._keep(_keep_rank, call, ranks, [self.handles[r].ref for r in ranks],
                          summary, description)

    def keep_on(self, fn: Callable[[Any, Any], Any], refs: Mapping[int, Any],
                items: Mapping[int, Any], summary: Callable[[Any], Any] | None,
                description: str = "") -> dict[int, tuple[Any, Any]]:
        """Per rank: ``fn(kept value, item)`` kept where that value is."""
        ranks = list(items)
        return self._keep(fn, [items[r] for r in ranks], ranks, [refs[r] for r in ranks],
                          summary, description)

    def map_on(self, fn: Callable[[Any, Any], Any], refs: Mapping[int, Any],
               items: Mapping[int, Any], description: str = "") -> dict[int, Any]:
        """Per rank: ``fn(kept value, item)`` run where that value is, brought back."""
        ranks = list(items)
        outcomes = self.executor.map(
            fn, [items[r] for r in ranks], progress=self.progress, description=description,
            labels=[self.handles[r].name for r in ranks], data=[refs[r] for r in ranks])
        return {r: _value(o) for r, o in zip(ranks, outcomes, strict=True)}

    def release_kept(self, refs: Sequence[Any]) -> None:
        """Free kept values."""
        self.executor.release(refs)

    def _keep(self, fn: Callable[..., Any], items: list[Any], ranks: list[int],
              data: list[Any], summary: Callable[[Any], Any] | None, description: str
              ) -> dict[int, tuple[Any, Any]]:
        outcomes = self.executor.map_keep(
            fn, items, summary or _nothing, progress=self.progress, description=description,
            labels=[self.handles[r].name for r in ranks], data=data)
        return {r: _value(o) for r, o in zip(ranks, outcomes, strict=True)}

    # -- reading ranks into this process -------------------------------------------------
    def rank(self, rank: int) -> RankTrace:
        """Rank ``rank`` read into this process, its ids in the shared symbol table,
        transforms applied. The read rank is kept in an LRU of recently used ranks
        (:data:`RESIDENT_FRACTION` of the available memory, at least one rank); each call
        returns a private view of it, so changing it in place changes nothing else."""
        self.selected_ranks(rank)  # a clear error for an unknown rank
        with self._lock:
            rt = self._resident.get(rank)
            if rt is None:
                rt = self._read(rank)
                self._resident.put(rank, rt, self.handles[rank].nbytes)
        return _view(rt)

    def _read(self, rank: int) -> RankTrace:
        handle = self.handles[rank]
        call = RankCall(fetch_rank, transforms=tuple(self.transforms))
        if self.executor.remote:
            outcome = self._map(fetch_rank, call, [rank], "", False)[0]
            if isinstance(outcome.error, WorkerDiedError):
                self._reload([rank])
                outcome = self._map(fetch_rank, call, [rank], "", False)[0]
            if not outcome.ok:
                raise outcome.error
            rt = outcome.value
        else:
            rt = fetch_rank(handle, call)
        rt.remap_symbols(self._intern(rt.symbols), self.symbols)
        return rt

    def get_trace(self, rank: int) -> pd.DataFrame:
        """The events table of one rank (HTA's ``t.get_trace``); reads the rank."""
        return self.rank(rank).events

    def get_all_traces(self) -> Mapping[int, pd.DataFrame]:
        """Events tables of all ranks, each read when looked up."""
        return _LazyEvents(self)

    def __iter__(self) -> Iterator[RankTrace]:
        """Every rank read in turn (at most the LRU's budget held at once)."""
        return (self.rank(r) for r in self.get_ranks())

    def resident_ranks(self) -> list[int]:
        """Ranks now held in this process (most recently used last)."""
        return self._resident.keys()

    def add_transform(self, transform: Transform) -> None:
        """Apply ``transform`` (a module-level function changing a rank in place) to every
        rank when it is read, here or in a worker."""
        self.transforms.append(transform)
        self._resident.clear()

    def to_memory(self) -> Trace:
        """Every rank read into an ordinary in-memory :class:`Trace`."""
        ranks = {}
        for rank in self.get_ranks():
            ranks[rank] = _private_copy(self.rank(rank))
            self._resident.pop(rank)
        return Trace(ranks, trace_dir=self.trace_dir, skipped=self.skipped)

    # -- the executor ------------------------------------------------------------------
    def _map(self, fn: Callable[..., Any], call: RankCall, ranks: list[int], what: str,
             progress: bool) -> list[Any]:
        handles = [self.handles[r] for r in ranks]
        return self.executor.map(
            fn, [call] * len(ranks), progress=progress, description=what,
            labels=[h.name for h in handles],
            data=[h.ref if self.executor.remote else h for h in handles])

    def _reload(self, ranks: list[int]) -> None:
        """Load ranks again on the cluster (their worker-held copy was lost)."""
        handles = [self.handles[r] for r in ranks]
        logger.warning("loading rank(s) %s again on the cluster", ranks)
        outcomes = self.executor.map_keep(load_rank_kept, [h.task for h in handles],
                                          kept_summary, progress=False,
                                          description="Loading traces again",
                                          labels=[h.name for h in handles])
        for handle, outcome in zip(handles, outcomes):
            if outcome.ok:
                ref, info = outcome.result
                self.executor.release([handle.ref])
                self.handles[handle.rank] = replace(handle, ref=ref, worker=info.worker)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _release, self.executor,
                                           list(self.handles.values()))

    def close(self) -> None:
        """Delete temporary entries and drop the ranks held by workers and this process."""
        self._resident.clear()
        self._finalizer()

    def __repr__(self) -> str:
        where = "Dask workers" if self.executor.remote else "local Arrow entries"
        return f"DistributedJob(ranks={self.get_ranks()}, on {where})"


def _view(rt: RankTrace) -> RankTrace:
    """A view of ``rt`` whose tables may be replaced (or changed in place, pandas copies
    on write) without touching ``rt``; the symbol list is shared, never changed."""
    return RankTrace(rank=rt.rank, events=rt.events.copy(deep=False), symbols=rt.symbols,
                     tables=_copy_tables(rt.tables), meta=dict(rt.meta),
                     unclassified=rt.unclassified.copy())


def _release(executor: Executor, handles: list[RankHandle]) -> None:
    """Free what the loaded ranks hold outside this process (best effort)."""
    try:
        executor.release([h.ref for h in handles if h.ref is not None])
    except Exception as exc:  # noqa: BLE001 - cleanup must never raise
        logger.debug("could not release worker-held ranks: %s", exc)
    for h in handles:
        if h.temporary and h.entry:
            shutil.rmtree(Path(h.entry).parent, ignore_errors=True)
