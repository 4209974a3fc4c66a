"""The ``warmup`` note: one-time costs in the analysed window, reported as such.

Traces taken with a plain ``torch.profiler.profile()`` around the first iterations hold
the costs a process pays once: the first launch of a kernel (CUDA context, lazy module
loading), the first use of cuBLAS/cuDNN (handles, workspaces: a ``cudaFree`` or
``cudaMalloc`` inside the first ``aten::linear``), stream and event creation, compilation
and autotuning, communicator set-up. They are not the steady state, and no rule may sell
them as a recurring saving.

A **one-time cost** is a CPU operator or runtime call of the rank that runs at least
:data:`MIN_NS` (1 ms), leaves the GPU idle (no kernel, copy or memset on any stream, graph
replays counted busy) for at least half of its span (autotuning excepted: it runs trial
kernels), and is one of:

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
* a DataLoader iterator's start-up (:func:`~hta.analysis.findings.rule_tools.
  iterator_start_rows`: worker processes started, first batches prefetched) when the
  trace starts iterators fewer than twice, and fewer than once every two steps (an
  iterator started every step recurs: ``data_loading`` names it);
* an annotation, operator or Python frame named warm-up
  (:data:`~hta.analysis.findings.rule_tools.WARM_UP`).

The note names each cost (the call, its duration, when in the window) and the runtime
call inside it that took the most time, with what that call means (first kernel launch:
module loading; allocator: a library workspace or the caching allocator growing; stream,
event or handle creation: library set-up). Its claim is the GPU idle time inside the
costs: the engine gives it first to the note (it holds no saving), so every other rule's
saving leaves this time out, and ``host_sync`` leaves out blocking calls inside one-time
costs. The note is shown when that idle time is at least :data:`MIN_SHARE` of the window.

**The steady state.** On a rank without ``ProfilerStep`` spans the analysed window
(:func:`~hta.analysis.findings.base.analysis_window`) is the steady state
(:func:`steady_window`). It ends at the later of the end of the last GPU work and the end
of the last iteration (what the host does after both, tear-down or the profiler
stopping, is no iteration), and starts at the later of two points:
the end of the latest one-time cost after which the window keeps the work, and the
first iteration after the *warm-up iterations*, where that keeps the work too. In a
trace of one iteration only a leading stretch of one-time costs is cut: the window starts
at the end of the latest one-time cost that ends before the first GPU work launched
outside one-time costs (:func:`_first_work`), so no work of the pass is left out, or of
code the user named warm-up when GPU work follows it that drops no recurring work. A start
*keeps the work* (:func:`_work_kept`) when at least :data:`MIN_STEADY_WORK` (a quarter) of
the rank's GPU *time* starts after it (durations, never event counts: a thousand
optimizer kernels after a late one-time cost are not the GEMMs before it; code named
warm-up is cut whatever its share), and the work that recurs before it and never after
it (told apart by the top-level call that launched it, run at two separate times) is
under :data:`MAX_DROPPED_RECURRING` of that time. The iterations are found by repetition
(:func:`iterations_found`): the rank's top-level calls repeat with a period, and one call
that runs once a period marks where each iteration starts; the leading iterations that ran at least
:data:`WARM_ITERATION_FACTOR` times the median of the later ones are warm-up, whatever
made them slow (many first calls each too short to judge alone, the optimizer creating
its state, a backward pass compiled on its first call). A start inside an iteration
moves on to the next iteration, so the window holds whole iterations. The whole trace
when there is neither.

**One iteration.** A repeat is an iteration only when it repeats the loop, not a layer
(:func:`_one_pass`): a repeat whose every start lies under one module call (a Python
frame ``nn.Module: ...`` or a module's ``forward``), or one with work that runs nowhere
inside it both before it and after it (an embedding before the layers and a head after
them), is a repeat inside one pass. A trace with no ProfilerStep and no loop is *one
iteration* (:data:`ONE_ITERATION`, said by :func:`window_text`): no warm-up is cut by
repetition, only the one-time costs above.

The note lists the costs and the warm-up iterations from the start of the trace (what
the window leaves out) and says where the window starts; :func:`window_text` says which
window the findings describe, with its iterations.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.findings.base import (
    Finding,
    FindingRule,
    SteadyState,
    analysis_window,
    link,
    step_table,
    use_steady_state,
)
from hta.analysis.findings.claims import claim_outside
from hta.analysis.findings.gpu_cover import BLOCKING_COPY, idle_cover
from hta.analysis.findings.rule_tools import (
    COMPILED_CALL,
    WARM_UP,
    fmt_steps,
    fmt_time,
    iterator_start_rows,
    name_matches,
    step_tuple,
    steps_text,
)
from hta.analysis.gpu_work import COMM, as_list, work_class
from hta.analysis.intervals import Cover, union_length
from hta.analysis.perf.calls import gpu_rows
from hta.analysis.rowmap import ancestor_pairs, has_marked_ancestor
from hta.model.derived import derived
from hta.model.rules import KIND_CODE, RUNTIME_KINDS, kind_mask
from hta.model.selection import StepList
from hta.model.trace import RankTrace

#: Shortest one-time cost (ns).
MIN_NS = 1_000_000
#: The first call of a top-level call is one-time when it ran at least this many times
#: the median of its later calls.
FACTOR = 10.0
#: Share of the window the one-time idle time must reach for the note.
MIN_SHARE = 0.005
#: Names of the calls that compile: Dynamo, Inductor, the backward compiled on its first
#: call.
COMPILE_NAMES = (r"^entire_(frame|backward)_compile|_compile\.compile_inner|compile_fx"
                 r"|^(Torch)?Dynamo(?! Cache Lookup)")
#: Names of set-up calls: one-time whatever their count.
SETUP = re.compile(
    r"^(cuda|hip)(StreamCreate|EventCreate)|^cu(Module|Library)Load|^cuInit$|^cuCtxCreate"
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
_RUNTIME_KINDS = tuple(sorted(RUNTIME_KINDS))
_ANY_KINDS = (*_CALL_KINDS, "user_annotation", "python_function")


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
    ts = rt.events["ts"].to_numpy()[rows]
    c = ot.cover
    k = np.searchsorted(c.s, ts, side="right") - 1
    kk = np.clip(k, 0, None)
    return (k >= 0) & (ts < c.e[kk])


#: Share of the rank's GPU work (by count) that must start after the one-time costs for
#: the steady state to be the window of a trace without ProfilerStep.
MIN_STEADY_WORK = 0.25


def steady_window(rt: RankTrace) -> tuple[int, int, int] | None:
    """The steady state of a rank without ``ProfilerStep`` spans: ``(start, end, row)``
    to the later of the end of its last GPU work and the end of its last iteration
    (:func:`_steady_end`), from the later of the end of its latest one-time cost
    (``row``) after which at least :data:`MIN_STEADY_WORK` of its GPU work starts and the
    first iteration after the warm-up iterations (:func:`iterations_found`; ``row`` -1),
    moved on to the start of the next iteration when the trace repeats one; None when
    the rank has neither (the window is then the whole trace)."""
    return derived(rt, "findings.steady_window", lambda: _steady(rt))


def _steady(rt: RankTrace) -> tuple[int, int, int] | None:
    ev = rt.events
    if not len(ev) or not gpu_rows(rt).size:  # no GPU work: nothing it describes
        return None
    end = int(ev["end"].max())
    start: int | None = None
    row = -1
    ot = one_time_costs(rt)
    keeps = _work_kept(rt)
    it = iterations_found(rt)
    if it is None:
        # one iteration: only a leading stretch of one-time costs is cut (all the work
        # outside them is the pass)
        first = _first_work(rt)
        lead = np.flatnonzero(ot.end <= first)
        # code the user named warm-up is cut wherever it ends, if GPU work follows it
        named = np.flatnonzero((ot.why == "warm-up") & (ot.end < int(ev["end"].max())))
        named = named[[keeps(int(ot.end[k]), True) for k in named.tolist()]]
        lead = np.union1d(lead, named)
        if lead.size:
            i = int(lead[np.argmax(ot.end[lead])])
            start, row = int(ot.end[i]), int(ot.rows[i])
    else:
        for i in np.argsort(-ot.end, kind="stable").tolist():
            if keeps(int(ot.end[i]), ot.why[i] == "warm-up"):
                start, row = int(ot.end[i]), int(ot.rows[i])
                break
    if it is None:
        return None if start is None else (start, _steady_end(rt, None, start, end), row)
    if start is not None:  # from the next iteration on: whole iterations
        k = int(np.searchsorted(it.starts, start, side="left"))
        if k < it.starts.size:
            start = int(it.starts[k])
    if it.warm_up and (start is None or it.steady_start > start) and \
            keeps(it.steady_start):
        start, row = it.steady_start, -1
    return None if start is None else (start, _steady_end(rt, it, start, end), row)


def _first_work(rt: RankTrace) -> int:
    """When the first GPU work not launched inside a one-time cost was launched (its
    launch call's start; the work's own start where the trace has no launch)."""
    ev = rt.events
    g = gpu_rows(rt)
    launch = link(rt, "index_correlation")[g]
    at = ev["ts"].to_numpy()[g].copy()
    has = launch >= 0
    at[has] = ev["ts"].to_numpy()[launch[has]]
    once = np.zeros(g.size, dtype=bool)
    once[has] = in_one_time(rt, launch[has])
    rest = at[~once]
    return int(rest.min()) if rest.size else int(ev["end"].max())


#: Share of the rank's GPU time that work which recurs before a candidate start of the
#: steady state and never runs after it may reach: more, and the start would drop work
#: that recurs.
MAX_DROPPED_RECURRING = 0.05


def _work_kept(rt: RankTrace) -> Callable[..., bool]:
    """Whether a start of the steady state keeps the work:

    * at least :data:`MIN_STEADY_WORK` of the rank's GPU time (kernel, copy and memset
      durations, not counts: a thousand optimizer kernels are not the GEMMs) starts at or
      after it, unless the start ends code the user named warm-up (``named``);
    * the work that recurs before it and never runs after it takes under
      :data:`MAX_DROPPED_RECURRING` of that time. Work is told apart by the top-level
      call that launched it, its name and input shapes (:func:`_work_keys`); it recurs
      when it runs at two separate times, with other work between them (sixteen weight
      copies back to back run once); work launched inside a one-time cost (autotuning's
      trials) does not count.
    """
    ev = rt.events
    g = gpu_rows(rt)
    ts = ev["ts"].to_numpy()[g]
    dur = (ev["end"].to_numpy() - ev["ts"].to_numpy())[g]
    launch = link(rt, "index_correlation")[g]
    names = _work_keys(rt, g, launch)
    once = np.zeros(g.size, dtype=bool)
    has = launch >= 0
    once[has] = in_one_time(rt, launch[has])
    total = float(dur.sum())

    def keeps(start: int, named: bool = False) -> bool:
        after = ts >= start
        if not after.any() or (not named and
                               float(dur[after].sum()) < MIN_STEADY_WORK * total):
            return False
        before = ~after & ~once
        gone = ~np.isin(names, names[after]) & before
        if not gone.any():
            return True
        # work recurs when it runs at two separate times: in two runs with other work
        # between them (not sixteen weight copies back to back)
        seq = names[before][np.argsort(ts[before], kind="stable")]
        heads = seq[np.r_[True, seq[1:] != seq[:-1]]]
        uniq, runs = np.unique(heads, return_counts=True)
        recurring = np.isin(names, uniq[runs >= 2]) & gone
        return float(dur[recurring].sum()) < MAX_DROPPED_RECURRING * total

    return keeps


def _work_keys(rt: RankTrace, g: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """One integer per distinct piece of GPU work among rows ``g`` (their launch calls
    ``launch``, -1 when none): the name and input shapes of the top-level call that
    launched it, else the kernel's name."""
    names = rt.events["name"].to_numpy()[g].astype(np.int64)
    keys = -1 - names  # never equal to a call's key (those are >= 0)
    has = np.flatnonzero(launch >= 0)
    if not has.size:
        return keys
    top = top_level_calls(rt)
    row, anc = ancestor_pairs(link(rt, "parent"), launch[has])
    at_top = np.isin(anc, top)
    owner = np.full(len(rt.events), -1, dtype=np.int64)
    owner[row[at_top]] = anc[at_top]
    calls = owner[launch[has]]
    found = calls >= 0
    if found.any():
        keys[has[found]] = _keys(rt, calls[found])
    return keys


