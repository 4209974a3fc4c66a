"""Findings about the compute kernels themselves: many tiny kernels, low occupancy, fp32 GEMMs.

All three look at *compute kernels*: GPU work of kind ``computation`` (so the user's kind
rules apply; NCCL and other communication kernels, copies and memsets are left out) that
belongs to the analysis (:func:`in_steps`): launched in a selected step (any step without
``iterations``), or, without ``iterations``, starting inside the analysed window.
Each rule gives at most one finding per rank (no subject: merged over ranks by the
engine); the evidence names the kernels (short names, :func:`hta.analysis.names.short_name`)
that contribute most.

``small_kernels``
    A *small kernel* runs under :data:`SMALL_NS` (5 µs). For a small kernel ``b`` that
    directly follows another small kernel ``a`` on its stream (nothing else ran on the
    stream between them) at most :data:`MAX_GAP_NS` (10 µs) after it ends, fusing the two
    would remove one kernel boundary, which costs

    * the **gap** ``[a.end, b.start)`` when ``b``'s launch call had returned by ``a.end``
      (``b`` was queued: the gap is the GPU's own per-kernel latency; when the call
      returned later the GPU waited on the host, which ``launch_bound`` claims), counted
      only where no other work runs on any stream of the rank (GPU idle time), plus
    * a fixed **per-kernel overhead** of ``min(OVERHEAD_NS, b.duration)`` with
      :data:`OVERHEAD_NS` = 1 µs: the ramp-up and drain every kernel pays whatever its
      work (an empty kernel still lasts about a microsecond in Kineto traces; the fill and
      compare kernels of ``critical_path/cuda_event_sync`` in HTA's test traces last 1 µs).

    The saving is the sum over such pairs. The rule fires with at least :data:`MIN_SMALL`
    (100) small kernels in the window making at least :data:`MIN_SMALL_SHARE` (30%) of the
    compute kernels by count.

``low_occupancy``
    Kineto writes per kernel ``est. achieved occupancy %`` and ``blocks per SM`` (grid
    blocks divided by the number of SMs; the ``kernel_args`` side table). A kernel has *low
    occupancy* when its estimate is under :data:`OCCUPANCY_PCT` (25%; 0 means Kineto could
    not estimate it and is read as unknown) or it has fewer blocks than SMs. Resource-bound
    low occupancy (registers, shared memory) is often chosen on purpose by tuned GEMMs, so
    only the *grid-bound* part is claimed: a kernel with ``blocks per SM < 1`` leaves the
    fraction ``1 - blocks_per_sm`` of the SMs without work, and the saving is
    ``duration x min(1 - blocks_per_sm, 0.5)`` summed over those kernels (at most half of
    each kernel's time: a finer grid rarely scales perfectly). The rule fires when the
    low-occupancy kernels take at least :data:`MIN_LOW_SHARE` (10%) of the compute kernel
    time. A trace without the args gives no finding.

``fp32_gemm``
    GEMMs computed in plain fp32 where tensor cores (NVIDIA) or faster matrix-core formats
    (AMD) would apply, found by kernel name (:data:`FP32_GEMM`: cuBLAS ``*_sgemm_*``,
    ``sgemm_largek``, ``magma_sgemmEx`` and ``gemmSN_*<float``, cuBLASLt
    ``xmma_gemm_*_ffma_*``, CUTLASS ``simt_sgemm``, AMD Tensile ``Cijk_<A>_<B>_S[B]_``;
    the tensor-core families ``h884``, ``s1688``,
    ``s16816``, ``tf32``, ``tensorop``, ``wmma``, ``bf16``/``f16`` are not matched).
    Convolutions (``scudnn``: cuDNN picks them by heuristics even with TF32 allowed) and
    GEMV-like kernels (memory bound) are left out. The saving is half their time: a
    conservative 2x, well under the ratio of peak tensor-core to fp32 throughput (TF32 or
    fp16 vs fp32: 8x on A100 and V100; bf16 vs fp32 matrix cores: 4x on MI250).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from hta.analysis.findings.claims import Claim, claim_outside
from hta.analysis.findings.engine import Finding, FindingRule, analysis_window, step_table
from hta.analysis.findings.host import fmt_steps, fmt_time, step_tuple
from hta.analysis.gpu_work import COMPUTE, gpu_work
from hta.analysis.intervals import Cover
from hta.analysis.names import short_name
from hta.analysis.rowmap import RowMap
from hta.model.rules import KIND_CODE
from hta.model.trace import RankTrace

#: A compute kernel shorter than this is small (ns).
SMALL_NS = 5_000
#: Longest gap between two small kernels counted as per-kernel latency (ns).
MAX_GAP_NS = 10_000
#: Fixed cost of one kernel that fusing it into its neighbour removes (ns).
OVERHEAD_NS = 1_000
#: Fewest small kernels in the window for a finding.
MIN_SMALL = 100
#: Least share of the compute kernels (by count) that are small.
MIN_SMALL_SHARE = 0.30
#: Estimated achieved occupancy (%) under which a kernel has low occupancy.
OCCUPANCY_PCT = 25.0
#: Least share of the compute kernel time in low-occupancy kernels for a finding.
MIN_LOW_SHARE = 0.10
#: Largest share of a grid-bound kernel's time claimed.
MAX_GRID_SAVING = 0.5
#: Share of the fp32 GEMM time claimed (a 2x speed-up).
FP32_SAVING = 0.5

#: fp32 GEMM kernels on CUDA cores (NVIDIA) or fp32 Tensile kernels (AMD), by name.
FP32_GEMM = re.compile(
    r"(^|[^a-z])(maxwell|pascal|volta|turing|ampere|sm\d+)_sgemm_"  # cuBLAS SIMT sgemm
    r"|(^|[^a-z])sgemm_(\d+x\d+|largek)"          # cuBLAS sgemm_128x128_, sgemm_largek_
    r"|magma_sgemm"                                # cuBLAS magma_sgemmEx_kernel<float, ...>
    r"|simt_sgemm"                                 # CUTLASS cutlass_80_simt_sgemm_...
    r"|(^|[^a-z])gemmSN_\w+<float"                 # cuBLAS small-N fp32 GEMM
    r"|xmma_gemm_\w*_ffma_"                        # cuBLASLt SIMT (ffma: fp32 FMA)
    r"|^Cijk_A[a-zA-Z]+_B[a-zA-Z]+_SB?_"          # AMD Tensile, S = fp32 in and out
)
#: Architectures without TF32 (tensor cores only for fp16).
_PRE_AMPERE = re.compile(r"maxwell|pascal|volta|turing")

_COMPUTATION = KIND_CODE["computation"]


def in_steps(rt: RankTrace, iteration: np.ndarray, ts: np.ndarray,
             iterations: Sequence[int] | None, window: tuple[int, int]) -> np.ndarray:
    """GPU rows that belong to the analysis: with ``iterations``, those of the selected
    steps; without, those of any step plus those starting in the window. Rows are picked by
    the step of their launch (the ``iteration`` column), as the kernel tables do, so the
    kernels a step launched count even when the GPU runs them after the step's span."""
    if iterations is not None:
        return np.isin(iteration, list(iterations))
    steps = step_table(rt)["step"].to_numpy()
    return np.isin(iteration, steps) | ((ts >= window[0]) & (ts < window[1]))


