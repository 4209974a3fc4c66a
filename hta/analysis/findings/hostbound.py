"""The ``host_bound`` finding: the GPU waits because the host does not submit work fast
enough, classified by what the CPU did meanwhile.

A **host gap** is a stretch of GPU idle time in the analysed window (no kernel, copy or
memset on any stream; graph replays count busy; the first stretch starts at the rank's
first event) that ends when GPU work starts whose
launch call *returned after the GPU went idle*: when the GPU ran dry the host had not
yet submitted the next work, so the GPU waited on the host. When that work started more
than :data:`QUEUED_AFTER_NS` (100 µs) after its launch returned, the host gap ends where
the launch returned: the rest of the stretch the work was queued and waited on something
else. Idle time after which the
next work had been submitted earlier (it waited on a dependency, not on the host), idle
time with no later GPU work, and work whose launch call is not in the trace are not host
gaps, but for the stretch from the end of the last GPU work to the end of the last
``ProfilerStep`` when the rank has two steps or more (the host works on in the step;
the next step's work, beyond the trace, waits for it), which is a host gap on the thread
that launched the last work.

What the CPU did during the host gaps, on the thread that launched the work that ended
each gap, splits the time into five classes:

* ``python``: no operator or runtime call recorded (Python or framework code between
  operators; which code shows only with ``with_stack=True``: the evidence then names the
  Python frames with the most time of their own in the longest gaps, their time less
  their child frames, operators, annotations and runtime calls);
* ``slow_op``: a CPU operator that launches no GPU work (operators nested in one another
  or back to back count as one piece; an operator with a launch call below it is a
  container, its time dispatch) covering at least :data:`SLOW_OP_NS` (1 ms) of one gap,
  or half of the gap and at least :data:`SLOW_OP_MIN_NS` (50 µs): a specific operator
  slow on the CPU;
* ``dispatch``: the other operator time (many operators, each with little GPU work:
  dispatch overhead);
* ``launch``: kernel and graph launch calls (:data:`LAUNCH_CALL`: the runtime's
  per-launch cost);
* ``runtime``: other runtime calls (allocation, copies, synchronisation).

The saving is the GPU idle time in the host gaps outside the one-time costs
(:mod:`~hta.analysis.findings.warmup`), the data-loader spans and the host-sync bubbles
(each class shrinks in proportion): had the host run ahead of the GPU, the work would
have been queued and these gaps closed. ``ProfilerStep#N`` events (operators in older
traces) are steps, not CPU work. The engine gives this rule the time
last (:data:`~hta.analysis.findings.sharing.CLAIM_ORDER`): a blocking call, a data-loader
span, a launch-bound stretch or a one-time cost holding the time is the more specific
cause, and this finding leaves their time out. The advice fits the largest class; for
``python``, when tensors built from Python data
(:func:`~hta.analysis.findings.from_python.from_python`: ``torch.tensor`` on a list)
hold half of that class's time or more, the advice is to build them from arrays, once,
or in the loader workers (the evidence says how many, a step, and the largest one's
shape); else when one stretch with no operator holds half of that
class's time or more, or the stretches of :data:`LONG_PYTHON_NS` (1 ms) or more do in a
trace that records CPU operators (in one that records runtime calls only, that time may
be operators), the advice is about host work outside the operators (name it with
``with_stack``, move it off the step), not per-operator overhead (and the finding keeps
its own estimate: a CUDA graph does not remove that work,
:mod:`hta.analysis.whatif.findings`). On a rank without ``ProfilerStep`` whose trace
repeats a loop (:func:`~hta.analysis.findings.loops.iterations_found`), the time before
its first iteration is no iteration's (a server waiting for its first request), as the
lead-in of a profile of steps is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.findings.base import (
    Finding,
    FindingRule,
    analysis_window,
    link,
    rank_work,
    step_table,
)
from hta.analysis.findings.claims import claim_outside, difference
from hta.analysis.findings.events import step_numbers
from hta.analysis.findings.from_python import from_python, from_python_text
from hta.analysis.findings.gpu_cover import graph_aware, idle_cover
from hta.analysis.findings.loops import iterations_found
from hta.analysis.findings.onetime import one_time_costs
from hta.analysis.findings.rule_tools import (
    data_loader_cover,
    fmt_time,
    name_matches,
    step_tuple,
    steps_text,
)
from hta.analysis.findings.sync import blocking_rows, blocking_sites, sync_bubbles
from hta.analysis.findings.sync_sites import FLAG_ORDER
from hta.analysis.gpu_work import rank_work_class
from hta.analysis.intervals import Cover, union_length
from hta.analysis.names import short_name
from hta.analysis.perf.calls import gpu_rows
from hta.analysis.rowmap import ancestor_pairs
from hta.model.arrays import distinct
from hta.model.derived import derived
from hta.model.rules import KIND_CODE, RUNTIME_KINDS, kind_mask
from hta.model.trace import RankTrace

#: A CPU operator call covering at least this much of one gap is a slow operator (ns).
SLOW_OP_NS = 1_000_000
#: ... as is one covering half of the gap or more and at least this much (ns).
SLOW_OP_MIN_NS = 50_000
#: A host gap whose work started more than this after its launch returned ends where the
#: launch returned; the rest waited on something else (ns).
QUEUED_AFTER_NS = 100_000
#: A stretch with no operator recorded this long or longer is host work outside the
#: operators, not per-operator overhead (ns).
LONG_PYTHON_NS = 1_000_000
#: The classes, in the order the evidence lists them.
CLASSES = ("python", "dispatch", "slow_op", "launch", "runtime")
CLASS_TEXT = {
    "python": "no operator or runtime call recorded (Python or framework code between "
              "operators)",
    "dispatch": "CPU operators with little GPU work (dispatch)",
    "slow_op": "slow CPU operators",
    "launch": "launch calls",
    "runtime": "other runtime calls (allocation, copies, synchronisation)",
}
#: Advice bits of a blocking call that reads a value or sizes an output on the host.
_BLOCKS_CAPTURE = (1 << FLAG_ORDER.index("data_dependent")) | \
    (1 << FLAG_ORDER.index("host_read"))


def capture_blockers(rt: RankTrace, window: tuple[int, int], advice: str) -> str:
    """``advice``, led by a warning when it tells to capture a CUDA graph and the window
    holds blocking calls (runtime calls that wait on the GPU) under operators that read a
    value on the host or size an output by the data (``aten::item``, ``is_nonzero``,
    ``nonzero``...): capture cannot cross them."""
    if "capture the step in a CUDA graph" not in advice and \
            "torch.cuda.graphs" not in advice:
        return advice
    rows = blocking_rows(rt)
    ts = rt.column("ts")
    inside = (ts[rows] >= window[0]) & (ts[rows] < window[1])
    # a runtime call that waits on the GPU; an operator standing for one only in a trace
    # without runtime calls (an .item() of a CPU tensor waits on nothing)
    codes = rt.kind_codes()
    if kind_mask(codes, RUNTIME_KINDS).any():
        inside &= kind_mask(codes[rows], RUNTIME_KINDS)
    if not inside.any():
        return advice
    sites = blocking_sites(rt).take(inside)
    hit = (sites.flags & _BLOCKS_CAPTURE) > 0
    if not hit.any():
        return advice
    ops = sites.op[hit]
    ops = distinct(ops[ops >= 0])  # one read may make several runtime calls
    names = pd.Series([rt.symbols[int(n)] for n in
                       rt.column("name")[ops]]).value_counts()
    shown = ", ".join(f"{n} ×{int(c)}" for n, c in names.head(3).items()) or "no operator"
    times = ops.size or int(hit.sum())
    return (f"A CUDA graph cannot be captured across a host synchronisation, and this "
            f"code synchronises {times} time{'s' if times > 1 else ''} to read values on "
            f"the host ({shown}): keep those reads out of the captured region or remove "
            f"them (the host_sync finding names those that leave the GPU idle), then "
            f"capture. " + advice)


ADVICE = {
    "python": (
        "The host runs Python or framework code between operators while the GPU waits. "
        "Take it off the step's critical path: capture the step in a CUDA graph "
        "(torch.compile(mode='reduce-overhead') or torch.cuda.graphs), move per-step "
        "Python work (logging, metrics, bookkeeping, data preparation) out of the loop or "
        "to another thread, give each step more work (a larger batch); record with "
        "with_stack=True to see which code runs."),
    "python_stretch": (
        "Most of this time is long stretches with no operator recorded: host work outside "
        "the profiled operators (input preparation, tokenisation or decoding, logging, "
        "checkpointing, waiting on another process or on I/O). Record with with_stack=True "
        "(or a record_function around the suspect code) to name it, then move it off the "
        "step: into DataLoader workers, onto another thread, or overlapped with the "
        "previous step's GPU work."),
    "from_python": (
        "Most of this time builds tensors from Python data (torch.tensor or "
        "torch.as_tensor on a list: each element is converted from a Python object, one "
        "by one): keep the data in NumPy arrays or tensors (torch.from_numpy shares the "
        "memory), build tensors that do not change once, outside the loop, do the "
        "conversion in DataLoader workers (the collate function), and copy to the GPU "
        "from pinned memory with non_blocking=True."),
    "dispatch": (
        "The host spends the time dispatching many small operators: fuse them "
        "(torch.compile, foreach and fused optimizers such as Adam(fused=True)), capture "
        "the step in a CUDA graph, or give each operator more work (a larger batch)."),
    "slow_op": (
        "Specific CPU operators hold the host while the GPU waits: run them on the GPU, "
        "precompute them, or move them to the data-loader workers, off the step."),
    "launch": (
        "The host spends the time in the launch calls themselves (the runtime's per-launch "
        "cost): launch fewer, larger kernels: capture the step in a CUDA graph "
        "(torch.compile(mode='reduce-overhead') or torch.cuda.graphs), fuse small ops "
        "(torch.compile, foreach and fused optimizers), or give each kernel more work."),
    "runtime": (
        "Runtime calls hold the host while the GPU waits: keep memory cached instead of "
        "allocating each step, replace synchronous copies by non_blocking copies from "
        "pinned memory, and batch small copies."),
}

_OP = KIND_CODE["cpu_op"]
#: Kernel and graph launch calls (the ``launch`` class; MTIA's ``runFunction - ...
#: submit_for_execution``): not the copies that also enqueue.
LAUNCH_CALL = re.compile(r"Launch|runFunction|submit_for_execution")
#: ``ProfilerStep#N`` (an operator in older traces): a step, not CPU work.
STEP = re.compile(r"^ProfilerStep#")
_RUNTIME = tuple(sorted(RUNTIME_KINDS))


@dataclass(frozen=True)
class HostGaps:
    """The host gaps of a rank over the whole trace (module docstring): ``start``,
    ``end``, ``tid`` (thread of the launch that ended the gap), ``step`` (the work's
    iteration), and the idle time of each class (:data:`CLASSES`) in each gap."""

    start: np.ndarray
    end: np.ndarray
    tid: np.ndarray
    step: np.ndarray
    parts: dict[str, np.ndarray]


def host_gaps(rt: RankTrace) -> HostGaps:
    """The rank's host gaps, computed once per rank."""
    return derived(rt, "findings.host_gaps", lambda: _host_gaps(rt))


