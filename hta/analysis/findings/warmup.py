"""The ``warmup`` note: one-time costs in the analysed window, reported as such.

Traces taken with a plain ``torch.profiler.profile()`` around the first iterations hold
the costs a process pays once: the first launch of a kernel (CUDA context, lazy module
loading), the first use of cuBLAS/cuDNN (handles, workspaces: a ``cudaFree`` or
``cudaMalloc`` inside the first ``aten::linear``), stream and event creation, compilation
and autotuning, communicator set-up. They are not the steady state, and no rule may sell
them as a recurring saving.

The costs themselves are defined in :mod:`hta.analysis.findings.onetime`, the
steady state in :mod:`hta.analysis.findings.steady`, the iterations in
:mod:`hta.analysis.findings.loops`.

The note names each cost (the call, its duration, when in the window) and the runtime
call inside it that took the most time, with what that call means (first kernel launch:
module loading; allocator: a library workspace or the caching allocator growing; stream,
event or handle creation: library set-up). Its claim is the GPU idle time inside the
costs: the engine gives it first to the note (it holds no saving), so every other rule's
saving leaves this time out, and ``host_sync`` leaves out blocking calls inside one-time
costs. The note is shown when that idle time is at least :data:`MIN_SHARE` of the window.

The note lists the costs and the warm-up iterations from the start of the trace (what
the window leaves out) and says where the window starts; :func:`window_text` says which
window the findings describe, with its iterations.
"""

from __future__ import annotations

import re

import numpy as np

from hta.analysis.findings.base import Finding, FindingRule, analysis_window
from hta.analysis.findings.claims import claim_outside
from hta.analysis.findings.events import link, step_table
from hta.analysis.findings.gpu_cover import idle_cover
from hta.analysis.findings.loops import WARM_ITERATION_FACTOR, LoopIterations, iterations_found
from hta.analysis.findings.onetime import (
    ANY_KINDS,
    COMPILING,
    FACTOR,
    RUNTIME_CALL_KINDS,
    OneTime,
    cause_text,
    one_time_costs,
)
from hta.analysis.findings.rule_tools import (
    COMPILED_CALL,
    fmt_steps,
    fmt_time,
    name_matches,
    step_tuple,
    steps_text,
)
from hta.analysis.findings.steady import steady_window
from hta.analysis.gpu_work import as_list
from hta.analysis.intervals import Cover
from hta.analysis.rowmap import ancestor_pairs
from hta.model.rules import kind_mask
from hta.model.selection import StepList
from hta.model.trace import RankTrace

#: Share of the window the one-time idle time must reach for the note.
MIN_SHARE = 0.005


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
        sel &= np.isin(rt.column("iteration")[ot.rows], iterations)
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
    steps = step_tuple(rt.column("iteration")[rows])
    busy = idle_cover(rt, Cover(np.zeros(0, np.int64), np.zeros(0, np.int64)))
    return [Finding((rt.rank,), steps, " ".join(parts), 0, span, advice=advice,
                    claim=claim_outside(*_merged(ot.start[sel], ot.end[sel]), None, busy))]


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
    ts, end = rt.column("ts"), rt.column("end")
    codes = rt.kind_codes()
    calls = np.flatnonzero(kind_mask(codes, ANY_KINDS))
    ran = calls[name_matches(rt, calls, COMPILED_CALL)]
    if not ran.size:
        return ""
    compiling = calls[name_matches(rt, calls, COMPILING)]
    # compiled code that ran without compiling inside it
    held = Cover(ts[compiling], end[compiling])
    clean = ran[held.within(ts[ran], end[ran]) == 0]
    # the backward pass compiles on its first call, after the forward ran compiled: a
    # compilation repeats one of its own direction
    names = rt.column("name")
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
    it = rt.column("iteration")
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
    names = rt.column("name")
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
    names = rt.column("name")
    runtime = np.flatnonzero(kind_mask(rt.kind_codes(), RUNTIME_CALL_KINDS))
    first_rt = int(runtime[np.argmin(rt.column("ts")[runtime])]) if runtime.size else -1
    shown = []
    ts, dur = rt.column("ts"), rt.column("dur")
    thread = rt.column("tid")
    for i in np.argsort(-(end - start), kind="stable")[:4].tolist():
        name = rt.symbols[int(names[rows[i]])]
        call = rt.symbols[int(names[calls[i]])] if calls[i] >= 0 else ""
        # every runtime call of the cost's thread inside it, the longest first; the
        # longest is named, and the others that took a tenth of the cost or more
        within = runtime[(ts[runtime] >= start[i]) & (ts[runtime] < end[i])
                         & (thread[runtime] == thread[rows[i]])]
        within = within[np.argsort(-dur[within], kind="stable")]
        inner = ""
        if call and calls[i] != rows[i]:
            big = within[dur[within] >= 0.1 * (end[i] - start[i])]  # a tenth or more
            listed = [c for c in big[:3].tolist() if c != calls[i]][:2]
            inner = "; " + ", ".join(
                f"{rt.symbols[int(names[c])]} {fmt_time(int(dur[c]))}"
                for c in [int(calls[i]), *listed]) + " inside"
        before = int(rt.column("ts")[rows[i]]) - int(start[i])
        if before > 0:  # a cost that starts before its call (a scripted call's compile)
            inner = (f", {fmt_time(before)} of it before the call's record began, nothing "
                     f"recorded on its thread{inner}")
        # the runtime calls' share of the cost: under half, they are not what was slow
        share = 1.0 if ot.why[sel][i] != "first" else (
            float(dur[within].sum()) / max(int(end[i] - start[i]), 1)
            if calls[i] >= 0 else 0.0)
        cause = cause_text(rt, name, call, calls[i] == first_rt, share,
                           why=str(ot.why[sel][i]))
        shown.append(f"{name} {fmt_time(int(end[i] - start[i]))} at "
                     f"+{fmt_time(int(start[i] - lo))}{inner} ({cause})")
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


def _warm_iterations_text(rt: RankTrace, it: LoopIterations, lo: int) -> str:
    """The warm-up iterations: how many, how long against the median, what ran longest
    in them."""
    d = it.durations
    k = it.warm_up
    anchor = rt.symbols[int(rt.column("name")[it.anchor])]
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
        lag = hi - int(steps["end_ns"].max())
        behind = (f" and the {fmt_time(lag)} the GPU ran on after them, finishing the work "
                  f"they launched" if lag > 0 else "")
        return (f"{fmt_steps(steps['step'].tolist())} ({fmt_time(hi - lo)}, ProfilerStep "
                f"spans{behind}{'' if iterations is None else ', as selected'})")
    ev = rt.events
    if not len(ev):
        return "nothing (an empty trace)"
    steady = steady_window(rt) if iterations is None else None
    it = iterations_found(rt)
    repeats = ""
    if it is not None and it.count_in((lo, hi)):
        anchor = rt.symbols[int(rt.column("name")[it.anchor])]
        # "repeats", not "iterations": in one forward pass the repeat is a layer
        repeats = (f"; it repeats a sequence of {it.calls} top-level calls "
                   f"{it.count_in((lo, hi))} times (from one {anchor} to the next), "
                   f"{fmt_time(it.median_ns)} each (median)")
    if steady is not None:
        first = int(ev["ts"].min())
        if steady[2] >= 0:
            name = rt.symbols[int(rt.column("name")[steady[2]])]
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
