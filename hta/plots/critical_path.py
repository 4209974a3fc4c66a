"""Figure of the critical path summary: time per bound type and the top events on the path."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.plots._figure_parts import BOTTOM_PX, PANEL_GAP_PX, TOP_PX, display_short
from hta.plots._plotly import go, make_subplots
from hta.plots.colors import COMMUNICATION, COMPUTATION, OTHER

COLORS = {
    "cpu_bound": "#1f77b4",
    "gpu_compute_bound": COMPUTATION,
    "gpu_communication_bound": COMMUNICATION,
    "launch_overhead": "#9467bd",
    "kernel_kernel_overhead": "#8c564b",
}


def critical_path_figure(bounds: pd.DataFrame, events: pd.DataFrame, top_k: int = 15,
                         title: str = "Critical path") -> go.Figure:
    """Two panels: the path's time per bound type, and its ``top_k`` longest events.

    Takes the tables of :func:`hta.analysis.critical_path.attribution.bound_summary`
    (``bound_by``, ``duration(us)``, ``duration_pctg``) and
    :func:`~hta.analysis.critical_path.attribution.event_summary` (``bound_by``,
    ``name``, ``kind``, ``count``, ``duration(us)``, ``duration_pctg``); bars are coloured
    by bound type.
    """
    top = events.head(top_k).iloc[::-1]
    # panel heights and the gap between them in pixels, so that the lower panel's title
    # never meets the upper panel's tick labels and axis title, however few the events
    upper, lower = 130, max(130, 28 * len(top))
    plot_px = upper + PANEL_GAP_PX + lower
    fig = make_subplots(
        rows=2, cols=1, vertical_spacing=PANEL_GAP_PX / plot_px,
        row_heights=[upper / (upper + lower), lower / (upper + lower)],
        subplot_titles=["time on the critical path per bound type",
                        f"top {min(top_k, len(events))} events on the critical path"],
    )
    order = bounds.iloc[::-1]
    fig.add_trace(go.Bar(
        y=order["bound_by"], x=order["duration(us)"], orientation="h", showlegend=False,
        marker_color=[COLORS.get(b, OTHER) for b in order["bound_by"]],
        customdata=order[["duration_pctg"]],
        hovertemplate="%{y}<br>%{x:,.3f} µs (%{customdata[0]:.2f}% of the path)<extra></extra>",
    ), row=1, col=1)
    labels = _event_labels(top)
    for bound in dict.fromkeys(top["bound_by"]):
        part = top[top["bound_by"] == bound]
        fig.add_trace(go.Bar(
            y=labels[(top["bound_by"] == bound).to_numpy()],
            x=part["duration(us)"], orientation="h", name=bound,
            marker_color=COLORS.get(bound, OTHER),
            customdata=part[["name", "kind", "count", "duration_pctg"]],
            hovertemplate="%{customdata[0]}<br>kind %{customdata[1]}, %{customdata[2]} edge(s)"
                          "<br>%{x:,.3f} µs (%{customdata[3]:.2f}% of the path)<extra></extra>",
        ), row=2, col=1)
    fig.update_yaxes(type="category", row=2, col=1,
                     categoryorder="array", categoryarray=list(labels))
    fig.update_xaxes(title_text="time on the critical path (µs)", row=1, col=1)
    fig.update_xaxes(title_text="time on the critical path (µs)", row=2, col=1)
    fig.update_layout(title_text=title, height=plot_px + TOP_PX + BOTTOM_PX,
                      margin={"t": TOP_PX, "b": BOTTOM_PX},
                      legend_title_text="bound type", barmode="overlay")
    return fig


def _event_labels(top: pd.DataFrame) -> np.ndarray:
    """``N. name`` per row of the top events (N its rank in the table; kernels by their
    display name, function and key template parameters, so that two kernels whose names
    start alike stay apart); a name that comes back under another bound type says which
    (``[gpu_compute_bound]``), so two rows of one kernel do not read as one row twice."""
    names = [display_short(n, 60) for n in top["name"]]
    again = pd.Series(names).duplicated(keep=False).to_numpy()
    return np.asarray([f"{i}. {n}" + (f" [{b}]" if twice else "") for i, n, b, twice in
                       zip(range(len(top), 0, -1), names, top["bound_by"], again)],
                      dtype=object)
