"""Performance models: known answers and cross-checks against independent derivations."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from hta.analysis.perf.inputs import parse_inputs
from hta.analysis.perf.models_nn import attended_pairs
from hta.analysis.perf.registry import work_of


def call(op: str, dims: list, types: list, concrete: list | None = None):  # noqa: ANN201
    x = parse_inputs(json.dumps(dims), json.dumps(types), json.dumps(concrete or []))
    return work_of(op, x)


def test_gemm_known_answers() -> None:
    w = call("aten::mm", [[64, 32], [32, 16]], ["float", "float"])
    assert w.flops == 2 * 64 * 16 * 32
    assert w.bytes == 4 * (64 * 32 + 32 * 16 + 64 * 16)
    assert (w.peak_key, w.matrix) == ("tf32", True)  # fp32 products: the TF32 roof
    w = call("aten::addmm", [[16], [64, 32], [32, 16], [], []],
             ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"])
    assert w.flops == 2 * 64 * 16 * 32 and w.peak_key == "bf16"
    assert w.bytes == 2 * (16 + 64 * 32 + 32 * 16 + 64 * 16)
    w = call("aten::bmm", [[8, 64, 32], [8, 32, 16]], ["c10::Half"] * 2)
    assert w.flops == 8 * 2 * 64 * 16 * 32
    w = call("aten::linear", [[4, 10, 32], [16, 32], [16]], ["float"] * 3)
    assert w.flops == 2 * 40 * 16 * 32
    w = call("aten::_scaled_mm", [[128, 64], [64, 256], [], []],
             ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"])
    assert w.peak_key == "fp8" and w.bytes == 128 * 64 + 64 * 256 + 2 * 128 * 256
    assert call("aten::mm", [[64, 32], [31, 16]], ["float", "float"]) is None


def test_grouped_mm_against_per_expert_sum() -> None:
    """MoE grouped GEMM: the sum over experts of 2·tokens_e·K·N, whatever the split."""
    tokens = [5, 0, 17, 10]  # tokens routed to each of 4 experts
    t, k, n = sum(tokens), 64, 32
    w = call("aten::_grouped_mm", [[t, k], [4, k, n], [4]],
             ["c10::BFloat16", "c10::BFloat16", "int"])
    assert w.flops == sum(2 * te * k * n for te in tokens) and w.peak_key == "bf16"
    assert w.bytes == 2 * (t * k + 4 * k * n + t * n)
    wg = call("aten::_grouped_mm", [[k, t], [t, n], [4]],
              ["c10::BFloat16", "c10::BFloat16", "int"])  # weight gradient
    assert wg.flops == w.flops and wg.bytes == 2 * (k * t + t * n + 4 * k * n)


@pytest.mark.parametrize(("a", "b"), [
    ((5, 3), (3, 7)), ((2, 5, 3), (3, 7)), ((4, 1, 5, 3), (2, 3, 7)), ((3,), (3, 7)),
    ((5, 3), (3,)), ((6, 2, 5, 3), (6, 2, 3, 4)),
])
def test_matmul_against_numpy(a: tuple, b: tuple) -> None:
    """FLOPs = 2 · (output elements) · K, the output shape from numpy's own matmul."""
    out = np.matmul(np.zeros(a), np.zeros(b))
    expected = 2 * out.size * a[-1]
    w = call("aten::matmul", [list(a), list(b)], ["float", "float"])
    assert w.flops == expected
    assert w.bytes == 4 * (np.prod(a) + np.prod(b) + out.size)


def _brute_conv_out(n_in: int, k: int, s: int, p: int, d: int) -> int:
    """Count the window positions that fit in the padded input, one by one."""
    count, o = 0, 0
    while o * s + d * (k - 1) <= n_in + 2 * p - 1:
        count, o = count + 1, o + 1
    return count


