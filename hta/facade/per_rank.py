"""Per-rank breakdowns run next to the data when the ranks are not in this process.

When ``TraceAnalysis.t`` is a :class:`~hta.loading.lazy.LazyTrace` (ranks on Dask
workers, or kept as Parquet entries because the job is larger than memory), these
methods run the existing analysis function on one rank at a time where the rank is
(:func:`~hta.loading.lazy.map_ranks`) and bring back only the per-rank rows; the figure is
built from the gathered DataFrame exactly as the breakdown methods do. On an in-memory
trace they are the methods of :class:`~hta.facade.breakdown.BreakdownMixin`, unchanged.

Same signatures and results as the breakdown methods (a test checks both); the
definitions are in :mod:`hta.analysis.temporal` and :mod:`hta.analysis.overlap`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from hta.analysis import overlap, temporal
from hta.facade.breakdown import BreakdownMixin, Iterations, Ranks, _not_bool, _show
from hta.loading.lazy import LazyTrace, map_ranks
from hta.plots.overlap import comm_comp_overlap_figure
from hta.plots.temporal import temporal_breakdown_figure

if TYPE_CHECKING:
    from hta.model.trace import Trace


class PerRankMixin(BreakdownMixin):
    """Routes the per-rank breakdowns of a lazy trace through ``map_ranks``."""

    t: Trace

    def get_temporal_breakdown(self, ranks: Ranks = None, iterations: Iterations = None,
                               visualize: bool = True) -> pd.DataFrame:
        """See :meth:`BreakdownMixin.get_temporal_breakdown`."""
        if not isinstance(self.t, LazyTrace):
            return super().get_temporal_breakdown(ranks, iterations, visualize)
        _not_bool("ranks", ranks)
        df = map_ranks(self.t, temporal.temporal_breakdown, ranks, (iterations,),
                       description="Temporal breakdown")
        _show(visualize, [temporal_breakdown_figure(df)])
        return df

    def get_temporal_breakdown_detail(self, ranks: Ranks = None, iterations: Iterations = None,
                                      per_iteration: bool = False,
                                      visualize: bool = True) -> pd.DataFrame:
        """See :meth:`BreakdownMixin.get_temporal_breakdown_detail`."""
        if not isinstance(self.t, LazyTrace):
            return super().get_temporal_breakdown_detail(ranks, iterations, per_iteration,
                                                         visualize)
        _not_bool("ranks", ranks)
        df = map_ranks(self.t, temporal.temporal_breakdown_detail, ranks,
                       (iterations, per_iteration), description="Temporal breakdown")
        _show(visualize, [temporal_breakdown_figure(df)])
        return df

    def get_comm_comp_overlap(self, ranks: Ranks = None, iterations: Iterations = None,
                              visualize: bool = True) -> pd.DataFrame:
        """See :meth:`BreakdownMixin.get_comm_comp_overlap`."""
        if not isinstance(self.t, LazyTrace):
            return super().get_comm_comp_overlap(ranks, iterations, visualize)
        _not_bool("ranks", ranks)
        df = map_ranks(self.t, overlap.comm_comp_overlap, ranks, (iterations,),
                       description="Comm/compute overlap")
        _show(visualize, [comm_comp_overlap_figure(df)])
        return df
