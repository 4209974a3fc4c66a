"""Figure of the launch queue length per stream (a step function over time)."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go


def queue_length_figure(series: pd.DataFrame, threshold: int | None = None) -> go.Figure:
    """One step line per (rank, device, stream) of
    :func:`hta.analysis.queue.queue_length_time_series`; ``threshold`` draws a dashed line
    (e.g. the 1024 entries of CUDA's queue)."""
    fig = go.Figure()
    for (rank, pid, stream), rows in series.groupby(["rank", "pid", "stream"], sort=True):
        label = f"{rank_label(rank)}, device {pid}, stream {stream}"
        fig.add_trace(go.Scattergl(
            x=pd.to_datetime(rows["ts"], unit="ns"), y=rows["queue_length"], name=label,
            mode="lines", line_shape="hv",
            hovertemplate="%{x}<br>%{y} queued<extra>" + label + "</extra>",
        ))
    if threshold is not None:
        fig.add_hline(y=threshold, line_dash="dash", annotation_text=f"{threshold}")
    fig.update_layout(title_text="Launch queue length per stream",
                      legend_title_text="rank, device, stream")
    fig.update_xaxes(title_text="time")
    fig.update_yaxes(title_text="queued GPU operations", rangemode="tozero")
    return fig
