"""Load a job: every rank's file, in parallel, through the Parquet cache."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hta.loading.cache import default_cache_root, entry_path, fingerprint, read_entry, write_entry
from hta.loading.decode import decode_trace
from hta.loading.discovery import discover, peek_rank
from hta.loading.errors import TraceDiscoveryError, TraceError, TraceLoadError
from hta.model.build import build_rank, rank_from_filename, rank_from_metadata
from hta.model.rules import Rule, RuleSet
from hta.model.trace import RankTrace, Trace
from hta.parallel import Executor, available_cpus, resolve_executor

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadTask:
    """What a worker needs to load one file (small, so it travels cheaply)."""

    path: str
    rank_hint: int  # -1 when the rank must be found in the file
    lone_file: bool
    user_rules: tuple[Rule, ...]
    cache_dir: str | None  # None: no cache; the worker hands back a temporary entry
    key: str
    decode_workers: int = 1  # processes decoding this one file


@dataclass(frozen=True)
class LoadResult:
    """Where the worker left the loaded rank (a Parquet folder) and whether it was cached."""

    path: str
    rank: int
    entry: str
    from_cache: bool
    temporary: bool


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


def load_rank_file(task: LoadTask) -> LoadResult:
    """Decode, build and store one rank as a Parquet folder (runs in a worker)."""
    rules = RuleSet(task.user_rules)
    if task.cache_dir is not None:
        folder = entry_path(Path(task.cache_dir), Path(task.path), task.key)
        cached = read_entry(folder)
        if cached is not None:
            return LoadResult(task.path, cached.rank, str(folder), True, False)
    decoded = decode_trace(task.path)
    rank = _resolve_rank(task, rank_from_metadata(decoded.top_level))
    rank_trace = build_rank(decoded, rank, rules)
    del decoded
    if task.cache_dir is not None:
        folder = entry_path(Path(task.cache_dir), Path(task.path), task.key)
        try:
            write_entry(folder, rank_trace)
            return LoadResult(task.path, rank, str(folder), False, False)
        except OSError as exc:
            logger.warning("could not write the cache for %s (%s); continuing without it",
                           task.path, exc)
    folder = Path(tempfile.mkdtemp(prefix="hta-load-")) / "rank"
    write_entry(folder, rank_trace)
    temporary = True
    return LoadResult(task.path, rank, str(folder), False, temporary)


def load_rank_in_process(task: LoadTask) -> RankTrace:
    """Load one rank without the Parquet round trip (single-file, in-process loads).

    The file's events are decoded by as many processes as there are CPUs.
    """
    rules = RuleSet(task.user_rules)
    if task.cache_dir is not None:
        folder = entry_path(Path(task.cache_dir), Path(task.path), task.key)
        cached = read_entry(folder)
        if cached is not None:
            return cached
    decoded = decode_trace(task.path, workers=task.decode_workers)
    rank = _resolve_rank(task, rank_from_metadata(decoded.top_level))
    rank_trace = build_rank(decoded, rank, rules)
    if task.cache_dir is not None:
        try:
            write_entry(entry_path(Path(task.cache_dir), Path(task.path), task.key), rank_trace)
        except OSError as exc:
            logger.warning("could not write the cache for %s: %s", task.path, exc)
    return rank_trace


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
) -> Trace:
    """Load every rank of a job into a :class:`Trace`.

    A file that fails to load is skipped and reported (``trace.skipped`` maps its path
    to the reason, and a warning is logged) unless ``strict=True``, which raises the
    first failure. Two files claiming the same rank are always an error.
    """
    files, explicit = discover(trace_dir, trace_files)
    user_rules = tuple(rules)
    rule_key = RuleSet(user_rules).fingerprint()
    root: Path | None = None
    if cache:
        root = Path(cache_dir).expanduser() if cache_dir else default_cache_root(files[0].parent)
    tasks = [
        LoadTask(
            path=str(f), rank_hint=explicit.get(f, -1), lone_file=len(files) == 1,
            user_rules=user_rules, cache_dir=str(root) if root else None,
            key=fingerprint(f, rule_key) if root else "",
            decode_workers=(max_workers or available_cpus()) if len(files) == 1 else 1,
        )
        for f in files
    ]
    wanted = set(ranks) if ranks is not None else None
    if wanted is not None:
        known = {t.path: (t.rank_hint if t.rank_hint >= 0 else peek_rank(Path(t.path)))
                 for t in tasks}
        # Skip files whose rank is known up front and not wanted.
        tasks = [t for t in tasks if known[t.path] is None or known[t.path] in wanted]
        if not tasks:
            raise TraceDiscoveryError(
                f"none of the ranks {sorted(wanted)} is in {trace_dir or 'the given files'}; "
                f"found ranks {sorted({r for r in known.values() if r is not None})}"
            )
    loaded: dict[int, RankTrace] = {}
    sources: dict[int, str] = {}
    skipped: dict[str, str] = {}
    runner = resolve_executor(executor, max_workers=max_workers)
    if len(tasks) == 1:
        outcomes = runner.map(load_rank_in_process, tasks, progress=progress,
                              description="Loading traces")
    else:
        outcomes = runner.map(load_rank_file, tasks, progress=progress,
                              description="Loading traces")
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
        rank_trace = value if isinstance(value, RankTrace) else _collect(value)
        rank = rank_trace.rank
        if wanted is not None and rank not in wanted:
            continue
        if rank in loaded:
            raise TraceDiscoveryError(
                f"two files claim rank {rank}: {sources[rank]} and {task.path}; "
                "remove one or pass trace_files={rank: path}"
            )
        loaded[rank] = rank_trace
        sources[rank] = task.path
    if not loaded:
        detail = "; ".join(f"{Path(p).name}: {r}" for p, r in skipped.items())
        raise TraceDiscoveryError(f"no rank could be loaded ({detail})" if detail
                                  else "no rank matched the requested ranks")
    return Trace(loaded, trace_dir=str(trace_dir or files[0].parent), skipped=skipped)


def _collect(result: LoadResult) -> RankTrace:
    folder = Path(result.entry)
    rank_trace = read_entry(folder)
    if result.temporary:
        shutil.rmtree(folder.parent, ignore_errors=True)
    if rank_trace is None:
        raise TraceLoadError(result.path, f"the loaded rank could not be read back from {folder}")
    return rank_trace
