"""Finding: launch-bound stretches, where the GPU runs short kernels faster than the host
can launch them.

On each stream, GPU work (kernels, copies, memsets) is ordered by start; ``prev_end`` is
the latest end of the work before it on the stream. A **launch-bound gap** is the gap
``[prev_end, ts)`` before a piece of work when

* ``ts > prev_end`` (the stream was idle),
* the work's launch call *ended* after ``prev_end``: the stream ran dry before the call
  that enqueued the next work had returned, so the GPU waited on the host (work replayed
  from a CUDA/HIP graph is never such work: the graph launch enqueued all of it at once,
  however long the call lasts; a stricter
  test than the idle time table's ``host_wait``, which asks whether the call *started*
  after ``prev_end``; in a tight launch loop each call starts while the previous kernel
  still runs, and such gaps appear there as ``kernel_wait``),
* the work and the one before it on the stream both ran under :data:`SHORT_NS` (10 µs),
* the gap is at most :data:`MAX_GAP_NS` (100 µs): a longer wait means the host was busy
  with something else than launching (a large CPU operator, I/O), which CUDA graphs
  would not remove.

The saving is the GPU idle time (no work on any stream) inside the union of the
launch-bound gaps whose work belongs to the analysed steps, leaving out the host-sync
bubbles and the data-loader spans (:mod:`hta.analysis.findings.host` claims those). It is
an upper bound on what CUDA graphs recover (a graph replays kernels about 1 µs apart).
The rule fires only with at least :data:`MIN_GAPS` such gaps in the window: a handful of
short kernels is not a launch-bound stretch.

The evidence names the kernels after the most gap time and the longest gap. When more
than half of the gap time comes before copies or memsets, the advice is about batching
copies (:data:`COPY_ADVICE`), not CUDA graphs alone.
"""

from __future__ import annotations

import numpy as np

from hta.analysis.findings.base import Finding, FindingRule, analysis_window, rank_work
from hta.analysis.findings.claims import claim_outside
from hta.analysis.findings.gpu_cover import graph_aware
from hta.analysis.findings.kernel_common import (
    graph_replayed_work,
    kernel_labels,
    top_labels,
)
from hta.analysis.findings.rule_tools import (
    data_loader_cover,
    fmt_time,
    step_text,
    step_tuple,
    steps_text,
)
from hta.analysis.findings.sync import sync_bubbles
from hta.analysis.gpu_work import MEMORY, GpuWork
from hta.analysis.intervals import Cover, merge
from hta.model.trace import RankTrace

#: A kernel shorter than this is "short" (ns).
SHORT_NS = 10_000
#: Longest gap counted (ns).
MAX_GAP_NS = 100_000
#: Fewest launch-bound gaps in the window for a finding.
MIN_GAPS = 32


def launch_bound_gaps(rt: RankTrace, iterations: list[int] | None,
                      window: tuple[int, int], w: GpuWork | None = None
                      ) -> dict[str, np.ndarray]:
    """The launch-bound gaps of the rank (module docstring), in start order of the work:
    ``start``, ``end`` (the gap), ``dur`` (the work's), ``launch_dur`` (its call's),
    ``step`` (the work's iteration), ``name`` (the work's name id), ``copy`` (whether the
    work is a copy or memset). ``w``: the rank's :func:`gpu_work` when the caller has it."""
    w = rank_work(rt) if w is None else w
    order = np.lexsort((w.ts, w.stream))
    stream, ts, end = w.stream[order], w.ts[order], w.end[order]
    l_ts, l_end, it = w.launch_ts[order], w.launch_end[order], w.iteration[order]
    same = np.r_[False, stream[1:] == stream[:-1]] if ts.size else np.zeros(0, bool)
    run_end = end.copy()
    if ts.size:
        # running max of the end within each stream
        starts = np.flatnonzero(~same)
        for a, b in zip(starts.tolist(), np.r_[starts[1:], ts.size].tolist(), strict=True):
            run_end[a:b] = np.maximum.accumulate(end[a:b])
    prev_end = np.r_[np.int64(0), run_end[:-1]] if ts.size else run_end
    dur = end - ts
    prev_dur = np.r_[np.int64(0), dur[:-1]] if ts.size else dur
    gap = same & (ts > prev_end) & (l_end >= 0) & (l_end > prev_end)
    gap &= (dur < SHORT_NS) & (prev_dur < SHORT_NS) & (ts - prev_end <= MAX_GAP_NS)
    gap &= (ts >= window[0]) & (ts < window[1]) & ~graph_replayed_work(rt)[order]
    if iterations is not None:
        gap &= np.isin(it, iterations)
    rows = np.flatnonzero(gap)
    return {"start": np.maximum(prev_end[rows], window[0]), "end": ts[rows],
            "dur": dur[rows], "launch_dur": l_end[rows] - l_ts[rows], "step": it[rows],
            "name": w.name[order][rows], "copy": w.cls[order][rows] == MEMORY}


