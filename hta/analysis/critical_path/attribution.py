"""What the critical path's time was spent on: each edge attributed to an event and a bound.

Every edge on the path carries its weight (ns, see :mod:`.graph`) and is attributed to one
event of the trace and one *bound type*:

=========================  ===========================================================
bound type                 path edges counted (their weight, ns)
=========================  ===========================================================
cpu_bound                  ``cpu`` edges: time on a CPU thread, inside an operator,
                           annotation, Python function or runtime call, or between them
                           (untraced host time); and ``sync`` edges: time a
                           synchronizing call took to return after the GPU work it waited
                           for had finished
gpu_compute_bound          ``gpu`` edges of GPU work that is not communication: compute
                           kernels, memcpy and memset
gpu_communication_bound    ``gpu`` edges of communication kernels (kind ``communication``
                           from the rule table: NCCL/RCCL, NVSHMEM, ...)
launch_overhead            ``launch`` edges: from a runtime call's start (or from the
                           later end of the work the GPU event also waited for) to the
                           start of the GPU event it enqueued
kernel_kernel_overhead     ``stream`` and ``event_wait`` edges: GPU idle gap between the
                           end of the work a GPU event waited for (the previous event on
                           its stream, or the event it waited on with
                           ``cudaStreamWaitEvent``) and its start
=========================  ===========================================================

The five add up to the path's length. Attributed event (``event_idx``): for a ``cpu``
edge the innermost CPU event open during it (``-1`` for a gap between top-level events,
named ``(untraced CPU time)``); for ``gpu``, ``launch``, ``stream`` and ``event_wait``
edges the GPU event the edge ends in (or runs in); for ``sync`` edges the synchronizing
call. A GPU event that starts before the previous one on its stream ends (programmatic
dependent launch) depends on that one's start: a ``gpu`` edge from its start to the next
one's start, attributed to the earlier event, so the overlap is counted once.

Worked example: a thread runs ``aten::mm`` from 0 to 100 ns and launches, inside it, a
kernel with ``cudaLaunchKernel`` [10, 30]; the kernel runs [40, 240] on an idle stream and
``cudaDeviceSynchronize`` [110, 250] waits for it. The path is mm start -> launch start
(10 ns, cpu_bound, ``aten::mm``) -> kernel start (30 ns, launch_overhead) -> kernel end
(200 ns, gpu_compute_bound) -> synchronize end (10 ns, cpu_bound, the synchronize call):
250 ns, the whole span.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

import numpy as np
import pandas as pd

from hta.analysis.critical_path.events import EDGE_CODE, EDGE_TYPES
from hta.model.rules import KIND_CODE, KINDS, codes_in
from hta.model.trace import RankTrace


class CriticalPathGraph(Protocol):
    """What attribution reads of a :class:`hta.analysis.critical_path.graph.CriticalPathGraph`
    (a protocol, so this module does not import the graph module that imports it)."""

    trace: RankTrace | None
    path_edges: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_type: np.ndarray
    node_weight: np.ndarray
    node_event: np.ndarray
    node_is_start: np.ndarray
    node_ts: np.ndarray

BOUND_TYPES: tuple[str, ...] = (
    "cpu_bound",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "launch_overhead",
    "kernel_kernel_overhead",
)
UNTRACED = "(untraced CPU time)"

PATH_COLUMNS = [
    "step", "src_node", "dst_node", "src_event", "src_is_start", "dst_event", "dst_is_start",
    "type", "ts", "end", "duration(ns)", "event_idx", "name", "kind", "pid", "tid", "stream",
    "bound_by", "data_load",
]


def path_frame(graph: CriticalPathGraph,
               data_load_events: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per edge of the critical path, in path order.

    Columns: ``step`` (0-based position), ``src_node``/``dst_node`` (node ids),
    ``src_event``/``dst_event`` (event rows) with ``src_is_start``/``dst_is_start``,
    ``type`` (edge type), ``ts``/``end`` (int64 ns: the interval the weight covers,
    ``end`` = the destination node's time, ``ts = end - duration``),
    ``duration(ns)`` (the edge's weight), ``event_idx`` (attributed event row, -1 for
    untraced CPU time), ``name`` and ``kind`` (categoricals), ``pid``, ``tid``, ``stream`` (of the
    attributed event; the thread's for untraced time), ``bound_by`` (one of
    :data:`BOUND_TYPES`) and ``data_load`` (the attributed event, or for GPU-side edges
    the call that launched the GPU event, is or runs inside an event whose name matches
    one of the ``data_load_events`` regular expressions).

    The ``duration(ns)`` column sums to :attr:`CriticalPathGraph.path_length_ns`.
    """
    rt = graph.trace
    if rt is None:
        raise ValueError("this graph has no trace attached; build it with build_graph()")
    edges = graph.path_edges
    if edges.size == 0:
        return pd.DataFrame({c: [] for c in PATH_COLUMNS})
    ev = rt.events
    src, dst, typ = graph.edge_src[edges], graph.edge_dst[edges], graph.edge_type[edges]
    w = graph.node_weight[dst]
    src_ev, dst_ev = graph.node_event[src], graph.node_event[dst]
    src_start, dst_start = graph.node_is_start[src], graph.node_is_start[dst]
    attributed = _attributed(graph, ev, src, dst, typ)
    codes = ev["kind"].array.codes
    has = attributed >= 0
    safe = np.where(has, attributed, src_ev)
    kind_code = np.where(has, codes[safe], -1)
    symbols = list(rt.symbols)
    untraced = len(symbols)
    name_code = np.where(has, ev["name"].to_numpy()[safe], untraced)
    used, name_code = np.unique(name_code, return_inverse=True)
    labels = [symbols[i] if i < untraced else UNTRACED for i in used.tolist()]
    names = pd.Categorical.from_codes(name_code.reshape(-1), categories=pd.Index(labels,
                                                                                 dtype=object))
    kinds = pd.Categorical.from_codes(np.where(has, kind_code, len(KINDS)),
                                      categories=list(KINDS) + [""])
    bound = _bound_by(typ, kind_code)
    end = graph.node_ts[dst]
    return pd.DataFrame({
        "step": np.arange(edges.size, dtype=np.int64),
        "src_node": src,
        "dst_node": dst,
        "src_event": src_ev,
        "src_is_start": src_start,
        "dst_event": dst_ev,
        "dst_is_start": dst_start,
        "type": pd.Categorical.from_codes(typ, categories=list(EDGE_TYPES)),
        "ts": end - w,
        "end": end,
        "duration(ns)": w,
        "event_idx": attributed,
        "name": names,
        "kind": kinds,
        "pid": ev["pid"].to_numpy()[safe],
        "tid": ev["tid"].to_numpy()[safe],
        "stream": np.where(has, ev["stream"].to_numpy()[safe], -1),
        "bound_by": pd.Categorical(bound, categories=list(BOUND_TYPES)),
        "data_load": _in_data_load(rt, attributed, typ, data_load_events),
    })


