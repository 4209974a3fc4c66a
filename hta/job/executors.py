"""One executor interface for per-rank work: local processes, or a Dask cluster.

Per-rank work (loading a file, running a per-rank analysis) goes through
:meth:`Executor.map`. Results come back in the order of the inputs, each an
:class:`Outcome` holding either a value or the exception the item raised, so one bad rank
never sinks the others.

* :class:`LocalExecutor` (the default): forked local worker processes, in-process for a
  single item. No set-up.
* :class:`DaskExecutor`: the workers of a ``distributed.Client`` (``pip install
  'hta[dask]'``). :meth:`Executor.map_keep` leaves each result in the worker that
  computed it (a Dask future), and ``map(..., data=futures)`` runs each item where its
  data is; when that worker is gone, Dask computes the data again on another one.
* :class:`SerialExecutor`: everything in the calling process.

Worker death. A process that dies while running an item (killed by the kernel's OOM
killer, a segfault in a native library, ``os._exit``) does not lose the other items: the
items it may have been running are run again, each alone in a fresh process (local) or
one at a time (Dask, after Dask's own retries), and an item whose worker dies again gets
a :class:`WorkerDiedError` naming it. For tests, the environment variable
``HTA_FAULT_EXIT_ON`` makes a worker process exit abruptly when it starts an item whose
label contains that text (see :func:`run_item`).
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, as_completed
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from hta.errors import TraceError
from hta.progress import progress_bar

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: Environment variable of the fault-injection hook used by the tests (see run_item).
FAULT_ENV = "HTA_FAULT_EXIT_ON"
FAULT_EXIT_CODE = 70


@dataclass
class Outcome(Generic[R]):
    """The result of one item: ``value`` on success, else ``error``."""

    value: R | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        """True when the item succeeded."""
        return self.error is None

    @property
    def result(self) -> R:
        """``value``, typed as the item's result: read it only when :attr:`ok`."""
        return cast(R, self.value)


class WorkerDiedError(TraceError):
    """The process running an item died (twice: the item was retried alone once)."""

    def __init__(self, label: str, detail: str = "") -> None:
        self.label = label
        self.detail = detail
        text = (f"{label}: the worker process running it died (out of memory, or a crash in "
                "native code)")
        if detail:
            text += f": {detail}"
        super().__init__(text)

    def __reduce__(self) -> tuple[type[WorkerDiedError], tuple[str, str]]:
        return (type(self), (self.label, self.detail))


def run_item(fn: Callable[..., R], item: Any, label: str, *data: Any) -> R:
    """Run ``fn(*data, item)`` in a worker; the test hook ``HTA_FAULT_EXIT_ON`` lives here.

    When that variable is set and its value occurs in ``label``, the process exits at
    once with status 70, as a worker killed by the OOM killer would vanish.
    """
    trigger = os.environ.get(FAULT_ENV)
    if trigger and trigger in label:
        os._exit(FAULT_EXIT_CODE)
    return fn(*data, item)


class Executor:
    """Runs a function over items; subclasses decide where."""

    #: True when items run in other processes that keep their state between calls
    #: (Dask workers): data may be left there and found again by later items.
    remote = False

    def map(
        self, fn: Callable[..., R], items: Sequence[T], *, progress: bool = True,
        description: str = "", labels: Sequence[str] | None = None,
        data: Sequence[Any] | None = None,
    ) -> list[Outcome[R]]:
        """``fn(item)`` for every item, or ``fn(data[i], item)`` when ``data`` is given;
        never raises for an item's own failure.

        ``data[i]`` is what item ``i`` works on: a reference returned by :meth:`map_keep`
        (on Dask a future: the item runs in the worker holding it and gets its value).
        ``labels`` name the items in errors (default: their position). ``fn`` must be a
        module-level function (it is sent to other processes by reference).
        """
        raise NotImplementedError

    def map_keep(
        self, fn: Callable[..., Any], items: Sequence[T], summary: Callable[[Any], R], *,
        progress: bool = True, description: str = "", labels: Sequence[str] | None = None,
        data: Sequence[Any] | None = None,
    ) -> list[Outcome[tuple[Any, R]]]:
        """``fn(item)`` (``fn(data[i], item)`` when ``data`` is given, as :meth:`map`)
        for every item, its result kept where it was computed; per item
        ``(reference, summary(result))``. Pass the references as ``data`` to :meth:`map`
        and to :meth:`release`.

        Local executors keep nothing: the reference is the result itself (so ``fn`` should
        return something small, such as where it stored its work).
        """
        outcomes = self.map(fn, items, progress=progress, description=description,
                            labels=labels, data=data)
        return [Outcome(value=(o.value, summary(o.value))) if o.ok else Outcome(error=o.error)
                for o in outcomes]

    def release(self, references: Sequence[Any]) -> None:
        """Free what :meth:`map_keep` kept (nothing for local executors)."""


