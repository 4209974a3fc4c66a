"""Findings about work a fused inference graph removes: BatchNorm and unfused attention.

**A pass without backward.** Both BatchNorm subjects judge inference, so they fire only
on a rank whose analysed window holds no backward pass (:func:`runs_backward`: no event
there named after the autograd engine or a backward function or kernel, such as
``autograd::engine::evaluate_function``, ``AddmmBackward0``, ``bn_bw_``, ``*_bwd_*``).

``batchnorm_inference`` (per rank; subjects ``training mode`` and ``not folded``)
    A compute kernel of the analysis (:func:`~.kernel_common.in_steps`) is a *BatchNorm
    kernel* when its name is one (:data:`BN_TRAIN`, :data:`BN_INFER`) or its launching
    operator is a BatchNorm operator (:data:`BN_OP`). It runs in *training mode* when it,
    or another kernel its operator launched, computes batch statistics (:data:`BN_TRAIN`:
    cuDNN ``bn_fw_tr_*``, PyTorch's ``batch_norm_collect_statistics*``, MIOpen
    ``BatchNormFwdTrain*``); the others are inference BatchNorm (cuDNN ``bn_fw_inf_*``,
    MIOpen ``BatchNormFwdInfer*``, ``aten::_native_batch_norm_legit_no_training``).

    * *training mode* in a pass without backward: the model was not put in ``eval()``;
      every call computes the batch's statistics and overwrites the running ones (its
      outputs depend on the batch: a correctness problem too).
    * *not folded*: in inference a BatchNorm is an affine map that folds into the weights
      of the convolution or linear layer before it; its kernels need not run at all.

    **Saving** (GPU time, not replayed): the BatchNorm kernels' time, what the advice's
    end point (``eval()``, then folding) removes. A subject fires when its kernels take at
    least :data:`MIN_SHARE` of the compute kernel time.

``dtype_casts`` (per rank)
    In a pass without backward, the compute kernels launched by ``aten::_to_copy`` (the
    operator itself, or one around the innermost operator of the launch: ``.to(dtype)``,
    autocast's casts): dtype conversions, which autocast in inference makes for every
    weight at every call. **Saving** (GPU time, not replayed): their time, at most what
    converting the model once removes (casts at the boundaries of autocast regions may
    stay). Fires at :data:`MIN_SHARE` of the compute kernel time.

``unfused_attention`` (per rank; subjects ``matmul, softmax, matmul`` and ``SDPA math
backend``)
    *Explicit* (the first subject): an ``aten::softmax`` (or ``_softmax``, ``_safe_softmax``,
    ``_masked_softmax``) between two batched matrix products (:data:`GEMM_OP`) among
    the operators of its thread and parent: at most :data:`MAX_BEFORE` operators between
    the first product and the softmax, at most :data:`MAX_AFTER` between the softmax and
    the second; with recorded shapes, the softmax's input has at least 3 dimensions (the
    scores of several heads or queries, not a classifier's logits). *Math backend*: a
    softmax inside ``aten::scaled_dot_product_attention`` (its math backend ran).

    The *score kernels* are the compute kernels launched between the two products (scale,
    mask, softmax, dropout), or, for the math backend, those launched inside the
    attention call by operators other than the products. A fused attention kernel
    (``F.scaled_dot_product_attention``'s flash or memory-efficient backend) never writes
    the score matrix, so these kernels go; the products' arithmetic stays.

    **Saving** (GPU time, not replayed): the score kernels' time. A subject fires when they
    take at least :data:`MIN_SHARE` of the compute kernel time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hta.analysis.findings.base import Finding, FindingRule, analysis_window, link
from hta.analysis.findings.claims import Claim
from hta.analysis.findings.elementwise import chained_kernels
from hta.analysis.findings.fp64 import launched_by
from hta.analysis.findings.kernel_common import (
    Kernels,
    compute_kernels,
    cut,
    fmt_at,
    top_labels,
)
from hta.analysis.findings.layout import converted_away
from hta.analysis.findings.optimizer import unfused_optimizer_kernels
from hta.analysis.findings.rule_tools import (
    fmt_time,
    name_matches,
    runs_backward,
    step_text,
    step_tuple,
    steps_text,
    within_named,
)
from hta.analysis.names import short_name
from hta.analysis.rowmap import nearest_marked_ancestor
from hta.analysis.side_columns import side_slots
from hta.model.arrays import distinct
from hta.model.derived import derived
from hta.model.rules import KIND_CODE
from hta.model.trace import RankTrace

_CPU_OP = KIND_CODE["cpu_op"]

#: Least share of the compute kernel time a subject's kernels take to fire.
MIN_SHARE = 0.02
#: Kernels computing batch statistics: BatchNorm in training mode.
BN_TRAIN = re.compile(r"(?<![A-Za-z])bn_fw_tr_|batch_norm_collect_statistics"
                      r"|BatchNormFwdTrain")
#: Kernels of BatchNorm in inference mode.
BN_INFER = re.compile(r"(?<![A-Za-z])bn_fw_inf_|BatchNormFwdInfer")
#: BatchNorm operators (ATen), whose kernels are BatchNorm kernels whatever their name.
BN_OP = re.compile(r"^aten::(cudnn_batch_norm|miopen_batch_norm|native_batch_norm"
                   r"|_native_batch_norm_legit\w*|_batch_norm_with_update|batch_norm)$")
#: The inference-only BatchNorm operator.
BN_OP_INFER = re.compile(r"^aten::_native_batch_norm_legit_no_training$")
#: Softmax operators.
SOFTMAX_OP = re.compile(r"^aten::(softmax|_softmax|_safe_softmax|_masked_softmax"
                        r"|special_softmax)$")
#: Batched matrix products around an attention's softmax.
GEMM_OP = re.compile(r"^aten::(matmul|bmm|baddbmm|einsum)$")
#: Matrix-product operators whose kernels stay in a fused attention.
PRODUCT_OP = re.compile(r"^aten::(matmul|bmm|baddbmm|einsum|mm|addmm)$")
#: The fused attention entry point; a softmax inside it is its math backend.
SDPA_OP = re.compile(r"^aten::(scaled_dot_product_attention"
                     r"|_scaled_dot_product_attention_math\w*)$")
#: The ``unfused_attention`` subjects.
EXPLICIT, MATH_BACKEND = "matmul, softmax, matmul", "SDPA math backend"
#: Most operators between the first product and the softmax (scale, mask, casts).
MAX_BEFORE = 8
#: Most operators between the softmax and the second product (dropout, casts).
MAX_AFTER = 4


# -- BatchNorm ----------------------------------------------------------------------------
def batchnorm_modes(rt: RankTrace, k: Kernels) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel of ``k``: whether it is a BatchNorm kernel in training mode, and one in
    inference mode (module docstring)."""
    has_op = k.ops >= 0
    by_op = np.zeros(k.ops.size, dtype=bool)
    infer_op = np.zeros(k.ops.size, dtype=bool)
    by_op[has_op] = name_matches(rt, k.ops[has_op], BN_OP)
    infer_op[has_op] = name_matches(rt, k.ops[has_op], BN_OP_INFER)
    train_name = name_matches(rt, k.rows, BN_TRAIN)
    bn = by_op | train_name | name_matches(rt, k.rows, BN_INFER)
    # an operator that computed statistics in one of its kernels ran in training mode
    train_ops = distinct(k.ops[train_name & has_op])
    train = bn & (train_name | (has_op & np.isin(k.ops, train_ops)))
    train &= ~infer_op
    return train, bn & ~train