def _steady_end(rt: RankTrace, it: Iterations | None, start: int, end: int) -> int:
    """Where the steady state ends: the later of the end of the last GPU work and the end
    of the last iteration (when the trace repeats one), at most the end of the trace;
    what the host does after both (tear-down, the profiler stopping) is no iteration."""
    g = gpu_rows(rt)
    stop = int(rt.events["end"].to_numpy()[g].max()) if g.size else end
    if it is not None:
        stop = max(stop, it.end)
    return min(end, stop) if stop > start else end


def iteration_windows(rt: RankTrace) -> list[tuple[int, int]]:
    """The ``(start, end)`` (ns) of each iteration of a rank without ProfilerStep inside
    its analysis window, when two or more are found (:func:`iterations_found`) and they
    cover :data:`MIN_ITERATION_COVER` of it or more; else the analysis window alone. The
    replay measures each finding's saving per window, and the recurring saving is the
    median over them."""
    lo, hi = analysis_window(rt)
    it = iterations_found(rt)
    if it is None:
        return [(lo, hi)]
    bounds = np.r_[it.starts, it.end]
    keep = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
            if a >= lo and b <= hi]
    covered = sum(b - a for a, b in keep)
    if len(keep) < 2 or covered < MIN_ITERATION_COVER * (hi - lo):
        return [(lo, hi)]
    return keep


