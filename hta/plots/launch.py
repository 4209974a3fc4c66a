"""Figures of the kernel launch statistics: short kernels, runtime and launch-delay outliers."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go, make_subplots

PANELS = (
    ("short_kernel", "cpu_duration(us)",
     "Short GPU work (GPU duration < launch call duration)", "launch call duration (µs)"),
    ("runtime_outlier", "cpu_duration(us)",
     "Launch call duration outliers (> {runtime_cutoff} µs)", "launch call duration (µs)"),
    ("launch_delay_outlier", "launch_delay(us)",
     "Launch delay outliers (> {launch_delay_cutoff} µs)", "launch delay (µs)"),
)


def launch_stats_figure(df: pd.DataFrame, runtime_cutoff: float,
                        launch_delay_cutoff: float) -> go.Figure:
    """Three histograms, one per flag column of
    :func:`hta.analysis.launch.cuda_kernel_launch_stats`'s table, one colour per rank.

    The cutoffs only label the panels: the flags were computed with them.
    """
    titles = [t.format(runtime_cutoff=runtime_cutoff, launch_delay_cutoff=launch_delay_cutoff)
              for _, _, t, _ in PANELS]
    fig = make_subplots(rows=len(PANELS), cols=1, subplot_titles=titles,
                        vertical_spacing=0.12)
    for i, (flag, column, _, axis) in enumerate(PANELS, start=1):
        part = df[df[flag].astype(bool)]
        for rank, rows in part.groupby("rank", sort=True):
            fig.add_trace(go.Histogram(
                x=rows[column], name=rank_label(rank), legendgroup=rank_label(rank),
                showlegend=i == 1, nbinsx=100, opacity=0.75,
                hovertemplate="%{x} µs<br>%{y} launches<extra>" + rank_label(rank)
                              + "</extra>",
            ), row=i, col=1)
        fig.update_xaxes(title_text=axis, row=i, col=1)
        fig.update_yaxes(title_text="launches", row=i, col=1)
    fig.update_layout(barmode="overlay", height=900, title_text="Kernel launch statistics",
                      legend_title_text="rank")
    return fig


def launch_histogram_figure(hist: pd.DataFrame, runtime_cutoff: float,
                            launch_delay_cutoff: float) -> go.Figure:
    """The same three panels from per-rank bins
    (:func:`hta.analysis.launch.flagged_launch_histograms`): one step line per rank on a
    log axis, so a job of many ranks and millions of launches draws a few hundred points
    a rank."""
    titles = [t.format(runtime_cutoff=runtime_cutoff, launch_delay_cutoff=launch_delay_cutoff)
              for _, _, t, _ in PANELS]
    fig = make_subplots(rows=len(PANELS), cols=1, subplot_titles=titles,
                        vertical_spacing=0.12)
    for i, (flag, _, _, axis) in enumerate(PANELS, start=1):
        part = hist[hist["flag"] == flag]
        for rank, rows in part.groupby("rank", sort=True):
            x, y = _steps(rows)
            fig.add_trace(go.Scatter(
                x=x, y=y, mode="lines", line_shape="hv", name=rank_label(rank),
                legendgroup=rank_label(rank), showlegend=i == 1,
                hovertemplate="from %{x:.3g} µs: %{y} launches<extra>" + rank_label(rank)
                              + "</extra>",
            ), row=i, col=1)
        fig.update_xaxes(title_text=axis, type="log", row=i, col=1)
        fig.update_yaxes(title_text="launches per bin", row=i, col=1)
    fig.update_layout(height=900, title_text="Kernel launch statistics",
                      legend_title_text="rank")
    return fig


def _steps(rows: pd.DataFrame) -> tuple[list[float], list[int]]:
    """A rank's bins as the corners of a step line (zero between non-adjacent bins)."""
    x: list[float] = []
    y: list[int] = []
    last_hi = None
    for lo, hi, n in zip(rows["lo(us)"].tolist(), rows["hi(us)"].tolist(),
                         rows["launches"].tolist()):
        if last_hi is not None and lo > last_hi * (1 + 1e-9):
            x.append(last_hi)
            y.append(0)
        x.append(lo)
        y.append(int(n))
        last_hi = hi
    if last_hi is not None:
        x.append(last_hi)
        y.append(0)
    return x, y