def _labels(items: Sequence[Any], labels: Sequence[str] | None) -> list[str]:
    return list(labels) if labels is not None else [f"item {i}" for i in range(len(items))]


class SerialExecutor(Executor):
    """Everything in the calling process, one item after the other."""

    def map(self, fn, items, *, progress=True, description="", labels=None,  # noqa: D102
            data=None):
        names = _labels(items, labels)
        out: list[Outcome] = []
        with progress_bar(len(items), description, enabled=progress) as bar:
            for i, (item, label) in enumerate(zip(items, names)):
                try:
                    out.append(Outcome(value=run_item(fn, item, label, *_data(data, i))))
                except Exception as exc:  # noqa: BLE001 - reported per item
                    out.append(Outcome(error=exc))
                bar.update(1)
        return out


class LocalExecutor(Executor):
    """Local worker processes, one item per task; in-process for a single item.

    ``max_workers`` defaults to the number of CPUs the process may use. When a worker
    process dies, the pool is lost: the items not finished then are run again, each in a
    process of its own, so only the item that kills its process fails.
    """

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or available_cpus()

    def map(self, fn, items, *, progress=True, description="", labels=None,  # noqa: D102
            data=None):
        n_workers = min(self.max_workers, len(items))
        if n_workers <= 1:
            return SerialExecutor().map(fn, items, progress=progress, description=description,
                                        labels=labels, data=data)
        # imported here: a job loaded in this process never starts a pool (the process
        # pool's modules, multiprocessing among them, take a few ms to import)
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        names = _labels(items, labels)
        results: list[Outcome] = [Outcome() for _ in items]
        unfinished: list[int] = []
        with progress_bar(len(items), description, enabled=progress) as bar:
            with ProcessPoolExecutor(max_workers=n_workers, mp_context=_context()) as pool:
                futures: dict[Future, int] = {
                    pool.submit(run_item, fn, item, names[i], *_data(data, i)): i
                    for i, item in enumerate(items)
                }
                for future in as_completed(futures):
                    i = futures[future]
                    try:
                        results[i] = Outcome(value=future.result())
                    except BrokenProcessPool:
                        unfinished.append(i)
                        continue
                    except Exception as exc:  # noqa: BLE001 - reported per item
                        results[i] = Outcome(error=exc)
                    bar.update(1)
            if unfinished:
                logger.warning("a worker process died; running %d unfinished item(s) again, "
                               "each in its own process", len(unfinished))
                with ThreadPoolExecutor(max_workers=n_workers) as threads:
                    retried = {threads.submit(_run_isolated, fn, items[i], names[i],
                                              _data(data, i)): i
                               for i in sorted(unfinished)}
                    for future in as_completed(retried):
                        results[retried[future]] = future.result()
                        bar.update(1)
        return results


def _data(data: Sequence[Any] | None, i: int) -> tuple[Any, ...]:
    return () if data is None else (data[i],)