def top_names(rt: RankTrace, ids: np.ndarray, weights: np.ndarray, n: int = 3,
               with_time: bool = True) -> str:
    """``name ×count (time)`` of the ``n`` short names with the largest total weight."""
    uniq, inverse = np.unique(ids, return_inverse=True)
    count = np.bincount(inverse.reshape(-1), minlength=uniq.size)
    total = np.bincount(inverse.reshape(-1), weights=weights, minlength=uniq.size)
    by_short: dict[str, list[float]] = {}
    for i, c, t in zip(uniq.tolist(), count.tolist(), total.tolist(), strict=True):
        acc = by_short.setdefault(short_name(rt.symbols[i]), [0, 0.0])
        acc[0] += c
        acc[1] += t
    top = sorted(by_short.items(), key=lambda kv: (-kv[1][1], kv[0]))[:n]
    if not with_time:
        return ", ".join(f"{name} ×{int(c)}" for name, (c, _) in top)
    return ", ".join(f"{name} ×{int(c)} ({fmt_time(t)})" for name, (c, t) in top)


# -- small_kernels --------------------------------------------------------------------------
def small_kernel_pairs(rt: RankTrace, iterations: Sequence[int] | None,
                       window: tuple[int, int]) -> dict[str, np.ndarray]:
    """Per small compute kernel ``b`` following a small one on its stream (module
    docstring): ``gap`` (the GPU idle part of the counted gap, ns), ``overhead`` (ns),
    ``name`` and ``step`` of ``b``; plus ``small`` (ids of every small kernel in the
    selection) and ``n_compute`` (how many compute kernels it has)."""
    w = gpu_work(rt.rank, rt.events)
    sel = in_steps(rt, w.iteration, w.ts, iterations, window)
    dur = w.end - w.ts
    compute = w.cls == COMPUTE
    small = compute & (dur < SMALL_NS)
    order = np.lexsort((w.ts, w.stream))
    s_stream, s_ts, s_end = w.stream[order], w.ts[order], w.end[order]
    s_small, s_sel, s_launch = small[order], sel[order], w.launch_end[order]
    pair = np.zeros(order.size, dtype=bool)
    if order.size > 1:
        pair[1:] = (s_stream[1:] == s_stream[:-1]) & s_small[1:] & s_small[:-1] & s_sel[1:]
        pair[1:] &= s_ts[1:] - s_end[:-1] <= MAX_GAP_NS
    rows = np.flatnonzero(pair)
    prev_end = s_end[rows - 1]
    counted = (s_ts[rows] > prev_end) & (s_launch[rows] <= prev_end)
    lo = prev_end
    hi = np.where(counted, s_ts[rows], lo)
    hi = np.maximum(hi, lo)
    others = Cover(w.ts, w.end)
    gap = (hi - lo) - others.within(lo, hi)
    idle = claim_outside(lo, hi, None, others)
    b_ts, b_end = s_ts[rows], s_end[rows]
    return {
        "claim_start": np.concatenate([idle.start, b_ts]),
        "claim_end": np.concatenate([idle.end, b_end]),
        "claim_amount": np.concatenate([idle.end - idle.start,
                                        np.minimum(OVERHEAD_NS, b_end - b_ts)]),
        "gap": gap.astype(np.int64),
        "overhead": np.minimum(OVERHEAD_NS, s_end[rows] - s_ts[rows]).astype(np.int64),
        "name": w.name[order][rows], "step": w.iteration[order][rows],
        "small": w.name[small & sel], "small_step": w.iteration[small & sel],
        "n_compute": np.array([int((compute & sel).sum())]),
    }


