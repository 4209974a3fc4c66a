"""Generated traces for the kernel findings rules, with the saving known by construction.

Every builder returns ``(trace, expected_saving_ns)``; the expected value is computed from
the construction parameters, never by the code under test. One rank, ``STEPS`` steps of
``STEP_NS`` each; step ``k`` (1-based) starts at ``(k - 1) * STEP_NS``. Times in ns.
"""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

from hta.job.load import load_trace
from hta.model.rules import Rule
from hta.model.trace import Trace

STEP_NS = 4_000_000
STEPS = 2
SIDE_STREAM = 20

ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3>)")


def _load(b: TraceBuilder, tmp_path: Path, rules: tuple[Rule, ...] = ()) -> Trace:
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False, rules=rules)


def small_kernels(tmp_path: Path, kernel_ns: int = 3_000, gap_ns: int = 2_000, n: int = 150,
                  host_bound: bool = False, side_cover_ns: int = 0, name: str = "",
                  compiled: bool = False) -> tuple[Trace, int]:
    """Each step: ``n`` kernels of ``kernel_ns`` on one stream, ``gap_ns`` apart.

    The host launches them 1 µs apart long before the GPU reaches them (every gap is the
    GPU's own per-kernel latency), unless ``host_bound``: then each launch call returns
    1 µs before its kernel starts, after the previous kernel ended (the gaps are the host's,
    not counted; needs ``gap_ns`` > 1 µs). With ``side_cover_ns``, a memset on another
    stream covers that much of every gap (from the gap's start), so only the rest is GPU
    idle. ``name``: every other kernel is named so (a layout conversion); ``compiled``:
    each step runs under a ``Torch-Compiled Region: 0/0`` operator.

    Expected saving with small kernels (under 5 µs): per step ``n - 1`` pairs, each the
    idle part of its gap (0 when host-bound) plus a 1 µs overhead (at most the kernel).
    """
    b = TraceBuilder(rank=0)
    period = kernel_ns + gap_ns
    for k in range(1, STEPS + 1):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            if compiled:
                b.cpu_op("Torch-Compiled Region: 0/0", ts=t + 500, dur=n * 600 + 1_000)
            gpu0 = t + 100_000
            for i in range(n):
                g = gpu0 + i * period
                cpu = g - 1_000 - 500 if host_bound else t + 1_000 + i * 600
                b.launch_kernel(name if name and i % 2 else ADD, cpu_ts=cpu, cpu_dur=500,
                                gpu_ts=g, gpu_dur=kernel_ns)
                if side_cover_ns and i:
                    b.gpu("Memset (Device)", "gpu_memset", g - gap_ns, side_cover_ns,
                          stream=SIDE_STREAM)
    trace = _load(b, tmp_path)
    if kernel_ns >= 5_000:
        return trace, 0
    gap = 0 if host_bound or gap_ns > 10_000 else gap_ns - side_cover_ns
    return trace, STEPS * (n - 1) * (gap + min(1_000, kernel_ns))


FP32_NAMES = (
    "volta_sgemm_128x64_nn",
    "ampere_sgemm_32x32_sliced1x4_tn",
    "void cutlass::Kernel<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(Params)",
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1",
)
TENSOR_CORE_NAMES = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn",
    "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1",
    "Cijk_Ailk_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0",
)


def fp32_gemm(tmp_path: Path, fp32: bool = True, late: bool = False) -> tuple[Trace, int]:
    """Each step: one 200 µs GEMM of each of four names, fp32 ones (:data:`FP32_NAMES`)
    or, without the problem, tensor-core ones (:data:`TENSOR_CORE_NAMES`), plus an
    elementwise kernel of 50 µs. Expected saving: half the fp32 GEMM time, 400 µs a step.
    With ``late`` the GPU runs the last step's kernels after that step's span ended."""
    b = TraceBuilder(rank=0)
    dur = 200_000
    names = FP32_NAMES if fp32 else TENSOR_CORE_NAMES
    for k in range(1, STEPS + 1):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            g = t + (STEP_NS + 100_000 if late and k == STEPS else 50_000)
            for name in (*names, ADD):
                b.launch_kernel(name, cpu_ts=t + 1_000, cpu_dur=500, gpu_ts=g,
                                gpu_dur=50_000 if name == ADD else dur)
                g += dur + 1_000
    trace = _load(b, tmp_path)
    return trace, (STEPS * len(names) * dur // 2) if fp32 else 0


UNKNOWN = "void fancy_collective_step<float>(float*, int)"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def unclassified(tmp_path: Path, unknown: bool = True,
                 rules: tuple[Rule, ...] = ()) -> tuple[Trace, int]:
    """Each step: a compute kernel ``[0, 100)`` µs (relative to the step's GPU start) on
    the compute stream; on stream 20 a kernel ``[60, 160)`` (40 µs under the compute
    kernel, 60 exposed) and one ``[200, 260)`` (60 exposed). They are named
    :data:`UNKNOWN` (no kind rule) or, without the problem, :data:`NCCL`.
    Unclassified 160 of 220 µs busy (73%); expected saving 120 µs a step."""
    b = TraceBuilder(rank=0)
    name = UNKNOWN if unknown else NCCL
    for k in range(1, STEPS + 1):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            g = t + 50_000
            b.launch_kernel(ADD, cpu_ts=t + 1_000, cpu_dur=500, gpu_ts=g, gpu_dur=100_000)
            b.launch_kernel(name, cpu_ts=t + 2_000, cpu_dur=500, gpu_ts=g + 60_000,
                            gpu_dur=100_000, stream=SIDE_STREAM)
            b.launch_kernel(name, cpu_ts=t + 3_000, cpu_dur=500, gpu_ts=g + 200_000,
                            gpu_dur=60_000, stream=SIDE_STREAM)
    trace = _load(b, tmp_path, rules)
    return trace, (STEPS * 120_000 if unknown and not rules else 0)
