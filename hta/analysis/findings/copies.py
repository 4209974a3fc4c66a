"""Findings about host-device copies: pageable host memory, copies on the compute stream.

``pageable_copies``
    A *pageable copy* is a GPU copy (``memcpy_*`` kind) whose name says ``Pageable``
    (Kineto names them ``Memcpy HtoD (Pageable -> Device)``, ``Memcpy DtoH (Device ->
    Pageable)``). The driver stages such data through a pinned buffer in chunks, so the
    copy runs slower than from pinned memory (and its launch call blocks the host, which
    ``host_sync`` counts). Per direction the *reference bandwidth* is the achieved
    bandwidth (bytes / time) of the rank's pinned copies (``Pinned`` in the name) of that
    direction of at least :data:`MIN_REFERENCE_BYTES` (64 KiB, so latency does not
    dominate), when there are any; otherwise :data:`PINNED_REFERENCE_GBPS` (12 GB/s, a
    conservative figure for pinned copies over PCIe 3.0 x16; Gen4 and Gen5 links do 2 and
    4 times that, so the saving is then an underestimate). A copy of ``b`` bytes would take
    ``max(MIN_COPY_NS, b / reference)`` pinned (:data:`MIN_COPY_NS`, 2 µs: the latency of
    any copy); its saving is what it took beyond that, but at most the time it ran with no
    other GPU work (kernels, copies, memsets) running: a copy hidden under other work does
    not lengthen the step. ``est_saving`` sums the copies of one direction (the subject) in
    the analysed steps, at most the time the union of those copies ran alone; copies
    without a ``bytes`` arg are counted but save nothing. This rule claims the copy's own
    time on the GPU; ``host_sync`` claims the GPU idle (no work at all) that the blocked
    host leaves around it, so the two never claim the same time.

``copies_on_compute_stream``
    A *compute stream* is a stream that runs at least one ``computation`` kernel in the
    window. Host transfers (``memcpy_htod``, ``memcpy_dtoh``) on a compute stream hold up
    the kernels queued behind them. For such a copy ``[c0, c1)``, *K* is the first
    computation kernel after it on the same stream and *L* the end of K's launch call.
    When ``L < c1``, K was enqueued while the copy still ran and waited behind it; the
    copy *blocked* it for ``min(c1, K.start) - max(c0, L)``. ``est_saving`` sums that time
    over the copies of one direction (the subject) in the analysed steps: on a side copy
    stream K could have started at L. It is an upper bound: it assumes K does not need the
    copy's data, which holds when the copy prefetches the next batch. Device-to-device
    copies and memsets are left out: they are device work, not transfers a copy stream
    would overlap.
"""

from __future__ import annotations

import re

import numpy as np

from hta.analysis.bandwidth import DIRECTION
from hta.analysis.findings.base import Finding, FindingRule, analysis_window, link
from hta.analysis.findings.claims import Claim
from hta.analysis.findings.rule_tools import (
    bytes_of,
    fmt_bytes,
    fmt_time,
    heaviest_name,
    in_selection,
    name_matches,
    step_tuple,
    steps_text,
)
from hta.analysis.intervals import Cover, merge
from hta.analysis.perf.calls import gpu_rows
from hta.model.arrays import distinct
from hta.model.rules import KIND_CODE, KINDS, MEMORY_KINDS, codes_in, kind_codes, kind_mask
from hta.model.trace import RankTrace

PAGEABLE = re.compile(r"Pageable")
PINNED = re.compile(r"Pinned")
#: Reference bandwidth of pinned copies when the rank has none to measure (GB/s).
PINNED_REFERENCE_GBPS = 12.0
#: Smallest pinned copy whose bandwidth is taken as the reference (bytes).
MIN_REFERENCE_BYTES = 64 << 10
#: A copy of any size takes at least this long (ns).
MIN_COPY_NS = 2_000

_COPY_KINDS = MEMORY_KINDS - {"memset"}
_TRANSFER_CODES = kind_codes(["memcpy_htod", "memcpy_dtoh"])
_COMPUTE = KIND_CODE["computation"]


def _alone(rt: RankTrace, rows: np.ndarray) -> tuple[np.ndarray, int]:
    """Per copy of ``rows``: the time it ran with no other GPU work (kernels, copies,
    memsets not in ``rows``) running; and the same for the union of ``rows`` (ns)."""
    ev = rt.events
    ts, end = rt.column("ts"), rt.column("end")
    mine = np.zeros(len(ev), dtype=bool)
    mine[rows] = True
    others = gpu_rows(rt)
    others = others[~mine[others]]
    cover = Cover(ts[others], end[others])
    alone = (end[rows] - ts[rows]) - cover.within(ts[rows], end[rows])
    ms, me = merge(ts[rows], end[rows])
    return alone, int(((me - ms) - cover.within(ms, me)).sum())


