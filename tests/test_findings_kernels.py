"""The kernel findings rules: small kernels, fp32 GEMMs, unclassified kernels (low occupancy:
``test_findings_occupancy.py``).

Each rule has a pair of tests on a generated trace (:mod:`findings_kernel_cases`): with the
problem it reports a saving within 5% of the one known by construction, without it nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import shared_trace
from findings_kernel_cases import (
    FP32_NAMES,
    TENSOR_CORE_NAMES,
    fp32_gemm,
    small_kernels,
)
from kineto_builder import TraceBuilder

from hta.analysis.findings import find
from hta.analysis.findings import kernels as kernel_rules
from hta.analysis.findings.engine import analysis_window, default_rules
from hta.analysis.findings.kernels import check_fp32_gemm
from hta.job.load import load_trace
from hta.model.selection import Selection

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


def test_small_kernels_advice_fits_compiled_code_and_layout_conversions(tmp_path):
    """Compiled code gets no 'use torch.compile' advice; half the small kernels being
    cuDNN layout conversions leads the advice with channels_last; the twin gets neither."""
    from hta.analysis.findings.kernels import COMPILED_SMALL_ADVICE, SMALL_ADVICE

    conv = "void cudnn::engines_precompiled::convertTensor_kernel<float, float, float>"
    cases = {"plain": {}, "compiled": {"compiled": True}, "layout": {"name": conv}}
    advice = {}
    for label, kw in cases.items():
        folder = tmp_path / label
        folder.mkdir()
        trace, _ = small_kernels(folder, **kw)
        advice[label] = _only(trace, "small_kernels").iloc[0]["advice"]
    assert advice["plain"] == SMALL_ADVICE
    assert advice["compiled"] == COMPILED_SMALL_ADVICE
    assert advice["layout"].split(" ", 1)[1].startswith("of them are cuDNN layout conversions")
    assert "channels_last" in advice["layout"] and "channels_last" not in advice["plain"]


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
    rows = _only(trace, "small_kernels", selection=Selection.of(iterations=[2]))
    assert _saving_ns(rows) == expected // 2
    assert rows.iloc[0]["steps"] == [2]


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
    only2 = _only(trace, "fp32_gemm", selection=Selection.of(iterations=[2]))
    assert _saving_ns(only2) == expected // 2


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
    assert "no TF32" in kernel_rules._fp32_advice(["volta_sgemm_128x64_nn"], False)
    assert "bf16" in kernel_rules._fp32_advice(["Cijk_Alik_Bljk_SB_MT64x16x32"], True)
    assert kernel_rules._fp32_advice(["ampere_sgemm_128x64_nn"], True) == kernel_rules.FP32_ADVICE
    assert kernel_rules._fp32_advice(["magma_sgemmEx_kernel<float>"], None) == \
        kernel_rules.FP32_ADVICE


@pytest.mark.parametrize(("major", "names", "expected"), [
    (7, ["void magma_sgemmEx_kernel<float, float, float, true>(x)"], False),  # V100
    (8, ["void magma_sgemmEx_kernel<float, float, float, true>(x)"], True),
    (None, ["volta_sgemm_128x64_nn", "void magma_sgemmEx_kernel<float>(x)"], False),
    (None, ["ampere_sgemm_128x64_nn"], True),
    (None, ["void magma_sgemmEx_kernel<float>(x)"], None),
])
def test_tf32_from_device_properties_else_kernel_names(tmp_path, major, names, expected):
    """A V100 trace whose fp32 GEMMs include an untagged ``magma_sgemmEx`` kernel is still
    a GPU without TF32 (it got the TF32 advice before)."""
    b = TraceBuilder(rank=0)
    if major is not None:
        b.extra_top_level["deviceProperties"] = [{"id": 0, "computeMajor": major}]
    with b.step(1, ts=0, dur=1_000_000):
        for i, name in enumerate(names):
            b.launch_kernel(name, cpu_ts=1_000, cpu_dur=500, gpu_ts=10_000 + i * 300_000,
                            gpu_dur=200_000)
    b.write(tmp_path / "rank-0.json")
    rt = load_trace(tmp_path, progress=False, cache=False).rank(0)
    assert kernel_rules.has_tf32(rt) is expected
    rows = _only(load_trace(tmp_path, progress=False, cache=False), "fp32_gemm")
    assert ("no TF32" in rows.iloc[0]["advice"]) == (expected is False)


def test_fp32_gemm_names_the_operators_and_notes_mixed_precision(tmp_path):
    """Mostly bf16 GEMMs plus one fp32 GEMM launched by ``aten::linear`` (a router kept in
    fp32): the evidence names the operator, the advice says to check it needs fp32."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=2_000_000):
        b.cpu_op("aten::linear", ts=1_000, dur=2_000)
        b.launch_kernel("ampere_sgemm_64x32_sliced1x4_tn", cpu_ts=1_500, cpu_dur=500,
                        gpu_ts=10_000, gpu_dur=100_000)
        b.launch_kernel(TENSOR_CORE_NAMES[2], cpu_ts=5_000, cpu_dur=500, gpu_ts=200_000,
                        gpu_dur=900_000)
    b.write(tmp_path / "rank-0.json")
    rows = _only(load_trace(tmp_path, progress=False, cache=False), "fp32_gemm")
    assert _saving_ns(rows) == 50_000
    evidence, advice = rows.iloc[0]["evidence"], rows.iloc[0]["advice"]
    assert "launched by aten::linear ×1 (100.0 µs)" in evidence
    assert "16- or 8-bit tensor-core GEMMs ran 900.0 µs beside them" in evidence
    assert "the longest, ampere_sgemm_64x32_sliced1x4_tn, at 0.010 ms, step 1, 100.0 µs" \
        in evidence
    assert advice.startswith(kernel_rules.MIXED_NOTE)


