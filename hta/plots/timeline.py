"""Figure of the GPU timeline: one row per (rank, stream), bars coloured by kind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from hta.plots._common import plain_text_names, short

#: Colour of each GPU work kind (copies in greens, memsets in purple).
KIND_COLORS = {
    "computation": "#1f77b4",
    "communication": "#ff7f0e",
    "memcpy_htod": "#2ca02c",
    "memcpy_dtoh": "#98df8a",
    "memcpy_dtod": "#17becf",
    "memcpy_ptop": "#bcbd22",
    "memcpy_other": "#7f7f7f",
    "memset": "#9467bd",
}
#: Segments narrower than this fraction of the drawn span are widened to it (~1 pixel).
MIN_WIDTH_FRACTION = 1 / 2_000
HOVER_NAME_WIDTH = 100
ROW_HEIGHT_PX = 26


def row_label(rank: object, stream: object) -> str:
    """``"rank 0 · stream 7"``: the y category of a (rank, stream) row."""
    return f"rank {rank} · stream {stream}"


def timeline_figure(segments_df: pd.DataFrame, title: str = "GPU timeline") -> go.Figure:
    """Horizontal bars of :func:`hta.analysis.timeline.timeline_segments`'s table.

    One row per (rank, stream), in rank then stream order; one bar trace per kind, so the
    legend toggles kinds and the browser draws a few traces of many bars. The x axis is
    milliseconds since the earliest drawn start. Bars narrower than
    :data:`MIN_WIDTH_FRACTION` of the span are drawn that wide so they stay visible; the
    hover gives the real start, duration, busy time, event count and kinds. When events
    were merged (``resolution_ns > 0``), a note under the title says how many events the
    bars stand for and the merge threshold. Names are escaped (``plain_text_names``).
    """
    fig = go.Figure()
    df = segments_df
    if not len(df):
        fig.add_annotation(text="no GPU work in the selection", showarrow=False,
                           x=0.5, y=0.5, xref="paper", yref="paper")
        fig.update_layout(title_text=title, height=300)
        return fig
    t0 = int(df["start_ns"].min())
    span_ms = max(int(df["end_ns"].max()) - t0, 1) / 1e6
    rows = df[["rank", "stream"]].drop_duplicates().sort_values(["rank", "stream"])
    categories = [row_label(r, s) for r, s in zip(rows["rank"], rows["stream"])]
    for kind in _kinds_in_order(df["kind"]):
        part = df[df["kind"] == kind]
        start_ms = (part["start_ns"].to_numpy() - t0) / 1e6
        dur_ms = (part["end_ns"].to_numpy() - part["start_ns"].to_numpy()) / 1e6
        custom = np.empty((len(part), 7), dtype=object)
        custom[:, 0] = [short(n, HOVER_NAME_WIDTH) for n in part["name"]]
        custom[:, 1] = np.round(dur_ms * 1e3, 3)
        custom[:, 2] = np.round(part["busy_ns"].to_numpy() / 1e3, 3)
        custom[:, 3] = part["count"].to_numpy()
        custom[:, 4] = [f"({k})" if k else "" for k in part["kinds"]]
        custom[:, 5] = part["iteration"].to_numpy()
        custom[:, 6] = np.round(start_ms, 6)
        fig.add_trace(go.Bar(
            orientation="h", name=kind, base=np.round(start_ms, 6),
            x=np.round(np.maximum(dur_ms, span_ms * MIN_WIDTH_FRACTION), 6),
            y=[row_label(r, s) for r, s in zip(part["rank"], part["stream"])],
            marker={"color": KIND_COLORS.get(kind, "#7f7f7f"), "line": {"width": 0}},
            customdata=custom,
            hovertemplate="%{y}<br><b>%{customdata[0]}</b><br>" + kind
                          + "<br>start %{customdata[6]:,.3f} ms<br>duration "
                          "%{customdata[1]:,.3f} µs<br>busy %{customdata[2]:,.3f} µs"
                          "<br>events %{customdata[3]} %{customdata[4]}"
                          "<br>iteration %{customdata[5]}<extra></extra>",
        ))
    fig.update_layout(
        title_text=title, barmode="overlay", bargap=0.25, hovermode="closest",
        height=160 + ROW_HEIGHT_PX * len(categories), legend_title_text="kind",
        margin={"t": 110},
    )
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=categories[::-1],
                     title_text=None)
    fig.update_xaxes(title_text="time since the first drawn GPU event (ms)",
                     range=[0, span_ms * 1.01])
    note = aggregation_note(df)
    if note:
        fig.add_annotation(text=note, showarrow=False, xref="paper", yref="paper", x=0,
                           y=1.0, yanchor="bottom", xanchor="left", align="left",
                           font={"color": "#7f7f7f", "size": 12})
    return plain_text_names(fig)


def aggregation_note(df: pd.DataFrame) -> str:
    """What the bars stand for, when some rank's events were merged; else ``""``."""
    merged = df[df["resolution_ns"] > 0]
    if not len(merged):
        return ""
    res = merged.groupby("rank")["resolution_ns"].first()
    lo, hi = int(res.min()), int(res.max())
    threshold = _duration(lo) if lo == hi else f"{_duration(lo)} to {_duration(hi)}"
    return (f"{int(df['count'].sum()):,} GPU events drawn as {len(df):,} bars: on "
            f"{len(res)} rank(s), events on a stream less than {threshold} apart are "
            "merged (hover for counts; select fewer iterations or streams for detail)")


def _duration(ns: int) -> str:
    if ns >= 1_000_000:
        return f"{ns / 1e6:,.3g} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:,.3g} µs"
    return f"{ns} ns"


def _kinds_in_order(kinds: pd.Series) -> list[str]:
    present = set(kinds.unique())
    return [k for k in KIND_COLORS if k in present] + sorted(present - set(KIND_COLORS))
