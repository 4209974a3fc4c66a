"""Findings about the host holding the GPU back: synchronisation in the step, data loading.

Both rules measure *GPU idle time*: time in the analysed window when no kernel, copy or
memset runs on any stream of the rank. No idle nanosecond is claimed by two of the host
rules: data-loader spans belong to ``data_loading``, the bubbles after synchronising calls
to ``host_sync`` (minus data-loader time), and ``launch_bound``
(:mod:`hta.analysis.findings.launch_bound`) leaves out both.

``host_sync``
    A *blocking call* is a runtime call of kind ``runtime_sync`` except those that make a
    stream wait on an event (``cudaStreamWaitEvent``, ``hipStreamWaitEvent``, MTIA
    ``waitOnEvent``: they do not block the CPU); a synchronous copy call (``cudaMemcpy``,
    ``cudaMemcpy2D``, ``cuMemcpyDtoH``, ``hipMemcpy``, ``hipMemcpyWithStream``: ``*Memcpy*``
    without ``Async``); or the launch call of a copy from or to pageable host memory
    (``Pageable`` in the copy's name, e.g. the ``Memcpy DtoH (Device -> Pageable)`` of a
    ``.item()``: ``cudaMemcpyAsync`` returns only once such data is staged). Where the
    trace has no runtime calls, ``aten::_local_scalar_dense`` (``.item()``) and
    ``aten::nonzero`` operators that contain no blocking call stand for one. For a call
    ``[s0, s1)``: *N* is the start of the first GPU work that starts at or after ``s1``
    (no bubble when the trace has none), *D* the latest end of the GPU work that started
    before ``s1`` (the GPU drained at *D*). Calls with the same *N* form a group; *d* is
    the union of their durations (the time the host was blocked). Had the host not been
    blocked it would have reached the next launch *d* earlier, so the group's **bubble**
    is ``[max(D, N - d), N)``, clipped to the window; nothing runs on the GPU
    inside it by construction. The saving is the bubble's length minus its overlap with
    data-loader spans, shared among the group's calls in proportion to their durations
    and summed per call name (the finding's subject).

``data_loading``
    A *data-loader span* is a CPU event named ``enumerate(DataLoader)#...``, containing
    ``DataLoaderIter.__next__``, the Python frame ``torch/utils/data/dataloader.py(N):
    __next__``, or a ``record_function`` labelled ``data``, ``data_loading``,
    ``dataloader`` or ``data_loader`` (any case). The saving is the GPU idle time inside
    the union of the spans that start in the analysed steps, clipped to the window. A rank
    without GPU work has no finding (there is no GPU to stall).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.findings.claims import claim_outside
from hta.analysis.findings.engine import Finding, FindingRule, analysis_window
from hta.analysis.intervals import Cover, coverage, mask_total, merge
from hta.analysis.rowmap import RowMap
from hta.model.rules import GPU_WORK_KINDS, KIND_CODE, MEMORY_KINDS, kind_codes
from hta.model.trace import RankTrace

#: Runtime-sync names that only make a stream wait; the CPU goes on.
STREAM_WAIT = re.compile(r"WaitEvent|waitOnEvent")
#: Synchronous copy calls (``runtime_launch`` in the kind rules): no ``Async`` in the name.
BLOCKING_COPY = re.compile(r"^(cuda|cu|hip)Memcpy(?!\w*Async)\w*$")
#: Copies from or to pageable host memory: their launch call returns only once the data
#: is staged, so it blocks the host even when it is ``cudaMemcpyAsync``.
PAGEABLE = re.compile(r"Pageable")
#: Operators that read a device value on the host (used when no runtime call is recorded).
SYNC_OPS = frozenset({"aten::_local_scalar_dense", "aten::nonzero"})
DATA_LOADER = re.compile(
    r"^enumerate\(DataLoader\)#|DataLoaderIter\.__next__"
    r"|torch/utils/data/dataloader\.py\(\d+\): __next__$"
)
#: ``record_function`` labels taken as data loading (user annotations only).
DATA_ANNOTATION = re.compile(r"(?i)^data([_ ]?load(ing|er)?)?$")

_GPU_CODES = kind_codes(GPU_WORK_KINDS)
_COPY_CODES = kind_codes(sorted(MEMORY_KINDS - {"memset"}))
_CPU_CODES = kind_codes(("cpu_op", "user_annotation", "python_function"))
_SYNC = KIND_CODE["runtime_sync"]
_LAUNCH = KIND_CODE["runtime_launch"]
_CPU_OP = KIND_CODE["cpu_op"]
_ANNOTATION = KIND_CODE["user_annotation"]
_NEVER = np.iinfo(np.int64).min // 4


# -- shared helpers (also used by launch_bound and copies) --------------------------------
def gpu_rows(rt: RankTrace) -> np.ndarray:
    """Positions of the rank's GPU work rows (kernels, copies, memsets)."""
    return np.flatnonzero(np.isin(rt.events["kind"].cat.codes.to_numpy(), _GPU_CODES))


