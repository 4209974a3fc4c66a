"""The critical path graph of one rank: a DAG over the start and end points of events.

Nodes
    Every selected event gets two nodes, its start and its end: CPU operators, user
    annotations, Python functions and runtime calls on their threads, and GPU work
    (kernels, copies, memsets) on their streams. A node's time is the event's ``ts`` or
    ``end`` (int64 ns).

Node numbering
    Nodes are numbered in one total order: by time, then by a tie rank that puts, at
    equal time, ends of events with a duration first (GPU ends before CPU ends, inner
    events before outer ones), then zero-duration events (start before end), then
    starts (CPU starts before GPU starts, outer events before inner ones). Every edge
    must go forward in this order, so the numbering is a topological order and the
    graph is a DAG by construction. An edge that would go backwards (a kernel that
    starts before its launch call, clocks that disagree, equal times in an order no
    schedule allows) is dropped and counted in :attr:`CriticalPathGraph.dropped`.

Edges (the ``type`` of each)
    ``cpu``         consecutive points (starts and ends, in node order) of one CPU thread:
                    operator nesting and ordering on the thread;
    ``gpu``         start -> end of a GPU event (its execution);
    ``launch``      runtime call start -> start of each GPU event it enqueued (found by
                    ``index_correlation``: kernel launches, memcpy/memset, CUDA-graph and
                    HIP launches alike, whatever the rule table calls a launch);
    ``stream``      end of a GPU event -> start of the next GPU event on the same
                    (device, stream), in start order;
    ``sync``        end of GPU work -> end of the CPU call that waited for it: device,
                    stream and event synchronize (``runtime_sync`` calls, resolved with
                    their ``cuda_sync`` record when the trace has one) and blocking
                    memcpy;
    ``event_wait``  end of the GPU work a ``cudaStreamWaitEvent`` waits for -> start of
                    the first GPU work enqueued on the waiting stream after the call.

Node weights
    All edges into a node ``v`` carry the same weight ``w(v) = ts(v) - R(v)``, where
    ``R(v)`` is the time of the latest of ``v``'s predecessors (and of work outside the
    analysed window that ``v`` waited for, see below). ``w(v)`` is the time ``v`` took
    after its last dependency was satisfied; the time between an earlier predecessor
    and ``R(v)`` is that predecessor's slack. Example: a kernel launched at 100 ns on a
    stream whose previous kernel ends at 300 ns and that starts at 310 ns has
    ``R = 300`` and ``w = 10`` on both its launch and its stream edge. A path's length
    is therefore the time from its first to its last node minus the slack along it, at
    most the window's span, and exactly the span when a slack-free path joins the first
    and the last node.

Work outside the window
    When a window is analysed (one ``ProfilerStep``), GPU work launched before it can
    still delay events inside it (the previous step's kernels on the same stream, a
    synchronize that waits for them). Such work is not a node, but its end time counts
    in ``R(v)``: the wait is slack, not time on the window's critical path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hta.analysis.critical_path.attribution import bound_summary, path_frame
from hta.analysis.critical_path.events import EDGE_CODE, EDGE_TYPES, Cols, Streams
from hta.analysis.critical_path.sync import sync_edges
from hta.model.arrays import distinct, lexsort, sorted_with_order, stable_argsort
from hta.model.rules import GPU_WORK_KINDS, KIND_CODE, RUNTIME_KINDS, codes_in, kind_mask
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

#: Event kinds that become nodes on CPU threads.
CPU_NODE_KINDS: frozenset[str] = frozenset(
    {"cpu_op", "user_annotation", "python_function"}
) | RUNTIME_KINDS
#: Kinds an ``annotation`` may name (GPU-side copies of annotations are never windows).
WINDOW_KINDS: frozenset[str] = frozenset({"user_annotation", "cpu_op", "python_function"})


@dataclass
class CriticalPathGraph:
    """The DAG of one rank's window and its longest path.

    Arrays are indexed by node id (``node_*``, length ``num_nodes``) or by edge id
    (``edge_*``, edges sorted by destination node). Event numbers are rows of the rank's
    events table (its ``index`` column).

    Attributes:
        rank: the rank analysed.
        window_start_ns, window_end_ns: the window's bounds (absolute ns).
        annotation: the annotation that chose the window ("" for the whole trace).
        events: rows of the selected events.
        node_event, node_is_start, node_ts: the event, start/end flag and time of a node.
        edge_src, edge_dst, edge_type: edges (``edge_type`` indexes :data:`EDGE_TYPES`).
        node_weight: ``w(v)`` (ns), the weight of every edge into ``v``.
        external_ready: per node, the end (ns) of the latest work outside the window it
            waited for, or -1.
        dist: the longest path length (ns) ending at each node.
        pred: the predecessor of each node on its longest path (-1 for sources).
        path_nodes: node ids of the critical path, in order.
        path_edges: edge ids of the critical path, in order.
        dropped: edges dropped to keep the graph a DAG, and synchronizations that could
            not be resolved, by reason.
    """

    rank: int
    window_start_ns: int
    window_end_ns: int
    annotation: str
    events: np.ndarray
    node_event: np.ndarray
    node_is_start: np.ndarray
    node_ts: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_type: np.ndarray
    node_weight: np.ndarray
    external_ready: np.ndarray
    dist: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pred: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    path_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    path_edges: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dropped: dict[str, int] = field(default_factory=dict)
    trace: RankTrace | None = field(default=None, repr=False)

    # -- sizes and totals -----------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Number of nodes (two per selected event)."""
        return int(self.node_ts.shape[0])

    @property
    def num_edges(self) -> int:
        """Number of edges kept."""
        return int(self.edge_src.shape[0])

    @property
    def edge_weight(self) -> np.ndarray:
        """Weight (ns) of every edge: the node weight of its destination."""
        return self.node_weight[self.edge_dst]

    @property
    def span_ns(self) -> int:
        """Time from the earliest to the latest node (ns): the most a path can be."""
        if self.num_nodes == 0:
            return 0
        return int(self.node_ts.max() - self.node_ts.min())

    @property
    def path_length_ns(self) -> int:
        """Length of the critical path (ns): the sum of its edges' weights."""
        return int(self.dist[self.path_nodes[-1]]) if self.path_nodes.size else 0

    @property
    def critical_path_nodes(self) -> list[int]:
        """Node ids on the critical path (HTA's attribute name)."""
        return self.path_nodes.tolist()

    @property
    def critical_path_events_set(self) -> set[int]:
        """Rows of the events with a node on the critical path (HTA's attribute name)."""
        return set(distinct(self.node_event[self.path_nodes]).tolist())

    def edges_frame(self) -> pd.DataFrame:
        """Every edge as a row: src/dst node, type, weight (ns) and whether it is critical."""
        critical = np.zeros(self.num_edges, dtype=bool)
        critical[self.path_edges] = True
        return pd.DataFrame({
            "src_node": self.edge_src,
            "dst_node": self.edge_dst,
            "src_event": self.node_event[self.edge_src],
            "dst_event": self.node_event[self.edge_dst],
            "type": pd.Categorical.from_codes(self.edge_type, categories=list(EDGE_TYPES)),
            "weight(ns)": self.edge_weight,
            "critical": critical,
        })

    # -- HTA-compatible helpers ------------------------------------------------------------
    def get_critical_path_breakdown(self, data_load_events: list[str] | None = None
                                    ) -> pd.DataFrame:
        """One row per critical path edge; see :func:`.attribution.path_frame`."""
        return path_frame(self, data_load_events)

    def summary(self) -> pd.Series:
        """Percent of the critical path's length per bound type (HTA's ``summary()``)."""
        table = bound_summary(path_frame(self))
        return table.set_index("bound_by")["duration_pctg"]