#: Share of the analysis window the iterations must cover for the replay to measure the
#: savings iteration by iteration (a repeat over a small part of it is not the loop).
MIN_ITERATION_COVER = 0.8


#: Top-level calls of the main thread looked at for the repeating iteration.
MAX_SEQUENCE = 20_000
#: Candidate periods scored when looking for the repeating iteration (the smallest
#: distances between two calls of the same name that occur at least twice).
MAX_PERIODS = 256
#: A leading iteration is warm-up when it ran at least this many times the median of the
#: iterations after the first.
WARM_ITERATION_FACTOR = 2.0


@dataclass(frozen=True)
class Iterations:
    """The repeating iteration of a rank without ProfilerStep (:func:`iterations_found`).

    ``starts`` (ns) are the starts of the iterations: each call of the *anchor*, the
    top-level call that runs once per repetition and is seen first in the trace;
    ``end`` is where the last one ends (the end of the last call of the repeating region
    on that thread). ``calls`` is the number of top-level calls a repetition holds and
    ``warm_up`` how many leading iterations ran at least :data:`WARM_ITERATION_FACTOR`
    times the median of the iterations after the first."""

    starts: np.ndarray
    end: int
    calls: int
    anchor: int
    warm_up: int

    @property
    def durations(self) -> np.ndarray:
        """Each iteration's duration (ns)."""
        return np.diff(np.r_[self.starts, self.end])

    @property
    def median_ns(self) -> int:
        """The median duration of the iterations after the warm-up ones."""
        d = self.durations[self.warm_up:]
        return int(np.median(d)) if d.size else 0

    @property
    def steady_start(self) -> int:
        """The start of the first iteration after the warm-up ones."""
        return int(self.starts[min(self.warm_up, self.starts.size - 1)])

    def count_in(self, window: tuple[int, int]) -> int:
        """How many iterations start inside ``window``."""
        return int(((self.starts >= window[0]) & (self.starts < window[1])).sum())


def iterations_found(rt: RankTrace) -> Iterations | None:
    """The repeating iteration of the rank's top-level calls (operators and runtime calls
    with no call around them), on the thread that runs the loop (of the threads with a
    quarter of the most top-level calls or more, the one whose first call comes first),
    its first
    :data:`MAX_SEQUENCE`: the period ``p`` of the longest run where each call's name is
    the name ``p`` calls later (the smallest such ``p`` within 5 % of the longest run,
    among the distances between calls of the same name); the anchor is the call seen
    first in the trace among those that occur once a period; the iterations run from one
    call of the anchor to the next. A warm-up iteration (a first call of an operator, a
    library's set-up, compilation, allocator growth, the optimizer's state) is longer
    than the others, so the run starts after it but the anchor's calls still mark it.
    None when nothing repeats at least twice, or when the iterations span less than half
    of the thread's top-level calls (a short repeat inside one pass, not a loop)."""
    return derived(rt, "findings.iterations", lambda: _iterations(rt))


