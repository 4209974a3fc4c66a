"""The ``low_occupancy`` rule: compute kernels whose grid leaves SMs idle.

Kineto writes for each CUDA kernel its ``grid`` and ``blocks per SM`` (the grid's blocks
divided by the GPU's SMs; the ``kernel_args`` side table). The profiler's
``est. achieved occupancy %`` is not used: it is an estimate from the launch
configuration alone that knows nothing of the work on other streams, and tuned GEMMs
choose a low one on purpose (registers, shared memory).

**SMs.** ``S``, the GPU's SM count, comes from ``deviceProperties`` (``numSms`` of the
kernel's device), else from ``blocks / blocks per SM``. A kernel *holds*
``min(blocks, S)`` SMs while it runs (``S`` when its grid is unknown).

**SMs available to a kernel.** Kernels on other streams hold SMs at the same time. For a
compute kernel ``k`` running ``[ts, end)``, ``held`` is the time-weighted mean, over
``[ts, end)``, of the SMs held by every other kernel (computation or communication, any
stream) running then; ``available = max(S - held, 0)``.

**Grid-bound kernels.** ``k`` *fills* the SMs available to it when
``blocks >= FILL x available`` (:data:`FILL` = 0.9). A *persistent* kernel sizes its grid
to the SMs it may use: a kernel (name and block count) that fills what other streams
left free in at least one run while they held SMs, with at least half the GPU's SMs, is
sized to share the GPU (an expert-parallel grouped GEMM given 112 of 132 SMs while the
dispatch kernels hold 20); none of its runs is counted, even those with no concurrent
work. The other kernels that do not fill the SMs available to them are *grid-bound*,
except those under :data:`MIN_KERNEL_NS` (10 µs), whose time is mostly the fixed cost of
a kernel (the ``small_kernels`` rule), and fp32 GEMMs and convolutions, whose time
``fp32_gemm`` claims (moving them to tensor cores changes their tiles and grid anyway).

**Saving.** A grid-bound kernel's work, split evenly over the SMs available to it, would
take ``duration x blocks / available``; a finer split adds work (split-K reductions,
smaller and less efficient tiles), so at most :data:`MAX_GRID_SAVING` (half) of the
kernel's time is claimed: ``duration x min(1 - blocks / available, 0.5)``, summed over
the grid-bound kernels of the analysed steps and bounded by half of the union of their
intervals (kernels running side by side do not add up their savings beyond the time they
cover). The rule fires when grid-bound kernels take at least :data:`MIN_LOW_SHARE` (10%)
of the time of the compute kernels that carry grid args. A trace without ``blocks per
SM`` (ROCm, whose ``grid`` may count threads rather than blocks; older Kineto) gives
no finding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.findings.base import Finding, analysis_window
from hta.analysis.findings.claims import Claim
from hta.analysis.findings.kernel_common import (
    fmt_at,
    fp32_claimed,
    in_steps,
    kernel_blocks,
    kernel_labels,
    label_times,
)
from hta.analysis.findings.rule_tools import (
    fmt_time,
    name_matches,
    step_text,
    step_tuple,
    steps_text,
)
from hta.analysis.intervals import merge
from hta.model.arrays import distinct
from hta.model.rules import KIND_CODE, codes_in
from hta.model.trace import RankTrace

#: Share of the available SMs a kernel's grid must reach to fill them.
FILL = 0.9
#: Kernels shorter than this are never grid-bound (ns).
MIN_KERNEL_NS = 10_000
#: Least share of the compute kernel time with grid args in grid-bound kernels.
MIN_LOW_SHARE = 0.10
#: Largest share of a grid-bound kernel's time claimed.
MAX_GRID_SAVING = 0.5
#: GEMMs of a vendor library (cuBLAS, cuBLASLt, CUTLASS, hipBLASLt, rocBLAS/Tensile):
#: their grid is the library's choice for the problem's shape.
LIBRARY_GEMM = re.compile(r"(?i)xmma_gemm|nvjet|cutlass|cublas|^Cijk_|hipblaslt|rocblas"
                          r"|(?:sm\d+|ampere|volta|turing|hopper)_\w*gemm|gemmk1|gemv")
#: Convolution kernels (cuDNN, MIOpen), whose names may say ``gemm`` too: the rule counts
#: them, with convolution advice.
CONVOLUTION = re.compile(r"(?i)scudnn|hcudnn|cudnn|fprop|dgrad|wgrad|implicit_?gemm"
                         r"|implicit_convolve|miopen|igemm_(fwd|bwd|wrw)")

_COMPUTATION = KIND_CODE["computation"]
_KERNEL_KINDS = (KIND_CODE["computation"], KIND_CODE["communication"])


@dataclass(frozen=True)
class SmTable:
    """The compute kernels of the analysis that carry grid args, one entry each."""

    pos: np.ndarray        # row positions
    name: np.ndarray       # symbol ids
    ts: np.ndarray
    end: np.ndarray
    step: np.ndarray
    blocks: np.ndarray     # grid blocks (float)
    sms: np.ndarray        # S, the GPU's SMs
    held: np.ndarray       # mean SMs held by other kernels while it ran

    @property
    def dur(self) -> np.ndarray:
        """Durations (ns)."""
        return self.end - self.ts

    @property
    def available(self) -> np.ndarray:
        """SMs available to each kernel."""
        return np.maximum(self.sms - self.held, 0.0)


def sm_table(rt: RankTrace, iterations: Sequence[int] | None,
             window: tuple[int, int]) -> SmTable | None:
    """:class:`SmTable` of the rank, ``None`` without ``blocks per SM`` args."""
    grid = _grid_rows(rt, iterations, window)
    return None if grid is None else grid.table(rt)


@dataclass(frozen=True)
class _GridRows:
    """:func:`sm_table`'s kernels before the SMs held by others (the costly part) are
    known: the kernel args' rows, their blocks, SMs and devices, and which are kept."""

    pos: np.ndarray
    blocks: np.ndarray
    sms: np.ndarray
    device: np.ndarray
    keep: np.ndarray

    def may_be_grid_bound(self, rt: RankTrace) -> bool:
        """Whether grid-bound kernels can take :data:`MIN_LOW_SHARE` of the kept
        kernels' time: SMs held by others only lower what is available (``available <=
        S``), so only kernels of at least :data:`MIN_KERNEL_NS` with ``blocks < FILL x
        S``, neither library GEMMs nor fp32 GEMMs, can be grid-bound; the rule's answer
        is empty when their time is under the share (most ranks)."""
        pos = self.pos[self.keep]
        dur = rt.column("end")[pos] - rt.column("ts")[pos]
        total = int(dur.sum())
        if total <= 0:
            return False
        can = (self.blocks[self.keep] < FILL * self.sms[self.keep]) & (dur >= MIN_KERNEL_NS)
        can[can] = ~_library_gemm(rt, pos[can])
        if int(dur[can].sum()) < MIN_LOW_SHARE * total:
            return False
        can[can] = ~fp32_claimed(rt, pos[can])
        return int(dur[can].sum()) >= MIN_LOW_SHARE * total

    def table(self, rt: RankTrace) -> SmTable:
        """The :class:`SmTable` of the kept kernels."""
        held = _held_by_others(rt.events, rt.kind_codes(), self.pos, self.blocks,
                               self.device, self.sms)
        pos, keep = self.pos, self.keep
        return SmTable(pos=pos[keep], name=rt.column("name")[pos[keep]],
                       ts=rt.column("ts")[pos[keep]], end=rt.column("end")[pos[keep]],
                       step=rt.column("iteration")[pos[keep]], blocks=self.blocks[keep],
                       sms=self.sms[keep], held=held[keep])