def queued_idle(rt: RankTrace) -> Cover:
    """GPU idle stretches after which the next work had been submitted before the GPU went
    idle (the GPU waited on a dependency, not on the host)."""
    return _gaps(rt)[1]


def unlinked_idle(rt: RankTrace) -> Cover:
    """GPU idle stretches ended by work whose launch call the trace does not link (no
    correlation to a runtime call): whether the host or a dependency held it is unknown."""
    return _gaps(rt)[2]


def _gaps(rt: RankTrace) -> tuple[tuple[np.ndarray, ...], Cover, Cover]:
    return derived(rt, "findings.gaps", lambda: _find_gaps(rt))


def _find_gaps(rt: RankTrace) -> tuple[tuple[np.ndarray, ...], Cover, Cover]:
    ev = rt.events
    w = rank_work(rt)
    empty = np.zeros(0, np.int64)
    if not len(w):
        return (empty, empty, empty, empty), Cover(empty, empty), Cover(empty, empty)
    busy = idle_cover(rt, Cover(empty, empty))
    if busy.s.size == 0:  # GPU work of zero length only: no busy piece to end a gap
        return (empty, empty, empty, empty), Cover(empty, empty), Cover(empty, empty)
    # idle stretches from the rank's first event and between busy pieces; each ends
    # where the next work starts
    first = int(ev["ts"].min())
    s, e = np.r_[first, busy.e[:-1]], np.r_[busy.s[0], busy.s[1:]]
    ok = e > s
    s, e = s[ok], e[ok]
    order = np.argsort(w.ts, kind="stable")
    wts = w.ts[order]
    at = np.asarray(np.searchsorted(wts, e, side="left"))
    ok = at < wts.size
    s, e, at = s[ok], e[ok], at[ok]
    nxt = order[at]  # the first work (in start order) starting at e
    launch_end = w.launch_end[nxt]
    host = (launch_end >= 0) & (launch_end > s)
    queued = (launch_end >= 0) & (launch_end <= s)
    # submitted well before it started: the host part ends where its launch returned
    split = host & (e - launch_end > QUEUED_AFTER_NS)
    h_end = np.where(split, launch_end, e)
    tid_of = _launch_tid(rt, nxt)
    hs, he, ht, hi = s[host], h_end[host], tid_of[host], w.iteration[nxt][host]
    tail = _last_step_tail(rt, int(busy.e[-1]), int(_launch_tid(rt, order[-1:])[0]))
    if tail is not None:
        hs, he = np.r_[hs, tail[0]], np.r_[he, tail[1]]
        ht, hi = np.r_[ht, tail[2]], np.r_[hi, tail[3]]
    return ((hs, he, ht, hi),
            Cover(np.r_[s[queued], launch_end[split]], np.r_[e[queued], e[split]]),
            Cover(s[launch_end < 0], e[launch_end < 0]))


