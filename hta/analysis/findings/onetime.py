"""One-time costs: what a process pays once, told apart from what recurs.

Traces taken around the first iterations hold the costs a process pays once (see
:mod:`hta.analysis.findings.warmup`, the note that reports them). A **one-time cost** is a
CPU operator or runtime call of the rank that runs at least :data:`MIN_NS` (1 ms), leaves
the GPU idle (no kernel, copy or memset on any stream, graph replays counted busy) for at
least half of its span (autotuning excepted: it runs trial kernels), and is one of:

* the *first call* of a *top-level call* (an operator or runtime call with no operator or
  runtime call around it; Python frames and annotations do not count) whose later calls
  of the same name and recorded input shapes ran at most 1/:data:`FACTOR` of its time
  (their median; a shape called once, such as an optimizer's first parameter, is judged
  against the later calls of its name), unless it spent half of its time or more in
  runtime calls the longest of which is a wait (a synchronising call or a synchronous
  copy waits on work the trace may not hold). What makes a first call slow once is
  set-up, in runtime calls or not: ``aten::conv2d`` 1.4 s the first time in cuDNN's
  stream and event creation, a few ms after; an optimizer's first ``aten::mul_`` 2.7 ms
  in lazy initialisation, 10 µs after. With ProfilerSteps, slow first calls of one name
  in two steps or more recur (a new shape every step: a decoder's growing sequence,
  variable batch shapes) and are none;
* on a rank without ProfilerStep, a *cold call*: a top-level call that ran
  :data:`FACTOR` times the fast calls of its name (their :data:`COLD_QUANTILE` quantile,
  over :data:`COLD_MIN_CALLS` calls or more), whatever its shapes (cuDNN building the plan
  of a new shape in one pass: 2-10 ms against 0.1 ms for a shape it has seen; traces
  without recorded shapes cannot tell each shape's first call otherwise);
* on a rank without ProfilerStep, the *first call of a runtime API* that is neither a
  launch nor a synchronisation (``runtime_other``) when it ran :data:`MIN_NS` or more
  and :data:`FACTOR` times its later calls (or has none): a library's set-up on first
  use;
* *allocator growth*: an allocation or free call (``cudaMalloc``, ``cudaFree``, ...)
  inside a top-level call with :data:`GROWTH_LATER` or more later calls of its name and
  shapes that allocate nothing as long (a recurring free is a ``host_sync``);
* a call named as set-up (:data:`SETUP`: stream, event or library creation, module
  loading, context creation, communicator initialisation, Dynamo/Inductor compilation,
  autotuning);
* the *first launch of a kernel* (by name) whose launch call ran at least :data:`FACTOR`
  times the median launch call of the rank (module loading on first use: a Triton or
  custom kernel launched from Python, with no operator around it);
* a convolution operator (:data:`AUTOTUNED_OPS`) with :data:`TUNING_SYNCS` (2) or more
  event synchronisations below it: cuDNN (``benchmark=True``) or MIOpen timing its
  algorithms for a new shape;
* a multi-process DataLoader's *first batch* (its first outermost data-loader span, named
  ``_MultiProcessingDataLoaderIter``) when it is the trace's only one or ran
  :data:`FACTOR` times the median of the later ones: the workers start and one makes the
  batch;
* a call holding TorchScript fusion groups (``fallback_function``, ``fused__*``) that
  spent :data:`MIN_NS` or more, and half its time or more, with none of its children
  running: the profiling executor compiling them, unrecorded; the same for an operator
  holding a kernel code load (``hipModuleLoadData``, ``cuModuleLoad*``): the library
  building its kernels (MIOpen for a new shape);
* a DataLoader iterator's start-up (:func:`~hta.analysis.findings.rule_tools.
  iterator_start_rows`: worker processes started, first batches prefetched) when the
  trace starts iterators fewer than twice, and fewer than once every two steps (an
  iterator started every step recurs: ``data_loading`` names it);
* an annotation, operator or Python frame named warm-up
  (:data:`~hta.analysis.findings.rule_tools.WARM_UP`);
* on a rank without ProfilerStep, the *first call's unrecorded stretch*: in the first of
  :data:`STRETCH_MIN_CALLS` or more calls of one name (a ``record_function`` annotation
  or a top-level call, on one thread), the longest stretch with none of its children
  recorded, when it lasts :data:`MIN_NS` or more and :data:`FACTOR` times the median of
  the same stretch in its later calls (at most :data:`STRETCH_LATER` of them): lazy
  initialisation on the first call only (a compiled graph's guards, Triton kernels
  loading, Python imports), which records nothing. The cost runs from the stretch's
  start to the end of the record that ends it (a public 4-bit MLP benchmark: 2.47 ms
  with nothing recorded after the first call's Dynamo cache lookup, 41 µs in the later
  calls).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.findings.events import link, step_table
from hta.analysis.findings.gpu_cover import BLOCKING_COPY, idle_cover
from hta.analysis.findings.rule_tools import (
    COMPILED_CALL,
    MULTI_PROCESS_LOADER,
    WARM_UP,
    data_loader_rows,
    iterator_start_rows,
    name_matches,
)
from hta.analysis.gpu_work import COMM, rank_work_class
from hta.analysis.grouped import group_medians, medians_at
from hta.analysis.intervals import Cover, union_length
from hta.analysis.perf.calls import gpu_rows
from hta.analysis.rowmap import ancestor_pairs, has_marked_ancestor
from hta.analysis.side_columns import side_codes, side_slots
from hta.model.arrays import distinct, union
from hta.model.derived import derived
from hta.model.rules import KIND_CODE, RUNTIME_KINDS, kind_mask
from hta.model.trace import RankTrace, thread_keys

#: Shortest one-time cost (ns).
MIN_NS = 1_000_000


#: The first call of a top-level call is one-time when it ran at least this many times
#: the median of its later calls.
FACTOR = 10.0


#: Names of the calls that compile: Dynamo, Inductor, the backward compiled on its first
#: call.
COMPILE_NAMES = (r"^entire_(frame|backward)_compile|_compile\.compile_inner|compile_fx"
                 r"|^(Torch)?Dynamo(?! Cache Lookup)")


#: Names of set-up calls: one-time whatever their count.
SETUP = re.compile(
    r"^(cuda|hip)(StreamCreate|EventCreate)|^(cu|hip)(Module|Library)Load|^cuInit$"
    r"|^cuCtxCreate"
    r"|^cuDevicePrimaryCtxRetain|^(cublas|cublasLt|cudnn|miopen|rocblas|hipblas)Create"
    r"|^ncclCommInit|^nccl:init|torch/_dynamo/convert_frame\.py|^CompileFunction"
    r"|[Aa]utotune|cudnnFind|benchmark_fusion|" + COMPILE_NAMES
)


#: Convolution operators whose library may time its algorithms on the first call of a
#: shape (cuDNN with ``torch.backends.cudnn.benchmark = True``, MIOpen find).
AUTOTUNED_OPS = re.compile(r"(?i)cudnn_convolution|CudnnConvolution|miopen_convolution"
                           r"|MiopenConvolution")


EVENT_SYNC = re.compile(r"^(cuda|hip)EventSynchronize$")


#: Event synchronisations below a convolution that make it an autotuning call.
TUNING_SYNCS = 2


_LAUNCH = re.compile(r"Launch")


_ALLOC = re.compile(r"(?i)^(cuda|hip|cu)(Mem)?(Free|Malloc|Alloc|HostAlloc|MemAlloc)")


_CREATE = re.compile(r"(?i)Create|Init|PrimaryCtx")


_LOAD = re.compile(r"Module|Library")


_CALL_KINDS = ("cpu_op", *sorted(RUNTIME_KINDS))


RUNTIME_CALL_KINDS = tuple(sorted(RUNTIME_KINDS))


ANY_KINDS = (*_CALL_KINDS, "user_annotation", "python_function")


@dataclass(frozen=True)
class OneTime:
    """The one-time costs of a rank, by start: ``rows`` (event positions), ``start``,
    ``end``, ``idle`` (GPU idle ns inside each), ``call`` (the longest runtime call inside,
    -1 when none) and ``why`` (``autotune``, ``first``, ``first launch``, ``setup`` or
    ``warm-up``)."""

    rows: np.ndarray
    start: np.ndarray
    end: np.ndarray
    idle: np.ndarray
    call: np.ndarray
    why: np.ndarray

    @property
    def cover(self) -> Cover:
        """The union of the one-time spans."""
        return Cover(self.start, self.end)


def one_time_costs(rt: RankTrace) -> OneTime:
    """The rank's one-time costs (module docstring), over the whole trace; computed once
    per rank."""
    return derived(rt, "findings.one_time", lambda: _one_time(rt))


def in_one_time(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` starts inside a one-time cost of its rank."""
    ot = one_time_costs(rt)
    if not rows.size or not ot.rows.size:
        return np.zeros(rows.size, dtype=bool)
    ts = rt.column("ts")[rows]
    c = ot.cover
    k = np.searchsorted(c.s, ts, side="right") - 1
    kk = np.clip(k, 0, None)
    return (k >= 0) & (ts < c.e[kk])