def _library_gemm(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """Whether each kernel of ``rows`` is a vendor library's GEMM (not a convolution)."""
    return name_matches(rt, rows, LIBRARY_GEMM) & ~name_matches(rt, rows, CONVOLUTION)


def _grid_rows(rt: RankTrace, iterations: Sequence[int] | None,
               window: tuple[int, int]) -> _GridRows | None:
    ev = rt.events
    args, pos = rt.side_rows("kernel_args")
    if not len(args) or not len(ev):
        return None
    ok = pos >= 0
    pos = pos[ok]
    blocks = kernel_blocks(rt)[pos]
    bpsm = args["blocks_per_sm"].to_numpy(dtype=float)[ok]
    kind = rt.kind_codes()
    device = rt.column("device")[pos]
    sms = _sm_counts(rt, device, blocks, bpsm)
    if not np.isfinite(sms).any():
        return None
    ts = rt.column("ts")[pos]
    keep = (kind[pos] == _COMPUTATION) & np.isfinite(blocks) & np.isfinite(sms) & (bpsm > 0)
    keep &= in_steps(rt, rt.column("iteration")[pos], ts, iterations, window)
    return _GridRows(pos=pos, blocks=blocks, sms=sms, device=device, keep=keep)


def _sm_counts(rt: RankTrace, device: np.ndarray, blocks: np.ndarray,
               bpsm: np.ndarray) -> np.ndarray:
    """S of each kernel's device: ``numSms`` from the device properties, else the median
    of ``blocks / blocks per SM`` over the device's kernels; NaN when neither is known."""
    props = {int(p.get("id", -1)): p.get("numSms") for p in
             rt.meta.get("device_properties") or [] if isinstance(p, dict)}
    out = np.full(device.shape[0], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(bpsm > 0, blocks / bpsm, np.nan)
    for dev in distinct(device).tolist():
        on = device == dev
        known = props.get(int(dev))
        if isinstance(known, (int, float)) and known > 0:
            out[on] = float(known)
        elif np.isfinite(ratio[on]).any():
            out[on] = float(np.round(np.nanmedian(ratio[on])))
    return out


def _held_by_others(ev: pd.DataFrame, kind: np.ndarray, arg_pos: np.ndarray,
                    arg_blocks: np.ndarray, arg_device: np.ndarray,
                    arg_sms: np.ndarray) -> np.ndarray:
    """For each kernel of ``arg_pos``: the mean SMs held by the other kernels of its
    device while it ran (module docstring)."""
    rows = np.flatnonzero(codes_in(kind, _KERNEL_KINDS))
    blocks = np.full(len(ev), np.nan)
    blocks[arg_pos] = arg_blocks
    known = np.isfinite(arg_sms)
    devices, first = np.unique(arg_device[known], return_index=True)
    sms_of_device = dict(zip(devices.tolist(), arg_sms[known][first].tolist(), strict=True))
    device = ev["device"].to_numpy()
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    held = np.zeros(len(ev))
    for dev, s in sms_of_device.items():
        on = rows[device[rows] == dev]
        b = blocks[on]
        weight = np.where(np.isfinite(b), np.minimum(b, s), s)
        integral = _overlap_integral(ts[on], end[on], weight)
        dur = np.maximum(end[on] - ts[on], 1)
        held[on] = np.maximum(integral - weight * (end[on] - ts[on]), 0.0) / dur
    return held[arg_pos]


def _overlap_integral(ts: np.ndarray, end: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """For each interval, the integral over it of the summed weights of every interval
    running (itself included): a sweep over the sorted interval ends."""
    if ts.size == 0:
        return np.zeros(0)
    points, inverse = np.unique(np.concatenate([ts, end]), return_inverse=True)
    start_at, end_at = inverse[: ts.size], inverse[ts.size:]
    step = (np.bincount(start_at, weights=weight, minlength=points.size)
            - np.bincount(end_at, weights=weight, minlength=points.size))
    level = np.cumsum(step)[:-1]  # total weight on [points[i], points[i + 1])
    area = np.concatenate([[0.0], np.cumsum(level * np.diff(points))])
    return area[end_at] - area[start_at]


# -- the rule ---------------------------------------------------------------------------
def sized_to_share(t: SmTable) -> np.ndarray:
    """Whether each kernel belongs to a (name, blocks) pair that fills the SMs left free
    by other streams in at least one run while they held SMs, with at least half the
    GPU (persistent kernels sized to share the GPU)."""
    fills = (t.blocks >= FILL * t.available) & (t.held >= 1.0) & (t.blocks >= t.sms / 2)
    key = t.name.astype(np.int64) * (1 << 32) + t.blocks.astype(np.int64)
    return np.isin(key, key[fills])


def check_low_occupancy(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``low_occupancy`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    grid = _grid_rows(rt, iterations, window)
    if grid is None or not grid.keep.any() or not grid.may_be_grid_bound(rt):
        return []
    t = grid.table(rt)
    dur = t.dur
    avail = t.available
    shared = sized_to_share(t)
    library = _library_gemm(rt, t.pos)
    short_of = (t.blocks < FILL * avail) & ~shared & (dur >= MIN_KERNEL_NS)
    lib = short_of & library
    bound = short_of & ~fp32_claimed(rt, t.pos) & ~library
    total, bound_time = int(dur.sum()), int(dur[bound].sum())
    if total <= 0 or bound_time < MIN_LOW_SHARE * total:
        return []
    frac = np.minimum(1.0 - t.blocks[bound] / avail[bound], MAX_GRID_SAVING)
    union = merge(t.ts[bound], t.end[bound])
    cap = MAX_GRID_SAVING * int((union[1] - union[0]).sum())
    saving = min(int(np.round((dur[bound] * frac).sum())), int(cap))
    if saving <= 0:
        return []
    left_out = (t.blocks < t.sms) & ~bound & ~lib & (dur >= MIN_KERNEL_NS)
    evidence = _evidence(rt, t, bound, left_out, total)
    if lib.any():
        evidence += (f" Not counted either: {int(lib.sum())} library GEMMs (cuBLAS, CUTLASS, "
                     f"hipBLASLt) with fewer blocks than SMs ({fmt_time(int(dur[lib].sum()))}):"
                     " their grid is the library's choice for the shape, and without the "
                     "shapes the trace cannot tell one bound by memory (which streams its "
                     "operands near the memory's bandwidth from part of the SMs) from one "
                     "short of tiles.")
    claim = Claim(t.ts[bound], t.end[bound], dur[bound] * frac * saving / max(
        float((dur[bound] * frac).sum()), 1.0))
    return [Finding((rt.rank,), step_tuple(t.step[bound]), evidence, saving,
                    window[1] - window[0], advice=occupancy_advice(rt, t, bound),
                    claim=claim)]


def _evidence(rt: RankTrace, t: SmTable, bound: np.ndarray, left_out: np.ndarray,
              total: int) -> str:
    """The finding's evidence: the grid-bound kernels, the most costly ones with their
    blocks and available SMs, and the kernels with fewer blocks than SMs left out."""
    dur = t.dur
    bound_time = int(dur[bound].sum())
    sms = int(np.nanmax(t.sms))
    longest = int(np.flatnonzero(bound)[np.argmax(dur[bound])])
    parts = []
    top = label_times(rt, t.name[bound], dur[bound])
    for sym, label, count, time in top:
        mine = bound & (t.name == sym)
        parts.append(f"{label} ×{count} ({fmt_time(time)}; {_blocks(t.blocks[mine])} blocks, "
                     f"{_blocks(t.available[mine])} SMs available)")
    names = [rt.symbols[sym] for sym, *_ in top] + [rt.symbols[int(t.name[longest])]]
    longest_label = kernel_labels(names)[-1]
    text = (
        f"{int(bound.sum())} compute kernels in {steps_text(rt, t.step[bound])} had fewer blocks "
        f"than the SMs available to them ({sms} SMs less those held by kernels running at "
        f"the same time on other streams): {fmt_time(bound_time)}, "
        f"{100 * bound_time / total:.1f}% of the {fmt_time(total)} of compute kernels with "
        f"grid args. Most: {'; '.join(parts)}; the longest ran at "
        f"{fmt_at(rt, int(t.ts[longest]))} ({step_text(rt, int(t.step[longest]))}, "
        f"{fmt_time(int(dur[longest]))}: {longest_label}) "
        f"(kernel args: grid, blocks per SM)."
    )
    if left_out.any():
        text += " " + left_out_note(rt, t, left_out)
    return text


def left_out_note(rt: RankTrace, t: SmTable, left_out: np.ndarray) -> str:
    """The kernels with fewer blocks than SMs that fill the SMs other streams leave free
    (or are persistent kernels sized to share the GPU), with the costliest one."""
    top = label_times(rt, t.name[left_out], t.dur[left_out], n=1)[0]
    mine = left_out & (t.name == top[0])
    busiest = int(np.flatnonzero(mine)[np.argmax(t.held[mine])])
    return (f"Not counted: {int(left_out.sum())} kernels with fewer blocks than SMs "
            f"({fmt_time(int(t.dur[left_out].sum()))}) that fill the SMs other streams leave "
            f"free, or are persistent kernels sized to share the GPU; most: {top[1]} "
            f"×{top[2]} ({int(t.blocks[busiest])} blocks while other streams held "
            f"{t.held[busiest]:.0f} of {t.sms[busiest]:.0f} SMs).")


def _blocks(values: np.ndarray) -> str:
    """``112`` or ``40-96``: the range of rounded values."""
    lo, hi = int(np.round(np.min(values))), int(np.round(np.max(values)))
    return str(lo) if lo == hi else f"{lo}-{hi}"


# -- advice ------------------------------------------------------------------------------
#: (pattern on the kernel name, advice) in order; the advice of every pattern matched by
#: one of the three costliest grid-bound kernels is given, :data:`DEFAULT_ADVICE` when
#: none matches.
ADVICE: tuple[tuple[re.Pattern[str], str], ...] = (
    (CONVOLUTION,
     "Convolutions (cuDNN, MIOpen) with fewer output tiles than SMs (small feature maps or "
     "batch): a larger batch per call; torch.backends.cudnn.benchmark = True lets cuDNN "
     "try algorithms that split the work finer; fp16/bf16 with channels_last gets "
     "tensor-core kernels with other tilings. These are library kernels: their grid is "
     "not yours to set."),
    (re.compile(r"(?i)split_embedding|embedding_bag|\btbe\b"),
     "Embedding-bag lookups (FBGEMM table-batched embeddings) with few blocks: a larger "
     "batch per rank, or fewer embedding table groups (TorchRec fuses tables of one "
     "sharding type into one kernel) give them more work."),
    (re.compile(r"(?i)(?<!fb)gemm|xmma|nvjet|cutlass|cublas|^Cijk_|hipblaslt|matmul|wgmma"),
     "GEMMs with fewer output tiles than SMs: give each GEMM more rows (more tokens or "
     "samples per call, or one grouped/batched GEMM instead of several small ones); "
     "torch.compile(mode='max-autotune') tries split-K and smaller tiles, and in your "
     "own CUTLASS or Triton GEMMs split-K or stream-K spreads one GEMM over all SMs."),
    (re.compile(r"(?i)flash|fmha|attention|attn"),
     "Attention with few (batch x heads x query blocks) tiles: split the key/value "
     "sequence across blocks (split-KV, flash-decoding) or batch more sequences."),
    (re.compile(r"(?i)triton"),
     "Triton kernels: smaller BLOCK sizes or more programs (split-K) in their autotune "
     "configs give more blocks than SMs."),
    (re.compile(r"(?i)elementwise|reduce|norm|softmax|at::native|copy|fill"),
     "Elementwise, reduction and normalisation kernels over small tensors: fuse them "
     "(torch.compile, foreach or fused optimizers) or batch their work."),
)
DEFAULT_ADVICE = ("For your own kernels, launch at least as many blocks as the SMs they "
                  "may use (split the work finer).")


def occupancy_advice(rt: RankTrace, t: SmTable, bound: np.ndarray) -> str:
    """The advice of :data:`ADVICE` that fits the three costliest grid-bound kernels."""
    names = [rt.symbols[sym] for sym, *_ in label_times(rt, t.name[bound], t.dur[bound])]
    chosen = [text for pattern, text in ADVICE if any(pattern.search(n) for n in names)]
    return " ".join(chosen) if chosen else DEFAULT_ADVICE