def _attributed(graph: CriticalPathGraph, ev: pd.DataFrame, src: np.ndarray, dst: np.ndarray,
                typ: np.ndarray) -> np.ndarray:
    """The event row each path edge's time is attributed to (-1: untraced CPU time)."""
    src_ev, dst_ev = graph.node_event[src], graph.node_event[dst]
    src_start, dst_start = graph.node_is_start[src], graph.node_is_start[dst]
    attributed = np.where(typ == EDGE_CODE["cpu"], -1, dst_ev)
    cpu = typ == EDGE_CODE["cpu"]
    attributed[cpu & src_start] = src_ev[cpu & src_start]
    closing = cpu & ~src_start & ~dst_start
    attributed[closing] = dst_ev[closing]
    # start -> start on a stream (a kernel launched before the previous one ended): the
    # time is the previous kernel's, running alone until the next one starts
    overlap = (typ == EDGE_CODE["gpu"]) & src_start & dst_start
    attributed[overlap] = src_ev[overlap]
    between = np.flatnonzero(cpu & ~src_start & dst_start)
    if between.size:
        attributed[between] = _open_ancestor(
            ev, src_ev[between], graph.node_ts[src[between]])
    return attributed


def _bound_by(typ: np.ndarray, kind_code: np.ndarray) -> np.ndarray:
    """The bound type of each path edge (see :data:`BOUND_TYPES`)."""
    cpu = typ == EDGE_CODE["cpu"]
    bound = np.empty(typ.size, dtype=object)
    bound[cpu | (typ == EDGE_CODE["sync"])] = "cpu_bound"
    is_gpu = typ == EDGE_CODE["gpu"]
    comm = kind_code == KIND_CODE["communication"]
    bound[is_gpu & comm] = "gpu_communication_bound"
    bound[is_gpu & ~comm] = "gpu_compute_bound"
    bound[typ == EDGE_CODE["launch"]] = "launch_overhead"
    bound[(typ == EDGE_CODE["stream"]) | (typ == EDGE_CODE["event_wait"])] = \
        "kernel_kernel_overhead"
    return bound