def _iterations(rt: RankTrace) -> Iterations | None:
    ev = rt.events
    if not len(ev):
        return None
    top = top_level_calls(rt)
    ts, end, tid = ev["ts"].to_numpy(), ev["end"].to_numpy(), ev["tid"].to_numpy()
    # what runs inside compilation, autotuning or set-up (the compiler's own allocations
    # and trial runs) is not the loop
    ot = one_time_costs(rt)
    named = np.isin(ot.why, ("setup", "warm-up", "autotune"))
    if named.any():
        held = Cover(ot.start[named], ot.end[named])
        top = top[held.within(ts[top], end[top]) < end[top] - ts[top]]
    if top.size < 4:
        return None
    # the thread that runs the loop: of the threads with a quarter of the most top-level
    # calls or more, the one whose first call comes first (the main thread, not the
    # autograd engine's thread that it hands the backward pass to)
    threads, counts = np.unique(tid[top], return_counts=True)
    busy = threads[counts * 4 >= counts.max()]
    first = np.asarray([ts[top][tid[top] == t].min() for t in busy.tolist()])
    top = top[tid[top] == busy[np.argmin(first)]]
    top = top[np.argsort(ts[top], kind="stable")][:MAX_SEQUENCE]
    seq = ev["name"].to_numpy()[top].astype(np.int64)
    period, run_start, run = _period(seq)
    if period == 0:
        return None
    first = seq[run_start:run_start + period]
    names, count = np.unique(first, return_counts=True)
    once = names[count == 1]
    if not once.size:
        return None
    # the anchor: of the names that occur once a period, the one seen first in the trace
    seen = np.flatnonzero(np.isin(seq, once))[0]
    anchor = int(seq[seen])
    region_end = run_start + run + period  # calls [run_start, region_end) repeat
    at = np.flatnonzero(seq[:region_end] == anchor)
    if at.size < 2:
        return None
    starts = ts[top[at]]
    stop = int(end[top[at[-1]:region_end]].max())
    if _one_pass(rt, top, at, stop):
        return None
    # a loop, not a short repeat inside one pass: the iterations span half of the
    # thread's top-level calls or more
    if 2 * (stop - int(starts[0])) < int(end[top].max()) - int(ts[top].min()):
        return None
    durations = np.diff(np.r_[starts, stop])
    warm = 0
    if durations.size >= 2:
        ref = float(np.median(durations[1:]))
        while warm < durations.size - 1 and durations[warm] >= WARM_ITERATION_FACTOR * ref:
            warm += 1
    return Iterations(starts.astype(np.int64), stop, period, int(top[at[0]]), warm)


#: Python frames (``with_stack=True``) and annotations that are one call of a module: a
#: repeat whose every start lies under one of them repeats layers of one pass, not the
#: loop.
MODULE_CALL = re.compile(r"^nn\.Module: |\.py\(\d+\): (forward|_call_impl|_wrapped_call_impl)$"
                         r"|^Torch-Compiled Region|^CompiledFunction|^## Call CompiledFxGraph")
#: Kinds whose events, around every start of a repeat, make it a repeat inside one pass:
#: a ``record_function`` label (``model_inference``) or a module call.
_PASS_KINDS = ("user_annotation",)


def _one_pass(rt: RankTrace, top: np.ndarray, at: np.ndarray, stop: int) -> bool:
    """Whether the repeat of ``top`` (the loop thread's top-level calls, by start) that
    starts at the calls ``at`` and ends at ``stop`` is a repeat inside one pass (layers of
    one forward), not a loop: every start lies under one module call or compiled region
    (:data:`MODULE_CALL`), or under one ``record_function`` label other than the
    profiler's steps (``model_inference``: the user named one unit of work); or, where
    the trace has neither, calls that launch GPU
    work and run nowhere inside the repeat (by name and recorded input shapes) and are no
    one-time cost run both before it and after it (an embedding before the layers and a
    head after them: work a loop would repeat with each iteration)."""
    anchors = top[at]
    row, anc = ancestor_pairs(link(rt, "parent"), anchors)
    anc = anc[anc != row]
    if anc.size:
        ids, count = np.unique(anc, return_counts=True)
        common = ids[count == anchors.size]
        if name_matches(rt, common, MODULE_CALL).any():
            return True
        codes = rt.events["kind"].cat.codes.to_numpy()[common]
        labels = common[kind_mask(codes, _PASS_KINDS)]
        if (~name_matches(rt, labels, _STEP_LABEL)).any():
            return True
    ts = rt.events["ts"].to_numpy()
    first = ts[anchors[0]]
    before, after = top[ts[top] < first], top[ts[top] >= stop]
    if not before.size or not after.size:
        return False
    inside = top[(ts[top] >= first) & (ts[top] < stop)]
    keys = _keys(rt, np.concatenate([inside, before, after]))
    known = keys[:inside.size]
    launching = _launching(rt)

    def runs_once(rows: np.ndarray, k: np.ndarray) -> bool:
        new = ~np.isin(k, known) & np.isin(rows, launching)
        return bool((new & ~in_one_time(rt, rows)).any())

    return runs_once(before, keys[inside.size:inside.size + before.size]) and \
        runs_once(after, keys[inside.size + before.size:])


#: Labels that are the profiler's own, not a pass of the user's code.
_STEP_LABEL = re.compile(r"^ProfilerStep#|^##\s*ProfilerStep")


def _launching(rt: RankTrace) -> np.ndarray:
    """The rows that launched GPU work or hold a call that did (its ancestors)."""
    pos = link(rt, "index_correlation")[gpu_rows(rt)]
    pos = np.unique(pos[pos >= 0])
    if not pos.size:
        return pos
    return np.unique(ancestor_pairs(link(rt, "parent"), pos)[1])


def _period(seq: np.ndarray) -> tuple[int, int, int]:
    """``(period, start, run)`` of the longest run of calls whose name is the name
    ``period`` calls later (``run`` of them from ``start``), covering at least two
    periods; ``(0, 0, 0)`` when none."""
    n = seq.size
    order = np.lexsort((np.arange(n), seq))
    same = seq[order][1:] == seq[order][:-1]
    gaps = (order[1:] - order[:-1])[same]
    if not gaps.size:
        return 0, 0, 0
    values, times = np.unique(gaps, return_counts=True)
    cand = values[(times >= 2) & (2 * values <= n)][:MAX_PERIODS]
    best: list[tuple[int, int, int, int]] = []  # (covered, period, start, run)
    for p in cand.tolist():
        match = np.r_[False, seq[:-p] == seq[p:], False].astype(np.int8)
        edge = np.diff(match)
        ups, downs = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
        if not ups.size:
            continue
        k = int(np.argmax(downs - ups))
        run = int(downs[k] - ups[k])
        if run >= p:
            best.append((run + p, p, int(ups[k]), run))
    if not best:
        return 0, 0, 0
    most = max(b[0] for b in best)
    covered, p, start, run = min((b for b in best if b[0] >= 0.95 * most),
                                 key=lambda b: b[1])
    return p, start, run


