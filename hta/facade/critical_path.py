"""Critical path analysis on ``TraceAnalysis``.

The methods call :mod:`hta.analysis.critical_path` (definitions in its docstrings and in
``docs/critical_path.md``), :mod:`hta.export.critical_path_overlay` and
:mod:`hta.plots.critical_path`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from hta.facade.display import show

if TYPE_CHECKING:
    from hta.analysis import critical_path as cp
    from hta.model.job import Job

Instance = int | tuple[int, int] | None


class CriticalPathTable(pd.DataFrame):
    """The critical path's edges (one row each), which also stands for HTA's success flag.

    HTA's ``critical_path_analysis`` returns ``(graph, success)``; here it returns
    ``(graph, path table)`` and failures raise. So that HTA's
    ``cp_graph, success = analyzer.critical_path_analysis(...)`` followed by
    ``if success:`` keeps working, the table is true in a boolean context (the analysis
    succeeded, or it would have raised) and has ``success`` (True). Everything else is a
    DataFrame's; tables derived from it (a filter, a sort) are plain DataFrames.
    """

    _metadata: list[str] = []

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    @property
    def success(self) -> bool:
        """True: a path table exists only when the analysis succeeded."""
        return True

    def __bool__(self) -> bool:
        return True


class CriticalPathMixin:
    """Methods added by the critical path analysis."""

    t: Job

    def critical_path_analysis(
        self, rank: int, annotation: str | None = "ProfilerStep", instance_id: Instance = None,
        data_load_events: Iterable[str] | None = None,
    ) -> tuple[cp.CriticalPathGraph, CriticalPathTable]:
        """Critical path of one rank's window: ``(graph, path table)``.

        ``annotation=""`` (or None) analyses the whole trace. HTA returns
        ``(graph, success)``; here failures raise, and the second value is the path's
        edges, one row each, a :class:`CriticalPathTable`: a DataFrame that is also true
        in a boolean context, so HTA's ``if success:`` runs unchanged. The graph is a
        :class:`hta.facade.cp_graph.CPGraph` (HTA's ``save``, ``critical_path()``). See
        :func:`hta.analysis.critical_path.critical_path_analysis`.
        The graph spans the whole rank, so on a distributed job that one rank is read into
        this process (``t.rank``).
        """
        from hta.analysis import critical_path as cp
        from hta.facade.cp_graph import CPGraph

        graph, path = cp.critical_path_analysis(self.t.rank(rank), annotation, instance_id,
                                                data_load_events)
        return CPGraph.of(graph), CriticalPathTable(path)

    def overlay_critical_path_analysis(
        self, rank: int, critical_path_graph: cp.CriticalPathGraph, output_dir: str | Path,
        only_show_critical_events: bool = True, show_all_edges: bool = False,
    ) -> str:
        """Write the rank's trace with the critical path marked; return the file's path.

        See :func:`hta.export.critical_path_overlay.write_critical_path_overlay`. Reads
        that one rank into this process (on a distributed job, explicitly).
        """
        from hta.export.critical_path_overlay import write_critical_path_overlay

        return write_critical_path_overlay(self.t.rank(rank), critical_path_graph, output_dir,
                                           only_show_critical_events, show_all_edges,
                                           getattr(self, "storage_options", None))

    def get_critical_path_summary(
        self, rank: int, annotation: str | None = "ProfilerStep", instance_id: Instance = None,
        data_load_events: Iterable[str] | None = None,
        critical_path_graph: cp.CriticalPathGraph | None = None, top_k: int = 15,
        visualize: bool = True,
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Time on the critical path per bound type and per event: ``(bounds, events)``.

        Reuses ``critical_path_graph`` when given, else runs the analysis. See
        :func:`hta.analysis.critical_path.attribution.bound_summary` and
        :func:`~hta.analysis.critical_path.attribution.event_summary`; the figure shows
        the ``top_k`` events.
        """
        from hta.analysis import critical_path as cp
        from hta.plots.critical_path import critical_path_figure

        if critical_path_graph is None:
            critical_path_graph, path = self.critical_path_analysis(
                rank, annotation, instance_id, data_load_events)
        else:
            path = cp.path_frame(critical_path_graph, data_load_events)
        bounds, events = cp.critical_path_summary(path)
        if visualize:
            g = critical_path_graph
            where = g.annotation or "whole trace"
            show(critical_path_figure(
                bounds, events, top_k,
                title=f"Critical path of rank {g.rank}, {where}: "
                      f"{g.path_length_ns / 1e3:,.3f} µs of a {g.span_ns / 1e3:,.3f} µs span"))
        return bounds, events
