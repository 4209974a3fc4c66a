"""The steady state: the analysed window of a rank without ``ProfilerStep``.

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
under :data:`MAX_DROPPED_RECURRING` of that time. The iterations:
:mod:`hta.analysis.findings.loops`; the one-time costs: :mod:`hta.analysis.findings.onetime`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hta.analysis.findings.events import link
from hta.analysis.findings.loops import LoopIterations, iterations_found
from hta.analysis.findings.onetime import call_keys, in_one_time, one_time_costs, top_level_calls
from hta.analysis.perf.calls import gpu_rows
from hta.analysis.rowmap import ancestor_pairs
from hta.model.arrays import union
from hta.model.derived import derived
from hta.model.rules import KIND_CODE
from hta.model.trace import RankTrace

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


def trace_extent(rt: RankTrace) -> tuple[int, int]:
    """The time the rank's trace covers, ``(start, end)`` in ns: from its first event to
    the end of its last one, but not past the end of the profiler's own span (Kineto's
    ``PyTorch Profiler (N)`` event) when the trace records it, unless GPU work ends
    later. A runtime call that a side thread records after the profiler stopped (a late
    ``cudaEventQuery``) is no part of the profiled time: counted, it would add its
    distance as idle time after the last GPU work. ``(0, 0)`` for an empty rank."""
    return derived(rt, "findings.trace_extent", lambda: _trace_extent(rt))


def _trace_extent(rt: RankTrace) -> tuple[int, int]:
    ev = rt.events
    if not len(ev):
        return 0, 0
    start, end = int(ev["ts"].min()), int(ev["end"].max())
    other = np.flatnonzero(rt.kind_codes() == KIND_CODE["other"])
    if not other.size:
        return start, end
    names = np.asarray(rt.symbols, dtype=object)[rt.column("name")[other]]
    span = other[[str(n).startswith("PyTorch Profiler") for n in names]]
    if not span.size:
        return start, end
    g = gpu_rows(rt)
    last_gpu = int(rt.column("end")[g].max()) if g.size else start
    return start, min(end, max(int(rt.column("end")[span].max()), last_gpu))


def _steady(rt: RankTrace) -> tuple[int, int, int] | None:
    ev = rt.events
    if not len(ev) or not gpu_rows(rt).size:  # no GPU work: nothing it describes
        return None
    end = trace_extent(rt)[1]
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
        lead = union(lead, named)
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
    at = rt.column("ts")[g].copy()
    has = launch >= 0
    at[has] = rt.column("ts")[launch[has]]
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
    g = gpu_rows(rt)
    ts = rt.column("ts")[g]
    dur = (rt.column("end") - rt.column("ts"))[g]
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
    names = rt.column("name")[g].astype(np.int64)
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
        keys[has[found]] = call_keys(rt, calls[found])
    return keys


def _steady_end(rt: RankTrace, it: LoopIterations | None, start: int, end: int) -> int:
    """Where the steady state ends: the later of the end of the last GPU work and the end
    of the last iteration (when the trace repeats one), at most the end of the trace;
    what the host does after both (tear-down, the profiler stopping) is no iteration."""
    g = gpu_rows(rt)
    stop = int(rt.column("end")[g].max()) if g.size else end
    if it is not None:
        stop = max(stop, it.end)
    return min(end, stop) if stop > start else end
