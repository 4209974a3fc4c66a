"""Findings about communication: collectives the GPU waits on, and ranks that hold the
others up.

``comm_exposed`` (per rank, one finding per collective operation)
    Each communication kernel of the rank gets its operation (all-reduce, reduce-scatter,
    all-gather, all-to-all, send/recv, broadcast ...) from what launched it
    (:mod:`hta.analysis.collectives`), and calls form *operation groups*, the findings'
    subjects (:func:`operation_group`): the operation, with these apart: all-reduces
    launched from the autograd engine (``backward`` in their context, *gradient*
    all-reduces); TorchRec's embedding exchanges (``torchrec``); MoE all-to-alls
    (``moe``); all-gathers and all-reduces inside ``Optimizer.step``; send/recv kernels
    known by their name only (NCCL runs all-to-alls as send/recv kernels too).
    Kernels are selected as in the comm/compute overlap table
    (:mod:`hta.analysis.overlap`: every GPU work row, or those of the selected steps).
    *Exposed* time is when a communication kernel runs and no computation kernel does
    (any stream). It is shared out so that no instant counts twice: an instant when
    kernels of one group alone are exposed goes to that group; one when several groups
    are exposed at once is split equally between them. The groups' exposed times thus
    add up to the rank's exposed communication (the overlap table's ``comm_time`` minus
    ``overlap_time``).
    *Waits cut out* (:func:`waits_cut`): a call at least 10x (20x without a recorded
    message size) the median duration of its like calls (same operation, process group,
    kernel and message size, at least 3 of them) spent the time beyond that median
    waiting, for a late peer or a one-time set-up; it counts as starting one median before
    its end, and the evidence says how much was cut.
    Overlapping can only hide communication under computation that runs without it, so
    the rank's total saving is ``min(exposed, free_compute)``, with ``free_compute`` the
    computation time with no communication kernel running; each group gets its share of
    that total in proportion to its exposed time. This is an upper bound: it assumes the
    communication could be moved under independent work.
    The advice is the group's (:data:`ADVICE`; for all-reduces in a pass without backward,
    :data:`INFERENCE_ALL_REDUCE_ADVICE`: tensor-parallel inference, whose all-reduce the
    next layer needs at once): bucket sizes only for gradient
    all-reduce, prefetching for all-gather and reduce-scatter, overlap, load balance and
    fewer exchanges for all-to-all (the expert load for MoE, the sharding plan and the
    pipelined input distribution for TorchRec), the pipeline schedule for send/recv. The evidence
    names the calls with the most exposed time and quotes the rank's row of the overlap
    table (``comm_time``, ``overlap_time``) for cross-checking.

``stragglers`` (job)
    From :func:`hta.analysis.stragglers.collective_arrivals`, each rank's times first put
    on one clock (:func:`hta.analysis.clock.aligned_arrivals`: a host whose clock runs
    ahead does not look late): for each rank, the sum over
    the collectives at which it alone started last of its ``excess_lag_ns`` (the smallest
    wait it caused any other rank of that collective). Had the rank arrived with the
    others, each of those collectives would have ended that much sooner on every rank, so
    the saving is that sum (the job's step time runs in lock-step). Ranks with no
    excess lag have no finding.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis import collectives as coll
from hta.analysis.clock import (
    aligned_arrivals,
    applied_offsets,
    clock_offsets,
    hosts_visit,
    kernels_visit,
)
from hta.analysis.findings.base import Finding, FindingRule, analysis_window, rank_work
from hta.analysis.findings.claims import Claim, claim_outside
from hta.analysis.findings.rule_tools import (
    fmt_steps,
    fmt_time,
    runs_backward,
    step_of,
    step_tuple,
    steps_text,
)
from hta.analysis.findings.straggler_why import why_late
from hta.analysis.gpu_work import COMPUTE
from hta.analysis.grouped import row_medians
from hta.analysis.intervals import Cover, coverage, mask_total
from hta.analysis.select import rank_numbers
from hta.analysis.straggler_causes import profile_visit
from hta.analysis.stragglers import straggler_summary
from hta.model.arrays import distinct
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.runner import RankWork, recalled, run_one, visit_key
from hta.model.selection import Selection
from hta.model.trace import RankTrace, Trace

#: A call this many times the median duration of its like calls waited (message sizes
#: known: :data:`WAIT_FACTOR_SIZED`; unknown, calls of one kernel may move more bytes).
WAIT_FACTOR = 20
WAIT_FACTOR_SIZED = 10
#: Fewest like calls that make a median.
MIN_LIKE_CALLS = 3
GRADIENT_ALL_REDUCE = "all-reduce (gradients)"
#: Send/recv kernels known by their name alone: NCCL runs all-to-all (and, in some
#: versions, other collectives) as grouped send/recv kernels too.
UNLAUNCHED_SEND_RECV = "send/recv (by kernel name only)"
#: Calls whose operation neither their args, their launching op nor their kernel name tell
#: (RCCL's ``ncclDevKernel_Generic`` launched outside any recorded op).
UNKNOWN_OPERATION = "collective of unknown operation"
OPTIMIZER_ALL_GATHER = "all-gather (optimizer step)"
MOE_SUFFIX = " (MoE dispatch/combine)"
TORCHREC_SUFFIX = " (TorchRec embeddings)"
OPTIMIZER_ALL_REDUCE = "all-reduce (optimizer step)"
_LATE = (" If the kernels are long because other ranks arrive late, see the stragglers "
         "finding first.")
_TORCHREC = (
    "These exchanges distribute TorchRec's sparse features and embeddings (KJT all-to-alls "
    "of the input distribution, pooled-embedding all-to-all or reduce-scatter of the output "
    "distribution, and their backward): pipeline the next batch's input distribution under "
    "this batch's computation (TrainPipelineSparseDist), balance the sharding plan so no rank "
    "holds the hot tables (the planner's cost estimates; see send_imbalance in "
    "get_collective_performance), make fewer, larger exchanges (fewer sharding groups), and "
    "send fewer bytes (quantized communication, qcomms)." + _LATE)
#: What to try, per operation group (the finding's subject).
ADVICE: dict[str, str] = {
    GRADIENT_ALL_REDUCE: (
        "These all-reduces are launched by the backward pass (gradient synchronisation). "
        "With DDP, tune bucket_cap_mb so the first buckets are ready, and start, early in "
        "the backward pass (smaller buckets start sooner, larger ones cost less per call); "
        "keep find_unused_parameters=False where possible, use gradient_as_bucket_view and "
        "static_graph; with gradient accumulation, skip the all-reduce on all but the last "
        "micro-batch (no_sync)." + _LATE),
    coll.ALL_REDUCE: (
        "These all-reduces do not come from the backward pass (tensor-parallel layers, loss "
        "or metric reductions): issue them with async_op=True and wait where the result is "
        "needed, overlap them with independent computation (tensor-parallel communication "
        "overlap, sequence parallelism), or reduce metrics less often." + _LATE),
    coll.ALL_GATHER: (
        "All-gathers of sharded parameters (FSDP, ZeRO-3) or tensor-parallel activations: "
        "prefetch them so the next layer's gather runs under this layer's computation. "
        "FSDP: forward_prefetch=True, backward_prefetch=BACKWARD_PRE, and check "
        "limit_all_gathers (it bounds how far ahead gathers run); FSDP2: "
        "set_modules_to_forward_prefetch/set_modules_to_backward_prefetch; DeepSpeed: "
        "overlap_comm with a prefetch bucket. Very many small gathers: wrap coarser units."
        + _LATE),
    coll.REDUCE_SCATTER: (
        "Reduce-scatters of gradients (FSDP, ZeRO) or tensor-parallel activations: let them "
        "run under the backward computation of the previous layers. FSDP: "
        "backward_prefetch=BACKWARD_PRE and limit_all_gathers; FSDP2: "
        "set_modules_to_backward_prefetch and reshard_after_forward; DeepSpeed: overlap_comm "
        "with reduce_bucket_size. With gradient accumulation, reduce only on the last "
        "micro-batch." + _LATE),
    coll.ALL_TO_ALL: (
        "All-to-all exchanges (MoE token dispatch/combine, TorchRec sparse feature and "
        "embedding distribution): overlap them with computation, e.g. split the batch into "
        "two micro-batches and run one's dispatch/combine under the other's expert or "
        "attention computation, or pipeline the input distribution of the next batch under "
        "this one (TorchRec TrainPipelineSparseDist); balance the load across peers (the "
        "busiest peer sets the exchange's time: expert load-balancing loss or capacity "
        "factor, the sharding plan; see send_imbalance in get_collective_performance); and "
        "make fewer, larger exchanges (fuse per-table or per-layer all-to-alls)." + _LATE),
    coll.SEND_RECV: (
        "Point-to-point sends and receives, usually between pipeline stages: use a schedule "
        "that hides them (1F1B, interleaved 1F1B with virtual stages), raise the number of "
        "micro-batches to shrink the pipeline bubble, and batch the transfers "
        "(batch_isend_irecv) so they overlap with the stage's computation." + _LATE),
    coll.ALL_TO_ALL + MOE_SUFFIX: (
        "MoE token dispatch and combine: overlap them with computation (split the batch "
        "into two micro-batches and run one's dispatch/combine under the other's attention "
        "or expert computation, as DualPipe or DeepEP's hook-based overlap do); balance the "
        "expert load, since the busiest peer sets the exchange's time (load-balancing loss "
        "or bias, capacity factor, redundant experts for hot ones; see send_imbalance in "
        "get_collective_performance); send fewer bytes (fp8 dispatch) and make fewer, larger "
        "exchanges." + _LATE),
    coll.ALL_TO_ALL + TORCHREC_SUFFIX: _TORCHREC,
    coll.REDUCE_SCATTER + TORCHREC_SUFFIX: _TORCHREC,
    coll.ALL_GATHER + TORCHREC_SUFFIX: _TORCHREC,
    OPTIMIZER_ALL_GATHER: (
        "These all-gathers run in the optimizer step (a sharded optimizer such as ZeRO-1/2 "
        "or distributed Shampoo gathering updated parameters or its state): start them "
        "asynchronously and wait only before the parameters' first use in the next forward "
        "pass, gather fewer, larger buckets, or shard less of the optimizer where memory "
        "allows." + _LATE),
    OPTIMIZER_ALL_REDUCE: (
        "These all-reduces run in the optimizer step (gradient-norm clipping, sharded "
        "optimizer statistics, loss scaling): fuse them into one (a foreach/fused norm over "
        "all gradients), or overlap them with the parameter update." + _LATE),
    UNLAUNCHED_SEND_RECV: (
        "These send/recv kernels have no launching op in the trace, and NCCL runs "
        "all-to-all exchanges as grouped send/recv kernels too: if the job has no pipeline "
        "stages, they are most likely all-to-alls (see that advice: overlap, load balance, "
        "fewer exchanges). Between pipeline stages: a schedule that hides them (1F1B, "
        "interleaved), more micro-batches, batched isend/irecv. Profile from the start of a "
        "step so their launching ops are recorded." + _LATE),
    UNKNOWN_OPERATION: (
        "Neither these kernels' names (RCCL's ncclDevKernel_Generic is one), their args nor "
        "a launching op say which collective they are, so no operation-specific advice "
        "applies: record the ops that launch them (profile from the start of a step, with "
        "record_shapes=True so record_param_comms carries the collective's name), then read "
        "this finding again. Meanwhile: overlap them with computation (async_op=True, wait "
        "only where the result is needed), or move them out of the step." + _LATE),
    coll.BARRIER: (
        "Barriers only wait for the other ranks: remove them from the step (they are "
        "rarely needed between collectives, which synchronise by themselves)." + _LATE),
    coll.BROADCAST: (
        "Broadcasts inside the step send parameters, buffers or inputs from one rank: move "
        "them out of the step where they do not change (DDP: broadcast_buffers=False), or "
        "let every rank load its own inputs." + _LATE),
}
#: The all-reduces of a pass without backward: inference with tensor parallelism, whose
#: all-reduce feeds the next layer at once (no independent work to hide it under).
INFERENCE_ALL_REDUCE_ADVICE = (
    "This pass runs no backward: these are tensor-parallel all-reduces of inference, and "
    "the next layer needs each result at once (a norm, the next GEMM), so async_op=True "
    "finds no independent work to hide them under. Make each one cheaper: a one-shot or "
    "two-shot custom all-reduce for small messages (vLLM's and SGLang's custom "
    "all-reduce, ROCm quick all-reduce; NCCL's LL/LL128 protocols), fuse it with the "
    "norm that follows (all-reduce + RMSNorm fusion), overlap it with the GEMMs around "
    "it (async tensor parallelism: fused all-gather/reduce-scatter matmuls, sequence "
    "parallelism), or shard over fewer ranks where the model fits (fewer all-reduces, "
    "larger batches per rank)." + _LATE)
_DEFAULT_ADVICE = (
    "Overlap this communication with computation: issue it with async_op=True and wait "
    "only where the result is needed, or move it out of the step." + _LATE)
STRAGGLER_ADVICE = (
    "Find out why this rank starts its collectives late: compare its idle time (host "
    "wait) and kernel launch sections with the other ranks'. Usual causes: slower data "
    "loading on that host, uneven work (sequence lengths, MoE routing, pipeline stage "
    "sizes), a throttled or slower GPU, or a busy host CPU."
)
EXPOSED_ADVICE = "The advice of the collective operation (see the finding's advice)."
#: How many calls the evidence names.
NAMED_CALLS = 2


# -- exposed communication ------------------------------------------------------------------
def operation_group(collective: str, context: str, source: str = "") -> str:
    """The finding's subject for a call: its operation, with these apart: gradient
    all-reduces; TorchRec's embedding exchanges; MoE all-to-alls; all-gathers and
    all-reduces of the optimizer step; send/recv kernels that only their name classifies."""
    tags = context.split(",")
    if collective == coll.ALL_REDUCE and "backward" in tags:
        return GRADIENT_ALL_REDUCE
    if "torchrec" in tags and collective in (coll.ALL_TO_ALL, coll.REDUCE_SCATTER,
                                             coll.ALL_GATHER):
        return collective + TORCHREC_SUFFIX
    if "moe" in tags and collective == coll.ALL_TO_ALL:
        return collective + MOE_SUFFIX
    if "optimizer" in tags and collective in (coll.ALL_GATHER, coll.ALL_REDUCE):
        return OPTIMIZER_ALL_GATHER if collective == coll.ALL_GATHER else OPTIMIZER_ALL_REDUCE
    if collective == coll.SEND_RECV and source == "kernel_name":
        return UNLAUNCHED_SEND_RECV
    if collective == coll.OTHER:
        return UNKNOWN_OPERATION
    return collective


def exposed_by_operation(rt: RankTrace, iterations: Sequence[int] | None = None
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per operation group of the rank: ``group``, ``kernels``, ``comm_ns`` (union of its
    kernels), ``exposed_ns`` (its share of the exposed time, module docstring), ``steps``;
    plus the rank-wide ``rank_comm_ns``, ``rank_overlap_ns`` (the overlap table's numbers)
    and ``free_compute_ns``. Second value: the calls
    (:func:`hta.analysis.collectives.rank_collective_performance`) with their ``group``."""
    rows, told = _exposed_rows(rt, iterations)
    calls = coll.rank_collective_performance(rt, iterations)
    if len(calls):  # as the rows read them: with their group, and their waits cut
        calls["group"] = told["group"]
        for c in ("start_ns", "waited_ns", "exposed(us)"):
            calls[c] = told[c]
    return pd.DataFrame(rows, columns=EXPOSED_COLUMNS), calls