def _empty() -> OneTime:
    z = np.zeros(0, dtype=np.int64)
    return OneTime(z, z, z, z, z, np.zeros(0, dtype=object))


def _one_time(rt: RankTrace) -> OneTime:
    ev = rt.events
    g = gpu_rows(rt)
    if g.size == 0 or not len(ev):
        return _empty()
    codes = rt.kind_codes()
    ts, end = rt.column("ts"), rt.column("end")
    dur = end - ts
    parent = link(rt, "parent")
    rows, reason, begin = _candidates(rt, g, codes, ts, end)
    if rows.size == 0:
        return _empty()
    rows, at = np.unique(rows, return_index=True)  # the first reason listed wins
    reason, begin = reason[at], begin[at]
    span = end[rows] - begin
    # a collective kernel waiting for a peer is no GPU work: it does not keep the GPU busy
    # through a one-time cost (a first launch while NCCL waits for another rank)
    work = g[rank_work_class(rt)[g] != COMM]
    busy = idle_cover(rt, Cover(np.zeros(0, np.int64), np.zeros(0, np.int64)), work)
    idle = span - busy.within(begin, end[rows])
    keep = (idle * 2 >= span) | (reason == "autotune")  # tuning runs trial kernels
    rows, reason, idle, begin = rows[keep], reason[keep], idle[keep], begin[keep]
    runtime = np.flatnonzero(kind_mask(codes, RUNTIME_CALL_KINDS))
    call, in_calls = _inner_calls(ev, rows, runtime)
    # a first call that spent half of its time or more in runtime calls, the longest of
    # them a wait (a synchronising call or a synchronous copy waits on work the trace may
    # not hold), is no one-time cost. Judged before nesting is: a first call left out
    # must not hide a set-up call inside it (a backward pass compiled on its first call)
    waits = np.zeros(rows.size, dtype=bool)
    has = call >= 0
    waits[has] = (codes[call[has]] == KIND_CODE["runtime_sync"]) | \
        name_matches(rt, call[has], BLOCKING_COPY)
    keep = (reason != "first") | ~(waits & (in_calls * 2 >= dur[rows]))
    rows, reason, idle, call, begin = rows[keep], reason[keep], idle[keep], call[keep], \
        begin[keep]
    # a first call holding a compilation (a backward pass compiled on its first call) is
    # that compilation: it is kept, the first call around it goes
    named = rows[name_matches(rt, rows, COMPILING)]
    if named.size:
        row, anc = ancestor_pairs(parent, named)
        holders = anc[anc != row]
        drop = (reason == "first") & np.isin(rows, holders)
        rows, reason, idle, call, begin = rows[~drop], reason[~drop], idle[~drop], \
            call[~drop], begin[~drop]
    # nested costs go, but the outermost compilation stays listed inside the compiled run
    # that holds it (the recompilation test and the note name it)
    compiling = name_matches(rt, rows, COMPILING)
    outer_compile = compiling.copy()
    outer_compile[compiling] = ~_nested(parent, rows[compiling])
    inner = _nested(parent, rows) & ~outer_compile
    rows, reason, idle, call, begin = rows[~inner], reason[~inner], idle[~inner], \
        call[~inner], begin[~inner]
    order = np.argsort(begin, kind="stable")
    return OneTime(rows[order], begin[order], end[rows][order], idle[order],
                   call[order], reason[order])


