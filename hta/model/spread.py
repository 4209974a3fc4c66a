"""One visit of the ranks of an in-memory job, spread over forked worker processes.

A job whose ranks are held in this process (a :class:`~hta.model.trace.Trace`) is visited
by the runner in one call here, rank after rank (:func:`hta.model.runner.visit`). For the
works that cost tens of milliseconds per rank and answer with small tables (the findings'
rules, :attr:`~hta.model.runner.RankWork.spread`), a job of many ranks is visited in
worker processes instead: each worker is forked from this process, so it finds the
ranks (and the works, their arguments, whatever a test or a notebook changed in the
modules) already in its memory, runs the same visit on its share of the ranks, and sends
back only the answers. The answers are those of a visit here, rank by rank, in rank
order.

When: on Linux (fork), with more than one worker (the job's ``workers``, else the CPUs
this process may use; ``max_workers=1`` at load turns it off), two ranks or more, and at
least :data:`MIN_EVENTS` events in the selected ranks (below that, starting the workers
costs more than the visit). Never from inside a worker process. Values the works compute
on the way (:func:`hta.model.derived.derived`) stay in the workers, unless the visit asks
to carry them back (``carry``: the small ones come back with the answers and are kept
here, so this process and the workers it forks next find them).

A share that cannot come back (its answer does not pickle, its worker died) is visited
again here, so a failure costs time, never an answer.

:func:`forked_map` is the general form (any function, a closure included, over a list of
items, on forked workers): the what-if replay predicts the findings' changes with it on
workers that inherit the job graph (:meth:`hta.analysis.whatif.replayer.Replay.findings_savings`).
:class:`Ahead` computes one function on one forked process while this one goes on: the
replay builds a single large rank's graph with it while the findings' rules run here
(:meth:`hta.analysis.whatif.replayer.Replay.build_ahead`). The other way round,
:func:`meanwhile` leaves work to this process while the workers of a visit run (it would
otherwise wait for them): the replay builds the job graph of several ranks so, rank graph
after rank graph, while the findings' rank rules run on the workers.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hta.model.trace import Trace
from hta.model.vocabulary import Ranks

logger = logging.getLogger(__name__)

#: Least number of events (rows of the selected ranks' events tables) for a spread visit.
MIN_EVENTS = 400_000
#: Shares per worker: several, so a slow share does not hold the others up and the
#: progress bar moves.
SHARES_PER_WORKER = 4

Visit = Callable[[Trace, Ranks, Any], list[tuple[int, list[Any]]]]
_STATE: Callable[[Any], Any] | None = None  # what the forked workers call


@dataclass(frozen=True)
class Forked:
    """What one item of :func:`forked_map` gave: ``value``, or the ``error`` it raised
    (or that kept its answer from coming back)."""

    value: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        """Whether the item's answer came back."""
        return self.error is None


def job_workers(job: object) -> int:
    """The worker processes a job may use: its ``workers`` (an in-memory trace, from
    ``max_workers`` at load), else its local executor's ``max_workers``, else the CPUs
    this process may use."""
    workers = getattr(job, "workers", None)
    if workers is None:
        workers = getattr(getattr(job, "executor", None), "max_workers", None)
    if workers:
        return int(workers)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@contextmanager
def gc_frozen() -> Iterator[None]:
    """Every object this process holds when the block starts is frozen for its garbage
    collector (:func:`gc.freeze`) until the block ends: its collections walk only the
    objects made inside. Two uses: a visit of ranks here (:func:`hta.model.runner.visit`),
    whose collections would otherwise walk every object of every loaded rank again and
    again (a fifth of a small rank's findings, on a job of 256 ranks in one process); and
    forks made inside, whose workers then never walk the objects they inherited, which
    would copy their memory pages into them (writing their headers) and cost them a
    tenth of their time. Nothing stays frozen after the block (the objects are collected
    as before); an application that froze objects itself is left as it is.

    Whether a block of this function already froze them is a flag, inherited by the
    workers forked inside it: :func:`gc.get_freeze_count` walks every frozen object
    (a tenth of a second in all in the workers of a 256-rank job's findings)."""
    global _FROZEN
    if _FROZEN or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    _FROZEN = True
    try:
        yield
    finally:
        _FROZEN = False
        gc.unfreeze()


