"""Load a job: every rank's file, in parallel, through the Parquet cache.

Workers (local processes, or Dask workers when a ``distributed.Client`` is given) decode
their files and leave each rank as a Parquet folder: the cache entry, or a temporary one.
Then either every rank is read back into this process (a plain :class:`Trace`), or the
ranks stay where they are and a :class:`~hta.loading.lazy.LazyTrace` holds handles to
them, reading one rank at a time when asked (see :func:`load_trace`, ``in_memory``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hta.loading.cache import (
    default_cache_root,
    entry_path,
    fingerprint,
    read_entry,
    stored_meta,
    user_cache_root,
    write_entry,
)
from hta.loading.decode import decode_trace
from hta.loading.discovery import discover, peek_rank
from hta.loading.errors import TraceDiscoveryError, TraceError, TraceLoadError
from hta.loading.files import RemotePath, trace_location
from hta.model.build import build_rank, rank_from_filename, rank_from_metadata
from hta.model.rules import Rule, RuleSet
from hta.model.trace import RankTrace, Trace
from hta.parallel import (
    Executor,
    Outcome,
    available_cpus,
    available_memory,
    resolve_executor,
)

logger = logging.getLogger(__name__)

#: ``LoadTask.cache_dir`` meaning "the user cache folder of the machine that loads it".
USER_CACHE = "@user-cache"
#: With ``in_memory=None``, ranks are read into this process when their in-memory size
#: (as measured by the workers) is at most this fraction of the available memory.
IN_MEMORY_FRACTION = 0.5


@dataclass(frozen=True)
class LoadTask:
    """What a worker needs to load one file (small, so it travels cheaply)."""

    path: str  # local path or fsspec URL
    rank_hint: int  # -1 when the rank must be found in the file
    lone_file: bool
    user_rules: tuple[Rule, ...]
    cache_dir: str | None  # None: no cache; USER_CACHE: the loading machine's user cache
    key: str = ""  # cache key; the worker computes it when empty
    decode_workers: int = 1  # processes decoding this one file
    rule_key: str = ""  # fingerprint of the user rules, part of the cache key
    storage_options: dict[str, Any] | None = field(default=None, compare=False)
    temp_dir: str | None = None  # where a temporary entry goes (None: the system's temp)


@dataclass(frozen=True)
class LoadResult:
    """Where the worker left the loaded rank (a Parquet folder), and what it holds."""

    path: str
    rank: int
    entry: str
    from_cache: bool
    temporary: bool
    events: int = 0
    nbytes: int = 0  # in-memory size of the loaded rank (bytes)
    symbols: list[str] = field(default_factory=list, compare=False, repr=False)
    meta: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    worker: str = ""  # Dask worker address that loaded it ("": this machine)
    ref: Any = field(default=None, compare=False, repr=False)  # Dask future of the rank


def _resolve_rank(task: LoadTask, meta_rank: int | None) -> int:
    if task.rank_hint >= 0:
        return task.rank_hint
    if meta_rank is not None:
        return meta_rank
    from_name = rank_from_filename(task.path)
    if from_name is not None:
        return from_name
    if task.lone_file:
        return 0
    raise TraceLoadError(
        task.path,
        "no rank found: the trace has no distributedInfo.rank and the file name has no "
        "rank-N / rank_N / workerN",
        "rename the file or pass trace_files={rank: path}",
    )


def _cache_folder(task: LoadTask) -> Path | None:
    """The cache entry of the task's file, or None without a cache."""
    if task.cache_dir is None:
        return None
    root = user_cache_root() if task.cache_dir == USER_CACHE else Path(task.cache_dir)
    location = trace_location(task.path, task.storage_options)
    try:
        key = task.key or fingerprint(location, task.rule_key)
    except FileNotFoundError as exc:
        raise TraceLoadError(task.path, "the file does not exist (was it moved?)") from exc
    except OSError as exc:
        raise TraceLoadError(task.path, f"cannot read the file: {exc}") from exc
    return entry_path(root, location, key)


def _decode_and_build(task: LoadTask, workers: int = 1) -> RankTrace:
    location = trace_location(task.path, task.storage_options)
    decoded = decode_trace(location, workers=workers)
    rank = _resolve_rank(task, rank_from_metadata(decoded.top_level))
    rank_trace = build_rank(decoded, rank, RuleSet(task.user_rules))
    del decoded
    if isinstance(location, RemotePath):  # build_rank sizes local files only
        rank_trace.meta["file_bytes"] = location.stat().st_size
    return rank_trace