def _open_ancestor(ev: pd.DataFrame, rows: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Nearest ancestor of each row (by ``parent``) still open after time ``at``; -1 if none."""
    parent = ev["parent"].to_numpy()
    end = ev["end"].to_numpy()
    cur = parent[rows].copy()
    active = cur >= 0
    active[active] = end[cur[active]] <= at[active]
    while active.any():
        idx = np.flatnonzero(active)
        cur[idx] = parent[cur[idx]]
        still = cur[idx] >= 0
        active[idx] = still
        active[idx[still]] = end[cur[idx[still]]] <= at[idx[still]]
    return cur


def _in_data_load(rt, attributed: np.ndarray, typ: np.ndarray,
                  patterns: Iterable[str] | None) -> np.ndarray:
    """Whether each edge's event (or, for GPU events, its launch) is inside a data-load event."""
    out = np.zeros(attributed.shape[0], dtype=bool)
    if isinstance(patterns, str):  # one pattern, not its characters
        patterns = [patterns]
    pats = [re.compile(p) for p in (patterns or [])]
    if not pats:
        return out
    ids = np.asarray([i for i, s in enumerate(rt.symbols) if any(p.search(s) for p in pats)],
                     dtype=np.int64)
    if ids.size == 0:
        return out
    matched = np.isin(rt.column("name"), ids)
    matched &= codes_in(rt.kind_codes(),
                       [KIND_CODE[k] for k in ("cpu_op", "user_annotation", "python_function")])
    ic = rt.column("index_correlation")
    parent = rt.column("parent")
    cur = attributed.copy()
    gpu_side = typ != EDGE_CODE["cpu"]
    gpu_side &= typ != EDGE_CODE["sync"]
    cur[gpu_side] = np.where(cur[gpu_side] >= 0, ic[np.clip(cur[gpu_side], 0, None)], -1)
    active = cur >= 0
    while active.any():
        idx = np.flatnonzero(active)
        hit = matched[cur[idx]]
        out[idx[hit]] = True
        nxt = parent[cur[idx]]
        cur[idx] = nxt
        active[idx] = ~hit & (nxt >= 0)
    return out


def bound_summary(path: pd.DataFrame) -> pd.DataFrame:
    """Time on the critical path per bound type, all five in a fixed order.

    Columns: ``bound_by``, ``duration(ns)`` (sum of the edges' weights), ``duration(us)``,
    ``duration_pctg`` (percent of the path's length; 0 for an empty path) and
    ``data_load(us)`` (the part inside data-load events).
    """
    dur = path["duration(ns)"].to_numpy(np.int64)
    bound = path["bound_by"].astype(str).to_numpy()
    load = path["data_load"].to_numpy(bool) if "data_load" in path else np.zeros(len(path), bool)
    total = int(dur.sum())
    rows = []
    for b in BOUND_TYPES:
        sel = bound == b
        ns = int(dur[sel].sum())
        rows.append({
            "bound_by": b,
            "duration(ns)": ns,
            "duration(us)": ns / 1e3,
            "duration_pctg": 100.0 * ns / total if total else 0.0,
            "data_load(us)": int(dur[sel & load].sum()) / 1e3,
        })
    return pd.DataFrame(rows)


def event_summary(path: pd.DataFrame) -> pd.DataFrame:
    """Time on the critical path per (bound type, event name, kind), longest first.

    Columns: ``bound_by``, ``name``, ``kind``, ``count`` (path edges), ``duration(ns)``,
    ``duration(us)``, ``duration_pctg`` (percent of the path's length).
    """
    cols = ["bound_by", "name", "kind", "count", "duration(ns)", "duration(us)",
            "duration_pctg"]
    if len(path) == 0:
        return pd.DataFrame({c: [] for c in cols})
    frame = pd.DataFrame({
        "bound_by": path["bound_by"],
        "name": path["name"],
        "kind": path["kind"],
        "duration(ns)": path["duration(ns)"].astype(np.int64),
    })
    grouped = frame.groupby(["bound_by", "name", "kind"], sort=False, observed=True)
    out = grouped["duration(ns)"].agg(["count", "sum"]).reset_index()
    out = out.rename(columns={"sum": "duration(ns)"})
    for col in ("bound_by", "name", "kind"):
        out[col] = out[col].astype(object).astype(str)
    total = int(frame["duration(ns)"].sum())
    out["duration(us)"] = out["duration(ns)"] / 1e3
    out["duration_pctg"] = 100.0 * out["duration(ns)"] / total if total else 0.0
    out = out[out["duration(ns)"] > 0] if total else out
    return out.sort_values(["duration(ns)", "bound_by", "name"], ascending=[False, True, True],
                           ignore_index=True)[cols]