def check_batchnorm(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``batchnorm_inference`` findings of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    k = compute_kernels(rt, iterations, window)
    if k.total <= 0 or runs_backward(rt, window):
        return []
    train, infer = batchnorm_modes(rt, k)
    found = []
    for subject, hit, what, advice in (
            ("training mode", train, "computed batch statistics (training mode)",
             TRAIN_ADVICE),
            ("not folded", infer, "ran in inference mode, not folded into the layer before",
             FOLD_ADVICE)):
        time = int(k.dur[hit].sum())
        if time < MIN_SHARE * k.total:
            continue
        found.append(_kernel_finding(rt, k, hit, window, subject, advice,
                                     f"BatchNorm kernels {what}",
                                     " in a pass with no backward (no autograd backward "
                                     "function or backward kernel in the analysed window)"))
    return found


def _kernel_finding(rt: RankTrace, k: Kernels, hit: np.ndarray, window: tuple[int, int],
                    subject: str, advice: str, what: str, context: str) -> Finding:
    """A finding whose saving is the whole time of ``k``'s kernels where ``hit``."""
    dur, ts, step, ids = k.dur[hit], k.ts[hit], k.step[hit], k.ids[hit]
    time = int(dur.sum())
    longest = int(np.argmax(dur))
    evidence = (
        f"{int(hit.sum())} {what} for {fmt_time(time)}, {100 * time / k.total:.1f}% of the "
        f"compute kernel time in {steps_text(rt, step)}{context} (most: "
        f"{top_labels(rt, ids, dur)}; the longest, "
        f"{cut(short_name(rt.symbols[int(ids[longest])]))}, at "
        f"{fmt_at(rt, int(ts[longest]))}, {step_text(rt, int(step[longest]))}, "
        f"{fmt_time(int(dur[longest]))}; kernels table){launched_by(rt, k.ops[hit], dur)}.")
    return Finding((rt.rank,), step_tuple(step), evidence, time, window[1] - window[0],
                   subject=subject, advice=advice, claim=Claim(ts, ts + dur, None))


def fused_away(rt: RankTrace) -> np.ndarray:
    """The kernel rows this module's rules claim on the rank's whole analysed window (the
    BatchNorm kernels of a pass without backward, the score kernels of unfused attention),
    the chained elementwise kernels of ``elementwise_chains``, the layout conversions of
    ``layout_conversions`` and an unfused optimizer's kernels (``optimizer_passes``):
    ``ops_below_roof`` leaves them to these rules. Computed once per rank."""
    return derived(rt, "findings.fused_away", lambda: _fused_away(rt))


def _fused_away(rt: RankTrace) -> np.ndarray:
    window = analysis_window(rt, None)
    k = compute_kernels(rt, None, window)
    if k.total <= 0:
        return k.rows
    att = attention_kernels(rt, k)
    hit = att.explicit | att.fallback | np.isin(k.rows, chained_kernels(rt)) \
        | np.isin(k.rows, converted_away(rt)) | np.isin(k.rows, unfused_optimizer_kernels(rt))
    if not runs_backward(rt, window):
        hit |= cast_kernels(rt, k)
        train, infer = batchnorm_modes(rt, k)
        hit |= train | infer
    rows = k.rows[hit]
    rows.setflags(write=False)
    return rows


# -- dtype casts ---------------------------------------------------------------------------
#: The operator that converts a tensor to another dtype (``.to(dtype)``, autocast's casts).
CAST_OP = re.compile(r"^aten::_to_copy$")


def cast_kernels(rt: RankTrace, k: Kernels) -> np.ndarray:
    """Per kernel of ``k``: whether an ``aten::_to_copy`` launched it (the operator itself
    or one around the innermost operator of its launch): a dtype conversion."""
    return within_named(rt, k.ops, CAST_OP, (_CPU_OP,))


def check_casts(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``dtype_casts`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    k = compute_kernels(rt, iterations, window)
    if k.total <= 0 or runs_backward(rt, window):
        return []
    hit = cast_kernels(rt, k)
    if int(k.dur[hit].sum()) < MIN_SHARE * k.total:
        return []
    return [_kernel_finding(rt, k, hit, window, "", CAST_ADVICE,
                            "dtype conversion kernels (aten::_to_copy) ran",
                            " in a pass with no backward")]


# -- attention ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Attention:
    """Per kernel of the analysis: whether it is a score kernel of explicit attention, and
    of a math fallback; the number of attention blocks of each; an example softmax row."""

    explicit: np.ndarray
    fallback: np.ndarray
    blocks: tuple[int, int]
    examples: tuple[int, int]


def attention_kernels(rt: RankTrace, k: Kernels) -> Attention:
    """The score kernels of explicit attention and of the math fallback (module
    docstring)."""
    ev = rt.events
    ops = np.flatnonzero(ev["kind"].array.codes == _CPU_OP)
    explicit = np.zeros(k.rows.size, dtype=bool)
    fallback = np.zeros(k.rows.size, dtype=bool)
    if ops.size == 0 or k.rows.size == 0:
        return Attention(explicit, fallback, (0, 0), (-1, -1))
    parent = link(rt, "parent")
    soft = ops[name_matches(rt, ops, SOFTMAX_OP)]
    # the outermost softmax of each call (aten::softmax around aten::_softmax)
    is_soft = np.zeros(len(ev), dtype=bool)
    is_soft[soft] = True
    soft = soft[~is_soft[np.clip(parent[soft], 0, None)] | (parent[soft] < 0)]
    is_sdpa = np.zeros(len(ev), dtype=bool)
    is_sdpa[ops[name_matches(rt, ops, SDPA_OP)]] = True
    inside = nearest_marked_ancestor(parent, soft, is_sdpa)
    n_explicit, example_explicit = _mark_explicit(rt, ops, soft[inside < 0], k, explicit)
    calls = distinct(inside[inside >= 0])
    if calls.size:
        launcher = np.clip(k.ops, 0, None)
        under = np.isin(nearest_marked_ancestor(parent, launcher, is_sdpa), calls)
        product = name_matches(rt, launcher, PRODUCT_OP)
        fallback[:] = (k.ops >= 0) & under & ~product
    example_fallback = int(soft[inside >= 0][0]) if calls.size else -1
    return Attention(explicit, fallback, (n_explicit, int(calls.size)),
                     (example_explicit, example_fallback))


def _mark_explicit(rt: RankTrace, ops: np.ndarray, soft: np.ndarray, k: Kernels,
                   out: np.ndarray) -> tuple[int, int]:
    """Mark in ``out`` the kernels launched between the two products around each softmax
    of ``soft`` that sits between two (module docstring); the number of such softmaxes
    and the first of them (-1 none). Linear in the operators and kernels: the siblings
    come from one sort of the operators by thread, parent and start."""
    ev = rt.events
    parent, tid = link(rt, "parent"), ev["tid"].to_numpy()
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    gemm = np.zeros(len(ev), dtype=bool)
    gemm[ops[name_matches(rt, ops, GEMM_OP)]] = True
    order = ops[np.lexsort((ts[ops], parent[ops], tid[ops]))]  # siblings side by side
    at_of = np.full(len(ev), -1, dtype=np.int64)
    at_of[order] = np.arange(order.size)
    change = np.r_[True, (tid[order][1:] != tid[order][:-1])
                   | (parent[order][1:] != parent[order][:-1])]
    group = np.cumsum(change) - 1
    first_of, last_of = np.flatnonzero(change), np.r_[np.flatnonzero(change)[1:], order.size]
    dims = _input_dims_of(rt)
    spans: list[tuple[int, int, int]] = []
    first = -1
    for s in soft.tolist():
        if not _batched_scores(dims(s)):
            continue
        at = int(at_of[s])
        g0, g1 = int(first_of[group[at]]), int(last_of[group[at]])
        before = [r for r in order[max(at - MAX_BEFORE - 1, g0):at].tolist() if gemm[r]]
        after = [r for r in order[at + 1:min(at + MAX_AFTER + 2, g1)].tolist() if gemm[r]]
        if before and after:
            spans.append((int(tid[s]), int(end[before[-1]]), int(ts[after[0]])))
            first = s if first < 0 else first
    _mark_launched(k, tid, ts, spans, out)
    return len(spans), first


def _mark_launched(k: Kernels, tid: np.ndarray, ts: np.ndarray,
                   spans: list[tuple[int, int, int]], out: np.ndarray) -> None:
    """Mark in ``out`` the kernels of ``k`` launched on thread ``t`` in ``[lo, hi)`` for
    any ``(t, lo, hi)`` of ``spans``: one sort of the launches per thread."""
    if not spans:
        return
    has = k.ops >= 0
    launcher = np.clip(k.ops, 0, None)
    launch_ts, launch_tid = ts[launcher], tid[launcher]
    for t in {t for t, _, _ in spans}:
        mine = np.flatnonzero(has & (launch_tid == t))
        mine = mine[np.argsort(launch_ts[mine], kind="stable")]
        when = launch_ts[mine]
        for _, lo, hi in (x for x in spans if x[0] == t):
            a, b = np.searchsorted(when, [lo, hi], side="left")
            out[mine[a:b]] = True


def _batched_scores(dims: list) -> bool:
    """False when a softmax's recorded input (``dims``, its ``Input Dims``) has under 3
    dimensions (logits, not attention scores); True when it has 3 or more, or no shapes
    were recorded."""
    return not dims or not isinstance(dims[0], list) or len(dims[0]) >= 3


def _input_dims_of(rt: RankTrace) -> Callable[[int], list]:
    """The recorded ``Input Dims`` of an operator row ([] when none), with the side
    table looked up once."""
    table, slot = side_slots(rt, "op_args")
    column = table["input_dims"] if len(table) and "input_dims" in table else None

    def dims(row: int) -> list:
        if column is None or row < 0 or slot[row] < 0:
            return []
        text = column.iloc[int(slot[row])]
        try:
            found = json.loads(str(text)) if text else []
        except ValueError:
            return []
        return found if isinstance(found, list) else []

    return dims


def check_attention(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``unfused_attention`` findings of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    k = compute_kernels(rt, iterations, window)
    if k.total <= 0:
        return []
    att = attention_kernels(rt, k)
    found = []
    for subject, hit, blocks, example, advice in (
            (EXPLICIT, att.explicit, att.blocks[0], att.examples[0], ATTENTION_ADVICE),
            (MATH_BACKEND, att.fallback & ~att.explicit, att.blocks[1], att.examples[1],
             FALLBACK_ADVICE)):
        if blocks == 0 or int(k.dur[hit].sum()) < MIN_SHARE * k.total:
            continue
        found.append(_kernel_finding(rt, k, hit, window, subject, advice,
                                     "score kernels (scale, mask, softmax, dropout) of "
                                     "unfused attention ran",
                                     _blocks_text(rt, subject, blocks, example)))
    return found


def _blocks_text(rt: RankTrace, subject: str, blocks: int, example: int) -> str:
    """`` around 2 softmaxes between batched matrix products (aten::softmax of [[1, 16,
    5000, 5000], [], []])``: how the attention blocks were found."""
    dims = _input_dims_of(rt)(example)
    shown = f" of {cut(json.dumps(dims), 60)}" if dims else ""
    name = rt.symbols[int(rt.column("name")[example])]
    where = ("between batched matrix products" if subject == EXPLICIT
             else "inside aten::scaled_dot_product_attention (its math backend)")
    return f", around {blocks} softmax call(s) {where} ({name}{shown})"


CAST_ADVICE = (
    "These kernels convert tensors between dtypes on every call. Under torch.autocast in "
    "inference the fp32 weights are cast to fp16/bf16 at each matmul and convolution: "
    "convert the model once (model.half() or model.to(torch.bfloat16), then feed inputs "
    "in that dtype). Keep masks, biases and constants in the compute dtype (a float mask "
    "added to half scores makes the sum float, and a cast back follows), or compile "
    "(torch.compile fuses casts into the kernels around them).")
TRAIN_ADVICE = (
    "This pass runs no backward, yet BatchNorm computes each batch's mean and variance and "
    "overwrites running_mean and running_var at every call: the model is in training mode. "
    "Call model.eval() before inference (with torch.inference_mode()): BatchNorm then uses "
    "its running statistics, so the outputs stop depending on the batch and the statistics "
    "stop drifting. Then fold BatchNorm into the convolution or linear layer before it "
    "(torch.fx / torch.nn.utils.fusion.fuse_conv_bn_eval, torch.ao.quantization."
    "fuse_modules, torch.compile with torch._inductor.config.freezing = True under "
    "torch.no_grad(), TensorRT): its kernels go. eval() alone saves the statistics pass.")
FOLD_ADVICE = (
    "In inference a BatchNorm is a fixed scale and shift that folds into the weights of the "
    "convolution or linear layer before it: fold it (torch.fx / torch.nn.utils.fusion."
    "fuse_conv_bn_eval, torch.ao.quantization.fuse_modules, torch.compile with "
    "torch._inductor.config.freezing = True under torch.no_grad(), TensorRT or ONNX "
    "Runtime, which fold it when they build the engine) and its kernels go. The same tools "
    "fuse the activation and residual add that follow the convolutions into one pass.")
ATTENTION_ADVICE = (
    "Compute attention with torch.nn.functional.scaled_dot_product_attention(q, k, v, "
    "attn_mask=..., dropout_p=..., is_causal=...) instead of matmul, scale, mask, softmax "
    "and matmul: its flash and memory-efficient kernels never write the score matrix, so "
    "these kernels go, and the memory the matrix takes. The flash kernel needs fp16 or "
    "bf16 inputs (torch.autocast); the memory-efficient one also takes fp32. "
    "nn.MultiheadAttention takes this unfused path when need_weights=True, its default: "
    "pass need_weights=False unless the attention weights are used.")
FALLBACK_ADVICE = (
    "scaled_dot_product_attention ran its math backend (matmul, softmax, matmul): no fused "
    "kernel accepted the call. The flash kernel needs fp16 or bf16 inputs and no arbitrary "
    "attn_mask (use is_causal=True for a causal mask); the memory-efficient kernel takes "
    "fp32 and masks but needs aligned head dimensions. Run once with torch.nn.attention."
    "sdpa_kernel(SDPBackend.FLASH_ATTENTION) (or EFFICIENT_ATTENTION): PyTorch then warns "
    "why the kernel was refused.")

RULES: list[FindingRule] = [
    FindingRule(
        id="batchnorm_inference",
        title="BatchNorm in an inference pass",
        section="kernels",
        advice=FOLD_ADVICE,
        saving=("The time of the BatchNorm kernels of a pass without backward: eval() and "
                "folding into the layer before remove them (GPU time, not replayed)."),
        check=check_batchnorm,
    ),
    FindingRule(
        id="dtype_casts",
        title="Casts between dtypes in an inference pass",
        section="kernels",
        advice=CAST_ADVICE,
        saving=("The time of the dtype conversion kernels (launched by aten::_to_copy) of a "
                "pass without backward: at most what converting the model once removes "
                "(GPU time, not replayed)."),
        check=check_casts,
    ),
    FindingRule(
        id="unfused_attention",
        title="Attention not fused",
        section="kernels",
        advice=ATTENTION_ADVICE,
        saving=("The time of the kernels between the two matrix products of each attention "
                "block (scale, mask, softmax, dropout), which a fused attention kernel does "
                "not run (GPU time, not replayed)."),
        check=check_attention,
    ),
]
