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
        text, side = marked_labels(marked, stats)
        fig.add_trace(go.Scatter(
            x=[where[m] for m in marked["metric"]], y=marked["value"], mode="markers+text",
            name="ranks that stand out", text=text, textposition=side,
            marker={"color": "#d62728", "size": 7},
            customdata=marked[["why"]].assign(rank=[rank_label(r) for r in marked["rank"]]),
            hovertemplate="%{customdata[1]}: %{y:,.2f}<br>%{customdata[0]}<extra></extra>"))
    fig.update_layout(title_text=title or "Distribution across ranks",
                      legend_title_text="")
    fig.update_yaxes(title_text=unit)
    fig.update_xaxes(type="category")
    return fig


#: Marked points of one metric closer than this share of the figure's value range share
#: one label.
LABEL_GAP = 0.04


def marked_labels(marked: pd.DataFrame, stats: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The text and side of each marked point: on each metric, points closer than
    :data:`LABEL_GAP` of the figure's value range (from the lowest whisker or point to the
    highest) form a group labelled once, at its lowest point (``ranks 3, 7, 9``), the
    others left blank (their hover names them); groups alternate sides, so labels never
    print over one another, and those of the rightmost box start on its left."""
    values = pd.concat([stats["lower"], stats["upper"], marked["value"]]).dropna()
    span = float(values.max() - values.min()) if len(values) else 0.0
    gap = LABEL_GAP * span
    text = [""] * len(marked)
    side = ["middle right"] * len(marked)
    pos = {i: k for k, i in enumerate(marked.index)}
    rightmost = stats["metric"].iloc[-1] if len(stats) else None
    for metric, rows in marked.groupby("metric", sort=False):
        first = 1 if metric == rightmost else 0  # the last box's labels lean inwards
        ordered = rows.sort_values("value", kind="stable")
        groups: list[list[int]] = []
        last = None
        for i, value in zip(ordered.index, ordered["value"], strict=True):
            if last is None or float(value) - last > gap:
                groups.append([])
            groups[-1].append(i)
            last = float(value)
        for g, members in enumerate(groups, start=first):
            ranks = ", ".join(str(r) for r in sorted(int(marked.at[i, "rank"])
                                                      for i in members))
            text[pos[members[0]]] = f"rank{'s' if len(members) > 1 else ''} {ranks}"
            for i in members:
                side[pos[i]] = "middle right" if g % 2 == 0 else "middle left"
    return text, side


__all__ = ["marked_labels", "rank_distribution_figure"]
