"""Small helpers shared by the figure builders: labels, pie grids, duration bars."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

from hta.analysis.display_names import display_name
from hta.model.demangle import demangle
from hta.plots._plotly import go, make_subplots
from hta.plots.colors import OTHER

NAME_WIDTH = 70


def rank_label(rank: object) -> str:
    """``"rank 3"``: the x tick of a rank (a category, so ranks never interpolate)."""
    return f"rank {rank}"


def short(name: str, width: int = NAME_WIDTH) -> str:
    """A long kernel name cut to ``width`` characters with an ellipsis (hover has it all);
    a mangled C++ name is demangled first."""
    text = demangle(str(name))
    return text if len(text) <= width else text[: width - 1] + "…"


def display_short(name: str, width: int = NAME_WIDTH) -> str:
    """A kernel or operator name as figures and tables show it: demangled, whole up to
    ``width`` characters; longer, a C++ signature by its function and key template
    parameters (:func:`hta.analysis.display_names.display_name`), and anything still too
    long cut to ``width`` (:func:`short`). Hovers, ``--json`` and the tables returned in
    Python keep the whole name."""
    text = demangle(str(name))
    return text if len(text) <= width else short(display_name(text, width), width)


def distinct_short(names: Iterable[object], width: int = NAME_WIDTH,
                   shorten: Callable[[str], str] | None = None) -> list[str]:
    """Each name shortened for display (``shorten``, by default :func:`short` at ``width``)
    such that different names never read the same. Names whose short forms clash are cut
    from the end instead (:func:`short`); those still clashing show their start, an
    ellipsis, then the text from where the clashing names first differ (C++ template names
    often differ only in their last arguments); forms still equal get `` [1]``,
    `` [2]``... in name order. Equal names stay equal."""
    texts = [str(n) for n in names]
    first = shorten or (lambda t: short(t, width))
    shown = {t: first(t) for t in dict.fromkeys(texts)}
    for t in _clashing(shown):
        shown[t] = short(t, width)
    for group in _clashing_groups(shown):
        differ = len(os.path.commonprefix(group))
        for t in group:
            shown[t] = _from(t, differ, width)
    for group in _clashing_groups(shown):
        for i, t in enumerate(sorted(group), 1):
            shown[t] = f"{shown[t]} [{i}]"
    return [shown[t] for t in texts]


def _from(text: str, at: int, width: int) -> str:
    """``text`` in about ``width`` characters around where it differs (from ``at``) from
    names that start like it: a C++ name keeps its function name (up to its first ``<``,
    else its first ``(``; the end of it when long) and shows its arguments from a few
    characters before ``at``."""
    cut = next((i for i in (text.find("<"), text.find("(")) if i > 0), len(text))
    if at <= cut:  # they differ in the name itself
        start = max(0, at - width // 2)
        return short(("…" if start else "") + text[start:], width)
    name, rest = text[:cut], text[cut:]
    if len(name) > width // 2:
        name = "…" + name[-(width // 2 - 1):]
    if at - cut > 8:
        rest = rest[0] + "…" + rest[at - cut - 6:]
    return short(name + rest, width)


def _clashing(shown: dict[str, str]) -> list[str]:
    """The names whose shown form is also another name's."""
    return [t for group in _clashing_groups(shown) for t in group]


def _clashing_groups(shown: dict[str, str]) -> list[list[str]]:
    """The groups of names that share a shown form."""
    groups: dict[str, list[str]] = defaultdict(list)
    for t, form in shown.items():
        groups[form].append(t)
    return [g for g in groups.values() if len(g) > 1]


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
        fig.add_trace(go.Pie(  # equal labels would be one slice: keep different names apart
            labels=distinct_short(frame[labels], shorten=display_short), values=frame[values],
            customdata=frame[labels], sort=False, textinfo="percent",
            # inside: a label outside a small slice runs into the subplot title above
            textposition="inside", insidetextorientation="horizontal",
            marker={"colors": [color(x) or OTHER for x in frame[labels]]} if color else None,
            hovertemplate=f"%{{customdata}}<br>%{{value:,.3f}} {hover_unit}"
                          "<br>%{percent}<extra></extra>",
        ), row=i // cols + 1, col=i % cols + 1)
    fig.update_layout(title_text=title, height=380 * rows + 120, legend_title_text="name",
                      uniformtext_minsize=10, uniformtext_mode="hide")
    return fig


#: Height of one panel of :func:`duration_bars`, and the gap between two panels: room for
#: the upper panel's tick labels and axis title and the lower panel's title (pixels).
PANEL_PX, PANEL_GAP_PX = 220, 110
#: Top and bottom margins of :func:`duration_bars` (pixels): the figure's title, the last
#: panel's tick labels and axis title.
TOP_PX, BOTTOM_PX = 110, 70


def duration_bars(df: pd.DataFrame, names: Sequence[str], title: str,
                  subtitle_prefix: str = "") -> go.Figure:
    """For each name, a bar per rank: mean duration with error bars down to min, up to max.

    ``df`` has columns ``name``, ``rank``, ``mean (us)``, ``min (us)``, ``max (us)`` and
    ``count``. Each name gets its own panel and y axis, so an outlier rank stands out.
    Panels are :data:`PANEL_PX` high and :data:`PANEL_GAP_PX` apart whatever their number,
    so a panel's title never runs into the axis above it; the panel titles are the names,
    shortened so that different names stay different (:func:`distinct_short`).
    """
    n = max(1, len(names))
    plot_px = n * PANEL_PX + (n - 1) * PANEL_GAP_PX
    shown = distinct_short(names, 100, shorten=lambda t: display_short(t, 100))
    # titles are Plotly pseudo-HTML: escape a template's <...>, which would vanish as a tag
    titles = [(subtitle_prefix + t).translate(_PSEUDO_HTML) for t in shown]
    fig = make_subplots(rows=n, cols=1, vertical_spacing=PANEL_GAP_PX / plot_px if n > 1 else 0,
                        subplot_titles=titles or None)
    for note, name, text in zip(fig.layout.annotations, names, shown):
        if text != str(name):  # shortened: the full name on hover
            note.hovertext = str(name).translate(_PSEUDO_HTML)
    legend_names = distinct_short(names, 40)
    for i, name in enumerate(names):
        part = df[df["name"] == name].sort_values("rank")
        mean = part["mean (us)"]
        fig.add_trace(go.Bar(
            x=[rank_label(r) for r in part["rank"]], y=mean, name=legend_names[i],
            showlegend=False, customdata=part[["min (us)", "max (us)", "count"]],
            error_y={"type": "data", "symmetric": False, "array": part["max (us)"] - mean,
                     "arrayminus": mean - part["min (us)"]},
            hovertemplate="%{x}<br>mean %{y:,.3f} µs<br>min %{customdata[0]:,.3f} µs"
                          "<br>max %{customdata[1]:,.3f} µs<br>count %{customdata[2]}"
                          "<extra></extra>",
        ), row=i + 1, col=1)
        fig.update_yaxes(title_text="mean duration (µs)", row=i + 1, col=1)
        fig.update_xaxes(title_text="rank", type="category", row=i + 1, col=1)
    fig.update_layout(title_text=title, height=plot_px + TOP_PX + BOTTOM_PX,
                      margin={"t": TOP_PX, "b": BOTTOM_PX})
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
    if hasattr(value, "tolist"):
        items = value.tolist()
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        return value
    if any(isinstance(v, (str, list, tuple)) for v in items):
        return [_escape(v) for v in items]
    return value