#: Columns of :func:`exposed_by_operation`'s first table.
EXPOSED_COLUMNS = ["group", "kernels", "comm_ns", "exposed_ns", "steps", "rank_comm_ns",
                   "rank_overlap_ns", "free_compute_ns"]


def _exposed_rows(rt: RankTrace, iterations: Sequence[int] | None
                  ) -> tuple[list[dict[str, Any]], Told]:
    """:func:`exposed_by_operation`'s groups as row dicts (:data:`EXPOSED_COLUMNS`), with
    the calls' columns the finding reads (:data:`_TOLD`, their ``group``; the waits cut,
    :func:`waits_cut`) as arrays (none without calls)."""
    calls = coll.rank_collective_performance(rt, iterations)
    if not len(calls):
        return [], {}
    group_of = np.asarray([operation_group(c, x, s) for c, x, s in zip(
        calls["collective"].tolist(), calls["context"].tolist(), calls["source"].tolist())],
        dtype=object)
    text = ("process_group", "kernel", "launch_op")
    told = {c: calls[c].to_numpy(dtype=object) if c in text else calls[c].to_numpy()
            for c in _TOLD if c != "waited_ns"}  # (the waits: made below)
    start, end = told["start_ns"].astype(np.int64), told["end_ns"].astype(np.int64)
    w = rank_work(rt, iterations)
    groups = sorted(set(group_of.tolist()))
    gid = {g: i for i, g in enumerate(groups)}
    call_sets = 1 + np.asarray([gid[g] for g in group_of.tolist()], dtype=np.int64)
    # the overlap table's figures, from the kernels as they ran: set 0 computation, the
    # others communication
    whole = _coverage(w, start, end, call_sets, len(groups))
    comm_bits = (len(whole) - 1) & ~1
    rank_comm = int(mask_total(whole[None, :], any_of=comm_bits)[0])
    rank_overlap = int(mask_total(whole[None, :], all_of=1, any_of=comm_bits)[0])
    # the exposed shares from the calls without their waits
    waited = waits_cut(calls, start, end)
    told["start_ns"] = start + waited
    told["waited_ns"] = waited
    told["exposed(us)"] = np.maximum(told["exposed(us)"].astype(np.float64) - waited / 1e3,
                                     0.0)
    told["group"] = group_of
    table = _coverage(w, told["start_ns"], end, call_sets, len(groups)) if waited.any() \
        else whole
    free_compute = int(table[1])
    exposed, comm = _shared_exposed(table, len(groups))
    rows = []
    step_of = told["iteration"]
    for i, g in enumerate(groups):
        part = group_of == g
        rows.append({
            "group": g, "kernels": int(part.sum()), "comm_ns": int(comm[i]),
            "exposed_ns": int(exposed[i]),
            "steps": step_tuple(step_of[part]),
            "rank_comm_ns": rank_comm, "rank_overlap_ns": rank_overlap,
            "free_compute_ns": free_compute,
        })
    return rows, told


