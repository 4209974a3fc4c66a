"""``fp32_gemm`` on convolutions: cuDNN/MIOpen kernels computing in plain fp32 are named,
claimed at half their time, and advised by the part (fp16 without TF32, bf16 elsewhere),
each with its twin: the same work on tensor cores, or a GPU without tensor cores, gives
nothing. The pattern comes from a public T4 ResNet inference trace whose fp32 cuDNN
convolutions (79 % of the GPU time) no finding named."""

from __future__ import annotations

from pathlib import Path

import pytest
from kineto_builder import TraceBuilder

from hta.analysis.findings import kernels as kernel_rules
from hta.analysis.findings.kernel_common import fp32_conv, fp32_matrix, tensor_cores
from hta.analysis.findings.kernels import check_fp32_gemm
from hta.analysis.whatif.findings import change_for
from hta.job.load import load_trace
from hta.model.trace import RankTrace

T4 = {"id": 0, "name": "Tesla T4", "computeMajor": 7, "computeMinor": 5, "numSms": 40}
A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
        "numSms": 108}
GTX1050TI = {"id": 0, "name": "NVIDIA GeForce GTX 1050 Ti", "computeMajor": 6,
             "computeMinor": 1, "numSms": 6}

SCUDNN = "_5x_cudnn_volta_scudnn_128x32_relu_small_nn_v1"
WINOGRAD_DATA = ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>"
                 "(cudnn::winograd_nonfused::WinogradDataParams<float, float>)")
TENSOR_CONV = "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1"


def _rank(tmp_path: Path, device: dict | None, kernels: list[tuple[str, str, int]]
          ) -> RankTrace:
    """One step of ``(operator, kernel, GPU ns)`` launches, 1 ms apart."""
    b = TraceBuilder(rank=0)
    if device is not None:
        b.extra_top_level["deviceProperties"] = [device]
    with b.step(1, ts=0, dur=len(kernels) * 1_000_000 + 100_000):
        for i, (op, kernel, ns) in enumerate(kernels):
            t = 1_000 + i * 1_000_000
            b.cpu_op(op, ts=t, dur=2_000)
            b.launch_kernel(kernel, cpu_ts=t + 500, cpu_dur=500, gpu_ts=t + 10_000,
                            gpu_dur=ns)
    folder = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
    return load_trace(b.write(folder / "rank-0.json").parent, progress=False,
                      cache=False).rank(0)


@pytest.mark.parametrize("name", [
    SCUDNN, "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
    "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(x)",
    "void precomputed_convolve_sgemm<float, 1024, 5, 5, 4, 3, 3, 1, false>(x)",
    WINOGRAD_DATA,
    "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_"
    "warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
    "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(x)",
    "igemm_fwd_gtcx3_nhwc_fp32_bx0_ex1_bt256x32x4_wt64x32x1_ws1x1_wr2x1_ta1x1x8x1",
])
def test_fp32_convolution_names(name: str) -> None:
    assert fp32_conv(name) and fp32_matrix(name)


@pytest.mark.parametrize("name", [
    "_5x_cudnn_ampere_fp16_scudnn_fp16_128x32_relu_small_nn_v1",  # fp16 in and out
    TENSOR_CONV,
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16",
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt256x32x4",
    "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true>(x)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(x)",
])
def test_not_fp32_convolution_names(name: str) -> None:
    assert not fp32_conv(name)


def test_t4_fp32_convolutions_are_named_with_fp16_advice(tmp_path: Path) -> None:
    """Three fp32 cuDNN convolutions of 400 µs and a Winograd product (``volta_sgemm``
    launched by ``aten::cudnn_convolution``) of 100 µs on a T4: 1.3 ms of convolutions,
    a 650 µs claim, fp16 advice (the T4 has no TF32) replayed as ``dtype:fp16``."""
    conv = "aten::cudnn_convolution"
    rt = _rank(tmp_path, T4, [(conv, SCUDNN, 400_000), (conv, SCUDNN, 400_000),
                              (conv, WINOGRAD_DATA, 400_000),
                              (conv, "volta_sgemm_64x64_nn", 100_000)])
    (f,) = check_fp32_gemm(rt, None)
    assert f.est_saving_ns == 650_000
    assert "4 fp32 convolution kernels without tensor cores ran 1.300 ms" in f.evidence
    assert "launched by aten::cudnn_convolution ×4" in f.evidence
    assert f.advice == kernel_rules.CONV_FP16_ADVICE
    assert change_for("fp32_gemm", [0], advice=f.advice) == "dtype:fp16"