# ---------------------------------------------------------------------------------------
# choosing the window


def select_window(
    rt: RankTrace, annotation: str | None, instance_id: int | tuple[int, int] | None
) -> tuple[int, int, str]:
    """The ``[start, end]`` (ns) analysed and a label for it.

    ``annotation`` None or "" means the whole trace. Otherwise the CPU events (user
    annotations, operators, Python functions) whose name contains ``annotation`` are its
    instances, in start order; ``instance_id`` picks one (0-based; None = the first) or an
    inclusive range ``(first, last)``, and the window runs from the earliest start to the
    latest end of the picked instances.

    Not the ``ProfilerStep`` spans of :func:`hta.model.selection.rank_steps` on purpose:
    HTA's critical path takes any annotation (a substring of a CPU event's name, operators
    and Python functions included) and an instance number, so ``"ProfilerStep"`` picks
    events by name and position, not step numbers.
    """
    ev = rt.events
    if not annotation:
        if len(ev) == 0:
            raise ValueError(f"rank {rt.rank} has no events to analyse")
        return int(ev["ts"].min()), int(ev["end"].max()), ""
    ids = [i for i, s in enumerate(rt.symbols) if annotation in s]
    codes = rt.kind_codes()
    mask = codes_in(codes, [KIND_CODE[k] for k in WINDOW_KINDS])
    mask &= np.isin(rt.column("name"), ids) if ids else False
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        raise ValueError(
            f"rank {rt.rank}: no CPU event's name contains {annotation!r}; pass another "
            "annotation, or annotation='' to analyse the whole trace"
        )
    if instance_id is None:
        first = last = 0
    elif isinstance(instance_id, tuple):
        first, last = int(instance_id[0]), int(instance_id[1])
    else:
        first = last = int(instance_id)
    if not (0 <= first <= last < rows.size):
        raise ValueError(
            f"rank {rt.rank}: instance_id {instance_id!r} is out of range; {annotation!r} "
            f"has {rows.size} instance(s), numbered 0 to {rows.size - 1}"
        )
    picked = rows[first:last + 1]
    start = int(rt.column("ts")[picked].min())
    end = int(rt.column("end")[picked].max())
    label = annotation if first == last else f"{annotation}[{first}:{last}]"
    return start, end, label


