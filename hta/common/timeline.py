"""HTA's ``Timeline`` of one events table, drawn by this package's GPU timeline.

``Timeline(df, symbol_table, filter_func=...).plot(title)`` applies the filter (see
:mod:`hta.common.trace_filter`) and shows the GPU work of what is left with
:func:`hta.analyzers.timeline.timeline_gpu_kernels_figure`. HTA draws CPU events too;
this timeline draws GPU work only (kernels, copies, memsets).
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any, NoReturn

import pandas as pd
import plotly.graph_objects as go

from hta.analyzers.timeline import timeline_gpu_kernels_figure
from hta.common.trace_filter import Filter
from hta.facade.display import show
from hta.model.trace import SymbolView

logger = logging.getLogger(__name__)

__all__ = ["PlotFormat", "Timeline", "align_module_with_kernels"]


class PlotFormat(Enum):
    """HTA's output choice; the figure is shown in the notebook (``File``: written as
    HTML to the path given to :meth:`Timeline.plot`)."""

    Show = 1
    File = 2
    Fig = 3


class Timeline:
    """A filtered events table and its figure."""

    def __init__(self, df: pd.DataFrame, symbol_table: SymbolView,
                 filter_func: Filter | None = None, **options: Any) -> None:
        self.symbol_table = symbol_table
        self.df = filter_func(df, symbol_table) if filter_func is not None else df
        if options:
            logger.info("ignored timeline options: %s", sorted(options))

    def figure(self, title: str = "") -> go.Figure:
        """The figure of this table's GPU work."""
        return timeline_gpu_kernels_figure(title, self.df, self.symbol_table)

    def plot(self, title: str = "", plot_format: PlotFormat = PlotFormat.Show,
             output_file: str | None = None) -> go.Figure | None:
        """Show the figure (``PlotFormat.Show``), write it as HTML to ``output_file``
        (``PlotFormat.File``) or return it (``PlotFormat.Fig``)."""
        fig = self.figure(title)
        if plot_format == PlotFormat.Fig:
            return fig
        if plot_format == PlotFormat.File:
            if not output_file:
                raise ValueError("PlotFormat.File needs output_file")
            fig.write_html(output_file)
            return None
        show(fig)
        return None


def align_module_with_kernels(df: pd.DataFrame, module_list: list[str],
                              sym_table: SymbolView, **kwargs: Any) -> NoReturn:
    """Not supported: use ``TraceAnalysis.get_gpu_kernels_with_user_annotations`` (the
    kernels under each user annotation) instead."""
    raise NotImplementedError(
        "align_module_with_kernels is not provided; the kernels run under each user "
        "annotation (## forward ## ...) come from "
        "TraceAnalysis.get_gpu_kernels_with_user_annotations(rank); see "
        "docs/coming_from_hta.md")