def _run_isolated(fn: Callable[..., R], item: Any, label: str,
                  data: tuple[Any, ...]) -> Outcome[R]:
    """One item in a process of its own: its death costs nothing else."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(max_workers=1, mp_context=_context()) as pool:
        try:
            return Outcome(value=pool.submit(run_item, fn, item, label, *data).result())
        except BrokenProcessPool:
            error = WorkerDiedError(label)
            logger.warning("%s", error)
            return Outcome(error=error)
        except Exception as exc:  # noqa: BLE001 - reported per item
            return Outcome(error=exc)


class DaskExecutor(Executor):
    """The workers of a Dask ``distributed.Client``.

    Each item is one Dask task. Dask retries a task whose worker died (up to the
    scheduler's ``distributed.scheduler.allowed-failures``); a task that still ends in
    ``KilledWorker`` is run once more on its own, so that tasks which merely shared the
    dying worker succeed, and reported as :class:`WorkerDiedError` if it fails again.
    Kept results (:meth:`map_keep`) are Dask futures: the data stays in the worker's
    memory (managed, and spilled to its disk, by Dask), and an item given one as ``data``
    runs in that worker; if the worker is lost, Dask computes the data again elsewhere.
    """

    remote = True

    def __init__(self, client: Any) -> None:
        self.client = client

    def map(self, fn, items, *, progress=True, description="", labels=None,  # noqa: D102
            data=None):
        names = _labels(items, labels)
        what = description or getattr(fn, "__name__", "task")

        def submit(i: int) -> Any:
            return self._submit(run_item, (fn, items[i], names[i], *_data(data, i)),
                                what, names[i])

        return self._run(len(items), submit, names, progress, description)

    def map_keep(self, fn, items, summary, *, progress=True,  # noqa: D102
                 description="", labels=None, data=None):
        names = _labels(items, labels)
        what = description or getattr(fn, "__name__", "task")
        kept: dict[int, Any] = {}

        def submit(i: int) -> Any:
            kept[i] = self._submit(run_item, (fn, items[i], names[i], *_data(data, i)),
                                   what, names[i])
            return self._submit(summary, (kept[i],), f"{what} summary", names[i])

        outcomes = self._run(len(items), submit, names, progress, description)
        out: list[Outcome] = []
        for i, outcome in enumerate(outcomes):
            if outcome.ok:
                out.append(Outcome(value=(kept[i], outcome.value)))
            else:
                kept[i].release()
                out.append(outcome)
        return out

    def release(self, references: Sequence[Any]) -> None:  # noqa: D102
        for future in references:
            if hasattr(future, "release"):
                future.release()

    def _submit(self, fn: Callable[..., Any], args: tuple[Any, ...], what: str,
                label: str) -> Any:
        key = f"hta-{_slug(what)}-{_slug(label)}-{uuid.uuid4().hex[:12]}"
        return self.client.submit(fn, *args, key=key, pure=False)

    def _run(self, n: int, submit: Callable[[int], Any], names: list[str], progress: bool,
             description: str) -> list[Outcome]:
        """Submit ``n`` items, gather their outcomes, run died ones again alone."""
        from distributed import as_completed as dask_completed

        results: list[Outcome] = [Outcome() for _ in range(n)]
        died: list[int] = []
        with progress_bar(n, description, enabled=progress) as bar:
            futures = {submit(i): i for i in range(n)}
            # this client's loop: a client made with set_as_default=False (the CLI's) is
            # not the default one as_completed would otherwise look for
            for future in dask_completed(list(futures), loop=self.client.loop):
                i = futures[future]
                outcome = _dask_outcome(future)
                future.release()
                if outcome is None:
                    died.append(i)
                    continue
                results[i] = outcome
                bar.update(1)
            for i in sorted(died):
                logger.warning("%s: its worker died; running it again on its own", names[i])
                future = submit(i)
                outcome = _dask_outcome(future)
                future.release()
                results[i] = outcome if outcome is not None else Outcome(
                    error=WorkerDiedError(names[i], "Dask lost its task twice"))
                bar.update(1)
        return results


def _dask_outcome(future: Any) -> Outcome | None:
    """The outcome of a Dask future (waiting for it if it is being computed again);
    ``None`` when its worker died or it was cancelled."""
    from concurrent.futures import CancelledError

    from distributed.scheduler import KilledWorker

    try:
        return Outcome(value=future.result())
    except (KilledWorker, CancelledError):
        return None
    except Exception as exc:  # noqa: BLE001 - reported per item
        return Outcome(error=exc)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "_", text)[:60] or "task"


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


def available_memory() -> int:
    """Bytes of memory the system can still give without swapping (``MemAvailable``)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # pragma: no cover - not Linux
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 4 << 30


def dask_client_type() -> type:
    """``distributed.Client``, with a clear message when Dask is not installed."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise ImportError(
            "running on a Dask cluster needs the dask extra: pip install 'hta[dask]' "
            "(dask[distributed])"
        ) from exc
    return Client


def resolve_executor(executor: Executor | None = None, client: Any = None,
                     max_workers: int | None = None) -> Executor:
    """Pick the executor: an explicit one, a Dask client's, or local processes."""
    if executor is not None:
        if client is not None:
            raise ValueError("pass either executor= or client=, not both")
        return executor
    if client is not None:
        client_type = dask_client_type()
        if not isinstance(client, client_type):
            raise TypeError(f"client= must be a distributed.Client, got {type(client).__name__}")
        return DaskExecutor(client)
    return LocalExecutor(max_workers)
