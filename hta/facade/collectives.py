"""Collective performance on ``TraceAnalysis``: per call, per collective and message size,
and the figure of bus bandwidth against message size.

The definitions (operation, message size, algorithm and bus bandwidth, imbalance) are in
:mod:`hta.analysis.collectives`; each rank's calls are read next to the data
(:func:`~hta.model.runner.run`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from hta.facade.display import show
from hta.facade.selecting import RanksOrSelection, selected
from hta.model.selection import Iterations, Ranks

if TYPE_CHECKING:
    from hta.model.job import Job


class CollectivesMixin:
    """Methods of the collective performance analysis."""

    t: Job

    def get_collective_performance(self, ranks: RanksOrSelection = None,
                                   iterations: Iterations = None,
                                   visualize: bool = False) -> pd.DataFrame:
        """One row per collective call (communication kernel): ``rank, collective,
        process_group, group_size, dtype, msg_bytes, time(us), algbw(GB/s), busbw(GB/s),
        stream`` and more; see :func:`hta.analysis.collectives.collective_performance`.
        ``visualize`` shows :func:`hta.plots.collectives.collective_bandwidth_figure`."""
        from hta.analysis.collectives import COLLECTIVE_ROWS
        from hta.plots.collectives import collective_bandwidth_figure

        perf = COLLECTIVE_ROWS.run(self.t, selected(self.t, ranks, iterations))
        if visualize:
            show(collective_bandwidth_figure(perf))
        return perf

    def get_collective_performance_summary(self, ranks: Ranks = None,
                                           iterations: Iterations = None) -> pd.DataFrame:
        """Per collective, process group, dtype and message size: calls, time and bus
        bandwidth; see :func:`hta.analysis.collectives.collective_summary`."""
        from hta.analysis.collectives import collective_summary

        return collective_summary(self.get_collective_performance(
            selected(self.t, ranks, iterations)))

    def get_slow_collectives(self, ranks: Ranks = None, iterations: Iterations = None,
                             link_gbps: float | None = None) -> pd.DataFrame:
        """The calls far below the link's bandwidth that the ``collective_bw`` finding
        counts, with their transfer time, wait for late peers and saving; ``link_gbps``
        (GB/s per direction) replaces the link table. See
        :mod:`hta.analysis.findings.collective_bw`."""
        from hta.analysis.findings.collective_bw import slow_collectives

        return slow_collectives(self.t, selected(self.t, ranks, iterations), link_gbps=link_gbps)
