"""Memory timeline and peak on ``TraceAnalysis`` (from ``[memory]`` instant events).

Each method runs one analysis declared in :mod:`hta.analysis.memory` (whose docstring
holds the definitions) through :func:`~hta.model.runner.run`, and with ``visualize`` shows
:func:`hta.plots.memory.memory_timeline_figure`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from hta.facade.display import show
from hta.facade.empty import NO_MEMORY_EVENTS, say_why_empty
from hta.facade.selecting import selected
from hta.model.selection import Ranks

if TYPE_CHECKING:
    from hta.model.job import Job


class MemoryMixin:
    """``get_memory_timeline``, ``get_memory_summary``, ``get_memory_peak_operators``."""

    t: Job

    def get_memory_timeline(self, ranks: Ranks = None, visualize: bool = False
                            ) -> pd.DataFrame:
        """Allocated and reserved bytes per rank and device after every allocation and
        free (columns ``rank, device, ts, total_allocated, total_reserved``). Needs a
        trace recorded with ``profile_memory=True``; empty otherwise.
        See :func:`hta.analysis.memory.memory_timeline`."""
        from hta.analysis.memory import MEMORY_SUMMARY, MEMORY_TIMELINE
        from hta.plots.memory import memory_timeline_figure

        selection = selected(self.t, ranks)
        df = MEMORY_TIMELINE.run(self.t, selection)
        if visualize:
            summary = MEMORY_SUMMARY.run(self.t, selection)
            show(memory_timeline_figure(df, summary))
        return df

    def get_memory_summary(self, ranks: Ranks = None, visualize: bool = False
                           ) -> pd.DataFrame:
        """Per rank and device: peak allocated bytes, when (ns and step), reserved bytes,
        and the operators holding the most memory at the peak.
        See :func:`hta.analysis.memory.memory_summary`."""
        from hta.analysis.memory import MEMORY_SUMMARY, MEMORY_TIMELINE
        from hta.plots.memory import memory_timeline_figure

        selection = selected(self.t, ranks)
        df = MEMORY_SUMMARY.run(self.t, selection)
        if not len(df):
            say_why_empty(self, "memory", NO_MEMORY_EVENTS)
        if visualize:
            timeline = MEMORY_TIMELINE.run(self.t, selection)
            show(memory_timeline_figure(timeline, df))
        return df

    def get_memory_peak_operators(self, ranks: Ranks = None) -> pd.DataFrame:
        """Per rank, device and operator: bytes allocated by it and still live at the
        device's peak. See :func:`hta.analysis.memory.memory_peak_operators`."""
        from hta.analysis.memory import MEMORY_PEAK_OPERATORS

        return MEMORY_PEAK_OPERATORS.run(self.t, selected(self.t, ranks))

    @staticmethod
    def plot_memory_timeline_raw(path: str | Path, visualize: bool = True) -> pd.DataFrame:
        """Memory in use per category from PyTorch's ``export_memory_timeline_raw`` file
        (what HTA's ``MemoryAnalysis(path).plot_memory_timeline()`` draws).
        See :func:`hta.analysis.memory.raw_memory_timeline`."""
        from hta.analysis import memory
        from hta.plots.memory import raw_memory_timeline_figure

        df = memory.raw_memory_timeline(path)
        if visualize:
            show(raw_memory_timeline_figure(df))
        return df

