"""The job graph of the replay: each rank's critical path DAG, coupled at collectives.

**Per rank** the graph is :func:`hta.analysis.critical_path.build_graph` over the whole
trace (``annotation=""``): a start and an end node per CPU event and GPU work, with its
``cpu``, ``gpu``, ``launch``, ``stream``, ``sync`` and ``event_wait`` edges
(``docs/critical_path.md``).

**Edge delays** (ns, from measured times). For an edge ``u -> v`` the measured delay is
``m(u, v) = ts(v) - ts(u)``. The *binding* edge of ``v`` is the one from its latest
predecessor (ties: the highest node id), the one ``v`` waited for. Its delay is ``m``: the
time ``v`` took after its last dependency was met (a GPU event's duration, host work
between two points of a thread, a launch latency, a gap on a stream, the return of a
synchronize). Every other edge into ``v`` is slack in the trace; its delay is
``min(floor(type), m)``, where ``floor(type)`` is the median of the binding delays of
that edge type on the rank (what a launch, a stream hand-over or a synchronize's return
usually takes there). The minimum keeps the replay of the unchanged trace from putting a
node later than it was measured; the floor is what that dependency costs when a change
makes it the binding one.

**Inferred dependencies** the critical path graph does not have: a synchronizing call
left unresolved waits for the GPU work enqueued before it (:func:`inferred_waits`), a
stream wait left unresolved waits for the work enqueued on the device's other streams
before it (:func:`inferred_event_waits`), and a launch call waits for room in the launch
queue (:func:`queue_edges`).

**Across ranks** the communication kernels of one collective instance (the matching of
:func:`hta.analysis.stragglers.match_collectives`: by process group and sequence number,
else by order) meet at a *barrier* node: an edge of delay 0 from each rank's kernel start
to it, so it is scheduled at the latest start, and an edge from it to each rank's kernel
end with the rank's *transfer* time ``end - latest start`` (measured). The kernel's own
start -> end edge gets the same transfer delay, so a kernel ends ``transfer`` after the
later of its own start and the last rank's start. Instances seen on a single rank, and
ranks whose kernel ended before the latest start (clocks that disagree), are left
uncoupled (counted in ``dropped``).

**Order.** Nodes of all ranks are numbered by (measured time, rank, the rank's own
numbering), barrier nodes after the nodes of their instant, so the numbering is a
topological order; an edge that would go backwards is dropped and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from hta.analysis.critical_path.events import EDGE_TYPES, Cols, Streams
from hta.analysis.critical_path.graph import CriticalPathGraph, build_graph
from hta.analysis.critical_path.sync import UNRESOLVED_SYNC
from hta.analysis.gpu_work import COMM, rank_work_class
from hta.analysis.stragglers import comm_kernels, match_collectives
from hta.analysis.whatif.schedule import edge_offsets, index_ranges
from hta.model.arrays import distinct, last_row_of, sorted_with_order
from hta.model.derived import derived
from hta.model.rules import GPU_KINDS, GPU_WORK_KINDS, KIND_CODE, kind_mask
from hta.model.selection import rank_steps
from hta.model.symbol_masks import symbol_ids, symbol_mask
from hta.model.trace import RankTrace

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: Edge types of the job graph: the critical path's, the collective coupling, the launch
#: queue and the hand-off from the main thread to the others.
JOB_EDGE_TYPES: tuple[str, ...] = (*EDGE_TYPES, "collective", "queue", "thread")
EDGE = {t: i for i, t in enumerate(JOB_EDGE_TYPES)}


@dataclass
class RankGraph:
    """One rank's replay graph: the critical path DAG with measured edge delays.

    Attributes:
        rank: the rank.
        node_ts, node_event, node_is_start: per node, its time (ns), event row and
            whether it is the event's start: those of the critical path graph (whole
            trace) the graph is built on, whose other arrays it does not keep.
        unresolved: the synchronizations that graph could not tie to the GPU work they
            waited for.
        trace: the rank's trace.
        queue_depth: the launch queue's depth inferred from blocked launches (0: none).
        src, dst, type: the edges (the critical path graph's and the inferred waits),
            sorted by ``dst`` then ``src``.
        measured: per edge, ``ts(dst) - ts(src)`` (ns).
        binding: per edge, whether it is its destination's binding edge.
        floor: per edge type code, the median binding delay of that type (ns).
        start_node, end_node: per event row, its start / end node (-1: not a node).
            Node ids (``src``, ``dst``, ``start_node``, ``end_node``) and event rows
            (``node_event``) are int32 where they fit (:func:`index_type`), else int64.
        steps: the rank's ``ProfilerStep`` spans with their ``start_node``/``end_node``.
        step_work: ``(step position, node)``: per step (its position in ``steps``) and
            stream, the end node of the GPU work launched inside the step's span that
            ends last (:func:`step_work_ends`).
    """

    rank: int
    node_ts: np.ndarray
    node_event: np.ndarray
    node_is_start: np.ndarray
    unresolved: int
    trace: RankTrace
    queue_depth: int
    src: np.ndarray
    dst: np.ndarray
    type: np.ndarray
    measured: np.ndarray
    binding: np.ndarray
    floor: np.ndarray
    start_node: np.ndarray
    end_node: np.ndarray
    steps: pd.DataFrame
    step_work: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    inferred: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    #: :func:`comm_slots` of the rank (position 0), made with the graph: where the ranks'
    #: graphs are built on forked workers, the coupling then reads no rank again.
    comm: pd.DataFrame | None = None

    @property
    def num_nodes(self) -> int:
        """Number of nodes (two per event of the graph)."""
        return int(self.node_ts.size)

    @property
    def delay(self) -> np.ndarray:
        """Per edge, the delay of the unchanged replay (module docstring)."""
        out = np.empty(self.measured.size, dtype=np.int64)
        self.delay_into(out)
        return out

    def delay_into(self, out: np.ndarray) -> None:
        """:attr:`delay` written into ``out`` (int64, one per edge): a binding edge keeps
        its measured delay, another takes the lesser of it and its type's floor."""
        np.minimum(self.floor[self.type], self.measured, out=out)
        np.copyto(out, self.measured, where=self.binding)


def event_nodes(n_events: int, node_event: np.ndarray, node_is_start: np.ndarray,
                dtype: Any = np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Per event row, its start node and its end node (-1: not a node), of ``dtype``."""
    start_node = np.full(n_events, -1, dtype=dtype)
    end_node = np.full(n_events, -1, dtype=dtype)
    nodes = np.arange(node_event.size)
    s = node_is_start
    start_node[node_event[s]] = nodes[s]
    end_node[node_event[~s]] = nodes[~s]
    return start_node, end_node


def rank_graph(rt: RankTrace) -> RankGraph:
    """The replay graph of one rank (module docstring)."""
    cp = build_graph(rt, annotation="")
    ts = cp.node_ts
    start_node, end_node = event_nodes(len(rt.events), cp.node_event, cp.node_is_start)
    c = Cols.of(rt)
    w_src, w_dst = inferred_waits(rt, c, cp, end_node)
    q_src, q_dst, depth = queue_edges(c, end_node)
    v_src, v_dst = inferred_event_waits(rt, c, cp, start_node, end_node)
    h_src, h_dst = thread_handoffs(rt, c, cp, start_node)
    src = np.r_[cp.edge_src, w_src, q_src, v_src, h_src]
    dst = np.r_[cp.edge_dst, w_dst, q_dst, v_dst, h_dst]
    typ = np.r_[cp.edge_type, np.full(w_src.size, EDGE["sync"], dtype=np.int8),
                np.full(q_src.size, EDGE["queue"], dtype=np.int8),
                np.full(v_src.size, EDGE["event_wait"], dtype=np.int8),
                np.full(h_src.size, EDGE["thread"], dtype=np.int8)].astype(np.int8)
    # inferred: the waits the trace does not record (the launch queue is a measured limit)
    inferred = np.r_[np.zeros(cp.edge_src.size, dtype=bool), np.ones(w_src.size, dtype=bool),
                     np.zeros(q_src.size, dtype=bool), np.ones(v_src.size, dtype=bool),
                     np.zeros(h_src.size, dtype=bool)]
    o, src, dst = _by_dst_then_src(src, dst, consume=True)
    if o is not None:
        typ, inferred = typ[o], inferred[o]
    if src.size:
        first = np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]
        src, dst, typ, inferred = src[first], dst[first], typ[first], inferred[first]
    measured = ts[dst] - ts[src]
    binding = binding_edges(cp.num_nodes, src, dst, ts)
    floor = binding_medians(measured[binding], typ[binding])
    steps = _steps(rt, start_node, end_node)
    step_work = step_work_ends(c, steps, end_node)
    comm = _comm_slots(rt, start_node, end_node)
    # kept: node ids and event rows in 32 bits where they fit (the graphs of a job's ranks
    # are kept until its job graph is made: on job256 about 100 MB fewer)
    ids = index_type(cp.num_nodes)
    return RankGraph(rank=rt.rank, node_ts=cp.node_ts,
                     node_event=cp.node_event.astype(index_type(len(rt.events))),
                     node_is_start=cp.node_is_start,
                     unresolved=int(cp.dropped.get(UNRESOLVED_SYNC, 0)), trace=rt,
                     queue_depth=depth, src=src.astype(ids), dst=dst.astype(ids),
                     type=typ,
                     measured=measured, binding=binding,
                     floor=floor, start_node=start_node.astype(ids),
                     end_node=end_node.astype(ids), steps=steps,
                     step_work=step_work, inferred=inferred, comm=comm)


def step_completion(jg: JobGraph, i: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step of the rank at position ``i`` under node times ``t``: when it begins (the
    later of its span's start and the previous step's completion) and its completion node
    (global: its span's end node, or the end node of the GPU work it launched that ends
    last, :func:`step_work_ends`, the later). Not the ``ProfilerStep`` span of
    :func:`hta.model.selection.rank_steps` on purpose: the what-if measures a step to its
    completion (the GPU work it launched), which is what a faster kernel changes; the
    spans it starts from are :func:`_steps`, i.e. ``rank_steps``."""
    _, start_nodes, end_nodes, k, work = step_nodes(jg, i)
    start = t[start_nodes].astype(np.int64)
    done_node = end_nodes.copy()
    for j, n in zip(k.tolist(), work.tolist(), strict=True):
        if t[n] > t[done_node[j]]:
            done_node[j] = n
    done = t[done_node].astype(np.int64)
    begin = start.copy()
    begin[1:] = np.maximum(start[1:], done[:-1])
    return begin, done_node


def step_nodes(jg: JobGraph, i: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rank position ``i``'s step numbers, its steps' start and end nodes, and its
    :func:`step_work_ends` (step position, end node), nodes as global ids; int64,
    read-only, kept with the graph."""
    def compute() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        g = jg.ranks[i]
        k, nodes = g.step_work
        out = (g.steps["step"].to_numpy(np.int64).copy(),
               jg.global_node(i, g.steps["start_node"].to_numpy()).astype(np.int64),
               jg.global_node(i, g.steps["end_node"].to_numpy()).astype(np.int64),
               np.asarray(k, dtype=np.int64).copy(),
               jg.global_node(i, nodes).astype(np.int64))
        for a in out:
            a.flags.writeable = False
        return out

    return jg.kept(("step_nodes", i), compute)


def step_work_ends(c: Cols, steps: pd.DataFrame, end_node: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per step (position in ``steps``) and stream, the end node of the GPU work whose
    launch call starts inside the step's span and that ends last: a step is done when its
    span has ended and this work has finished (``c``: the rank's event columns)."""
    empty = np.zeros(0, dtype=np.int64)
    if not len(steps):
        return empty, empty
    gpu = np.flatnonzero(kind_mask(c.codes, GPU_WORK_KINDS) & (c.ic >= 0) & (end_node >= 0))
    if not gpu.size:
        return empty, empty
    launched = c.ts[c.ic[gpu]]
    t0 = steps["ts"].to_numpy(np.int64)
    t1 = steps["end"].to_numpy(np.int64)
    k = np.searchsorted(t0, launched, side="right") - 1
    ok = (k >= 0) & (launched < t1[np.clip(k, 0, None)])
    gpu, k = gpu[ok], k[ok]
    order = np.lexsort((c.end[gpu], c.stream[gpu], k))
    gpu, k, stream = gpu[order], k[order], c.stream[gpu][order]
    last = np.r_[(k[1:] != k[:-1]) | (stream[1:] != stream[:-1]), True] if k.size else k
    return k[last].astype(np.int64), end_node[gpu[last]].astype(np.int64)


def _synchronize_name(name: str) -> bool:
    """A synchronize call's name (``cudaStreamSynchronize``, ``hipDeviceSynchronize`` ...)."""
    return "Synchronize" in name


def _step_name(name: str) -> bool:
    """A ``ProfilerStep#`` annotation's name."""
    return name.startswith("ProfilerStep#")


def inferred_waits(rt: RankTrace, c: Cols, cp: CriticalPathGraph, end_node: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``sync`` edges for the synchronizing calls the critical path graph could not resolve
    (no ``cuda_sync`` record: ``cudaEventSynchronize``, or a stream synchronize whose stream
    is unknown), and for the calls that synchronize the device implicitly (``cudaFree``,
    ``cuMemFree``, ``hipFree``: the caching allocator releasing memory, as
    ``torch.cuda.empty_cache()`` does). Such a call waits at most for all GPU work enqueued
    before it; of that
    work, the one ending last, when it ends inside the call, is taken as what it waited for
    (edge: that work's end -> the call's end). ``c``: the rank's event columns."""
    empty = np.zeros(0, dtype=np.int64)
    has_sync = np.zeros(cp.num_nodes, dtype=bool)
    has_sync[cp.edge_dst[cp.edge_type == EDGE["sync"]]] = True
    from hta.analysis.findings.sync_sites import IMPLICIT_SYNC

    names = symbol_mask(rt.symbols, _synchronize_name)
    frees = symbol_mask(rt.symbols, IMPLICIT_SYNC.search)
    runtime = kind_mask(c.codes, ("runtime_sync", "runtime_other", "runtime_launch"))
    calls = np.flatnonzero((((c.codes == KIND_CODE["runtime_sync"]) & names[c.name])
                            | (runtime & frees[c.name])) & (end_node >= 0))
    calls = calls[~has_sync[end_node[calls]]]
    gpu = np.flatnonzero(kind_mask(c.codes, GPU_WORK_KINDS) & (end_node >= 0))
    if not calls.size or not gpu.size:
        return empty, empty
    enq = np.where(c.ic[gpu] >= 0, c.ts[np.clip(c.ic[gpu], 0, None)], c.ts[gpu])
    o = np.argsort(enq, kind="stable")
    gpu, enq = gpu[o], enq[o]
    ends = c.end[gpu]
    best = np.maximum.accumulate(np.where(ends == np.maximum.accumulate(ends),
                                          np.arange(gpu.size), 0))
    pos = np.searchsorted(enq, c.ts[calls], side="left") - 1
    ok = pos >= 0
    target = np.where(ok, gpu[best[np.clip(pos, 0, None)]], -1)
    t_end = c.end[np.clip(target, 0, None)]
    ok &= (t_end >= c.ts[calls]) & (t_end <= c.end[calls])
    src, dst = end_node[target[ok]], end_node[calls[ok]]
    fwd = src < dst
    return src[fwd], dst[fwd]


def thread_handoffs(rt: RankTrace, c: Cols, cp: CriticalPathGraph, start_node: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``thread`` edges: the main thread hands work to other threads and waits for it.

    The *main thread* is the one holding the ``ProfilerStep`` events; else, of the threads
    with at least a quarter of the most CPU events, the one whose first event comes first
    (the thread that hands work to the others starts before them: the autograd engine's
    thread of a training step may hold more events than the thread that ran the forward
    pass and called ``backward()``). Every top-level CPU event (depth 0) of another thread
    gets an edge from the main thread's latest point (node) before its start: the autograd engine's
    thread runs the backward pass when the main thread calls it, and the first event of a
    thread has no other predecessor (without the edge it would start at the rank's first
    timestamp in the replay, and nothing the main thread does would move it). Back, the
    end of a main-thread event gets an edge from the latest point of the other threads
    before it when the main thread sat in the call while that thread worked: the point
    lies after the main thread's previous point, the main thread's gap before the end is
    at least half the event's duration, and the other thread's top-level event around
    the point started after the main event did (the call that ran the backward pass
    returns when the work it handed over is done)."""
    empty = np.zeros(0, dtype=np.int64)
    cpu_nodes = np.flatnonzero(~kind_mask(c.codes[cp.node_event], GPU_WORK_KINDS))
    if not cpu_nodes.size:
        return empty, empty
    rows = cp.node_event[cpu_nodes]
    thread = c.pid[rows] * np.int64(1 << 32) + c.tid[rows]
    step_ids = symbol_ids(rt.symbols, _step_name)
    is_step = np.isin(c.name[rows], step_ids)
    if is_step.any():
        main = thread[is_step][0]
    else:
        values, which, counts = np.unique(thread, return_inverse=True, return_counts=True)
        first = np.full(values.size, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, which.reshape(-1), c.ts[rows])
        busy = counts * 4 >= counts.max()
        main = values[busy][np.argmin(first[busy])]
    main_nodes = cpu_nodes[thread == main]
    other = (thread != main) & cp.node_is_start[cpu_nodes] & (c.depth[rows] == 0)
    targets = cpu_nodes[other]
    k = np.searchsorted(main_nodes, targets, side="left") - 1
    ok = k >= 0
    src, dst = [main_nodes[k[ok]]], [targets[ok]]
    # back: a main-thread event that ends after other threads worked in its gap waits for
    # the last of that work (the call that ran the backward pass returns when it is done)
    others = cpu_nodes[thread != main]
    if others.size and main_nodes.size > 1:
        ends = main_nodes[1:][~cp.node_is_start[main_nodes[1:]]]
        prev = main_nodes[np.searchsorted(main_nodes, ends, side="left") - 1]
        j = np.searchsorted(others, ends, side="left") - 1
        x = others[np.clip(j, 0, None)]
        e_row = cp.node_event[ends]
        gap = cp.node_ts[ends] - cp.node_ts[prev]
        ok = (j >= 0) & (x > prev) & (2 * gap >= c.dur[e_row])
        ok &= c.ts[_top_level(c, cp.node_event[x])] > c.ts[e_row]
        src.append(x[ok])
        dst.append(ends[ok])
    return np.concatenate(src), np.concatenate(dst)


def _top_level(c: Cols, rows: np.ndarray) -> np.ndarray:
    """The outermost event around each of ``rows`` on its thread (itself at depth 0)."""
    root = rows.copy()
    while True:
        parent = c.parent[root]
        up = parent >= 0
        if not up.any():
            return root
        root[up] = parent[up]


#: Calls that make a stream wait for an event recorded on another (GPU-side waits).
STREAM_WAIT_CALLS = frozenset({"cudaStreamWaitEvent", "hipStreamWaitEvent", "cuStreamWaitEvent"})


def inferred_event_waits(rt: RankTrace, c: Cols, cp: CriticalPathGraph,
                         start_node: np.ndarray, end_node: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """``event_wait`` edges for stream waits the trace leaves unresolved (no record names
    the event): the stream that waits is the one of the first GPU work the calling thread
    launches after the call; the event was recorded before the call, on another stream of
    the device, so it stands for at most the work enqueued there before the call. Of each
    other stream's work enqueued before the call, the one ending last is a candidate when
    it ended by the time the waiting work started; the latest candidate is taken (edge:
    its end -> the waiting work's start)."""
    empty = np.zeros(0, dtype=np.int64)
    wait_ids = symbol_ids(rt.symbols, STREAM_WAIT_CALLS.__contains__)
    if not wait_ids.size:
        return empty, empty
    calls = np.flatnonzero(np.isin(c.name, wait_ids) & (start_node >= 0))
    gpu = np.flatnonzero(kind_mask(c.codes, GPU_WORK_KINDS) & (c.ic >= 0) & (start_node >= 0))
    if not calls.size or not gpu.size:
        return empty, empty
    has_wait = np.zeros(cp.num_nodes, dtype=bool)
    has_wait[cp.edge_dst[cp.edge_type == EDGE["event_wait"]]] = True
    launch = c.ic[gpu]
    thread = c.pid[launch] * np.int64(1 << 32) + c.tid[launch]
    o = np.lexsort((c.ts[launch], thread))
    gpu, launch, thread = gpu[o], launch[o], thread[o]
    c_thread = c.pid[calls] * np.int64(1 << 32) + c.tid[calls]
    # the first launch on the call's thread starting after the call
    key_l = np.stack([thread, c.ts[launch]])
    pos = np.searchsorted(thread, c_thread, side="left")
    hi = np.searchsorted(thread, c_thread, side="right")
    waiting = np.full(calls.size, -1, dtype=np.int64)
    for t in distinct(c_thread).tolist():
        m = c_thread == t
        lo_t, hi_t = int(pos[m][0]), int(hi[m][0])
        j = lo_t + np.searchsorted(key_l[1, lo_t:hi_t], c.ts[calls[m]], side="left")
        ok = j < hi_t
        waiting[np.flatnonzero(m)[ok]] = gpu[j[ok]]
    keep = waiting >= 0
    calls, waiting = calls[keep], waiting[keep]
    keep = ~has_wait[start_node[waiting]]
    calls, waiting = calls[keep], waiting[keep]
    if not calls.size:
        return empty, empty
    streams = Streams(c, np.flatnonzero(kind_mask(c.codes, GPU_WORK_KINDS)))
    w_stream = np.where(c.stream[waiting] >= 0, c.stream[waiting], c.tid[waiting])
    best = np.full(calls.size, -1, dtype=np.int64)
    for dev in distinct(c.pid[waiting]).tolist():
        m = np.flatnonzero(c.pid[waiting] == dev)
        for s in streams.streams_of(dev):
            cand = streams.last_enqueued_before(dev, s, c.ts[calls[m]])
            ok = (cand >= 0) & (w_stream[m] != s)
            ok &= c.end[np.clip(cand, 0, None)] <= c.ts[waiting[m]]
            better = ok & ((best[m] < 0) | (c.end[np.clip(cand, 0, None)]
                                            > c.end[np.clip(best[m], 0, None)]))
            best[m[better]] = cand[better]
    ok = (best >= 0) & (end_node[np.clip(best, 0, None)] >= 0)
    src, dst = end_node[best[ok]], start_node[waiting[ok]]
    fwd = src < dst
    return src[fwd], dst[fwd]


#: Blocked launch calls needed before a launch queue is inferred.
MIN_BLOCKED = 3


def queue_edges(c: Cols, end_node: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``queue`` edges: the launch queue's back-pressure on the host.

    The GPU holds a bounded number ``Q`` of launched, unfinished work items; a launch call
    that finds the queue full returns only when the oldest one finishes. Per device, with
    GPU work in launch order, let ``n(k)`` be the number of items launched before item
    ``k`` and not finished when ``k``'s launch call returns; ``n(k) <= Q - 1``. The depth
    is taken as ``Q = max n(k) + 1`` when at least :data:`MIN_BLOCKED` calls show the
    queue's hold: ``n(k) = Q - 1`` and the item ``Q`` before ended while the call was
    running. Then every launch call's end gets an edge from the end of the item launched
    ``Q`` before it (where that item ended first). Returns ``(src, dst, Q)``; no edges and
    ``Q = 0`` when no call was held. ``c``: the rank's event columns.
    """
    empty = np.zeros(0, dtype=np.int64)
    gpu = np.flatnonzero(kind_mask(c.codes, GPU_WORK_KINDS) & (c.ic >= 0) & (end_node >= 0))
    if gpu.size < 2:
        return empty, empty, 0
    launch = c.ic[gpu]
    keep = (c.codes[launch] == KIND_CODE["runtime_launch"]) & (end_node[launch] >= 0)
    gpu, launch = gpu[keep], launch[keep]
    out_s, out_d, depths = [], [], []
    for dev in distinct(c.pid[gpu]).tolist():
        m = c.pid[gpu] == dev
        g, lch = gpu[m], launch[m]
        o = np.lexsort((c.ts[g], c.ts[lch]))
        g, lch = g[o], lch[o]
        ends, call_ts, call_end = c.end[g], c.ts[lch], c.end[lch]
        # n(k): earlier items still running at the call's end (ends sorted per prefix)
        n = _unfinished_before(ends, call_end)
        q = int(n.max()) + 1 if n.size else 0
        if q < 2 or g.size <= q:
            continue
        k = np.arange(q, g.size)
        older_end = ends[k - q]
        held = (n[k] == q - 1) & (older_end > call_ts[k]) & (older_end <= call_end[k])
        if int(held.sum()) < MIN_BLOCKED:
            continue
        depths.append(q)
        ok = older_end <= call_end[k]
        s_n, d_n = end_node[g[k - q][ok]], end_node[lch[k][ok]]
        fwd = s_n < d_n
        out_s.append(s_n[fwd])
        out_d.append(d_n[fwd])
    if not out_s:
        return empty, empty, 0
    return np.concatenate(out_s), np.concatenate(out_d), int(max(depths))


def _unfinished_before(ends: np.ndarray, at: np.ndarray, window: int = 8) -> np.ndarray:
    """Per k: how many of ``ends[:k]`` are later than ``at[k]``: ``k`` minus the ends at
    or before ``at[k]``, plus those among the next ``window`` items (work launched after a
    call rarely ends before the call returns; beyond the window it is taken not to)."""
    n = ends.size
    done_all = np.searchsorted(np.sort(ends), at, side="right")
    later = np.zeros(n, dtype=np.int64)
    for d in range(window + 1):
        j = np.arange(n) + d
        ok = j < n
        later[ok] += ends[j[ok]] <= at[ok]
    return np.arange(n) - done_all + later


def binding_medians(measured: np.ndarray, typ: np.ndarray) -> np.ndarray:
    """Per edge type (:data:`JOB_EDGE_TYPES`), ``int(np.median(...))`` of the measured
    delays of its edges (``measured``, ``typ``: the binding edges'), 0 for a type
    without any: the edges grouped by type once (a stable sort of the small type codes),
    each type's median of its slice, its values in their order as a mask would give
    them. (:func:`hta.analysis.grouped.group_medians` gives the same medians for any
    keys, by one sort of keys and values: five times slower on a rank's 14,000 binding
    edges of nine types, on a path run once per rank.)"""
    floor = np.zeros(len(JOB_EDGE_TYPES), dtype=np.int64)
    order = np.argsort(typ, kind="stable")
    values = measured[order]
    bounds = np.searchsorted(typ[order], np.arange(len(JOB_EDGE_TYPES) + 1))
    for code in range(len(JOB_EDGE_TYPES)):
        if bounds[code + 1] > bounds[code]:
            floor[code] = int(np.median(values[bounds[code]:bounds[code + 1]]))
    return floor


def binding_edges(n: int, src: np.ndarray, dst: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Per edge (sorted by dst, then src), whether it comes from its destination's latest
    predecessor (ties: the highest node id)."""
    out = np.zeros(src.size, dtype=bool)
    if not src.size:
        return out
    t = ts[src]
    first = np.empty(src.size, dtype=bool)  # an edge that starts its destination's group
    first[0] = True
    np.not_equal(dst[1:], dst[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    latest = np.maximum.reduceat(t, starts)
    group = np.cumsum(first) - 1  # (a repeat by group sizes costs a copy per group)
    cand = np.flatnonzero(t == latest[group])
    # the last candidate of each group (edges are sorted by src within a destination)
    last = np.r_[group[cand][1:] != group[cand][:-1], True]
    out[cand[last]] = True
    return out


def _steps(rt: RankTrace, start_node: np.ndarray, end_node: np.ndarray) -> pd.DataFrame:
    """``ProfilerStep`` spans with the nodes of the step event."""
    steps = rank_steps(rt)
    ts = rt.column("ts")
    t0 = steps["ts"].to_numpy(np.int64)
    t1 = steps["end"].to_numpy(np.int64)
    # per step, the first event (rows in time order) that starts and ends with it and has
    # nodes: the rows starting at its start, then a mask, all steps at once
    lo = np.searchsorted(ts, t0)
    hi = np.searchsorted(ts, t0 + 1)
    rows = index_ranges(lo, hi)
    owner = np.repeat(np.arange(t0.size), hi - lo)
    ok = (rt.column("end")[rows] == t1[owner]) & (start_node[rows] >= 0)
    firsts, at = np.unique(owner[ok], return_index=True)
    event = np.full(t0.size, -1, dtype=np.int64)
    event[firsts] = rows[ok][at]
    found = event >= 0
    start = np.where(found, start_node[event], -1).astype(np.int64)
    done = np.where(found, end_node[event], -1).astype(np.int64)
    # one frame of the found steps (a frame's assign, then its filter, cost a copy each)
    return pd.DataFrame({**{c: steps[c].to_numpy()[found] for c in steps.columns},
                         "start_node": start[found], "end_node": done[found]})


@dataclass
class JobGraph:
    """All ranks' replay graphs in one DAG, coupled at collectives (module docstring).

    Per global node: ``node_pos`` (position in :attr:`ranks`, -1 for barriers),
    ``node_row`` (the event's row on its rank, -1 for barriers; both int32 where they
    fit), ``node_is_start``,
    ``node_ts`` (measured, ns). Per edge (sorted by ``dst``): ``src``, ``dst``, ``type``
    (index into :data:`JOB_EDGE_TYPES`), ``delay`` (the unchanged replay's), ``binding``.
    ``base`` per node: where a node without predecessors starts (its rank's first
    timestamp). ``collectives``: one row per matched communication kernel (the straggler
    matching's columns, its ``barrier`` node, ``transfer_ns``, ``coupled``).
    """

    ranks: list[RankGraph]
    offsets: np.ndarray
    node_pos: np.ndarray
    node_row: np.ndarray
    node_is_start: np.ndarray
    node_ts: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    type: np.ndarray
    delay: np.ndarray
    binding: np.ndarray
    base: np.ndarray
    collectives: pd.DataFrame
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        """Nodes of every rank plus the barrier nodes."""
        return int(self.node_ts.size)

    @property
    def node_rank(self) -> np.ndarray:
        """Per node, its rank (-1 for barriers)."""
        ranks = np.asarray([g.rank for g in self.ranks] + [-1], dtype=np.int64)
        return ranks[self.node_pos]

    def rank_index(self, rank: int) -> int:
        """Position of ``rank`` in :attr:`ranks`."""
        for i, g in enumerate(self.ranks):
            if g.rank == rank:
                return i
        raise KeyError(rank)

    def global_node(self, i: int, local: np.ndarray) -> np.ndarray:
        """Global ids of rank position ``i``'s local nodes."""
        return self.order_of[self.offsets[i] + np.asarray(local, dtype=np.int64)]

    def nodes_of(self, i: int) -> np.ndarray:
        """Rank position ``i``'s global node ids, ascending (``flatnonzero(node_pos ==
        i)``): the slice of :attr:`order_of` of its local nodes, which :func:`job_graph`
        numbers in time order as the rank does (a read-only view)."""
        mine = self.order_of[self.offsets[i]:self.offsets[i + 1]]
        mine.flags.writeable = False
        return mine

    def edges_into(self, i: int, edge_type: str) -> np.ndarray:
        """Indices of the ``edge_type`` edges whose ``dst`` is on rank position ``i``,
        ascending: the ranges of the edge offsets of its nodes (:meth:`nodes_of`), read
        for that rank alone (a grouping of the job's edges would cost each forked
        prediction a pass over all of them)."""
        nodes = self.nodes_of(i)
        indptr = self.edge_offsets()
        edges = index_ranges(indptr[nodes], indptr[nodes + 1])
        return edges[self.type[edges] == EDGE[edge_type]]

    def edges_into_nodes(self, nodes: np.ndarray, *edge_types: str) -> np.ndarray:
        """Indices of the edges of ``edge_types`` into ``nodes`` (global ids), ascending:
        ranges of the edges' ``dst`` order (each node's, from :meth:`edge_offsets`), not
        a pass over every edge of their ranks."""
        nodes = distinct(np.asarray(nodes, dtype=np.int64))
        indptr = self.edge_offsets()
        edges = index_ranges(indptr[nodes], indptr[nodes + 1])
        types = [EDGE[t] for t in edge_types]
        return edges[self.type[edges] == types[0] if len(types) == 1 else
                     np.isin(self.type[edges], types)]

    def edges_from(self, i: int, edge_type: str) -> np.ndarray:
        """Indices of the ``edge_type`` edges whose ``src`` is on rank position ``i``,
        ascending."""
        members, bounds = self._grouped_by_src(edge_type)
        return members[bounds[i]:bounds[i + 1]]

    def edge_offsets(self) -> np.ndarray:
        """:func:`~.schedule.edge_offsets` of the graph's edges (checked once, kept): what
        every replay that keeps the edges as they are schedules them with."""
        return self.kept("edge_offsets", lambda: edge_offsets(self.num_nodes, self.src,
                                                              self.dst))

    def kept(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, computed on the first call for ``key`` and kept with the graph
        (what every change reads of it: the graph is never changed in place)."""
        if key not in self._kept:
            self._kept[key] = compute()
        return self._kept[key]

    def _grouped_by_src(self, edge_type: str) -> tuple[np.ndarray, np.ndarray]:
        """The edges of one type by the rank position of their ``src``: the ids grouped by
        position (ascending within a group) and each position's bounds in them; computed
        on first use and kept (the edges are sorted by ``dst``, so a rank's sources are no
        ranges of them)."""
        got = self._groups.get(edge_type)
        if got is None:
            members = np.flatnonzero(self.type == EDGE[edge_type])
            pos = self.node_pos[self.src[members]]
            # positions fit 16 bits on most jobs: numpy sorts those stably by radix
            small = len(self.ranks) < np.iinfo(np.int16).max
            order = np.argsort(pos.astype(np.int16) if small else pos, kind="stable")
            bounds = np.searchsorted(pos[order], np.arange(len(self.ranks) + 1))
            members = members[order]
            members.flags.writeable = False  # handed out as views: no caller changes them
            got = self._groups[edge_type] = (members, bounds)
        return got

    order_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _groups: dict[str, tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _kept: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False,
                                       compare=False)


def job_graph(ranks: list[RankGraph], instances: pd.DataFrame | None = None) -> JobGraph:
    """Join the ranks' graphs and couple their collectives (module docstring).

    ``instances``: the coupling decided elsewhere (:func:`match_slots`' rows of these
    ranks, ``_pos`` their position here): each instance's barrier is then a node without
    predecessors, whose time a replay gives as its ``base`` (:mod:`.coupled`: one rank's
    graph, coupled to the other ranks through the barriers' times alone)."""
    dropped: dict[str, int] = {}
    sizes = np.asarray([g.num_nodes for g in ranks], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if instances is None:
        coupling = _coupling(ranks, offsets, dropped)
    elif len(instances):
        coupling = _barriers(instances, ranks, offsets, external=True)
    else:
        empty = np.zeros(0, dtype=np.int64)
        coupling = (instances, empty, empty, empty, empty, [None] * len(ranks))
    coll, b_ts, b_src, b_dst, b_delay, transfer_of = coupling
    n_bar = b_ts.size

    # A second thread joins the columns that do not depend on the node order, then makes
    # the nodes' columns, while this one sorts: NumPy lets go of the interpreter in its
    # loops, and a large job graph is mostly such loops and new pages (about 25 % less
    # wall time on job256; the same arrays, whichever thread makes them).
    with ThreadPoolExecutor(max_workers=1) as other:
        typ_later = other.submit(_joined, [g.type for g in ranks],
                                 np.full(b_src.size, EDGE["collective"], np.int8))
        delay_later = other.submit(_job_delays, ranks, transfer_of, b_delay)
        bind_later = other.submit(_joined, [g.binding for g in ranks],
                                  np.zeros(b_src.size, dtype=bool))
        all_ts = _joined([g.node_ts for g in ranks], b_ts)
        # each rank's nodes are in time order already: a stable sort by time keeps them
        # so, interleaves the ranks by rank at equal times, and puts barriers last at
        # their instant
        identity = len(ranks) <= 1 and not n_bar
        order, ts_sorted = (np.arange(all_ts.size), all_ts) if identity else \
            sorted_with_order(all_ts, consume=True)
        del all_ts  # (given up to the sort: the times come sorted, ts_sorted)
        pos = order if identity else _inverse(order)
        src_later = other.submit(_job_node_ids, [g.src for g in ranks], b_src, offsets,
                                 pos)
        nodes = other.submit(_node_columns, ranks, pos, offsets)
        e_dst = _job_node_ids([g.dst for g in ranks], b_dst, offsets, pos)
        e_src, e_dst, take = _edges_in_order(src_later.result(), e_dst, dropped)
        e_typ, e_delay, e_bind = typ_later.result(), delay_later.result(), bind_later.result()
        if take is not None:  # (the sources and destinations came sorted)
            delays = other.submit(np.take, e_delay, take)
            e_typ, e_bind = np.take(e_typ, take), np.take(e_bind, take)
            e_delay = delays.result()
        node_pos, node_row, node_is_start = nodes.result()
    first = np.asarray([int(g.node_ts.min()) if g.num_nodes else 0 for g in ranks],
                       dtype=np.int64)
    if dropped:
        logger.info("what-if job graph: %s", "; ".join(f"{v} {k}" for k, v in dropped.items()))
    node_ts = ts_sorted
    # a rank's nodes start from its first timestamp, a barrier from its own time
    base = np.r_[first, 0][node_pos]
    barrier = node_pos < 0
    base[barrier] = node_ts[barrier]
    jg = JobGraph(
        ranks=ranks, offsets=offsets, node_pos=node_pos, node_row=node_row,
        node_is_start=node_is_start, node_ts=node_ts, src=e_src, dst=e_dst, type=e_typ,
        delay=e_delay, binding=e_bind, base=base, collectives=coll, dropped=dropped)
    jg.order_of = pos
    return jg


def _joined(parts: list[np.ndarray], barrier: np.ndarray) -> np.ndarray:
    """The ranks' arrays, then the barriers', in one array."""
    return np.concatenate([*parts, barrier])


def _edges_in_order(e_src: np.ndarray, e_dst: np.ndarray, dropped: dict[str, int]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The job graph's edges (global node ids) without those against the time order
    (counted in ``dropped``), sorted by (dst, src): their sources and destinations, and
    the positions that put the other edge columns in that order (None: as they are)."""
    fwd = e_src < e_dst
    keep = None
    if not fwd.all():
        dropped["collective edges against the time order"] = int((~fwd).sum())
        keep = np.flatnonzero(fwd)
    del fwd
    o, e_src, e_dst = _by_dst_then_src(e_src if keep is None else e_src[keep],
                                       e_dst if keep is None else e_dst[keep], consume=True)
    return e_src, e_dst, keep if o is None else (o if keep is None else keep[o])


def _node_columns(graphs: list[RankGraph], pos: np.ndarray, offsets: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node of the job graph of ``graphs`` (``pos``: a rank's node's place in time
    order): its rank position (-1 for a barrier: the barriers come after the ranks),
    event row (-1 for a barrier), both in 32 bits where they fit (each array is of the
    job's size), and whether it is its event's start."""
    rows = max((int(g.node_event.max()) + 1 for g in graphs if g.node_event.size), default=0)
    return (_placed(list(range(len(graphs))), -1, pos, offsets, index_type(len(graphs))),
            _placed([g.node_event for g in graphs], -1, pos, offsets, index_type(rows)),
            _placed([g.node_is_start for g in graphs], False, pos, offsets, bool))


def _job_delays(graphs: list[RankGraph], transfer_of: list[Any], barrier: np.ndarray
                ) -> np.ndarray:
    """The rank graphs' edge delays (:attr:`RankGraph.delay`), then the barriers', in one
    array written rank by rank (no array of each rank's delays kept until they are
    joined); a coupled kernel's own start -> end edge takes its transfer time
    (``transfer_of[i]``: the rank's coupled end nodes, sorted, and their transfer times,
    or None)."""
    out = np.empty(sum(g.src.size for g in graphs) + barrier.size, dtype=np.int64)
    at = 0
    for g, tr in zip(graphs, transfer_of, strict=True):
        part = out[at:at + g.src.size]
        g.delay_into(part)
        if tr is not None:
            ends, transfer = tr
            hit = np.isin(g.dst, ends) & (g.type == EDGE["gpu"])
            part[hit] = transfer[np.searchsorted(ends, g.dst[hit])]
        at += g.src.size
    out[at:] = barrier
    return out


def index_type(count: int) -> type:
    """int32 for indices below ``count`` when it fits 32 bits (half the memory of int64:
    the rank graphs' node ids and event rows, the job graph's per-node positions and
    rows), else int64."""
    return np.int32 if count < np.iinfo(np.int32).max else np.int64


def _inverse(order: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """The inverse permutation of ``order`` (``pos[order] = arange``), the positions
    written a chunk at a time (no second array of the job's size)."""
    pos = np.empty(order.size, dtype=np.int64)
    for at in range(0, order.size, chunk):
        pos[order[at:at + chunk]] = np.arange(at, min(at + chunk, order.size))
    return pos


def _placed(parts: list[np.ndarray] | list[int], barrier: np.ndarray | int,
            pos: np.ndarray, offsets: np.ndarray, dtype: Any) -> np.ndarray:
    """The ranks' node values (``parts``, each rank's ``offsets`` apart, then the
    barriers'; a part may be one value for all its nodes) in the job graph's node order
    (``pos``: a node's place in time order), each rank's written at its nodes' places:
    the concatenation then a gather by the time order, without the concatenated array of
    the job's size."""
    out = np.empty(pos.size, dtype=dtype)
    for i, part in enumerate(parts):
        out[pos[offsets[i]:offsets[i + 1]]] = part
    out[pos[offsets[-1]:]] = barrier
    return out


def _job_node_ids(local: list[np.ndarray], barrier: np.ndarray, offsets: np.ndarray,
                  pos: np.ndarray) -> np.ndarray:
    """The ranks' local node ids (each rank's ``offsets`` apart, then the barriers' global
    ids) as ids of the job graph (``pos``: a node's place in time order), looked up rank
    by rank in its slice of ``pos`` straight into one array of the job's size (each new
    one costs its pages)."""
    ids = np.empty(sum(a.size for a in local) + barrier.size, dtype=np.int64)
    at = 0
    for i, rank_ids in enumerate(local):
        ids[at:at + rank_ids.size] = pos[offsets[i]:offsets[i + 1]][rank_ids]
        at += rank_ids.size
    ids[at:] = pos[barrier]
    return ids


def _by_dst_then_src(src: np.ndarray, dst: np.ndarray, consume: bool = False
                     ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The order sorting edges by ``dst``, then ``src``, ties in position order (a stable
    sort; None when they are sorted), and ``src`` and ``dst`` in that order. One sort by
    ``dst`` alone (its values fit a packed sort with the positions, which gives them
    sorted too, :func:`~hta.model.arrays.sorted_with_order`), then the edges of the few
    destinations whose sources came out of order (edges added after a rank's own: the
    collectives' barrier edges) sorted again among themselves: within a destination, so
    the sorted ``dst`` stays as it is. ``consume``: ``dst`` is the caller's to lose (the
    sort may take it in place: one array of the edges' size fewer)."""
    if dst.size < 2:
        return None, src, dst
    step = dst[1:] >= dst[:-1]
    if step.all():
        step &= (dst[1:] > dst[:-1]) | (src[1:] > src[:-1])
        if step.all():
            return None, src, dst
    del step
    order, d = sorted_with_order(dst, consume=consume)
    del dst  # (given up to the sort when consumed: read d from here)
    s = src[order]
    wrong = np.flatnonzero((d[1:] == d[:-1]) & (s[1:] < s[:-1]))
    if wrong.size:
        starts = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
        groups = distinct(np.searchsorted(starts, wrong, side="right") - 1)
        at = index_ranges(starts[groups], np.r_[starts, d.size][groups + 1])
        sub = order[at]  # whole groups, ascending: each sorted by source, then position
        order[at] = sub[np.lexsort((sub, s[at], d[at]))]
        s[at] = src[order[at]]
    return order, s, d


def comm_slots(g: RankGraph, pos: int = 0) -> pd.DataFrame:
    """One rank's communication kernels (:func:`~hta.analysis.stragglers.comm_kernels`)
    with their event row ``_row``, the rank's position ``_pos`` and their local start /
    end nodes ``_s`` / ``_e`` (-1: not a node): what the coupling needs of a rank."""
    k = g.comm if g.comm is not None else _comm_slots(g.trace, g.start_node, g.end_node)
    return k if pos == 0 else k.assign(_pos=np.full(len(k), pos, dtype=np.int64))


def _comm_slots(rt: RankTrace, start_node: np.ndarray, end_node: np.ndarray
                ) -> pd.DataFrame:
    k = comm_kernels(rt)
    rows = np.flatnonzero(rank_work_class(rt) == COMM)
    extra = {"_row": rows, "_pos": np.zeros(rows.size, dtype=np.int64),
             "_s": start_node[rows].astype(np.int64),
             "_e": end_node[rows].astype(np.int64)}
    return pd.concat([k, pd.DataFrame(extra, index=k.index)], axis=1)


def match_slots(frames: list[pd.DataFrame], dropped: dict[str, int] | None = None,
                positions: list[int] | None = None) -> pd.DataFrame:
    """The coupled collective kernels of the ranks' :func:`comm_slots` (two ranks or more
    with communication kernels): one row per kernel of an instance with two participants
    or more and with nodes, the straggler matching's columns plus ``_pos``, ``_s``,
    ``_e``, ``inst`` (the instance's barrier number, 0 ..), ``latest_ns`` (its last
    rank's start), ``transfer_ns`` (``end - latest``) and ``coupled`` (transfer >= 0).
    Instances are numbered by collective id; barriers are ordered by (``latest_ns``,
    ``inst``). Empty without two frames. ``positions``: each frame's rank position, set
    as its ``_pos`` here (one column of the joined frame, not a copy of each frame);
    None: the frames carry it."""
    if positions is not None:
        positions = [p for p, f in zip(positions, frames, strict=True) if len(f)]
    frames = [f for f in frames if len(f)]
    if len(frames) < 2:
        return pd.DataFrame()
    kernels = pd.concat(frames, ignore_index=True)
    if positions is not None:
        kernels["_pos"] = np.repeat(np.asarray(positions, dtype=np.int64),
                                    [len(f) for f in frames])
    arr = match_collectives(kernels.drop(columns=["_row", "_pos", "_s", "_e"]))
    arr = arr[arr["participants"] >= 2]
    if not len(arr):
        return arr
    # each matched kernel's own row (the last of a repeated rank, start and end)
    key = ("rank", "start_ns", "end_ns")
    row = last_row_of(tuple(kernels[c].to_numpy(np.int64) for c in key),
                      tuple(arr[c].to_numpy(np.int64) for c in key))
    arr = arr.assign(**{c: kernels[c].to_numpy(np.int64)[row] for c in ("_pos", "_s", "_e")})
    arr = arr[(arr["_s"] >= 0) & (arr["_e"] >= 0)]
    _, inst = np.unique(arr["collective"].to_numpy(), return_inverse=True)
    start = arr["start_ns"].to_numpy(np.int64)
    latest = np.full(int(inst.max()) + 1 if inst.size else 0, np.iinfo(np.int64).min,
                     dtype=np.int64)
    np.maximum.at(latest, inst, start)
    transfer = arr["end_ns"].to_numpy(np.int64) - latest[inst]
    ok = transfer >= 0
    if (~ok).any() and dropped is not None:
        dropped["collective kernels ending before the last rank started"] = int((~ok).sum())
    return arr.assign(inst=inst.astype(np.int64), latest_ns=latest[inst],
                      transfer_ns=transfer, coupled=ok)


def _coupling(ranks: list[RankGraph], offsets: np.ndarray, dropped: dict[str, int]):
    """Barrier nodes and edges of the collective instances with two or more ranks.

    Returns ``(instances, barrier ts, edge src, edge dst, edge delay, per rank (sorted end
    nodes, transfer) or None)``; edge endpoints are pre-order ids (rank offset + local id,
    barriers after every rank's nodes).
    """
    empty = np.zeros(0, dtype=np.int64)
    none: list = [None] * len(ranks)
    arr = match_slots([comm_slots(g) for g in ranks], dropped, list(range(len(ranks))))
    if not len(arr):
        return arr, empty, empty, empty, empty, none
    return _barriers(arr, ranks, offsets, external=False)


def _barriers(arr: pd.DataFrame, ranks: list[RankGraph], offsets: np.ndarray,
              external: bool):
    """:func:`_coupling`'s answer for the kernels ``arr`` (:func:`match_slots`' rows of
    the ranks in ``ranks``). ``external``: the barriers are sources (their time is given
    at replay, :mod:`.coupled`), so only their edges to the kernels' ends are made, and
    the barriers are the instances of ``arr`` alone, renumbered in order."""
    n_real = int(offsets[-1])
    inst = arr["inst"].to_numpy(np.int64)
    if external:
        ids, inst = np.unique(inst, return_inverse=True)
        latest = np.zeros(ids.size, dtype=np.int64)
        latest[inst] = arr["latest_ns"].to_numpy(np.int64)
    else:
        latest = np.zeros(int(inst.max()) + 1, dtype=np.int64)
        latest[inst] = arr["latest_ns"].to_numpy(np.int64)
    transfer = arr["transfer_ns"].to_numpy(np.int64)
    ok = arr["coupled"].to_numpy(bool)
    pos_arr = arr["_pos"].to_numpy(np.int64)
    e_arr = arr["_e"].to_numpy(np.int64)
    g_start = offsets[pos_arr] + arr["_s"].to_numpy(np.int64)
    g_end = offsets[pos_arr] + e_arr
    barrier = n_real + inst
    if external:
        b_src, b_dst, b_delay = barrier[ok], g_end[ok], transfer[ok]
    else:
        b_src = np.r_[g_start, barrier[ok]]
        b_dst = np.r_[barrier, g_end[ok]]
        b_delay = np.r_[np.zeros(g_start.size, dtype=np.int64), transfer[ok]]
    per_rank: list = [None] * len(ranks)
    for i in range(len(ranks)):
        m = (pos_arr == i) & ok
        if m.any():
            o = np.argsort(e_arr[m])
            per_rank[i] = (e_arr[m][o], transfer[m][o])
    inst_frame = arr.assign(barrier=barrier).drop(columns=["_s", "_e"])
    return inst_frame, latest, b_src, b_dst, b_delay.astype(np.int64), per_rank


def driving_nodes(jg: JobGraph, i: int, nodes: np.ndarray) -> np.ndarray:
    """Of ``nodes`` (of rank position ``i``), those of the GPU work and of the CPU
    threads that launch it: a background thread (a logger blocked in ``_recv`` for the
    whole trace) neither starts nor ends a pass without steps. All of them when that
    leaves none."""
    rt = jg.ranks[i].trace
    keep = derived(rt, "whatif.driving_rows", lambda: _driving_rows(rt))
    rows = jg.node_row[nodes]
    kept = nodes[(rows >= 0) & keep[np.clip(rows, 0, None)]]
    return kept if kept.size else nodes


def _driving_rows(rt: RankTrace) -> np.ndarray:
    """Per event row: GPU work, or an event on a thread that launches GPU work."""
    ev = rt.events
    codes = rt.kind_codes()
    gpu = kind_mask(codes, GPU_KINDS)
    tid, pid = rt.column("tid"), rt.column("pid")
    launch = codes == KIND_CODE["runtime_launch"]
    if not launch.any():
        return np.ones(len(ev), dtype=bool)
    launching = pd.MultiIndex.from_arrays([pid[launch], tid[launch]]).unique()
    mine = np.asarray(pd.MultiIndex.from_arrays([pid, tid]).isin(launching), dtype=bool)
    keep = gpu | mine
    keep.setflags(write=False)
    return keep
