"""What-if replay on ``TraceAnalysis``: predicted step times after a change, and the
job's critical path.

The methods ask the job's :class:`~hta.analysis.whatif.replayer.Replay` (definitions in
:mod:`hta.analysis.whatif`'s docstrings and in ``docs/analyses/whatif.md``), which
chooses the engine and keeps the job graph it built.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from hta.facade.display import show
from hta.facade.selecting import selected
from hta.model.selection import Iterations, Ranks

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from hta.analysis.whatif import Change
    from hta.analysis.whatif.replayer import Replay
    from hta.model.job import Job


class WhatIfMixin:
    """Methods added by the what-if replay; each asks the job's one
    :class:`~hta.analysis.whatif.replayer.Replay`, which chooses the engine and keeps
    what it built."""

    t: Job

    def replay(self) -> Replay:
        """The job's replay (:class:`~hta.analysis.whatif.replayer.Replay`), made on first
        use with the clock shifts of the loaded ranks and the event-kind rules, and kept."""
        from hta.analysis.whatif.replayer import Replay

        found: Replay | None = self.__dict__.get("_replay")
        if found is None:
            shifts = getattr(self, "clock_shifts", dict)  # asked when the replay needs them
            found = Replay(self.t, shifts, getattr(self, "rules", None))
            self.__dict__["_replay"] = found
        return found

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
        return self.replay().predict(changes)

    def get_findings_what_if(self, ranks: Ranks = None,
                             iterations: Iterations = None,
                             min_share: float | None = None) -> pd.DataFrame:
        """The same table as :meth:`get_findings`, whose savings are the replay's (kept
        for code written against earlier versions)."""
        return self.get_findings(  # type: ignore[attr-defined]
            selected(self.t, ranks, iterations), min_share=min_share)

    def replay_findings(self, findings: pd.DataFrame, together: bool = False
                        ) -> pd.DataFrame:
        """``findings`` (the rules' table) with each fix's replayed saving and its range
        (:meth:`~hta.analysis.whatif.replayer.Replay.findings_savings`; ``together``: the
        fixes at once will be asked for next)."""
        return self.replay().findings_savings(findings, together)

    def get_replay_uncertainty(self) -> pd.DataFrame:
        """Per rank, what the trace leaves the replay to guess: unresolved synchronizations,
        inferred waits, the share of binding edges inferred, and whether (and why) its
        predictions are uncertain. See :mod:`hta.analysis.whatif.uncertainty`. On a job
        kept on Dask workers each rank's row is computed where its graph is kept."""
        return self.replay().uncertainty()

    def get_step_bounds(self, iterations: Iterations = None
                        ) -> pd.DataFrame:
        """Per step (``iterations``: those only): which rank and which work bound the job's
        step, the step if that rank were at the median (``no-stragglers`` on that rank
        alone), the measured step and the replay's error. See
        :func:`hta.analysis.whatif.jobpath.job_step_bound`."""
        steps = selected(self.t, None, iterations).iteration_list
        return self.replay().step_bound(steps, True)[0].copy()

    def get_job_step_bound(self, iterations: Iterations = None
                           ) -> dict[str, Any] | None:
        """What bounds the job's step over the steps (``iterations``: those only): the rank
        bounding the most steps, the work on the job's critical path by kind and its
        largest piece, the mean step if that rank alone were at the median
        (``no-stragglers:RANK``) and the replay's error; None without a step. What ``hta
        summary`` and ``hta report`` show. See
        :func:`hta.analysis.whatif.jobpath.job_step_bound`."""
        steps = selected(self.t, None, iterations).iteration_list
        found = self.replay().step_bound(steps, False)[1]
        return dict(found) if found is not None else None

    def get_job_critical_path(self, iteration: int | None = None) -> pd.DataFrame:
        """The longest path through the job graph for one step (``iteration``: its
        ``ProfilerStep`` number; None: the first; -1 on traces without steps), one row
        per segment: ``rank``, ``kind`` (cpu, launch, gpu, comm, wait), ``name``,
        ``start(us)``, ``dur(us)``; the durations add up to the step. See
        :mod:`hta.analysis.whatif.jobpath`."""
        return self.replay().critical_path(iteration)

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