# ---------------------------------------------------------------------------------------
# building the graph


class _EdgeList:
    """Edges between events' start/end points, collected by type."""

    def __init__(self) -> None:
        self.src: list[np.ndarray] = []
        self.dst: list[np.ndarray] = []
        self.type: list[np.ndarray] = []

    def add(self, src: np.ndarray, dst: np.ndarray, kind: str) -> None:
        if src.size:
            self.src.append(src.astype(np.int64))
            self.dst.append(dst.astype(np.int64))
            self.type.append(np.full(src.size, EDGE_CODE[kind], dtype=np.int8))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.src:
            z = np.zeros(0, dtype=np.int64)
            return z, z.copy(), np.zeros(0, dtype=np.int8)
        return np.concatenate(self.src), np.concatenate(self.dst), np.concatenate(self.type)


#: What the dependencies left out of the graph mean for the answer (logged with the counts).
DROPPED_CONSEQUENCE = (
    "The path is the longest one through the dependencies the trace supports: an edge its "
    "timestamps contradict is left out, and a synchronization whose target the trace does "
    "not name counts as CPU work of its own length instead of a wait for the GPU, so the "
    "CPU-bound share can be a little high. Nothing to do; traces with Kineto's cuda_sync "
    "events resolve more synchronizations.")


def build_graph(
    rt: RankTrace,
    annotation: str | None = "ProfilerStep",
    instance_id: int | tuple[int, int] | None = None,
) -> CriticalPathGraph:
    """Build the critical path DAG of one rank's window (longest path not yet computed).

    CPU events (operators, annotations, Python functions, runtime calls) are selected
    when they start inside the window; GPU work when the call that launched it is
    selected, or, for GPU work with no known launch, when it starts inside the window.
    See the module docstring for the nodes, edges and weights.
    """
    index = rt.column("index")
    if index.size and not (index == np.arange(index.size)).all():
        raise ValueError(
            f"rank {rt.rank}: the events table was filtered after loading (its 'index' column "
            "no longer numbers the rows), so its links point to the wrong rows; run the "
            "critical path on the trace as loaded"
        )
    start_ns, end_ns, label = select_window(rt, annotation, instance_id)
    c = Cols.of(rt)
    gpu = kind_mask(c.codes, GPU_WORK_KINDS)
    rows = _window_rows(c, gpu, start_ns, end_ns)
    local = np.full(c.ts.shape[0], -1, dtype=np.int64)
    local[rows] = np.arange(rows.size)
    dropped: dict[str, int] = {}
    nodes = _Nodes.of(c, rows, gpu[rows])
    edges = _EdgeList()
    _thread_and_launch_edges(c, rows, local, nodes, edges)
    wait_on = _WaitOn(c, local, nodes, edges, dropped)
    streams = _stream_edges(c, gpu, local, nodes.start_node, wait_on)
    sync_edges(rt, c, rows, local, nodes.end_node, nodes.start_node, streams, wait_on, dropped)

    src, dst, typ = edges.arrays()
    src, dst, typ = _enforce_order(src, dst, typ, nodes.node_ts, dropped)
    weight, external = _node_weights(2 * rows.size, src, dst, nodes.node_ts, wait_on.external,
                                     dropped)
    if dropped:  # said at INFO: nothing to do (the counts are in the graph's ``dropped``)
        logger.info("rank %d critical path: %s left out of the graph. %s", rt.rank,
                       "; ".join(f"{v} {k}" for k, v in sorted(dropped.items())),
                       DROPPED_CONSEQUENCE)
    return CriticalPathGraph(
        rank=rt.rank, window_start_ns=start_ns, window_end_ns=end_ns, annotation=label,
        events=rows, node_event=nodes.node_event, node_is_start=nodes.node_is_start,
        node_ts=nodes.node_ts, edge_src=src, edge_dst=dst, edge_type=typ, node_weight=weight,
        external_ready=external, dropped=dropped, trace=rt,
    )