@pytest.mark.parametrize(("hw", "k", "s", "p", "d", "g"), [
    ((32, 32), (3, 3), 1, 1, 1, 1), ((224, 224), (7, 7), 2, 3, 1, 1),
    ((17, 9), (3, 1), 2, 0, 2, 4), ((8, 8), (1, 1), 1, 0, 1, 8),
])
def test_conv_forward_against_brute_force(hw: tuple, k: tuple, s: int, p: int, d: int,
                                          g: int) -> None:
    n, cin, cout = 2, 8, 16
    dims = [[n, cin, *hw], [cout, cin // g, *k], [cout], [], [], [], [], [], []]
    types = ["float", "float", "float"] + ["ScalarList"] * 3 + ["Scalar", "ScalarList",
                                                                  "Scalar"]
    conc = ["", "", "", f"[{s}, {s}]", f"[{p}, {p}]", f"[{d}, {d}]", "False", "[0, 0]",
            str(g)]
    w = call("aten::convolution", dims, types, conc)
    outs = [_brute_conv_out(i, kk, s, p, d) for i, kk in zip(hw, k)]
    macs = 0  # one MAC per (image, out channel, position, in channel of the group, tap)
    for _ in itertools.product(range(n), range(cout)):
        macs += int(np.prod(outs)) * (cin // g) * int(np.prod(k))
    assert w.flops == 2 * macs
    assert w.peak_key == "tf32"
    out_bytes = 4 * n * cout * int(np.prod(outs))
    assert w.bytes == 4 * (n * cin * np.prod(hw) + cout * cin // g * np.prod(k) + cout) \
        + out_bytes
    assert call("aten::convolution", dims, types) is None  # no Concrete Inputs: no model


def test_cudnn_convolution_and_backward() -> None:
    dims = [[2, 8, 16, 16], [4, 8, 3, 3], [], [], [], [], [], [], []]
    conc = ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"]
    types = ["c10::BFloat16"] * 2 + ["ScalarList"] * 3 + ["Scalar"] * 4
    fwd = call("aten::cudnn_convolution", dims, types, conc)
    assert fwd.flops == 2 * 2 * 4 * 16 * 16 * 8 * 9 and fwd.peak_key == "bf16"
    bdims = [[2, 4, 16, 16], [2, 8, 16, 16], [4, 8, 3, 3], [], [], [], [], [], [], [], []]
    btypes = ["c10::BFloat16"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList",
                                                           "Scalar", "ScalarList"]
    bconc = [""] * 3 + ["[4]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
                        "[True, True, False]"]
    bwd = call("aten::convolution_backward", bdims, btypes, bconc)
    assert bwd.flops == 2 * fwd.flops
    bconc[-1] = "[False, True, False]"
    assert call("aten::convolution_backward", bdims, btypes, bconc).flops == fwd.flops


@pytest.mark.parametrize(("lq", "lk"), [(1, 1), (5, 5), (3, 8), (8, 3), (128, 128)])
def test_attended_pairs_against_masks(lq: int, lk: int) -> None:
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    assert attended_pairs(lq, lk, "none") == lq * lk
    assert attended_pairs(lq, lk, "top_left") == int((j <= i).sum())
    assert attended_pairs(lq, lk, "bottom_right") == int((j <= i + lk - lq).sum())


def test_attention_forward_backward_and_layouts() -> None:
    b, h, lq, lk, d = 2, 8, 128, 128, 64
    q = [b, h, lq, d]
    types = ["c10::BFloat16"] * 3 + ["Scalar", "Scalar", "Scalar", "Scalar"]
    w = call("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], types,
             ["", "", "", "0.", "False", "False", ""])
    assert w.flops == 4 * b * h * lq * lk * d  # Q·Kᵀ and P·V, 2·L²·D each
    assert w.bytes == 2 * 4 * b * h * lq * d
    causal = call("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []],
                  types, ["", "", "", "0.", "True", "False", ""])
    assert causal.flops == 4 * b * h * (lq * (lq + 1) // 2) * d
    # the same problem in the [B, L, H, D] layout of _flash_attention_forward
    ql = [b, lq, h, d]
    fa = call("aten::_flash_attention_forward", [ql, ql, ql] + [[]] * 7,
              ["c10::BFloat16"] * 3 + [""] * 7,
              ["", "", "", "", "", "128", "128", "0.", "True", "False"])
    assert fa.flops == causal.flops
    bwd = call("aten::_flash_attention_backward", [ql] * 5 + [[]] * 7,
               ["c10::BFloat16"] * 5 + [""] * 7,
               [""] * 10 + ["0.", "True"])
    assert bwd.flops == 2.5 * causal.flops
    assert call("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []],
                types) is None  # causal flag not recorded


def test_pointwise_norm_softmax_embedding() -> None:
    w = call("aten::add_.Tensor", [[1024, 96, 15], [15], []], ["float", "float", "Scalar"])
    n = 1024 * 96 * 15
    assert w.flops == n and w.bytes == 4 * (n + 15 + n) and not w.matrix
    w = call("aten::relu", [[10, 10]], ["c10::Half"])
    assert w.flops == 100 and w.bytes == 2 * 200
    w = call("aten::native_layer_norm", [[1024, 512], [], [512], [512], []],
             ["float", "", "float", "float", "Scalar"])
    assert w.flops == 8 * 1024 * 512 and w.bytes == 4 * (2 * 1024 * 512 + 2 * 512)
    w = call("aten::native_batch_norm", [[8, 64, 7, 5], [64], [64], [64], [64], [], [], []],
             ["float"] * 5 + ["Scalar"] * 3)
    assert w.flops == 8 * 8 * 64 * 35
    w = call("aten::_softmax", [[32, 1000], [], []], ["float", "Scalar", "Scalar"])
    assert w.flops == 5 * 32000 and w.bytes == 4 * 2 * 32000
    w = call("aten::embedding", [[50000, 128], [16, 20]], ["float", "long int"])
    assert w.flops == 0 and w.bytes == 8 * 320 + 2 * 4 * 320 * 128
    w = call("aten::sum", [[1024, 40], [], [], []], ["float", "", "Scalar", ""])
    assert w.flops == 40960 and w.bytes == 4 * 40960
    n = 888 * 2880
    w = call("_C::fused_add_rms_norm", [[888, 2880], [888, 2880], [2880], []],
             ["c10::BFloat16"] * 3 + ["Scalar"])
    assert w.flops == 5 * n and w.bytes == 2 * (4 * n + 2880)
    w = call("_C::silu_and_mul", [[888, 1440], [888, 2880]], ["c10::BFloat16"] * 2)
    assert w.flops == 2 * 888 * 1440 and w.bytes == 2 * (888 * 2880 + 888 * 1440)
    assert call("aten::frobnicate", [[3]], ["float"]) is None
    assert call("aten::relu", [[]], [""]) is None  # no tensor recorded