def _reference(codes: np.ndarray, pinned: np.ndarray, nbytes: np.ndarray, dur: np.ndarray,
               code: int) -> tuple[float, str]:
    """The reference bandwidth (GB/s) of copies of kind ``code`` and where it comes from:
    the achieved bandwidth of the ``pinned`` copies of that kind (64 KiB or more), else
    :data:`PINNED_REFERENCE_GBPS`."""
    ref_rows = pinned[(codes[pinned] == code) & (nbytes[pinned] >= MIN_REFERENCE_BYTES)
                      & (dur[pinned] > 0)]
    if ref_rows.size:
        ref = float(nbytes[ref_rows].sum() / dur[ref_rows].sum())  # bytes/ns = GB/s
        return ref, f"{ref_rows.size} pinned copies of this direction on the rank"
    return PINNED_REFERENCE_GBPS, "the reference for pinned copies"


def pageable_as_pinned(rt: RankTrace) -> tuple[np.ndarray, np.ndarray]:
    """The rank's copies named Pageable and the time (ns) each would take from pinned
    memory: ``max(MIN_COPY_NS, bytes / reference)`` with the reference of its direction
    (:func:`_reference`); a copy of unknown size keeps its duration."""
    ev = rt.events
    codes = rt.kind_codes()
    copies = np.flatnonzero(kind_mask(codes, _COPY_KINDS))
    pageable = copies[name_matches(rt, copies, PAGEABLE)]
    dur = rt.column("dur")
    if not pageable.size:
        return pageable, np.zeros(0)
    pinned = copies[name_matches(rt, copies, PINNED)]
    nbytes = np.full(len(ev), np.nan)
    nbytes[copies] = bytes_of(rt, copies)
    out = dur[pageable].astype(np.float64)
    for code in distinct(codes[pageable]).tolist():
        mine = codes[pageable] == code
        ref = _reference(codes, pinned, nbytes, dur, code)[0]
        b = nbytes[pageable[mine]]
        fast = np.maximum(MIN_COPY_NS, np.nan_to_num(b) / ref)
        out[mine] = np.where(np.isnan(b), out[mine], np.minimum(out[mine], fast))
    return pageable, out