def _empty() -> OneTime:
    z = np.zeros(0, dtype=np.int64)
    return OneTime(z, z, z, z, z, np.zeros(0, dtype=object))


def _one_time(rt: RankTrace) -> OneTime:
    ev = rt.events
    g = gpu_rows(rt)
    if g.size == 0 or not len(ev):
        return _empty()
    codes = ev["kind"].cat.codes.to_numpy()
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    dur = end - ts
    parent = link(rt, "parent")
    rows, reason = _candidates(rt, g, codes, ts, end)
    if rows.size == 0:
        return _empty()
    rows, at = np.unique(rows, return_index=True)  # the first reason listed wins
    reason = reason[at]
    # a collective kernel waiting for a peer is no GPU work: it does not keep the GPU busy
    # through a one-time cost (a first launch while NCCL waits for another rank)
    work = g[work_class(ev["kind"].iloc[g]) != COMM]
    busy = idle_cover(rt, Cover(np.zeros(0, np.int64), np.zeros(0, np.int64)), work)
    idle = dur[rows] - busy.within(ts[rows], end[rows])
    keep = (idle * 2 >= dur[rows]) | (reason == "autotune")  # tuning runs trial kernels
    rows, reason, idle = rows[keep], reason[keep], idle[keep]
    runtime = np.flatnonzero(kind_mask(codes, _RUNTIME_KINDS))
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
    rows, reason, idle, call = rows[keep], reason[keep], idle[keep], call[keep]
    # a first call holding a compilation (a backward pass compiled on its first call) is
    # that compilation: it is kept, the first call around it goes
    named = rows[name_matches(rt, rows, COMPILING)]
    if named.size:
        row, anc = ancestor_pairs(parent, named)
        holders = anc[anc != row]
        drop = (reason == "first") & np.isin(rows, holders)
        rows, reason, idle, call = rows[~drop], reason[~drop], idle[~drop], call[~drop]
    # nested costs go, but the outermost compilation stays listed inside the compiled run
    # that holds it (the recompilation test and the note name it)
    compiling = name_matches(rt, rows, COMPILING)
    outer_compile = compiling.copy()
    outer_compile[compiling] = ~_nested(parent, rows[compiling])
    inner = _nested(parent, rows) & ~outer_compile
    rows, reason, idle, call = rows[~inner], reason[~inner], idle[~inner], call[~inner]
    order = np.argsort(ts[rows], kind="stable")
    return OneTime(rows[order], ts[rows][order], end[rows][order], idle[order],
                   call[order], reason[order])


