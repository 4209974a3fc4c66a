"""Figures of the user annotation breakdown: pies per rank and durations across ranks."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import duration_bars, pie_grid, rank_label
from hta.plots._plotly import go


def user_annotation_figure(df: pd.DataFrame) -> go.Figure:
    """One pie per rank of the time of each annotation (µs), from
    :func:`hta.analysis.annotations.user_annotation_breakdown`."""
    frames = [(rank_label(r), part) for r, part in df.groupby("rank")]
    return pie_grid(frames, "name", "sum (us)", "Time per user annotation, per rank")


def user_annotation_duration_figure(df: pd.DataFrame) -> go.Figure:
    """For each annotation (``others`` excluded), a bar per rank of its mean duration with
    min-max error bars."""
    part = df[df["name"] != "others"]
    order = part.groupby("name")["sum (us)"].sum().sort_values(ascending=False).index
    return duration_bars(part, list(order),
                         "User annotation duration per rank: mean, with min-max error bars")