def _window_rows(c: Cols, gpu: np.ndarray, start_ns: int, end_ns: int) -> np.ndarray:
    """Rows of the window's events: CPU events starting in it, GPU work launched by one
    of them (or, with no known launch, starting in it)."""
    in_window = (c.ts >= start_ns) & (c.ts <= end_ns)
    sel_cpu = kind_mask(c.codes, CPU_NODE_KINDS) & in_window
    launched = c.ic >= 0
    sel_gpu = gpu & np.where(launched, sel_cpu[np.clip(c.ic, 0, None)], in_window)
    return np.flatnonzero(sel_cpu | sel_gpu)


@dataclass
class _Nodes:
    """The graph's nodes (a start and an end per selected event), numbered in (time, tie
    rank) order."""

    is_gpu: np.ndarray  # per selected event
    node_event: np.ndarray  # per node: its event row
    node_is_start: np.ndarray
    node_ts: np.ndarray
    start_node: np.ndarray  # per selected event: its start node
    end_node: np.ndarray
    cpu_nodes: np.ndarray  # nodes of CPU events, ascending

    @classmethod
    def of(cls, c: Cols, rows: np.ndarray, is_gpu: np.ndarray) -> _Nodes:
        """Number the start and end of each of ``rows`` (see the module docstring).

        Node ``k`` of the ``2m`` is the start of ``rows[k]``, node ``m + k`` its end; they
        are ordered by time, then (:func:`_tie_keys`) group, lane, the two tie-breakers,
        the event and the end flag. Times are mostly distinct: one sort by time, then
        the nodes of each run of equal times sorted by the other keys among themselves
        (the order of a sort by every key, at a fraction of its cost)."""
        m = rows.size
        ts, end = c.ts[rows], c.end[rows]
        order, node_ts = sorted_with_order(np.r_[ts, end], consume=True)
        same = node_ts[1:] == node_ts[:-1]
        if same.any():
            at = np.flatnonzero(np.r_[same, False] | np.r_[False, same])
            run = np.cumsum(np.r_[True, ~same])[at]  # the run of equal times of each
            members = order[at]
            order[at] = members[lexsort((*_tie_keys(c, rows, is_gpu, members), run))]
        k = np.where(order >= m, order - m, order)
        position = np.empty(2 * m, dtype=np.int64)
        position[order] = np.arange(2 * m)
        return cls(is_gpu=is_gpu, node_event=rows[k], node_is_start=order < m,
                   node_ts=node_ts, start_node=position[:m], end_node=position[m:],
                   cpu_nodes=np.flatnonzero(~is_gpu[k]))


