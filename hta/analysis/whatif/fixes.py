"""Changes that model what the findings' advice does (:mod:`.changes` has the syntax).

``no-sync:SITE``
    One site of blocking calls is removed: the blocking calls (:func:`hta.analysis.
    findings.sync.blocking_rows`: synchronizes, blocking or pageable copies, ``cudaFree``)
    whose site operator (the outermost operator around the call, as ``host_sync`` names
    it: ``aten::item``; ``outside any operator`` for a bare call) or whose own name matches
    ``SITE`` whole (a regular expression) no longer wait for the GPU: their ``sync``
    edges go and the host time up to the call's end becomes the rank's usual CPU step
    (the ``cpu`` floor) when that is shorter. ``no-host-sync`` does this for every site.
``pinned-copies``
    Copies from or to pageable host memory (named ``Pageable``) run at the bandwidth of
    the rank's pinned copies of the same direction (the ``pageable_copies`` finding's
    reference: their achieved bandwidth, else 12 GB/s), at least 2 µs, and the call that
    launched each copy no longer blocks the host (as ``no-sync`` does for it).
``workers:N``
    The data loader runs in ``N`` worker processes: the work of each data-loader span of
    the main thread (its measured time ``D``) is done by the workers while the loop runs,
    so the main thread waits ``max(0, D / N - R)`` for the batch, ``R`` being the rest of
    the loop's period (the time from the span's end to the next span's start; for the
    last span the median of the others, else 0), plus the rank's usual CPU step for
    receiving it. ``no-data-loader`` is the limit of many workers (the spans take 0).
``cuda-graphs``
    The step's GPU work is captured and replayed as a CUDA graph: its kernels stay as
    they ran, their launch and dispatch cost goes. Launch calls take no host time and the
    launch queue no longer holds the host; a kernel launched inside a ``ProfilerStep`` no
    longer waits for its own launch but for the graph's: the rank's usual launch latency
    after the later of the step's start and the end of the last host work a graph cannot
    capture before its launch on its thread (a data-loader span, a blocking call: the
    graph is replayed once the batch is there), and at least :data:`GRAPH_NODE_NS` (1 µs)
    after the kernel before it on its stream (the per-node cost of a replayed graph; less
    where the trace shows less). The host time inside the operators that launch GPU work
    (their dispatch, from their start to their end on the thread) becomes 0. Python
    between operators, data loading and host waits for the GPU stay; outside steps a
    kernel keeps its launch edge, and so does a kernel a graph launch already replays.
    The host time inside one-time costs (first calls, set-up, the cold calls of one
    pass) stays: a graph is captured after warm-up (:func:`keep_one_time`).
``fused-optimizer``
    The optimizer's many small kernels become the fused optimizer's: the kernels launched
    inside an ``Optimizer.step#...`` span keep their execution time (the same bytes to
    read and write) but are all submitted at the span's start (the rank's usual launch
    latency after it), run one after another on their streams (at least
    :data:`GRAPH_NODE_NS` apart, less where the trace shows less), and the host time of
    their launch calls and of the operators that launch them goes. An upper bound of
    what fusing saves in launches and gaps; the per-kernel cost inside a small kernel
    stays.
``dtype:bf16``, ``dtype:fp16``, ``dtype:tf32``
    fp32 GEMM and convolution kernels (the ``fp32_gemm`` finding's names,
    :func:`hta.analysis.findings.kernel_common.fp32_matrix`) run at the part's rate for
    that type: their time is multiplied by ``peak(fp32) / peak(type)`` from the peak
    table (:mod:`hta.model.devices`; the matrix rates where the part has them, the table's
    fallbacks where it lacks the type, so ``tf32`` on a V100 changes nothing); for
    ``bf16`` and ``fp16`` elementwise kernels on ``float`` (by name) take half their time
    (they move half the bytes). The part comes from the trace's ``deviceProperties``; a
    trace that names no part the table knows cannot be modelled (ValueError). The bound
    of the range (:mod:`.findings`) takes the GEMMs and convolutions at half their time
    too (memory-bound kernels gain what the bytes gain).
"""

from __future__ import annotations

import re

import numpy as np

from hta.analysis.findings.optimizer import OPTIMIZER_STEP
from hta.analysis.whatif.changes import (
    Change,
    Edits,
    EndScales,
    _gpu_rows,
    _zero_cpu_inside,
    cap_handoffs,
    cpu_edges_within,
    register,
)
from hta.analysis.whatif.graph import EDGE, JobGraph
from hta.model.arrays import distinct, union
from hta.model.rules import KIND_CODE, RuleSet, codes_in
from hta.model.trace import RankTrace, thread_keys

