"""Figures of the operator view and of frequent kernel sequences."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import distinct_short, rank_label, short
from hta.plots._plotly import go

BARS = (("gpu_time(us)", "GPU time"), ("cpu_self_time(us)", "CPU self time"),
        ("cpu_total_time(us)", "CPU total time"))


def operator_breakdown_figure(df: pd.DataFrame, max_rows: int = 25) -> go.Figure:
    """Horizontal bars of GPU, CPU self and CPU total time for the first ``max_rows``
    rows per rank of :func:`hta.analysis.operators.operator_breakdown` (its order: GPU
    time first)."""
    part = df.groupby("rank", sort=True).head(max_rows)
    rows = list(zip(part["rank"], part["name"], part["input_shapes"]))
    brief = {f"{rank_label(r)}: {n}" + (f" {s}" if s else ""):
             f"{rank_label(r)}: {short(n, 60)}" + (f" {short(s, 40)}" if s else "")
             for r, n, s in rows}
    # equal labels would be one bar: rows whose short labels clash keep more of the name
    label = distinct_short([f"{rank_label(r)}: {n}" + (f" {s}" if s else "")
                            for r, n, s in rows], 110, brief.__getitem__)
    fig = go.Figure()
    for column, name in BARS:
        fig.add_trace(go.Bar(
            y=label, x=part[column], name=name, orientation="h",
            customdata=part[["name", "calls", "kernels"]],
            hovertemplate="%{customdata[0]}<br>" + name + " %{x:,.3f} µs<br>%{customdata[1]} "
                          "calls, %{customdata[2]} GPU events<extra></extra>",
        ))
    fig.update_layout(barmode="group", title_text="Operators: GPU and CPU time",
                      height=max(400, 28 * len(part) * len(BARS) // 2 + 150),
                      legend_title_text="time")
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title_text="time (µs)")
    return fig


def frequent_sequences_figure(df: pd.DataFrame, rank: int) -> go.Figure:
    """Bars of the ``count`` of each pattern of
    :func:`hta.analysis.sequences.frequent_cuda_kernel_sequences` (rows as given)."""
    hover = [p.replace("|", "<br>") for p in df["pattern"]]
    fig = go.Figure(go.Bar(
        x=[str(i) for i in range(len(df))], y=df["count"], customdata=hover,
        hovertemplate="pattern %{x}: %{y} times<br>%{customdata}<extra></extra>",
    ))
    fig.update_layout(title_text=f"Most frequent GPU kernel sequences on {rank_label(rank)}")
    fig.update_xaxes(title_text="pattern", type="category")
    fig.update_yaxes(title_text="count")
    return fig
