"""Performance models of convolution and fused attention (see ``models`` for the
conventions and ``docs/analyses/performance.md`` for the derivations)."""

from __future__ import annotations

from dataclasses import dataclass

from hta.analysis.perf.inputs import Inputs, numel
from hta.analysis.perf.models import Model, Work, matrix_key


@dataclass(frozen=True)
class ConvArgs:
    """Where a convolution operator keeps its arguments (None: not an argument)."""

    bias: int | None
    stride: int
    padding: int
    dilation: int
    transposed: int | bool | None
    output_padding: int | None
    groups: int


CONV_SIGNATURES: dict[str, ConvArgs] = {
    "convolution": ConvArgs(2, 3, 4, 5, 6, 7, 8),
    "_convolution": ConvArgs(2, 3, 4, 5, 6, 7, 8),
    "conv1d": ConvArgs(2, 3, 4, 5, None, None, 6),
    "conv2d": ConvArgs(2, 3, 4, 5, None, None, 6),
    "conv3d": ConvArgs(2, 3, 4, 5, None, None, 6),
    "cudnn_convolution": ConvArgs(None, 3, 2, 4, None, None, 5),
    "cudnn_convolution_transpose": ConvArgs(None, 4, 2, 5, True, 3, 6),
    "miopen_convolution": ConvArgs(2, 4, 3, 5, None, None, 6),
}


