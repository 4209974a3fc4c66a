"""The critical-path graph ``TraceAnalysis.critical_path_analysis`` returns, with HTA's
graph methods: ``save`` to a zip file, ``critical_path()`` to compute the path again,
``nodes`` and ``critical_path_edges_set``; :func:`restore_graph` reads a saved graph
back against the loaded trace.

A saved graph is the graph's arrays (``numpy.savez``) and a JSON header (rank, window,
annotation, dropped edges) in one zip; it holds no events, so restoring needs the same
trace loaded.
"""

from __future__ import annotations

import io
import json
import logging
import zipfile
from dataclasses import fields
from pathlib import Path

import numpy as np

from hta.analysis.critical_path import _edge_ids, longest_path
from hta.analysis.critical_path.graph import CriticalPathGraph
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

__all__ = ["CPGraph", "restore_graph"]

_HEADER = "header.json"
_ARRAYS = "arrays.npz"
_SCALARS = ("rank", "window_start_ns", "window_end_ns", "annotation", "dropped")


class CPGraph(CriticalPathGraph):
    """:class:`CriticalPathGraph` with HTA's graph methods (same data, same answers)."""

    @classmethod
    def of(cls, graph: CriticalPathGraph) -> CPGraph:
        """The same graph (arrays shared, not copied) as a :class:`CPGraph`."""
        return cls(**{f.name: getattr(graph, f.name) for f in fields(graph)})

    @property
    def nodes(self) -> list[int]:
        """Node ids (two per selected event: its start and its end)."""
        return list(range(self.num_nodes))

    @property
    def critical_path_edges_set(self) -> set[int]:
        """Edge ids on the critical path."""
        return set(self.path_edges.tolist())

    def critical_path(self) -> bool:
        """Compute the longest path again (as ``critical_path_analysis`` does); True."""
        result = longest_path(self.num_nodes, self.edge_src, self.edge_dst, self.node_weight)
        self.dist, self.pred, self.path_nodes = result.dist, result.pred, result.path
        self.path_edges = _edge_ids(self, result.path)
        return True

    def save(self, out_dir: str | Path) -> str:
        """Write the graph to ``out_dir/critical_path_rank<r>.zip``; return the path."""
        folder = Path(out_dir).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"critical_path_rank{self.rank}.zip"
        arrays = {f.name: getattr(self, f.name) for f in fields(self)
                  if isinstance(getattr(self, f.name), np.ndarray)}
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        header = {name: getattr(self, name) for name in _SCALARS}
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(_HEADER, json.dumps(header))
            zf.writestr(_ARRAYS, buf.getvalue())
        logger.info("critical-path graph of rank %d saved to %s", self.rank, path)
        return str(path)


def restore_graph(zip_filename: str | Path, rank_trace: RankTrace) -> CPGraph:
    """A graph saved by :meth:`CPGraph.save`, tied to the loaded rank it was built from."""
    with zipfile.ZipFile(Path(zip_filename).expanduser()) as zf:
        header = json.loads(zf.read(_HEADER))
        with np.load(io.BytesIO(zf.read(_ARRAYS)), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    if int(header["rank"]) != rank_trace.rank:
        raise ValueError(f"{zip_filename} holds rank {header['rank']}'s graph, "
                         f"not rank {rank_trace.rank}'s")
    if arrays["events"].size and int(arrays["events"].max()) >= len(rank_trace.events):
        raise ValueError(f"{zip_filename} names events the loaded rank {rank_trace.rank} "
                         "does not have: load the trace the graph was built from")
    return CPGraph(**header, **arrays, trace=rank_trace)
