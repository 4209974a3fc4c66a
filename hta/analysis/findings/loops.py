"""The loop's iterations in a trace without ``ProfilerStep``: found by repetition.

The iterations are found by repetition
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
them), is a repeat inside one pass; so is one whose first "iteration", at least
:data:`WARM_ITERATION_FACTOR` times the median of the others, holds such work before the
second (the embedding inside the first period). A trace with no ProfilerStep and no loop is *one
iteration* (:data:`hta.analysis.findings.warmup.ONE_ITERATION`, said by
:func:`hta.analysis.findings.warmup.window_text`): no warm-up is cut by
repetition, only the one-time costs above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hta.analysis.findings.events import link
from hta.analysis.findings.onetime import call_keys, in_one_time, one_time_costs, top_level_calls
from hta.analysis.findings.rule_tools import (
    name_matches,
)
from hta.analysis.intervals import Cover
from hta.analysis.perf.calls import gpu_rows
from hta.analysis.rowmap import ancestor_pairs
from hta.model.arrays import distinct
from hta.model.derived import derived
from hta.model.rules import kind_mask
from hta.model.trace import RankTrace

#: Top-level calls of the main thread looked at for the repeating iteration.
MAX_SEQUENCE = 20_000


#: Candidate periods scored when looking for the repeating iteration (the smallest
#: distances between two calls of the same name that occur at least twice).
MAX_PERIODS = 256


#: A leading iteration is warm-up when it ran at least this many times the median of the
#: iterations after the first.
WARM_ITERATION_FACTOR = 2.0


@dataclass(frozen=True)
class LoopIterations:
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


def iterations_found(rt: RankTrace) -> LoopIterations | None:
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


def _iterations(rt: RankTrace) -> LoopIterations | None:
    ev = rt.events
    if not len(ev):
        return None
    top = top_level_calls(rt)
    ts, end, tid = rt.column("ts"), rt.column("end"), rt.column("tid")
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
    seq = rt.column("name")[top].astype(np.int64)
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
    # a first "iteration" far longer than the others that holds work they never run (an
    # embedding before the layers) is no iteration: the repeat starts at the second
    durations = np.diff(np.r_[starts, stop])
    if at.size >= 3 and durations[0] >= WARM_ITERATION_FACTOR * float(np.median(durations[1:])) \
            and _one_pass(rt, top, at[1:], stop):
        return None
    # a loop, not a short repeat inside one pass: the iterations span half of the
    # thread's top-level calls or more
    if 2 * (stop - int(starts[0])) < int(end[top].max()) - int(ts[top].min()):
        return None
    warm = 0
    if durations.size >= 2:
        ref = float(np.median(durations[1:]))
        while warm < durations.size - 1 and durations[warm] >= WARM_ITERATION_FACTOR * ref:
            warm += 1
    return LoopIterations(starts.astype(np.int64), stop, period, int(top[at[0]]), warm)


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
        codes = rt.kind_codes()[common]
        labels = common[kind_mask(codes, _PASS_KINDS)]
        if (~name_matches(rt, labels, _STEP_LABEL)).any():
            return True
    ts = rt.column("ts")
    first = ts[anchors[0]]
    before, after = top[ts[top] < first], top[ts[top] >= stop]
    if not before.size or not after.size:
        return False
    inside = top[(ts[top] >= first) & (ts[top] < stop)]
    keys = call_keys(rt, np.concatenate([inside, before, after]))
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
    pos = distinct(pos[pos >= 0])
    if not pos.size:
        return pos
    return distinct(ancestor_pairs(link(rt, "parent"), pos)[1])


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
