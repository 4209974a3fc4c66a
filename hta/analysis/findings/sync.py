"""The ``host_sync`` finding: blocking calls and hidden synchronisations that leave the GPU
idle, during the wait or after it while the host catches up.

A *blocking call* is a runtime call of kind ``runtime_sync`` except those that make a
stream wait on an event (``cudaStreamWaitEvent``, ``hipStreamWaitEvent``, MTIA
``waitOnEvent``: they do not block the CPU); a synchronous copy call (``cudaMemcpy``,
``cudaMemcpy2D``, ``cuMemcpyDtoH``, ``hipMemcpy``, ``hipMemcpyWithStream``: ``*Memcpy*``
without ``Async``); a call that frees memory and so synchronises the device
(``cudaFree``, ``cudaFreeHost``, ``cuMemFree``, ``hipFree``, ``hipHostFree``); or the
launch call of a copy from or to pageable host memory (``Pageable`` in the copy's name,
e.g. the ``Memcpy DtoH (Device -> Pageable)`` of a ``.item()``: ``cudaMemcpyAsync``
returns only once such data is staged). Where the trace has no runtime calls,
``aten::_local_scalar_dense`` (``.item()``) and ``aten::nonzero`` operators that contain
no blocking call stand for one.

For a call ``[s0, s1)``: *N* is the start of the first GPU work that starts at or after
``s1`` (a call with none after it has no claim), *D* the latest end of the GPU work
that started before ``s1`` but the copy the call made itself (the GPU drained at *D*).
Calls with the same *N* form a group; *d* is the union of their durations (the time
the host was blocked). The group's claim runs from ``a = max(D, first s0, N of the
previous group)`` to ``h = min(start of the next blocking call, max(W, N))``, where *W*
is where the host thread stops working after the call (:func:`host_work_end`: no traced
work for :data:`HOST_GAP_NS`, 100 µs, or a data-loader span). Both ends are clipped to
the window and to the last GPU start of the trace (idle with no GPU work after it is
not waiting for the host). The group's **claim** is ``min(d, idle)``, *idle* being the
GPU idle time in ``[a, h)`` outside data-loader spans and graph replays
(:func:`idle_cover`); the claimed time is the first that much of it from ``a``. Idle
inside the wait before *D* is not claimed (work was still queued: it waited on
something else) but noted in the evidence when it is large. A rank that captures
graphs and replays none has no finding (:func:`capture_only`), and a call inside
warm-up code (:func:`~hta.analysis.findings.rule_tools.under_warm_up`: an annotation,
operator or Python frame named warm-up) or inside a one-time cost
(:func:`hta.analysis.findings.onetime.one_time_costs`: a first call far longer than its
later ones, set-up) is left out: it runs once, before the steady state.

A call whose own copy ran for half of the call or more (a large copy from pageable
memory, which the driver stages while the host waits; a synchronous ``cudaMemcpy``)
waits for its own transfer with the GPU busy copying: its *d* is 0 and it claims
nothing. The idle after it belongs to what the host does next (``host_bound``), and
``pageable_copies`` names the copy.

The model: had the host not been blocked, it would have stayed *d* further ahead of
the GPU, so the idle left while it waited (after the drain) and while it caught up and
re-filled the queue shrinks by up to *d*, as long as the host keeps working; a later
blocking call, a data-loader span or a host thread that shows no work ends it (the
host would have waited there anyway). The gap up to *N* always counts: the host went
from the call to that launch. Each call gets a share of its group's claim in
proportion to its duration.

The calls are grouped by *site* (:mod:`hta.analysis.findings.sync_sites`: the outermost
operator and the innermost label around them). One finding per rank, its subject the
site with the largest share: the saving is the sum of the claims of the calls in the
analysed steps (all sites); the evidence names the site
with the largest share (how many times a step, the time blocked, the calls, the copies'
name, bytes and kind, the longest call with its step and offset) and up to three more.
The advice fits that site (:func:`~hta.analysis.findings.sync_sites.site_advice`).

A loop's own timing synchronize (:func:`timing_syncs`: a call that only waits, with no
operator around it and no copy, at most once per iteration of a pass without backward)
is a second finding of the rank, its subject ending with :data:`TIMING`, at most low
(:func:`max_severity`): a benchmark times each call so, and the trace cannot tell
whether that timing is needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.findings.base import (
    Finding,
    FindingRule,
    analysis_window,
    link,
    read_only,
    step_table,
)
from hta.analysis.findings.claims import claim_outside
from hta.analysis.findings.gpu_cover import BLOCKING_COPY, idle_cover
from hta.analysis.findings.loops import iterations_found
from hta.analysis.findings.onetime import in_one_time
from hta.analysis.findings.rule_tools import (
    bytes_of,
    data_loader_cover,
    fmt_bytes,
    fmt_steps,
    fmt_time,
    in_selection,
    name_matches,
    runs_backward,
    step_tuple,
    under_warm_up,
)
from hta.analysis.findings.sync_sites import (
    IMPLICIT_SYNC,
    Sites,
    find_sites,
    linked_copies,
    site_advice,
)
from hta.analysis.intervals import Cover, coverage, mask_total, merge
from hta.analysis.perf.calls import gpu_rows
from hta.model.arrays import distinct, union
from hta.model.derived import derived
from hta.model.links import GRAPH_LAUNCH
from hta.model.rules import KIND_CODE, MEMORY_KINDS, RUNTIME_KINDS, kind_mask
from hta.model.symbol_masks import symbol_mask
from hta.model.trace import RankTrace

#: Runtime-sync names that only make a stream wait; the CPU goes on.
STREAM_WAIT = re.compile(r"WaitEvent|waitOnEvent")
#: Copies from or to pageable host memory: their launch call returns only once the data
#: is staged, so it blocks the host even when it is ``cudaMemcpyAsync``.
PAGEABLE = re.compile(r"Pageable")
#: Calls that start capturing a graph.
GRAPH_CAPTURE = re.compile(r"^(cuda|cu|hip)StreamBeginCapture")
#: Operators that read a device value on the host (used when no runtime call is recorded).
SYNC_OPS = frozenset({"aten::_local_scalar_dense", "aten::nonzero"})
#: Longest stretch of a host thread with no traced operator, Python function or runtime
#: call that still counts as work (untraced Python between operators, ns); a longer one is
#: taken as the host waiting for something else.
HOST_GAP_NS = 100_000
#: Calls that only wait for the device, a stream or an event (``torch.cuda.synchronize()``,
#: ``stream.synchronize()``, ``event.synchronize()``).
WAIT_ONLY = re.compile(r"^(cuda|hip|cu)(Device|Stream|Event|Ctx)Synchroni[sz]e")
#: Ends the subject of a loop's own timing synchronize (:func:`timing_syncs`).
TIMING = ", once per iteration of a pass without backward (timing)"


def subject_site(subject: str) -> str:
    """The site a ``host_sync`` subject names: the operator (or ``outside any
    operator``) before its annotation (`` under ...``) and the timing label."""
    return subject.removesuffix(TIMING).split(" under ")[0]


TIMING_EVIDENCE = (
    " A synchronize with no operator around it, once per iteration of a pass without "
    "backward, is how a loop times its calls (a benchmark, a latency measurement): the "
    "trace cannot tell whether that timing is needed, so this finding is at most low.")
TIMING_ADVICE = (
    "If the synchronize times the loop (a benchmark), it is part of what the loop "
    "measures, and the idle is not the model's: nothing to fix. To time without stalling "
    "the host, record torch.cuda.Event(enable_timing=True) pairs around the calls and "
    "synchronize once after the loop; in production code, drop the synchronize.")
#: The evidence notes the GPU idle inside the waits with work still queued when it is at
#: least this share of the time blocked (short gaps between queued kernels are normal).
QUEUED_NOTE = 0.1

_COPY_KINDS = MEMORY_KINDS - {"memset"}
_WORK_KINDS = ("cpu_op", "python_function", *sorted(RUNTIME_KINDS))
_SYNC = KIND_CODE["runtime_sync"]
_LAUNCH = KIND_CODE["runtime_launch"]
_CPU_OP = KIND_CODE["cpu_op"]
_NEVER = np.iinfo(np.int64).min // 4
_ALWAYS = np.iinfo(np.int64).max // 4


# -- synchronising calls ---------------------------------------------------------------------
@dataclass(frozen=True)
class SyncBubbles:
    """The blocking calls of a rank and the GPU idle each one caused (module docstring).

    Per call: ``start``/``end`` of the call, ``group`` (-1 when no GPU work follows it),
    ``saving`` (its share of the group's claim, ns), the group's claimed range
    ``[bubble_start, bubble_end)`` (the claim is the GPU idle time inside it) and
    ``queued_idle``: the GPU idle inside the call before the GPU drained, while work
    launched earlier was still to run (not claimed: that work waited on something else).
    """

    rows: np.ndarray
    start: np.ndarray
    end: np.ndarray
    group: np.ndarray
    saving: np.ndarray
    bubble_start: np.ndarray
    bubble_end: np.ndarray
    queued_idle: np.ndarray


def blocking_rows(rt: RankTrace) -> np.ndarray:
    """Positions of the blocking calls, and of sync operators holding none, in time order
    (computed once per rank: :func:`hta.model.derived.derived`, a read-only array)."""
    return derived(rt, "findings.blocking_rows", lambda: _blocking_rows(rt))


def _blocking_rows(rt: RankTrace) -> np.ndarray:
    ev = rt.events
    codes = ev["kind"].array.codes
    sync = np.flatnonzero(codes == _SYNC)
    sync = sync[~name_matches(rt, sync, STREAM_WAIT)]
    launch = np.flatnonzero(codes == _LAUNCH)
    calls = union(sync, launch[name_matches(rt, launch, BLOCKING_COPY)])
    runtime = np.flatnonzero(kind_mask(codes, RUNTIME_KINDS))
    calls = union(calls, runtime[name_matches(rt, runtime, IMPLICIT_SYNC)])
    copies = np.flatnonzero(kind_mask(codes, _COPY_KINDS))
    copies = copies[name_matches(rt, copies, PAGEABLE)]
    staged = link(rt, "index_correlation")[copies]
    staged = staged[staged >= 0]
    calls = union(calls, staged[codes[staged] == _LAUNCH])
    ops = np.flatnonzero(codes == _CPU_OP)
    names = ev["name"].to_numpy()
    lut = np.r_[symbol_mask(rt.symbols, SYNC_OPS.__contains__), False]  # -1: no name
    ops = ops[lut[names[ops]]]
    if ops.size:
        # mark every ancestor of a call, one level of the parent links at a time
        parent = link(rt, "parent")
        holds = np.zeros(len(ev), dtype=bool)
        up = parent[calls]
        while (up := up[up >= 0]).size:
            up = distinct(up[~holds[up]])
            holds[up] = True
            up = parent[up]
        ops = ops[~holds[ops]]
    return union(calls, ops)


def blocking_sites(rt: RankTrace) -> Sites:
    """The site of each of :func:`blocking_rows` (:func:`~.sync_sites.find_sites`),
    computed once per rank: the host_sync rule, host_bound's capture warning and the
    ``no-sync`` change all read them."""
    return derived(rt, "findings.blocking_sites",
                   lambda: read_only(find_sites(rt, blocking_rows(rt))))


def idle_reach(busy: Cover, start: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """The earliest ``t >= start`` with ``amount`` ns outside ``busy`` in ``[start, t)``
    (``start`` where ``amount`` is 0)."""
    start = np.asarray(start, np.int64)
    amount = np.asarray(amount, np.int64)
    target = start - busy.upto(start) + amount  # idle before t, counted from -infinity
    if busy.s.size == 0:
        return start + amount
    idle_at = busy.s - busy.cum[:-1]  # idle before each covered piece starts
    j = np.searchsorted(idle_at, target, side="left")
    jj = np.minimum(j, busy.s.size - 1)
    inside = busy.s[jj] - (idle_at[jj] - target)
    after = busy.e[-1] + (target - (busy.e[-1] - busy.cum[-1]))
    return np.where(amount > 0, np.where(j < busy.s.size, inside, after), start)


def host_work_end(rt: RankTrace, rows: np.ndarray, dl: Cover) -> np.ndarray:
    """For each row: where its thread stops working after it, i.e. the end of the stretch
    of operators, Python functions and runtime calls around it on its thread with no gap
    over :data:`HOST_GAP_NS` (or the start of the GPU work a launch call of the stretch
    enqueued, if later: the launch latency), or the start of the next data-loader span if
    earlier."""
    codes = rt.kind_codes()
    ts, end = rt.column("ts"), rt.column("end")
    thread = rt.column("pid") * (1 << 32) + rt.column("tid")
    work = np.flatnonzero(kind_mask(codes, _WORK_KINDS))
    target = link(rt, "index_correlation")
    out = end[rows].copy()
    for th in distinct(thread[rows]).tolist():
        mine = np.flatnonzero(thread[rows] == th)
        w = work[thread[work] == th]  # in start order: the events table is sorted by ts
        if w.size == 0:
            continue
        run_end = np.maximum.accumulate(end[w])
        new = np.r_[True, ts[w][1:] - run_end[:-1] > HOST_GAP_NS]
        firsts = np.flatnonzero(new)
        last_end = run_end[np.r_[firsts[1:] - 1, w.size - 1]]
        launched = (codes[w] == _LAUNCH) & (target[w] >= 0)
        np.maximum.at(last_end, (np.cumsum(new) - 1)[launched], ts[target[w[launched]]])
        k = np.searchsorted(ts[w][firsts], end[rows[mine]], side="right") - 1
        out[mine] = np.maximum(out[mine], np.where(k >= 0, last_end[np.maximum(k, 0)], 0))
    if dl.s.size:
        j = np.searchsorted(dl.s, end[rows], side="right")
        nxt = np.where(j < dl.s.size, dl.s[np.minimum(j, dl.s.size - 1)], out)
        out = np.minimum(out, np.maximum(nxt, end[rows]))
    return out


def _claims(calls: dict[str, np.ndarray], busy: Cover, limit: tuple[int, int]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per call: its group; per group (in time order): claim start, claim end and the
    claimed idle (ns). ``calls``: ``s0``, ``s1``, ``next`` (next GPU start), ``drained``,
    ``next_call`` (start of the next blocking call), ``work_end`` (:func:`host_work_end`);
    ``busy``: GPU work and data-loader spans;
    ``limit``: the span a claim must stay in (module docstring)."""
    s0, s1 = calls["s0"], calls["s1"]
    n, grp = np.unique(calls["next"], return_inverse=True)
    grp = grp.reshape(-1)
    blocked = mask_total(coverage(s0, s1, np.zeros(s0.size, np.int64), 1, grp, n.size),
                         all_of=1)
    first = np.full(n.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, grp, s0)
    drain = np.full(n.size, _NEVER, dtype=np.int64)
    np.maximum.at(drain, grp, calls["drained"])
    work_end = np.full(n.size, _NEVER, dtype=np.int64)
    np.maximum.at(work_end, grp, calls["work_end"])
    cap = np.full(n.size, _NEVER, dtype=np.int64)
    np.maximum.at(cap, grp, calls["next_call"])
    a = np.maximum(np.maximum(drain, first), np.r_[_NEVER, n[:-1]])
    h = np.minimum(cap, np.maximum(work_end, n))
    h = np.clip(h, limit[0], limit[1])
    a = np.clip(a, limit[0], limit[1])
    avail = np.where(h > a, (h - a) - busy.within(a, np.maximum(a, h)), 0)
    claim = np.minimum(blocked, np.maximum(avail, 0))
    return grp, a, idle_reach(busy, a, claim), claim


def _waits_start(rt: RankTrace, s0: np.ndarray, s1: np.ndarray, own: np.ndarray
                 ) -> np.ndarray:
    """Where each call starts to *wait* (``s0``): its end for a call whose own copy
    (``own``, a row or -1) ran for half of the call or more. Such a call waits for its own
    transfer (a large copy from pageable memory staged by the driver, a synchronous
    ``cudaMemcpy``), with the GPU busy copying: it blocks nothing the GPU could have run,
    so it claims no idle time; the idle after it belongs to what the host does next
    (``host_bound``), and ``pageable_copies`` names the copy."""
    out = s0.copy()
    has = np.flatnonzero(own >= 0)
    if has.size:
        copy_ns = rt.column("end")[own[has]] - rt.column("ts")[own[has]]
        itself = has[2 * copy_ns >= s1[has] - s0[has]]
        out[itself] = s1[itself]
    return out


def _drained(gend: np.ndarray, at: np.ndarray, own: np.ndarray, rank_of: np.ndarray
             ) -> np.ndarray:
    """Per call: the latest end of the GPU work that started before it returned (``gend``
    in start order, ``at`` the first that started after), leaving out the copy the call
    itself made (``own``, a row or -1): that copy shows when the stream reached the call,
    not that the GPU was busy."""
    run_end = np.maximum.accumulate(gend)
    drained = np.where(at > 0, run_end[np.maximum(at - 1, 0)], _NEVER)
    for i in np.flatnonzero(own >= 0).tolist():
        p = int(rank_of[own[i]])
        if p >= at[i]:
            continue
        before = int(run_end[p - 1]) if p > 0 else int(_NEVER)
        after = int(gend[p + 1:at[i]].max()) if p + 1 < at[i] else int(_NEVER)
        drained[i] = max(before, after)
    return drained


def sync_bubbles(rt: RankTrace, dl: Cover | None = None,
                 window: tuple[int, int] | None = None) -> SyncBubbles:
    """Every blocking call of the rank with its group, claimed range and saving (ns);
    claims stay inside ``window`` when given. Without ``dl`` (the rank's data-loader
    spans) and ``window``, computed once per rank (:func:`hta.model.derived.derived`;
    its arrays are then read-only)."""
    if dl is None and window is None:
        return derived(rt, "findings.sync_bubbles",
                       lambda: read_only(_sync_bubbles(rt, None, None)))
    return _sync_bubbles(rt, dl, window)


def _sync_bubbles(rt: RankTrace, dl: Cover | None, window: tuple[int, int] | None
                  ) -> SyncBubbles:
    ev = rt.events
    rows = blocking_rows(rt)
    s0 = rt.column("ts")[rows]
    s1 = rt.column("end")[rows]
    g = gpu_rows(rt)  # in start order: the events table is sorted by ts
    gts, gend = rt.column("ts")[g], rt.column("end")[g]
    zeros = np.zeros(rows.size, dtype=np.int64)
    out = SyncBubbles(rows, s0, s1, np.full(rows.size, -1, np.int64), zeros.copy(),
                      zeros.copy(), zeros.copy(), zeros.copy())
    at = np.searchsorted(gts, s1, side="left")
    idx = np.flatnonzero(at < gts.size)  # calls with GPU work after them
    if idx.size == 0:
        return out
    dl = data_loader_cover(rt) if dl is None else dl
    starts = np.sort(s0)
    following = np.searchsorted(starts, s1[idx], side="left")  # next blocking call's start
    rank_of = np.empty(len(ev), dtype=np.int64)  # a GPU row's place in start order
    rank_of[g] = np.arange(g.size)
    own = linked_copies(rt, rows[idx])
    calls = {"s0": _waits_start(rt, s0[idx], s1[idx], own), "s1": s1[idx],
             "next": gts[at[idx]],
             "next_call": np.where(following < starts.size,
                                   starts[np.minimum(following, starts.size - 1)], _ALWAYS),
             "drained": _drained(gend, at[idx], own, rank_of),
             "work_end": host_work_end(rt, rows[idx], dl)}
    busy = idle_cover(rt, dl, g)
    last = int(gts[-1])  # idle after the last GPU start is never followed by work
    limit = (int(gts[0]), last) if window is None else (window[0], min(window[1], last))
    grp, a, t, claim = _claims(calls, busy, limit)
    dur = (calls["s1"] - calls["s0"]).astype(np.float64)
    total = np.bincount(grp, weights=dur, minlength=a.size)[grp]
    count = np.bincount(grp, minlength=a.size)[grp]
    share = np.where(total > 0, dur / np.where(total > 0, total, 1.0), 1.0 / count)
    out.group[idx] = grp
    out.saving[idx] = np.rint(share * claim[grp]).astype(np.int64)
    hit = claim[grp] > 0
    out.bubble_start[idx] = np.where(hit, a[grp], 0)
    out.bubble_end[idx] = np.where(hit, t[grp], 0)
    lo, hi = calls["s0"], np.clip(calls["drained"], calls["s0"], calls["s1"])
    out.queued_idle[idx] = (hi - lo) - busy.within(lo, hi)
    return out


def _site_name(rt: RankTrace, names: np.ndarray, op: int, label: int) -> str:
    """``aten::to under ## sparse_data_dist ##``, ``outside any operator``..."""
    text = rt.symbols[names[op]] if op >= 0 else "outside any operator"
    return text + (f" under {rt.symbols[names[label]]}" if label >= 0 else "")


Calls = dict[str, np.ndarray]


def _site_table(rt: RankTrace, sb: SyncBubbles, keep: np.ndarray) -> Calls:
    """Columns of the blocking calls kept (one entry a call): span, step, saving, site
    (:mod:`~hta.analysis.findings.sync_sites`) and its name."""
    rows = sb.rows[keep]
    sites = blocking_sites(rt).take(keep)  # sb.rows are blocking_rows(rt)
    names = rt.column("name")
    return {
        "row": rows, "start": sb.start[keep], "end": sb.end[keep],
        "saving": sb.saving[keep], "queued": sb.queued_idle[keep],
        "bubble_start": sb.bubble_start[keep], "bubble_end": sb.bubble_end[keep],
        "step": rt.column("iteration")[rows],
        "op": sites.op, "label": sites.label, "outer": sites.outer_label,
        "copy": sites.copy, "flags": sites.flags,
        "site": np.array([_site_name(rt, names, o, lb) for o, lb in
                          zip(sites.op.tolist(), sites.label.tolist(), strict=True)],
                         dtype=object),
    }


def _take(calls: Calls, mask: np.ndarray) -> Calls:
    return {k: v[mask] for k, v in calls.items()}


def _counts(rt: RankTrace, rows: np.ndarray, fmt: str, top: int) -> str:
    """``cudaMemcpyAsync ×8, cudaStreamSynchronize ×8``: names of ``rows`` by count."""
    ids, counts = np.unique(rt.column("name")[rows], return_counts=True)
    order = np.argsort(-counts, kind="stable")[:top]
    return ", ".join(fmt.format(name=rt.symbols[int(ids[i])], n=int(counts[i]))
                     for i in order.tolist())


def _copies_text(rt: RankTrace, calls: Calls) -> str:
    """``; copies: 8 × Memcpy DtoH (Device -> Pageable) of 256 B each`` (or empty)."""
    copy = calls["copy"][calls["copy"] >= 0]
    if copy.size == 0:
        return ""
    kinds = _counts(rt, copy, "{n} × {name}", 2)
    b = bytes_of(rt, copy)
    b = b[~np.isnan(b)]
    if b.size == 0:
        return f"; copies: {kinds}"
    if b.min() == b.max():
        return f"; copies: {kinds} of {fmt_bytes(float(b[0]))} each"
    return (f"; copies: {kinds} of {fmt_bytes(float(np.median(b)))} median "
            f"({fmt_bytes(float(b.sum()))} in all)")


def _per_step(ns: float, n_steps: int) -> str:
    return f" ({fmt_time(ns / n_steps)} a step)" if n_steps > 1 else ""


def _times(calls: Calls) -> int:
    """How many times the site blocked: its distinct operators, and calls without one."""
    op = calls["op"]
    return int(distinct(op[op >= 0]).size + np.count_nonzero(op < 0))


def _site_detail(rt: RankTrace, calls: Calls, n_steps: int,
                 step_start: dict[int, int], origin: int) -> str:
    """What one site did (``calls``: its entries of :func:`_site_table`; ``origin``: the
    window start, for a call outside any step)."""
    names = rt.column("name")
    times = _times(calls)
    call_text = _counts(rt, calls["row"], "{name} ×{n}", 4)
    ms, me = merge(calls["start"], calls["end"])
    blocked = int((me - ms).sum())
    outer, label = int(calls["outer"][0]), int(calls["label"][0])
    inside = f" (inside {rt.symbols[names[outer]]})" if outer >= 0 and outer != label else ""
    i = int(np.argmax(calls["end"] - calls["start"]))
    row, start, end, step = (int(calls[k][i]) for k in ("row", "start", "end", "step"))
    where = (f"in step {step}, {fmt_time(start - step_start[step])} into it"
             if step in step_start else
             f"outside any ProfilerStep, {fmt_time(start - origin)} into the window")
    rate = f" ({times / n_steps:.3g} a step)" if n_steps > 1 else ""
    queued = int(calls["queued"].sum())
    waited = (f"; during these waits the GPU also sat idle {fmt_time(queued)} with earlier "
              f"work still queued (not counted: that work waited on something else, such "
              f"as a stream wait on an event or work this trace does not show)"
              if queued >= QUEUED_NOTE * blocked else "")
    return (
        f"{calls['site'][0]}{inside}: {times} time(s){rate}, the host blocked "
        f"{fmt_time(blocked)}{_per_step(blocked, n_steps)} in {call_text}"
        f"{_copies_text(rt, calls)}; the longest: {rt.symbols[names[row]]} "
        f"{where}, {fmt_time(end - start)}{waited}"
    )


def capture_only(rt: RankTrace) -> bool:
    """Whether the rank captures CUDA/HIP graphs and replays none (a warm-up trace)."""
    runtime = np.flatnonzero(kind_mask(rt.kind_codes(), RUNTIME_KINDS))
    return bool(name_matches(rt, runtime, GRAPH_CAPTURE).any()
                and not name_matches(rt, runtime, GRAPH_LAUNCH).any())


def timing_syncs(rt: RankTrace, calls: Calls, window: tuple[int, int],
                 n_iterations: int) -> np.ndarray:
    """Which of ``calls`` (:func:`_site_table`) are a loop's own timing: calls that only
    wait (:data:`WAIT_ONLY`: device, stream or event synchronize) with no operator around
    them and no copy of their own, at most once per iteration of a loop of two or more
    (``n_iterations`` in the window), on a rank whose window runs no backward pass. A
    benchmark or a latency measurement synchronizes so, once per call it times; the trace
    cannot tell whether that timing is needed, so the finding is at most low
    (:func:`max_severity`)."""
    bare = (calls["op"] < 0) & (calls["copy"] < 0)
    bare &= name_matches(rt, calls["row"], WAIT_ONLY)
    if n_iterations < 2 or not 0 < int(bare.sum()) <= n_iterations \
            or runs_backward(rt, window):
        return np.zeros(bare.size, dtype=bool)
    return bare


def max_severity(subject: str) -> str:
    """The cap of a ``host_sync`` finding: ``low`` for a loop's own timing synchronize
    (its subject ends with :data:`TIMING`), none otherwise."""
    return "low" if subject.endswith(TIMING) else ""


def _iteration_count(rt: RankTrace, n_steps: int, window: tuple[int, int]) -> int:
    """The analysed iterations: the steps, else the loop's iterations in the window
    (:func:`~hta.analysis.findings.loops.iterations_found`), else 1."""
    if n_steps:
        return n_steps
    loop = iterations_found(rt)
    return loop.count_in(window) if loop is not None else 1


def _site_finding(rt: RankTrace, table: Calls, n_steps: int, step_start: dict[int, int],
                  window: tuple[int, int], dl: Cover, timing: bool) -> Finding | None:
    """The finding of the blocking calls ``table`` (by site, the module docstring); a
    loop's own timing synchronize (``timing``) gets its own subject and advice."""
    if not (table["saving"] > 0).any():
        return None
    code, sites = pd.factorize(table["site"])
    by_site = np.bincount(code, weights=table["saving"], minlength=sites.size)
    ranked = [int(k) for k in np.argsort(-by_site, kind="stable") if by_site[k] > 0]
    total = int(table["saving"].sum())
    top = _take(table, code == ranked[0])
    names = rt.column("name")
    labels = [rt.symbols[names[r]] for r in
              distinct(np.r_[top["label"], top["outer"]]).tolist() if r >= 0]
    advice = TIMING_ADVICE if timing else site_advice(
        int(np.bitwise_or.reduce(top["flags"])), bool((top["op"] < 0).all()), labels)
    others = "; ".join(
        f"{sites[k]} {fmt_time(int(by_site[k]))} ({_times(_take(table, code == k))} time(s))"
        for k in ranked[1:4])
    hit = table["step"][table["saving"] > 0]
    evidence = (
        f"blocking calls left the GPU idle {fmt_time(total)}{_per_step(total, n_steps)} "
        f"{f'in {fmt_steps(hit)}' if n_steps else 'in the trace (no ProfilerStep)'}, "
        f"during the waits and after them until the host re-filled its "
        f"queue (GPU timeline; host wait in the idle time table); "
        f"{round(100 * int(by_site[ranked[0]]) / total)}% from "
        f"{_site_detail(rt, top, n_steps, step_start, window[0])}."
        + (f" Then: {others}." if others else "")
        + (TIMING_EVIDENCE if timing else "")
    )
    # The claim: the GPU idle inside the claimed ranges of the calls that saved time
    # (exactly the saving, by construction of the ranges).
    held = table["saving"] > 0
    ranges = Cover(table["bubble_start"][held], table["bubble_end"][held])
    claim = claim_outside(ranges.s, ranges.e, None, idle_cover(rt, dl))
    return Finding((rt.rank,), step_tuple(hit), evidence, total, window[1] - window[0],
                   subject=str(sites[ranked[0]]) + (TIMING if timing else ""),
                   advice=advice, claim=claim)


def check_host_sync(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``host_sync`` findings of one rank: the idle its blocking calls caused, by
    site; a loop's own timing synchronize (:func:`timing_syncs`) apart, at most low. None
    on a rank without GPU work, or that only captures graphs (its synchronisations belong
    to the capture, not to a step)."""
    if gpu_rows(rt).size == 0 or capture_only(rt):
        return []
    window = analysis_window(rt, iterations)
    dl = data_loader_cover(rt)
    sb = sync_bubbles(rt, dl, window)
    keep = in_selection(rt, sb.rows, iterations, window) & (sb.group >= 0)
    keep &= ~under_warm_up(rt, sb.rows) & ~in_one_time(rt, sb.rows)
    if not (sb.saving[keep] > 0).any():
        return []
    table = _site_table(rt, sb, keep)
    steps = step_table(rt)
    if iterations is not None:
        steps = steps[steps["step"].isin(iterations)]
    n_steps = len(steps)
    step_start = dict(zip(steps["step"].tolist(), steps["start_ns"].tolist(), strict=True))
    timing = timing_syncs(rt, table, window, _iteration_count(rt, n_steps, window))
    found = (_site_finding(rt, _take(table, part), n_steps, step_start, window, dl, is_timing)
             for part, is_timing in ((~timing, False), (timing, True)) if part.any())
    return [f for f in found if f is not None]


RULE = FindingRule(
        id="host_sync",
        title="Host synchronisation inside the step leaves the GPU idle",
        section="idle",
        advice=("Remove the synchronisation from the step: avoid .item(), .cpu(), .tolist(), "
                "printing tensors and torch.cuda.synchronize() in the loop; copy to the "
                "host with non_blocking=True into pinned memory and read the value a step "
                "later; find the calls with torch.cuda.set_sync_debug_mode('warn')."),
        saving=("Per group of blocking calls (device/stream/event synchronize, synchronous "
                "or pageable memcpy, cudaFree, .item()) that end before the same GPU work: "
                "the GPU idle from the drain (or the first call) until the next blocking "
                "call or until the host thread stops working (no traced work for 100 µs, "
                "a data-loader span), outside data-loader spans, at most the time the host "
                "was blocked; summed over the analysed steps, by operator and label (calls "
                "inside warm-up code left out)."),
        check=check_host_sync,
        max_severity=max_severity,
    )