def _candidates(rt: RankTrace, g: np.ndarray, codes: np.ndarray, ts: np.ndarray,
                end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate one-time cost with its reason, in the order the reasons win (a
    call both tuned and first is named by its tuning)."""
    dur = end - ts
    calls = np.flatnonzero(kind_mask(codes, _CALL_KINDS))
    top = top_level_calls(rt)
    first = _first_outliers(rt, top, ts, dur)
    if not len(step_table(rt)):  # one pass or a loop without steps: cold calls too
        first = np.union1d(first, _cold_calls(rt, calls, dur))
    loader = iterator_start_rows(rt)  # started once (every step: it recurs)
    if not 0 < loader.size < max(2, len(step_table(rt)) // 2):
        loader = loader[:0]
    anyk = np.flatnonzero(kind_mask(codes, _ANY_KINDS) & (dur >= MIN_NS))
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
        # set-up calls and warm-up code, whatever their count
        ("setup", anyk[name_matches(rt, anyk, SETUP)]),
        ("warm-up", anyk[name_matches(rt, anyk, WARM_UP)]),
        # without steps: the first call of a runtime API, far slower than its later ones
        ("first", _first_runtime_calls(rt, codes, dur) if not len(step_table(rt))
         else loader[:0]),
    ]
    rows = np.concatenate([r for _, r in found]).astype(np.int64)
    reason = np.concatenate([np.full(r.size, w, dtype=object) for w, r in found])
    return rows, reason


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
    runtime = np.flatnonzero(kind_mask(codes, _RUNTIME_KINDS) & (dur >= MIN_NS))
    alloc = runtime[name_matches(rt, runtime, _ALLOC)]
    if not alloc.size or not top.size:
        return alloc
    row, anc = ancestor_pairs(link(rt, "parent"), alloc)
    at_top = np.isin(anc, top)
    owner = np.full(alloc.size, -1, dtype=np.int64)
    slot = np.searchsorted(alloc, row[at_top])  # alloc is sorted (flatnonzero)
    owner[slot] = anc[at_top]
    keys = _keys(rt, top)
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
    ev = rt.events
    pos = link(rt, "index_correlation")[g]
    ok = pos >= 0
    if not ok.any():
        return np.zeros(0, dtype=np.int64)
    launch, kernel = pos[ok], ev["name"].to_numpy()[g[ok]]
    ts = ev["ts"].to_numpy()
    order = np.lexsort((ts[launch], kernel))
    launch, kernel = launch[order], kernel[order]
    head = np.r_[True, kernel[1:] != kernel[:-1]]
    first = np.unique(launch[head])
    median = float(np.median(dur[np.unique(launch)]))
    return first[(dur[first] >= MIN_NS) & (dur[first] >= FACTOR * median)]


def top_level_calls(rt: RankTrace) -> np.ndarray:
    """The rank's calls (operators and runtime calls) with no call among their ancestors
    (Python frames and annotations do not count), by row; computed once per rank (the
    first-call test and the iterations both read them)."""
    return derived(rt, "findings.top_level_calls", lambda: _top_level(rt))


def _top_level(rt: RankTrace) -> np.ndarray:
    codes = rt.events["kind"].cat.codes.to_numpy()
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
    key = _keys(rt, top)
    order = np.lexsort((ts[top], key))
    k, d, r = key[order], dur[top][order], top[order]
    head = np.r_[True, k[1:] != k[:-1]]
    later = pd.Series(d[~head]).groupby(k[~head]).median()
    cand = head & (d >= MIN_NS)
    med = later.reindex(k[cand]).to_numpy().copy()
    # a shape called once (an optimizer's parameters, the layers of one pass: each its
    # own shape) is judged against the calls of its name that were not a shape's first
    # (warm calls), else the later calls of its name
    names = rt.events["name"].to_numpy()[r].astype(np.int64)
    warm = pd.Series(d[~head]).groupby(names[~head]).median()
    first_of_name = np.zeros(r.size, dtype=bool)
    by_name = np.lexsort((ts[r], names))
    first_of_name[by_name[np.r_[True, names[by_name][1:] != names[by_name][:-1]]]] = True
    later = pd.Series(d[~first_of_name]).groupby(names[~first_of_name]).median()
    fallback = warm.reindex(names[cand]).to_numpy()
    fallback = np.where(np.isnan(fallback), later.reindex(names[cand]).to_numpy(), fallback)
    alone = np.isnan(med)
    alone[alone] = first_of_name[cand][alone] | ~np.isnan(warm.reindex(
        names[cand][alone]).to_numpy())
    med[alone] = fallback[alone]
    ok = ~np.isnan(med)
    ok[ok] = d[cand][ok] >= FACTOR * med[ok]
    # a new shape in step after step (a decoder's growing sequence, variable batches)
    # recurs: slow first calls of one name in two steps or more are no one-time cost
    if ok.any() and len(step_table(rt)):
        step = rt.events["iteration"].to_numpy()[r[cand]]
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
    calls = np.flatnonzero(kind_mask(codes, _ANY_KINDS))
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
    names = rt.events["name"].to_numpy()[ran]
    seen: dict[int, int] = {}  # name -> index of the last compilation it ran after
    first = []
    for r, n in zip(ran.tolist(), names.tolist(), strict=True):
        k = int(np.searchsorted(done, ts[r], side="right"))  # compilations before it
        if k and seen.get(int(n), 0) < k:
            first.append(r)
        seen[int(n)] = k
    return np.union1d(np.asarray(first, dtype=np.int64), holds)


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
    names = rt.events["name"].to_numpy()
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
    names = rt.events["name"].to_numpy()[other]
    _, first = np.unique(names, return_index=True)  # rows are in start order
    rows = other[first]
    rows = rows[dur[rows] >= MIN_NS]
    if not rows.size:
        return rows
    later = pd.Series(dur[other]).groupby(names).apply(
        lambda d: float(np.median(d.to_numpy()[1:])) if d.size > 1 else 0.0)
    ref = later.reindex(rt.events["name"].to_numpy()[rows]).to_numpy()
    return rows[FACTOR * ref <= dur[rows]]


def _keys(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """One integer per distinct (name, recorded input shapes) of ``rows``."""
    names = rt.events["name"].to_numpy()[rows].astype(np.int64)
    table, slot = rt.side_row_of_event("op_args")
    if not len(table) or "input_dims" not in table:
        return names
    where = slot[rows]
    dims = np.full(rows.size, "", dtype=object)
    has = where >= 0
    dims[has] = table["input_dims"].take(where[has]).to_numpy(dtype=object, na_value="")
    dcode, uniq = pd.factorize(dims)
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
               call_share: float = 1.0) -> str:
    """What a one-time cost most likely is, from its own name and its longest runtime
    call's (``first_call``: that call is the rank's first runtime call; ``call_share``:
    the share of the cost that call took: under half, the call is not what was slow)."""
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


def check_warmup(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``warmup`` note of one rank (module docstring); its claim is the GPU idle
    inside the one-time costs of the window."""
    window = analysis_window(rt, iterations)
    ot = one_time_costs(rt)
    steady = iterations is None and not len(step_table(rt)) and \
        steady_window(rt) is not None
    # with the steady state as the window, the costs before it are what it leaves out
    lo = int(rt.events["ts"].min()) if steady else window[0]
    span = window[1] - lo
    sel = (ot.start >= lo) & (ot.start < window[1])
    if iterations is not None and sel.any():
        sel &= np.isin(rt.events["iteration"].to_numpy()[ot.rows], iterations)
    it = iterations_found(rt) if steady else None
    warm = it.warm_up if it is not None and window[0] >= it.steady_start else 0
    total_idle = int(ot.idle[sel].sum())
    if span <= 0 or (not warm and total_idle < MIN_SHARE * span):
        return []
    parts = []
    if sel.any():
        parts.append(_costs_text(rt, ot, sel, lo, window[1], span, steady))
    if warm:
        assert it is not None
        parts.append(_warm_iterations_text(rt, it, lo))
    parts.append("They run once: no finding counts this time as a recurring saving.")
    if steady:
        after = ("the rest of the pass after them" if iterations_found(rt) is None else
                 "the steady state after them")
        parts.append(f"The findings describe {after}: the last "
                     f"{fmt_time(window[1] - window[0])} of the trace, from "
                     f"+{fmt_time(window[0] - lo)}.")
    rows = ot.rows[sel]
    recompiled = _recompilation(rt, rows)
    advice = ""
    if recompiled:
        at = len(parts) - (2 if steady else 1)
        parts[at] = ("Each ran once in this window: no finding counts this time as a "
                     "saving.")
        parts.insert(at, recompiled)
        advice = RECOMPILE_ADVICE
    steps = step_tuple(rt.events["iteration"].to_numpy()[rows])
    busy = idle_cover(rt, Cover(np.zeros(0, np.int64), np.zeros(0, np.int64)))
    return [Finding((rt.rank,), steps, " ".join(parts), 0, span, advice=advice,
                    claim=claim_outside(*_merged(ot.start[sel], ot.end[sel]), None, busy))]


