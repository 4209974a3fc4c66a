"""Figures of the GPU kernel breakdown: kernel-type pie, kernel pies per rank, and the
kernel duration distribution across ranks."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import duration_bars, pie_grid, rank_label
from hta.plots._plotly import go
from hta.plots.colors import kind_color


def kernel_type_figure(kernel_type_df: pd.DataFrame) -> go.Figure:
    """Pie of GPU busy time by kernel type and overlap class (one pie per rank when the
    table has a ``rank`` column), from :func:`hta.analysis.kernels.kernel_type_breakdown`."""
    if "rank" in kernel_type_df:
        frames = [(rank_label(r), part) for r, part in kernel_type_df.groupby("rank")]
        title = "GPU busy time by kernel type, per rank"
    else:
        frames = [("all selected ranks", kernel_type_df)]
        title = "GPU busy time by kernel type (all selected ranks)"
    return pie_grid(frames, "kernel_type", "sum", title, color=kind_color)


def kernel_pies_figure(kernel_df: pd.DataFrame, kernel_type: str) -> go.Figure:
    """Pies of the time of the top kernels of one type (rest as ``others``), one per rank,
    from :func:`hta.analysis.kernels.kernel_breakdown`."""
    part = kernel_df[kernel_df["kernel_type"] == kernel_type]
    frames = [(rank_label(r), p) for r, p in part.groupby("rank")]
    return pie_grid(frames, "name", "sum (us)",
                    f"{kernel_type} kernels: share of kernel time, per rank")


def kernel_duration_figure(kernel_df: pd.DataFrame, kernel_type: str | None = None
                           ) -> go.Figure:
    """The kernel duration distribution: for each top kernel (``others`` excluded), a bar
    per rank of its mean duration with error bars from min to max.

    One panel per kernel (each with its own y axis), so a rank whose kernel runs longer
    stands out. ``kernel_type`` limits it to one type.
    """
    part = kernel_df[kernel_df["name"] != "others"]
    if kernel_type is not None:
        part = part[part["kernel_type"] == kernel_type]
    order = part.groupby("name")["sum (us)"].sum().sort_values(ascending=False).index
    title = "Kernel duration per rank: mean, with min-max error bars"
    if kernel_type is not None:
        title = f"{kernel_type} k" + title[1:]
    return duration_bars(part, list(order), title)