def waits_cut(calls: pd.DataFrame, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per call, the wait cut from its start (ns, 0 for most; module docstring): a call
    at least :data:`WAIT_FACTOR` (:data:`WAIT_FACTOR_SIZED` when its message size is
    known) times the median duration of its like calls (same operation, process group,
    kernel and message size; at least :data:`MIN_LIKE_CALLS` of them) spent the time
    beyond that median waiting (for a late peer, or a one-time set-up such as a
    communicator's first connection), not moving data: it starts ``median`` before its
    end. ``start``, ``end``: the calls' as they ran."""
    size = calls["msg_bytes"].to_numpy(np.float64)
    median, count = row_medians(
        [calls["collective"].to_numpy(), calls["process_group"].astype(str).to_numpy(),
         calls["kernel"].astype(str).to_numpy(), np.where(np.isfinite(size), size, -1.0)],
        end - start)
    factor = np.where(np.isfinite(size), WAIT_FACTOR_SIZED, WAIT_FACTOR)
    outlier = (count >= MIN_LIKE_CALLS) & (median > 0) & (end - start >= factor * median)
    return np.where(outlier, (end - start) - median.astype(np.int64), 0)


def _waits_text(calls: Told) -> str:
    """`` 1 call ran 10x or more ...``: the waits :func:`waits_cut` cut ("" none)."""
    waited = calls["waited_ns"].astype(np.int64)
    if not (waited > 0).any():
        return ""
    longest = int(np.argmax(waited))
    dur = int(calls["end_ns"][longest]) - int(calls["start_ns"][longest])
    return (f" {int((waited > 0).sum())} call(s) ran far longer than the median of their "
            f"like calls (same operation, group, kernel and size; the longest "
            f"{fmt_time(dur + int(waited[longest]))} against {fmt_time(dur)}): the "
            f"{fmt_time(int(waited.sum()))} beyond the "
            f"median is a wait (for a late peer, or a one-time set-up), not transfer, and is "
            f"left out here; overlapping cannot hide it. Load every rank's trace to see "
            f"who was late (the stragglers finding).")


def _coverage(w, start: np.ndarray, end: np.ndarray, call_sets: np.ndarray,
              n_groups: int) -> np.ndarray:
    """Time per combination of running sets: set 0 = computation kernels, set ``1 + i``
    = the calls of group ``i`` (``start``, ``end``: the calls'; ``call_sets``: per call,
    its set; :func:`hta.analysis.intervals.coverage`, one row)."""
    comp = w.cls == COMPUTE
    starts = np.concatenate([w.ts[comp], start])
    ends = np.concatenate([w.end[comp], end])
    sets = np.concatenate([np.zeros(int(comp.sum()), np.int64), call_sets])
    return coverage(starts, ends, sets, n_groups + 1)[0]


def _shared_exposed(table: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group: its share of the exposed time and the union of its kernels (ns), from
    :func:`_coverage`'s ``table``: the time of each mask with no computation is split
    equally between the groups in it (integer ns; the remainder to the first of them)."""
    exposed = np.zeros(n, np.int64)
    comm = np.zeros(n, np.int64)
    for mask in np.flatnonzero(table):
        members = [i for i in range(n) if mask & (2 << i)]
        t = int(table[mask])
        for i in members:
            comm[i] += t
        if mask & 1 or not members:
            continue
        share, rest = divmod(t, len(members))
        for k, i in enumerate(members):
            exposed[i] += share + (rest if k == 0 else 0)
    return exposed, comm


def check_exposed(rt: RankTrace, iterations: Sequence[int] | None) -> list[Finding]:
    """``comm_exposed`` on one rank: one finding per operation group with exposed time."""
    start, end = analysis_window(rt, iterations)
    window = end - start
    groups, told = _exposed_rows(rt, iterations)
    if not groups:
        return []
    total = sum(int(g["exposed_ns"]) for g in groups)
    budget = min(total, int(groups[0]["free_compute_ns"]), window)
    split = (" (time when several operations were exposed at once is split between them)"
             if len(groups) > 1 else "")
    found = []
    claims = _exposed_claims(told, _compute_cover(rt, iterations))
    inference = not runs_backward(rt, (start, end))
    group_of = told["group"]
    for row in groups:
        group, exposed_ns = str(row["group"]), int(row["exposed_ns"])
        saving = exposed_ns * budget // total if total else 0
        if saving <= 0:
            continue
        in_group = group_of == group
        mine = told if in_group.all() else {c: v[in_group] for c, v in told.items()}
        evidence = (
            f"{row['kernels']} {group} kernels ({_groups_text(mine)}) ran "
            f"{fmt_time(row['comm_ns'])} in {steps_text(rt, row['steps'])}, "
            f"{fmt_time(exposed_ns)} of it with no computation kernel running{split}; "
            f"longest exposed: {_named_calls(mine, start)}; {fmt_time(row['free_compute_ns'])} "
            f"of computation ran with no communication (comm/compute overlap table: comm_time "
            f"{row['rank_comm_ns'] / 1e3:,.1f} µs, overlap_time "
            f"{row['rank_overlap_ns'] / 1e3:,.1f} µs for the rank; "
            f"collective performance table: exposed(us)).{_waits_text(mine)}"
        )
        found.append(Finding((rt.rank,), tuple(row["steps"]), evidence,
                             saving, window, subject=group,
                             advice=INFERENCE_ALL_REDUCE_ADVICE
                             if inference and group == coll.ALL_REDUCE
                             else ADVICE.get(group, _DEFAULT_ADVICE),
                             claim=claims.get(group),
                             budget=("computation time with no communication",
                                     int(row["free_compute_ns"]))))
    return found


#: The calls' columns the evidence of :func:`check_exposed` reads (:func:`_groups_text`,
#: :func:`_named_calls`, :func:`_waits_text`): one group's calls are taken from these.
_TOLD = ["process_group", "kernel", "launch_op", "iteration", "start_ns", "end_ns",
         "exposed(us)", "time(us)", "waited_ns"]

#: The calls' columns as arrays (:func:`_exposed_rows`): column name -> one value per
#: call (text as objects), so one group's calls are a mask of each, not a frame's copy.
Told = dict[str, np.ndarray]


def _compute_cover(rt: RankTrace, iterations: Sequence[int] | None) -> Cover:
    """The union of the rank's computation kernels (of the selected steps)."""
    w = rank_work(rt, iterations)
    return Cover(w.ts[w.cls == COMPUTE], w.end[w.cls == COMPUTE])


def _exposed_claims(calls: Told, compute: Cover) -> dict[str, Claim]:
    """Per operation group: the time its finding claims, as its saving counts it. The
    timeline is cut at every call's start and end; in each piece, the time with no
    computation kernel is shared equally between the groups with a call running there
    (:func:`_shared_exposed`'s split, as intervals the engine can check against the other
    findings' claims)."""
    group = calls.get("group")
    if group is None or not len(group):
        return {}
    names = [str(g) for g in pd.unique(group)]
    start, end = calls["start_ns"].astype(np.int64), calls["end_ns"].astype(np.int64)
    unions = {g: Cover(start[group == g], end[group == g]) for g in names}
    cuts = distinct(np.concatenate([np.concatenate([u.s, u.e]) for u in unions.values()]))
    s, e = cuts[:-1], cuts[1:]
    active = {g: u.within(s, e) > 0 for g, u in unions.items()}
    running = np.sum([a for a in active.values()], axis=0)
    free = (e - s) - compute.within(s, e)
    out = {}
    for g, on in active.items():
        share = free[on] / np.maximum(running[on], 1)
        out[g] = claim_outside(s[on], e[on], share, compute)
    return out


def _groups_text(calls: Told) -> str:
    """``process group 0 (default_pg) ×12, stream 84 ×3``: where the calls ran (the three
    with most calls; a tie in the order the calls first name them)."""
    counts: dict[str, int] = {}
    for g in calls["process_group"].tolist():
        if isinstance(g, str) or not pd.isna(g):  # a missing group is counted nowhere
            counts[str(g)] = counts.get(str(g), 0) + 1
    top = sorted(counts.items(), key=lambda gc: -gc[1])[:3]  # stable: ties keep their order
    return ", ".join(f"{_group_label(g)} ×{c}" for g, c in top)


def _named_calls(calls: Told, window_start: int) -> str:
    """The calls with the most exposed time: kernel, launching op, step, start, times."""
    # most exposed first, ties in the calls' order (a stable descending sort)
    top = np.argsort(-calls["exposed(us)"].astype(np.float64), kind="stable")[:NAMED_CALLS]
    cols = [calls[c][top].tolist() for c in
            ("kernel", "launch_op", "iteration", "start_ns", "exposed(us)", "time(us)")]
    parts = []
    for kernel, launch_op, step, start, exposed, time_us in zip(*cols, strict=True):
        via = f" launched by {launch_op}" if launch_op else ""
        parts.append(
            f"{coll.kernel_label(kernel)}{via} in step {int(step)} at "
            f"{fmt_time(int(start) - window_start)} into the window, "
            f"{fmt_time(exposed * 1e3)} exposed of {fmt_time(time_us * 1e3)}")
    return "; ".join(parts)


# -- stragglers ---------------------------------------------------------------------------------
def check_stragglers(trace: Trace, selection: Selection) -> list[Finding]:
    """``stragglers``: one finding per rank that alone arrived last and held others up."""
    if len(rank_numbers(trace, selection)) < 2:
        return []
    offsets = applied_offsets(clock_offsets(trace, selection))
    arrivals = aligned_arrivals(trace, selection, offsets)
    summary = straggler_summary(arrivals)
    if not len(summary):
        return []
    hit = summary[summary["total_excess_lag(us)"] > 0]
    if not len(hit):
        return []
    key, work = windows_visit(rank_numbers(trace, selection), selection.iteration_list)
    every = recalled(trace, key)  # every rank's, when read with the other job inputs
    windows = (every if every is not None else run_one(
        trace, work, Selection.of([int(r) for r in hit["rank"]]))).set_index("rank")[
        "window_ns"]
    why = why_late(trace, selection, arrivals, offsets)
    found = []
    for row in hit.to_dict("records"):
        rank = int(row["rank"])
        mine = arrivals[(arrivals["rank"] == rank) & (arrivals["excess_lag_ns"] > 0)]
        saving = int(mine["excess_lag_ns"].sum())
        window = int(windows.get(rank, 0))
        steps = step_tuple(mine["iteration"].to_numpy())
        evidence = (
            f"rank {rank} started last at {int(row['late_count'])} of "
            f"{int(row['collectives'])} collectives (mean lag {row['mean_lag(us)']:,.1f} µs "
            f"behind the first rank); the other ranks waited "
            f"{fmt_time(row['total_wait_caused(us)'] * 1e3)} for it in all, and at "
            f"{len(mine)} collective{'s' if len(mine) != 1 else ''} in {fmt_steps(steps)} "
            f"every one of them waited, "
            f"{fmt_time(saving)} in all "
            f"(stragglers table: late_count, total_wait_caused, total_excess_lag); "
            f"the latest: {_late_calls(mine)}."
        )
        sentence, advice = why.get(rank, ("", ""))
        if sentence:
            evidence += f" {sentence[0].upper()}{sentence[1:]} (straggler causes table)."
        found.append(Finding((rank,), steps, evidence, min(saving, window) if window else
                             saving, window, subject=f"rank {rank}", advice=advice,
                             rank_claims=_wait_claims(arrivals, rank)))
    return found


def _late_calls(mine: pd.DataFrame) -> str:
    """The collectives the rank started latest at: kernel, process group, step and lag."""
    top = mine.sort_values("excess_lag_ns", ascending=False, kind="stable").head(NAMED_CALLS)
    return "; ".join(
        f"{coll.kernel_label(str(c['kernel']))} on {_group_label(str(c['process_group']))} "
        f"in {step_of(int(c['iteration']))}, started {fmt_time(int(c['excess_lag_ns']))} "
        f"after every other rank"
        for c in top.to_dict("records"))


def _wait_claims(arrivals: pd.DataFrame, rank: int) -> dict[int, Claim]:
    """Per rank that waited for ``rank``: the waits that would disappear, ``[s - excess,
    s)`` at each collective where ``rank`` alone started last at ``s``."""
    late = arrivals[(arrivals["rank"] == rank) & (arrivals["excess_lag_ns"] > 0)]
    late = late.drop_duplicates("collective").set_index("collective")
    others = arrivals[arrivals["collective"].isin(late.index) & (arrivals["rank"] != rank)]
    end = late["start_ns"].reindex(others["collective"]).to_numpy(np.int64)
    excess = late["excess_lag_ns"].reindex(others["collective"]).to_numpy(np.int64)
    return {int(q): Claim(end[idx] - excess[idx], end[idx])
            for q, idx in others.groupby("rank").indices.items()}


def straggler_inputs(selected: list[int], iters: list[int] | None
                     ) -> list[tuple[Hashable, RankWork]]:
    """The stragglers rule's per-rank inputs, read ahead (:attr:`FindingRule.inputs`):
    the clock offsets' communication kernels and hosts, the analysis windows and the
    straggler causes' step profiles."""
    return [kernels_visit(selected, iters), hosts_visit(selected),
            windows_visit(selected, iters), profile_visit(selected, iters)]


def windows_visit(selected: list[int], iters: list[int] | None
                  ) -> tuple[Hashable, RankWork]:
    """The key and the work of the ``selected`` ranks' analysis windows
    (:func:`_rank_window`)."""
    return visit_key("windows", selected, iters), RANK_WINDOW.work(iters)


def _rank_window(rank: RankTrace, iterations: list[int] | None) -> pd.DataFrame:
    """One rank's ``rank`` and ``window_ns``: the length of its analysis window."""
    start, end = analysis_window(rank, iterations)
    return pd.DataFrame([{"rank": rank.rank, "window_ns": end - start}],
                        columns=["rank", "window_ns"])


RANK_WINDOW = Analysis("Analysis windows", _rank_window, Columns.typed(["rank", "window_ns"]),
                       steps=PER_STEP)


def _group_label(group: str) -> str:
    return group if group.startswith("stream ") else f"process group {group}"


RULES: list[FindingRule] = [
    FindingRule(
        id="comm_exposed",
        title="Communication not overlapped by computation",
        section="overlap",
        advice=EXPOSED_ADVICE,
        saving=("Per collective operation: its share of the rank's exposed communication "
                "(time with a communication kernel and no computation kernel; instants "
                "exposed for several operations split equally), scaled so the rank's total "
                "is at most its computation time with no communication (what overlapping "
                "could hide it under)."),
        check=check_exposed,
        scope="rank",
        tags=("communication",),
    ),
    FindingRule(
        id="stragglers",
        title="A rank arrives late at collectives and the others wait",
        section="stragglers",
        advice=STRAGGLER_ADVICE,
        saving=("Per late rank: the sum, over the collectives it alone started last, of the "
                "smallest wait it caused any other rank (how much sooner each would have "
                "ended everywhere had it arrived with the others)."),
        check=check_stragglers,
        scope="job",
        tags=("communication",),
        inputs=straggler_inputs,
    ),
]
