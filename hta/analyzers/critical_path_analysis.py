"""HTA's critical-path module names.

``TraceAnalysis.critical_path_analysis(rank, annotation, instance_id)`` returns
``(graph, path table)``: the graph is a :class:`CPGraph` (this package's
:class:`~hta.analysis.critical_path.graph.CriticalPathGraph` with HTA's ``save``,
``summary()``, ``critical_path()``), and failures raise instead of returning
``success=False`` (the second value is the path's edges, one row each).
:func:`restore_cpgraph` reads a saved graph back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hta.facade.cp_graph import CPGraph, restore_graph

__all__ = ["CPGraph", "restore_cpgraph"]


def restore_cpgraph(zip_filename: str | Path, t_full: Any, rank: int) -> CPGraph:
    """The graph :meth:`CPGraph.save` wrote, for ``rank`` of the loaded trace ``t_full``
    (``analyzer.t``, or an :class:`hta.common.trace.Trace`), which must be the trace the
    graph was built from."""
    model = getattr(t_full, "t", t_full)
    return restore_graph(zip_filename, model.rank(rank))