def test_fp32_gemm_with_tf32_already_on(tmp_path):
    """TF32 tensor-op GEMMs beside the fp32 SIMT ones (the TorchRec traces): TF32 is on,
    so the advice is not to turn it on."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=2_000_000):
        b.launch_kernel("ampere_sgemm_128x64_nn", cpu_ts=1_500, cpu_dur=500, gpu_ts=10_000,
                        gpu_dur=100_000)
        b.launch_kernel("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_"
                        "align1>(Params)", cpu_ts=5_000, cpu_dur=500, gpu_ts=200_000,
                        gpu_dur=300_000)
    b.write(tmp_path / "rank-0.json")
    row = _only(load_trace(tmp_path, progress=False, cache=False), "fp32_gemm").iloc[0]
    assert "TF32 tensor-core GEMMs ran 300.0 µs (TF32 is on) beside them" in row["evidence"]
    assert row["advice"] == kernel_rules.TF32_ON_ADVICE


@pytest.mark.parametrize(("name", "tensor", "tf32"), [
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>(x)", True, True),
    ("sm80_xmma_gemm_tf32f32_tf32f32_f32_nt_n_tilesize128x128x16", True, True),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", True, False),
    ("void cutlass::Kernel<cutlass_75_tensorop_f16_s1688gemm_f16_64x64_32x2_nn_align8>", True,
     False),
    ("void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(x)",
     False, False),
])
def test_tensor_core_names(name, tensor, tf32):
    assert (kernel_rules.TENSOR_GEMM.search(name) is not None) == tensor
    assert (tensor and kernel_rules.TF32_GEMM.search(name) is not None) == tf32


# -- the engine, the sample job and real traces ----------------------------------------------
def test_rules_are_registered():
    ids = {r.id for r in default_rules()}
    assert {"small_kernels", "low_occupancy", "fp32_gemm"} <= ids
    assert "unclassified_kernels" not in ids  # a coverage note, not a finding


def test_sample_job():
    """The sample job's GEMMs are fp32 SIMT kernels with 32 to 128 blocks on 108 SMs: the
    fp32 rule fires there (checked by hand), and the occupancy rule leaves those GEMMs to
    it (one saving per kernel time); it has no run of tiny kernels and every kernel is
    classified."""
    trace = load_trace(REPO / "sample_traces" / "synthetic_4rank", progress=False, cache=False)
    out = find(trace, rules=RULES)
    assert set(out["rule"]) == {"fp32_gemm"}
    for _, row in out.iterrows():
        assert row["ranks"] == [0, 1, 2, 3]
        assert 0 < row["share_pctg"] < 10


@pytest.mark.parametrize("parts", [("df_index_resolver",), ("trace_diff", "test"),
                                   ("ns_resolution_trace",), ("mtia_inference_trace",)])
def test_real_traces_savings_within_the_window(parts):
    trace = load_trace(shared_trace(*parts), progress=False, cache=False)
    for rank in trace.get_ranks():
        rt = trace.rank(rank)
        start, end = analysis_window(rt)
        for rule in RULES:
            for f in rule.check(rt, None):
                assert 0 < f.est_saving_ns <= f.window_ns == end - start
                assert f.evidence and f.ranks == (rank,)


def test_no_tf32_advice_where_tf32_runs_at_the_fp32_rate(tmp_path: Path) -> None:
    """A GeForce RTX 3060 (TF32 tensor peak = fp32 peak in the table): the advice is
    bf16 autocast, and the replayed change follows it; an A100 keeps the TF32 advice."""
    from hta.analysis.findings.kernels import NO_TF32_GAIN_ADVICE, tf32_gains
    from hta.analysis.whatif.findings import change_for

    for name, gains in (("NVIDIA GeForce RTX 3060", False), ("NVIDIA A100-SXM4-80GB", True)):
        b = TraceBuilder(rank=0)
        b.extra_top_level["deviceProperties"] = [
            {"id": 0, "name": name, "computeMajor": 8, "computeMinor": 6}]
        with b.step(1, ts=0, dur=1_000_000):
            b.launch_kernel("ampere_sgemm_128x64_tn", cpu_ts=1_000, cpu_dur=500,
                            gpu_ts=10_000, gpu_dur=500_000)
        folder = tmp_path / name.replace(" ", "_")
        rt = load_trace(b.write(folder / "rank-0.json").parent, progress=False,
                        cache=False).rank(0)
        assert tf32_gains(rt) is gains
        (finding,) = check_fp32_gemm(rt, None)
        if gains:
            assert "set_float32_matmul_precision" in finding.advice
        else:
            assert finding.advice == NO_TF32_GAIN_ADVICE
            assert change_for("fp32_gemm", [0], advice=finding.advice) == "dtype:bf16"