def load_rank(task: LoadTask, store: bool = True) -> tuple[RankTrace, LoadResult]:
    """Decode, build and store one rank as a Parquet folder (the cache entry, else a
    temporary folder unless ``store`` is false); the rank and where it is."""
    folder = _cache_folder(task)
    if folder is not None:
        cached = read_entry(folder)
        if cached is not None:
            return cached, _result(task, cached, folder, True, False)
    rank_trace = _decode_and_build(task, workers=task.decode_workers)
    written = False
    if folder is not None:
        try:
            write_entry(folder, rank_trace)
            written = True
        except OSError as exc:
            logger.warning("could not write the cache for %s (%s); continuing without it",
                           task.path, exc)
    if not written and store:
        folder = Path(tempfile.mkdtemp(prefix="hta-load-", dir=task.temp_dir)) / "rank"
        write_entry(folder, rank_trace)
    rank_trace.meta = stored_meta(rank_trace.meta)  # as every later read of the entry has it
    return rank_trace, _result(task, rank_trace, folder if written or store else None, False,
                               not written and store)


def _result(task: LoadTask, rank_trace: RankTrace, folder: Path | None, from_cache: bool,
            temporary: bool) -> LoadResult:
    from hta.loading.lazy import rank_nbytes

    return LoadResult(
        path=task.path, rank=rank_trace.rank, entry=str(folder) if folder else "",
        from_cache=from_cache,
        temporary=temporary, events=len(rank_trace.events), nbytes=rank_nbytes(rank_trace),
        symbols=list(rank_trace.symbols), meta=dict(rank_trace.meta),
    )


def load_rank_file(task: LoadTask) -> LoadResult:
    """Decode, build and store one rank as a Parquet folder (runs in a worker)."""
    return load_rank(task)[1]


def load_rank_in_process(task: LoadTask) -> RankTrace:
    """Load one rank without the Parquet round trip (single-file, in-process loads).

    The file's events are decoded by as many processes as there are CPUs.
    """
    folder = _cache_folder(task)
    if folder is not None:
        cached = read_entry(folder)
        if cached is not None:
            return cached
    rank_trace = _decode_and_build(task, workers=task.decode_workers)
    if folder is not None:
        try:
            write_entry(folder, rank_trace)
        except OSError as exc:
            logger.warning("could not write the cache for %s: %s", task.path, exc)
    return rank_trace


def drop_last_step(rt: RankTrace) -> None:
    """Remove the events of the rank's last ProfilerStep (HTA's default behaviour)."""
    steps = rt.events["iteration"]
    if not (steps > 0).any():
        return
    last = int(steps.max())
    keep = (steps != last).to_numpy()
    rt.filter_rows(keep)
    logger.info("rank %d: dropped %d events of ProfilerStep#%d", rt.rank, int((~keep).sum()),
                last)


