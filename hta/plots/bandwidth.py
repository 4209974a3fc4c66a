"""Figure of the memory copy bandwidth per direction over time."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go


def memory_bw_figure(series: pd.DataFrame) -> go.Figure:
    """One step line per (rank, device, direction) of
    :func:`hta.analysis.bandwidth.memory_bw_time_series`, in GB/s."""
    fig = go.Figure()
    for (rank, pid, name), rows in series.groupby(["rank", "pid", "name"], sort=True):
        label = f"{rank_label(rank)}, device {pid}, {name}"
        fig.add_trace(go.Scattergl(
            x=pd.to_datetime(rows["ts"], unit="ns"), y=rows["memory_bw_gbps"], name=label,
            mode="lines", line_shape="hv",
            hovertemplate="%{x}<br>%{y:,.3f} GB/s<extra>" + label + "</extra>",
        ))
    fig.update_layout(title_text="Memory copy bandwidth", legend_title_text="rank, device, "
                      "direction")
    fig.update_xaxes(title_text="time")
    fig.update_yaxes(title_text="bandwidth (GB/s)", rangemode="tozero")
    return fig


def memory_bw_summary_figure(summary: pd.DataFrame) -> go.Figure:
    """Per-copy bandwidth (median with min/max whiskers) per rank and direction, from
    :func:`hta.analysis.bandwidth.memory_bw_summary`."""
    fig = go.Figure()
    for name, rows in summary.groupby("name", sort=True):
        med = rows["p50_bw_gbps"]
        fig.add_trace(go.Bar(
            x=[rank_label(r) for r in rows["rank"]], y=med, name=str(name),
            error_y={"type": "data", "symmetric": False, "array": rows["max_bw_gbps"] - med,
                     "arrayminus": med - rows["min_bw_gbps"]},
            customdata=rows[["count", "achieved_bw_gbps"]],
            hovertemplate="%{x}<br>median %{y:,.3f} GB/s<br>%{customdata[0]} copies"
                          "<br>achieved %{customdata[1]:,.3f} GB/s<extra>" + str(name)
                          + "</extra>",
        ))
    fig.update_layout(barmode="group", title_text="Per-copy memory bandwidth",
                      legend_title_text="direction")
    fig.update_xaxes(title_text="rank", type="category")
    fig.update_yaxes(title_text="bandwidth (GB/s)")
    return fig
