"""Why ranks are late, and where a pipeline idles, on ``TraceAnalysis``:
:meth:`~PipelineMixin.get_straggler_causes` and :meth:`~PipelineMixin.get_pipeline_bubbles`.

The definitions are in :mod:`hta.analysis.straggler_causes` and
:mod:`hta.analysis.pipeline`; each rank's part is computed next to the data
(:func:`~hta.model.runner.run_one`), and only small per-rank tables come back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pandas as pd

from hta.facade.display import show
from hta.facade.selecting import selected
from hta.facade.stragglers import StragglersMixin
from hta.model.selection import Iterations, Ranks, Selection

if TYPE_CHECKING:
    from hta.model.job import Job

logger = logging.getLogger(__name__)

#: The causes a replay change models: the change's saving is the row's ``cost(us)``.
REPLAYED_CAUSES = ("slow_compute", "imbalance")
#: Most rows whose cost is replayed (one replay each; the rows holding the others up
#: longest); the others keep the measured ``held(us)``.
MAX_REPLAYED = 8
#: The tables :meth:`PipelineMixin.get_pipeline_bubbles` gives, by its ``per``.
PER = ("micro_batch", "step", "timeline")


class PipelineMixin(StragglersMixin):
    """Straggler causes and pipeline bubbles."""

    t: Job

    def get_straggler_causes(self, ranks: Ranks = None, iterations: Iterations = None,
                             replay: bool = True) -> pd.DataFrame:
        """Why each late rank is late: one row per rank and cause (``slow_compute``,
        ``imbalance``, ``host``, ``slow_link`` or ``unexplained``), with the steps it was
        late on, whether it recurs, the wait it caused and the evidence (its GPU
        computation, GPU idle time and transfer time per step against the median rank's).
        Empty when no rank holds the others up above the job's noise. Definitions:
        :mod:`hta.analysis.straggler_causes`.

        ``cost(us)``: for ``slow_compute`` and ``imbalance``, what the replay predicts the
        job's steps (those the row names) would gain with ``no-stragglers:RANK`` (the
        rank's computation at the median), named in ``change``, for the
        :data:`MAX_REPLAYED` rows that held the others up longest; for the other rows and
        causes, which no replay change models, the measured ``held(us)``. ``replay=False`` (or a
        job the replay cannot build) gives ``held(us)`` for every row.
        """
        from hta.analysis.straggler_causes import CAUSE_TABLE, job_straggler_causes

        selection = selected(self.t, ranks, iterations)
        if len(self.t.selected_ranks(selection.rank_list)) < 2:
            return CAUSE_TABLE.empty()
        arrivals = self.get_collective_arrivals(selection)
        causes = job_straggler_causes(self.t, selection, arrivals, self.clock_shifts(True))
        return self._straggler_costs(causes, replay)

    def _straggler_costs(self, causes: pd.DataFrame, replay: bool) -> pd.DataFrame:
        """``causes`` with ``cost(us)`` and ``change`` (:meth:`get_straggler_causes`)."""
        causes = causes.copy()
        causes["cost(us)"] = causes["held(us)"]
        if not replay or not len(causes):
            return causes
        replayed = causes.index[causes["cause"].isin(REPLAYED_CAUSES)][:MAX_REPLAYED]
        for i, row in causes.loc[replayed].iterrows():
            change = f"no-stragglers:{int(row['rank'])}"
            try:
                table = self.what_if(change)  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - the measured wait is still an answer
                logger.warning("straggler causes: %s could not be replayed (%s); cost(us) "
                               "is the measured wait", change, exc)
                return causes
            per_step = table.drop_duplicates("step").set_index("step")
            steps = [s for s in row["steps"] if s in per_step.index]
            if list(per_step.index) == [-1]:  # no ProfilerStep: the replay's one window
                steps = [-1]
            gain = (per_step.loc[steps, "job_measured(us)"]
                    - per_step.loc[steps, "job_predicted(us)"]).clip(lower=0)
            causes.at[i, "cost(us)"] = float(gain.sum())
            causes.at[i, "change"] = change
        return causes

    def get_pipeline_bubbles(self, ranks: Ranks = None, iterations: Iterations = None,
                             per: str = "micro_batch", visualize: bool = False
                             ) -> pd.DataFrame:
        """Where each pipeline stage's computation idles: per stage, step, micro-batch and
        phase (``per="micro_batch"``), the computation, the bubble (time in the step's
        pipeline window with no computation on the stage), and in its send/recv kernels
        the wait for the peer and the transfer; ``per="step"``: per stage and step, with
        the schedule (``gpipe``, ``1f1b``, ``interleaved``, ``unknown``) and the
        theoretical bubble; ``per="timeline"``: the intervals (computation, bubble, wait,
        transfer) on one clock, for a stages x time figure. Stages come from the send/recv
        graph. Empty for a job with no matched send/recv. Definitions:
        :mod:`hta.analysis.pipeline`. ``visualize`` shows
        :func:`hta.plots.pipeline.pipeline_figure`."""
        if per not in PER:
            raise ValueError(f"per={per!r}: expected one of {', '.join(PER)}")
        key = selected(self.t, ranks, iterations)
        cache = self.__dict__.setdefault("_pipeline_cache", {})
        if key not in cache:
            cache.clear()
            cache[key] = self._pipeline_tables(key)
        bubbles, steps, timeline = (t.copy() for t in cache[key])
        if visualize:
            from hta.analysis.pipeline_bubbles import stage_means
            from hta.plots.pipeline import pipeline_figure

            show(pipeline_figure(stage_means(steps), timeline))
        return {"micro_batch": bubbles, "step": steps, "timeline": timeline}[per]

    def _pipeline_tables(self, selection: Selection
                         ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """The micro-batch, step and timeline tables of :meth:`get_pipeline_bubbles`:
        each stage's runs of computation read where the rank is, combined here
        (:func:`hta.analysis.pipeline_bubbles.pipeline_tables`)."""
        from hta.analysis.pipeline import PIPELINE_COMPUTE, RUNS, stage_order
        from hta.analysis.pipeline_bubbles import pipeline_tables

        arrivals = self.get_collective_arrivals(selection)
        p2p = arrivals[arrivals["matched_by"] == "p2p"] if len(arrivals) else arrivals
        stages = stage_order(p2p) if len(p2p) else {}
        if not stages:
            return pipeline_tables(RUNS.empty(), p2p)
        iters = selection.iteration_list
        runs = PIPELINE_COMPUTE.run(self.t, Selection.of(sorted(stages), iters), iters)
        return pipeline_tables(runs, p2p, self.clock_shifts(True))