#: Whether a :func:`gc_frozen` block of this process (or of the one it was forked from,
#: inside that block) froze the objects.
_FROZEN = False


def can_fork() -> bool:
    """Whether this process may fork workers that inherit its state: Linux, not itself a
    worker (of a spread visit, or a daemonic pool process)."""
    return sys.platform == "linux" and not multiprocessing.current_process().daemon \
        and _STATE is None


def workers_for(trace: Trace, ranks: Sequence[int]) -> int:
    """How many worker processes a spread visit of ``ranks`` would use (1: visit here)."""
    if len(ranks) < 2 or not can_fork():
        return 1
    workers = job_workers(trace)
    if workers <= 1:
        return 1
    events = sum(trace.rank_events(r) for r in ranks)
    return min(workers, len(ranks)) if events >= MIN_EVENTS else 1


def forked_map(fn: Callable[[Any], Any], items: Sequence[Any], workers: int, *,
               progress: bool = False, description: str = "",
               host: bool = False) -> list[Forked]:
    """``fn(item)`` for every item, on ``workers`` processes forked from this one: ``fn``
    (a closure is fine) and what it reads are inherited, not sent; only the items and
    the answers travel. Per item, in order, a :class:`Forked` (a worker that died fails
    the items it had not answered: the caller computes them again). ``host``: this
    process does the work left to it (:func:`meanwhile`) while the workers run."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from hta.progress import progress_bar

    global _STATE
    _STATE = fn
    out = [Forked(error=RuntimeError("not run"))] * len(items)
    try:
        with progress_bar(len(items), description, enabled=progress) as bar, \
                ProcessPoolExecutor(max_workers=workers,
                                    mp_context=multiprocessing.get_context("fork")) as pool:
            with gc_frozen():  # a fork pool starts every worker at the first submit
                futures = {pool.submit(_call_forked, item): i for i, item in enumerate(items)}
            running = set(futures)

            def busy() -> bool:
                done = [f for f in running if f.done()]
                running.difference_update(done)
                bar.update(len(done))
                return bool(running)

            if host and _MEANWHILE:
                _run_meanwhile(busy)
            for future in as_completed(futures):
                try:
                    out[futures[future]] = Forked(value=future.result())
                except Exception as exc:  # noqa: BLE001 - handed back, redone by the caller
                    out[futures[future]] = Forked(error=exc)
                if future in running:
                    running.discard(future)
                    bar.update(1)
    finally:
        _STATE = None
    return out


#: Work left to this process while the workers of a visit run (:func:`meanwhile`): weak
#: references to bound methods, so that a task never keeps its object alive.
_MEANWHILE: list[weakref.WeakMethod] = []


def meanwhile(task: Callable[[Callable[[], bool]], bool]) -> None:
    """Leave ``task`` (a bound method) to this process while the workers of the next
    spread visits run, where it would otherwise wait for them: each such visit calls
    ``task(busy)``, where ``busy()`` says whether the workers still run; the task works
    in small pieces while it is true, and returns whether it is finished (then it is
    dropped; else the next visit calls it again). A task that raises is logged and
    dropped. Nothing is forked meanwhile (:func:`can_fork` is false). The task's owner
    takes it back with :func:`take_back` before it needs the task's answer, and
    finishes what is left itself."""
    _MEANWHILE.append(weakref.WeakMethod(task))


def take_back(task: Callable[..., Any]) -> None:
    """Drop ``task`` from the work left to this process (:func:`meanwhile`), if there."""
    _MEANWHILE[:] = [ref for ref in _MEANWHILE if ref() not in (None, task)]


def _run_meanwhile(busy: Callable[[], bool]) -> None:
    """Call the tasks left to this process (:func:`meanwhile`) while ``busy()``."""
    with gc_frozen():
        for ref in list(_MEANWHILE):
            task = ref()
            finished = True
            if task is not None and busy():
                try:
                    finished = bool(task(busy))
                except Exception as exc:  # noqa: BLE001 - its owner finishes the work itself
                    logger.info("work left to this process failed: %s", exc, exc_info=True)
            if finished:
                _MEANWHILE[:] = [r for r in _MEANWHILE if r is not ref]


class Ahead:
    """``fn()`` computed on one process forked from this one when made, while this one
    goes on (a closure is fine, as in :func:`forked_map`); :meth:`result` waits for the
    answer. Fork nothing else before taking it: the pool's threads live until then."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        from concurrent.futures import ProcessPoolExecutor

        global _STATE
        _STATE = lambda _: fn()  # noqa: E731 - what the forked worker calls
        try:  # a fork pool starts its process at the first submit, in this thread
            self._pool: Any = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("fork"))
            with gc_frozen():
                self._future = self._pool.submit(_call_forked, None)
        finally:
            _STATE = None

    def result(self) -> Forked:
        """The answer, or the error that kept it from coming back."""
        try:
            return Forked(value=self._future.result())
        except Exception as exc:  # noqa: BLE001 - handed back, redone by the caller
            return Forked(error=exc)
        finally:
            self._pool.shutdown()