def check_pageable(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``pageable_copies`` findings of one rank, one per direction."""
    ev = rt.events
    codes = rt.kind_codes()
    copies = np.flatnonzero(kind_mask(codes, _COPY_KINDS))
    pageable = copies[name_matches(rt, copies, PAGEABLE)]
    if pageable.size == 0:
        return []
    window = analysis_window(rt, iterations)
    pageable = pageable[in_selection(rt, pageable, iterations, window)]
    pinned = copies[name_matches(rt, copies, PINNED)]
    nbytes = np.full(len(ev), np.nan)  # filled for the copies only
    nbytes[copies] = bytes_of(rt, copies)
    dur = rt.column("dur")
    steps = rt.column("iteration")
    findings = []
    for code in distinct(codes[pageable]).tolist():
        rows = pageable[codes[pageable] == code]
        ref, source = _reference(codes, pinned, nbytes, dur, code)
        b = nbytes[rows]
        known = ~np.isnan(b)
        pinned_ns = np.maximum(MIN_COPY_NS, np.where(known, b, 0.0) / ref)
        excess = np.where(known, np.maximum(dur[rows] - pinned_ns, 0.0), 0.0)
        alone, union_alone = _alone(rt, rows)
        saving = np.minimum(excess, alone)
        total = int(round(min(float(saving.sum()), float(union_alone))))
        if total <= 0:
            continue
        direction = DIRECTION[KINDS[code]]
        top = heaviest_name(rt, rows, dur[rows])
        moved = float(b[known].sum())
        took = int(dur[rows][known].sum())
        slow = saving > 0
        evidence = (
            f"{rows.size} {direction} copies from pageable memory ({top}) in "
            f"{steps_text(rt, steps[rows])} moved {fmt_bytes(moved)} in {fmt_time(took)} "
            f"({moved / max(took, 1):.2f} GB/s); at the {ref:.1f} GB/s of {source} (and at "
            f"least {MIN_COPY_NS // 1000} µs a copy), {int(slow.sum())} of them took "
            f"{fmt_time(total)} longer than they would from pinned memory while no other "
            f"GPU work ran ({fmt_time(float(excess.sum()))} longer in all; memory bandwidth "
            f"table, {direction}; copy names on the GPU timeline)."
        )
        claim = Claim(rt.column("ts")[rows], rt.column("end")[rows], saving)
        findings.append(Finding((rt.rank,), step_tuple(steps[rows][saving > 0]), evidence,
                                total, window[1] - window[0], subject=direction,
                                claim=claim))
    return findings


def check_copies_on_compute(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``copies_on_compute_stream`` findings of one rank, one per direction."""
    codes = rt.kind_codes()
    window = analysis_window(rt, iterations)
    stream = rt.column("stream")
    kernels = np.flatnonzero(codes == _COMPUTE)
    kernels = kernels[in_selection(rt, kernels, None, window)]
    compute_streams = distinct(stream[kernels])
    transfers = np.flatnonzero(codes_in(codes, _TRANSFER_CODES))
    transfers = transfers[np.isin(stream[transfers], compute_streams)]
    transfers = transfers[in_selection(rt, transfers, iterations, window)]
    if transfers.size == 0:
        return []
    ts, end = rt.column("ts"), rt.column("end")
    launch = link(rt, "index_correlation")
    all_kernels = np.flatnonzero(codes == _COMPUTE)
    blocked = np.zeros(transfers.size, dtype=np.int64)
    held_from = np.zeros(transfers.size, dtype=np.int64)
    for s in distinct(stream[transfers]).tolist():
        mine = np.flatnonzero(stream[transfers] == s)
        ks = all_kernels[stream[all_kernels] == s]
        ks = ks[np.argsort(ts[ks], kind="stable")]
        at = np.searchsorted(ts[ks], ts[transfers[mine]], side="right")
        has = at < ks.size
        k = ks[np.minimum(at, ks.size - 1)]
        lk = launch[k]
        has &= lk >= 0
        l_end = np.where(lk >= 0, end[np.maximum(lk, 0)], np.iinfo(np.int64).max)
        c0, c1 = ts[transfers[mine]], end[transfers[mine]]
        wait = np.minimum(c1, ts[k]) - np.maximum(c0, l_end)
        blocked[mine] = np.where(has & (l_end < c1), np.maximum(wait, 0), 0)
        held_from[mine] = np.maximum(c0, l_end)
    steps = rt.column("iteration")
    findings = []
    for code in distinct(codes[transfers]).tolist():
        sel = codes[transfers] == code
        total = int(blocked[sel].sum())
        if total <= 0:
            continue
        rows, hit = transfers[sel], transfers[sel & (blocked > 0)]
        direction = DIRECTION[KINDS[code]]
        streams = ", ".join(str(int(x)) for x in distinct(stream[hit]))
        evidence = (
            f"{rows.size} {direction} copies ran on compute stream(s) {streams} in "
            f"{steps_text(rt, steps[rows])}; {hit.size} of them held up a compute kernel already "
            f"launched behind them for {fmt_time(total)} in all (GPU timeline; the launch "
            f"delay of those kernels in the kernel launch statistics)."
        )
        held = sel & (blocked > 0)
        claim = Claim(held_from[held], held_from[held] + blocked[held])
        findings.append(Finding((rt.rank,), step_tuple(steps[hit]), evidence, total,
                                window[1] - window[0], subject=direction, claim=claim))
    return findings


RULES: list[FindingRule] = [
    FindingRule(
        id="pageable_copies",
        title="Copies from pageable host memory",
        section="bandwidth",
        advice=("Use pinned host memory: tensor.pin_memory() (or DataLoader(pin_memory=True)) "
                "and .to(device, non_blocking=True); allocate host buffers for results "
                "with torch.empty(..., pin_memory=True)."),
        saving=("Per copy named Pageable: its duration beyond max(2 µs, bytes / reference), "
                "the reference being the achieved bandwidth of the rank's pinned copies of "
                "that direction (64 KiB or more), else 12 GB/s, at most the time it ran with "
                "no other GPU work; summed per direction."),
        check=check_pageable,
    ),
    FindingRule(
        id="copies_on_compute_stream",
        title="Host transfers on the compute stream hold up kernels queued behind them",
        section="bandwidth",
        advice=("Move host transfers to a side stream (torch.cuda.Stream) with "
                "non_blocking=True from pinned memory, and prefetch the next batch while "
                "this one computes; make the compute stream wait on an event, not on the "
                "copy itself."),
        saving=("Per HtoD/DtoH copy on a stream that runs compute kernels: the time the next "
                "compute kernel on that stream, already launched, waited behind it "
                "(from max(copy start, launch call end) to min(copy end, kernel start)); "
                "summed per direction."),
        check=check_copies_on_compute,
    ),
]
