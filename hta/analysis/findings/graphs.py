"""Notes about what a trace shows of the GPU: CUDA-graph captures without a replay, and a
GPU that works for a small part of the analysed time.

Both rules are ``info`` rules (:class:`~hta.analysis.findings.engine.FindingRule`): they
state a fact a reader must know before reading the shares and the other findings, with no
saving.

``graph_capture``
    A *capture-only* trace holds CUDA/HIP graph captures and no replay: a stream capture
    call (:data:`CAPTURE_BEGIN`: ``cudaStreamBeginCapture``, ``hipStreamBeginCapture``,
    ``cuStreamBeginCapture``, with their ``ToGraph``/``_v2``/``_ptsz`` forms) or a graph
    instantiation (:data:`INSTANTIATE`: ``cudaGraphInstantiate*``, ``hipGraphInstantiate*``,
    ``cuGraphInstantiate*``) starts inside the analysed window, and no graph launch
    (:data:`hta.model.links.GRAPH_LAUNCH`) does. Kernel launches made while a stream is
    captured record work into the graph and run nothing: the GPU stays almost idle, and
    the trace shows the server's warm-up, not its serving. The evidence counts the captures,
    instantiations and the launch calls made during capture (a runtime launch call on the
    capturing thread between a capture's begin and its end), names the annotation around
    the first capture (``capture_32_DECODE``), and states the GPU busy time.

``gpu_mostly_idle``
    The GPU is *busy* while any kernel, copy or memset runs on any stream of the rank. The
    rule fires when the busy time inside the analysed window is under :data:`BUSY_SHARE`
    (10%) of the window, for a rank that has GPU work at all. The shares of the temporal
    breakdown are of the GPU span (first to last GPU event); they then describe the little
    time the GPU worked ("compute 100%" of an 11 µs span in a 33.7 ms step). The evidence
    gives the busy time, the window and the longest stretch of the window without GPU work.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hta.analysis.findings.base import Finding, FindingRule, analysis_window, link, step_table
from hta.analysis.findings.kernel_common import fmt_at
from hta.analysis.findings.rule_tools import fmt_steps, fmt_time, step_tuple
from hta.analysis.gpu_work import rank_work_class
from hta.analysis.intervals import merge
from hta.model.arrays import distinct
from hta.model.links import GRAPH_LAUNCH
from hta.model.rules import CPU_KINDS, KIND_CODE, codes_in, kind_codes
from hta.model.symbol_masks import symbol_mask
from hta.model.trace import RankTrace

#: Calls that begin a stream capture.
CAPTURE_BEGIN = re.compile(r"^((cuda|hip)StreamBeginCapture(ToGraph)?|cuStreamBeginCapture)"
                           r"(_v\d+)?(_ptsz|_spt)?$")
#: Calls that end a stream capture.
CAPTURE_END = re.compile(r"^((cuda|hip)StreamEndCapture|cuStreamEndCapture)(_v\d+)?"
                         r"(_ptsz|_spt)?$")
#: Calls that instantiate a graph.
INSTANTIATE = re.compile(r"^(cuda|hip|cu)GraphInstantiate\w*$")
#: Share of the window under which the GPU is mostly idle.
BUSY_SHARE = 0.10

_CPU_CODES = kind_codes(CPU_KINDS)
_LAUNCH = KIND_CODE["runtime_launch"]
_ANNOTATION = KIND_CODE["user_annotation"]


def _symbol_mask(rt: RankTrace, pattern: re.Pattern[str]) -> np.ndarray:
    """Per symbol id: whether the name matches ``pattern`` (read-only)."""
    return symbol_mask(rt.symbols, pattern.match)


def _calls(rt: RankTrace, pattern: re.Pattern[str], window: tuple[int, int]) -> np.ndarray:
    """Positions of the CPU-side events named by ``pattern`` starting in the window."""
    ts = rt.column("ts")
    hit = _symbol_mask(rt, pattern)[rt.column("name")]
    hit &= codes_in(rt.kind_codes(), _CPU_CODES)
    return np.flatnonzero(hit & (ts >= window[0]) & (ts < window[1]))


def where_steps(rt: RankTrace, steps: Sequence[int] | np.ndarray) -> str:
    """``steps 3-5``, or ``no ProfilerStep: the span of the trace`` when it has none."""
    if not len(step_table(rt)):
        return "no ProfilerStep: the span of the trace"
    return fmt_steps(steps)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _pct(part: int, whole: int) -> str:
    share = 100 * part / whole
    return "under 0.01%" if 0 < share < 0.01 else f"{share:.2f}%"


# -- graph_capture -----------------------------------------------------------------------
def check_graph_capture(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``graph_capture`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    begins = _calls(rt, CAPTURE_BEGIN, window)
    instantiations = _calls(rt, INSTANTIATE, window)
    if (begins.size == 0 and instantiations.size == 0) or _calls(rt, GRAPH_LAUNCH, window).size:
        return []
    ev = rt.events
    first = int(begins[0] if begins.size else instantiations[0])
    captured = _launches_during_capture(rt, begins, window)
    busy = int(_busy(rt, window)[1])
    where = _annotation_around(rt, first)
    evidence = (
        f"{_count(begins.size, 'stream capture')} and "
        f"{_count(instantiations.size, 'graph instantiation')}, no graph launch "
        f"({where_steps(rt, ev['iteration'].to_numpy()[[first]])}): the first capture at "
        f"{fmt_at(rt, int(ev['ts'].iat[first]))}"
        f"{f' under {where}' if where else ''}; {captured} kernel, copy or memset launch "
        f"calls were made while a stream was captured (recorded into the graphs, run "
        f"later); the GPU was busy {fmt_time(busy)} of the {fmt_time(window[1] - window[0])} "
        f"analysed. This trace shows the warm-up that captures CUDA graphs, not their "
        f"replay: its shares and other findings describe the warm-up."
    )
    steps = step_tuple(rt.column("iteration")[np.r_[begins, instantiations]])
    return [Finding((rt.rank,), steps, evidence, 0, window[1] - window[0])]


def _launches_during_capture(rt: RankTrace, begins: np.ndarray, window: tuple[int, int]
                             ) -> int:
    """Runtime launch calls on a capturing thread between a capture's begin and its end
    (the window's end when the capture does not end in it), each counted once."""
    ev = rt.events
    ts = rt.column("ts")
    thread = _thread_ids(ev)
    ends = _calls(rt, CAPTURE_END, window)
    launches = np.flatnonzero(rt.kind_codes() == _LAUNCH)
    total = 0
    for t in distinct(thread[begins]).tolist():
        b_ts = ts[begins[thread[begins] == t]]
        e_ts = np.sort(ts[ends[thread[ends] == t]])
        l_ts = np.sort(ts[launches[thread[launches] == t]])
        stop = np.full(b_ts.size, window[1], dtype=np.int64)
        if e_ts.size:
            at = np.searchsorted(e_ts, b_ts, side="left")
            stop = np.where(at < e_ts.size, e_ts[np.minimum(at, e_ts.size - 1)], stop)
        lo = np.searchsorted(l_ts, b_ts, side="right")
        hi = np.maximum(np.searchsorted(l_ts, stop, side="left"), lo)
        cover = np.cumsum(np.bincount(lo, minlength=l_ts.size + 1)
                          - np.bincount(hi, minlength=l_ts.size + 1))[: l_ts.size]
        total += int(np.count_nonzero(cover > 0))
    return total


def _thread_ids(ev: pd.DataFrame) -> np.ndarray:
    """One integer per (pid, tid) pair."""
    pairs = np.stack([ev["pid"].to_numpy(), ev["tid"].to_numpy()], axis=1)
    return np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1)


