"""Small helpers shared by the figure builders: labels, pie grids, duration bars."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd

from hta.plots._plotly import go, make_subplots
from hta.plots.colors import OTHER

NAME_WIDTH = 70


def rank_label(rank: object) -> str:
    """``"rank 3"``: the x tick of a rank (a category, so ranks never interpolate)."""
    return f"rank {rank}"


def short(name: str, width: int = NAME_WIDTH) -> str:
    """A long kernel name cut to ``width`` characters with an ellipsis (hover has it all)."""
    text = str(name)
    return text if len(text) <= width else text[: width - 1] + "…"


def pie_grid(frames: Sequence[tuple[str, pd.DataFrame]], labels: str, values: str,
             title: str, hover_unit: str = "µs",
             color: Callable[[str], str | None] | None = None) -> go.Figure:
    """One pie per ``(subtitle, frame)``, two per row, slices ``labels`` sized by ``values``;
    ``color`` gives a slice's colour from its label (``None``: Plotly's, in slice order)."""
    cols = 2 if len(frames) > 1 else 1
    rows = max(1, math.ceil(len(frames) / cols))
    fig = make_subplots(rows=rows, cols=cols, specs=[[{"type": "domain"}] * cols] * rows,
                        subplot_titles=[t for t, _ in frames] or None)
    for i, (_, frame) in enumerate(frames):
        fig.add_trace(go.Pie(
            labels=[short(x) for x in frame[labels]], values=frame[values],
            customdata=frame[labels], sort=False, textinfo="percent",
            marker={"colors": [color(x) or OTHER for x in frame[labels]]} if color else None,
            hovertemplate=f"%{{customdata}}<br>%{{value:,.3f}} {hover_unit}"
                          "<br>%{percent}<extra></extra>",
        ), row=i // cols + 1, col=i % cols + 1)
    fig.update_layout(title_text=title, height=380 * rows + 120, legend_title_text="name")
    return fig


def duration_bars(df: pd.DataFrame, names: Sequence[str], title: str,
                  subtitle_prefix: str = "") -> go.Figure:
    """For each name, a bar per rank: mean duration with error bars down to min, up to max.

    ``df`` has columns ``name``, ``rank``, ``mean (us)``, ``min (us)``, ``max (us)`` and
    ``count``. Each name gets its own panel and y axis, so an outlier rank stands out.
    """
    n = max(1, len(names))
    spacing = min(0.08, 0.6 / n)
    fig = make_subplots(rows=n, cols=1, vertical_spacing=spacing,
                        subplot_titles=[subtitle_prefix + short(x, 100) for x in names] or None)
    for i, name in enumerate(names):
        part = df[df["name"] == name].sort_values("rank")
        mean = part["mean (us)"]
        fig.add_trace(go.Bar(
            x=[rank_label(r) for r in part["rank"]], y=mean, name=short(name, 40),
            showlegend=False, customdata=part[["min (us)", "max (us)", "count"]],
            error_y={"type": "data", "symmetric": False, "array": part["max (us)"] - mean,
                     "arrayminus": mean - part["min (us)"]},
            hovertemplate="%{x}<br>mean %{y:,.3f} µs<br>min %{customdata[0]:,.3f} µs"
                          "<br>max %{customdata[1]:,.3f} µs<br>count %{customdata[2]}"
                          "<extra></extra>",
        ), row=i + 1, col=1)
        fig.update_yaxes(title_text="mean duration (µs)", row=i + 1, col=1)
        fig.update_xaxes(title_text="rank", type="category", row=i + 1, col=1)
    fig.update_layout(title_text=title, height=max(400, 260 * n))
    return fig


_PSEUDO_HTML = str.maketrans({"<": "&lt;", ">": "&gt;"})
_TEXT_FIELDS = ("x", "y", "labels", "text", "hovertext", "customdata", "ids")


def plain_text_names(fig: go.Figure) -> go.Figure:
    """Make Plotly show ``<`` and ``>`` in names literally.

    Plotly renders a subset of HTML (``<b>``, ``<br>``, ``<a href>``) inside labels and
    hover text; kernel and operator names are untrusted and full of ``<...>`` templates.
    Every string in the traces' data and names is escaped in place; templates such as
    ``hovertemplate`` (our own markup) are left alone. Returns the figure.
    """
    for trace in fig.data:
        for field in _TEXT_FIELDS:
            value = getattr(trace, field, None)
            if value is not None:
                trace[field] = _escape(value)
        if isinstance(getattr(trace, "name", None), str):
            trace.name = trace.name.translate(_PSEUDO_HTML)
    return fig


def _escape(value: object) -> object:
    if isinstance(value, str):
        return value.translate(_PSEUDO_HTML)
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else list(value)
        if any(isinstance(v, (str, list, tuple)) for v in items):
            return [_escape(v) for v in items]
    return value