def name_matches(rt: RankTrace, rows: np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
    """Whether each row's name matches ``pattern`` (tested once per distinct name)."""
    ids = rt.events["name"].to_numpy()[rows]
    if ids.size == 0:
        return np.zeros(0, dtype=bool)
    uniq, inverse = np.unique(ids, return_inverse=True)
    hit = np.array([pattern.search(rt.symbols[i]) is not None for i in uniq.tolist()])
    return hit[inverse.reshape(-1)]


def in_selection(rt: RankTrace, rows: np.ndarray, iterations: Sequence[int] | None,
                 window: tuple[int, int]) -> np.ndarray:
    """Rows starting inside the window and, with ``iterations``, in a selected step."""
    ts = rt.events["ts"].to_numpy()[rows]
    keep = (ts >= window[0]) & (ts < window[1])
    if iterations is not None:
        keep &= np.isin(rt.events["iteration"].to_numpy()[rows], list(iterations))
    return keep


def fmt_time(ns: float) -> str:
    """``12.3 µs`` below a millisecond, ``4.567 ms`` above (``1,234.567 ms``)."""
    return f"{ns / 1e3:,.1f} µs" if abs(ns) < 1e6 else f"{ns / 1e6:,.3f} ms"


def fmt_steps(steps: Sequence[int]) -> str:
    """``steps 3-10``, ``steps 3, 5, 9``, ``step 4`` or ``no ProfilerStep``."""
    steps = sorted({int(s) for s in steps if s >= 0})
    if not steps:
        return "outside any ProfilerStep"
    if len(steps) == 1:
        return f"step {steps[0]}"
    if steps == list(range(steps[0], steps[-1] + 1)):
        return f"steps {steps[0]}-{steps[-1]}"
    shown = ", ".join(str(s) for s in steps[:6])
    return f"steps {shown}{', ...' if len(steps) > 6 else ''}"


def step_tuple(values: np.ndarray) -> tuple[int, ...]:
    """The distinct step numbers (>= 0), sorted."""
    return tuple(int(s) for s in np.unique(values) if s >= 0)


# -- data-loader spans ---------------------------------------------------------------------
def data_loader_rows(rt: RankTrace) -> np.ndarray:
    """Positions of the data-loader spans (see the module docstring)."""
    codes = rt.events["kind"].cat.codes.to_numpy()
    cpu = np.flatnonzero(np.isin(codes, _CPU_CODES))
    hit = name_matches(rt, cpu, DATA_LOADER)
    ann = codes[cpu] == _ANNOTATION
    hit[ann] |= name_matches(rt, cpu[ann], DATA_ANNOTATION)
    return cpu[hit]


def data_loader_cover(rt: RankTrace) -> Cover:
    """The union of every data-loader span of the rank."""
    rows = data_loader_rows(rt)
    ev = rt.events
    return Cover(ev["ts"].to_numpy()[rows], ev["end"].to_numpy()[rows])


# -- synchronising calls ---------------------------------------------------------------------
@dataclass(frozen=True)
class SyncBubbles:
    """The blocking calls of a rank and the GPU idle each one caused (see the docstring)."""

    rows: np.ndarray
    start: np.ndarray
    end: np.ndarray
    saving: np.ndarray
    bubble_start: np.ndarray
    bubble_end: np.ndarray


def blocking_rows(rt: RankTrace) -> np.ndarray:
    """Positions of the blocking calls, and of sync operators holding none, in time order."""
    ev = rt.events
    codes = ev["kind"].cat.codes.to_numpy()
    sync = np.flatnonzero(codes == _SYNC)
    sync = sync[~name_matches(rt, sync, STREAM_WAIT)]
    launch = np.flatnonzero(codes == _LAUNCH)
    calls = np.union1d(sync, launch[name_matches(rt, launch, BLOCKING_COPY)])
    copies = np.flatnonzero(np.isin(codes, _COPY_CODES))
    copies = copies[name_matches(rt, copies, PAGEABLE)]
    staged = RowMap(ev).positions(ev["index_correlation"].to_numpy()[copies])
    staged = staged[staged >= 0]
    calls = np.union1d(calls, staged[codes[staged] == _LAUNCH])
    ops = np.flatnonzero(codes == _CPU_OP)
    names = ev["name"].to_numpy()
    sync_ids = [i for i, s in enumerate(rt.symbols) if s in SYNC_OPS]
    ops = ops[np.isin(names[ops], sync_ids)]
    if ops.size:
        # mark every ancestor of a call, one level of the parent links at a time
        parent = RowMap(ev).column(ev, "parent")
        holds = np.zeros(len(ev), dtype=bool)
        up = parent[calls]
        while (up := up[up >= 0]).size:
            up = np.unique(up[~holds[up]])
            holds[up] = True
            up = parent[up]
        ops = ops[~holds[ops]]
    return np.union1d(calls, ops)


def ancestors(rt: RankTrace, rows: np.ndarray, limit: int = 4096) -> list[list[int]]:
    """Each row's enclosing CPU events, innermost first (through the ``parent`` links)."""
    parent = RowMap(rt.events).column(rt.events, "parent")
    out = []
    for r in rows.tolist():
        chain: list[int] = []
        p = int(parent[r])
        while p >= 0 and len(chain) < limit:
            chain.append(p)
            p = int(parent[p])
        out.append(chain)
    return out


def sync_bubbles(rt: RankTrace, dl: Cover | None = None,
                 window: tuple[int, int] | None = None) -> SyncBubbles:
    """Every blocking call of the rank with its bubble and saving (ns), bubbles clipped
    to ``window`` when given."""
    ev = rt.events
    rows = blocking_rows(rt)
    s0 = ev["ts"].to_numpy()[rows]
    s1 = ev["end"].to_numpy()[rows]
    g = gpu_rows(rt)
    gts = ev["ts"].to_numpy()[g]
    order = np.argsort(gts, kind="stable")
    gts = gts[order]
    gend = np.maximum.accumulate(ev["end"].to_numpy()[g][order]) if g.size else gts
    at = np.searchsorted(gts, s1, side="left")
    if gts.size:
        nxt = np.where(at < gts.size, gts[np.minimum(at, gts.size - 1)], -1)
        drained = np.where(at > 0, gend[np.maximum(at - 1, 0)], _NEVER)
    else:
        nxt = np.full(rows.size, -1, dtype=np.int64)
        drained = np.full(rows.size, _NEVER, dtype=np.int64)
    saving = np.zeros(rows.size, dtype=np.int64)
    b_start = np.zeros(rows.size, dtype=np.int64)
    b_end = np.zeros(rows.size, dtype=np.int64)
    dl = data_loader_cover(rt) if dl is None else dl
    # one group per next GPU start; calls with no GPU work after them have no bubble
    idx = np.flatnonzero(nxt >= 0)
    if idx.size == 0:
        return SyncBubbles(rows, s0, s1, saving, b_start, b_end)
    n, grp = np.unique(nxt[idx], return_inverse=True)
    grp = grp.reshape(-1)
    blocked = mask_total(coverage(s0[idx], s1[idx], np.zeros(idx.size, np.int64), 1, grp,
                                  n.size), all_of=1)
    last_drain = np.full(n.size, _NEVER, dtype=np.int64)
    np.maximum.at(last_drain, grp, drained[idx])
    start = np.maximum(last_drain, n - blocked)
    if window is not None:
        start, n = np.maximum(start, window[0]), np.minimum(n, window[1])
    length = np.where(start < n, np.maximum(n - start - dl.within(start, n), 0), 0)
    dur = (s1[idx] - s0[idx]).astype(np.float64)
    total = np.bincount(grp, weights=dur, minlength=n.size)[grp]
    count = np.bincount(grp, minlength=n.size)[grp]
    share = np.where(total > 0, dur / np.where(total > 0, total, 1.0), 1.0 / count)
    hit = (start < n)[grp]
    saving[idx] = np.where(hit, np.rint(share * length[grp]), 0).astype(np.int64)
    b_start[idx] = np.where(hit, start[grp], 0)
    b_end[idx] = np.where(hit, n[grp], 0)
    return SyncBubbles(rows, s0, s1, saving, b_start, b_end)


def _context(rt: RankTrace, chain: list[int], codes: np.ndarray, names: np.ndarray) -> str:
    """``aten::item under forward``: the outermost operator and the nearest label above
    (``codes``, ``names``: the rank's kind codes and name ids)."""
    ops = [p for p in chain if codes[p] == _CPU_OP]
    labels = [p for p in chain if codes[p] == _ANNOTATION
              and not rt.symbols[names[p]].startswith("ProfilerStep#")]
    text = rt.symbols[names[ops[-1]]] if ops else "outside any operator"
    if labels:
        text += f" under {rt.symbols[names[labels[0]]]}"
    return text


def check_host_sync(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``host_sync`` findings of one rank, one per blocking call name."""
    if gpu_rows(rt).size == 0:
        return []
    window = analysis_window(rt, iterations)
    dl = data_loader_cover(rt)
    sb = sync_bubbles(rt, dl, window)
    keep = in_selection(rt, sb.rows, iterations, window)
    saving = np.where(keep, sb.saving, 0)
    ev = rt.events
    codes = ev["kind"].cat.codes.to_numpy()
    all_names = ev["name"].to_numpy()
    names = all_names[sb.rows]
    steps = ev["iteration"].to_numpy()[sb.rows]
    findings = []
    for name_id in np.unique(names[keep]).tolist():
        mine = keep & (names == name_id)
        total = int(saving[mine].sum())
        if total <= 0:
            continue
        idx = np.flatnonzero(mine)
        hit = idx[saving[idx] > 0]
        by_ctx: dict[str, int] = {}  # only calls with a saving weigh in the context
        for i, chain in zip(hit.tolist(), ancestors(rt, sb.rows[hit]), strict=True):
            ctx = _context(rt, chain, codes, all_names)
            by_ctx[ctx] = by_ctx.get(ctx, 0) + int(saving[i])
        ctx, ctx_ns = max(by_ctx.items(), key=lambda kv: kv[1])
        name = rt.symbols[name_id]
        evidence = (
            f"{idx.size} {name} call(s) in {fmt_steps(steps[idx])} blocked the host "
            f"{fmt_time(int((sb.end[idx] - sb.start[idx]).sum()))}; after {hit.size} of them "
            f"the GPU sat idle {fmt_time(total)} waiting for the next work (GPU timeline; "
            f"host wait in the idle time table), {round(100 * ctx_ns / total)}% of it "
            f"from {ctx}."
        )
        claim = claim_outside(sb.bubble_start[hit], sb.bubble_end[hit], saving[hit], dl)
        findings.append(Finding((rt.rank,), step_tuple(steps[hit]), evidence, total,
                                window[1] - window[0], subject=name, claim=claim))
    return findings


def check_data_loading(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``data_loading`` finding of one rank: GPU idle inside data-loader spans."""
    g = gpu_rows(rt)
    if g.size == 0:
        return []
    window = analysis_window(rt, iterations)
    rows = data_loader_rows(rt)
    rows = rows[in_selection(rt, rows, iterations, window)]
    if rows.size == 0:
        return []
    ev = rt.events
    start = np.maximum(ev["ts"].to_numpy()[rows], window[0])
    end = np.minimum(ev["end"].to_numpy()[rows], window[1])
    busy = Cover(ev["ts"].to_numpy()[g], ev["end"].to_numpy()[g])
    ms, me = merge(start, end)
    idle = (me - ms) - busy.within(ms, me)
    total = int(idle.sum())
    if total <= 0:
        return []
    steps = ev["iteration"].to_numpy()[rows]
    pieces = np.searchsorted(ms, start, side="right") - 1
    hit_steps = steps[idle[np.clip(pieces, 0, None)] > 0]
    names = ev["name"].to_numpy()[rows]
    top = rt.symbols[int(pd.Series(end - start).groupby(names).sum().idxmax())]
    parent = RowMap(ev).column(ev, "parent")[rows]
    outer = int(np.count_nonzero(~np.isin(parent, rows)))  # nested frames count once
    evidence = (
        f"{outer} data-loader span(s) ({top}) in {fmt_steps(steps)} ran "
        f"{fmt_time(int((me - ms).sum()))} on the CPU, {fmt_time(total)} of it with the GPU "
        f"idle: no kernel, copy or memset on any stream (GPU timeline; host wait in the "
        f"idle time table)."
    )
    return [Finding((rt.rank,), step_tuple(hit_steps), evidence, total,
                    window[1] - window[0], claim=claim_outside(ms, me, None, busy))]


RULES: list[FindingRule] = [
    FindingRule(
        id="host_sync",
        title="Host synchronisation inside the step leaves the GPU idle",
        section="idle",
        advice=("Remove the synchronisation from the step: avoid .item(), .cpu(), .tolist(), "
                "printing tensors and torch.cuda.synchronize() in the loop; copy to the "
                "host with non_blocking=True into pinned memory and read the value a step "
                "later; find the calls with torch.cuda.set_sync_debug_mode('warn')."),
        saving=("Per blocking call (device/stream/event synchronize, synchronous memcpy, "
                ".item()): the GPU idle from max(drain, next start - time blocked) to the "
                "start of the first GPU work after the call returned, outside data-loader "
                "spans, summed over the window."),
        check=check_host_sync,
    ),
    FindingRule(
        id="data_loading",
        title="The GPU waits for the data loader",
        section="idle",
        advice=("Load data in the background: DataLoader(num_workers=N, pin_memory=True, "
                "persistent_workers=True, prefetch_factor=2 or more); move preprocessing "
                "to the GPU or to the workers; prefetch the next batch to the GPU on a side "
                "stream."),
        saving=("The GPU idle time (no kernel, copy or memset on any stream) inside the "
                "union of the data-loader spans of the analysed steps."),
        check=check_data_loading,
    ),
]
