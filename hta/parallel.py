"""One executor interface for per-rank work.

Per-rank work (loading a file, running a per-rank analysis) goes through
:class:`Executor.map`. :class:`LocalExecutor` runs it in local worker processes (or
in-process for a single item); a Dask-backed executor can implement the same method.
Results come back in the order of the inputs, each either a value or the exception the
item raised, so one bad rank never sinks the others.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from hta.progress import progress_bar

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Outcome(Generic[R]):
    """The result of one item: ``value`` on success, else ``error``."""

    value: R | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        """True when the item succeeded."""
        return self.error is None


class Executor:
    """Runs a function over items; subclasses decide where."""

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, progress: bool = True,
        description: str = "", labels: Sequence[str] | None = None,
    ) -> list[Outcome[R]]:
        """Apply ``fn`` to every item; never raises for an item's own failure."""
        raise NotImplementedError


class SerialExecutor(Executor):
    """Everything in the calling process, one item after the other."""

    def map(self, fn, items, *, progress=True, description="", labels=None):  # noqa: D102
        out: list[Outcome] = []
        with progress_bar(len(items), description, enabled=progress) as bar:
            for item in items:
                try:
                    out.append(Outcome(value=fn(item)))
                except Exception as exc:  # noqa: BLE001 - reported per item
                    out.append(Outcome(error=exc))
                bar.update(1)
        return out


class LocalExecutor(Executor):
    """Local worker processes, one item per task; in-process for a single item.

    ``max_workers`` defaults to the number of CPUs the process may use.
    """

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or available_cpus()

    def map(self, fn, items, *, progress=True, description="", labels=None):  # noqa: D102
        workers = min(self.max_workers, len(items))
        if workers <= 1:
            return SerialExecutor().map(fn, items, progress=progress, description=description)
        results: list[Outcome] = [Outcome() for _ in items]
        with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as pool, progress_bar(
            len(items), description, enabled=progress
        ) as bar:
            futures: dict[Future, int] = {pool.submit(fn, item): i for i, item in enumerate(items)}
            for future in as_completed(futures):
                i = futures[future]
                try:
                    results[i] = Outcome(value=future.result())
                except Exception as exc:  # noqa: BLE001 - reported per item
                    results[i] = Outcome(error=exc)
                bar.update(1)
        return results


def _context() -> Any:
    """Fork on Linux: workers inherit loaded modules and user scripts need no
    ``if __name__ == "__main__"`` guard; the platform default elsewhere."""
    import multiprocessing
    import sys

    if sys.platform == "linux":
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def available_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def resolve_executor(executor: Executor | None = None, client: Any = None,
                     max_workers: int | None = None) -> Executor:
    """Pick the executor: an explicit one, a Dask client's, or local processes."""
    if executor is not None:
        return executor
    if client is not None:
        raise NotImplementedError(
            "running on a Dask cluster is not available in this version; "
            "omit client= to use local processes"
        )
    return LocalExecutor(max_workers)
