"""HTA's critical-path module names.

``TraceAnalysis.critical_path_analysis(rank, annotation, instance_id)`` returns
``(graph, path table)``: the graph is :class:`CPGraph` here (this package's
:class:`~hta.analysis.critical_path.graph.CriticalPathGraph`, with ``summary()``), and
failures raise instead of returning ``success=False``. The graph cannot be saved and
restored; :func:`restore_cpgraph` says so instead of returning something else.
"""

from __future__ import annotations

from typing import Any, NoReturn

from hta.analysis.critical_path.graph import CriticalPathGraph

__all__ = ["CPGraph", "restore_cpgraph"]

#: HTA's graph class name for the graph ``critical_path_analysis`` returns.
CPGraph = CriticalPathGraph


def restore_cpgraph(zip_filename: str, t_full: Any, rank: int) -> NoReturn:
    """Not supported: graphs are not saved here. Compute the graph again with
    ``TraceAnalysis.critical_path_analysis(rank, annotation, instance_id)`` (a few
    seconds on a step), or keep its path table (``DataFrame.to_parquet``)."""
    raise NotImplementedError(
        "restore_cpgraph: critical-path graphs are not saved in this package; call "
        "TraceAnalysis.critical_path_analysis(rank, annotation, instance_id) again, or "
        "keep the path table it returns (DataFrame.to_parquet); see docs/coming_from_hta.md")