def _last_step_tail(rt: RankTrace, last_busy: int, tid: int
                    ) -> tuple[int, int, int, int] | None:
    """The idle stretch from the end of the rank's last GPU work to the end of its last
    ``ProfilerStep`` (``start, end, tid, step``), when the step ends later: the host
    works on in the step and the next step's work, not in the trace, waits for it, so
    it is a host gap on ``tid`` (the thread that launched the last work). None with fewer
    than two steps (no loop seen: one step may be a warm-up, a graph capture) or when
    the last step ends with its GPU work."""
    steps = step_table(rt)
    if len(steps) < 2 or tid < 0:  # one step: no loop seen that the next step continues
        return None
    last = int(steps["end_ns"].to_numpy().max())
    if last <= last_busy:
        return None
    k = int(np.argmax(steps["end_ns"].to_numpy()))
    return last_busy, last, tid, int(steps["step"].to_numpy()[k])


def _launch_tid(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """The thread of the launch call of each of ``rows`` (positions in the rank's GPU work,
    :func:`~hta.analysis.gpu_work.gpu_work` order; -1 where unknown)."""
    work = np.flatnonzero(rank_work_class(rt) >= 0)[rows]
    pos = link(rt, "index_correlation")[work]
    tid = rt.column("tid")
    return np.where(pos >= 0, tid[np.maximum(pos, 0)], -1)


def _host_gaps(rt: RankTrace) -> HostGaps:
    (s, e, tid, step), _, _ = _gaps(rt)
    ev = rt.events
    codes = ev["kind"].array.codes
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    tids = ev["tid"].to_numpy()
    parts = {c: np.zeros(s.size, dtype=np.int64) for c in CLASSES}
    runtime = kind_mask(codes, _RUNTIME)
    ops = codes == _OP
    op_rows = np.flatnonzero(ops)
    ops[op_rows[name_matches(rt, op_rows, STEP)]] = False  # old traces: steps are ops
    # operators that launch GPU work (a launch call below them) are containers, not
    # slow CPU operators
    enqueue = codes == KIND_CODE["runtime_launch"]
    launches = np.flatnonzero(enqueue)
    is_launch = np.zeros(len(ev), dtype=bool)  # kernel and graph launches, not copies
    is_launch[launches[name_matches(rt, launches, LAUNCH_CALL)]] = True
    row, anc = ancestor_pairs(link(rt, "parent"), launches)
    launching = np.zeros(len(ev), dtype=bool)
    launching[anc[anc != row]] = True
    # the rows of each sort once, then per thread a selection among them (not a pass
    # over every event per thread)
    runtime_rows, launch_rows, all_ops = (np.flatnonzero(runtime), np.flatnonzero(is_launch),
                                          np.flatnonzero(ops))
    runtime_tid, launch_tid, op_tid = tids[runtime_rows], tids[launch_rows], tids[all_ops]
    for t in distinct(tid).tolist():
        g = tid == t
        calls = runtime_rows[runtime_tid == t]
        rc = Cover(ts[calls], end[calls])
        mine = launch_rows[launch_tid == t]
        lc = Cover(ts[mine], end[mine])
        op_rows = all_ops[op_tid == t]
        quiet = op_rows[~launching[op_rows]]
        oc = Cover(ts[quiet], end[quiet])
        both = Cover(np.r_[ts[calls], ts[op_rows]], np.r_[end[calls], end[op_rows]])
        a, b = s[g], e[g]
        r_t = rc.within(a, b)
        l_t = np.minimum(lc.within(a, b), r_t)
        all_t = both.within(a, b)
        op_t = np.maximum(all_t - r_t, 0)
        slow = _slow_op_time(oc, rc, a, b)
        parts["launch"][g] = l_t
        parts["runtime"][g] = r_t - l_t
        parts["slow_op"][g] = np.minimum(slow, op_t)
        parts["dispatch"][g] = op_t - parts["slow_op"][g]
        parts["python"][g] = (b - a) - all_t
    return HostGaps(s, e, tid, step, parts)


def _slow_op_time(oc: Cover, rc: Cover, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per gap, the operator time (runtime calls left out) inside the operator pieces
    (merged as :class:`Cover` pieces) that make a slow operator (module docstring)."""
    out = np.zeros(a.size, dtype=np.int64)
    if oc.s.size == 0 or a.size == 0:
        return out
    first = np.searchsorted(oc.e, a, side="right")
    last = np.searchsorted(oc.s, b, side="left")
    count = np.maximum(last - first, 0)
    gap = np.repeat(np.arange(a.size), count)  # every (gap, piece) pair that overlaps
    piece = np.repeat(first, count) + (np.arange(gap.size)
                                       - np.repeat(np.cumsum(count) - count, count))
    ps = np.maximum(oc.s[piece], a[gap])
    pe = np.minimum(oc.e[piece], b[gap])
    length = pe - ps
    big = (length >= SLOW_OP_NS) | ((length * 2 >= (b - a)[gap]) & (length >= SLOW_OP_MIN_NS))
    if big.any():
        own = length[big] - rc.within(ps[big], pe[big])
        out += np.bincount(gap[big], weights=own, minlength=a.size).astype(np.int64)
    return out


def _lead_in_end(rt: RankTrace) -> int:
    """Where a profile of steps may start claiming GPU idle time. It may start mid-run (a
    schedule's active steps): before the trace's first GPU work, the GPU may still run
    work the host queued before the trace began, so nothing before that is idle. When
    every step blocks on the GPU (a synchronize, a blocking copy), the host runs at most
    one step ahead, and what it queued is at most one step's GPU work: from the first
    step's start plus the most GPU time of a recorded step on, a lead-in is idle."""
    g = gpu_rows(rt)
    if not g.size:
        return 0
    first = int(rt.column("ts")[g].min())
    steps = step_table(rt)
    blocked = rt.column("iteration")[blocking_rows(rt)]
    if not np.isin(step_numbers(rt), blocked).all():
        return first
    step_of = rt.column("iteration")[g]
    order = np.argsort(step_of, kind="stable")  # each step's GPU work side by side
    ts, end, step_of = rt.column("ts")[g][order], rt.column("end")[g][order], \
        step_of[order]
    cuts = np.searchsorted(step_of, steps["step"].to_numpy(), side="left")
    stops = np.searchsorted(step_of, steps["step"].to_numpy(), side="right")
    busy = max(union_length(ts[a:b], end[a:b]) for a, b in zip(cuts, stops, strict=True))
    return min(first, int(steps["start_ns"].min()) + busy)


def check_host_bound(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``host_bound`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    hg = host_gaps(rt)
    a, b = np.maximum(hg.start, window[0]), np.minimum(hg.end, window[1])
    if len(step_table(rt)):
        a = np.maximum(a, _lead_in_end(rt))
    elif (loop := iterations_found(rt)) is not None:
        a = np.maximum(a, int(loop.starts[0]))
    sel = b > a
    if iterations is not None:
        sel &= np.isin(hg.step, iterations)
    if not sel.any():
        return []
    a, b = a[sel], b[sel]
    # the time of the more specific causes is theirs: one-time costs, data-loader
    # spans, blocking calls (each class shrinks in proportion)
    dl = data_loader_cover(rt)
    sb = sync_bubbles(rt)
    ot = one_time_costs(rt)
    held = Cover(np.concatenate([dl.s, sb.bubble_start, ot.start]),
                 np.concatenate([dl.e, sb.bubble_end, ot.end]))
    left = (b - a) - held.within(a, b)
    scale = left / np.maximum(hg.end[sel] - hg.start[sel], 1)
    parts = {c: (hg.parts[c][sel] * scale).astype(np.int64) for c in CLASSES}
    keep = left > 0
    a, b, left, steps_of = a[keep], b[keep], left[keep], hg.step[sel][keep]
    parts = {c: v[keep] for c, v in parts.items()}
    tids = hg.tid[sel][keep]
    total = int(left.sum())
    if total <= 0:
        return []
    by_class = {c: int(v.sum()) for c, v in parts.items()}
    top = max(CLASSES, key=lambda c: by_class[c])
    split = ", ".join(f"{CLASS_TEXT[c]} {100 * by_class[c] / total:.0f}%"
                      for c in sorted(CLASSES, key=lambda c: -by_class[c])
                      if by_class[c] > 0.01 * total)
    longest = int(np.argmax(left))
    ps, pe, owner = difference(a, b, held)
    names = _cpu_names(rt, ps, pe, tids[owner])
    frames = _python_frames(rt, ps, pe, tids[owner]) if by_class["python"] else ""
    records_ops = bool((rt.kind_codes() == _OP).any())
    evidence = (
        f"{a.size} stretches in {steps_text(rt, steps_of)} where the GPU ran dry "
        f"before the host had submitted its next work left the GPU idle {fmt_time(total)}"
        f" ({100 * total / max(window[1] - window[0], 1):.0f}% of the window); the CPU "
        f"meanwhile, on the launching thread: {split}. The longest, "
        f"{fmt_time(int(left[longest]))} at "
        f"{fmt_time(int(a[longest] - window[0]))} into the window{_ended_by(rt, int(b[longest]))}."
        + (f" Most CPU time in them: {names}." if names else "")
        + (f" Python code with the most time of its own in them (with_stack frames): "
           f"{frames}." if frames else "")
        + ("" if records_ops else
           " The trace records no CPU operator at all (only runtime calls): the time "
           "with nothing recorded may be operators the profiler did not record; profile "
           "with the CPU activity to split it.")
    )
    advice = ADVICE[top]
    py = parts["python"]
    long_ones = int(py[py >= LONG_PYTHON_NS].sum()) if records_ops else 0
    if top == "python" and 2 * max(int(py[longest]), long_ones) >= by_class["python"]:
        advice = ADVICE["python_stretch"]  # long stretches: not a per-op overhead
    built, built_text = from_python_text(rt, from_python(rt), a, b, tids, py,
                                         _analysed_steps(rt, iterations))
    evidence += built_text
    if top == "python" and 2 * built >= by_class["python"]:
        advice = ADVICE["from_python"]  # the conversion is the work, not the operators
    if frames:  # the trace names the code already
        advice = re.sub(r"[;.] [Rr]ecord with with_stack=True[^.;:]*", "", advice)
    advice = capture_blockers(rt, window, graph_aware(rt, advice))
    return [Finding((rt.rank,), step_tuple(steps_of), evidence, total,
                    window[1] - window[0], subject=top, advice=advice,
                    claim=claim_outside(a, b, None, held))]


def _analysed_steps(rt: RankTrace, iterations: list[int] | None) -> int:
    """How many ``ProfilerStep`` spans are analysed (1 without any: one pass or a loop
    the evidence does not count per step)."""
    steps = step_table(rt)["step"].to_numpy()
    if iterations is not None:
        steps = steps[np.isin(steps, iterations)]
    return max(int(steps.size), 1)


def _ended_by(rt: RankTrace, end: int) -> str:
    """``, ended by Memcpy HtoD (Pageable -> Device)``: the GPU work that starts where a
    gap ends (what the host was preparing), or ``""``."""
    w = rank_work(rt)
    at = int(np.searchsorted(w.ts, end, side="left"))
    if at >= len(w) or int(w.ts[at]) != end:
        return ""
    return f", ended by {short_name(str(rt.symbols[int(w.name[at])]))}"


#: Gaps looked at for the names in the evidence (the longest).
NAMED_GAPS = 16


def _in_longest_gaps(rt: RankTrace, rows: np.ndarray, a: np.ndarray, b: np.ndarray,
                     tid: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """For each of the :data:`NAMED_GAPS` longest gaps ``[a, b)`` (launching thread
    ``tid``): the ones of ``rows`` on that thread that overlap it, and their overlap
    (ns)."""
    ts, end = rt.column("ts"), rt.column("end")
    rows = rows[np.argsort(ts[rows], kind="stable")]
    rts, rend, rtid = ts[rows], end[rows], rt.column("tid")[rows]
    for i in np.argsort(-(b - a), kind="stable")[:NAMED_GAPS].tolist():
        hi = np.searchsorted(rts, b[i], side="left")
        cand = rows[:hi][(rend[:hi] > a[i]) & (rtid[:hi] == tid[i])]
        if cand.size:
            yield cand, np.minimum(end[cand], b[i]) - np.maximum(ts[cand], a[i])


def _cpu_names(rt: RankTrace, a: np.ndarray, b: np.ndarray, tid: np.ndarray) -> str:
    """The operators and runtime calls (outermost in each gap) with the most time inside
    the longest gaps."""
    codes = rt.kind_codes()
    rows = np.flatnonzero(kind_mask(codes, ("cpu_op", *_RUNTIME)))
    rows = rows[~name_matches(rt, rows, STEP)]
    depth, names = rt.column("depth"), rt.column("name")
    weight: dict[int, int] = {}
    for cand, over in _in_longest_gaps(rt, rows, a, b, tid):
        top = depth[cand] == depth[cand].min()
        for n, o in zip(names[cand[top]].tolist(), over[top].tolist(), strict=True):
            weight[n] = weight.get(n, 0) + int(o)
    return _top_three(rt, weight)


def _top_three(rt: RankTrace, weight: dict[int, int]) -> str:
    """``name time, ...`` for the three names (symbol ids) with the most time."""
    if not weight:
        return ""
    top = sorted(weight.items(), key=lambda item: -item[1])[:3]  # stable: ties in order
    return ", ".join(f"{rt.symbols[int(n)]} {fmt_time(int(t))}" for n, t in top if t > 0)


#: Kinds whose time is not a Python frame's own time (a frame's children).
_CHILD_KINDS = ("python_function", "cpu_op", "user_annotation", *sorted(RUNTIME_KINDS))


def _python_frames(rt: RankTrace, a: np.ndarray, b: np.ndarray, tid: np.ndarray) -> str:
    """The Python frames (``python_function`` events, ``with_stack=True``) with the most
    time of their own (less their child frames, operators, annotations and runtime
    calls) inside the longest gaps on their threads; "" when the trace has none."""
    codes = rt.kind_codes()
    py = KIND_CODE.get("python_function")
    if py is None or not (codes == py).any():
        return ""
    parent = link(rt, "parent")
    names = rt.column("name")
    weight: dict[int, int] = {}
    rows = np.flatnonzero(kind_mask(codes, _CHILD_KINDS))
    for cand, over in _in_longest_gaps(rt, rows, a, b, tid):
        # a frame's own time: its overlap less its children's
        order = np.argsort(cand)
        at = np.clip(np.searchsorted(cand[order], parent[cand]), 0, cand.size - 1)
        has = cand[order][at] == parent[cand]
        children = np.bincount(order[at[has]], weights=over[has], minlength=cand.size)
        own = np.maximum(over - children.astype(np.int64), 0)
        frame = codes[cand] == py
        for n, o in zip(names[cand[frame]].tolist(), own[frame].tolist(), strict=True):
            weight[n] = weight.get(n, 0) + int(o)
    return _top_three(rt, weight)


RULES: list[FindingRule] = [
    FindingRule(
        id="host_bound",
        title="Host-bound: the GPU waits for the host to submit work",
        section="idle",
        advice=ADVICE["python"],
        saving=("The GPU idle time in the stretches that end when work starts whose launch "
                "call returned after the GPU went idle (the host had not submitted it), "
                "inside the window, leaving out the time more specific findings hold "
                "(blocking calls, data loading, launch-bound stretches, one-time costs)."),
        check=check_host_bound,
    ),
]