def _tie_keys(c: Cols, rows: np.ndarray, is_gpu: np.ndarray, nodes: np.ndarray
              ) -> tuple[np.ndarray, ...]:
    """The sort keys after the time of ``nodes`` (of :meth:`_Nodes.of`: ``k`` the start
    of ``rows[k]``, ``m + k`` its end), least significant first as :func:`lexsort` takes
    them: the end flag, the event, two tie-breakers, the lane, the group (the module
    docstring's order). Group 0 holds the ends of events with a duration (lane: GPU ends
    first; then the later start, then the deeper event: inner before outer), 1 the nodes
    of zero-duration events (by event, its start before its end), 2 the starts (lane:
    CPU starts first; then the later end, then the shallower event: outer before
    inner)."""
    m = rows.size
    is_end = nodes >= m
    k = np.where(is_end, nodes - m, nodes)
    gpu = is_gpu[k]
    r = rows[k]
    depth = np.where(gpu, 0, c.depth[r])
    group = np.where(c.dur[r] == 0, 1, np.where(is_end, 0, 2))
    lane = np.where(group == 0, ~gpu, gpu).astype(np.int8)
    tb1 = np.where(group == 0, -c.ts[r], np.where(group == 2, -c.end[r], k))
    tb2 = np.where(group == 0, -depth, np.where(group == 2, depth, is_end))
    return is_end, k, tb2, tb1, lane, group


def _thread_and_launch_edges(c: Cols, rows: np.ndarray, local: np.ndarray, nodes: _Nodes,
                             edges: _EdgeList) -> None:
    """``gpu`` (execution of each GPU event), ``cpu`` (consecutive points of each thread)
    and ``launch`` (runtime call start -> GPU event start) edges."""
    gl = np.flatnonzero(nodes.is_gpu)
    edges.add(nodes.start_node[gl], nodes.end_node[gl], "gpu")
    cpu_nodes = nodes.cpu_nodes
    if cpu_nodes.size:
        ev_rows = nodes.node_event[cpu_nodes]
        thread = _dense(c.pid[ev_rows], c.tid[ev_rows])
        o = np.lexsort((cpu_nodes, thread))
        seq, th = cpu_nodes[o], thread[o]
        same = th[1:] == th[:-1]
        edges.add(seq[:-1][same], seq[1:][same], "cpu")
    launch_local = local[np.clip(c.ic[rows[gl]], 0, None)]
    has = (c.ic[rows[gl]] >= 0) & (launch_local >= 0)
    edges.add(nodes.start_node[launch_local[has]], nodes.start_node[gl[has]], "launch")


class _WaitOn:
    """Edges from GPU work (event rows) to nodes (see :data:`.sync.WaitOn`); work outside
    the window becomes an external wait of the node (``external``: its latest end)."""

    def __init__(self, c: Cols, local: np.ndarray, nodes: _Nodes, edges: _EdgeList,
                 dropped: dict[str, int]) -> None:
        self.c, self.local, self.nodes, self.edges, self.dropped = c, local, nodes, edges, dropped
        self.external = np.full(nodes.node_ts.shape[0], -1, dtype=np.int64)

    def __call__(self, src_rows: np.ndarray, dst_nodes: np.ndarray, src_is_end: bool,
                 kind: str, reason: str) -> None:
        c, local, dropped = self.c, self.local, self.dropped
        ok = src_rows >= 0
        src_rows, dst_nodes = src_rows[ok], dst_nodes[ok]
        src_t = c.end[src_rows] if src_is_end else c.ts[src_rows]
        backwards = src_t > self.nodes.node_ts[dst_nodes]
        if backwards.any():
            dropped[reason] = dropped.get(reason, 0) + int(backwards.sum())
        src_rows, dst_nodes, src_t = src_rows[~backwards], dst_nodes[~backwards], src_t[~backwards]
        inside = local[src_rows] >= 0
        self.edges.add(self.nodes.end_node[local[src_rows[inside]]], dst_nodes[inside], kind)
        out = ~inside
        np.maximum.at(self.external, dst_nodes[out], src_t[out])


