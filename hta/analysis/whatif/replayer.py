"""The job's replay as one object: :class:`Replay` chooses the engine, keeps what it
built, and answers every what-if question.

Two engines give the same tables:

* **the job graph in this process** (:func:`~hta.analysis.whatif.replay.build_job`,
  :func:`~hta.analysis.whatif.replay.predict`), for a job whose ranks are in memory or
  read from local workers;
* **ranks coupled on Dask** (:mod:`hta.analysis.whatif.coupled`), for a job whose ranks
  are kept on Dask workers (``Job.keeps_remotely``): each rank's replay graph is built
  and kept where the rank lives, and only the collectives' times travel.

A :class:`Replay` is made for one loaded job, its clock shifts (rank -> ns to subtract to
put it on the reference clock, :func:`hta.analysis.clock.applied_offsets`) and its
event-kind rules. It builds its engine on first use and keeps it, with the replay
uncertainty and the step bounds of each selection of steps. ``TraceAnalysis`` holds one
and asks it; nothing reaches it as a callback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from hta.analysis.whatif.coupled import Coupling
    from hta.analysis.whatif.graph import RankGraph
    from hta.analysis.whatif.replay import Change, JobGraph, Schedule
    from hta.model.job import Job
    from hta.model.rules import RuleSet
    from hta.model.runner import Kept
    from hta.model.spread import Ahead
    from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

#: Least number of job-graph nodes for which the findings' changes are replayed on
#: forked workers (:meth:`Replay.findings_savings`); below, forking costs more.
PARALLEL_MIN_NODES = 500_000


class Replay:
    """The replay of one loaded job (module docstring)."""

    def __init__(self, job: Job,
                 shifts: dict[int, int] | Callable[[], dict[int, int]] | None = None,
                 rules: RuleSet | None = None) -> None:
        self.job = job
        self._shifts = shifts if callable(shifts) else dict(shifts or {})
        self.rules = rules
        self.remote = bool(getattr(job, "keeps_remotely", False))
        self._graph: tuple[JobGraph, Schedule] | None = None
        self._ahead_graphs: tuple[Ahead, list[RankTrace]] | None = None
        #: The rank graphs built so far while a spread visit's workers ran (in rank
        #: order; :meth:`build_ahead`), or None when none are being built so.
        self._meanwhile: list[RankGraph] | None = None
        self._coupled: tuple[Kept, Coupling] | None = None
        self._uncertainty: pd.DataFrame | None = None
        self._bounds: dict[Any, tuple[bool, Any]] = {}
        #: What-if tables predicted ahead on forked workers, by change key (the findings'
        #: changes and their fixes together), for the savings and the fixes at once.
        self._predicted_ahead: dict[str, pd.DataFrame] = {}

    @property
    def shifts(self) -> dict[int, int]:
        """Rank -> ns to subtract to put it on the reference clock (asked for when first
        needed, when the replay was given a function)."""
        if callable(self._shifts):
            self._shifts = dict(self._shifts())
        return self._shifts

    # -- the engines -----------------------------------------------------------------------
    def graph(self) -> tuple[JobGraph, Schedule]:
        """The job graph of every loaded rank, each on the reference clock, and its
        unchanged replay (built once; in this process, or taken from
        :meth:`build_ahead`)."""
        from hta.analysis.whatif.replay import rank_graphs
        from hta.model.spread import job_workers

        if self._graph is None:
            graphs = self._graphs_built_ahead()
            if graphs is None:
                graphs = self._graphs_built_meanwhile()
            if self._graph is None:  # (built meanwhile, whole)
                if graphs is None:
                    graphs = rank_graphs(self._shifted_ranks(), job_workers(self.job))
                self._graph = _joined(graphs)
        return self._graph

    def build_ahead(self, max_events: int | None = None) -> bool:
        """Start building the job graph where a core would otherwise idle, for
        :meth:`graph` to take: a job in memory of
        :data:`~hta.analysis.whatif.replay.PARALLEL_MIN_EVENTS` events or more (and at most
        ``max_events``: a job the caller will not replay above it), allowed several
        workers, on Linux.

        * One rank: its graph is built on one process forked now, while the findings'
          rules run here.
        * Several ranks: the rank graphs, then the job graph and its replay, are built
          here while the workers of the next visits spread over forked processes run
          (the findings' rank rules), rank graph after rank graph as long as they run
          (:func:`hta.model.spread.meanwhile`); :meth:`graph` builds what is left.

        False when nothing was started; the answers are those of :meth:`graph` built
        here."""
        from hta.analysis.whatif.graph import rank_graph
        from hta.analysis.whatif.replay import PARALLEL_MIN_EVENTS, without_trace
        from hta.model.spread import Ahead, can_fork, job_workers, meanwhile

        if self._graph is not None or self._ahead_graphs is not None or \
                self._meanwhile is not None or self.remote or job_workers(self.job) < 2 or \
                not can_fork():
            return False
        ranks = self.job.get_ranks()
        events = sum(self.job.rank_events(r) for r in ranks)  # no rank read here
        if events < PARALLEL_MIN_EVENTS or (max_events is not None and events > max_events):
            return False
        if len(ranks) > 1:
            self._meanwhile = []
            meanwhile(self._build_meanwhile)
            return True
        traces = self._shifted_ranks()
        self._ahead_graphs = (Ahead(lambda: [without_trace(rank_graph(rt)) for rt in traces]),
                              traces)
        return True

    @contextmanager
    def building_ahead(self, max_events: int | None = None) -> Iterator[bool]:
        """:meth:`build_ahead` for the block (it yields whether something was started);
        a block that raises takes the work back (:meth:`forget_ahead`), so that no later
        visit builds a graph nobody asks for."""
        started = self.build_ahead(max_events)
        try:
            yield started
        except BaseException:
            if started:
                self.forget_ahead()
            raise

    def forget_ahead(self) -> None:
        """Take back the work :meth:`build_ahead` left to this process and drop what it
        built."""
        from hta.model.spread import take_back

        take_back(self._build_meanwhile)
        self._meanwhile = None

    def _build_meanwhile(self, busy: Callable[[], bool]) -> bool:
        """The job graph, built here a rank graph at a time while ``busy()``
        (:meth:`build_ahead`); then, if still busy, the job graph and its unchanged
        replay. Whether it is finished."""
        from hta.analysis.whatif.graph import rank_graph

        graphs = self._meanwhile
        if graphs is None:  # taken back meanwhile
            return True
        ranks = self.job.get_ranks()
        while len(graphs) < len(ranks) and busy():
            graphs.append(rank_graph(self._shifted_rank(ranks[len(graphs)])))
        if len(graphs) < len(ranks) or not busy():
            return False
        self._graph = _joined(graphs)
        self._meanwhile = None
        return True

    def _graphs_built_meanwhile(self) -> list[RankGraph] | None:
        """Every rank graph, those :meth:`build_ahead` left to this process and not built
        yet built now (on forked workers when worth it); None when none was left."""
        from hta.analysis.whatif.replay import rank_graphs
        from hta.model.spread import job_workers

        graphs = self._meanwhile
        self.forget_ahead()
        if graphs is None or self._graph is not None:
            return None
        return graphs + rank_graphs(self._shifted_ranks(len(graphs)), job_workers(self.job))

    def _shifted_ranks(self, first: int = 0) -> list[RankTrace]:
        """The loaded ranks (from the ``first``-th), each on the reference clock."""
        return [self._shifted_rank(r) for r in self.job.get_ranks()[first:]]

    def _shifted_rank(self, rank: int) -> RankTrace:
        from hta.analysis.clock import shift_rank

        return shift_rank(self.job.rank(rank), self.shifts.get(rank, 0))

    def _graphs_built_ahead(self) -> list[RankGraph] | None:
        """The rank graphs :meth:`build_ahead` started, or None (none started, or they
        did not come back: logged, built here)."""
        from hta.analysis.whatif.replay import with_trace

        if self._ahead_graphs is None:
            return None
        ahead, traces = self._ahead_graphs
        self._ahead_graphs = None
        got = ahead.result()
        if not got.ok:
            logger.info("the rank graphs built ahead did not come back (%s); built here",
                        got.error)
            return None
        return [with_trace(g, rt) for g, rt in zip(got.value, traces, strict=True)]

    def coupled(self) -> tuple[Kept, Coupling]:
        """Every rank's replay graph kept where the rank lives, coupled through the
        collectives' times (:mod:`hta.analysis.whatif.coupled`; built once)."""
        from hta.analysis.whatif.coupled import coupled_ranks

        if self._coupled is None:
            self._coupled = coupled_ranks(self.job, self.shifts)
        return self._coupled

    def drop_graph(self) -> None:
        """Free the job graph kept in this process (every rank's replay graph, the job's
        and its unchanged replay: about 0.75 kB an event); the next question that needs
        it builds it again. The answers already kept (uncertainty, step bounds) stay."""
        self._graph = None

    def release(self) -> None:
        """Free the replay graphs kept on the workers (nothing in memory to free)."""
        if self._coupled is not None:
            self._coupled[0].release()
            self._coupled = None

    # -- the answers -----------------------------------------------------------------------
    def predict(self, changes: Iterable[str | Change] | str | Change | None = None,
                modelled: bool = True, windows: dict[int, Any] | None = None,
                check: bool = True) -> pd.DataFrame:
        """The what-if table after ``changes`` (:func:`hta.analysis.whatif.what_if`'s
        columns); ``windows``: per rank without steps, the time its saving is measured
        over (in-memory engine only; the coupled replays measure whole traces)."""
        from hta.analysis.whatif.coupled import coupled_predict
        from hta.analysis.whatif.replay import predict

        if self.remote:
            kept, coupling = self.coupled()
            return coupled_predict(kept, coupling, changes, self.rules, modelled, check=check)
        jg, base = self.graph()
        return predict(jg, changes, self.rules, base=base, modelled=modelled,
                       windows=windows, check=check)

    def uncertainty(self) -> pd.DataFrame:
        """Per rank, what the trace leaves the replay to guess
        (:mod:`hta.analysis.whatif.uncertainty`; kept)."""
        from hta.analysis.whatif.uncertainty import (
            coupled_rank_uncertainty,
            replay_uncertainty,
            uncertainty_table,
        )

        if self._uncertainty is None:
            if self.remote:
                rows = self.coupled()[0].map(coupled_rank_uncertainty,
                                             description="Replay uncertainty")
                self._uncertainty = uncertainty_table([rows[r] for r in sorted(rows)])
            else:
                self._uncertainty = replay_uncertainty(self.graph()[0])
        return self._uncertainty.copy()

    def critical_path(self, iteration: int | None = None) -> pd.DataFrame:
        """The job's critical path of one step (:mod:`hta.analysis.whatif.jobpath`)."""
        from hta.analysis.whatif.coupled import coupled_critical_path
        from hta.analysis.whatif.jobpath import job_critical_path

        if self.remote:
            kept, coupling = self.coupled()
            return coupled_critical_path(kept, coupling, iteration)
        jg, base = self.graph()
        return job_critical_path(jg, base, iteration)

    def step_bound(self, steps: list[int] | None, each_step: bool
                   ) -> tuple[pd.DataFrame, dict[str, Any] | None]:
        """:func:`~hta.analysis.whatif.jobpath.job_step_bound` of the steps (None: all),
        kept per selection (a result with every step's prediction also answers a call
        without)."""
        from hta.analysis.whatif.jobpath import job_step_bound, step_bound_of

        key = None if steps is None else tuple(steps)
        if key not in self._bounds or (each_step and not self._bounds[key][0]):
            if self.remote:
                found = step_bound_of(lambda c, m: self.predict(c, m, check=False),
                                      self.critical_path, steps, each_step)
            else:
                jg, base = self.graph()
                found = self._forked(lambda _: job_step_bound(
                    jg, base, self.rules, steps, each_step))
            self._bounds[key] = (each_step, found)
        return self._bounds[key][1]

    def _worth_forking(self) -> bool:
        """Whether replays of this job go to workers forked from this process: a job
        graph in memory of :data:`PARALLEL_MIN_NODES` nodes or more (below, forking costs
        more than it saves), and a process that may fork."""
        from hta.model.spread import can_fork

        return not self.remote and can_fork() and \
            self.graph()[0].num_nodes >= PARALLEL_MIN_NODES

    def _forked(self, compute: Callable[[Any], Any]) -> Any:
        """``compute(None)`` on one worker forked from this process when the job graph is
        large (:data:`PARALLEL_MIN_NODES`): its replays' graph-sized temporaries are
        allocated there, and only the answer comes back, so this process, which holds
        the job's other answers too, does not grow by a replay; here otherwise, or when
        the worker fails."""
        from hta.model.spread import forked_map

        if not self._worth_forking():
            return compute(None)
        outcome = forked_map(compute, [None], 1)[0]
        return outcome.value if outcome.ok else compute(None)

    def stepless_windows(self) -> dict[int, Any]:
        """Per rank without ``ProfilerStep``, on the replay's clock, the findings'
        analysis window, or the iterations found in it when there are two or more
        (:func:`hta.analysis.findings.warmup.iteration_windows`): a finding's saving is
        measured over the time the finding is about, iteration by iteration where the
        trace repeats a loop. Empty on the coupled engine (it measures whole traces)."""
        from hta.analysis.findings.events import step_table
        from hta.analysis.findings.warmup import iteration_windows

        out: dict[int, Any] = {}
        if self.remote:
            return out
        for r in self.job.get_ranks():
            rt = self.job.rank(r)
            if not len(step_table(rt)):  # kept per rank by the rules
                offset = int(self.shifts.get(r, 0))
                found = [(a - offset, b - offset) for a, b in iteration_windows(rt)]
                out[r] = found if len(found) > 1 else found[0]
        return out

    def findings_savings(self, findings: pd.DataFrame, together: bool = False
                         ) -> pd.DataFrame:
        """``findings`` (the rules' table) with each fix's replayed saving and its range
        (:mod:`hta.analysis.whatif.findings`); when the job cannot be replayed, the rules'
        estimates labelled ``gpu-time`` (logged). ``together``: the caller will ask for
        :meth:`findings_together` next, whose replays are then predicted ahead with the
        findings' own."""
        from hta.analysis.whatif.findings import findings_with_changes
        from hta.analysis.whatif.uncertainty import inferred_share

        try:
            share = inferred_share(self.uncertainty())
            windows = self.stepless_windows()

            def predict(change: Any) -> pd.DataFrame:
                return self.predict(change, modelled=False, windows=windows)

            return findings_with_changes(findings, self._ahead(findings, predict, together),
                                         share)
        except Exception as exc:  # noqa: BLE001 - the rules' estimates are still an answer
            logger.warning("the findings' savings could not be replayed (%s); they are the "
                           "rules' GPU-time estimates", exc, exc_info=True)
            return findings_with_changes(findings, None)

    def findings_together(self, findings: pd.DataFrame) -> pd.DataFrame:
        """The replayed findings' fixes at once, one row (:mod:`hta.analysis.whatif.together`;
        ``findings``: :meth:`findings_savings`'s table); empty when fewer than two are
        replayed, or the replay fails (logged)."""
        from hta.analysis.whatif.together import empty_together, together
        from hta.analysis.whatif.uncertainty import inferred_share

        try:
            from hta.analysis.whatif.findings import change_key

            windows = self.stepless_windows()

            def predict(changes: Any) -> pd.DataFrame:
                ahead = self._predicted_ahead.get(change_key(changes))
                return ahead if ahead is not None else \
                    self.predict(changes, modelled=False, windows=windows)

            return together(findings, predict, inferred_share(self.uncertainty()))
        except Exception as exc:  # noqa: BLE001 - the findings stand without it
            logger.warning("the findings' fixes could not be replayed together (%s)", exc,
                           exc_info=True)
            return empty_together()

    def _ahead(self, findings: pd.DataFrame, predict: Callable[[Any], pd.DataFrame],
               together: bool = False) -> Callable[[Any], pd.DataFrame]:
        """``predict``, with the findings' changes predicted ahead on worker processes
        forked from this one (they inherit the job graph; only the tables come back) when
        the graph is large (:data:`PARALLEL_MIN_NODES`) and the job may use several
        workers; a change whose prediction failed there is predicted here again (its
        error raised here). ``together``: the changes :meth:`findings_together` will most
        likely replay too."""
        from hta.analysis.whatif.findings import change_key, changes_to_replay
        from hta.analysis.whatif.together import likely_together
        from hta.model.spread import forked_map, job_workers

        changes = changes_to_replay(findings)
        workers = min(job_workers(self.job), len(changes))
        if workers < 2 or not self._worth_forking():
            return predict
        if together:  # the fixes at once too, as findings_together will ask
            changes += likely_together(findings)
        outcomes = forked_map(predict, changes, workers)
        done = {change_key(c): o.value for c, o in zip(changes, outcomes, strict=True)
                if o.ok}
        self._predicted_ahead = dict(done)

        def ahead(change: Any) -> pd.DataFrame:
            table = done.get(change_key(change))
            return table if table is not None else predict(change)

        return ahead


def _joined(graphs: list[RankGraph]) -> tuple[JobGraph, Schedule]:
    """The job graph of the rank graphs and its unchanged replay, their arrays (written
    once) on small pages (:func:`hta.model.pages.small_pages`)."""
    from hta.analysis.whatif.replay import job_graph, replay
    from hta.model.pages import small_pages

    with small_pages():
        jg = job_graph(graphs)
        return jg, replay(jg)


__all__ = ["PARALLEL_MIN_NODES", "Replay"]
