"""Stragglers on ``TraceAnalysis``: HTA's ``get_potential_stragglers`` and the tables that
explain its answer.

The definitions (matching collectives across ranks, arrival lag, wait caused, score)
are in :mod:`hta.analysis.stragglers`; each rank's communication kernels are read next to
the data (:func:`~hta.model.runner.run`) and matched here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd

from hta.facade.clock import ClockMixin
from hta.facade.display import show
from hta.facade.empty import one_rank, say_why_empty
from hta.facade.selecting import RanksOrSelection, selected
from hta.model.selection import Iterations, Ranks

if TYPE_CHECKING:
    from hta.model.job import Job

logger = logging.getLogger(__name__)

#: ``(arrivals, num_candidates) -> Series`` of a value per rank (index: rank); the ranks
#: with the largest positive values are the candidates.
StragglerImpl = Callable[[pd.DataFrame, int], pd.Series]


class StragglersMixin(ClockMixin):
    """Methods of the straggler analysis (times on one clock: :class:`ClockMixin`)."""

    t: Job

    def get_collective_arrivals(self, ranks: RanksOrSelection = None,
                                iterations: Iterations = None,
                                align_clocks: bool = True) -> pd.DataFrame:
        """One row per (collective instance, rank): when the rank's kernel started, its
        lag behind the earliest rank, how long it waited for the last one and the wait it
        caused. See :func:`hta.analysis.stragglers.collective_arrivals`; times are on the
        reference clock (:meth:`get_clock_offsets`) unless ``align_clocks=False``."""
        from hta.analysis.clock import aligned_arrivals

        return aligned_arrivals(self.t, selected(self.t, ranks, iterations),
                                offsets=self.clock_shifts(align_clocks))

    def get_straggler_summary(self, ranks: Ranks = None, iterations: Iterations = None,
                              visualize: bool = False) -> pd.DataFrame:
        """Per rank: collectives, times last, mean and total lag, the wait it caused the
        others and its ``score`` (its share of all the wait), highest score first. See
        :func:`hta.analysis.stragglers.straggler_summary`."""
        from hta.analysis.stragglers import straggler_summary
        from hta.plots.stragglers import straggler_figure

        arrivals = self.get_collective_arrivals(selected(self.t, ranks, iterations))
        summary = straggler_summary(arrivals)
        if visualize:
            show(straggler_figure(summary, arrivals))
        return summary

    def get_potential_stragglers(
        self, profiler_steps: list[int] | None = None, num_candidates: int = 2,
        visualize: bool = False, straggler_identification_impl: StragglerImpl | None = None,
        ranks: Ranks = None,
    ) -> list[int]:
        """The ranks most likely to hold the others up, at most ``num_candidates``
        (HTA's method, arguments and return type).

        A rank is a candidate when it made other ranks wait at a collective; candidates
        are ordered by their ``score``, their share of all the wait in the selected
        steps (:meth:`get_straggler_summary` explains the answer, with the numbers).
        Fewer than ``num_candidates`` ranks (or none) come back when fewer made anyone
        wait. ``profiler_steps``: the ``ProfilerStep`` numbers (None: all); steps with
        no collective raise ``ValueError``, as in HTA. ``straggler_identification_impl``:
        a function ``(arrivals, num_candidates) -> Series`` giving a value per rank (the
        index) from :meth:`get_collective_arrivals`'s table, replacing the score (HTA's
        hook takes HTA's own frames, which we do not have). ``visualize`` shows
        :func:`hta.plots.stragglers.straggler_figure`.
        """
        from hta.analysis.stragglers import potential_stragglers, straggler_summary
        from hta.plots.stragglers import straggler_figure

        num_candidates = max(1, int(num_candidates))
        selection = selected(self.t, ranks, profiler_steps)
        arrivals = self.get_collective_arrivals(selection)
        if profiler_steps is not None and not len(arrivals):
            everything = self.get_collective_arrivals(selection.every_event())
            have = sorted(int(i) for i in everything["iteration"].unique() if int(i) >= 0)
            raise ValueError(f"invalid value for argument: profiler_steps={profiler_steps}: "
                             f"no collective in those steps; steps with collectives: {have}")
        summary = straggler_summary(arrivals)
        n_ranks = len(self.t.selected_ranks(selection.rank_list))
        if n_ranks < 2:
            say_why_empty(self, "stragglers", one_rank(n_ranks))
        if straggler_identification_impl is None:
            found = potential_stragglers(summary, num_candidates)
        else:
            values = pd.Series(straggler_identification_impl(arrivals, num_candidates))
            values = values[values > 0].sort_values(ascending=False, kind="stable")
            found = [int(r) for r in values.index[:num_candidates]]
        logger.debug("potential stragglers: %s", found)
        if visualize:
            show(straggler_figure(summary, arrivals))
        return found