def spread_visit(trace: Trace, ranks: Sequence[int], visit: Visit, calls: Any,
                 workers: int, description: str = "", *, carry: bool = False
                 ) -> list[tuple[int, list[Any]]]:
    """``visit(trace, ranks, calls)`` of every rank, on ``workers`` forked processes (the
    module docstring); the per-rank answers in rank order. ``carry``: the workers also
    send back the small values they derived from their ranks
    (:func:`hta.model.derived.small_values`), kept here as if computed here: for a
    visit that reads ahead what later visits read again (the job rules' inputs)."""
    ranks = sorted(ranks)
    n_shares = min(len(ranks), workers * SHARES_PER_WORKER)
    # consecutive ranks: a work on a trace answers for a whole share, in rank order
    bounds = [len(ranks) * k // n_shares for k in range(n_shares + 1)]
    shares = [ranks[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def share_visit(share: list[int]) -> Any:
        rows = visit(trace, share, calls)
        return (rows, _derived_of(trace, share)) if carry else rows

    # a visit that carries values back does not host the work left to this process: that
    # work would compute again what the visit is about to bring
    outcomes = forked_map(
        share_visit, shares, workers, progress=trace.progress,
        description=f"{description or 'Ranks'} ({len(ranks)} ranks in {n_shares} shares)",
        host=not carry)
    rows: list[tuple[int, list[Any]]] = []
    for share, outcome in zip(shares, outcomes, strict=True):
        if outcome.ok:
            if carry:
                _adopt(trace, outcome.value[1])
            rows.extend(outcome.value[0] if carry else outcome.value)
            continue
        logger.info("ranks %s: visited again in this process (%s)", share, outcome.error)
        rows.extend(visit(trace, share, calls))
    return sorted(rows, key=lambda row: row[0])


def _derived_of(trace: Trace, ranks: Sequence[int]) -> bytes:
    """Worker side: the small derived values of these ranks, each pickled
    (:func:`hta.model.derived.small_values`), in one pickle."""
    import pickle

    from hta.model.derived import small_values

    return pickle.dumps({r: small_values(trace.rank(r)) for r in ranks},
                        protocol=pickle.HIGHEST_PROTOCOL)


def _adopt(trace: Trace, blob: bytes) -> None:
    """Keep the values a worker derived (:func:`_derived_of`) for its ranks here."""
    import pickle

    from hta.model.derived import adopt

    for r, values in pickle.loads(blob).items():  # noqa: S301 - from our own fork
        adopt(trace.rank(r), values)


def _call_forked(item: Any) -> Any:
    """Worker side: the forked function on one item."""
    if _STATE is None:  # not forked from forked_map: nothing to call
        raise RuntimeError("a forked worker needs the state of the process it was forked "
                           "from")
    return _STATE(item)


__all__ = ["MIN_EVENTS", "SHARES_PER_WORKER", "Ahead", "Forked", "can_fork", "forked_map",
           "gc_frozen", "job_workers", "meanwhile", "spread_visit", "take_back",
           "workers_for"]
