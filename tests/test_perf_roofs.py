"""Each call is judged against the peak of the math its kernels ran: SIMT fp32 GEMMs
against the fp32 vector peak, tensor-core ones against TF32 (traces built in code, and the
real A100 trace ``trace_diff/control``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES, absent_reason
from kineto_builder import TraceBuilder

from hta.analysis.perf.kernel_math import (
    FP32_MATRIX,
    NONE,
    OTHER_MATRIX,
    SIMT_FP32,
    call_math,
    kernel_math,
)
from hta.trace_analysis import TraceAnalysis

TRACES = Path(os.environ.get("HTA_SHARED_TRACES", SHARED_TRACES))
A100 = {"name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42.3e9, "numSms": 108}
S = 2048  # every product is S x S x S: 2·S³ FLOPs, 3·S² fp32 elements moved
FLOPS = 2.0 * S**3
T_NS = 1_200_000  # 1.2 ms: 14.3 TFLOP/s, 73 % of the A100's 19.5 fp32, 9 % of its 156 TF32

SGEMM = "ampere_sgemm_128x128_tn"
FFMA = ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x2x1_ffma_"
        "aligna4_alignc4_execute_kernel__5x_cublas")
TF32 = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(Params)"
XMMA_TF32 = ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_"
             "tensor16x8x8_execute_kernel__5x_cublas")
SPLIT_K = ("void splitKreduce_kernel<float, float, float, float, true, false, false>"
           "(cublasSplitKParams<float>, float const*, float*)")


def _job(tmp_path: Path) -> TraceAnalysis:
    """Six aten::mm calls of the same fp32 product, 1.2 ms of GPU each, with different
    kernels; a seventh in bf16 whose kernel name says sgemm."""
    b = TraceBuilder(rank=0)
    b.extra_top_level["deviceProperties"] = [A100]
    fp32 = {"Input Dims": [[S, S], [S, S]], "Input type": ["float", "float"]}
    bf16 = {"Input Dims": [[S, S], [S, S]], "Input type": ["c10::BFloat16"] * 2}
    calls = [
        (fp32, [(SGEMM, T_NS)]),
        (fp32, [(FFMA, T_NS)]),
        (fp32, [(TF32, T_NS)]),
        (fp32, [(XMMA_TF32, T_NS)]),
        # split-K: the reduction (longer here) takes no side, the sgemm decides
        (fp32, [(SGEMM, T_NS // 3), (SPLIT_K, T_NS - T_NS // 3)]),
        # an sgemm beside a longer tensor-core GEMM: the call is the tensor-core one's
        (fp32, [(SGEMM, T_NS // 4), (TF32, T_NS - T_NS // 4)]),
        (bf16, [(SGEMM, T_NS)]),
    ]
    gpu = 100_000
    with b.step(1, ts=0, dur=20_000_000):
        for i, (dims, kernels) in enumerate(calls):
            ts = 10_000 + i * 20_000
            b.cpu_op("aten::mm", ts=ts, dur=10_000, **dims)
            for j, (name, dur) in enumerate(kernels):
                b.launch_kernel(name, cpu_ts=ts + 1_000 + j * 2_000, cpu_dur=1_000,
                                gpu_ts=gpu, gpu_dur=dur)
                gpu += dur + 10_000
    b.write(tmp_path / "rank-0.json")
    return TraceAnalysis(tmp_path, cache=False, progress=False)


def test_simt_fp32_gemm_is_judged_against_the_fp32_peak(tmp_path: Path) -> None:
    df = _job(tmp_path).get_op_performance()
    assert len(df) == 7 and (df["device"] == "A100 40GB").all()
    assert (df["flops"] == FLOPS).all()
    rate = FLOPS / (T_NS / 1e9) / 1e12  # 14.3 TFLOP/s
    assert df["tflops_per_s"].to_numpy() == pytest.approx([rate] * 7)
    key = df["peak_key"].tolist()
    matrix = df["matrix"].tolist()
    assert key == ["fp32", "fp32", "tf32", "tf32", "fp32", "tf32", "bf16"]
    assert matrix == [False, False, True, True, False, True, True]
    # I = 2·S³ / (3·S²·4 B) = 341 FLOP/B: above both ridges (19.5/1.555, 156/1.555)
    assert (df["bound"] == "compute").all()
    pct = df["pct_of_peak"].to_numpy()
    assert pct[[0, 1, 4]] == pytest.approx([100 * rate / 19.5] * 3)  # 73.4 %
    assert pct[[2, 3, 5]] == pytest.approx([100 * rate / 156.0] * 3)  # 9.2 %
    assert pct[6] == pytest.approx(100 * rate / 312.0)
    assert df["roof_tflops_per_s"].tolist()[:3] == [19.5, 19.5, 156.0]


def test_roofline_figure_has_the_fp32_vector_roof(tmp_path: Path) -> None:
    from hta.analysis.perf.roofline import roofs_of

    df = _job(tmp_path).get_op_performance()
    assert roofs_of(df) == [("bf16", True), ("fp32", False), ("tf32", True)]


@pytest.mark.parametrize(("name", "math"), [
    (SGEMM, SIMT_FP32), ("volta_sgemm_64x64_nn", SIMT_FP32), (FFMA, SIMT_FP32),
    ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_execute_kernel", SIMT_FP32),
    ("void magma_sgemmEx_kernel<float, float, float, false, false, 6, 3, 5, 3, 3>(int)",
     SIMT_FP32),
    ("void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(Params)", SIMT_FP32),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false>()",
     SIMT_FP32),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
     "float, float, false, true>()", SIMT_FP32),
    ("void gemmk1_kernel<float, 256, 5, false, false>()", SIMT_FP32),
    ("void gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false>()", SIMT_FP32),
    ("Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_GRVW4", SIMT_FP32),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0", FP32_MATRIX),
    (TF32, NONE), (XMMA_TF32, NONE), ("cutlass_tensorop_sgemm_64x64", NONE),
    ("void gemv2T_kernel_val<int, int, __half, __half, float, float, 128>()", NONE),
    ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN", NONE),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", NONE),
])
def test_kernel_math(name: str, math: int) -> None:
    assert kernel_math(name) == math


def test_call_math_longest_class_wins_split_k_takes_no_side() -> None:
    # call 0: SIMT 3 vs other matrix 2; call 1: other 5 vs SIMT 1; call 2: a tie;
    # call 3: only kernels of no class
    slot = np.array([0, 0, 1, 1, 2, 2, 3])
    dur = np.array([3.0, 2.0, 5.0, 1.0, 2.0, 2.0, 9.0])
    math = np.array([SIMT_FP32, OTHER_MATRIX, OTHER_MATRIX, SIMT_FP32, FP32_MATRIX,
                     OTHER_MATRIX, NONE], dtype=np.int8)
    assert call_math(slot, dur, math, 4).tolist() == [SIMT_FP32, OTHER_MATRIX, NONE, NONE]


@pytest.mark.skipif(not (TRACES / "trace_diff/control").exists(),
                    reason=absent_reason(TRACES / "trace_diff/control"))
def test_real_a100_sgemm_calls_are_judged_against_fp32() -> None:
    """trace_diff/control (A100-PG509-200, fp32 TorchRec): every call whose kernel is an
    ampere_sgemm has the fp32 vector roof, the cutlass tensorop (TF32) ones keep TF32, and
    the largest sgemm product, [98304, 30] @ [30, 647], becomes compute-bound at 63 % of
    19.5 TFLOP/s (it read as 55 % of the bandwidth under the TF32 roof)."""
    a = TraceAnalysis(TRACES / "trace_diff/control", cache=False, progress=False)
    df = a.get_op_performance()
    gemm = df[(df["category"] == "GEMM") & df["flops"].notna()]
    assert set(gemm["peak_key"]) == {"fp32", "tf32"}
    big = gemm[gemm["input_dims"] == "[[98304, 30], [30, 647]]"]
    assert len(big) == 6 and (big["peak_key"] == "fp32").all()
    assert (big["bound"] == "compute").all() and (big["roof_tflops_per_s"] == 19.5).all()
    assert big["pct_of_peak"].mean() == pytest.approx(63.2, abs=0.5)
    assert gemm.loc[gemm["peak_key"] == "fp32", "pct_of_peak"].max() < 100
