"""Performance models: FLOPs and bytes moved by one operator call, from its shapes.

Each model takes the parsed :class:`~hta.analysis.perf.inputs.Inputs` of a call and
returns a :class:`Work` (or None when the shapes do not fit the operator's signature).
The formulas and their derivations are in ``docs/analyses/performance.md``; the
convention throughout: a multiply-add is 2 FLOPs, bytes are the tensors read once plus
the outputs written once (the minimum traffic to DRAM; caches only lower it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hta.analysis.perf.inputs import FLOAT_KEYS, Inputs, numel


@dataclass(frozen=True)
class Work:
    """What one call does: ``flops``, ``bytes`` moved, the peak-rate key of the device
    table it is compared with (``fp32``, ``bf16``, ``tf32``, ...) and whether that rate is
    a matrix (tensor-core) rate or the vector rate."""

    flops: float
    bytes: float
    peak_key: str
    matrix: bool


Model = Callable[[Inputs], "Work | None"]


def _float_key(x: Inputs, *args: int) -> str:
    """The peak key of the first floating-point argument among ``args`` (``fp32`` when
    none is recorded)."""
    for i in args:
        k = x.key(i)
        if k in FLOAT_KEYS:
            return k
    return "fp32"


def matrix_key(key: str) -> str:
    """The peak a matrix op of this element type is judged against: fp32 products run
    on TF32 tensor cores where allowed (cuDNN by default, matmul with
    ``torch.backends.cuda.matmul.allow_tf32`` / ``set_float32_matmul_precision``), so
    fp32 is judged against the TF32 roof (parts without TF32 fall back to their fp32
    matrix or vector rate); other types against their own. A call whose kernels ran
    another math (SIMT fp32 GEMMs) is judged by that math instead:
    :mod:`hta.analysis.perf.kernel_math`."""
    return "tf32" if key == "fp32" else key


def _out_itemsize(x: Inputs, i: int) -> float:
    """Bytes per element of an output of the type of argument ``i``; an fp8/fp4 GEMM's
    output is taken as 2 bytes (bf16), its usual ``out_dtype``."""
    return 2.0 if x.key(i) in ("fp8", "fp4") else x.itemsize(i)


def _gemm(x: Inputs, a: int, b: int, extra: tuple[int, ...] = ()) -> Work | None:
    """``a @ b`` with batch dims broadcast: 2·B·M·N·K FLOPs; bytes A + B + C (+ extra
    tensors such as a bias)."""
    sa, sb = x.shape(a), x.shape(b)
    if sa is None or sb is None or not sa or not sb:
        return None
    ma = (1,) + sa if len(sa) == 1 else sa  # a vector is a 1-row matrix
    mb = sb + (1,) if len(sb) == 1 else sb  # ... and a 1-column one on the right
    m, k = ma[-2], ma[-1]
    k2, n = mb[-2], mb[-1]
    if k != k2:
        return None
    batch = _broadcast(ma[:-2], mb[:-2])
    if batch is None:
        return None
    bsz = numel(batch)
    flops = 2.0 * bsz * m * n * k
    out = bsz * m * n * _out_itemsize(x, a)
    moved = x.nbytes(a) + x.nbytes(b) + out + sum(x.nbytes(i) for i in extra)
    return Work(flops, moved, matrix_key(_float_key(x, a, b)), True)


def _broadcast(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcasting of two shapes (None when they do not broadcast)."""
    n = max(len(p), len(q))
    p, q = (1,) * (n - len(p)) + p, (1,) * (n - len(q)) + q
    out = []
    for u, v in zip(p, q):
        if u != v and 1 not in (u, v):
            return None
        out.append(max(u, v))
    return tuple(out)


def mm(x: Inputs) -> Work | None:
    """``mm(a, b)``, ``bmm(a, b)``, ``matmul(a, b)``, ``_scaled_mm(a, b, ...)``."""
    return _gemm(x, 0, 1)


def addmm(x: Inputs) -> Work | None:
    """``addmm(bias, a, b)``, ``baddbmm(c, a, b)``: the product, plus reading the
    added tensor (its additions, M·N, are not counted: under 1/K of the product)."""
    return _gemm(x, 1, 2, extra=(0,))


def grouped_mm(x: Inputs) -> Work | None:
    """``_grouped_mm(a, b, offs, ...)``, ``_scaled_grouped_mm`` (MoE expert GEMMs): with
    a [T, K] and b [E, K, N] each of the T tokens is multiplied by its expert's K×N
    matrix, 2·T·K·N FLOPs, output [T, N]; with a [M, T] and b [T, N] (the weight
    gradient) the T tokens are split among the E groups of ``offs``, 2·M·T·N FLOPs, output
    [E, M, N]; a [E, M, K] and b [E, K, N] is a batched product. Bytes: a, b, output."""
    sa, sb = x.shape(0), x.shape(1)
    if sa is None or sb is None:
        return None
    size = _out_itemsize(x, 0)
    if len(sa) == 2 and len(sb) == 3 and sa[1] == sb[1]:
        (t, k), n = sa, sb[2]
        flops, out = 2.0 * t * k * n, t * n * size
    elif len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0] and x.shape(2):
        (m, t), n = sa, sb[1]
        flops, out = 2.0 * m * t * n, numel(x.shape(2)) * m * n * size  # type: ignore[arg-type]
    elif len(sa) == 3 and len(sb) == 3:
        return _gemm(x, 0, 1)
    else:
        return None
    return Work(flops, x.nbytes(0) + x.nbytes(1) + out, matrix_key(_float_key(x, 0, 1)),
                True)


