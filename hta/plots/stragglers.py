"""Figure of the straggler analysis: the wait each rank caused, and lags over time."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go, make_subplots

#: Most points drawn per rank in the lag panel (the latest-arriving ones are kept).
MAX_POINTS_PER_RANK = 5_000


def straggler_figure(summary: pd.DataFrame, arrivals: pd.DataFrame) -> go.Figure:
    """Two panels: per rank, the wait it caused the others (bar, µs) with its late count
    and score on hover; below, each rank's arrival lag (µs) at every collective, in the
    order the collectives started, so a rank late at every collective draws a line above
    the others.

    ``summary`` is :func:`hta.analysis.stragglers.straggler_summary`'s table, ``arrivals``
    :func:`hta.analysis.stragglers.collective_arrivals`'s. A rank with more than
    :data:`MAX_POINTS_PER_RANK` collectives shows its largest lags only (said in the
    panel title).
    """
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.16, subplot_titles=(
        "Wait caused to the other ranks (µs)", _lag_title(arrivals)))
    s = summary.sort_values("rank") if len(summary) else summary
    x = [rank_label(r) for r in s["rank"]] if len(s) else []
    fig.add_trace(go.Bar(
        x=x, y=s["total_wait_caused(us)"] if len(s) else [], name="wait caused",
        marker_color="#d62728", showlegend=False,
        customdata=s[["late_count", "collectives", "score", "mean_lag(us)"]] if len(s) else None,
        hovertemplate="%{x}<br>caused %{y:,.3f} µs of wait<br>last at %{customdata[0]} of "
                      "%{customdata[1]} collectives<br>score %{customdata[2]:.3f}"
                      "<br>mean lag %{customdata[3]:,.3f} µs<extra></extra>",
    ), row=1, col=1)
    a = arrivals[arrivals["participants"] >= 2] if len(arrivals) else arrivals
    for rank in sorted(a["rank"].unique()) if len(a) else []:
        part = _thin(a[a["rank"] == rank])
        fig.add_trace(go.Scattergl(
            x=part["collective"], y=part["arrival_lag_ns"] / 1e3, mode="markers",
            name=rank_label(rank), marker={"size": 5},
            customdata=part[["name", "process_group", "iteration", "wait_caused_ns"]].assign(
                wait_caused_ns=part["wait_caused_ns"] / 1e3),
            hovertemplate=f"{rank_label(rank)}<br>collective %{{x}}: %{{customdata[0]}}"
                          "<br>group %{customdata[1]}, step %{customdata[2]}"
                          "<br>lag %{y:,.3f} µs<br>wait caused %{customdata[3]:,.3f} µs"
                          "<extra></extra>",
        ), row=2, col=1)
    if not len(a):
        fig.add_annotation(text="no collective seen on two or more ranks", showarrow=False,
                           xref="x2 domain", yref="y2 domain", x=0.5, y=0.5)
    fig.update_xaxes(title_text="rank", type="category", categoryorder="array",
                     categoryarray=x, row=1, col=1)
    fig.update_yaxes(title_text="wait caused (µs)", row=1, col=1)
    fig.update_xaxes(title_text="collective (in start order)", row=2, col=1)
    fig.update_yaxes(title_text="arrival lag (µs)", row=2, col=1)
    fig.update_layout(title_text="Stragglers: late arrivals at collectives", height=720,
                      legend_title_text="rank")
    return fig


def _thin(part: pd.DataFrame) -> pd.DataFrame:
    if len(part) <= MAX_POINTS_PER_RANK:
        return part
    return part.nlargest(MAX_POINTS_PER_RANK, "arrival_lag_ns").sort_values("collective")


def _lag_title(arrivals: pd.DataFrame) -> str:
    title = "Arrival lag behind the earliest rank, per collective (µs)"
    if len(arrivals) and arrivals.groupby("rank").size().max() > MAX_POINTS_PER_RANK:
        title += f" (the {MAX_POINTS_PER_RANK:,} largest lags per rank)"
    return title
