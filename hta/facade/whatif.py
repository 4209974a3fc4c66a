"""What-if replay on ``TraceAnalysis``: predicted step times after a change, and the
job's critical path.

The methods call :mod:`hta.analysis.whatif` (definitions in its docstrings and in
``docs/analyses/whatif.md``). The job graph of the loaded ranks is built once and kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from hta.facade.display import show
from hta.model.selection import Iterations, Ranks, iteration_list

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from hta.analysis.whatif import Change, JobGraph, Schedule
    from hta.analysis.whatif.coupled import Coupling
    from hta.model.job import Job
    from hta.model.runner import Kept

logger = logging.getLogger(__name__)

#: Least number of job-graph nodes for which the findings' changes are replayed on
#: forked workers (:meth:`WhatIfMixin._predicted_ahead`); below, forking costs more.
PARALLEL_MIN_NODES = 500_000

class WhatIfMixin:
    """Methods added by the what-if replay."""

    t: Job

    def _whatif_job(self) -> tuple[JobGraph, Schedule]:
        """The job graph of every loaded rank and its unchanged replay (built once); each
        rank's times on the reference clock (``clock_shifts``: hosts whose clocks
        disagree are put on one clock before the collectives couple them)."""
        from hta.analysis.clock import shift_rank
        from hta.analysis.whatif.replay import build_job, replay

        cached: Any = getattr(self, "_whatif_cache", None)
        if cached is None:
            shifts = self.clock_shifts() if hasattr(self, "clock_shifts") else {}
            jg = build_job([shift_rank(self.t.rank(r), shifts.get(r, 0))
                            for r in self.t.get_ranks()])
            cached = (jg, replay(jg))
            self._whatif_cache = cached
        return cached

    def _whatif_coupled(self) -> tuple[Kept, Coupling]:
        """Every rank's replay graph kept where the rank lives, coupled through the
        collectives' times (:mod:`hta.analysis.whatif.coupled`; built once)."""
        from hta.analysis.whatif.coupled import coupled_ranks

        cached: Any = getattr(self, "_whatif_coupled_cache", None)
        if cached is None:
            shifts = self.clock_shifts() if hasattr(self, "clock_shifts") else {}
            cached = coupled_ranks(self.t, shifts)
            self._whatif_coupled_cache = cached
        return cached

    def _whatif_predict(self, changes: Iterable[str | Change] | str | Change | None,
                        modelled: bool = True,
                        windows: dict[int, tuple[int, int]] | None = None,
                        check: bool = True) -> pd.DataFrame:
        """The what-if table: on a job whose ranks live on Dask workers, per-rank replays
        coupled through the collectives' times (only those travel); else the job graph
        in this process. Both give the same table."""
        from hta.analysis.whatif.coupled import coupled_predict
        from hta.analysis.whatif.replay import predict

        rules = getattr(self, "rules", None)
        if getattr(self.t, "keeps_remotely", False):
            kept, coupling = self._whatif_coupled()
            return coupled_predict(kept, coupling, changes, rules, modelled, check=check)
        jg, base = self._whatif_job()
        return predict(jg, changes, rules, base=base, modelled=modelled, windows=windows,
                       check=check)

    def what_if(self, changes: Iterable[str | Change] | str | Change | None = None
                ) -> pd.DataFrame:
        """Replay the job from its trace and predict each rank's step time after
        ``changes`` (e.g. ``"kernels:gemm*0.5"``, ``"no-stragglers"``); none replays the
        trace as it is. One row per rank and ``ProfilerStep`` with ``measured(us)``,
        ``replayed(us)``, ``predicted(us)``, the replay's error and the job's (slowest
        rank's) measured and predicted step. See :func:`hta.analysis.whatif.what_if`.
        Every loaded rank is replayed (collectives couple them). On a job loaded on a
        Dask cluster each rank replays where it lives, and only the collectives' start
        times travel (:mod:`hta.analysis.whatif.coupled`); the answer is the same.
        """
        return self._whatif_predict(changes)

    def get_findings_what_if(self, ranks: Ranks = None,
                             iterations: Iterations = None,
                             min_share: float | None = None) -> pd.DataFrame:
        """The same table as :meth:`get_findings`, whose savings are the replay's (kept
        for code written against earlier versions)."""
        return self.get_findings(ranks, iterations, min_share)  # type: ignore[attr-defined]

    def replay_findings(self, findings: pd.DataFrame) -> pd.DataFrame:
        """``findings`` (the rules' table) with each fix's replayed saving and its range
        (:mod:`hta.analysis.whatif.findings`); when the job cannot be replayed, the rules'
        estimates labelled ``gpu-time`` (logged)."""
        from hta.analysis.whatif.findings import findings_with_changes
        from hta.analysis.whatif.uncertainty import inferred_share

        try:
            share = inferred_share(self.get_replay_uncertainty())
            windows = self._stepless_windows()

            def predict(change: Any) -> pd.DataFrame:
                return self._whatif_predict(change, modelled=False, windows=windows)

            return findings_with_changes(findings, self._predicted_ahead(findings, predict),
                                         share)
        except Exception as exc:  # noqa: BLE001 - the rules' estimates are still an answer
            logger.warning("the findings' savings could not be replayed (%s); they are the "
                           "rules' GPU-time estimates", exc, exc_info=True)
            return findings_with_changes(findings, None)

    def _predicted_ahead(self, findings: pd.DataFrame,
                         predict: Callable[[Any], pd.DataFrame]
                         ) -> Callable[[Any], pd.DataFrame]:
        """``predict``, with the findings' changes predicted ahead on worker processes
        forked from this one (they inherit the job graph; only the tables come back) when
        the graph is large (:data:`PARALLEL_MIN_NODES`) and the job may use several
        workers; a change whose prediction failed there is predicted here again (its
        error raised here). The tables are those ``predict`` gives here."""
        from hta.analysis.whatif.findings import change_key, changes_to_replay
        from hta.model.spread import can_fork, forked_map, job_workers

        changes = changes_to_replay(findings)
        workers = min(job_workers(self.t), len(changes))
        if workers < 2 or getattr(self.t, "keeps_remotely", False) or not can_fork() or \
                self._whatif_job()[0].num_nodes < PARALLEL_MIN_NODES:
            return predict
        outcomes = forked_map(predict, changes, workers)
        done = {change_key(c): o.value for c, o in zip(changes, outcomes, strict=True)
                if o.ok}

        def ahead(change: Any) -> pd.DataFrame:
            table = done.get(change_key(change))
            return table if table is not None else predict(change)

        return ahead

    def _stepless_windows(self) -> dict[int, Any]:
        """Per rank without ``ProfilerStep``, the findings' analysis window (its steady
        state), or the iterations found in it when there are two or more
        (:func:`hta.analysis.findings.warmup.iteration_windows`): the replay measures a
        finding's saving over the time the finding is about, iteration by iteration
        where the trace repeats a loop, not over the whole trace."""
        from hta.analysis.findings.warmup import iteration_windows
        from hta.model.selection import rank_steps

        out: dict[int, Any] = {}
        if getattr(self.t, "keeps_remotely", False):
            return out  # the coupled replays measure every rank's whole trace
        shifts = self.clock_shifts() if hasattr(self, "clock_shifts") else {}
        for r in self.t.get_ranks():
            rt = self.t.rank(r)
            if not len(rank_steps(rt)):
                offset = int(shifts.get(r, 0))  # the replay's clock (shift_rank)
                found = [(a - offset, b - offset) for a, b in iteration_windows(rt)]
                out[r] = found if len(found) > 1 else found[0]
        return out

    def get_replay_uncertainty(self) -> pd.DataFrame:
        """Per rank, what the trace leaves the replay to guess: unresolved synchronizations,
        inferred waits, the share of binding edges inferred, and whether (and why) its
        predictions are uncertain. See :mod:`hta.analysis.whatif.uncertainty`. On a job
        kept on Dask workers each rank's row is computed where its graph is kept."""
        from hta.analysis.whatif.uncertainty import (
            coupled_rank_uncertainty,
            replay_uncertainty,
            uncertainty_table,
        )

        cached: Any = getattr(self, "_uncertainty_cache", None)
        if cached is None:
            if getattr(self.t, "keeps_remotely", False):
                kept = self._whatif_coupled()[0]
                rows = kept.map(coupled_rank_uncertainty, description="Replay uncertainty")
                cached = uncertainty_table([rows[r] for r in sorted(rows)])
            else:
                cached = replay_uncertainty(self._whatif_job()[0])
            self._uncertainty_cache = cached
        return cached.copy()

    def get_step_bounds(self, iterations: Iterations = None
                        ) -> pd.DataFrame:
        """Per step (``iterations``: those only): which rank and which work bound the job's
        step, the step if that rank were at the median (``no-stragglers`` on that rank
        alone), the measured step and the replay's error. See
        :func:`hta.analysis.whatif.jobpath.job_step_bound`."""
        return self._step_bound(iterations, each_step=True)[0].copy()

    def get_job_step_bound(self, iterations: Iterations = None
                           ) -> dict[str, Any] | None:
        """What bounds the job's step over the steps (``iterations``: those only): the rank
        bounding the most steps, the work on the job's critical path by kind and its
        largest piece, the mean step if that rank alone were at the median
        (``no-stragglers:RANK``) and the replay's error; None without a step. What ``hta
        summary`` and ``hta report`` show. See
        :func:`hta.analysis.whatif.jobpath.job_step_bound`."""
        found = self._step_bound(iterations, each_step=False)[1]
        return dict(found) if found is not None else None

    def _step_bound(self, iterations: Iterations, each_step: bool
                    ) -> tuple[pd.DataFrame, dict[str, Any] | None]:
        """:func:`~hta.analysis.whatif.jobpath.job_step_bound`, kept per selection of steps
        (a result with every step's prediction also answers a call without)."""
        from hta.analysis.whatif.jobpath import job_step_bound, step_bound_of

        steps = iteration_list(iterations)
        key = None if steps is None else tuple(steps)
        done: dict[Any, Any] = self.__dict__.setdefault("_step_bound_cache", {})
        if key not in done or (each_step and not done[key][0]):
            if getattr(self.t, "keeps_remotely", False):
                found = step_bound_of(
                    lambda c, m: self._whatif_predict(c, m, check=False),
                    self.get_job_critical_path, steps, each_step)
            else:
                jg, base = self._whatif_job()
                found = job_step_bound(jg, base, getattr(self, "rules", None), steps,
                                       each_step)
            done[key] = (each_step, found)
        return done[key][1]

    def get_job_critical_path(self, iteration: int | None = None) -> pd.DataFrame:
        """The longest path through the job graph for one step (``iteration``: its
        ``ProfilerStep`` number; None: the first; -1 on traces without steps), one row
        per segment: ``rank``, ``kind`` (cpu, launch, gpu, comm, wait), ``name``,
        ``start(us)``, ``dur(us)``; the durations add up to the step. See
        :mod:`hta.analysis.whatif.jobpath`."""
        from hta.analysis.whatif.coupled import coupled_critical_path
        from hta.analysis.whatif.jobpath import job_critical_path

        if getattr(self.t, "keeps_remotely", False):
            kept, coupling = self._whatif_coupled()
            return coupled_critical_path(kept, coupling, iteration)
        jg, base = self._whatif_job()
        return job_critical_path(jg, base, iteration)

    def plot_job_critical_path(self, iteration: int | None = None,
                               visualize: bool = True) -> go.Figure:
        """The job's critical path for one step (:meth:`get_job_critical_path`) drawn over
        the ranks: one row per rank, one bar per segment from its start to its end (µs from
        the step's start in the replay), coloured by kind; the hover names the work. Shown
        when ``visualize``; returned either way."""
        from hta.plots.whatif import job_critical_path_figure

        path = self.get_job_critical_path(iteration)
        step = "the whole trace" if iteration == -1 else \
            f"step {iteration}" if iteration is not None else "the first step"
        fig = job_critical_path_figure(path, step)
        if visualize:
            show(fig)
        return fig