def _per_dim(value: object, n: int) -> list[int] | None:
    """A stride/padding/dilation value as one int per spatial dim."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return list(value) * n if len(value) == 1 else list(value)
    return None


def _conv_key(x: Inputs) -> str:
    """The peak key of a convolution or attention (see ``models.matrix_key``)."""
    return matrix_key(x.key(0) or "fp32")


def _output_spatial(sp: tuple[int, ...], k: tuple[int, ...], x: Inputs, sig: ConvArgs,
                    transposed: bool) -> list[int] | None:
    n = len(sp)
    stride, dil = _per_dim(x.value(sig.stride), n), _per_dim(x.value(sig.dilation), n)
    pad_value = x.value(sig.padding)
    if pad_value == "valid":
        pad_value = 0
    if pad_value == "same":
        return list(sp)
    pad = _per_dim(pad_value, n)
    if stride is None or dil is None or pad is None:
        return None
    if transposed:
        op = _per_dim(x.value(sig.output_padding), n) if sig.output_padding else [0] * n
        op = op or [0] * n
        return [(i - 1) * s - 2 * p + d * (kk - 1) + o + 1
                for i, kk, s, p, d, o in zip(sp, k, stride, pad, dil, op)]
    return [(i + 2 * p - d * (kk - 1) - 1) // s + 1
            for i, kk, s, p, d in zip(sp, k, stride, pad, dil)]


def conv_forward(base: str) -> Model:
    """Model of a forward convolution: 2·N·prod(out)·numel(weight) FLOPs for the direct
    form (each output position of each image is a dot product of length Cin/g·prod(k) per
    output channel, Cout·Cin/g·prod(k) = numel(weight)); a transposed convolution is the
    backward-data of the direct one, 2·N·prod(in)·numel(weight). Bytes: input, weight,
    bias, output."""
    sig = CONV_SIGNATURES[base]

    def model(x: Inputs) -> Work | None:
        si, sw = x.shape(0), x.shape(1)
        if si is None or sw is None or len(si) < 3 or len(sw) != len(si):
            return None
        t = sig.transposed if isinstance(sig.transposed, bool) else (
            bool(x.value(sig.transposed)) if sig.transposed is not None else False)
        out_sp = _output_spatial(si[2:], sw[2:], x, sig, t)
        groups = x.value(sig.groups)
        if out_sp is None or min(out_sp) <= 0 or not isinstance(groups, int):
            return None
        direct_positions = numel(si[2:]) if t else numel(tuple(out_sp))
        flops = 2.0 * si[0] * direct_positions * numel(sw)
        cout = sw[1] * groups if t else sw[0]
        out = si[0] * cout * numel(tuple(out_sp)) * x.itemsize(0)
        bias = x.nbytes(sig.bias) if sig.bias is not None else 0.0
        return Work(flops, x.nbytes(0) + x.nbytes(1) + bias + out, _conv_key(x), True)

    return model


def conv_backward(x: Inputs) -> Work | None:
    """``convolution_backward(dy, x, w, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask)``: each of the input and weight gradients costs
    one forward (2·N·prod(direct output)·numel(w)), as ``output_mask`` asks (both when it
    was not recorded); the bias gradient is a sum over dy (numel(dy) FLOPs). Bytes: dy, x,
    w read, the asked gradients written."""
    sg, si, sw = x.shape(0), x.shape(1), x.shape(2)
    if sg is None or si is None or sw is None or len(si) < 3:
        return None
    mask = x.value(10)
    mask = mask if isinstance(mask, list) and len(mask) == 3 else [True, True, True]
    mask = [bool(m) if not isinstance(m, str) else m.lower() == "true" for m in mask]
    transposed = bool(x.value(7))
    positions = numel(si[2:]) if transposed else numel(sg[2:])
    one = 2.0 * si[0] * positions * numel(sw)
    flops = one * (mask[0] + mask[1]) + (numel(sg) if mask[2] else 0)
    moved = x.nbytes(0) + x.nbytes(1) + x.nbytes(2)
    moved += mask[0] * x.nbytes(1) + mask[1] * x.nbytes(2)
    return Work(flops, moved, _conv_key(x), True)


@dataclass(frozen=True)
class AttnArgs:
    """Where an attention operator keeps query/key/value, their layout (``BHLD`` or
    ``BLHD``), its causal argument (a bool, or xFormers' mask type: 0 none, 1 causal
    from the top left, 2 from the bottom right) and whether it is a backward."""

    q: int
    layout: str
    causal: int
    mask_type: bool
    backward: bool


ATTN_SIGNATURES: dict[str, AttnArgs] = {
    "scaled_dot_product_attention": AttnArgs(0, "BHLD", 5, False, False),
    "_scaled_dot_product_flash_attention": AttnArgs(0, "BHLD", 4, False, False),
    "_scaled_dot_product_flash_attention_backward": AttnArgs(1, "BHLD", 11, False, True),
    "_scaled_dot_product_efficient_attention": AttnArgs(0, "BHLD", 6, False, False),
    "_scaled_dot_product_efficient_attention_backward": AttnArgs(1, "BHLD", 11, False, True),
    "_scaled_dot_product_cudnn_attention": AttnArgs(0, "BHLD", 6, False, False),
    "_scaled_dot_product_cudnn_attention_backward": AttnArgs(1, "BHLD", 14, False, True),
    "_flash_attention_forward": AttnArgs(0, "BLHD", 8, False, False),
    "_flash_attention_backward": AttnArgs(1, "BLHD", 11, False, True),
    "_efficient_attention_forward": AttnArgs(0, "BLHD", 9, True, False),
    "_efficient_attention_backward": AttnArgs(1, "BLHD", 14, True, True),
}

#: Backward FLOPs over forward FLOPs: the backward recomputes Q·Kᵀ and does four more
#: products of the same size (dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q): 5 / 2.
BACKWARD_RATIO = 2.5


def attended_pairs(lq: int, lk: int, causal: str) -> int:
    """Number of (query, key) pairs a mask keeps: all ``lq·lk``; ``top_left`` keeps key j
    for query i when j ≤ i; ``bottom_right`` when j ≤ i + lk − lq (a closed form of
    Σᵢ clamp(i + 1 + offset, 0, lk))."""
    if causal == "none":
        return lq * lk
    offset = 0 if causal == "top_left" else lk - lq
    total = 0
    # rows where the count grows by one per row, then rows where it is capped at lk
    first_full = max(0, min(lq, lk - offset))  # rows i < first_full have i+1+offset < lk+1
    start = max(0, -offset)  # rows i < start keep nothing (i + 1 + offset <= 0)
    if first_full > start:
        a, b = start + 1 + offset, first_full + offset  # counts over rows start..full-1
        total += (a + b) * (first_full - start) // 2
    total += max(0, lq - max(first_full, start)) * lk
    return total


def _causal_kind(x: Inputs, sig: AttnArgs) -> str | None:
    value = x.value(sig.causal)
    if sig.mask_type:
        return {0: "none", 1: "top_left", 2: "bottom_right"}.get(value)
    return None if value is None or not isinstance(value, bool) else (
        "top_left" if value else "none")


def attention(base: str) -> Model:
    """Model of fused attention: forward 2·B·H·pairs·(D + Dv) FLOPs (Q·Kᵀ and P·V, pairs
    the attended (query, key) pairs), backward 2.5× that; bytes: q, k, v read and the
    output written (backward: q, k, v, out and dO read, dq, dk, dv written). Needs the
    causal flag from ``Concrete Inputs``; variable-length (3-D) inputs get no model."""
    sig = ATTN_SIGNATURES[base]

    def model(x: Inputs) -> Work | None:
        sq, sk, sv = (x.shape(sig.q + i) for i in range(3))
        if sq is None or sk is None or sv is None or not len(sq) == len(sk) == len(sv) == 4:
            return None
        causal = _causal_kind(x, sig)
        if causal is None:
            return None
        if sig.layout == "BHLD":
            (b, h, lq, d), lk, dv = sq, sk[2], sv[3]
        else:
            (b, lq, h, d), lk, dv = sq, sk[1], sv[3]
        flops = 2.0 * b * h * attended_pairs(lq, lk, causal) * (d + dv)
        qkv = x.nbytes(sig.q) + x.nbytes(sig.q + 1) + x.nbytes(sig.q + 2)
        out = b * h * lq * dv * x.itemsize(sig.q)
        if sig.backward:
            return Work(BACKWARD_RATIO * flops, 2 * qkv + 2 * out, _conv_key(x_q(x, sig)),
                        True)
        return Work(flops, qkv + out, _conv_key(x_q(x, sig)), True)

    return model


def x_q(x: Inputs, sig: AttnArgs) -> Inputs:
    """The inputs seen from the query argument (for its element type)."""
    return Inputs(x.dims[sig.q:], x.types[sig.q:], x.concrete[sig.q:])


NN_MODELS: dict[str, Model] = {
    **{base: conv_forward(base) for base in CONV_SIGNATURES},
    "convolution_backward": conv_backward,
    **{base: attention(base) for base in ATTN_SIGNATURES},
}
