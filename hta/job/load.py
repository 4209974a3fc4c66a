"""Load a job: every rank's file, in parallel, through the cache.

Workers (local processes, or Dask workers when a ``distributed.Client`` is given) decode
their files (:mod:`hta.job.rank_load`) and leave each rank as an Arrow folder: the
cache entry, or a temporary one.
Then either every rank is read back into this process (a plain :class:`Trace`), or the
ranks stay where they are and a :class:`~hta.job.distributed.DistributedJob` holds handles to
them, reading one rank at a time when asked (see :func:`load_trace`, ``in_memory``).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hta.errors import MissingRanksError, TraceDiscoveryError, TraceError, TraceLoadError
from hta.job.cache import (
    CACHE_DIR_ENV,
    default_cache_root,
    read_entry,
    remove_leftovers,
    user_cache_root,
)
from hta.job.executors import (
    Executor,
    Outcome,
    SerialExecutor,
    available_cpus,
    available_memory,
    resolve_executor,
)
from hta.job.rank_load import (
    USER_CACHE,
    LoadResult,
    LoadTask,
    kept_summary,
    load_rank_file,
    load_rank_in_process,
    load_rank_kept,
    remove_temporary_leftovers,
)
from hta.kineto.discovery import TracePath, discover
from hta.kineto.files import trace_location
from hta.kineto.rank import peek_rank
from hta.model.rules import Rule, RuleSet
from hta.model.trace import RankTrace, Trace
from hta.model.vocabulary import rank_list

if TYPE_CHECKING:
    from hta.job.distributed import DistributedJob

logger = logging.getLogger(__name__)

#: A job of several local files taking at most this many bytes on disk (compressed as
#: they are) is decoded in this process, one file after the other, when no executor,
#: client or ``max_workers`` is given: two worker processes and the Arrow round trip cost
#: more than that.
SMALL_JOB_BYTES = 4 << 20

#: With ``in_memory=None``, ranks are read into this process when their in-memory size
#: (as measured by the workers) is at most this fraction of the available memory.
IN_MEMORY_FRACTION = 0.5


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
    trace_files: Mapping[int, str | TracePath] | Iterable[str | TracePath] | None = None,
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
) -> Trace | DistributedJob:
    """Load every rank of a job into a :class:`Trace`.

    A file that fails to load is skipped and reported (``trace.skipped`` maps its path
    to the reason, and a warning is logged) unless ``strict=True``, which raises the
    first failure. Two files claiming the same rank are always an error.

    Where the work runs: ``client`` (a ``distributed.Client``) loads on the Dask cluster's
    workers, which read the files themselves; ``executor`` runs it on any
    :class:`~hta.job.executors.Executor`; by default, local processes (``max_workers``).
    ``trace_dir`` and ``trace_files`` may be fsspec URLs (``s3://``, ``gs://``,
    ``memory://``, ``file://``), with ``storage_options`` passed to fsspec.

    Where the ranks stay (``in_memory``): ``True`` reads every rank into this process (a
    plain :class:`Trace`); ``False`` leaves them as Arrow folders, or on the Dask
    workers, and returns a :class:`~hta.job.distributed.DistributedJob` that reads one rank
    at a time when asked and runs per-rank analyses next to the data
    (:func:`hta.model.runner.run`); ``None`` (default) keeps them on the Dask
    workers when there is a client, and otherwise reads them into memory when they take
    at most half the available memory, else stays lazy.
    """
    files, explicit = discover(trace_dir, trace_files, storage_options)
    runner = resolve_executor(executor, client, max_workers)
    root = _cache_root(files[0].parent, cache_dir) if cache else None
    if root is not None and not runner.remote:
        remove_leftovers(user_cache_root() if root == USER_CACHE else Path(root))
    if not runner.remote:  # a killed load's half-written temporary ranks
        remove_temporary_leftovers()
    tasks = _load_tasks(files, explicit, tuple(rules), runner, root, max_workers,
                        storage_options)
    listed = rank_list(ranks)
    wanted = set(listed) if listed is not None else None
    if wanted is not None:
        tasks = _wanted_tasks(tasks, wanted, files, trace_dir)
    small = executor is None and client is None and max_workers is None and \
        len(tasks) > 1 and small_local_job([t.path for t in tasks])
    in_process = (len(tasks) == 1 or small) and not runner.remote and in_memory is not False
    # a small job of several files: decoded here one file after the other (starting worker
    # processes and reading their Arrow folders back costs more than the decoding)
    outcomes = _run_tasks(SerialExecutor() if small and in_process else runner, tasks,
                          in_process, progress)
    try:
        loaded, skipped = _gather(tasks, outcomes, wanted, strict)
    except BaseException:  # a strict failure, two files for one rank: free what loaded
        for outcome in outcomes:
            if outcome.ok:
                _discard(outcome.value)
        raise
    where = str(trace_dir) if trace_dir is not None else str(files[0].parent)
    if in_process:
        return Trace({r: v for r, (_, v) in loaded.items()}, trace_dir=where, skipped=skipped,
                     workers=max_workers, progress=progress)
    results = {r: v for r, (_, v) in loaded.items()}
    keep_out = _keep_out_of_memory(results, runner, in_memory)
    if not keep_out and not runner.remote:
        return Trace(_collect_all(results, skipped, strict), trace_dir=where,
                     skipped=skipped, workers=max_workers, progress=progress)
    # imported here: a job read into memory never needs it (nor what it imports)
    from hta.job.distributed import DistributedJob

    lazy = DistributedJob.from_results(results, {r: t for r, (t, _) in loaded.items()},
                                       runner, trace_dir=where, skipped=skipped,
                                       progress=progress)
    if keep_out:
        return lazy
    try:  # in_memory=True on a cluster: bring every rank here, then free the workers
        return lazy.to_memory()
    finally:
        lazy.close()


def small_local_job(paths: Iterable[str]) -> bool:
    """True when every path is a local file and together they take at most
    :data:`SMALL_JOB_BYTES` on disk: such a job loads fastest in this process."""
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size
        except (OSError, ValueError, TypeError):  # a URL, or a file gone: not small-local
            return False
        if total > SMALL_JOB_BYTES:
            return False
    return True


def _load_tasks(files: list[Any], explicit: dict[Any, int], user_rules: tuple[Rule, ...],
                runner: Executor, root: str | None, max_workers: int | None,
                storage_options: dict[str, Any] | None) -> list[LoadTask]:
    """One task per file. Loaded here or by local processes, a file is decoded on its
    share of the workers (``max_workers``, else the CPUs): a lone file on all of them,
    two files on half each, and so on (:func:`hta.kineto.decode.decode_trace` uses them
    only for a large file)."""
    rule_key = RuleSet(user_rules).fingerprint()
    share = 1 if runner.remote else max(1, (max_workers or available_cpus()) // len(files))
    return [
        LoadTask(
            path=str(f), rank_hint=explicit.get(f, -1), lone_file=len(files) == 1,
            user_rules=user_rules, cache_dir=root, rule_key=rule_key,
            decode_workers=share,
            storage_options=storage_options,
        )
        for f in files
    ]


def _run_tasks(runner: Executor, tasks: list[LoadTask], in_process: bool,
               progress: bool) -> list[Outcome]:
    """Load every task's rank: kept on the Dask workers (remote runner), read in this
    process (``in_process``), or left as Arrow folders by worker processes."""
    labels = [trace_location(t.path).name for t in tasks]
    if runner.remote:
        kept = runner.map_keep(load_rank_kept, tasks, kept_summary, progress=progress,
                               description="Loading traces", labels=labels)
        return [Outcome(value=replace(o.result[1], ref=o.result[0])) if o.ok else o
                for o in kept]
    worker_fn: Callable[[LoadTask], Any] = (load_rank_in_process if in_process
                                            else load_rank_file)
    return runner.map(worker_fn, tasks, progress=progress, description="Loading traces",
                      labels=labels)


def _gather(tasks: list[LoadTask], outcomes: list[Outcome], wanted: set[int] | None,
            strict: bool) -> tuple[dict[int, tuple[LoadTask, Any]], dict[str, str]]:
    """The loaded ranks by rank (with their task: a RankTrace when loaded in this process,
    else a LoadResult) and the skipped files with the reason;
    raises the first failure with ``strict``, and when two files claim one rank or no
    rank loaded."""
    loaded: dict[int, tuple[LoadTask, Any]] = {}
    skipped: dict[str, str] = {}
    for task, outcome in zip(tasks, outcomes):
        if not outcome.ok:
            err = file_error(task.path, outcome.error)
            if strict:
                raise err from (None if err is outcome.error else outcome.error)
            skipped[task.path] = err.problem
            logger.warning("skipped %s: %s", task.path, err.problem)
            continue
        value = outcome.result
        rank = value.rank
        if wanted is not None and rank not in wanted:
            _discard(value)
            continue
        if rank in loaded:
            clash = f"two files claim rank {rank}: {loaded[rank][0].path} and {task.path}"
            raise TraceDiscoveryError(
                f"{clash}; remove one or pass trace_files={{rank: path}}",
                cli_message=f"{clash}; move one of them out of the folder, or select the "
                            "ranks to load with --ranks")
        loaded[rank] = (task, value)
    if not loaded:
        detail = "; ".join(f"{trace_location(p).name}: {r}" for p, r in skipped.items())
        if not detail:
            raise MissingRanksError("no rank matched the requested ranks")
        raise TraceDiscoveryError(f"no rank could be loaded ({detail})")
    return loaded, skipped


def file_error(path: str, error: BaseException | None) -> TraceLoadError:
    """What went wrong with one file, as a :class:`TraceLoadError` naming it: the error
    itself when it is one, else one whose problem says what the error was.

    Any failure of one file's loading is that file's (an unexpected error too: a bug
    met by an odd file must not cost the other ranks); only an interrupt is not.
    """
    if isinstance(error, TraceLoadError) and error.path == path:
        return error
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        raise error
    if isinstance(error, TraceError):
        problem = getattr(error, "problem", None) or str(error)
    elif isinstance(error, (OSError, ValueError, MemoryError)):
        problem = str(error) or type(error).__name__
    else:
        problem = f"unexpected {type(error).__name__} while loading it: {error}"
    return TraceLoadError(path, problem)


def _cache_root(parent: Any, cache_dir: str | Path | None) -> str:
    cache_dir = cache_dir or os.environ.get(CACHE_DIR_ENV)  # the argument, else the variable
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
        raise MissingRanksError(
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
                    "keeping them as Arrow entries, read one rank at a time", total / 1e9,
                    100 * IN_MEMORY_FRACTION)
        return True
    return False


def _discard(value: RankTrace | LoadResult | None) -> None:
    if not isinstance(value, LoadResult):
        return
    if value.ref is not None:
        value.ref.release()
    elif value.temporary:
        shutil.rmtree(Path(value.entry).parent, ignore_errors=True)


def _collect_all(results: Mapping[int, LoadResult], skipped: dict[str, str],
                 strict: bool) -> dict[int, RankTrace]:
    """Every loaded rank read back into this process; a rank that cannot be read back
    is skipped like a file that failed to load (``strict``: raised)."""
    ranks: dict[int, RankTrace] = {}
    for rank, result in results.items():
        try:
            ranks[rank] = _collect(result)
        except Exception as exc:  # noqa: BLE001 - the rank's own failure, reported
            err = file_error(result.path, exc)
            if strict:
                for later in results.values():
                    if later.temporary and later.path != result.path:
                        shutil.rmtree(Path(later.entry).parent, ignore_errors=True)
                raise err from (None if err is exc else exc)
            skipped[result.path] = err.problem
            logger.warning("skipped %s: %s", result.path, err.problem)
    if not ranks:
        raise TraceDiscoveryError("no rank could be loaded (" + "; ".join(
            f"{trace_location(p).name}: {r}" for p, r in skipped.items()) + ")")
    return ranks


def _collect(result: LoadResult) -> RankTrace:
    folder = Path(result.entry)
    rank_trace = read_entry(folder)
    if result.temporary:
        shutil.rmtree(folder.parent, ignore_errors=True)
    if rank_trace is None:
        raise TraceLoadError(result.path, f"the loaded rank could not be read back from {folder}")
    rank_trace.meta["source"] = result.meta.get("source", rank_trace.meta.get("source"))
    if isinstance(result.meta.get("warnings"), list):  # with what the worker added
        rank_trace.meta["warnings"] = list(result.meta["warnings"])
    return rank_trace
