"""One unit of per-rank work, and one runner that takes it to the ranks.

Every analysis that reads the events of several ranks reaches them here, and nowhere
else. The design:

* **The unit** is a :class:`RankWork`: a module-level per-rank function
  ``fn(rank: RankTrace, *args, **kwargs) -> DataFrame`` with its arguments, a
  ``finish`` run in the caller on the concatenation of the per-rank tables (the
  default returns it unchanged), and a ``description`` for the progress bar. It holds
  nothing but picklable values, so it travels to the worker that holds a rank; its
  ``empty`` gives the table of no rank. Every analysis of the package gives the runner
  such a function. A function a user wrote on a trace, ``fn(trace, selection, *args,
  **kwargs)``, enters through :meth:`RankWork.of_trace` (the runner calls it on a
  one-rank trace of each rank in turn).
* **The runner** is :func:`run` (:func:`run_one` for a single work): one call on the job
  with a list of works and one :class:`~hta.model.vocabulary.Selection` (the ranks and
  steps; :data:`~hta.model.vocabulary.EVERYTHING` by default, its ``FIRST`` resolved
  beforehand: :func:`hta.model.selection.resolve`). It visits each rank of the selection
  **once**, where the rank lives,
  through the job's own transport (``job.map_ranks``: one call in this process for an
  in-memory :class:`~hta.model.trace.Trace`; one call per rank in a local worker process
  or on the Dask worker that holds it for a :class:`hta.job.distributed.DistributedJob`,
  which also reloads ranks lost with a worker and reports the ones it cannot reach in
  ``job.skipped``). On each rank it

  1. restricts the rank to the selection's steps (or the work's own ``steps``), when
     there are some, once per distinct choice of steps
     (:func:`restrict_rank`: GPU work counts in the step of its launch);
  2. runs the works in order (so what they share, :func:`hta.model.derived.derived`,
     is computed once);
  3. adds a ``rank`` column (first) to each table that has none (``add_rank``; works
     on a trace name their rank themselves and pass unchanged).

  (A single work on a trace, on every event of ranks held in this process, runs in one
  call over them, as the trace-shaped functions were written to: the same answer, the
  fixed cost of a call paid once. A visit with a work marked ``spread``, costly per rank
  with small answers, of an in-memory job of many ranks runs in forked worker processes
  instead: :mod:`hta.model.spread`.) Only the tables travel back. Per work, the runner
  concatenates the tables in rank
  order (:func:`concat_tables`: a work may answer a tuple of tables, each concatenated;
  the work's :meth:`RankWork.no_rank` table when no rank answered) and applies
  ``finish``.
* **One failure policy**: a work that raises on a rank does not stop the other works
  there. ``errors="raise"`` (the default) raises the first such exception once the
  visit is over; ``errors="return"`` makes the exception that work's answer (a report
  shows it in the work's own section). ``finish`` raising is treated the same way.

* **Kept answers**: :func:`remembered` keeps a visit's answer for the job (under a key,
  while its ranks are unchanged), so analyses that read the same per-rank tables visit
  once; :func:`remember_together` reads several such answers in one visit spread over the
  workers of an in-memory job (the findings' job rules: their inputs would otherwise be
  visited rank after rank in this process).

``job.map_ranks`` (both job classes have it) is the runner's transport and is internal:
analyses, the facade, the report and the CLI call :func:`run`, never it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hta.model.trace import RankMapper, RankTrace, Trace, concat_frames
from hta.model.vocabulary import ALL, EVERYTHING, Ranks, Selection, iteration_list

if TYPE_CHECKING:
    from hta.model.job import Job

#: What a selection of steps is, once resolved: step numbers, or ``None`` (every event).
Steps = tuple[int, ...] | None


def _same(frame: pd.DataFrame) -> pd.DataFrame:
    return frame


@dataclass(frozen=True)
class RankWork:
    """A per-rank analysis: ``fn(rank, *args, **kwargs) -> DataFrame`` on each selected
    rank (module-level, so it can be sent to a worker), then ``finish(concatenation)``
    in the caller.

    ``steps``: restrict each rank to these ``ProfilerStep`` numbers before ``fn`` runs
    (``None``: the run's ``iterations``). ``add_rank``: add a ``rank`` column to a table
    that lacks one. ``empty``: the table for no rank (default: ``fn`` on an empty
    trace for works on a trace, else a frame with a ``rank`` column only).
    """

    fn: Callable[..., pd.DataFrame]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    finish: Callable[[pd.DataFrame], Any] = _same
    description: str = ""
    steps: Steps = None
    add_rank: bool = True
    empty: Callable[[], pd.DataFrame] | None = None
    #: costly per rank, small answers: on an in-memory job of many ranks, the visit may
    #: run in forked worker processes (:mod:`hta.model.spread`)
    spread: bool = False

    @classmethod
    def of_trace(cls, fn: Callable[..., pd.DataFrame], args: Sequence[Any] = (),
                 kwargs: Mapping[str, Any] | None = None, *,
                 finish: Callable[[pd.DataFrame], Any] = _same,
                 description: str = "") -> RankWork:
        """A work from a per-rank function written on a trace,
        ``fn(trace, selection, *args, **kwargs)`` (``selection``: a
        :class:`~hta.model.vocabulary.Selection` naming the ranks to answer for, every
        event of them: the runner has restricted them to the selected steps already; its
        answer for several ranks is the concatenation of its answers for each; it
        returns no symbol ids): run on a one-rank trace of each rank; its tables pass
        unchanged."""
        return cls(OnTrace(fn), tuple(args), dict(kwargs or {}), finish=finish,
                   description=description, add_rank=False)

    def then(self, finish: Callable[[Any], Any]) -> RankWork:
        """The same work, its concatenated tables combined by ``finish`` in the caller."""
        return replace(self, finish=finish)

    def on_steps(self, iterations: Iterable[int] | None) -> RankWork:
        """The same work on each rank restricted to the ``ProfilerStep`` numbers
        ``iterations`` (restricted where the rank is); ``None``: this work."""
        steps = iteration_list(iterations)
        return self if steps is None else replace(self, steps=tuple(steps))

    def no_rank(self) -> pd.DataFrame:
        """The work's table when no rank answered (its columns)."""
        if self.empty is not None:
            return self.empty()
        if isinstance(self.fn, OnTrace):
            return self.fn.fn(Trace({}), Selection((), ALL), *self.args, **dict(self.kwargs))
        return pd.DataFrame({"rank": np.zeros(0, dtype=np.int64)})

    @property
    def name(self) -> str:
        """The function's name (for progress and logs)."""
        fn = self.fn.fn if isinstance(self.fn, OnTrace) else self.fn
        return self.description or getattr(fn, "__name__", "per-rank work")


@dataclass(frozen=True)
class OnTrace:
    """A per-rank function written on a trace, called on one rank:
    ``fn(one_rank_trace, Selection((rank,), ALL), *args, **kwargs)`` (see
    :meth:`RankWork.of_trace`)."""

    fn: Callable[..., pd.DataFrame]

    def __call__(self, rank: RankTrace, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return self.fn(one_rank_trace(rank), Selection((rank.rank,), ALL), *args, **kwargs)


@dataclass(frozen=True)
class Failed:
    """What a work raised on a rank (handed back to :func:`run`)."""

    error: Exception


def run(job: RankMapper, works: Sequence[RankWork],
        selection: Selection = EVERYTHING,
        *, errors: str = "raise", description: str = "", carry: bool = False
        ) -> list[Any]:
    """Every work's answer, from one visit of each rank of ``selection`` (see the module
    docstring; :data:`~hta.model.vocabulary.EVERYTHING`: every loaded rank, every event),
    each restricted to the selection's steps unless a work names its own ``steps``.
    ``errors``: ``"raise"`` or ``"return"``, the one failure policy (a rank a
    distributed job cannot reach is left out and reported in ``job.skipped``).
    ``carry``: a visit spread over forked workers brings back the small values they
    derived from the ranks (:func:`hta.model.spread.spread_visit`)."""
    if errors not in ("raise", "return"):
        raise ValueError(f"errors: expected 'raise' or 'return', got {errors!r}")
    steps = selection.iteration_list
    default = None if steps is None else tuple(steps)
    calls = tuple((w.fn, tuple(w.args), dict(w.kwargs), w.steps if w.steps is not None
                   else default, w.add_rank) for w in works)
    what = description or ", ".join(dict.fromkeys(w.name for w in works))
    visits = _spread(job, works, selection, calls, what, carry)
    if visits is None:
        visits = job.map_ranks(visit, selection.rank_list, (calls,), description=what)
    per_rank = [row for part in visits for row in part]
    answers: list[Any] = []
    for i, work in enumerate(works):
        frames = [row[1][i] for row in per_rank]
        failed = next((f.error for f in frames if isinstance(f, Failed)), None)
        if failed is not None:
            if errors == "raise":
                raise failed
            answers.append(failed)
            continue
        try:
            answers.append(work.finish(concat_tables(frames) if frames else work.no_rank()))
        except Exception as exc:
            if errors == "raise":
                raise
            answers.append(exc)
    return answers


def _spread(job: RankMapper, works: Sequence[RankWork], selection: Selection,
            calls: tuple[Call, ...], what: str, carry: bool = False) -> list[Any] | None:
    """The visit spread over forked workers (:mod:`hta.model.spread`) when a work asks
    for it and the job is in memory and large enough; else None."""
    if not isinstance(job, Trace) or not any(w.spread for w in works):
        return None
    from hta.model.spread import spread_visit, workers_for

    ranks = job.selected_ranks(selection.rank_list)
    workers = workers_for(job, ranks)
    if workers <= 1:
        return None
    return [spread_visit(job, ranks, _joined_visit, calls, workers, what, carry=carry)]


def _joined_visit(trace: Trace, ranks: Ranks, calls: tuple[Call, ...]
                  ) -> list[tuple[int, list[Any]]]:
    """:func:`visit`, its rows joined into one for the ranks visited (a worker's share of
    a spread visit): each call's answers concatenated in rank order, as :func:`run`
    concatenates the rows it gets, so that one table a call travels back instead of one
    a rank. The rows as they are when a call failed on a rank, or its answers do not
    concatenate (:func:`run` then meets the failure)."""
    rows = visit(trace, ranks, calls)
    if len(rows) < 2 or any(isinstance(a, Failed) for _, answers in rows for a in answers):
        return rows
    try:
        joined = [concat_tables(list(answers)) for answers in zip(*(a for _, a in rows))]
    except Exception:  # noqa: BLE001 - run concatenates them again, and says why not
        return rows
    return [(rows[0][0], joined)]


def concat_tables(tables: Sequence[Any]) -> Any:
    """Per-rank answers in rank order, concatenated: frames into one frame
    (:func:`~hta.model.trace.concat_frames`), tuples of frames (a work answering several
    tables) into the tuple of each one's concatenation."""
    if isinstance(tables[0], tuple):
        return tuple(concat_frames(list(parts)) for parts in zip(*tables))
    return concat_frames(tables)


def run_one(job: RankMapper, work: RankWork, selection: Selection = EVERYTHING) -> Any:
    """One work's answer (:func:`run` with ``errors="raise"``)."""
    return run(job, [work], selection)[0]


Call = tuple[Callable[..., pd.DataFrame], tuple[Any, ...], dict[str, Any], Steps, bool]


def visit(trace: Trace, ranks: Ranks, calls: tuple[Call, ...]
          ) -> list[tuple[int, list[Any]]]:
    """Where the ranks are: per selected rank, ``(rank, [each call's table or
    Failed])``, the calls in order on the rank (restricted once per choice of steps).

    One work on a trace over every event of several ranks held here (an in-memory job)
    is one call over them: its answer is by contract the concatenation of its per-rank
    answers, and the fixed cost of each call is paid once. The objects held before the
    visit are out of the garbage collector's walks while it runs
    (:func:`hta.model.spread.gc_frozen`)."""
    from hta.model.spread import gc_frozen

    with gc_frozen():
        return _visit(trace, ranks, calls)


def _visit(trace: Trace, ranks: Ranks, calls: tuple[Call, ...]
           ) -> list[tuple[int, list[Any]]]:
    selected = trace.selected_ranks(ranks)
    if len(calls) == 1 and len(selected) > 1 and isinstance(calls[0][0], OnTrace) \
            and calls[0][3] is None:
        fn, args, kwargs = calls[0][0].fn, calls[0][1], calls[0][2]
        try:
            return [(selected[0], [fn(trace, Selection(tuple(selected), ALL), *args, **kwargs)])]
        except Exception as exc:  # noqa: BLE001 - the failure policy is run's
            return [(selected[0], [Failed(exc)])]
    out = []
    for r in selected:
        whole = trace.rank(r)
        seen: dict[Steps, RankTrace] = {None: whole}
        answers: list[Any] = []
        for fn, args, kwargs, steps, add_rank in calls:
            try:
                if steps not in seen:
                    seen[steps] = restrict_rank(whole, steps)
                frame = fn(seen[steps], *args, **kwargs)
                if add_rank and isinstance(frame, pd.DataFrame) and "rank" not in frame:
                    frame = frame.copy()
                    frame.insert(0, "rank", np.full(len(frame), r, dtype=np.int64))
                answers.append(frame)
            except Exception as exc:  # noqa: BLE001 - the failure policy is run's
                answers.append(Failed(exc))
        out.append((r, answers))
    return out


class Kept:
    """Per-rank values kept where their ranks live, for work in rounds.

    :func:`keep` makes a value per rank from the rank (``fn(rank, item)``), kept in the
    process or on the Dask worker that holds the rank; :meth:`then` makes new kept
    values from them, :meth:`map` brings back ``fn(value, item)`` per rank (small
    answers), :meth:`release` frees them. Only the items and the answers travel: what a
    round of an iterative analysis needs (the coupled what-if replay,
    :mod:`hta.analysis.whatif.coupled`). A job whose ranks are in this process (an
    in-memory trace, or local worker processes, whose workers keep nothing between
    calls) keeps the values here.

    ``summaries``: per rank, ``summary(value)`` of the values made (when asked).
    """

    def __init__(self, job: RankMapper, refs: Mapping[int, Any],
                 summaries: Mapping[int, Any] | None = None) -> None:
        self.job = job
        self.refs = dict(refs)
        self.summaries = dict(summaries or {})

    @property
    def ranks(self) -> list[int]:
        """The ranks holding a value, ascending."""
        return sorted(self.refs)

    def then(self, fn: Callable[[Any, Any], Any], items: Mapping[int, Any] | None = None,
             *, summary: Callable[[Any], Any] | None = None, description: str = ""
             ) -> Kept:
        """New kept values ``fn(value, items[rank])`` (``items`` None: ``None`` each)."""
        items = _items(self.ranks, items)
        if _remote(self.job):
            made = self.job.keep_on(fn, {r: self.refs[r] for r in items}, items,  # type: ignore[attr-defined]
                                    summary, description)
            return Kept(self.job, {r: m[0] for r, m in made.items()},
                        {r: m[1] for r, m in made.items()} if summary else None)
        values = {r: fn(self.refs[r], item) for r, item in items.items()}
        return Kept(self.job, values,
                    {r: summary(v) for r, v in values.items()} if summary else None)

    def map(self, fn: Callable[[Any, Any], Any], items: Mapping[int, Any] | None = None,
            description: str = "") -> dict[int, Any]:
        """Per rank of ``items`` (None: every rank with ``None``), ``fn(value, item)``,
        run where the value is; the answers here."""
        items = _items(self.ranks, items)
        if _remote(self.job):
            return self.job.map_on(fn, {r: self.refs[r] for r in items}, items,  # type: ignore[attr-defined]
                                   description)
        return {r: fn(self.refs[r], item) for r, item in items.items()}

    def release(self) -> None:
        """Free the values (on Dask workers: drop their futures)."""
        if _remote(self.job):
            self.job.release_kept(list(self.refs.values()))  # type: ignore[attr-defined]
        self.refs.clear()


def keep(job: Job, fn: Callable[[RankTrace, Any], Any],
         items: Mapping[int, Any], *, summary: Callable[[Any], Any] | None = None,
         description: str = "") -> Kept:
    """Per rank of ``items``, ``fn(rank, items[rank])`` kept where the rank lives
    (:class:`Kept`); ``summary(value)`` of each comes back in ``Kept.summaries``.
    ``fn`` and ``summary`` must be module-level functions (they travel to workers)."""
    job_ranks = job.selected_ranks(list(items))
    items = {r: items[r] for r in job_ranks}
    if _remote(job):
        made = job.keep_ranks(fn, items, summary, description)  # type: ignore[attr-defined]
        return Kept(job, {r: m[0] for r, m in made.items()},
                    {r: m[1] for r, m in made.items()} if summary else None)
    values = {r: fn(job.rank(r), item) for r, item in items.items()}
    return Kept(job, values, {r: summary(v) for r, v in values.items()} if summary else None)


def _remote(job: Any) -> bool:
    """Whether ``job`` keeps values on remote workers (a Dask job)."""
    return bool(getattr(job, "keeps_remotely", False))


def _items(ranks: list[int], items: Mapping[int, Any] | None) -> dict[int, Any]:
    if items is None:
        return {r: None for r in ranks}
    unknown = sorted(set(items) - set(ranks))
    if unknown:
        raise KeyError(f"no kept value for rank(s) {unknown}")
    return {r: items[r] for r in sorted(items)}


def restrict_rank(rt: RankTrace, steps: Iterable[int] | None) -> RankTrace:
    """A copy of ``rt`` keeping only the events of the ``ProfilerStep`` numbers ``steps``
    (``iteration`` column; GPU work counts in its launch's step); ``None``: ``rt``
    itself. Data is shared, rows are filtered; the side tables a reopened rank holds as
    Arrow stay unconverted."""
    if steps is None:
        return rt
    wanted = sorted({int(i) for i in steps})
    copy = RankTrace(rank=rt.rank, events=rt.events.copy(deep=False), symbols=rt.symbols,
                     tables=rt.tables.copy(), meta=rt.meta, unclassified=rt.unclassified)
    copy.filter_rows(rt.events["iteration"].isin(wanted).to_numpy())
    return copy


def one_rank_trace(rt: RankTrace) -> Trace:
    """A :class:`Trace` of ``rt`` alone, sharing its symbol table (``rt`` unchanged)."""
    trace = Trace({})
    trace.symbols = rt.symbols
    trace._symbol_index = {text: i for i, text in reversed(list(enumerate(rt.symbols)))}
    trace.ranks = {rt.rank: rt}
    return trace


# -- answers of whole visits, kept per job -----------------------------------------------------
#: Per job, answers of visits kept by key (:func:`remembered`).
_VISITS: weakref.WeakKeyDictionary[Any, dict[Hashable, Any]] = weakref.WeakKeyDictionary()


def _kept_visits(job: Any) -> dict[Hashable, Any] | None:
    """The job's kept answers, emptied when its ranks changed (other events tables, or
    tables changed in place by the model, or other transforms of a distributed job);
    None for a job that cannot be weakly referenced."""
    ranks = getattr(job, "ranks", None)
    state = (tuple((r, id(rt.events), rt.generation) for r, rt in ranks.items())
             if isinstance(ranks, dict) else (),
             tuple(id(t) for t in getattr(job, "transforms", ())))
    try:
        kept = _VISITS.setdefault(job, {})
    except TypeError:
        return None
    if kept.get("state") != state:
        kept.clear()
        kept["state"] = state
    return kept


def _handed(value: Any) -> Any:
    """A kept answer as handed out: frames and dicts (also inside a tuple) copied."""
    if isinstance(value, tuple):
        return tuple(_handed(v) for v in value)
    return value.copy() if isinstance(value, pd.DataFrame | dict) else value


def visit_key(name: str, selected: Sequence[int], steps: Iterable[int] | None = None
              ) -> Hashable:
    """The key a visit of the ``selected`` ranks (restricted to ``steps``) is kept under
    (:func:`remembered`, :func:`remember_together`): one answer per name, ranks and
    steps."""
    return (name, tuple(selected), None if steps is None else tuple(steps))


def remembered(job: Any, key: Hashable, visit: Callable[[], Any]) -> Any:
    """``visit()`` (a visit of the job's ranks), kept for the job under ``key`` while
    its ranks are unchanged: several analyses that read the same per-rank tables (the
    clock offsets and the straggler rule read the same collective kernels) visit once."""
    kept = _kept_visits(job)
    if kept is None:
        return visit()
    if key not in kept:
        kept[key] = visit()
    return _handed(kept[key])


def recalled(job: Any, key: Hashable) -> Any:
    """The answer kept for the job under ``key`` (:func:`remembered`,
    :func:`remember_together`), or None."""
    kept = _kept_visits(job)
    return _handed(kept[key]) if kept is not None and key in kept else None


def remember_together(job: Any, visits: Sequence[tuple[Hashable, RankWork]],
                      selection: Selection) -> None:
    """The answers of several works, from one visit of ``selection``'s ranks spread over
    forked workers (:mod:`hta.model.spread`), kept for :func:`remembered` under their
    keys; for an in-memory job whose visit would spread only (else nothing: each answer is
    computed when asked, as it was). A work that fails keeps nothing: asked again, it
    raises where it is asked."""
    from hta.model.spread import workers_for

    kept = _kept_visits(job)
    if kept is None or not isinstance(job, Trace):
        return
    missing = [(key, work) for key, work in visits if key not in kept]
    if not missing or workers_for(job, job.selected_ranks(selection.rank_list)) <= 1:
        return
    answers = run(job, [replace(work, spread=True) for _, work in missing], selection,
                  errors="return", carry=True, description=", ".join(dict.fromkeys(
                      work.name for _, work in missing)))
    for (key, _), answer in zip(missing, answers, strict=True):
        if not isinstance(answer, BaseException):
            kept[key] = answer


__all__ = ["Failed", "Kept", "OnTrace", "RankWork", "concat_tables", "keep",
           "one_rank_trace", "recalled", "remember_together", "remembered",
           "restrict_rank", "run", "run_one", "visit", "visit_key"]
