"""Figure of the idle time breakdown: stacked bars per rank and stream, by cause."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go
from hta.plots.colors import IDLE

LABELS = {"host_wait": "host wait (CPU late to launch)",
          "kernel_wait": "kernel wait (launch gap below threshold)", "other": "other"}
COLORS = {"host_wait": "#d62728", "kernel_wait": "#1f77b4", "other": IDLE}


def idle_time_breakdown_figure(df: pd.DataFrame, pctg: bool = True) -> go.Figure:
    """Idle time of each (rank, stream), stacked by category.

    ``df`` is :func:`hta.analysis.idle.idle_time_breakdown`'s table. ``pctg=True`` shows
    each category's share of the stream's idle time (%), otherwise the time in µs.
    """
    keys = df[["rank", "stream"]].drop_duplicates()
    x_of = {(r, s): f"{rank_label(r)}, stream {s}" for r, s in keys.itertuples(index=False)}
    fig = go.Figure()
    for category, label in LABELS.items():
        part = df[df["idle_category"] == category]
        x = [x_of[(r, s)] for r, s in zip(part["rank"], part["stream"])]
        y = part["idle_time_ratio"] * 100 if pctg else part["idle_time"]
        fig.add_trace(go.Bar(
            x=x, y=y, name=label, marker_color=COLORS[category],
            customdata=part[["idle_time", "idle_time_ratio", "idle_intervals"]],
            hovertemplate="%{x}<br>" + label + "<br>%{customdata[0]:,.3f} µs"
                          " (%{customdata[1]:.2%} of the stream's idle time)"
                          "<br>%{customdata[2]} gaps<extra></extra>",
        ))
    title = ("GPU idle time per stream, by cause (share of the stream's idle time)" if pctg
             else "GPU idle time per stream, by cause (µs)")
    fig.update_layout(barmode="stack", title_text=title, legend_title_text="idle category")
    fig.update_xaxes(title_text="rank, stream", type="category",
                     categoryorder="array", categoryarray=list(x_of.values()))
    fig.update_yaxes(title_text="share of the stream's idle time (%)" if pctg
                     else "idle time (µs)")
    return fig
