"""Loading one rank: read its cache entry, or decode and link its file and leave it as an
Arrow folder (the cache entry, or a temporary one) that another process can read.

Both the job loader (:mod:`hta.job.load`) and the lazy ranks
(:mod:`hta.job.distributed`, which load a rank again when its copy is gone) build on this
module; it imports neither of them.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hta.errors import TraceLoadError
from hta.job.cache import (
    entry_path,
    fingerprint,
    read_entry,
    remove_leftovers,
    stored_meta,
    user_cache_root,
    write_entry,
)
from hta.kineto.decode import decode_trace, require_durations
from hta.kineto.files import trace_location
from hta.kineto.rank import MAX_WORLD_SIZE, file_rank
from hta.model.build import build_rank
from hta.model.rules import Rule, RuleSet
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

#: ``LoadTask.cache_dir`` meaning "the user cache folder of the machine that loads it".
USER_CACHE = "@user-cache"
#: Prefix of the temporary folder a rank loaded without a cache entry is stored in.
TEMPORARY_PREFIX = "hta-load-"


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
    """Where the worker left the loaded rank (an Arrow folder), and what it holds."""

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


def rank_of(task: LoadTask, top_level: dict[str, Any]) -> tuple[int, list[str]]:
    """The rank of a decoded file, and the warnings its ``distributedInfo`` calls for: the
    file format's rules (:func:`hta.kineto.rank.file_rank`), with the task's given rank
    and whether it is the only file."""
    return file_rank(task.path, top_level, given=task.rank_hint, lone_file=task.lone_file)


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


def task_source(task: LoadTask) -> str:
    """Where the task's trace is, as any working folder reads it: an absolute local path
    (normalised, symbolic links kept as the user named them) or the URL (a cache entry
    may have been written from another folder or copy)."""
    location = trace_location(task.path, task.storage_options)
    return os.path.abspath(location) if isinstance(location, Path) else location.url


def _from_cache(task: LoadTask, folder: Path, problems: list[str]) -> RankTrace | None:
    """The task's cached rank, or None (``problems`` says why when the entry was there
    but damaged)."""
    cached = read_entry(folder, problems)
    if cached is not None:
        cached.meta["source"] = task_source(task)
    return cached


def _tell(rank_trace: RankTrace, task: LoadTask, problems: list[str]) -> None:
    """Add what happened to the cache entry to the rank's warnings (after it was written:
    the rebuilt entry itself does not carry it)."""
    if problems:
        warnings = list(rank_trace.meta.get("warnings") or [])
        rank_trace.meta["warnings"] = warnings + [p for p in problems if p not in warnings]
        for problem in problems:
            logger.warning("%s: %s", task.path, problem)


def _decode_and_build(task: LoadTask, workers: int = 1) -> RankTrace:
    location = trace_location(task.path, task.storage_options)
    decoded = decode_trace(location, workers=workers)
    require_durations(decoded)
    rank, notes = rank_of(task, decoded.top_level)
    for note in notes:
        logger.warning("%s: %s", task.path, note)
    decoded.warnings.extend(notes)
    rank_trace = build_rank(decoded, rank, RuleSet(task.user_rules))
    del decoded
    rank_trace.meta["source"] = task_source(task)
    world = rank_trace.meta.get("world_size")
    if world is not None and not 1 <= world <= MAX_WORLD_SIZE:
        note = f"distributedInfo.world_size {world} is not a world size; ignored"
        logger.warning("%s: %s", task.path, note)
        rank_trace.meta["world_size"] = None
        rank_trace.meta["warnings"] = [*rank_trace.meta.get("warnings", []), note]
    return rank_trace


def load_rank(task: LoadTask, store: bool = True) -> tuple[RankTrace, LoadResult]:
    """Decode, build and store one rank as a Arrow folder (the cache entry, else a
    temporary folder unless ``store`` is false); the rank and where it is."""
    folder = _cache_folder(task)
    problems: list[str] = []
    if folder is not None:
        cached = _from_cache(task, folder, problems)
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
        folder = Path(tempfile.mkdtemp(prefix=TEMPORARY_PREFIX, dir=task.temp_dir)) / "rank"
        try:
            write_entry(folder, rank_trace)
        except BaseException:  # a full disk: leave no empty temporary folder behind
            shutil.rmtree(folder.parent, ignore_errors=True)
            raise
    rank_trace.meta = stored_meta(rank_trace.meta)  # as every later read of the entry has it
    _tell(rank_trace, task, problems)
    return rank_trace, _result(task, rank_trace, folder if written or store else None, False,
                               not written and store)


def remove_temporary_leftovers(temp_dir: str | Path | None = None) -> int:
    """Remove what killed loads left in the temporary folders (``temp_dir``, default the
    system's): the half-written entries (``.rank.tmp-HOST-PID-*``) of processes of this
    machine that are gone (:func:`~hta.job.cache.remove_leftovers`), then the
    temporary folders left empty. A folder holding a whole entry may be a lazily held
    rank of a live process, and is kept; an empty one being filled right now is made
    again by its writer (:func:`~hta.job.cache.write_entry` makes its parent).
    Returns how many entries and folders were removed."""
    root = Path(temp_dir or tempfile.gettempdir())
    removed = 0
    try:
        folders = [p for p in root.iterdir() if p.name.startswith(TEMPORARY_PREFIX)]
    except OSError:
        return 0
    for folder in folders:
        removed += remove_leftovers(folder)
        try:
            folder.rmdir()  # only when empty
            removed += 1
        except OSError:
            pass
    return removed


def _result(task: LoadTask, rank_trace: RankTrace, folder: Path | None, from_cache: bool,
            temporary: bool) -> LoadResult:
    return LoadResult(
        path=task.path, rank=rank_trace.rank, entry=str(folder) if folder else "",
        from_cache=from_cache,
        temporary=temporary, events=len(rank_trace.events), nbytes=rank_nbytes(rank_trace),
        symbols=list(rank_trace.symbols), meta=dict(rank_trace.meta),
    )


def load_rank_file(task: LoadTask) -> LoadResult:
    """Decode, build and store one rank as a Arrow folder (runs in a worker)."""
    return load_rank(task)[1]


def load_rank_in_process(task: LoadTask) -> RankTrace:
    """Load one rank without the Arrow round trip (single-file, in-process loads).

    The file's events are decoded by as many processes as there are CPUs.
    """
    folder = _cache_folder(task)
    problems: list[str] = []
    if folder is not None:
        cached = _from_cache(task, folder, problems)
        if cached is not None:
            return cached
    rank_trace = _decode_and_build(task, workers=task.decode_workers)
    if folder is not None:
        try:
            write_entry(folder, rank_trace)
        except OSError as exc:
            logger.warning("could not write the cache for %s: %s", task.path, exc)
    _tell(rank_trace, task, problems)
    return rank_trace


@dataclass
class KeptRank:
    """A rank held by a Dask worker, with what its loading reported."""

    rank_trace: RankTrace
    result: LoadResult

    def __sizeof__(self) -> int:
        # Dask sizes data with sys.getsizeof: report the rank's real size, so its memory
        # manager and scheduler weigh it (spilling, keeping work next to it).
        return self.result.nbytes + 1024


def rank_nbytes(rt: RankTrace) -> int:
    """Bytes a loaded rank takes in memory: events, side tables (strings included) and
    the symbol table."""
    total = int(rt.events.memory_usage(index=False, deep=False).sum())
    for frame in rt.tables.values():
        total += int(frame.memory_usage(index=False, deep=True).sum())
    total += sum(len(s) + 49 for s in rt.symbols) + 8 * len(rt.symbols)
    return total + int(getattr(rt.unclassified, "nbytes", 0))


def load_rank_kept(task: LoadTask) -> KeptRank:
    """Dask side of loading: the rank stays in this worker's memory (and in the cache
    when there is one; no temporary folder is written)."""
    rank_trace, result = load_rank(task, store=False)
    return KeptRank(rank_trace, result)


def kept_summary(kept: KeptRank) -> LoadResult:
    """What the client needs to know of a kept rank (runs in the worker holding it)."""
    from distributed import get_worker

    return replace(kept.result, worker=get_worker().address)


