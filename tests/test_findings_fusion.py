"""The ``batchnorm_inference`` and ``unfused_attention`` findings.

Traces built by construction (:mod:`kineto_builder`): one inference pass (no ProfilerStep)
of convolutions with BatchNorm in training mode (cuDNN ``bn_fw_tr_*``), in inference mode
(``bn_fw_inf_*``), and the same with a backward pass (its twin: no finding); attention as
matmul, scale, softmax, matmul with known kernel times, its twins a classifier's softmax
over 2-d logits and a fused ``scaled_dot_product_attention``, and the attention call's
math backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kineto_builder import TraceBuilder

from hta.analysis.findings import find
from hta.analysis.findings import fusion as fusion_rules
from hta.analysis.findings.fusion import (
    ATTENTION_ADVICE,
    CAST_ADVICE,
    EXPLICIT,
    FALLBACK_ADVICE,
    FOLD_ADVICE,
    MATH_BACKEND,
    TRAIN_ADVICE,
    check_attention,
    check_batchnorm,
    check_casts,
    fused_away,
)
from hta.analysis.findings.roofline import RULES as ROOF_RULES
from hta.analysis.whatif.findings import NOT_MODELLED, change_for
from hta.job.load import load_trace
from hta.model.trace import Trace

RULES = fusion_rules.RULES
CONV = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32"
BN_TRAIN = "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>(x)"
BN_INFER = "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>(float, float)"
BN_BACKWARD = "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(x)"
RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)"
        "::launch_clamp_scalar(x)>(int)")
LAYERS = 4
CONV_NS, BN_NS, RELU_NS = 300_000, 100_000, 50_000
BN_DIMS = {"Input Dims": [[8, 64, 56, 56], [64], [64], [64], [64], [], [], [], []],
           "Input type": ["float"] * 5 + ["Scalar"] * 4}


def _layers(b: TraceBuilder, bn: str, t0: int) -> int:
    """``LAYERS`` × (conv, BatchNorm, ReLU), each launched inside its operator; the time
    after the last launch."""
    cpu, gpu = t0, t0 + 20_000
    for _ in range(LAYERS):
        for op, kernel, dur, args in (("aten::cudnn_convolution", CONV, CONV_NS, {}),
                                      ("aten::cudnn_batch_norm", bn, BN_NS, BN_DIMS),
                                      ("aten::clamp_min", RELU, RELU_NS, {})):
            b.cpu_op(op, ts=cpu, dur=3_000, **args)
            b.launch_kernel(kernel, cpu_ts=cpu + 1_000, cpu_dur=1_000, gpu_ts=gpu, gpu_dur=dur)
            cpu, gpu = cpu + 5_000, gpu + dur + 1_000
    return max(cpu, gpu)


def build_cnn(tmp_path: Path, bn: str = BN_TRAIN, backward: bool = False) -> Trace:
    """One inference call of a CNN (or, with ``backward``, one training call)."""
    b = TraceBuilder(rank=0)
    b.annotation("model_inference", ts=0, dur=5_000_000)
    end = _layers(b, bn, 1_000)
    if backward:
        b.cpu_op("autograd::engine::evaluate_function: CudnnBatchNormBackward0", ts=end,
                 dur=20_000)
        b.launch_kernel(BN_BACKWARD, cpu_ts=end + 1_000, cpu_dur=1_000, gpu_ts=end + 30_000,
                        gpu_dur=BN_NS)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def _rule(trace: Trace, rule: str, rules: Any = RULES):
    out = find(trace, rules=rules)
    return out[out["rule"] == rule]


# -- BatchNorm ------------------------------------------------------------------------------
def test_training_mode_batchnorm_in_an_inference_pass(tmp_path):
    trace = build_cnn(tmp_path)
    (finding,) = check_batchnorm(trace.rank(0), None)
    assert finding.subject == "training mode" and finding.advice == TRAIN_ADVICE
    assert finding.est_saving_ns == LAYERS * BN_NS
    assert finding.evidence.startswith(
        "4 BatchNorm kernels computed batch statistics (training mode) for 400.0 µs, 22.2% "
        "of the compute kernel time in the trace (no ProfilerStep) in a pass with no "
        "backward")
    assert "launched by aten::cudnn_batch_norm ×4 (400.0 µs; inputs [[8, 64, 56, 56]" \
        in finding.evidence
    assert finding.claim is not None and finding.claim.amount is None
    assert (finding.claim.end - finding.claim.start).tolist() == [BN_NS] * LAYERS
    rows = _rule(trace, "batchnorm_inference")
    assert len(rows) == 1
    assert round(rows.iloc[0]["est_saving(us)"]) == LAYERS * BN_NS // 1_000
    assert rows.iloc[0]["title"] == "BatchNorm in an inference pass"


def test_inference_batchnorm_not_folded(tmp_path):
    (finding,) = check_batchnorm(build_cnn(tmp_path, bn=BN_INFER).rank(0), None)
    assert finding.subject == "not folded" and finding.advice == FOLD_ADVICE
    assert finding.est_saving_ns == LAYERS * BN_NS
    assert "BatchNorm kernels ran in inference mode, not folded" in finding.evidence


def test_twin_with_a_backward_pass_gives_nothing(tmp_path):
    """Training: BatchNorm computes batch statistics on purpose."""
    assert check_batchnorm(build_cnn(tmp_path, backward=True).rank(0), None) == []


def test_roofline_leaves_the_batchnorm_kernels_to_the_rule(tmp_path):
    trace = build_cnn(tmp_path)
    rows = set(fused_away(trace.rank(0)).tolist())
    names = trace.rank(0).events["name"].to_numpy()
    symbols = trace.rank(0).symbols
    assert len(rows) == LAYERS and {symbols[names[r]] for r in rows} == {BN_TRAIN}
    below = _rule(trace, "ops_below_roof", rules=ROOF_RULES)
    assert not any("batch_norm" in s for s in below["subject"])


# -- attention ------------------------------------------------------------------------------
GEMM = "ampere_sgemm_128x64_tn"
DIV = ("void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, "
       "float, float, at::native::binary_internal::DivFunctor<float> >(x)>(int)")
SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, "
           "float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float "
           "const*, int)")
FLASH = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4>>(x)"
GEMM_NS, DIV_NS, SOFTMAX_NS = 400_000, 150_000, 250_000
SCORES = [[2, 16, 1024, 1024], [], []]


class _Clock:
    """CPU and GPU times moving forward as operators launch kernels."""

    def __init__(self, b: TraceBuilder) -> None:
        self.b, self.cpu, self.gpu = b, 10_000, 50_000

    def op(self, name: str, kernel: str | None = None, dur: int = 0, inner: str = "",
           **args: Any) -> None:
        """An operator (with ``inner`` nested in it) launching ``kernel``."""
        self.b.cpu_op(name, ts=self.cpu, dur=4_000, **args)
        if inner:
            self.b.cpu_op(inner, ts=self.cpu + 500, dur=3_000, **args)
        if kernel is not None:
            self.b.launch_kernel(kernel, cpu_ts=self.cpu + 1_000, cpu_dur=1_000,
                                 gpu_ts=self.gpu, gpu_dur=dur)
            self.gpu += dur + 1_000
        self.cpu += 6_000


def _attention(c: _Clock, scores: list | None, blocks: int = 2) -> None:
    """``blocks`` attention blocks; ``scores``: the recorded input dims of the softmax
    (None: no shapes recorded)."""
    dims = {} if scores is None else {"Input Dims": scores}
    for _ in range(blocks):
        c.op("aten::matmul", GEMM, GEMM_NS, inner="aten::bmm")
        c.op("aten::div", DIV, DIV_NS)
        c.op("aten::softmax", SOFTMAX, SOFTMAX_NS, inner="aten::_softmax", **dims)
        c.op("aten::matmul", GEMM, GEMM_NS, inner="aten::bmm")
        c.op("aten::linear", GEMM, GEMM_NS, inner="aten::addmm")


def build_attention(tmp_path: Path, scores: list = SCORES, shapes: bool = True) -> Trace:
    b = TraceBuilder(rank=0)
    c = _Clock(b)
    _attention(c, scores if shapes else None)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_explicit_attention_claims_its_score_kernels(tmp_path):
    (finding,) = check_attention(build_attention(tmp_path).rank(0), None)
    assert finding.subject == EXPLICIT and finding.advice == ATTENTION_ADVICE
    assert finding.est_saving_ns == 2 * (DIV_NS + SOFTMAX_NS)
    compute = 2 * (3 * GEMM_NS + DIV_NS + SOFTMAX_NS)
    assert finding.evidence.startswith(
        f"4 score kernels (scale, mask, softmax, dropout) of unfused attention ran for "
        f"800.0 µs, {100 * 800_000 / compute:.1f}% of the compute kernel time")
    assert ("around 2 softmax call(s) between batched matrix products (aten::softmax of "
            "[[2, 16, 1024, 1024], [], []])") in finding.evidence
    rows = _rule(build_attention(tmp_path / "again"), "unfused_attention")
    assert rows.iloc[0]["title"] == "Attention not fused"


def test_no_replay_models_these_fixes():
    """Their savings are GPU time, said so beside the finding."""
    for rule in ("batchnorm_inference", "unfused_attention", "dtype_casts"):
        assert rule in NOT_MODELLED and change_for(rule, [0]) == ""


def test_without_shapes_the_pattern_alone_decides(tmp_path):
    (finding,) = check_attention(build_attention(tmp_path, shapes=False).rank(0), None)
    assert finding.est_saving_ns == 2 * (DIV_NS + SOFTMAX_NS)


def test_twin_classifier_softmax_over_logits_gives_nothing(tmp_path):
    """A softmax over 2-d logits between matrix products is no attention."""
    trace = build_attention(tmp_path, scores=[[32, 1000], [], []])
    assert check_attention(trace.rank(0), None) == []


def test_twin_fused_attention_gives_nothing(tmp_path):
    b = TraceBuilder(rank=0)
    c = _Clock(b)
    for _ in range(2):
        c.op("aten::linear", GEMM, GEMM_NS, inner="aten::addmm")
        c.op("aten::scaled_dot_product_attention", FLASH, 2 * GEMM_NS,
             inner="aten::_scaled_dot_product_flash_attention")
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    assert check_attention(trace.rank(0), None) == []


def test_math_backend_of_sdpa(tmp_path):
    """``scaled_dot_product_attention`` running matmul, softmax, matmul inside: its
    softmax and scale kernels are claimed, the products are not."""
    b = TraceBuilder(rank=0)
    c = _Clock(b)
    for _ in range(2):
        start = c.cpu
        b.cpu_op("aten::scaled_dot_product_attention", ts=start, dur=30_000)
        b.cpu_op("aten::_scaled_dot_product_attention_math", ts=start + 100, dur=29_000)
        c.cpu = start + 1_000
        c.op("aten::bmm", GEMM, GEMM_NS)
        c.op("aten::mul", DIV, DIV_NS)
        c.op("aten::_softmax", SOFTMAX, SOFTMAX_NS)
        c.op("aten::bmm", GEMM, GEMM_NS)
        c.cpu = start + 32_000
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    (finding,) = check_attention(trace.rank(0), None)
    assert finding.subject == MATH_BACKEND and finding.advice == FALLBACK_ADVICE
    assert finding.est_saving_ns == 2 * (DIV_NS + SOFTMAX_NS)
    assert "inside aten::scaled_dot_product_attention (its math backend)" in finding.evidence


# -- dtype casts ------------------------------------------------------------------------------
CAST = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}>(x)")
HGEMM = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_tn"


def build_casts(tmp_path: Path, outer: str = "aten::_to_copy", backward: bool = False
                ) -> Trace:
    """Four casts of 100 µs (``aten::to`` > ``outer`` > ``aten::copy_`` launching a copy
    kernel), each before a GEMM of 300 µs; ``outer="aten::clone"`` makes them layout
    copies instead."""
    b = TraceBuilder(rank=0)
    cpu, gpu = 1_000, 20_000
    for _ in range(4):
        b.cpu_op("aten::to", ts=cpu, dur=8_000)
        b.cpu_op(outer, ts=cpu + 500, dur=7_000)
        b.cpu_op("aten::copy_", ts=cpu + 1_000, dur=5_000)
        b.launch_kernel(CAST, cpu_ts=cpu + 2_000, cpu_dur=1_000, gpu_ts=gpu, gpu_dur=100_000)
        b.cpu_op("aten::mm", ts=cpu + 10_000, dur=5_000)
        b.launch_kernel(HGEMM, cpu_ts=cpu + 11_000, cpu_dur=1_000, gpu_ts=gpu + 101_000,
                        gpu_dur=300_000)
        cpu, gpu = cpu + 20_000, gpu + 402_000
    if backward:
        b.cpu_op("autograd::engine::evaluate_function: MmBackward0", ts=cpu, dur=5_000)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_casts_in_an_inference_pass(tmp_path):
    (finding,) = check_casts(build_casts(tmp_path).rank(0), None)
    assert finding.est_saving_ns == 4 * 100_000 and finding.advice == CAST_ADVICE
    assert finding.evidence.startswith(
        "4 dtype conversion kernels (aten::_to_copy) ran for 400.0 µs, 25.0% of the compute "
        "kernel time")


def test_twin_layout_copies_are_no_casts(tmp_path):
    assert check_casts(build_casts(tmp_path, outer="aten::clone").rank(0), None) == []


def test_twin_casts_in_training_are_left_alone(tmp_path):
    """Autocast in training casts fp32 master weights on purpose."""
    assert check_casts(build_casts(tmp_path, backward=True).rank(0), None) == []
