"""Figures of the memory timeline: allocated and reserved bytes over time, peak marked.

A timeline has one row per allocation or free, often millions: before drawing, each
(rank, device) series is thinned to a per-pixel envelope (:func:`envelope`): the time
axis is cut into :data:`ENVELOPE_BINS` equal bins and, in each, only the first, last,
lowest and highest rows are kept, so every peak and trough that a pixel column could
show is still drawn (the peak exactly); the figure says so when rows were dropped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.thinning import envelope_rows
from hta.plots._figure_parts import rank_label
from hta.plots._plotly import colors as plotly_colors
from hta.plots._plotly import go

#: Bins of the envelope: about one per horizontal pixel of a wide figure.
ENVELOPE_BINS = 2000


def envelope(ts: np.ndarray, values: list[np.ndarray], bins: int = ENVELOPE_BINS
             ) -> np.ndarray:
    """Rows to keep of a time-sorted series: first, last, min and max of each value
    column within each of ``bins`` equal time bins (all rows when there are few)."""
    if ts.shape[0] <= 4 * bins:
        return np.arange(ts.shape[0])
    return envelope_rows(ts, values, bins)


def memory_timeline_figure(timeline_df: pd.DataFrame,
                           summary_df: pd.DataFrame | None = None) -> go.Figure:
    """Allocated (solid) and reserved (dotted) bytes per (rank, device) of
    :func:`hta.analysis.memory.memory_timeline`, as step lines, with each series' peak
    marked (from ``summary_df`` of :func:`hta.analysis.memory.memory_summary` when given,
    else the largest ``total_allocated``). Series are thinned (:func:`envelope`)."""
    fig = go.Figure()
    colors = plotly_colors.qualitative.Plotly
    kept = total = 0
    peaks = _peaks(timeline_df, summary_df)
    # Only the highest peak is labelled (several equal peaks would print on top of each
    # other); the label leans away from the nearer edge so it is never cut off.
    top = max(peaks, key=lambda k: peaks[k][1]) if peaks else None
    middle = (int(timeline_df["ts"].min()) + int(timeline_df["ts"].max())) / 2 if len(
        timeline_df) else 0
    groups = timeline_df.groupby(["rank", "device"], sort=True) if len(timeline_df) else []
    for i, ((rank, device), rows) in enumerate(groups):
        ts = rows["ts"].to_numpy()
        alloc = rows["total_allocated"].to_numpy()
        reserved = rows["total_reserved"].to_numpy()
        idx = envelope(ts, [alloc, reserved])
        kept += idx.size
        total += ts.size
        color = colors[i % len(colors)]
        label = f"{rank_label(rank)}, {device}"
        x = pd.to_datetime(ts[idx], unit="ns")
        fig.add_trace(go.Scattergl(
            x=x, y=alloc[idx], name=f"{label} allocated", mode="lines", line_shape="hv",
            line={"color": color}, legendgroup=label,
            hovertemplate="%{x}<br>%{y:,} B allocated<extra>" + label + "</extra>"))
        if (reserved >= 0).any():
            fig.add_trace(go.Scattergl(
                x=x, y=reserved[idx], name=f"{label} reserved", mode="lines",
                line_shape="hv", line={"color": color, "dash": "dot"}, legendgroup=label,
                hovertemplate="%{x}<br>%{y:,} B reserved<extra>" + label + "</extra>"))
        peak = peaks.get((rank, device))
        if peak is not None:
            fig.add_trace(go.Scatter(
                x=pd.to_datetime([peak[0]], unit="ns"), y=[peak[1]],
                mode="markers+text" if (rank, device) == top else "markers",
                marker={"color": color, "size": 10, "symbol": "triangle-down"},
                text=[f"peak {peak[1]:,} B"],
                textposition="top right" if peak[0] < middle else "top left",
                name=f"{label} peak", legendgroup=label, showlegend=False,
                hovertemplate="%{x}<br>peak %{y:,} B<extra>" + label + "</extra>"))
    title = "Memory allocated and reserved per rank and device"
    if kept < total:
        title += (f"<br><sup>thinned for drawing: {kept:,} of {total:,} points kept (first, "
                  f"last, min and max of every 1/{ENVELOPE_BINS} of each series' time "
                  "range; peaks exact)</sup>")
    if not total:
        title += "<br><sup>no [memory] events: record with profile_memory=True</sup>"
    fig.update_layout(title_text=title, legend_title_text="rank, device")
    fig.update_xaxes(title_text="time")
    fig.update_yaxes(title_text="bytes", tickformat=".3s", ticksuffix="B",
                     rangemode="tozero")
    return fig


def _peaks(timeline_df: pd.DataFrame, summary_df: pd.DataFrame | None
           ) -> dict[tuple[object, object], tuple[int, int]]:
    if summary_df is not None and len(summary_df):
        return {(r, d): (int(t), int(p)) for r, d, t, p in zip(
            summary_df["rank"], summary_df["device"], summary_df["peak_ts"],
            summary_df["peak_allocated_bytes"])}
    if not len(timeline_df):
        return {}
    at = timeline_df.groupby(["rank", "device"], sort=True)["total_allocated"].idxmax()
    rows = timeline_df.loc[at.to_numpy()]
    return {(r, d): (int(t), int(p)) for r, d, t, p in zip(
        rows["rank"], rows["device"], rows["ts"], rows["total_allocated"])}


def raw_memory_timeline_figure(df: pd.DataFrame) -> go.Figure:
    """Stacked areas of memory in use per category of
    :func:`hta.analysis.memory.raw_memory_timeline` (thinned like the timeline)."""
    cats = [c for c in df.columns if c not in ("ts", "total")]
    ts = df["ts"].to_numpy()
    idx = envelope(ts, [df["total"].to_numpy()]) if len(df) else np.arange(0)
    fig = go.Figure()
    x = pd.to_datetime(ts[idx], unit="ns")
    for cat in cats:
        fig.add_trace(go.Scatter(x=x, y=df[cat].to_numpy()[idx], name=cat, mode="lines",
                                 line_shape="hv", stackgroup="memory"))
    title = "Memory in use per category"
    if idx.size < len(df):
        title += f"<br><sup>thinned for drawing: {idx.size:,} of {len(df):,} points kept</sup>"
    fig.update_layout(title_text=title, legend_title_text="category")
    fig.update_yaxes(title_text="bytes", tickformat=".3s", ticksuffix="B")
    fig.update_xaxes(title_text="time")
    return fig