#: Calls that compile.
COMPILING = re.compile(COMPILE_NAMES)
RECOMPILE_ADVICE = (
    "Find why it compiled again with TORCH_LOGS=recompiles (a new input shape, dtype or "
    "device, a changed Python value the graph depends on). For inputs whose shapes vary, "
    "compile for dynamic shapes (torch.compile(dynamic=True), or "
    "torch._dynamo.mark_dynamic on the dimension that varies) or pad/bucket the inputs "
    "to a few shapes and warm each up before the loop; past "
    "torch._dynamo.config.cache_size_limit recompilations, the code falls back to eager.")


def _recompilation(rt: RankTrace, rows: np.ndarray) -> str:
    """Evidence that a compilation among the one-time ``rows`` is a *recompilation*:
    compiled code (:data:`COMPILED_CALL`) of its direction (the forward, or the backward
    pass, which compiles on its first call after the forward ran compiled) finished
    before it started without compiling, so the same code compiled again (a new shape
    or a failed guard, which recurs with each new shape); "" when none is. Where Dynamo
    numbers its frames (``Torch-Compiled Region: 1/0``), the earlier run must be of the
    frame the compilation is for (the compiled region that runs first after it): two
    frames each compiled once are no recompilation."""
    ev = rt.events
    if not rows.size:
        return ""
    comp = rows[name_matches(rt, rows, COMPILING)]
    if not comp.size:
        return ""
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    codes = ev["kind"].cat.codes.to_numpy()
    calls = np.flatnonzero(kind_mask(codes, _ANY_KINDS))
    ran = calls[name_matches(rt, calls, COMPILED_CALL)]
    if not ran.size:
        return ""
    compiling = calls[name_matches(rt, calls, COMPILING)]
    # compiled code that ran without compiling inside it
    held = Cover(ts[compiling], end[compiling])
    clean = ran[held.within(ts[ran], end[ran]) == 0]
    # the backward pass compiles on its first call, after the forward ran compiled: a
    # compilation repeats one of its own direction
    names = ev["name"].to_numpy()
    back = np.asarray(["ackward" in rt.symbols[int(n)] for n in names[clean]], dtype=bool)
    frame_of = _frames(rt, ran)
    again, last = [], -1
    for c in comp.tolist():
        c_back = "ackward" in rt.symbols[int(names[c])]
        prior = clean[(back == c_back) & (end[clean] <= ts[c])]
        # Dynamo numbers each frame it compiles ("Torch-Compiled Region: 1/0": frame 1,
        # its first compilation): compiled code of another frame is no earlier run
        after = ran[ts[ran] >= ts[c]]
        mine = frame_of[int(after[0])] if after.size else -1
        if mine >= 0 and prior.size:
            prior = prior[np.asarray([frame_of[int(r)] in (mine, -1) for r in prior.tolist()],
                                     dtype=bool)]
        if prior.size:
            again.append(c)
            last = int(prior[np.argmax(end[prior])])
    if not again:
        return ""
    it = ev["iteration"].to_numpy()
    where = steps_text(rt, it[np.asarray(again)])
    return (f"A recompilation: compiled code ran before it without compiling "
            f"({rt.symbols[int(ev['name'].to_numpy()[last])]} in "
            f"{steps_text(rt, it[[last]])}), then compiled again in {where}: the inputs "
            f"or a guard changed, and it recurs with each new shape.")


#: Dynamo's compiled frames: ``Torch-Compiled Region: FRAME/COMPILATION``.
_FRAME = re.compile(r"Torch-Compiled Region: (\d+)/(\d+)")


def _frame_id(name: str) -> int:
    """The frame number of a ``Torch-Compiled Region: F/C`` name (-1 when none)."""
    m = _FRAME.search(name)
    return int(m.group(1)) if m else -1


def _frames(rt: RankTrace, rows: np.ndarray) -> dict[int, int]:
    """Per row, the Dynamo frame it runs: its own name's, else that of the innermost
    compiled region around it (``CompiledFunction`` inside ``Torch-Compiled Region:
    0/0``); -1 when none says."""
    names = rt.events["name"].to_numpy()
    out = {int(r): _frame_id(rt.symbols[int(names[r])]) for r in rows.tolist()}
    row, anc = ancestor_pairs(link(rt, "parent"), rows)
    # ancestor_pairs lists each row's ancestors from the nearest up: the first with a
    # frame number wins
    for r, a in zip(row.tolist(), anc.tolist(), strict=True):
        if out[r] < 0 and a != r:
            out[r] = _frame_id(rt.symbols[int(names[a])])
    return out


def _costs_text(rt: RankTrace, ot: OneTime, sel: np.ndarray, lo: int, hi: int, span: int,
                steady: bool) -> str:
    """The one-time costs ``sel`` of ``ot``: how many, how long, the four longest."""
    rows, start, end = ot.rows[sel], ot.start[sel], ot.end[sel]
    calls = ot.call[sel]
    ev = rt.events
    names = ev["name"].to_numpy()
    runtime = np.flatnonzero(kind_mask(ev["kind"].cat.codes.to_numpy(), _RUNTIME_KINDS))
    first_rt = int(runtime[np.argmin(ev["ts"].to_numpy()[runtime])]) if runtime.size else -1
    shown = []
    for i in np.argsort(-(end - start), kind="stable")[:4].tolist():
        name = rt.symbols[int(names[rows[i]])]
        call = rt.symbols[int(names[calls[i]])] if calls[i] >= 0 else ""
        inner = (f"; {call} {fmt_time(int(ev['dur'].to_numpy()[calls[i]]))} inside"
                 if call and calls[i] != rows[i] else "")
        share = 1.0 if ot.why[sel][i] != "first" else (
            float(ev["dur"].to_numpy()[calls[i]]) / max(int(end[i] - start[i]), 1)
            if calls[i] >= 0 else 0.0)
        shown.append(f"{name} {fmt_time(int(end[i] - start[i]))} at "
                     f"+{fmt_time(int(start[i] - lo))}{inner} "
                     f"({cause_text(rt, name, call, calls[i] == first_rt, share)})")
    length = int(Cover(start, end).within(np.array([lo]), np.array([hi]))[0])
    ms, me = _merged(start, end)  # nested or overlapping costs counted once
    busy = idle_cover(rt, Cover(np.zeros(0, np.int64), np.zeros(0, np.int64)))
    idle_ns = int(((me - ms) - busy.within(ms, me)).sum())
    where = "the trace" if steady else "the window"
    return (f"{rows.size} one-time cost(s) in "
            f"{steps_text(rt, ev['iteration'].to_numpy()[rows])} ran {fmt_time(length)} "
            f"({100 * length / span:.0f}% of {where}), the GPU idle "
            f"{fmt_time(idle_ns)} of it: {'; '.join(shown)} (a first call at "
            f"least {FACTOR:.0f}x its later ones, or set-up).")