def check_launch_bound(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``launch_bound`` finding of one rank."""
    window = analysis_window(rt, iterations)
    w = rank_work(rt)
    gaps = launch_bound_gaps(rt, iterations, window, w)
    if gaps["start"].size < MIN_GAPS:
        return []
    dl = data_loader_cover(rt)
    sb = sync_bubbles(rt)
    excluded = Cover(np.concatenate([w.ts, dl.s, sb.bubble_start]),
                     np.concatenate([w.end, dl.e, sb.bubble_end]))
    ms, me = merge(gaps["start"], gaps["end"])
    total = int(((me - ms) - excluded.within(ms, me)).sum())
    if total <= 0:
        return []
    evidence = (
        f"{gaps['start'].size} gaps in {steps_text(rt, gaps['step'])} where a stream ran dry "
        f"before the launch call of its next short kernel (under {SHORT_NS // 1000} µs) "
        f"returned left the GPU idle {fmt_time(total)}; those kernels ran a median "
        f"{fmt_time(float(np.median(gaps['dur'])))} on the GPU against "
        f"{fmt_time(float(np.median(gaps['launch_dur'])))} for their launch calls "
        f"(kernel launch statistics: gpu_duration vs cpu_duration, short_kernel). "
        f"{_named_gaps(rt, gaps, window[0])}"
    )
    idle = gaps["end"] - gaps["start"]
    copies = int(idle[gaps["copy"]].sum()) > idle.sum() / 2
    return [Finding((rt.rank,), step_tuple(gaps["step"]), evidence, total,
                    window[1] - window[0],
                    advice=COPY_ADVICE if copies else graph_aware(rt, RULES[0].advice),
                    claim=claim_outside(ms, me, None, excluded))]


#: The advice when most of the gap time comes before copies or memsets, not kernels.
COPY_ADVICE = (
    "Most of these gaps come before copies or memsets, not kernels: the host issues many "
    "small copies one call at a time. Copy once into or out of one flat, preallocated "
    "buffer (torch.cat or torch._foreach_copy_ instead of a loop of .copy_), keep data "
    "on the device instead of moving it piecewise, and with DistributedDataParallel set "
    "broadcast_buffers=False when the module's buffers need no sync every forward (its "
    "per-buffer copies run in DistributedDataParallel.forward). For the kernels among "
    "them: CUDA graphs or fusion (torch.compile).")


def _named_gaps(rt: RankTrace, gaps: dict[str, np.ndarray], window_start: int) -> str:
    """The kernels that waited after the most gap time, and the longest gap by name, step
    and time into the window."""
    idle = (gaps["end"] - gaps["start"]).astype(np.float64)
    longest = int(np.argmax(idle))
    label = kernel_labels([rt.symbols[int(gaps["name"][longest])]])[0]
    return (f"Kernels after the most gap time: {top_labels(rt, gaps['name'], idle)}; the "
            f"longest gap, {fmt_time(idle[longest])}, before {label} in "
            f"{step_text(rt, int(gaps['step'][longest]))} at "
            f"{fmt_time(int(gaps['end'][longest]) - window_start)} into the window.")


RULES: list[FindingRule] = [
    FindingRule(
        id="launch_bound",
        title="Launch-bound: the GPU runs short kernels faster than the host launches them",
        section="launch",
        advice=("Cut the launch overhead: capture the step in a CUDA graph "
                "(torch.cuda.graphs / torch.cuda.make_graphed_callables, or "
                "torch.compile(mode='reduce-overhead')), fuse small ops (torch.compile, "
                "fused optimizers such as Adam(fused=True), foreach kernels), or give each "
                "kernel more work (a larger batch)."),
        saving=("The GPU idle time (no work on any stream) inside the gaps of at most "
                "100 µs before short kernels (under 10 µs, after a short one) whose launch "
                "call returned after their stream ran dry, outside host-sync bubbles and "
                "data-loader spans; at least 32 such gaps in the window."),
        check=check_launch_bound,
    ),
]
