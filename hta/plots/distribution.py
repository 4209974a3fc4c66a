"""Figure of how per-rank values spread across a job's ranks: one box per metric, drawn
from precomputed statistics (:func:`hta.analysis.rank_distribution.rank_distribution`),
so it weighs the same at 8 ranks and at 8,000, with the ranks worth naming as points."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go


def rank_distribution_figure(stats: pd.DataFrame, marked: pd.DataFrame | None = None,
                             labels: Mapping[str, str] | None = None, title: str = "",
                             unit: str = "") -> go.Figure:
    """Boxes of ``stats`` (one row per metric): the quartiles, the median and the
    whiskers, with the number of ranks and the extreme ranks on hover; ``marked`` (columns
    ``rank``, ``metric``, ``value``, ``why``): ranks drawn as labelled points on their
    metric's box (the ranks that stand out, with their reason). ``labels`` names the
    metrics on the x axis (the column names otherwise); ``unit`` goes on the y axis."""
    names = [str((labels or {}).get(m, m)) for m in stats["metric"]]
    fig = go.Figure(go.Box(
        x=names, q1=stats["q1"], median=stats["median"], q3=stats["q3"],
        lowerfence=stats["lower"], upperfence=stats["upper"], name="across ranks",
        marker_color="#1f77b4", boxpoints=False,
        customdata=stats[["n", "min", "min_rank", "max", "max_rank", "outliers"]],
        hovertemplate="%{x}<br>%{customdata[0]} ranks, median %{median:,.2f}"
                      "<br>quartiles %{q1:,.2f} to %{q3:,.2f}"
                      "<br>min %{customdata[1]:,.2f} (rank %{customdata[2]}), "
                      "max %{customdata[3]:,.2f} (rank %{customdata[4]})"
                      "<br>%{customdata[5]} rank(s) beyond the whiskers<extra></extra>",
    ))
    if marked is not None and len(marked):
        where = dict(zip(stats["metric"], names, strict=True))
        fig.add_trace(go.Scatter(
            x=[where[m] for m in marked["metric"]], y=marked["value"], mode="markers+text",
            name="ranks that stand out", text=[rank_label(r) for r in marked["rank"]],
            # labels alternate sides, so two ranks at one value stay readable
            textposition=["middle right" if i % 2 == 0 else "middle left"
                          for i in range(len(marked))],
            marker={"color": "#d62728", "size": 7},
            customdata=marked[["why"]],
            hovertemplate="%{text}: %{y:,.2f}<br>%{customdata[0]}<extra></extra>"))
    fig.update_layout(title_text=title or "Distribution across ranks",
                      legend_title_text="")
    fig.update_yaxes(title_text=unit)
    fig.update_xaxes(type="category")
    return fig


__all__ = ["rank_distribution_figure"]
