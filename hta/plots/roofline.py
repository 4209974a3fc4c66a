"""Roofline figure: one point per operator-and-shape group, sized by its GPU time, on the
device's roofs (log-log). Takes the frames of :mod:`hta.analysis.perf`; computes
nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.model.categories import CATEGORIES
from hta.plots._plotly import go

_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2",
            "#ff9da6", "#9d755d", "#bab0ac", "#79706e")


def roofline_figure(groups: pd.DataFrame, roofs: pd.DataFrame, device: str = ""
                    ) -> go.Figure:
    """``groups``: rows of ``op_performance_summary`` (``flops_per_byte``,
    ``tflops_per_s``, ``kernel_time(us)``, ``op``, ``input_dims``, ``category``,
    ``pct_of_peak``); rows without a model are skipped. ``roofs``: ``roof_curves``."""
    fig = go.Figure()
    for name, line in roofs.groupby("roof", sort=True):
        fig.add_trace(go.Scatter(x=line["flops_per_byte"], y=line["tflops_per_s"],
                                 mode="lines", name=f"roof {name}",
                                 line={"dash": "dash", "width": 1.5}))
    shown = groups[(groups["flops_per_byte"] > 0) & (groups["tflops_per_s"] > 0)]
    if len(shown):
        biggest = float(shown["kernel_time(us)"].max())
        for i, cat in enumerate(CATEGORIES):
            part = shown[shown["category"] == cat]
            if not len(part):
                continue
            size = 6 + 30 * np.sqrt(part["kernel_time(us)"].to_numpy() / biggest)
            text = [f"{op}<br>{dims}<br>{t:,.0f} us, {p:.0f}% of roof"
                    for op, dims, t, p in zip(part["op"], part["input_dims"],
                                              part["kernel_time(us)"], part["pct_of_peak"])]
            fig.add_trace(go.Scatter(
                x=part["flops_per_byte"], y=part["tflops_per_s"], mode="markers", name=cat,
                marker={"size": size, "color": _PALETTE[i % len(_PALETTE)], "opacity": 0.7},
                text=text, hovertemplate="%{text}<extra></extra>"))
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title="achieved TFLOP/s")
    fig.update_layout(title=f"Roofline{' — ' + device if device else ''}",
                      template="plotly_white", legend={"title": "category / roof"})
    return fig


def category_time_figure(df: pd.DataFrame) -> go.Figure:
    """GPU time per rank and category (``category_time``), one stacked bar per rank."""
    fig = go.Figure()
    for i, cat in enumerate(CATEGORIES):
        part = df[df["category"] == cat]
        if len(part):
            fig.add_trace(go.Bar(x=part["rank"].astype(str), y=part["kernel_time(us)"] / 1e3,
                                 name=cat, marker_color=_PALETTE[i % len(_PALETTE)],
                                 customdata=part["share(%)"],
                                 hovertemplate="%{y:,.3f} ms (%{customdata:.1f}%)"))
    fig.update_layout(barmode="stack", title="GPU time by category", template="plotly_white",
                      xaxis_title="rank", yaxis_title="GPU time (ms)")
    return fig