def test_t4_convolutions_on_tensor_cores_give_nothing(tmp_path: Path) -> None:
    """The twin: the same convolutions in fp16 on the tensor cores."""
    conv = "aten::cudnn_convolution"
    rt = _rank(tmp_path, T4, [(conv, TENSOR_CONV, 400_000)] * 3)
    assert check_fp32_gemm(rt, None) == []


def test_ampere_convolutions_get_bf16_and_gemms_keep_theirs(tmp_path: Path) -> None:
    """On an A100 fp32 convolutions get the bf16 advice (cuDNN may pick fp32 kernels with
    TF32 allowed), replayed as ``dtype:bf16``; where GEMMs hold most of the fp32 time the
    GEMM advice stays, ending with the channels_last sentence, and the evidence gives
    each kind's time."""
    conv = ("aten::cudnn_convolution", "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
            300_000)
    (f,) = check_fp32_gemm(_rank(tmp_path, A100, [conv]), None)
    assert f.advice == kernel_rules.CONV_BF16_ADVICE
    assert change_for("fp32_gemm", [0], advice=f.advice) == "dtype:bf16"
    gemm = ("aten::mm", "ampere_sgemm_128x64_nn", 500_000)
    (f,) = check_fp32_gemm(_rank(tmp_path, A100, [conv, gemm]), None)
    assert "(convolutions 300.0 µs, GEMMs 500.0 µs)" in f.evidence
    assert f.advice == kernel_rules.FP32_ADVICE + " " + kernel_rules.CHANNELS_LAST_NOTE
    assert change_for("fp32_gemm", [0], advice=f.advice) == "dtype:tf32"


def test_no_tensor_cores_no_finding(tmp_path: Path) -> None:
    """A GTX 1050 Ti (Pascal, compute capability 6.1) has no tensor cores: its fp32 GEMMs
    and convolutions have nowhere faster to go. Its twin, the same work on a T4, fires."""
    work = [("aten::mm", "maxwell_sgemm_128x64_nn", 400_000),
            ("aten::cudnn_convolution", SCUDNN, 400_000)]
    pascal = _rank(tmp_path, GTX1050TI, work)
    assert tensor_cores(pascal) is False
    assert check_fp32_gemm(pascal, None) == []
    turing = _rank(tmp_path, T4, work)
    assert tensor_cores(turing) is True
    (f,) = check_fp32_gemm(turing, None)
    assert f.est_saving_ns == 400_000


def test_tensor_cores_unknown_without_an_nvidia_name(tmp_path: Path) -> None:
    rt = _rank(tmp_path, {"id": 0, "name": "AMD Instinct MI250X", "computeMajor": 9},
               [("aten::mm", "volta_sgemm_64x64_nn", 100_000)])
    assert tensor_cores(rt) is None
    assert tensor_cores(_rank(tmp_path, None, [("aten::mm", "x", 1_000)])) is None


def test_the_replayed_saving_says_what_dtype_changes(tmp_path: Path) -> None:
    """A replayed ``dtype:`` saving may hold more than the finding's own kernels (fp32
    elementwise work at half its time): the evidence says what the replay changed."""
    from hta.trace_analysis import TraceAnalysis

    conv = ("aten::cudnn_convolution", "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
            600_000)
    rt = _rank(tmp_path, A100, [conv, conv, conv])
    ta = TraceAnalysis(trace_dir=str(tmp_path / "case0"), cache=False, progress=False)
    assert rt.rank == 0
    row = ta.get_findings().set_index("rule").loc["fp32_gemm"]
    assert row["change"] == "dtype:bf16" and row["saving_source"] == "replay"
    assert ("the replay runs every fp32 GEMM and convolution at the bf16 rate and every "
            "fp32 elementwise kernel in half its time") in row["evidence"]