def linear(x: Inputs) -> Work | None:
    """``linear(x[..., K], w[N, K], bias?)``: M = product of x's leading dims."""
    sx, sw = x.shape(0), x.shape(1)
    if sx is None or sw is None or len(sw) != 2 or not sx or sx[-1] != sw[1]:
        return None
    m, k, n = numel(sx[:-1]), sx[-1], sw[0]
    out = m * n * x.itemsize(0)
    moved = x.nbytes(0) + x.nbytes(1) + x.nbytes(2) + out
    return Work(2.0 * m * n * k, moved, matrix_key(_float_key(x, 0, 1)), True)


def _elementwise(x: Inputs, flops_per_element: float, reads: int | None = None,
                 outputs: int = 1, broadcast: bool = True) -> Work | None:
    """An op over the broadcast shape of its tensor inputs (the first tensor's shape
    when not ``broadcast``: norms, whose parameters are per channel): ``flops_per_element``
    per output element; bytes = every tensor input read once (the first ``reads``
    arguments when given) + ``outputs`` outputs of the first input's type written once."""
    args = range(len(x.dims) if reads is None else min(reads, len(x.dims)))
    shapes = [s for i in args if (s := x.shape(i)) is not None]
    if not shapes:
        return None
    out_shape: tuple[int, ...] | None = shapes[0]
    for s in shapes[1:] if broadcast else ():
        out_shape = _broadcast(out_shape, s) if out_shape is not None else None
    if out_shape is None:
        return None
    first = next(i for i in args if x.shape(i) is not None)
    n = numel(out_shape)
    moved = sum(x.nbytes(i) for i in args) + outputs * n * x.itemsize(first)
    return Work(flops_per_element * n, moved, "fp32", False)


def unary_or_binary(x: Inputs) -> Work | None:
    """Elementwise arithmetic and activations: 1 FLOP per output element."""
    return _elementwise(x, 1.0)


def layer_norm(x: Inputs) -> Work | None:
    """``native_layer_norm(x, shape, w, b, eps)``, ``batch_norm`` and friends: 8 FLOPs
    per element (mean 1, variance 3, normalise 2, affine 2); reads x (+ w, b), writes y."""
    return _elementwise(x, 8.0, broadcast=False)


def layer_norm_backward(x: Inputs) -> Work | None:
    """``native_layer_norm_backward(dy, x, shape, mean, rstd, w, b, mask)``: 13 FLOPs per
    element; reads dy, x (+ small tensors), writes dx."""
    return _elementwise(x, 13.0, broadcast=False)


def rms_norm(x: Inputs) -> Work | None:
    """``_fused_rms_norm(x, shape, w, eps)``, ``rms_norm``: 4 FLOPs per element (square
    and sum 2, scale 1, weight 1); reads x (+ w), writes y."""
    return _elementwise(x, 4.0, broadcast=False)


def rms_norm_backward(x: Inputs) -> Work | None:
    """``_fused_rms_norm_backward(dy, x, shape, rstd, w, mask)``: 8 FLOPs per element."""
    return _elementwise(x, 8.0, broadcast=False)


def softmax(x: Inputs) -> Work | None:
    """``_softmax(x, dim, half_to_float)``: 5 FLOPs per element (max, subtract, exp,
    sum, divide); reads x, writes y."""
    return _elementwise(x, 5.0, reads=1)


def softmax_backward(x: Inputs) -> Work | None:
    """``_softmax_backward_data(dy, y, dim, dtype)``: dx = y·(dy − Σ dy·y), 4 FLOPs per
    element; reads dy and y, writes dx."""
    return _elementwise(x, 4.0, reads=2)


def embedding(x: Inputs) -> Work | None:
    """``embedding(weight[V, D], indices[...])``: no FLOPs; reads the indices and the
    gathered rows (numel(indices)·D elements), writes as many."""
    sw, si = x.shape(0), x.shape(1)
    if sw is None or si is None or len(sw) != 2:
        return None
    rows = numel(si) * sw[1] * x.itemsize(0)
    return Work(0.0, x.nbytes(1) + 2.0 * rows, "fp32", False)


def embedding_backward(x: Inputs) -> Work | None:
    """``embedding_dense_backward(dy[..., D], indices, V, ...)``: one add per element of
    dy; reads dy and indices, writes the V·D gradient (V from ``Concrete Inputs``, else
    only dy's rows are counted)."""
    sg, si = x.shape(0), x.shape(1)
    if sg is None or si is None or not sg:
        return None
    v = x.value(2)
    rows = v if isinstance(v, int) else numel(sg[:-1])
    written = rows * sg[-1] * x.itemsize(0)
    return Work(float(numel(sg)), x.nbytes(0) + x.nbytes(1) + written, "fp32", False)