#: Elementwise kernels on fp32 data, by name (PyTorch's ``elementwise_kernel`` and
#: ``vectorized_elementwise_kernel`` instantiated on ``float``).
FP32_ELEMENTWISE = re.compile(r"elementwise_kernel.*\bfloat\b")
#: Launches of a captured graph: their kernels are graphed already.
GRAPH_LAUNCH = re.compile(r"^(cuda|hip|cu)GraphLaunch")
#: The least time between two kernels of a replayed CUDA graph on one stream (ns).
GRAPH_NODE_NS = 1_000
_CPU_OP = KIND_CODE["cpu_op"]
_LAUNCH = KIND_CODE["runtime_launch"]


def _thread(ev_pid: np.ndarray, ev_tid: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return thread_keys(ev_pid[rows], ev_tid[rows])


def unblock(jg: JobGraph, edits: Edits, i: int, rows: np.ndarray) -> None:
    """The calls of ``rows`` (rank position ``i``) no longer wait for the GPU: what
    :func:`~.changes.unblock_nodes` does to their end nodes, reading only the edges into
    those nodes (a rank at a time stays linear in the job's size)."""
    g = jg.ranks[i]
    local = g.end_node[rows]
    local = local[local >= 0]
    if local.size:
        nodes = jg.global_node(i, local)
        edits.keep[jg.edges_into_nodes(nodes, "sync")] = False
        cpu = jg.edges_into_nodes(nodes, "cpu")
        edits.delay[cpu] = np.minimum(edits.delay[cpu], float(g.floor[EDGE["cpu"]]))


def submit_at(jg: JobGraph, edits: Edits, i: int, launch_edges: np.ndarray,
              release: np.ndarray) -> None:
    """GPU work submitted ahead (a CUDA graph, a fused launch): each kernel of
    ``launch_edges`` (rank position ``i``) waits for ``release`` (global nodes, one per
    edge), the rank's usual launch latency, instead of its own launch call, and starts at
    least :data:`GRAPH_NODE_NS` after the work before it on its stream (less where the
    trace shows less)."""
    g = jg.ranks[i]
    kernels = jg.dst[launch_edges]
    edits.keep[launch_edges] = False
    edits.add_src.append(release)
    edits.add_dst.append(kernels)
    edits.add_delay.append(np.full(kernels.size, float(g.floor[EDGE["launch"]])))
    stream = jg.edges_into_nodes(kernels, "stream")
    measured = (jg.node_ts[jg.dst[stream]] - jg.node_ts[jg.src[stream]]).astype(np.float64)
    edits.delay[stream] = np.maximum(edits.delay[stream],
                                     np.minimum(GRAPH_NODE_NS, measured))


# -- no-sync:SITE -----------------------------------------------------------------------------
def sync_site_rows(jg: JobGraph, i: int, site: str) -> np.ndarray:
    """Rank position ``i``'s blocking calls whose site operator or own name matches
    ``site`` whole (module docstring)."""
    from hta.analysis.findings.sync import blocking_rows, blocking_sites

    rt = jg.ranks[i].trace
    rows = np.asarray(blocking_rows(rt))
    if not rows.size:
        return rows
    sites = blocking_sites(rt)
    names = rt.column("name")
    pattern = re.compile(site)
    lut: dict[int, bool] = {}

    def hit(name_id: int) -> bool:
        if name_id not in lut:
            lut[name_id] = pattern.fullmatch(rt.symbols[name_id]) is not None
        return lut[name_id]

    bare = pattern.fullmatch("outside any operator") is not None
    keep = np.array([(hit(int(names[op])) if op >= 0 else bare) or hit(int(names[r]))
                     for r, op in zip(rows.tolist(), sites.op.tolist(), strict=True)],
                    dtype=bool)
    return rows[keep]


def _no_sync(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    for i in range(len(jg.ranks)):
        rows = sync_site_rows(jg, i, ch.pattern)
        if rows.size:
            unblock(jg, edits, i, rows)


# -- pinned-copies ----------------------------------------------------------------------------
def _pinned_copies(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    from hta.analysis.findings.base import link
    from hta.analysis.findings.copies import pageable_as_pinned

    scales = EndScales(jg)
    for i, g in enumerate(jg.ranks):
        rows, fast = pageable_as_pinned(g.trace)
        if not rows.size:
            continue
        dur = g.trace.events["dur"].to_numpy()[rows].astype(np.float64)
        scales.add(i, rows, np.where(dur > 0, fast / np.where(dur > 0, dur, 1.0), 1.0))
        calls = link(g.trace, "index_correlation")[rows]
        calls = calls[calls >= 0]
        unblock(jg, edits, i, union(calls, _syncs_beside(g.trace, calls)))
    scales.apply(edits)  # the copies' own edges: no blocking call's edge is among them


def _syncs_beside(rt: RankTrace, calls: np.ndarray) -> np.ndarray:
    """The synchronising call (``runtime_sync``, not a stream wait) that comes right after
    each copy call of ``calls`` on its thread (the next runtime call, under the same
    operator): the stream synchronize of a ``tensor.to(device)`` from pageable memory,
    which waits for that copy alone and which ``non_blocking=True`` from pinned memory
    drops with the copy's own wait. A synchronize after other work was launched waits
    for that work too (a read-back the host needs) and stays."""
    from hta.analysis.findings.base import link
    from hta.analysis.findings.rule_tools import name_matches
    from hta.analysis.findings.sync import STREAM_WAIT
    from hta.model.rules import RUNTIME_KINDS, kind_mask

    codes = rt.kind_codes()
    runtime = np.flatnonzero(kind_mask(codes, RUNTIME_KINDS))
    if not calls.size or not runtime.size:
        return np.zeros(0, dtype=np.int64)
    thread = rt.column("pid") * (1 << 32) + rt.column("tid")
    parent = link(rt, "parent")
    out = []
    for t in distinct(thread[calls]).tolist():
        mine = runtime[thread[runtime] == t]  # by start: the events table is sorted
        pos = np.searchsorted(mine, calls[thread[calls] == t], side="right")
        ok = pos < mine.size
        nxt = mine[pos[ok]]
        same = parent[nxt] == parent[calls[thread[calls] == t][ok]]
        out.append(nxt[same & (codes[nxt] == KIND_CODE["runtime_sync"])])
    found = distinct(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)
    return found[~name_matches(rt, found, STREAM_WAIT)]


# -- workers:N --------------------------------------------------------------------------------
def outermost(rt_parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``rows`` without those that have an ancestor among them."""
    inside = np.zeros(rt_parent.size, dtype=bool)
    inside[rows] = True
    keep = np.ones(rows.size, dtype=bool)
    cur = rt_parent[rows]
    for _ in range(4096):
        live = cur >= 0
        if not live.any():
            break
        keep &= ~(live & inside[np.where(live, cur, 0)])
        cur = np.where(live, rt_parent[np.where(live, cur, 0)], -1)
    return rows[keep]


def _workers(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    from hta.analysis.findings.base import link
    from hta.analysis.findings.rule_tools import data_loader_rows

    n = max(float(ch.factor), 1.0)
    node_wait = np.zeros(jg.num_nodes)  # per thread, its spans' end nodes (reset after it)
    for i, g in enumerate(jg.ranks):
        rt = g.trace
        rows = np.asarray(data_loader_rows(rt))
        if not rows.size:
            continue
        rows = outermost(link(rt, "parent"), rows)
        thread = _thread(rt.column("pid"), rt.column("tid"), rows)
        ts, end = rt.column("ts")[rows], rt.column("end")[rows]
        edits.delay[cpu_edges_within(jg, i, rows)] = 0.0
        receive = float(g.floor[EDGE["cpu"]])
        for t in distinct(thread).tolist():
            mine = np.flatnonzero(thread == t)
            mine = mine[np.argsort(ts[mine], kind="stable")]
            rest = (ts[mine][1:] - end[mine][:-1]).astype(np.float64)
            last = float(np.median(rest)) if rest.size else 0.0
            rest = np.r_[rest, last]
            d = (end[mine] - ts[mine]).astype(np.float64)
            wait = np.maximum(d / n - rest, 0.0) + receive
            ends = g.end_node[rows[mine]]
            ok = ends >= 0
            glob = jg.global_node(i, ends[ok])
            node_wait[glob] = wait[ok]
            into = jg.edges_into_nodes(glob, "cpu")
            edits.delay[into] = node_wait[jg.dst[into]]
            node_wait[glob] = 0.0
            cap_handoffs(jg, edits, i, ts[mine], end[mine], wait)



# -- cuda-graphs ------------------------------------------------------------------------------
def launching_ops(rt_parent: np.ndarray, codes: np.ndarray, launches: np.ndarray
                  ) -> np.ndarray:
    """The outermost operators (``cpu_op``) above the launch calls ``launches``."""
    top = np.full(launches.size, -1, dtype=np.int64)
    cur = rt_parent[launches]
    for _ in range(4096):
        live = cur >= 0
        if not live.any():
            break
        at = np.where(live, cur, 0)
        is_op = live & (codes[at] == _CPU_OP)
        top[is_op] = at[is_op]
        cur = np.where(live, rt_parent[at], -1)
    return distinct(top[top >= 0])


def _cuda_graphs(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    from hta.analysis.findings.base import link
    from hta.analysis.findings.rule_tools import data_loader_rows

    edits.keep &= jg.type != EDGE["queue"]
    _zero_cpu_inside(jg, edits, [_LAUNCH])
    for i, g in enumerate(jg.ranks):
        at = jg.edges_into(i, "launch")
        if at.size and len(g.steps):
            _release_graphed(jg, edits, i, at)
    for i, g in enumerate(jg.ranks):
        rt = g.trace
        codes = rt.kind_codes()
        launches = np.flatnonzero(codes == _LAUNCH)
        ops = launching_ops(link(rt, "parent"), codes, launches)
        ops = ops[~np.isin(ops, np.asarray(data_loader_rows(rt)))]  # loading stays
        if ops.size:
            edits.delay[cpu_edges_within(jg, i, ops)] = 0.0
    keep_one_time(jg, edits)


def keep_one_time(jg: JobGraph, edits: Edits) -> None:
    """Give the ``cpu`` edges inside each rank's one-time costs
    (:func:`hta.analysis.findings.onetime.one_time_costs`: first calls, set-up, cold
    calls of one pass) their unchanged delay back: a graph is captured after warm-up, so
    the warm-up's host time is not what the fix removes from the steps."""
    from hta.analysis.findings.onetime import one_time_costs

    for i, g in enumerate(jg.ranks):
        rows = one_time_costs(g.trace).rows
        if rows.size:
            e = cpu_edges_within(jg, i, rows)
            edits.delay[e] = jg.delay[e]


def _release_graphed(jg: JobGraph, edits: Edits, i: int, launch_edges: np.ndarray) -> None:
    """Kernels launched inside a step (rank position ``i``) wait for the graph's launch,
    not their own: the launch edge is replaced by one from the later of the step's start
    and the end of the last host work a graph cannot capture (a data-loader span, a
    blocking call) before the launch on its thread, of the rank's usual launch latency."""
    from hta.analysis.findings.base import link
    from hta.analysis.findings.rule_tools import data_loader_rows
    from hta.analysis.findings.sync import blocking_rows

    g = jg.ranks[i]
    rt = g.trace
    ev = rt.events
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    thread = _thread(ev["pid"].to_numpy(), ev["tid"].to_numpy(), np.arange(len(ev)))
    calls = jg.node_row[jg.src[launch_edges]]
    kernels = jg.dst[launch_edges]
    it = ev["iteration"].to_numpy()[jg.node_row[kernels]]
    steps = g.steps.set_index("step")
    names, inv = np.unique(ev["name"].to_numpy()[calls], return_inverse=True)
    graphed = np.array([GRAPH_LAUNCH.search(rt.symbols[n]) is not None
                        for n in names.tolist()], dtype=bool)[inv.reshape(-1)]
    in_step = np.isin(it, steps.index.to_numpy()) & ~graphed  # graphs already replay
    if not in_step.any():
        return
    calls, kernels, it, launch_edges = (calls[in_step], kernels[in_step], it[in_step],
                                        launch_edges[in_step])
    release = jg.global_node(i, steps.loc[it, "start_node"].to_numpy(np.int64))
    barrier_rows = union(outermost(link(rt, "parent"), np.asarray(data_loader_rows(rt))),
                              np.asarray(blocking_rows(rt)))
    barrier_rows = barrier_rows[g.end_node[barrier_rows] >= 0]
    if barrier_rows.size:
        step_start = steps.loc[it, "ts"].to_numpy(np.int64)
        for t in distinct(thread[calls]).tolist():
            mine = np.flatnonzero(thread[calls] == t)
            bars = barrier_rows[thread[barrier_rows] == t]
            if not bars.size:
                continue
            bars = bars[np.argsort(end[bars], kind="stable")]
            k = np.searchsorted(end[bars], ts[calls[mine]], side="right") - 1
            ok = (k >= 0) & (end[bars[np.clip(k, 0, None)]] >= step_start[mine])
            release[mine[ok]] = jg.global_node(i, g.end_node[bars[k[ok]]])
            # launched inside such work (a copy of the batch): not captured, kept as is
            o = np.argsort(ts[bars], kind="stable")
            starts, reach = ts[bars][o], np.maximum.accumulate(end[bars][o])
            j = np.searchsorted(starts, ts[calls[mine]], side="right") - 1
            inside = (j >= 0) & (reach[np.clip(j, 0, None)] >= ts[calls[mine]])
            release[mine[inside]] = -1
    fwd = (release >= 0) & (release < kernels)
    submit_at(jg, edits, i, launch_edges[fwd], release[fwd])


# -- fused-optimizer --------------------------------------------------------------------------
def optimizer_spans(rt_parent: np.ndarray, rt_names: list[str], name_ids: np.ndarray,
                    codes: np.ndarray) -> np.ndarray:
    """The outermost ``Optimizer.step#...`` spans (``record_function`` labels or
    operators) of a rank."""
    marked = np.array([OPTIMIZER_STEP.search(n) is not None for n in rt_names] + [False],
                      dtype=bool)
    cpu = codes_in(codes, [_CPU_OP, KIND_CODE["user_annotation"]])
    rows = np.flatnonzero(cpu & marked[name_ids])
    return outermost(rt_parent, rows) if rows.size else rows


def _fused_optimizer(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    from hta.analysis.findings.base import link

    for i, g in enumerate(jg.ranks):
        rt = g.trace
        ev = rt.events
        codes = ev["kind"].array.codes
        parent = link(rt, "parent")
        spans = optimizer_spans(parent, rt.symbols, ev["name"].to_numpy(), codes)
        spans = spans[(g.start_node[spans] >= 0) & (g.end_node[spans] >= 0)]
        if not spans.size:
            continue
        at = jg.edges_into(i, "launch")
        calls = jg.node_row[jg.src[at]]
        ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
        thread = _thread(ev["pid"].to_numpy(), ev["tid"].to_numpy(), np.arange(len(ev)))
        o = np.argsort(ts[spans], kind="stable")
        spans = spans[o]
        k = np.searchsorted(ts[spans], ts[calls], side="right") - 1
        kk = np.clip(k, 0, None)
        inside = (k >= 0) & (end[spans[kk]] >= ts[calls]) & (thread[spans[kk]] == thread[calls])
        if not inside.any():
            continue
        # the fused kernels are submitted once, when the step of the optimizer starts
        submit_at(jg, edits, i, at[inside],
                  jg.global_node(i, g.start_node[spans[k[inside]]]))
        # no host time in their launches and dispatch
        edits.delay[cpu_edges_within(jg, i, distinct(calls[inside]))] = 0.0
        ops = launching_ops(parent, codes, calls[inside])
        edits.delay[cpu_edges_within(jg, i, ops[~np.isin(ops, spans)])] = 0.0


# -- dtype:TYPE -------------------------------------------------------------------------------
def dtype_factors(jg: JobGraph, i: int, dtype: str, gemm_bound: float | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Rank position ``i``'s GPU rows that ``dtype:TYPE`` speeds up and the factor of each
    (module docstring); ``gemm_bound``: the GEMMs' factor instead of the peak ratio (the
    range's memory-bound end). Raises ValueError when the rank names no known part."""
    from hta.analysis.findings.kernel_common import fp32_matrix
    from hta.analysis.findings.rule_tools import name_matches
    from hta.analysis.perf.op_performance import rank_device
    from hta.model.devices import peak_tflops

    g = jg.ranks[i]
    rt = g.trace
    rows = _gpu_rows(i, jg)
    gemm = name_matches(rt, rows, fp32_matrix)
    elem = np.zeros(rows.size, dtype=bool)
    if dtype in ("bf16", "fp16"):
        elem = name_matches(rt, rows, FP32_ELEMENTWISE) & ~gemm
    factor = np.ones(rows.size)
    if gemm.any():
        if gemm_bound is None:
            device = rank_device(rt)
            if device is None:
                raise ValueError(f"dtype:{dtype}: rank {g.rank} names no GPU the peak table "
                                 "knows (deviceProperties), so the rate of the new type is "
                                 "unknown")
            ratio = peak_tflops(device, "fp32", True) / peak_tflops(device, dtype, True)
            gemm_bound = float(min(ratio, 1.0)) if np.isfinite(ratio) else 1.0
        factor[gemm] = gemm_bound
    factor[elem] = 0.5
    hit = gemm | elem
    return rows[hit], factor[hit]


def _dtype(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    bound = None if ch.factor == 1.0 else float(ch.factor)
    scales = EndScales(jg)
    for i in range(len(jg.ranks)):
        rows, factor = dtype_factors(jg, i, ch.pattern, bound)
        if rows.size:
            scales.add(i, rows, factor)
    scales.apply(edits)


FIXES = {"no-sync": _no_sync, "pinned-copies": _pinned_copies, "workers": _workers,
         "cuda-graphs": _cuda_graphs, "dtype": _dtype, "fused-optimizer": _fused_optimizer}
for _kind, _edit in FIXES.items():
    register(_kind, _edit)
