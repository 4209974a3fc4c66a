"""Figure of the temporal breakdown: a stacked bar per rank (or per rank and step)."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go
from hta.plots.colors import COMMUNICATION, COMPUTATION, IDLE, MEMORY

#: (label, percentage column, µs column), bottom to top.
HTA_PARTS = [
    ("compute", "compute_time_pctg", "compute_time(us)"),
    ("non-compute (communication, memory)", "non_compute_time_pctg", "non_compute_time(us)"),
    ("idle", "idle_time_pctg", "idle_time(us)"),
]
DETAIL_PARTS = [
    ("compute", "compute_time_pctg", "compute_time(us)"),
    ("exposed communication", "exposed_comm_time_pctg", "exposed_comm_time(us)"),
    ("exposed memory", "exposed_memory_time_pctg", "exposed_memory_time(us)"),
    ("idle", "idle_time_pctg", "idle_time(us)"),
]
COLORS = {"compute": COMPUTATION, "non-compute (communication, memory)": COMMUNICATION,
          "exposed communication": COMMUNICATION, "exposed memory": MEMORY, "idle": IDLE}


def temporal_breakdown_figure(df: pd.DataFrame) -> go.Figure:
    """Stacked bars of each rank's GPU time span: compute, non-compute (or exposed
    communication and exposed memory, for the detail table), idle; in % of the span.

    Takes the table of :func:`hta.analysis.temporal.temporal_breakdown` or of
    :func:`~hta.analysis.temporal.temporal_breakdown_detail` (per iteration too: one bar
    per rank and step, the time outside the steps, iteration -1, left out).
    """
    parts = DETAIL_PARTS if "exposed_comm_time_pctg" in df else HTA_PARTS
    per_step = "iteration" in df
    if per_step:  # the time outside the steps (iteration -1) is no step: not drawn
        df = df[df["iteration"] >= 0]
    x = [_label(row) for row in df.to_dict("records")]
    fig = go.Figure()
    for label, pctg, us in parts:
        fig.add_trace(go.Bar(
            x=x, y=df[pctg], name=label, marker_color=COLORS[label],
            customdata=df[[us, "kernel_time(us)"]],
            hovertemplate="%{x}<br>" + label + ": %{y:.2f}% = %{customdata[0]:,.3f} µs"
                          "<br>GPU span %{customdata[1]:,.3f} µs<extra></extra>",
        ))
    title = ("GPU time breakdown per rank and step (share of each step's GPU time span)"
             if per_step else "GPU time breakdown per rank (share of the GPU time span)")
    fig.update_layout(barmode="stack", title_text=title, legend_title_text="GPU time")
    fig.update_xaxes(title_text="rank" if "iteration" not in df else "rank, step",
                     type="category")
    fig.update_yaxes(title_text="share of GPU time span (%)", range=[0, 100])
    return fig


def _label(row: dict) -> str:
    if "iteration" in row:
        return f"{rank_label(row['rank'])}, step {row['iteration']}"
    return rank_label(row["rank"])
