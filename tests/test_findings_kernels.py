"""The kernel findings rules: small kernels, low occupancy, fp32 GEMMs, unclassified kernels.

Each rule has a pair of tests on a generated trace (:mod:`findings_kernel_cases`): with the
problem it reports a saving within 5% of the one known by construction, without it nothing.
"""

from __future__ import annotations

import pytest
from findings_kernel_cases import (
    FP32_NAMES,
    TENSOR_CORE_NAMES,
    fp32_gemm,
    low_occupancy,
    small_kernels,
)

from hta.analysis.findings import find
from hta.analysis.findings import kernels as kernel_rules

RULES = kernel_rules.RULES
REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def _only(trace, rule_id, **kw):
    out = find(trace, rules=RULES, **kw)
    return out[out["rule"] == rule_id]


def _saving_ns(rows) -> int:
    assert len(rows) == 1, rows
    return round(float(rows.iloc[0]["est_saving(us)"]) * 1e3)


def _close(got: int, expected: int) -> None:
    assert expected > 0
    assert abs(got - expected) <= 0.05 * expected, (got, expected)


# -- small_kernels ----------------------------------------------------------------------------
def test_small_kernels_reports_gaps_and_overhead(tmp_path):
    trace, expected = small_kernels(tmp_path)
    rows = _only(trace, "small_kernels")
    _close(_saving_ns(rows), expected)
    assert _saving_ns(rows) == expected  # exact here: 2 x 149 x (2 + 1) µs
    row = rows.iloc[0]
    assert row["steps"] == [1, 2] and row["ranks"] == [0]
    assert "300 of 300 compute kernels" in row["evidence"]
    assert "at::native::vectorized_elementwise_kernel ×300" in row["evidence"]


def test_small_kernels_quiet_without_small_kernels(tmp_path):
    trace, expected = small_kernels(tmp_path, kernel_ns=8_000)
    assert expected == 0
    assert _only(trace, "small_kernels").empty


def test_small_kernels_leaves_host_bound_gaps_to_launch_bound(tmp_path):
    trace, expected = small_kernels(tmp_path, host_bound=True)
    assert _saving_ns(_only(trace, "small_kernels")) == expected == 2 * 149 * 1_000


def test_small_kernels_counts_only_idle_gap_time(tmp_path):
    trace, expected = small_kernels(tmp_path, side_cover_ns=1_500)
    assert _saving_ns(_only(trace, "small_kernels")) == expected == 2 * 149 * (500 + 1_000)


def test_small_kernels_needs_enough_of_them(tmp_path):
    trace, _ = small_kernels(tmp_path, n=40)  # 80 small kernels, under MIN_SMALL
    assert _only(trace, "small_kernels").empty


def test_small_kernels_iteration_selection(tmp_path):
    trace, expected = small_kernels(tmp_path)
    rows = _only(trace, "small_kernels", iterations=[2])
    assert _saving_ns(rows) == expected // 2
    assert rows.iloc[0]["steps"] == [2]


# -- low_occupancy ----------------------------------------------------------------------------
def test_low_occupancy_claims_the_grid_bound_part(tmp_path):
    trace, expected = low_occupancy(tmp_path)
    rows = _only(trace, "low_occupancy")
    _close(_saving_ns(rows), expected)
    evidence = rows.iloc[0]["evidence"]
    assert "40 of them had fewer blocks than SMs" in evidence
    assert "40 compute kernels" in evidence and "66.7% of the 6.000 ms" in evidence


def test_low_occupancy_quiet_without_it(tmp_path):
    trace, expected = low_occupancy(tmp_path, low=False)
    assert expected == 0
    assert _only(trace, "low_occupancy").empty


@pytest.mark.parametrize("kw", [{"resource_bound_only": True}, {"with_args": False}])
def test_low_occupancy_silent_when_nothing_is_grid_bound_or_no_args(tmp_path, kw):
    trace, expected = low_occupancy(tmp_path, **kw)
    assert expected == 0
    assert _only(trace, "low_occupancy").empty


# -- fp32_gemm --------------------------------------------------------------------------------
def test_fp32_gemm_reports_half_their_time(tmp_path):
    trace, expected = fp32_gemm(tmp_path)
    rows = _only(trace, "fp32_gemm")
    _close(_saving_ns(rows), expected)
    evidence = rows.iloc[0]["evidence"]
    assert "8 fp32 GEMM kernels without tensor cores ran 1.600 ms" in evidence
    assert "set_float32_matmul_precision" in rows.iloc[0]["advice"]


def test_kernels_belong_to_the_step_that_launched_them(tmp_path):
    trace, expected = fp32_gemm(tmp_path, late=True)
    rows = _only(trace, "fp32_gemm")
    assert _saving_ns(rows) == expected and rows.iloc[0]["steps"] == [1, 2]
    assert _saving_ns(_only(trace, "fp32_gemm", iterations=[2])) == expected // 2


def test_fp32_gemm_quiet_with_tensor_core_kernels(tmp_path):
    trace, expected = fp32_gemm(tmp_path, fp32=False)
    assert expected == 0
    assert _only(trace, "fp32_gemm").empty


@pytest.mark.parametrize("name", [*FP32_NAMES,
                                  "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true>(x)",
                                  "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize128x128x8_"
                                  "stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel",
                                  "maxwell_sgemm_128x64_nn", "sgemm_32x32x32_NN_vec",
                                  "void sgemm_largek_lds64<true, true, 6, 3, 4, 5, 2, 66>(x)",
                                  "void magma_sgemmEx_kernel<float, float, float, true>(x)"])
def test_fp32_names(name):
    assert kernel_rules.FP32_GEMM.search(name)


@pytest.mark.parametrize("name", [
    *TENSOR_CORE_NAMES,
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16",
    "volta_h884gemm_64x64_ldg8_nn", "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1",
    "void cutlass::Kernel<cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8>",
    "void gemmk1_kernel<float, 256, 5, false, false, false, false>(x)",  # a GEMV in effect
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",  # a convolution, not a GEMM
    "Cijk_Ailk_Bljk_DB_MT64x64x8",  # fp64
])
def test_not_fp32_names(name):
    assert not kernel_rules.FP32_GEMM.search(name)


def test_fp32_advice_follows_the_architecture():
    assert "no TF32" in kernel_rules._fp32_advice(["volta_sgemm_128x64_nn"])
    assert "bf16" in kernel_rules._fp32_advice(["Cijk_Alik_Bljk_SB_MT64x16x32"])
    assert kernel_rules._fp32_advice(["ampere_sgemm_128x64_nn"]) == kernel_rules.FP32_ADVICE