def load_trace(
    trace_dir: str | Path | None = None,
    trace_files: Mapping[int, str | Path] | Iterable[str | Path] | None = None,
    *,
    ranks: Iterable[int] | None = None,
    rules: Iterable[Rule] = (),
    cache: bool = True,
    cache_dir: str | Path | None = None,
    strict: bool = False,
    progress: bool = True,
    executor: Executor | None = None,
    max_workers: int | None = None,
    client: Any = None,
    in_memory: bool | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Trace:
    """Load every rank of a job into a :class:`Trace`.

    A file that fails to load is skipped and reported (``trace.skipped`` maps its path
    to the reason, and a warning is logged) unless ``strict=True``, which raises the
    first failure. Two files claiming the same rank are always an error.

    Where the work runs: ``client`` (a ``distributed.Client``) loads on the Dask cluster's
    workers, which read the files themselves; ``executor`` runs it on any
    :class:`~hta.parallel.Executor`; by default, local processes (``max_workers``).
    ``trace_dir`` and ``trace_files`` may be fsspec URLs (``s3://``, ``gs://``,
    ``memory://``, ``file://``), with ``storage_options`` passed to fsspec.

    Where the ranks stay (``in_memory``): ``True`` reads every rank into this process (a
    plain :class:`Trace`); ``False`` leaves them as Parquet folders, or on the Dask
    workers, and returns a :class:`~hta.loading.lazy.LazyTrace` that reads one rank at a
    time when asked and runs per-rank analyses next to the data
    (:func:`~hta.loading.lazy.map_ranks`); ``None`` (default) keeps them on the Dask
    workers when there is a client, and otherwise reads them into memory when they take
    at most half the available memory, else stays lazy.
    """
    files, explicit = discover(trace_dir, trace_files, storage_options)
    user_rules = tuple(rules)
    rule_key = RuleSet(user_rules).fingerprint()
    runner = resolve_executor(executor, client, max_workers)
    root = _cache_root(files[0].parent, cache_dir) if cache else None
    tasks = [
        LoadTask(
            path=str(f), rank_hint=explicit.get(f, -1), lone_file=len(files) == 1,
            user_rules=user_rules, cache_dir=root, rule_key=rule_key,
            decode_workers=(max_workers or available_cpus())
            if len(files) == 1 and not runner.remote else 1,
            storage_options=storage_options,
        )
        for f in files
    ]
    wanted = set(ranks) if ranks is not None else None
    if wanted is not None:
        tasks = _wanted_tasks(tasks, wanted, files, trace_dir)
    in_process = len(tasks) == 1 and not runner.remote and in_memory is not False
    labels = [trace_location(t.path).name for t in tasks]
    if runner.remote:
        from hta.loading.lazy import kept_summary, load_rank_kept

        kept = runner.map_keep(load_rank_kept, tasks, kept_summary, progress=progress,
                               description="Loading traces", labels=labels)
        outcomes = [Outcome(value=replace(o.value[1], ref=o.value[0])) if o.ok else o
                    for o in kept]
    else:
        worker_fn: Callable[[LoadTask], Any] = (load_rank_in_process if in_process
                                                else load_rank_file)
        outcomes = runner.map(worker_fn, tasks, progress=progress,
                              description="Loading traces", labels=labels)
    loaded: dict[int, tuple[LoadTask, RankTrace | LoadResult]] = {}
    skipped: dict[str, str] = {}
    for task, outcome in zip(tasks, outcomes):
        if not outcome.ok:
            err = outcome.error
            if strict or not isinstance(err, (TraceError, OSError, ValueError, MemoryError)):
                raise err  # type: ignore[misc]
            reason = err.problem if isinstance(err, TraceLoadError) else str(err)
            skipped[task.path] = reason
            logger.warning("skipped %s: %s", task.path, reason)
            continue
        value = outcome.value
        rank = value.rank
        if wanted is not None and rank not in wanted:
            _discard(value)
            continue
        if rank in loaded:
            raise TraceDiscoveryError(
                f"two files claim rank {rank}: {loaded[rank][0].path} and {task.path}; "
                "remove one or pass trace_files={rank: path}"
            )
        loaded[rank] = (task, value)
    if not loaded:
        detail = "; ".join(f"{trace_location(p).name}: {r}" for p, r in skipped.items())
        raise TraceDiscoveryError(f"no rank could be loaded ({detail})" if detail
                                  else "no rank matched the requested ranks")
    where = str(trace_dir) if trace_dir is not None else str(files[0].parent)
    if in_process:
        return Trace({r: v for r, (_, v) in loaded.items()}, trace_dir=where, skipped=skipped)
    results = {r: v for r, (_, v) in loaded.items()}
    keep_out = _keep_out_of_memory(results, runner, in_memory)
    if not keep_out and not runner.remote:
        return Trace({r: _collect(v) for r, v in results.items()}, trace_dir=where,
                     skipped=skipped)
    from hta.loading.lazy import LazyTrace

    lazy = LazyTrace.from_results(results, {r: t for r, (t, _) in loaded.items()}, runner,
                                  trace_dir=where, skipped=skipped, progress=progress)
    if keep_out:
        return lazy
    try:  # in_memory=True on a cluster: bring every rank here, then free the workers
        return lazy.to_memory()
    finally:
        lazy.close()


def _cache_root(parent: Any, cache_dir: str | Path | None) -> str:
    if cache_dir:
        return str(Path(cache_dir).expanduser())
    root = default_cache_root(parent)
    return USER_CACHE if root == user_cache_root() else str(root)


def _wanted_tasks(tasks: list[LoadTask], wanted: set[int], files: list[Any],
                  trace_dir: Any) -> list[LoadTask]:
    """Skip files whose rank is known up front (given, or peeked) and not wanted."""
    by_path = {str(f): f for f in files}
    known = {t.path: (t.rank_hint if t.rank_hint >= 0 else peek_rank(by_path[t.path]))
             for t in tasks}
    kept = [t for t in tasks if known[t.path] is None or known[t.path] in wanted]
    if not kept:
        raise TraceDiscoveryError(
            f"none of the ranks {sorted(wanted)} is in {trace_dir or 'the given files'}; "
            f"found ranks {sorted({r for r in known.values() if r is not None})}"
        )
    return kept


def _keep_out_of_memory(results: Mapping[int, LoadResult], runner: Executor,
                        in_memory: bool | None) -> bool:
    if in_memory is not None:
        return not in_memory
    if runner.remote:
        return True
    total = sum(r.nbytes for r in results.values())
    budget = int(IN_MEMORY_FRACTION * available_memory())
    if total > budget:
        logger.info("the loaded ranks take %.1f GB, more than %.0f%% of the available memory: "
                    "keeping them as Parquet entries, read one rank at a time", total / 1e9,
                    100 * IN_MEMORY_FRACTION)
        return True
    return False


def _discard(value: RankTrace | LoadResult) -> None:
    if not isinstance(value, LoadResult):
        return
    if value.ref is not None:
        value.ref.release()
    elif value.temporary:
        shutil.rmtree(Path(value.entry).parent, ignore_errors=True)


def _collect(result: LoadResult) -> RankTrace:
    folder = Path(result.entry)
    rank_trace = read_entry(folder)
    if result.temporary:
        shutil.rmtree(folder.parent, ignore_errors=True)
    if rank_trace is None:
        raise TraceLoadError(result.path, f"the loaded rank could not be read back from {folder}")
    return rank_trace
