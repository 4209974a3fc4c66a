"""HTA's GPU-kernel timeline functions, drawn by this package's timeline.

``plot_timeline_gpu_kernels(title, df, symbol_table, ...)`` takes events tables (one
rank's, or several ranks' concatenated with a ``rank`` column, as HTA's notebook builds
them), keeps their GPU work and draws it with :func:`hta.plots.timeline.timeline_figure`
from :func:`hta.analysis.timeline.timeline_segments`. It shows the figure and returns
None as HTA does; :func:`timeline_gpu_kernels_figure` returns it.

As :meth:`hta.trace_analysis.TraceAnalysis.plot_timeline_gpu_kernels`, kernels keep
their real durations: ``duration_threshold`` is accepted and not used.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from hta.analysis.timeline import timeline_segments
from hta.facade.display import show
from hta.model.selection import Selection
from hta.model.trace import RankTrace, SymbolView
from hta.model.trace import Trace as ModelTrace
from hta.plots.timeline import timeline_figure

logger = logging.getLogger(__name__)

__all__ = ["frame_trace", "plot_timeline_gpu_kernels", "plot_timeline_gpu_kernels_from_trace",
           "timeline_gpu_kernels_figure"]


def frame_trace(df: pd.DataFrame, symbol_table: SymbolView) -> ModelTrace:
    """A trace holding the given rows (this package's events columns; a ``rank`` column
    splits them by rank, else they are rank 0), sharing ``symbol_table``'s names."""
    symbols = list(symbol_table.get_sym_table())
    by_rank = df.groupby("rank", sort=True) if "rank" in df.columns else [(0, df)]
    ranks = {}
    for rank, rows in by_rank:
        events = rows.drop(columns=["rank"], errors="ignore").sort_values("ts", kind="stable")
        ranks[int(rank)] = RankTrace(rank=int(rank), events=events.reset_index(drop=True),
                                     symbols=symbols, tables={}, meta={})
    return ModelTrace(ranks)


def timeline_gpu_kernels_figure(
    title: str, df: pd.DataFrame, symbol_table: SymbolView,
    ranks: Sequence[int] | None = None, iterations: Sequence[int] | None = None,
    streams: Sequence[int] | None = None,
) -> go.Figure:
    """The figure of the GPU work among ``df``'s rows, in the selected ranks, steps and
    streams (None: all)."""
    trace = frame_trace(df, symbol_table)
    if ranks is not None:
        ranks = [r for r in ranks if r in trace.ranks]
    segments = timeline_segments(trace, Selection.of(ranks, iterations), streams=streams)
    return timeline_figure(segments, title=title)


def plot_timeline_gpu_kernels(
    title: str, df: pd.DataFrame, symbol_table: SymbolView,
    ranks: Sequence[int] | None = None, iterations: Sequence[int] | None = None,
    streams: Sequence[int] | None = None, duration_threshold: int = 1000,
    **kwargs: Any,
) -> None:
    """Show the GPU timeline of ``df``'s rows (HTA's function); returns None."""
    if duration_threshold != 1000:
        logger.info("duration_threshold=%s is not used: kernels keep their real durations",
                    duration_threshold)
    if kwargs:
        logger.info("ignored keywords: %s", sorted(kwargs))
    show(timeline_gpu_kernels_figure(title, df, symbol_table, ranks, iterations, streams))


def plot_timeline_gpu_kernels_from_trace(
    title: str, trace: Any, ranks: Sequence[int] | None = None,
    iterations: Sequence[int] | None = None, streams: Sequence[int] | None = None,
    duration_threshold: int = 1000, **kwargs: Any,
) -> None:
    """Show the GPU timeline of a loaded trace (``analyzer.t`` or an
    :class:`hta.common.trace.Trace`); returns None."""
    frames = trace.get_all_traces()
    df = pd.concat([f.assign(rank=r) for r, f in frames.items()], ignore_index=True)
    plot_timeline_gpu_kernels(title, df, trace.symbol_table, ranks, iterations, streams,
                              duration_threshold, **kwargs)