def copy(x: Inputs) -> Work | None:
    """``copy_(dst, src)`` on the device (a copy over a host or peer link gets no model):
    no FLOPs; reads src, writes dst."""
    if x.shape(0) is None or x.shape(1) is None:
        return None
    return Work(0.0, x.nbytes(0) + x.nbytes(1), "fp32", False)


def reduction(x: Inputs) -> Work | None:
    """``sum``, ``mean``, ``amax``, ``norm`` ...: one FLOP per input element; bytes: the
    input read once (the output, at most as large and usually far smaller, is not
    counted: the reduced dims are a ``Concrete Inputs`` value)."""
    return _elementwise(x, 1.0, reads=1, outputs=0)


_UNARY_BINARY = (
    "add", "sub", "mul", "div", "rsub", "neg", "abs", "exp", "log", "log1p", "expm1",
    "pow", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "relu", "gelu", "silu", "sigmoid",
    "tanh", "hardtanh", "leaky_relu", "elu", "mish", "softplus", "clamp", "clamp_min",
    "clamp_max", "where", "masked_fill", "threshold", "threshold_backward",
    "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "addcmul",
    "addcdiv", "lerp", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "nan_to_num", "square", "erf", "sign", "hardswish",
)

#: Operator base name -> model (conv and attention are added by models_nn).
MODELS: dict[str, Model] = {
    **dict.fromkeys(("mm", "bmm", "matmul", "_scaled_mm", "mv", "dot"), mm),
    **dict.fromkeys(("addmm", "baddbmm", "_addmm_activation", "addmv", "addbmm"), addmm),
    "linear": linear,
    **dict.fromkeys(("_grouped_mm", "_scaled_grouped_mm"), grouped_mm),
    **dict.fromkeys(_UNARY_BINARY, unary_or_binary),
    **dict.fromkeys(("native_layer_norm", "layer_norm", "native_batch_norm",
                     "cudnn_batch_norm", "miopen_batch_norm", "_native_batch_norm_legit",
                     "_native_batch_norm_legit_no_training", "batch_norm",
                     "native_group_norm", "group_norm"), layer_norm),
    **dict.fromkeys(("native_layer_norm_backward", "native_batch_norm_backward",
                     "cudnn_batch_norm_backward", "miopen_batch_norm_backward",
                     "batch_norm_backward", "native_group_norm_backward"),
                    layer_norm_backward),
    **dict.fromkeys(("_fused_rms_norm", "rms_norm"), rms_norm),
    "_fused_rms_norm_backward": rms_norm_backward,
    **dict.fromkeys(("_softmax", "softmax", "_log_softmax", "log_softmax",
                     "_safe_softmax"), softmax),
    **dict.fromkeys(("_softmax_backward_data", "_log_softmax_backward_data"),
                    softmax_backward),
    "embedding": embedding,
    "copy": copy,
    **dict.fromkeys(("sum", "mean", "amax", "amin", "max", "min", "norm",
                     "linalg_vector_norm", "prod", "var", "std", "var_mean", "std_mean",
                     "logsumexp", "argmax", "argmin"), reduction),
    **dict.fromkeys(("embedding_dense_backward", "embedding_backward"), embedding_backward),
}


def fused_add_rms_norm(x: Inputs) -> Work | None:
    """vLLM ``_C::fused_add_rms_norm(x, residual, w, eps)``, in place: residual += x,
    then x = rms_norm(residual)·w: 5 FLOPs per element (add 1, RMS norm 4); reads x,
    residual, w, writes x and residual."""
    return _elementwise(x, 5.0, reads=3, outputs=2, broadcast=False)


def rms_norm_out(x: Inputs) -> Work | None:
    """vLLM ``_C::rms_norm(out, x, w, eps)``: 4 FLOPs per element; reads x and w,
    writes out (the first argument, already counted as a tensor read: not added twice)."""
    sx = x.shape(1)
    if sx is None:
        return None
    n = numel(sx)
    return Work(4.0 * n, 2.0 * n * x.itemsize(1) + x.nbytes(2), "fp32", False)


def act_and_mul(x: Inputs) -> Work | None:
    """vLLM ``_C::silu_and_mul(out, x)`` (and gelu variants): x is [..., 2d], out
    [..., d]: 2 FLOPs per output element (activation, product); reads x, writes out."""
    si = x.shape(1)
    if si is None or not si or si[-1] % 2:
        return None
    n_out = numel(si) // 2
    return Work(2.0 * n_out, x.nbytes(1) + n_out * x.itemsize(1), "fp32", False)


#: Models of operators outside ``aten::``, by full name.
CUSTOM_MODELS: dict[str, Model] = {
    "_C::fused_add_rms_norm": fused_add_rms_norm,
    "_C::rms_norm": rms_norm_out,
    **dict.fromkeys(("_C::silu_and_mul", "_C::gelu_and_mul", "_C::gelu_tanh_and_mul"),
                    act_and_mul),
}