def _annotation_around(rt: RankTrace, row: int) -> str:
    """The innermost ``record_function`` label around ``row`` (not a ProfilerStep)."""
    parent = link(rt, "parent")
    codes = rt.kind_codes()
    names = rt.column("name")
    cur = int(parent[row])
    while cur >= 0:
        text = rt.symbols[int(names[cur])]
        if codes[cur] == _ANNOTATION and not text.startswith("ProfilerStep#"):
            return text
        cur = int(parent[cur])
    return ""


# -- gpu_mostly_idle ---------------------------------------------------------------------
def _busy(rt: RankTrace, window: tuple[int, int]) -> tuple[np.ndarray, int, np.ndarray]:
    """(GPU work rows, busy ns inside the window, merged busy intervals in the window)."""
    rows = np.flatnonzero(rank_work_class(rt) >= 0)
    lo = np.maximum(rt.column("ts")[rows], window[0])
    hi = np.minimum(rt.column("end")[rows], window[1])
    starts, ends = merge(lo, hi)
    return rows, int((ends - starts).sum()), np.stack([starts, ends])


def check_gpu_mostly_idle(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``gpu_mostly_idle`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    span = window[1] - window[0]
    rows, busy, spans = _busy(rt, window)
    if rows.size == 0 or span <= 0 or busy >= BUSY_SHARE * span:
        return []
    edges = np.concatenate([[window[0]], spans.T.reshape(-1), [window[1]]])
    gaps = edges[1::2] - edges[0::2]  # [window start, first start), [end, next start)...
    k = int(np.argmax(gaps))
    steps = step_tuple(rt.column("iteration")[rows])
    evidence = (
        f"GPU busy {fmt_time(busy)} of the {fmt_time(span)} analysed ({_pct(busy, span)}, "
        f"{where_steps(rt, steps)}): kernels, copies or memsets on any stream; the longest "
        f"stretch without GPU work lasted {fmt_time(int(gaps[k]))} from "
        f"{fmt_at(rt, int(edges[2 * k]))}. The shares of the GPU time (compute, idle %) are "
        f"of the GPU's own span, from its first to its last event, and hide this."
    )
    return [Finding((rt.rank,), steps, evidence, 0, span)]


RULES: list[FindingRule] = [
    FindingRule(
        id="graph_capture",
        title="Capture-only trace: CUDA graphs were captured, none replayed",
        section="timeline",
        advice=("Profile the replay instead: start the profiler after the warm-up that "
                "captures the graphs (torch.profiler.schedule(wait=..., warmup=..., "
                "active=...) with the capture steps inside wait and warmup; vLLM: set "
                "VLLM_TORCH_PROFILER_DIR, then LLM.start_profile()/stop_profile() or the "
                "server's /start_profile and /stop_profile once it serves; SGLang: set "
                "SGLANG_TORCH_PROFILER_DIR and send /start_profile after its warm-up), then "
                "profile a few served steps."),
        saving="None: a note about what the trace shows (stream captures and graph "
               "instantiations without a graph launch).",
        check=check_graph_capture,
        info=True,
    ),
    FindingRule(
        id="gpu_mostly_idle",
        title="The GPU works for a small part of the analysed time",
        section="temporal",
        advice=("Read the shares as shares of the little time the GPU worked; look at what "
                "the host does in the stretches without GPU work (idle time by cause, the "
                "host findings, the CPU operators in the gaps), or profile a window where "
                "the job runs."),
        saving="None: a note (GPU busy under 10% of the analysed window).",
        check=check_gpu_mostly_idle,
        info=True,
    ),
]