def check_small_kernels(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``small_kernels`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    p = small_kernel_pairs(rt, iterations, window)
    n_small, n_compute = int(p["small"].size), int(p["n_compute"][0])
    if n_small < MIN_SMALL or n_small < MIN_SMALL_SHARE * n_compute:
        return []
    gap, overhead = int(p["gap"].sum()), int(p["overhead"].sum())
    saving = gap + overhead
    if saving <= 0:
        return []
    evidence = (
        f"{n_small} of {n_compute} compute kernels in {fmt_steps(p['small_step'])} ran under "
        f"{SMALL_NS // 1000} µs (most launched: "
        f"{top_names(rt, p['small'], np.ones(n_small), with_time=False)}; kernels table, "
        f"count and mean); {p['gap'].size} of them directly follow another on their stream: "
        f"{fmt_time(gap)} of GPU idle gaps between them plus {fmt_time(overhead)} of "
        f"per-kernel overhead at {OVERHEAD_NS // 1000} µs each."
    )
    claim = Claim(p["claim_start"], p["claim_end"], p["claim_amount"])
    return [Finding((rt.rank,), step_tuple(p["small_step"]), evidence, saving,
                    window[1] - window[0], claim=claim)]


# -- low_occupancy --------------------------------------------------------------------------
def occupancy_table(rt: RankTrace, iterations: Sequence[int] | None,
                    window: tuple[int, int]) -> dict[str, np.ndarray]:
    """The selected compute kernels that carry occupancy args: ``name``, ``dur``,
    ``step``, ``occupancy`` (%, NaN unknown) and ``blocks_per_sm`` (NaN unknown)."""
    ev = rt.events
    args = rt.tables.get("kernel_args")
    empty = {k: np.zeros(0) for k in ("name", "dur", "step", "occupancy", "blocks_per_sm",
                                      "ts")}
    if args is None or not len(args) or not len(ev):
        return empty
    pos = RowMap(ev).positions(args["index"].to_numpy())
    ok = pos >= 0
    pos = pos[ok]
    occ = args["est_achieved_occupancy_pct"].to_numpy(dtype=float)[ok]
    bpsm = args["blocks_per_sm"].to_numpy(dtype=float)[ok]
    occ = np.where(occ > 0, occ, np.nan)
    kind = ev["kind"].cat.codes.to_numpy()[pos]
    ts = ev["ts"].to_numpy()[pos]
    keep = (kind == _COMPUTATION) & ~(np.isnan(occ) & np.isnan(bpsm))
    keep &= in_steps(rt, ev["iteration"].to_numpy()[pos], ts, iterations, window)
    rows = pos[keep]
    return {"name": ev["name"].to_numpy()[rows], "dur": ev["dur"].to_numpy()[rows],
            "step": ev["iteration"].to_numpy()[rows], "occupancy": occ[keep],
            "blocks_per_sm": bpsm[keep], "ts": ts[keep]}


def check_low_occupancy(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``low_occupancy`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    t = occupancy_table(rt, iterations, window)
    if t["dur"].size == 0:
        return []
    dur = t["dur"].astype(np.int64)
    total = int(dur.sum())
    with np.errstate(invalid="ignore"):
        grid_bound = t["blocks_per_sm"] < 1
        low = (t["occupancy"] < OCCUPANCY_PCT) | grid_bound
    low_time = int(dur[low].sum())
    if total <= 0 or low_time < MIN_LOW_SHARE * total or not grid_bound.any():
        return []
    frac = np.minimum(1.0 - t["blocks_per_sm"][grid_bound], MAX_GRID_SAVING)
    saving = int(np.round((dur[grid_bound] * frac).sum()))
    if saving <= 0:
        return []
    evidence = (
        f"{int(low.sum())} compute kernels with an estimated achieved occupancy under "
        f"{OCCUPANCY_PCT:g}% or fewer blocks than SMs ran {fmt_time(low_time)}, "
        f"{100 * low_time / total:.1f}% of the {fmt_time(total)} of compute kernels with "
        f"occupancy args; {int(grid_bound.sum())} of them had fewer blocks than SMs "
        f"({fmt_time(int(dur[grid_bound].sum()))}; most: "
        f"{top_names(rt, t['name'][grid_bound], dur[grid_bound])}) (kernel args: "
        f"est. achieved occupancy %, blocks per SM)."
    )
    start = t["ts"][grid_bound].astype(np.int64)
    claim = Claim(start, start + dur[grid_bound], dur[grid_bound] * frac)
    return [Finding((rt.rank,), step_tuple(t["step"][low]), evidence, saving,
                    window[1] - window[0], claim=claim)]


# -- fp32_gemm ------------------------------------------------------------------------------
def check_fp32_gemm(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``fp32_gemm`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    w = gpu_work(rt.rank, rt.events)
    sel = in_steps(rt, w.iteration, w.ts, iterations, window) & (w.cls == COMPUTE)
    ids = w.name[sel]
    if ids.size == 0:
        return []
    uniq, inverse = np.unique(ids, return_inverse=True)
    hit_names = [FP32_GEMM.search(rt.symbols[i]) is not None for i in uniq.tolist()]
    hit = np.asarray(hit_names, dtype=bool)[inverse.reshape(-1)]
    if not hit.any():
        return []
    dur = (w.end - w.ts)[sel]
    fp32 = int(dur[hit].sum())
    total = int(dur.sum())
    saving = int(round(FP32_SAVING * fp32))
    names = [rt.symbols[i] for i, h in zip(uniq.tolist(), hit_names, strict=True) if h]
    evidence = (
        f"{int(hit.sum())} fp32 GEMM kernels without tensor cores ran {fmt_time(fp32)}, "
        f"{100 * fp32 / total:.1f}% of the compute kernel time in "
        f"{fmt_steps(w.iteration[sel][hit])} (most: {top_names(rt, ids[hit], dur[hit])}; "
        f"kernels table)."
    )
    claim = Claim(w.ts[sel][hit], w.end[sel][hit], FP32_SAVING * dur[hit])
    return [Finding((rt.rank,), step_tuple(w.iteration[sel][hit]), evidence, saving,
                    window[1] - window[0], advice=_fp32_advice(names), claim=claim)]


def _fp32_advice(names: list[str]) -> str:
    if names and all(_PRE_AMPERE.search(n) for n in names):
        return ("This GPU has no TF32: run the GEMMs in fp16 with autocast "
                "(torch.autocast('cuda', dtype=torch.float16) with a GradScaler).")
    if names and all(n.startswith("Cijk_") for n in names):
        return ("Run the GEMMs in bf16 with autocast (torch.autocast('cuda', "
                "dtype=torch.bfloat16)); on MI300 hipBLASLt can also use xf32.")
    return FP32_ADVICE


FP32_ADVICE = ("Let fp32 matmuls use tensor cores: torch.set_float32_matmul_precision('high') "
               "(or torch.backends.cuda.matmul.allow_tf32 = True, and "
               "torch.backends.cudnn.allow_tf32 = True for convolutions), or run them in "
               "bf16/fp16 with torch.autocast.")

RULES: list[FindingRule] = [
    FindingRule(
        id="small_kernels",
        title="Many tiny kernels: fixed per-kernel costs eat the GPU time",
        section="kernels",
        advice=("Fuse the small ops (torch.compile; fused optimizers such as "
                "Adam(fused=True) or foreach=True), replay the step as a CUDA graph "
                "(torch.compile(mode='reduce-overhead')), or give each kernel more work "
                "(a larger batch)."),
        saving=("For each compute kernel under 5 µs that follows another one on its stream "
                "within 10 µs: the GPU idle time in the gap between them when the kernel was "
                "already launched, plus a 1 µs per-kernel overhead (at most the kernel's "
                "duration); at least 100 small kernels, 30% of the compute kernels."),
        check=check_small_kernels,
    ),
    FindingRule(
        id="low_occupancy",
        title="Low-occupancy kernels: SMs left idle",
        section="kernels",
        advice=("Give the kernels more parallel work: a larger batch or sequence per step, "
                "larger fused ops (torch.compile), torch.backends.cudnn.benchmark = True to "
                "let cuDNN pick better launch configurations; for your own kernels check the "
                "grid and block sizes against the number of SMs."),
        saving=("For the compute kernels with fewer blocks than SMs: duration x "
                "min(1 - blocks per SM, 0.5), summed; only when kernels under 25% estimated "
                "achieved occupancy or with fewer blocks than SMs take 10% or more of the "
                "compute kernel time."),
        check=check_low_occupancy,
    ),
    FindingRule(
        id="fp32_gemm",
        title="fp32 GEMMs where tensor cores would apply",
        section="kernels",
        advice=FP32_ADVICE,
        saving="Half the time of the fp32 GEMM and convolution kernels (a conservative 2x).",
        check=check_fp32_gemm,
    ),
]
