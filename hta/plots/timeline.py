"""Figure of the GPU timeline: one row per (rank, stream), bars coloured by kind."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.plots._figure_parts import plain_text_names, short
from hta.plots._plotly import go
from hta.plots.colors import KIND_COLORS, OTHER

#: Segments narrower than this fraction of the drawn span are widened to it (~1 pixel).
MIN_WIDTH_FRACTION = 1 / 2_000
HOVER_NAME_WIDTH = 100
ROW_HEIGHT_PX = 26
MIN_HEIGHT_PX = 380
MARGIN_T, MARGIN_B = 110, 70
HOVER_DISTANCE_PX = 30


def row_label(rank: object, stream: object) -> str:
    """``"rank 0 · stream 7"``: the y category of a (rank, stream) row."""
    return f"rank {rank} · stream {stream}"


def timeline_figure(segments_df: pd.DataFrame, title: str = "GPU timeline") -> go.Figure:
    """Horizontal bars of :func:`hta.analysis.timeline.timeline_segments`'s table.

    One row per (rank, stream), rank 0's first stream at the top; bars coloured by kind
    (the legend toggles kinds). The x axis is milliseconds since the earliest drawn start.
    Bars are WebGL line pieces (one ``Scattergl`` trace per kind, pieces separated by
    gaps), which stays smooth with tens of thousands of bars where SVG bars do not (see
    ``docs/analyses/timeline.md``). Hovering the middle of a bar gives its name, real
    start, duration, busy time, event count and kinds. Bars narrower than
    :data:`MIN_WIDTH_FRACTION` of the span are drawn that wide so they stay visible. When
    events were merged (``resolution_ns > 0``), a note under the title says how many
    events the bars stand for and the merge threshold. Names are escaped
    (``plain_text_names``).
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
    n_rows = len(rows)
    # row i of the sorted (rank, stream) pairs is drawn at y = n_rows - 1 - i (top down)
    row_y = pd.Series(np.arange(n_rows - 1, -1, -1),
                      index=pd.MultiIndex.from_frame(rows.reset_index(drop=True)))
    height = max(MIN_HEIGHT_PX, MARGIN_T + MARGIN_B + ROW_HEIGHT_PX * n_rows)
    line_px = max(1.0, 0.7 * (height - MARGIN_T - MARGIN_B) / n_rows)
    for kind in _kinds_in_order(df["kind"]):
        part = df[df["kind"] == kind]
        y = row_y.reindex(pd.MultiIndex.from_frame(part[["rank", "stream"]])).to_numpy()
        start_ms = (part["start_ns"].to_numpy() - t0) / 1e6
        dur_ms = (part["end_ns"].to_numpy() - part["start_ns"].to_numpy()) / 1e6
        drawn_end = start_ms + np.maximum(dur_ms, span_ms * MIN_WIDTH_FRACTION)
        color = KIND_COLORS.get(kind, OTHER)
        fig.add_trace(go.Scattergl(
            x=_pieces(start_ms, drawn_end), y=_pieces(y, y), mode="lines", name=kind,
            legendgroup=kind, line={"color": color, "width": line_px}, hoverinfo="skip",
            connectgaps=False,
        ))
        custom = np.empty((len(part), 7), dtype=object)
        custom[:, 0] = [short(n, HOVER_NAME_WIDTH) for n in part["name"]]
        custom[:, 1] = np.round(dur_ms * 1e3, 3)
        custom[:, 2] = np.round(part["busy_ns"].to_numpy() / 1e3, 3)
        custom[:, 3] = part["count"].to_numpy()
        custom[:, 4] = [f"({k})" if k else "" for k in part["kinds"]]
        custom[:, 5] = part["iteration"].to_numpy()
        custom[:, 6] = [row_label(r, s) for r, s in zip(part["rank"], part["stream"])]
        fig.add_trace(go.Scattergl(
            x=np.round((start_ms + drawn_end) / 2, 6), y=y, mode="markers", name=kind,
            legendgroup=kind, showlegend=False,
            marker={"color": color, "size": line_px, "opacity": 0},
            customdata=custom,
            hovertemplate="%{customdata[6]}<br><b>%{customdata[0]}</b><br>" + kind
                          + "<br>duration %{customdata[1]:,.3f} µs"
                          "<br>busy %{customdata[2]:,.3f} µs"
                          "<br>events %{customdata[3]} %{customdata[4]}"
                          "<br>iteration %{customdata[5]}<extra></extra>",
        ))
    fig.update_layout(
        title_text=title, hovermode="closest", height=height, legend_title_text="kind",
        margin={"t": MARGIN_T, "b": MARGIN_B}, hoverdistance=HOVER_DISTANCE_PX,
    )
    labels = [row_label(r, s) for r, s in zip(rows["rank"], rows["stream"])]
    fig.update_yaxes(tickmode="array", tickvals=list(range(n_rows - 1, -1, -1)), ticksuffix=" ",
                     ticktext=labels, range=[-0.5, n_rows - 0.5], showgrid=False,
                     zeroline=False, title_text=None)
    fig.update_xaxes(title_text="time since the first drawn GPU event (ms)",
                     range=[0, span_ms * 1.01], zeroline=False)
    note = aggregation_note(df)
    if note:
        fig.add_annotation(text=note, showarrow=False, xref="paper", yref="paper", x=0,
                           y=1.0, yanchor="bottom", xanchor="left", align="left",
                           font={"color": OTHER, "size": 12})
    return plain_text_names(fig)


def _pieces(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[a0, b0, None, a1, b1, None, ...]``: separate line pieces in one trace."""
    out = np.empty(3 * len(a), dtype=object)
    out[0::3] = np.round(a, 6) if a.dtype.kind == "f" else a
    out[1::3] = np.round(b, 6) if b.dtype.kind == "f" else b
    out[2::3] = None
    return out


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