def _stream_edges(c: Cols, gpu: np.ndarray, local: np.ndarray, start_node: np.ndarray,
                  wait_on: _WaitOn) -> Streams:
    """``stream`` edges: the previous GPU event on the same stream -> the next; returns
    the streams' work (for the synchronization edges)."""
    all_gpu = np.flatnonzero(gpu)
    streams = Streams(c, all_gpu)
    if all_gpu.size:
        s_key = np.where(c.stream[all_gpu] >= 0, c.stream[all_gpu], c.tid[all_gpu])
        o = np.lexsort((c.end[all_gpu], c.ts[all_gpu], s_key, c.pid[all_gpu]))
        seq = all_gpu[o]
        same = (s_key[o][1:] == s_key[o][:-1]) & (c.pid[seq][1:] == c.pid[seq][:-1])
        prev, nxt = seq[:-1][same], seq[1:][same]
        keep = local[nxt] >= 0
        # A kernel started before the previous one on its stream ended (programmatic
        # dependent launch): it waited for the previous one's start, not its end, and the
        # overlap is one stretch of GPU work, counted once.
        early = keep & (c.end[prev] > c.ts[nxt]) & (local[prev] >= 0)
        wait_on.edges.add(start_node[local[prev[early]]], start_node[local[nxt[early]]],
                          "gpu")
        keep &= ~early
        wait_on(prev[keep], start_node[local[nxt[keep]]], True, "stream",
                "stream order: GPU events overlapping on their stream")
    return streams


def _dense(*keys: np.ndarray) -> np.ndarray:
    """Dense group ids of the rows of the key columns (hash-based, linear time)."""
    code = np.zeros(keys[0].shape[0], dtype=np.int64)
    for key in keys:
        ids, uniques = pd.factorize(key)
        code = code * np.int64(len(uniques)) + ids
    return pd.factorize(code)[0].astype(np.int64)


def _enforce_order(src: np.ndarray, dst: np.ndarray, typ: np.ndarray, node_ts: np.ndarray,
                   dropped: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep edges that go forward in node order, once each, sorted by destination."""
    forward = src < dst
    if not forward.all():
        back_in_time = node_ts[src] > node_ts[dst]
        n_time = int((~forward & back_in_time).sum())
        n_tie = int((~forward & ~back_in_time).sum())
        if n_time:
            dropped["edges going backwards in time"] = n_time
        if n_tie:
            dropped["edges between equal times that would close a cycle"] = n_tie
        src, dst, typ = src[forward], dst[forward], typ[forward]
    # one edge per (src, dst) pair; the first type added wins: sorted by (dst, src), ties
    # in the order added, by one stable sort of one key (node ids are below the count)
    n = np.int64(max(node_ts.size, 1))
    order = stable_argsort(dst.astype(np.int64) * n + src)
    src, dst, typ = src[order], dst[order], typ[order]
    if src.size:
        first = np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]
        src, dst, typ = src[first], dst[first], typ[first]
    return src, dst, typ


def _node_weights(n: int, src: np.ndarray, dst: np.ndarray, node_ts: np.ndarray,
                  external: np.ndarray, dropped: dict[str, int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``w(v) = ts(v) - R(v)`` with ``R(v)`` the latest predecessor or external wait."""
    ready = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    if dst.size:  # edges are sorted by dst
        starts = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]])
        ready[dst[starts]] = np.maximum.reduceat(node_ts[src], starts)
    has_pred = ready > np.iinfo(np.int64).min
    ext_ok = (external >= 0) & has_pred
    late = ext_ok & (external > node_ts)
    if late.any():  # cannot happen: wait_on drops them; kept as a guard
        dropped["external waits after the node"] = int(late.sum())
    ready = np.where(ext_ok & ~late, np.maximum(ready, external), ready)
    weight = np.where(has_pred, node_ts - ready, 0).astype(np.int64)
    external = np.where(ext_ok & ~late, external, -1)
    return weight, external
