"""Critical path analysis of one rank: which work, made faster, would make the step faster.

* :mod:`.graph` builds the DAG (start/end nodes of CPU events and GPU work; operator
  nesting and order on a thread, kernel launch, stream order and synchronization edges);
* :mod:`.longest` finds its longest path in linear time over the topological numbering;
* :mod:`.attribution` attributes each path edge to an event and a bound type.

Entry point: :func:`critical_path_analysis`. See ``docs/critical_path.md`` for the
definitions and the differences from HTA.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from hta.analysis.critical_path.attribution import (
    BOUND_TYPES,
    bound_summary,
    event_summary,
    path_frame,
)
from hta.analysis.critical_path.graph import EDGE_TYPES, CriticalPathGraph, build_graph
from hta.analysis.critical_path.longest import longest_path
from hta.model.trace import RankTrace

__all__ = [
    "BOUND_TYPES",
    "EDGE_TYPES",
    "CriticalPathGraph",
    "build_graph",
    "critical_path_analysis",
    "critical_path_summary",
    "longest_path",
    "path_frame",
]


def critical_path_analysis(
    rt: RankTrace,
    annotation: str | None = "ProfilerStep",
    instance_id: int | tuple[int, int] | None = None,
    data_load_events: Iterable[str] | None = None,
) -> tuple[CriticalPathGraph, pd.DataFrame]:
    """Critical path of one rank's window: the graph and the path's edges.

    Args:
        rt: the rank's trace.
        annotation: substring of the name of the CPU event (e.g. ``ProfilerStep``) whose
            span is the window; None or "" analyses the whole trace.
        instance_id: which instance of the annotation, 0-based in start order (None: the
            first), or an inclusive range ``(first, last)``.
        data_load_events: regular expressions naming data-loading events; path time inside
            them is flagged in the ``data_load`` column.

    Returns:
        ``(graph, path)``: the :class:`CriticalPathGraph` with its longest path filled in,
        and :func:`~hta.analysis.critical_path.attribution.path_frame`'s table, one row per
        path edge. ``path["duration(ns)"].sum()`` is the path's length, at most the
        window's span ``graph.span_ns`` (the time from the earliest to the latest node).

    Example: a thread launching a 200 ns kernel on an idle stream and synchronizing gives
    the path launch -> kernel -> synchronize, mostly ``gpu_compute_bound``.
    """
    graph = build_graph(rt, annotation, instance_id)
    result = longest_path(graph.num_nodes, graph.edge_src, graph.edge_dst, graph.node_weight)
    graph.dist = result.dist
    graph.pred = result.pred
    graph.path_nodes = result.path
    graph.path_edges = _edge_ids(graph, result.path)
    return graph, path_frame(graph, data_load_events)


def critical_path_summary(
    path: pd.DataFrame,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per bound type and per (bound type, event name) time on the path.

    Returns ``(bound_summary(path), event_summary(path))``; see
    :func:`~hta.analysis.critical_path.attribution.bound_summary` and
    :func:`~hta.analysis.critical_path.attribution.event_summary`.
    """
    return bound_summary(path), event_summary(path)


def _edge_ids(graph: CriticalPathGraph, path: np.ndarray) -> np.ndarray:
    """Edge id of each consecutive pair of path nodes (edges are sorted by dst, then src)."""
    if path.size < 2:
        return np.zeros(0, dtype=np.int64)
    n = np.int64(max(graph.num_nodes, 1))
    keys = graph.edge_dst * n + graph.edge_src
    wanted = path[1:] * n + path[:-1]
    pos = np.searchsorted(keys, wanted)
    if (pos >= keys.size).any() or not (keys[np.clip(pos, 0, keys.size - 1)] == wanted).all():
        raise RuntimeError("critical path uses an edge missing from the graph")
    return pos.astype(np.int64)
