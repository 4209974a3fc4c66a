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
    Compute kernels whose grid has fewer blocks than the SMs available to them (the GPU's
    SMs less those held by kernels running at the same time on other streams), persistent
    kernels sized to share the GPU left out: :mod:`hta.analysis.findings.occupancy`.

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

from hta.analysis.findings.engine import Finding, FindingRule, analysis_window
from hta.analysis.findings.host import fmt_steps, fmt_time, step_tuple
from hta.analysis.findings.kernel_common import in_steps, top_names
from hta.analysis.findings.occupancy import DEFAULT_ADVICE, check_low_occupancy
from hta.analysis.gpu_work import COMPUTE, gpu_work
from hta.analysis.intervals import Cover
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
    return {
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
    return [Finding((rt.rank,), step_tuple(p["small_step"]), evidence, saving,
                    window[1] - window[0])]


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
    return [Finding((rt.rank,), step_tuple(w.iteration[sel][hit]), evidence, saving,
                    window[1] - window[0], advice=_fp32_advice(names))]


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
        title="Grid-bound kernels: SMs left idle",
        section="kernels",
        advice=DEFAULT_ADVICE,
        saving=("For each compute kernel of 10 µs or more whose grid has fewer than 90% as "
                "many blocks as the SMs available to it (the GPU's SMs less the mean SMs "
                "held by kernels on other streams while it ran), persistent kernels sized "
                "to share the GPU left out: duration x min(1 - blocks / available, 0.5), "
                "summed and bounded by half the union of their intervals; only when such "
                "kernels take 10% or more of the compute kernel time with grid args."),
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