def _candidates(rt: RankTrace, g: np.ndarray, codes: np.ndarray, ts: np.ndarray,
                end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every candidate one-time cost with its reason and start, in the order the reasons
    win (a call both tuned and first is named by its tuning). A cost starts with its
    call, except a scripted call's first run with fusion groups, whose cost starts where
    its thread last recorded anything (:func:`_unrecorded_before_script`)."""
    dur = end - ts
    calls = np.flatnonzero(kind_mask(codes, _CALL_KINDS))
    top = top_level_calls(rt)
    first = _first_outliers(rt, top, ts, dur)
    if not len(step_table(rt)):  # one pass or a loop without steps: cold calls too
        first = union(first, _cold_calls(rt, calls, dur))
    loader = iterator_start_rows(rt)  # started once (every step: it recurs)
    if not 0 < loader.size < max(2, len(step_table(rt)) // 2):
        loader = loader[:0]
    anyk = np.flatnonzero(kind_mask(codes, ANY_KINDS) & (dur >= MIN_NS))
    found = [
        # a convolution timing its algorithms with events (cuDNN/MIOpen find)
        ("autotune", _autotuned(rt, link(rt, "parent"), calls, dur)),
        # the first launch of each kernel, far longer than the rank's launches
        ("first launch", _first_launches(rt, g, dur)),
        # first calls far longer than their later calls; cold calls of one pass
        ("first", first),
        # a long allocation or free in a call whose later calls allocate nothing long
        ("allocator", _allocator_growth(rt, top, codes, ts, dur)),
        # the first run of code right after it was compiled, or one that compiles inside
        # (a backward pass compiled on its first call): the compilation's tail
        ("setup", _first_compiled_runs(rt, codes, ts, end)),
        ("setup", loader),
        # a multi-process loader's first batch: its workers start and one makes it
        ("loader start", _first_batches(rt, ts, dur)),
        # a TorchScript function compiling its fusion groups, unrecorded
        ("script compile", _unrecorded_holders(rt, calls, ts, end, SCRIPT_FUSION)),
        # an operator whose library builds and loads kernels on first use (MIOpen)
        ("kernel build", _unrecorded_holders(rt, calls, ts, end, MODULE_LOAD)),
        # set-up calls and warm-up code, whatever their count
        ("setup", anyk[name_matches(rt, anyk, SETUP)]),
        ("warm-up", anyk[name_matches(rt, anyk, WARM_UP)]),
        # without steps: the first call of a runtime API, far slower than its later ones
        ("first", _first_runtime_calls(rt, codes, dur) if not len(step_table(rt))
         else loader[:0]),
    ]
    rows = np.concatenate([r for _, r in found]).astype(np.int64)
    reason = np.concatenate([np.full(r.size, w, dtype=object) for w, r in found])
    # a scripted call's first optimised run: its cost holds the gap before the call
    gaps, gap_start = _unrecorded_before_script(rt, calls, ts, end)
    # the first call of a repeated one whose thread recorded nothing for far longer
    stretch, stretch_start = (_first_call_stretches(rt, top, ts, end)
                              if not len(step_table(rt)) else (gaps[:0], gap_start[:0]))
    # (listed last: a call that a named reason also finds is named by it)
    return (np.concatenate([gaps, rows, stretch]),
            np.concatenate([np.full(gaps.size, "script compile", dtype=object), reason,
                            np.full(stretch.size, "first stretch", dtype=object)]),
            np.concatenate([gap_start, ts[rows], stretch_start]))


def _first_batches(rt: RankTrace, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """The first batch of a multi-process DataLoader (its first outermost data-loader span
    named :data:`~hta.analysis.findings.rule_tools.MULTI_PROCESS_LOADER`) when it is the
    trace's only one, or ran :data:`FACTOR` times the median of the later ones: the
    worker processes start and one of them makes the whole batch, which says nothing of
    the rate the workers reach once running."""
    rows = data_loader_rows(rt)
    rows = rows[name_matches(rt, rows, MULTI_PROCESS_LOADER)]
    if not rows.size:
        return rows
    rows = rows[~_nested(link(rt, "parent"), rows)]
    rows = rows[np.argsort(ts[rows], kind="stable")]
    later = dur[rows[1:]]
    if later.size and dur[rows[0]] < FACTOR * float(np.median(later)):
        return rows[:0]
    return rows[:1]


#: TorchScript's fusion groups and their fallbacks (NNC, nvFuser), as operators.
SCRIPT_FUSION = re.compile(r"^fallback_function$|^fused__|^prim::(TensorExpr\w*Group"
                           r"|CudaFusionGroup|FusionGroup)$")


#: Runtime calls loading kernel code (a library building its kernels on first use).
MODULE_LOAD = re.compile(r"^(cu|hip)(Module|Library)Load")


def _holders(rt: RankTrace, calls: np.ndarray, inner: re.Pattern[str]) -> np.ndarray:
    """The calls directly holding a call named by ``inner``, not named by it themselves,
    in row order."""
    groups = calls[name_matches(rt, calls, inner)]
    if not groups.size:
        return groups
    holders = distinct(link(rt, "parent")[groups])
    holders = holders[holders >= 0]
    return holders[~name_matches(rt, holders, inner)]


def _unrecorded_holders(rt: RankTrace, calls: np.ndarray, ts: np.ndarray, end: np.ndarray,
                        inner: re.Pattern[str]) -> np.ndarray:
    """Calls that hold a call named by ``inner`` (TorchScript fusion groups,
    :data:`SCRIPT_FUSION`; kernel code loads, :data:`MODULE_LOAD`) and spent
    :data:`MIN_NS` or more, and half of their time or more, with none of their children
    running: a compiler at work (TorchScript's profiling executor, MIOpen building its
    kernels for a new shape), which records nothing of it."""
    holders = _holders(rt, calls, inner)
    # only holders that could qualify, and each one's children from one sort
    holders = holders[end[holders] - ts[holders] >= MIN_NS]
    if not holders.size:
        return holders
    parent = link(rt, "parent")
    kids = np.flatnonzero(np.isin(parent, holders))
    kids = kids[np.argsort(parent[kids], kind="stable")]
    bounds = np.searchsorted(parent[kids], holders, side="left")
    stops = np.searchsorted(parent[kids], holders, side="right")
    out = []
    for h, a, b in zip(holders.tolist(), bounds.tolist(), stops.tolist(), strict=True):
        mine = kids[a:b]
        unrecorded = int(end[h] - ts[h]) - union_length(ts[mine], end[mine])
        if unrecorded >= MIN_NS and 2 * unrecorded >= end[h] - ts[h]:
            out.append(h)
    return np.asarray(out, dtype=np.int64)


def _unrecorded_before_script(rt: RankTrace, calls: np.ndarray, ts: np.ndarray,
                              end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first call of each name holding TorchScript fusion groups
    (:data:`SCRIPT_FUSION`: the executor optimised its graph for this run) when its
    thread recorded nothing for :data:`MIN_NS` or more, and for at least the call's own
    time, right before it: the optimisation and the fusion compile ran there, before
    the call's record began. Returns the calls and where their thread's gap starts."""
    none = np.zeros(0, dtype=np.int64)
    holders = _holders(rt, calls, SCRIPT_FUSION)
    if not holders.size:
        return none, none
    names = rt.column("name")
    holders = holders[np.lexsort((ts[holders], names[holders]))]
    holders = holders[np.r_[True, names[holders][1:] != names[holders][:-1]]]
    pid, tid = rt.column("pid"), rt.column("tid")
    recorded = np.flatnonzero(kind_mask(rt.kind_codes(), ANY_KINDS))
    # each thread's record ends, sorted: the last one before a call is one search away
    thread = thread_keys(pid[recorded], tid[recorded])
    order = np.lexsort((end[recorded], thread))
    thread, ends = thread[order], end[recorded][order]
    out, starts = [], []
    for h, th in zip(holders.tolist(), thread_keys(pid[holders], tid[holders]).tolist(),
                     strict=True):
        lo = int(np.searchsorted(thread, th, side="left"))
        hi = int(np.searchsorted(thread, th, side="right"))
        before = lo + int(np.searchsorted(ends[lo:hi], ts[h], side="right"))
        if before == lo:
            continue
        begin = int(ends[before - 1])
        gap = int(ts[h]) - begin
        if gap >= MIN_NS and gap >= end[h] - ts[h]:
            out.append(h)
            starts.append(begin)
    return np.asarray(out, dtype=np.int64), np.asarray(starts, dtype=np.int64)


#: A name needs this many calls for its first call's unrecorded stretch to be judged.
STRETCH_MIN_CALLS = 3
#: At most this many later calls of a name are measured for the reference stretch.
STRETCH_LATER = 50


def _first_call_stretches(rt: RankTrace, top: np.ndarray, ts: np.ndarray, end: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """The first call's unrecorded stretches (module docstring): for each one found, the
    record that ends it (the child recorded right after it; the call itself for a
    stretch that runs to its end) and where it starts."""
    none = np.zeros(0, dtype=np.int64)
    codes = rt.kind_codes()
    spans = union(top, np.flatnonzero(codes == KIND_CODE["user_annotation"]))
    spans = spans[end[spans] > ts[spans]]
    if spans.size < STRETCH_MIN_CALLS:
        return none, none
    thread = thread_keys(rt.column("pid")[spans], rt.column("tid")[spans])
    names = rt.column("name")[spans].astype(np.int64)
    order = np.lexsort((ts[spans], names, thread))
    spans, names, thread = spans[order], names[order], thread[order]
    head = np.flatnonzero(np.r_[True, (names[1:] != names[:-1])
                                | (thread[1:] != thread[:-1])])
    sizes = np.diff(np.r_[head, spans.size])
    # only names called often enough whose first call could hold a long stretch
    pick = (sizes >= STRETCH_MIN_CALLS) & (end[spans[head]] - ts[spans[head]] >= MIN_NS)
    if not pick.any():
        return none, none
    groups = [spans[h:h + min(n, STRETCH_LATER + 1)]
              for h, n in zip(head[pick].tolist(), sizes[pick].tolist(), strict=True)]
    calls = distinct(np.concatenate(groups))
    # the recorded children of every measured call, by parent then start: one sort
    parent = link(rt, "parent")
    kids = np.flatnonzero(kind_mask(codes, ANY_KINDS) & np.isin(parent, calls))
    kids = kids[np.lexsort((ts[kids], parent[kids]))]
    lo = np.searchsorted(parent[kids], calls, side="left")
    hi = np.searchsorted(parent[kids], calls, side="right")
    at = {int(c): (int(a), int(b)) for c, a, b in zip(calls, lo, hi, strict=True)}
    out, starts = [], []
    for group in groups:
        gaps = [_longest_unrecorded(kids[slice(*at[int(c)])], ts, end, int(c))
                for c in group]
        first = gaps[0]
        later = float(np.median([g[0] for g in gaps[1:]]))
        if first[0] >= MIN_NS and first[0] >= FACTOR * later:
            out.append(first[2])
            starts.append(first[1])
    return np.asarray(out, dtype=np.int64), np.asarray(starts, dtype=np.int64)


def _longest_unrecorded(kids: np.ndarray, ts: np.ndarray, end: np.ndarray, call: int
                        ) -> tuple[int, int, int]:
    """The longest stretch of ``call`` with none of its recorded children (``kids``, by
    start) running: ``(length, start, the child that ends it, or the call when it runs
    to its end)``."""
    # the end of the record so far before each child (the call's start before the first)
    reach = np.maximum.accumulate(np.r_[ts[call], end[kids]])
    gaps = np.r_[ts[kids], end[call]] - reach
    i = int(np.argmax(gaps))
    return int(gaps[i]), int(reach[i]), int(kids[i]) if i < kids.size else call


def _autotuned(rt: RankTrace, parent: np.ndarray, calls: np.ndarray, dur: np.ndarray
               ) -> np.ndarray:
    """Convolution operators of at least :data:`MIN_NS` with :data:`TUNING_SYNCS` or more
    event synchronisations below them: the library timing its algorithms (cuDNN's
    ``benchmark=True`` find, MIOpen's find), once per shape."""
    conv = calls[dur[calls] >= MIN_NS]
    conv = conv[name_matches(rt, conv, AUTOTUNED_OPS)]
    if not conv.size:
        return conv
    syncs = calls[name_matches(rt, calls, EVENT_SYNC)]
    if not syncs.size:
        return np.zeros(0, dtype=np.int64)
    row, anc = ancestor_pairs(parent, syncs)
    count = np.bincount(anc[anc != row], minlength=parent.size)
    return conv[count[conv] >= TUNING_SYNCS]


#: Later calls of the same operator (name and input shapes) without a long allocation
#: that make a long allocation in an earlier call allocator growth.
GROWTH_LATER = 2


def _allocator_growth(rt: RankTrace, top: np.ndarray, codes: np.ndarray, ts: np.ndarray,
                      dur: np.ndarray) -> np.ndarray:
    """Allocator calls (``cudaMalloc``, ``cudaFree``, ...) of at least :data:`MIN_NS`
    whose top-level call has :data:`GROWTH_LATER` or more later calls of its name and input
    shapes with no such allocator call inside: the caching allocator growing (or a
    library's first workspace) on first use, which does not repeat."""
    runtime = np.flatnonzero(kind_mask(codes, RUNTIME_CALL_KINDS) & (dur >= MIN_NS))
    alloc = runtime[name_matches(rt, runtime, _ALLOC)]
    if not alloc.size or not top.size:
        return alloc
    row, anc = ancestor_pairs(link(rt, "parent"), alloc)
    at_top = np.isin(anc, top)
    owner = np.full(alloc.size, -1, dtype=np.int64)
    slot = np.searchsorted(alloc, row[at_top])  # alloc is sorted (flatnonzero)
    owner[slot] = anc[at_top]
    keys = call_keys(rt, top)
    key_of = dict(zip(top.tolist(), keys.tolist(), strict=True))
    allocating = set(owner[owner >= 0].tolist())
    out = []
    for a, o in zip(alloc.tolist(), owner.tolist(), strict=True):
        if o < 0:
            continue
        same = top[(keys == key_of[o]) & (ts[top] > ts[o])]
        clean = [c for c in same.tolist() if c not in allocating]
        if len(clean) >= GROWTH_LATER:
            out.append(a)
    return np.asarray(out, dtype=np.int64)


def _first_launches(rt: RankTrace, g: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Launch calls of at least :data:`MIN_NS` that are the first launch of their kernel
    (by name) and ran :data:`FACTOR` times the median launch call of the rank or more:
    module loading on the first launch."""
    pos = link(rt, "index_correlation")[g]
    ok = pos >= 0
    if not ok.any():
        return np.zeros(0, dtype=np.int64)
    launch, kernel = pos[ok], rt.column("name")[g[ok]]
    ts = rt.column("ts")
    order = np.lexsort((ts[launch], kernel))
    launch, kernel = launch[order], kernel[order]
    head = np.r_[True, kernel[1:] != kernel[:-1]]
    first = distinct(launch[head])
    seen = np.zeros(dur.size, dtype=bool)  # each launch call once (a graph's launches many)
    seen[launch] = True
    median = float(np.median(dur[seen]))
    return first[(dur[first] >= MIN_NS) & (dur[first] >= FACTOR * median)]


def top_level_calls(rt: RankTrace) -> np.ndarray:
    """The rank's calls (operators and runtime calls) with no call among their ancestors
    (Python frames and annotations do not count), by row; computed once per rank (the
    first-call test and the iterations both read them)."""
    return derived(rt, "findings.top_level_calls", lambda: _top_level(rt))


def _top_level(rt: RankTrace) -> np.ndarray:
    codes = rt.kind_codes()
    calls = np.flatnonzero(kind_mask(codes, _CALL_KINDS))
    is_call = np.zeros(len(rt.events), dtype=bool)
    is_call[calls] = True
    return calls[~has_marked_ancestor(link(rt, "parent"), calls, is_call)]


def _first_outliers(rt: RankTrace, top: np.ndarray, ts: np.ndarray, dur: np.ndarray
                    ) -> np.ndarray:
    """The first call of each (name, input shapes) key among ``top`` that ran at least
    :data:`MIN_NS` and :data:`FACTOR` times the median of the key's later calls."""
    long_ = dur[top] >= MIN_NS
    if not long_.any():
        return np.zeros(0, dtype=np.int64)
    key = call_keys(rt, top)
    order = np.lexsort((ts[top], key))
    k, d, r = key[order], dur[top][order], top[order]
    head = np.r_[True, k[1:] != k[:-1]]
    cand = head & (d >= MIN_NS)
    med = medians_at(*group_medians(k[~head], d[~head]), k[cand])
    # a shape called once (an optimizer's parameters, the layers of one pass: each its
    # own shape) is judged against the calls of its name that were not a shape's first
    # (warm calls), else the later calls of its name
    names = rt.column("name")[r].astype(np.int64)
    warm = medians_at(*group_medians(names[~head], d[~head]), names[cand])
    first_of_name = np.zeros(r.size, dtype=bool)
    by_name = np.lexsort((ts[r], names))
    first_of_name[by_name[np.r_[True, names[by_name][1:] != names[by_name][:-1]]]] = True
    later = medians_at(*group_medians(names[~first_of_name], d[~first_of_name]), names[cand])
    fallback = np.where(np.isnan(warm), later, warm)
    alone = np.isnan(med)
    alone[alone] = first_of_name[cand][alone] | ~np.isnan(warm[alone])
    med[alone] = fallback[alone]
    ok = ~np.isnan(med)
    ok[ok] = d[cand][ok] >= FACTOR * med[ok]
    # a new shape in step after step (a decoder's growing sequence, variable batches)
    # recurs: slow first calls of one name in two steps or more are no one-time cost
    if ok.any() and len(step_table(rt)):
        step = rt.column("iteration")[r[cand]]
        frame = pd.DataFrame({"name": names[cand][ok], "step": step[ok]})
        steps_per_name = frame.groupby("name")["step"].nunique()
        ok &= ~(steps_per_name.reindex(names[cand]).to_numpy() >= 2)
    return r[cand][ok]


def _first_compiled_runs(rt: RankTrace, codes: np.ndarray, ts: np.ndarray, end: np.ndarray
                         ) -> np.ndarray:
    """The first run of each compiled function (:data:`COMPILED_CALL`, by name: the
    forward's region, the backward) after a compilation (:data:`COMPILING`) ends: the run
    that loads its new kernels and warms Inductor's wrappers, once; and a compiled call
    that holds a compilation (the backward pass, compiled on its first call, then run)."""
    calls = np.flatnonzero(kind_mask(codes, ANY_KINDS))
    comp = calls[name_matches(rt, calls, COMPILING)]
    if not comp.size:
        return np.zeros(0, dtype=np.int64)
    ran = calls[name_matches(rt, calls, COMPILED_CALL)]
    ran = ran[np.argsort(ts[ran], kind="stable")]
    held = Cover(ts[comp], end[comp])
    inside = held.within(ts[ran], end[ran])
    # a run that holds a compilation of its own (and is not inside one)
    holds = ran[np.isin(ran, ancestor_pairs(link(rt, "parent"), comp)[1])]
    ran = ran[inside == 0]  # not the runs inside a compilation
    # per compiled function (its name), its first run after each compilation
    done = np.sort(end[comp])
    names = rt.column("name")[ran]
    seen: dict[int, int] = {}  # name -> index of the last compilation it ran after
    first = []
    for r, n in zip(ran.tolist(), names.tolist(), strict=True):
        k = int(np.searchsorted(done, ts[r], side="right"))  # compilations before it
        if k and seen.get(int(n), 0) < k:
            first.append(r)
        seen[int(n)] = k
    return union(np.asarray(first, dtype=np.int64), holds)


#: A name needs this many top-level calls for its fast calls to be a reference.
COLD_MIN_CALLS = 4


#: The quantile of a name's call durations taken as its fast (warm) calls.
COLD_QUANTILE = 0.25


def _cold_calls(rt: RankTrace, top: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """On a rank without ProfilerStep: calls (``top``: operators and runtime calls, nested
    or not: a first allocation inside a compiled region) of at least :data:`MIN_NS` that
    ran :data:`FACTOR` times the fast calls of their name (its :data:`COLD_QUANTILE`
    quantile, over :data:`COLD_MIN_CALLS` calls or more), whatever their shapes: a cold
    call of one pass (cuDNN building the plan of each new shape, 2-10 ms against 0.1 ms
    for a shape it has seen), which a second pass would not pay. Traces without
    recorded shapes cannot tell the first call of each shape otherwise."""
    long_ = top[dur[top] >= MIN_NS]
    if not long_.size:
        return long_
    names = rt.column("name")
    ref = pd.Series(dur[top]).groupby(names[top])
    count, fast = ref.size(), ref.quantile(COLD_QUANTILE)
    n = count.reindex(names[long_]).to_numpy()
    q = fast.reindex(names[long_]).to_numpy()
    return long_[(n >= COLD_MIN_CALLS) & (dur[long_] >= FACTOR * q)]


def _first_runtime_calls(rt: RankTrace, codes: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """On a rank without ProfilerStep: the first call of each runtime API that is neither
    a launch nor a synchronisation (``runtime_other``: an occupancy query, an attribute
    read, an allocation) when it ran :data:`MIN_NS` or more and :data:`FACTOR` times the
    median of its later calls (or has none): a library's set-up on first use (cuBLAS
    querying the device inside the first ``aten::linear``); a free in every call recurs."""
    other = np.flatnonzero(codes == KIND_CODE["runtime_other"])
    if not other.size:
        return other
    names = rt.column("name")[other]
    _, first = np.unique(names, return_index=True)  # rows are in start order
    rows = other[first]
    rows = rows[dur[rows] >= MIN_NS]
    if not rows.size:
        return rows
    later = pd.Series(dur[other]).groupby(names).apply(
        lambda d: float(np.median(d.to_numpy()[1:])) if d.size > 1 else 0.0)
    ref = later.reindex(rt.column("name")[rows]).to_numpy()
    return rows[FACTOR * ref <= dur[rows]]


def call_keys(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """One integer per distinct (name, recorded input shapes) of ``rows``."""
    names = rt.column("name")[rows].astype(np.int64)
    table, slot = side_slots(rt, "op_args")
    if not len(table) or "input_dims" not in table:
        return names
    where = slot[rows]
    codes, empty = side_codes(rt, "op_args", "input_dims")  # an integer per distinct text
    # numbered by first appearance among the rows, as a factorisation of the texts is
    dcode, uniq = pd.factorize(np.where(where >= 0, codes[np.maximum(where, 0)], empty))
    return names * (len(uniq) + 1) + dcode


def _nested(parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` is nested in another of ``rows``."""
    mark = np.zeros(parent.size, dtype=bool)
    mark[rows] = True
    return has_marked_ancestor(parent, rows, mark)


def _inner_calls(ev: pd.DataFrame, rows: np.ndarray, runtime: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The longest runtime call inside each cost on its thread (the cost itself when it is
    a runtime call; -1 when none), and the time of the runtime calls inside (ns)."""
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    tid = ev["tid"].to_numpy()
    rts = ts[runtime]
    order = np.argsort(rts, kind="stable")
    runtime, rts = runtime[order], rts[order]
    out = np.full(rows.size, -1, dtype=np.int64)
    total = np.zeros(rows.size, dtype=np.int64)
    for i, r in enumerate(rows.tolist()):
        a, b = np.searchsorted(rts, [ts[r], end[r]], side="left")
        inside = runtime[a:b]
        inside = inside[(end[inside] <= end[r]) & (tid[inside] == tid[r])]
        if inside.size:
            out[i] = int(inside[np.argmax(end[inside] - ts[inside])])
            total[i] = union_length(ts[inside], end[inside])
    return out, total


def cause_text(rt: RankTrace, name: str, call: str, first_call: bool = False,
               call_share: float = 1.0, why: str = "") -> str:
    """What a one-time cost most likely is, from its own name and its longest runtime
    call's (``first_call``: that call is the rank's first runtime call; ``call_share``:
    the share of the cost that call took: under half, the call is not what was slow;
    ``why``: the reason it was found, :attr:`OneTime.why`)."""
    if why == "script compile":
        return ("TorchScript's profiling executor optimising the graph and compiling the "
                "fusion groups it runs (fallback_function, fused__*): nothing is recorded "
                "while it compiles, on the first runs only")
    if why == "first stretch":
        return ("in the first of a repeated call, unrecorded far longer than in its later "
                "calls: lazy initialisation on the first call only (a compiled graph's "
                "guards, kernels loading, Python imports)")
    if why == "kernel build":
        return ("the library building and loading its kernels on first use (a kernel "
                "code load inside; MIOpen compiles its kernels for a new shape): nothing "
                "is recorded while it compiles")
    if why == "loader start" or MULTI_PROCESS_LOADER.search(name):
        return ("the first batch of a multi-process DataLoader: its worker processes "
                "start and one of them makes the whole batch; the rate the workers reach "
                "once running is not in it")
    if COMPILED_CALL.search(name):
        return ("the first run of freshly compiled code: its kernels loaded, Inductor's "
                "wrappers warmed")
    if SETUP.search(name) and not SETUP.search(call or "-"):
        call = name
    elif call_share < 0.5 and not WARM_UP.search(name):
        return ("the first call in the trace, far longer than its later calls, not in a "
                "runtime call: lazy initialisation in Python or the dispatcher, or a "
                "one-off stall (garbage collection, the OS)")
    if re.search(r"(?i)dynamo|compile|inductor", call):
        return "compilation"
    if re.search(r"(?i)autotune|cudnnFind|benchmark", call):
        return "autotuning"
    if AUTOTUNED_OPS.search(name) and EVENT_SYNC.search(call or "-"):
        return ("autotuning: the library times its algorithms for a new shape "
                "(torch.backends.cudnn.benchmark = True)")
    if re.search(r"(?i)nccl", call):
        return "communicator set-up"
    if _LOAD.search(call) and not _LAUNCH.search(call):
        return "module loading"
    if first_call:
        return "CUDA/HIP context creation: the rank's first runtime call"
    if _LAUNCH.search(call):
        return "first launch of a kernel: CUDA/HIP context or lazy module loading"
    if _ALLOC.search(call):
        return ("allocator: a library's first workspace (cuBLAS/cuDNN) or the caching "
                "allocator growing")
    if _CREATE.search(call):
        return "library set-up: stream, event or handle creation"
    if WARM_UP.search(name):
        return "warm-up code"
    return "the first call of the operator"


#: Calls that compile.
COMPILING = re.compile(COMPILE_NAMES)
