"""The GPU timeline on ``TraceAnalysis``: ``plot_timeline`` and HTA's
``plot_timeline_gpu_kernels``.

Both draw :func:`hta.plots.timeline.timeline_figure` of
:func:`hta.analysis.timeline.timeline_segments`, run per rank through
:func:`~hta.model.runner.run` (so lazy and Dask-held ranks send back only their
segments). The segment budget is for the whole figure: each selected rank gets an equal
share, so a figure never holds more than ``max_segments`` bars.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from hta.facade.clock import ClockMixin
from hta.facade.display import show
from hta.facade.selecting import RanksOrSelection, selected
from hta.model.selection import Iterations, Ranks, Selection

if TYPE_CHECKING:
    from pathlib import Path

    import plotly.graph_objects as go

    from hta.export.perfetto_job import ExportStats
    from hta.model.job import Job

logger = logging.getLogger(__name__)

#: Bars in one figure, shared by its ranks: what a browser still pans and hovers smoothly.
DEFAULT_FIGURE_SEGMENTS = 20_000


class TimelineMixin(ClockMixin):
    """Methods that draw the GPU timeline (ranks on one clock: :class:`ClockMixin`)."""

    t: Job

    def get_timeline_segments(
        self, ranks: RanksOrSelection = None, iterations: Iterations = None,
        streams: Iterable[int] | int | None = None,
        max_segments: int = DEFAULT_FIGURE_SEGMENTS, resolution_ns: int | None = None,
        align_clocks: bool = True,
    ) -> pd.DataFrame:
        """The segments :meth:`plot_timeline` draws: one row per run of GPU work per rank
        and stream (see :mod:`hta.analysis.timeline` for the columns and the merge rule).
        ``max_segments`` is for all selected ranks together. Times are on the reference
        clock (:meth:`get_clock_offsets`) unless ``align_clocks=False``."""
        from hta.analysis import timeline
        from hta.analysis.clock import shift_times

        selection = selected(self.t, ranks, iterations)
        per_rank = _per_rank_budget(self.t, selection, max_segments)
        timeline.check_budget(per_rank, resolution_ns)
        segments = timeline.TIMELINE_SEGMENTS.run(self.t, selection, streams, per_rank,
                                                  resolution_ns)
        return shift_times(segments, self.clock_shifts(align_clocks))

    def plot_timeline(
        self, ranks: RanksOrSelection = None, iterations: Iterations = None,
        streams: Iterable[int] | int | None = None, *,
        max_segments: int = DEFAULT_FIGURE_SEGMENTS, resolution_ns: int | None = None,
        title: str | None = None, visualize: bool = False, align_clocks: bool = True,
    ) -> go.Figure:
        """A Plotly figure of the GPU work per rank and stream, coloured by kind.

        ``ranks=None`` draws every rank, ``iterations``/``streams`` keep those
        ``ProfilerStep`` numbers and stream ids. When a rank has more events than its share
        of ``max_segments``, events closer than about a pixel merge into one bar (the
        figure says so; hover gives each bar's event count): pass fewer iterations or
        streams, or ``resolution_ns=0`` for every event, to see more detail. Returns the
        figure (Jupyter shows it); ``visualize=True`` also shows it at once.
        """
        from hta.plots.timeline import timeline_figure

        selection = selected(self.t, ranks, iterations)
        segments = self.get_timeline_segments(selection, None, streams,
                                               max_segments=max_segments,
                                               resolution_ns=resolution_ns,
                                               align_clocks=align_clocks)
        fig = timeline_figure(segments, title=title or _title(segments, selection))
        if visualize:
            show(fig)
        return fig

    def plot_timeline_gpu_kernels(
        self, title: str = "GPU kernels", ranks: list[int] | None = None,
        iterations: list[int] | None = None, streams: list[int] | None = None,
        duration_threshold: int = 1000, **kwargs: Any,
    ) -> None:
        """HTA's GPU kernel timeline: shows the figure of :meth:`plot_timeline`, returns
        None as HTA does.

        HTA stretched every kernel shorter than ``duration_threshold`` (µs) to that length
        so it stays visible, which draws kernels over each other and over idle time; here
        kernels keep their real times and what is too small to see merges into counted
        bars, so ``duration_threshold`` is accepted and not used. Other keywords go to
        :meth:`plot_timeline`.
        """
        if duration_threshold != 1000:
            logger.info("duration_threshold=%s is not used: kernels keep their real "
                        "durations (see plot_timeline)", duration_threshold)
        kwargs.pop("visualize", None)
        self.plot_timeline(selected(self.t, ranks, iterations), None, streams, title=title,
                           visualize=True, **kwargs)


    def write_perfetto_job(
        self, path: str | Path, ranks: Ranks = None, *, findings: bool = True,
        align_clocks: bool = True,
    ) -> ExportStats:
        """Write the selected ranks (all by default) as one Perfetto protobuf trace at
        ``path``: a process group per rank, CPU threads and GPU streams as tracks, flows
        from launches to GPU work, the findings as annotated slices; times on the
        reference clock (:meth:`get_clock_offsets`) unless ``align_clocks=False``. Needs
        ``pip install perfetto``. See :mod:`hta.export.perfetto_job`; returns
        what was written (ranks, slices, flows, tracks, bytes)."""
        from hta.export.perfetto_job import (
            protos,
            rank_finding_slices,
            write_job_perfetto,
        )

        selection = selected(self.t, ranks)
        protos()  # fail before any work when Perfetto's package is missing
        drawn = rank_finding_slices(self.t, selection) if findings else None
        return write_job_perfetto(self.t, path, self.t.selected_ranks(selection.rank_list),
                                  offsets=self.clock_shifts(align_clocks), findings=drawn)


def _per_rank_budget(trace: Job, selection: Selection, total: int) -> int:
    from hta.analysis.timeline import segments_per_rank

    wanted = selection.rank_list
    return segments_per_rank(total, len(trace.get_ranks()) if wanted is None else len(wanted))


def _title(segments: pd.DataFrame, selection: Selection) -> str:
    ranks = segments["rank"].nunique() if len(segments) else 0
    text = f"GPU timeline: {ranks} rank(s)"
    its = selection.iteration_list
    if its is not None:
        text += ", iteration(s) " + ", ".join(str(i) for i in its)
    return text