def _warm_iterations_text(rt: RankTrace, it: Iterations, lo: int) -> str:
    """The warm-up iterations: how many, how long against the median, what ran longest
    in them."""
    d = it.durations
    k = it.warm_up
    anchor = rt.symbols[int(rt.events["name"].to_numpy()[it.anchor])]
    each = ", ".join(fmt_time(int(x)) for x in d[:min(k, 4)]) + (", ..." if k > 4 else "")
    return (f"The trace repeats an iteration of {it.calls} top-level calls (from one "
            f"{anchor} to the next); its first {k} iteration(s), from "
            f"+{fmt_time(int(it.starts[0] - lo))}, ran {each} against a median of "
            f"{fmt_time(it.median_ns)} for the {d.size - k} after: "
            f"{fmt_time(int(d[:k].sum() - k * it.median_ns))} more than steady iterations "
            f"(first calls of operators and kernels, library set-up, allocator growth, "
            f"optimizer state, compilation).")


def _merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = Cover(start, end)
    return c.s, c.e


RULES: list[FindingRule] = [
    FindingRule(
        id="warmup",
        title="One-time costs (warm-up) in the analysed window",
        section="idle",
        advice=("Profile the steady state: torch.profiler.profile(schedule="
                "torch.profiler.schedule(wait=1, warmup=2, active=3)) with prof.step() at "
                "the end of each iteration, so the window holds ProfilerSteps after "
                "warm-up. Where start-up itself matters (inference servers, short jobs): "
                "run a warm-up batch of each shape before serving, keep compile caches "
                "(torch.compile's FX graph and autotuning caches), and weigh "
                "CUDA_MODULE_LOADING=EAGER (load every kernel at start) against the "
                "default lazy loading (each kernel on its first launch)."),
        saving=("None: a note. The one-time costs' GPU idle time is held by this note, so "
                "no other finding's saving counts it."),
        check=check_warmup,
        info=True,
    ),
]

def window_text(rt: RankTrace, iterations: StepList = None) -> str:
    """Which window the findings of the rank describe and how it was found."""
    lo, hi = analysis_window(rt, iterations)
    steps = step_table(rt)
    if iterations is not None:
        steps = steps[steps["step"].isin(as_list(iterations))]
    if len(steps):
        return (f"{fmt_steps(steps['step'].tolist())} ({fmt_time(hi - lo)}, ProfilerStep "
                f"spans{'' if iterations is None else ', as selected'})")
    ev = rt.events
    if not len(ev):
        return "nothing (an empty trace)"
    steady = steady_window(rt) if iterations is None else None
    it = iterations_found(rt)
    repeats = ""
    if it is not None and it.count_in((lo, hi)):
        anchor = rt.symbols[int(ev["name"].to_numpy()[it.anchor])]
        # "repeats", not "iterations": in one forward pass the repeat is a layer
        repeats = (f"; it repeats a sequence of {it.calls} top-level calls "
                   f"{it.count_in((lo, hi))} times (from one {anchor} to the next), "
                   f"{fmt_time(it.median_ns)} each (median)")
    if steady is not None:
        first = int(ev["ts"].min())
        if steady[2] >= 0:
            name = rt.symbols[int(ev["name"].to_numpy()[steady[2]])]
            why = f"up to the end of the last one-time cost, {name}"
        else:
            assert it is not None
            why = (f"the first {it.warm_up} iteration(s), {WARM_ITERATION_FACTOR:.0f}x the "
                   f"median iteration or longer")
        last = int(ev["end"].max())
        to = ("to its end" if hi >= last else
              f"to its last GPU work or iteration, the {fmt_time(last - hi)} after it left "
              f"out")
        what = (f"{ONE_ITERATION}, after its leading one-time costs" if it is None else
                "the steady state")
        return (f"{what}, {fmt_time(hi - lo)} from {fmt_time(lo - first)} "
                f"into the trace {to} (no ProfilerStep: the {fmt_time(lo - first)} before, "
                f"{why}, left out){repeats}")
    costs = ("no one-time cost seen" if not one_time_costs(rt).rows.size else
             "its one-time costs stay in it, held by the warm-up note: a window after "
             "them would leave out most of the GPU time or work that recurs")
    if it is None and iterations is None:
        return f"{ONE_ITERATION}: the whole trace ({fmt_time(hi - lo)}; {costs})"
    return f"the whole trace ({fmt_time(hi - lo)}; no ProfilerStep, {costs}){repeats}"



#: How the window text starts for a trace without ProfilerStep whose calls repeat no
#: loop (:func:`iterations_found` finds none): one pass, no warm-up cut by repetition.
ONE_ITERATION = "one iteration (no ProfilerStep, and no loop seen in the trace)"


# the analysed window of a trace without ProfilerStep is its steady state (base cannot
# import this module: this module's rules import base)
use_steady_state(SteadyState(window=steady_window))
