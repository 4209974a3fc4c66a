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
    GEMMs and convolutions computed in plain fp32 where tensor cores (NVIDIA) or faster
    matrix-core formats (AMD) would apply, found by kernel name (:data:`FP32_GEMM`: cuBLAS
    ``*_sgemm_*``, ``sgemm_largek``, ``magma_sgemmEx`` and ``gemmSN_*<float``, cuBLASLt
    ``xmma_gemm_*_ffma_*``, CUTLASS ``simt_sgemm``, AMD Tensile ``Cijk_<A>_<B>_S[B]_``;
    :func:`~hta.analysis.findings.kernel_common.fp32_conv`: cuDNN ``*scudnn*``,
    ``*convolve_sgemm<float``, Winograd ``<float`` kernels, xmma ``fprop``/``dgrad``/
    ``wgrad`` on ``f32f32_f32f32_f32``, MIOpen ``igemm_*_fp32_``; names with a 16-bit,
    8-bit or TF32 type are not matched, nor are the tensor-core families ``h884``,
    ``s1688``, ``s16816``, ``tf32``, ``tensorop``, ``wmma``). A GEMM kernel launched by a
    convolution operator (cuDNN's Winograd runs its products as ``sgemm``) counts as a
    convolution. GEMV-like kernels (memory bound) are left out, and so is every kernel of
    an NVIDIA GPU without tensor cores (compute capability under 7: Pascal and older). The
    saving is half their time: a conservative 2x, well under the ratio of peak
    tensor-core to fp32 throughput (TF32 or fp16 vs fp32: 8x on A100 and V100; bf16 vs
    fp32 matrix cores: 4x on MI250). The advice follows what most of the time is: for
    convolutions, fp16 on GPUs without TF32 (T4, V100), bf16 elsewhere, with the
    activations in ``channels_last`` (cuDNN may pick fp32 kernels even with TF32
    allowed, PyTorch's default for convolutions); for GEMMs, TF32 where it is faster than
    fp32, else bf16 or fp16.
    The tensor-core opportunity is this rule's to tell: the operator roofline judges these
    calls against the peak of their kernels' own math, the fp32 vector rate
    (:mod:`hta.analysis.perf.kernel_math`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hta.analysis.findings.base import Finding, FindingRule, analysis_window, link, rank_work
from hta.analysis.findings.claims import Claim, claim_outside
from hta.analysis.findings.kernel_common import (
    FP32_GEMM,
    compute_kernels,
    cut,
    fmt_at,
    fp32_claimed,
    graph_replayed_work,
    in_steps,
    top_labels,
    top_names,
)
from hta.analysis.findings.occupancy import DEFAULT_ADVICE, check_low_occupancy
from hta.analysis.findings.rule_tools import (
    fmt_time,
    name_matches,
    runs_compiled,
    step_text,
    step_tuple,
    steps_text,
)
from hta.analysis.gpu_work import COMPUTE
from hta.analysis.intervals import Cover
from hta.analysis.names import short_name
from hta.model.arrays import distinct
from hta.model.categories import op_category
from hta.model.devices import match_device
from hta.model.prefilter import Prefiltered
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
#: Share of the fp32 GEMM time claimed (a 2x speed-up).
FP32_SAVING = 0.5

_COMPUTATION = KIND_CODE["computation"]

#: GEMM kernels on tensor cores (NVIDIA) or matrix cores in 16-bit or 8-bit formats (AMD).
TENSOR_GEMM = Prefiltered(re.compile(
    r"(?i)(h884|s884|h1688|s1688|s16816|i8816|hmma|tf32|bf16|f16|fp16|e4m3|e5m2|fp8|"
    r"tensorop|wmma|nvjet|wgmma|_HHS_|_BBS_|_HSS_|_BSS_).*(?<!fb)(gemm|mma)"
    r"|(?<!fb)gemm.*(bf16|f16|fp8|tf32)|xmma_gemm|^Cijk_\w*_(HHS|BBS|HSS|BSS|HH|BB)_|^nvjet"
))
#: Tensor-core GEMMs on fp32 operands in TF32 (``tf32`` in cuBLAS names; CUTLASS sm80+
#: ``tensorop_s1688gemm`` without a 16-bit type).
TF32_GEMM = Prefiltered(
    re.compile(r"(?i)tf32|cutlass_(8|9|1\d)\d_tensorop_s1688gemm(?!\w*(bf16|f16))"))
#: Architectures without TF32 (tensor cores only for fp16), in kernel names.
_PRE_AMPERE = re.compile(r"(^|[^a-z])(maxwell|pascal|volta|turing)_|sm_?[567]\d_")
#: Architectures with TF32, in kernel names.
_POST_VOLTA = re.compile(r"(^|[^a-z])(ampere|hopper|blackwell)_|(^|[^a-z])sm_?(8|9|1\d)\d_|nvjet")



# -- small_kernels --------------------------------------------------------------------------
def small_kernel_pairs(rt: RankTrace, iterations: Sequence[int] | None,
                       window: tuple[int, int]) -> dict[str, np.ndarray]:
    """Per small compute kernel ``b`` following a small one on its stream (module
    docstring): ``gap`` (the GPU idle part of the counted gap, ns), ``overhead`` (ns),
    ``name``, ``step`` and ``ts`` of ``b``; plus ``small`` (ids of every small kernel in the
    selection), ``small_graph`` (whether each was replayed from a graph) and ``n_compute``
    (how many compute kernels the selection has)."""
    w = rank_work(rt)
    graph = graph_replayed_work(rt)
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
    queued = (s_launch[rows] <= prev_end) | graph[order][rows]
    counted = (s_ts[rows] > prev_end) & queued
    lo = prev_end
    hi = np.maximum(np.where(counted, s_ts[rows], lo), lo)
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
        "name": w.name[order][rows], "step": w.iteration[order][rows], "ts": s_ts[rows],
        "small": w.name[small & sel], "small_step": w.iteration[small & sel],
        "small_graph": graph[small & sel],
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
    n_graph = int(p["small_graph"].sum())
    widest = int(np.argmax(p["gap"] + p["overhead"]))
    evidence = (
        f"{n_small} of {n_compute} compute kernels in {steps_text(rt, p['small_step'])} ran under "
        f"{SMALL_NS // 1000} µs (most launched: "
        f"{top_names(rt, p['small'], np.ones(n_small), with_time=False)}; kernels table, "
        f"count and mean){_graph_note(n_graph, n_small)}; {p['gap'].size} of them directly "
        f"follow another on their stream: {fmt_time(gap)} of GPU idle gaps between them "
        f"(the widest before {short_name(rt.symbols[int(p['name'][widest])])} at "
        f"{fmt_at(rt, int(p['ts'][widest]))}, {step_text(rt, int(p['step'][widest]))}) plus "
        f"{fmt_time(overhead)} of per-kernel overhead at {OVERHEAD_NS // 1000} µs each."
    )
    advice = _small_advice(rt, p["small"], n_graph, window)
    claim = Claim(p["claim_start"], p["claim_end"], p["claim_amount"])
    return [Finding((rt.rank,), step_tuple(p["small_step"]), evidence, saving,
                    window[1] - window[0], advice=advice, claim=claim)]


#: cuDNN's layout conversions around a convolution whose tensors are not in its layout
#: (NCHW <-> NHWC).
LAYOUT_CONVERSION = re.compile(r"(?i)nchwToNhwc|nhwcToNchw|convertTensor_kernel")
#: Share of the small kernels that layout conversions must reach for the advice to lead
#: with ``channels_last``.
LAYOUT_SHARE = 0.25
LAYOUT_ADVICE = (
    "{n} of them are cuDNN layout conversions around convolutions (NCHW <-> NHWC: "
    "convertTensor_kernel, nchwToNhwcKernel): convert the model and its inputs to "
    "channels_last (model.to(memory_format=torch.channels_last), and each input batch "
    "likewise) so that the convolutions read and write their own layout and the "
    "conversions go. ")
COMPILED_SMALL_ADVICE = (
    "The code already runs compiled (torch.compile): let more of it fuse by removing "
    "graph breaks (TORCH_LOGS=graph_breaks) and with mode='max-autotune', replay it as a "
    "CUDA graph (mode='reduce-overhead'), or give each kernel more work (a larger batch).")


def _small_advice(rt: RankTrace, small: np.ndarray, n_graph: int,
                  window: tuple[int, int]) -> str:
    """The advice for the small kernels ``small`` (their names): for graph replays, for
    compiled code, or the default; led by ``channels_last`` when layout conversions are
    :data:`LAYOUT_SHARE` of them or more, or :data:`LAYOUT_TIME_SHARE` of the window's
    compute-kernel time."""
    if 2 * n_graph >= small.size:
        advice = GRAPHED_SMALL_ADVICE
    else:
        advice = COMPILED_SMALL_ADVICE if runs_compiled(rt) else SMALL_ADVICE
    names, count = np.unique(small, return_counts=True)
    layout = sum(int(c) for n, c in zip(names.tolist(), count.tolist(), strict=True)
                 if LAYOUT_CONVERSION.search(rt.symbols[int(n)]))
    if small.size and (layout >= LAYOUT_SHARE * small.size or
                       (layout and _layout_time_share(rt, window) >= LAYOUT_TIME_SHARE)):
        advice = LAYOUT_ADVICE.format(n=layout) + advice
    return advice


#: Share of the window's compute-kernel time that layout conversions must reach for the
#: advice to lead with ``channels_last`` (whatever their share of the small kernels).
LAYOUT_TIME_SHARE = 0.05


def _layout_time_share(rt: RankTrace, window: tuple[int, int]) -> float:
    """The share of the compute-kernel time in ``window`` spent in layout conversions."""
    codes = rt.kind_codes()
    ts, end = rt.column("ts"), rt.column("end")
    k = np.flatnonzero((codes == KIND_CODE["computation"]) & (ts >= window[0])
                       & (ts < window[1]))
    total = float((end[k] - ts[k]).sum())
    if total <= 0:
        return 0.0
    conv = k[name_matches(rt, k, LAYOUT_CONVERSION)]
    return float((end[conv] - ts[conv]).sum()) / total


def _graph_note(n_graph: int, n_small: int) -> str:
    if n_graph == 0:
        return ""
    return f", {n_graph} of the {n_small} replayed from CUDA/HIP graphs"


SMALL_ADVICE = ("Fuse the small ops (torch.compile; fused optimizers such as "
                "Adam(fused=True) or foreach=True), replay the step as a CUDA graph "
                "(torch.compile(mode='reduce-overhead')), or give each kernel more work "
                "(a larger batch).")
GRAPHED_SMALL_ADVICE = ("These kernels already replay from a CUDA graph, which removes the "
                        "launch cost but not the per-kernel cost on the GPU: fuse the small "
                        "ops (torch.compile, fused kernels such as fused add+norm or "
                        "fused MoE routing), or give each kernel more work (a larger batch).")


# -- fp32_gemm ------------------------------------------------------------------------------
def check_fp32_gemm(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``fp32_gemm`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    ev = rt.events
    k = compute_kernels(rt, iterations, window)
    rows, ts, dur, step, ids = k.rows, k.ts, k.dur, k.step, k.ids
    hit = fp32_claimed(rt, rows)
    if not hit.any() or int(dur.sum()) <= 0:  # no measurable compute time (all dur 0)
        return []
    gemm = name_matches(rt, rows, FP32_GEMM)
    tensor_core = ~hit & name_matches(rt, rows, TENSOR_GEMM)
    tf32 = tensor_core & name_matches(rt, rows, TF32_GEMM)
    tensor = tensor_core & ~tf32
    conv = hit & (~gemm | _convolution_ops(rt, k.ops))
    fp32, conv_ns = int(dur[hit].sum()), int(dur[conv].sum())
    longest = int(np.flatnonzero(hit)[np.argmax(dur[hit])])
    ops = link(rt, "op_index")[rows[hit]]
    evidence = (
        f"{int(hit.sum())} fp32 {_fp32_kinds(fp32, conv_ns)} without tensor cores ran "
        f"{fmt_time(fp32)}, {100 * fp32 / int(dur.sum()):.1f}% of the compute kernel time "
        f"in {steps_text(rt, step[hit])}"
        f" (most: {top_labels(rt, ids[hit], dur[hit])}; the longest, "
        f"{cut(short_name(rt.symbols[int(ids[longest])]))}, at "
        f"{fmt_at(rt, int(ts[longest]))}, {step_text(rt, int(step[longest]))}, "
        f"{fmt_time(int(dur[longest]))}; kernels table){_launched_by(rt, ev, ops, dur[hit])}"
        f"{_tensor_note(int(dur[tensor].sum()), int(dur[tf32].sum()))}."
    )
    names = [rt.symbols[i] for i in distinct(ids[hit]).tolist()]
    if 2 * conv_ns > fp32:
        advice = _conv_advice(names, has_tf32(rt))
    elif tf32.any():
        advice = TF32_ON_ADVICE
    else:
        advice = _fp32_advice(names, has_tf32(rt), tf32_gains(rt))
        if dur[tensor].sum() > fp32:
            advice = MIXED_NOTE + " " + advice
    if 0 < 2 * conv_ns <= fp32:
        advice += " " + CHANNELS_LAST_NOTE
    claim = Claim(ts[hit], ts[hit] + dur[hit], FP32_SAVING * dur[hit])
    return [Finding((rt.rank,), step_tuple(step[hit]), evidence,
                    int(round(FP32_SAVING * fp32)), window[1] - window[0], advice=advice,
                    claim=claim)]


def _fp32_kinds(fp32_ns: int, conv_ns: int) -> str:
    """What the fp32 kernels are: GEMM kernels, convolution kernels, or both (with the
    time of each)."""
    if conv_ns <= 0:
        return "GEMM kernels"
    if conv_ns >= fp32_ns:
        return "convolution kernels"
    return (f"GEMM and convolution kernels (convolutions {fmt_time(conv_ns)}, GEMMs "
            f"{fmt_time(fp32_ns - conv_ns)})")


def _convolution_ops(rt: RankTrace, ops: np.ndarray) -> np.ndarray:
    """Per kernel (its launching operator row, -1 none): whether a convolution operator
    launched it (cuDNN's Winograd runs its products as ``sgemm`` kernels)."""
    out = np.zeros(ops.size, dtype=bool)
    has = ops >= 0
    out[has] = name_matches(rt, ops[has], _is_convolution_op)
    return out


def _is_convolution_op(name: str) -> bool:
    return op_category(name) == "convolution"


def _launched_by(rt: RankTrace, ev: pd.DataFrame, ops: np.ndarray,
                 weights: np.ndarray) -> str:
    """``; launched by aten::mm ×12 (...)``: the operators around the kernels' launches."""
    has = ops >= 0
    if not has.any():
        return ""
    names = ev["name"].to_numpy()[ops[has]]
    return f"; launched by {top_names(rt, names, weights[has])}"


def _tensor_note(tensor_ns: int, tf32_ns: int) -> str:
    """What ran on tensor cores beside the fp32 GEMMs: 16/8-bit GEMMs, TF32 GEMMs."""
    parts = []
    if tensor_ns > 0:
        parts.append(f"16- or 8-bit tensor-core GEMMs ran {fmt_time(tensor_ns)}")
    if tf32_ns > 0:
        parts.append(f"TF32 tensor-core GEMMs ran {fmt_time(tf32_ns)} (TF32 is on)")
    return "; " + " and ".join(parts) + " beside them" if parts else ""


def has_tf32(rt: RankTrace) -> bool | None:
    """Whether the rank's NVIDIA GPU has TF32 tensor cores (compute capability 8 or more):
    from ``deviceProperties`` (``computeMajor``), else from the architecture in its kernel
    names (``volta_``/``turing_``... only: no; ``ampere_``, ``sm80_``... : yes); ``None``
    when neither tells."""
    majors = [int(p["computeMajor"]) for p in rt.meta.get("device_properties") or []
              if isinstance(p, dict) and isinstance(p.get("computeMajor"), int)]
    if majors:
        return max(majors) >= 8
    if any(_POST_VOLTA.search(s) for s in rt.symbols):
        return True
    if any(_PRE_AMPERE.search(s) for s in rt.symbols):
        return False
    return None


def tf32_gains(rt: RankTrace) -> bool | None:
    """Whether TF32 runs faster than fp32 on the rank's GPU, by the peak table
    (:mod:`hta.model.devices`: a TF32 peak over 1.1x the fp32 one); False on parts whose
    TF32 tensor rate equals their fp32 rate (GeForce RTX 30, 40 and 50: dense TF32 at the
    fp32 rate), None when the table does not have both peaks for the part."""
    for props in rt.meta.get("device_properties") or []:
        dev = match_device(props) if isinstance(props, dict) else None
        if dev is not None and "tf32" in dev.peaks and "fp32" in dev.peaks:
            return float(dev.peaks["tf32"]) > 1.1 * float(dev.peaks["fp32"])
    return None


def _fp32_advice(names: list[str], tf32: bool | None, tf32_faster: bool | None = None
                 ) -> str:
    if names and all(n.startswith("Cijk_") for n in names):
        return ("Run the GEMMs in bf16 with autocast (torch.autocast('cuda', "
                "dtype=torch.bfloat16)); on MI300 hipBLASLt can also use xf32.")
    if tf32 is False:
        return ("This GPU has no TF32: run the GEMMs in fp16 with autocast "
                "(torch.autocast('cuda', dtype=torch.float16) with a GradScaler).")
    if tf32_faster is False:
        return NO_TF32_GAIN_ADVICE
    return FP32_ADVICE


def _conv_advice(names: list[str], tf32: bool | None) -> str:
    if any(n.startswith("igemm_") or "MIOpen" in n for n in names):
        return CONV_AMD_ADVICE
    if tf32 is False:
        return CONV_FP16_ADVICE
    return CONV_BF16_ADVICE


CONV_FP16_ADVICE = (
    "This GPU's tensor cores take fp16, not fp32 or TF32: run the convolutions in fp16 "
    "with autocast (torch.autocast('cuda', dtype=torch.float16), with a GradScaler when "
    "training; model.half() for inference) and keep the activations in channels_last "
    "(model.to(memory_format=torch.channels_last) and the same for the input), the layout "
    "cuDNN's tensor-core kernels read without a conversion.")
CONV_BF16_ADVICE = (
    "cuDNN ran these convolutions in fp32 on the CUDA cores although PyTorch lets it use "
    "TF32 by default (torch.backends.cudnn.allow_tf32: check nothing turns it off); its "
    "heuristics chose fp32 kernels for these shapes. Run them in bf16 with autocast "
    "(torch.autocast('cuda', dtype=torch.bfloat16)) with the activations in channels_last "
    "(model.to(memory_format=torch.channels_last)), where cuDNN's tensor-core kernels "
    "apply, and set torch.backends.cudnn.benchmark = True so that cuDNN times its "
    "candidates instead of guessing.")
CONV_AMD_ADVICE = (
    "MIOpen ran these convolutions in fp32: run them in bf16 with autocast "
    "(torch.autocast('cuda', dtype=torch.bfloat16)) with the activations in channels_last "
    "(model.to(memory_format=torch.channels_last)), where its matrix-core kernels apply.")
CHANNELS_LAST_NOTE = (
    "For the convolutions among them, keep the activations in channels_last "
    "(model.to(memory_format=torch.channels_last)), the layout cuDNN's tensor-core "
    "kernels read without a conversion.")
NO_TF32_GAIN_ADVICE = (
    "On this GPU TF32 tensor cores have the same peak as fp32 (the peak table's rates for "
    "the part), so allowing TF32 gains little: run the GEMMs in bf16 with autocast "
    "(torch.autocast('cuda', dtype=torch.bfloat16)), whose peak is twice or more.")
FP32_ADVICE = ("Let fp32 matmuls use tensor cores: torch.set_float32_matmul_precision('high') "
               "(or torch.backends.cuda.matmul.allow_tf32 = True, and "
               "torch.backends.cudnn.allow_tf32 = True for convolutions), or run them in "
               "bf16/fp16 with torch.autocast.")
TF32_ON_ADVICE = ("TF32 is already allowed (TF32 tensor-core GEMMs run beside these), yet "
                  "cuBLAS picked fp32 kernels for these shapes: run the operators that "
                  "launch them in bf16 (torch.autocast('cuda', dtype=torch.bfloat16)), or "
                  "try torch.compile(mode='max-autotune') for their shapes.")
MIXED_NOTE = ("Most GEMM time already uses tensor cores: these fp32 GEMMs run outside "
              "autocast (see the operators that launch them); check they need fp32 (a "
              "router, a loss) before changing them.")

RULES: list[FindingRule] = [
    FindingRule(
        id="small_kernels",
        title="Many tiny kernels: fixed per-kernel costs eat the GPU time",
        section="kernels",
        advice=SMALL_ADVICE,
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
        title="fp32 GEMMs and convolutions where tensor cores would apply",
        section="kernels",
        advice=FP32_ADVICE,
        saving=("Half the time of the fp32 GEMM and convolution kernels (a conservative "
                "2x); none on GPUs without tensor cores."),
        check=check_fp32_gemm,
    ),
]
