"""Operator categories: the kernel-family table and the ATen-op table (data, not code).

Every GPU kernel and every operator that launched GPU work gets one *category*:

=================  =====================================================================
category           what it holds
=================  =====================================================================
GEMM               matrix products (cuBLAS/cuBLASLt, CUTLASS, hipBLASLt, Tensile, CK,
                   Triton matmul templates, ``aten::mm/addmm/bmm/linear/_scaled_mm``)
attention          fused attention (flash, memory-efficient, cuDNN SDPA, paged attention)
convolution        convolutions, forward and backward (cuDNN, MIOpen, implicit GEMM)
normalization      layer, RMS, batch, group norm and softmax (a row normalised to sum 1)
elementwise        pointwise arithmetic and activations, casts, optimizer updates,
                   rotary position embedding (RoPE)
reduction          sums, means, norms of vectors, arg-max, scans
embedding          embedding lookups and their backward, TorchRec/FBGEMM sparse kernels
MoE                mixture-of-experts routing, permute/unpermute, grouped expert GEMMs
communication      collectives and peer-to-peer transfers (the ``communication`` kind)
copy/memset        copies, fills, concatenation, transposes and layout changes
other              recognised GPU work of no category above (sorts, Triton kernels of
                   unknown purpose, MTIA processing-element jobs)
=================  =====================================================================

:data:`KERNEL_FAMILIES` is an ordered list (first match wins) of regular expressions on
the kernel name; :mod:`hta.model.rules` turns each entry into a ``computation`` rule
carrying its category, placed after the communication rule, so the kind of a kernel and
its category come from one table. :data:`ATEN_OP_CATEGORIES` maps an operator's base name
(``aten::`` and the overload removed) to a category, and :data:`OP_PATTERNS` catches the
operator families by name. Edit the data, not the code that reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

CATEGORIES: tuple[str, ...] = (
    "GEMM", "attention", "convolution", "normalization", "elementwise", "reduction",
    "embedding", "MoE", "communication", "copy/memset", "other",
)


@dataclass(frozen=True)
class Family:
    """Kernels whose name matches ``name`` (``re.search``) belong to ``category``."""

    category: str
    name: str
    note: str


#: Rotary position embedding kernels (``rotary_embedding_kernel``, ``apply_rotary_*``,
#: ``fused_rope_*``, ``RoPE``): ``rope`` only as a word of its own, not inside ``property``.
ROPE = r"(?i:rotary)|(?<![A-Za-z])(?i:m?rope)(?![a-z])|RoPE|Rope(?=[A-Z_])"

KERNEL_FAMILIES: tuple[Family, ...] = (
    Family("MoE", r"(?i)(moe|_matmul_ogs|grouped_?gemm|group_?gemm|expert|_routing|"
           r"topk_?gating|gating_?softmax|unpermute|permute_?(tokens?|rows?)|"
           r"expandInputRows|align_block_size|count_and_sort|_finalize_?moe|bitmatrix|"
           r"GroupProblemShape|MoeGemm|dispatch_layout|expand_to_fused|fused_mapping)",
           "MoE routing, permute/unpermute, grouped expert GEMMs (incl. mxfp4 matmul_ogs)"),
    # RoPE before embedding: rotary_embedding_kernel rotates q and k in place, pointwise;
    # it looks nothing up.
    Family("elementwise", ROPE, "rotary position embedding (RoPE) kernels: pointwise"),
    Family("embedding", r"(?i)(embedding|embed_|_eb_|index_select|indexSelect|"
           r"EmbeddingBag|permute_pooled_embs|permute_(1D|2D)_|permute_indices|"
           r"linearize_index|bounds_check_indices|recat_copy|jagged|tbe_|offsets_range|"
           r"sparse_features|indexing_backward)",
           "embedding lookups and backward, TorchRec/FBGEMM sparse feature kernels"),
    Family("attention", r"(?i)(flash|fmha|attn|attention|sdpa|mha_|paged|"
           r"reshape_and_cache|store_kvcache|PrefillWith|DecodeWith|mla_|sage_fwd|sageattn)",
           "flash/efficient/cuDNN SDPA, CK fmha, Triton attn_fwd, paged attention"),
    Family("normalization", r"(?i)(layer_?norm|rms_?norm|batch_?norm|group_?norm|"
           r"instance_?norm|bn_fw|bn_bw|GammaBeta|softmax)",
           "layer/RMS/batch/group norm forward and backward, softmax"),
    # torch.compile (Inductor) names its kernels by kind: template, reduction, pointwise.
    # They come before the name-based families: a name like triton_poi_fused__to_copy_
    # convolution_backward_0 is a pointwise kernel whatever aten ops it fused.
    Family("GEMM", r"^triton_tem_", "Inductor GEMM templates"),
    Family("reduction", r"^triton_(red|per)_", "Inductor reductions"),
    Family("elementwise", r"^triton_poi_", "Inductor pointwise kernels"),
    Family("convolution", r"(?i)(conv(?!ert)|winograd|implicit_convolve|scudnn|fprop|"
           r"dgrad|wgrad|igemm_(fwd|bwd|wrw)|MIOpen|naive_conv|col2im|im2col|Im2d2Col|cask_)",
           "cuDNN/MIOpen convolutions, implicit-GEMM fprop/dgrad/wgrad"),
    Family("GEMM", r"(?i)((?<!fb)gemm|gemv|cutlass|cublas|xmma|nvjet|Cijk_|hipblaslt|rocblas|"
           r"tensile|ck::|ck_tile|wmma|matmul|bmm|s884|s1688|h884|h1688|tensorop|"
           r"splitKreduce|triton_tem_|_mm_|^fc-dtype|epilogue::impl)",
           "cuBLAS/cuBLASLt (sm90_xmma, nvjet), CUTLASS, hipBLASLt, Tensile Cijk_, CK"),
    Family("copy/memset", r"(?i)(copy_kernel|direct_copy|CatArray|cat_?kernel|fill_kernel|"
           r"FillFunctor|memset|memcpy|transpose|nchwToNhwc|nhwcToNchw|_copy_|"
           r"index_put|scatter|gather_kernel)",
           "copies, fills, concatenation, transposes and layout changes"),
    Family("reduction", r"(?i)(reduce|reduction|argmax|argmin|cub::Device(Reduce|"
           r"SegmentedReduce|Scan)|DeviceScan|cumsum|scan_kernel|vector_norm|norm_kernel|"
           r"sum_kernel|_pool|pool_|pooling|lookback_scan|scan_config|NLLCriterion|"
           r"cross_entropy)",
           "sums, means, vector norms, arg-max/min, scans, pooling (a windowed reduction)"),
    Family("elementwise", r"(?i)(elementwise|pointwise|triton_poi_|Functor|activation|"
           r"gelu|silu|swiglu|relu|sigmoid|tanh|dropout|act_and_mul|mul_and|"
           r"multi_tensor_apply|adam|sgd|quantize|dequant|_quant_|hfp8|fp8|clamp|scalePacked|"
           r"per_token_cast|_cast_|upsample|interpolat|"
           r"^(add|sub|mul|div|divide|aten::\w+\.?\w*)-dtype_)",
           "pointwise math and activations, casts and quantisation, optimizer updates"),
    Family("other", r"(?i)(sort|topk|radix|unique|nonzero|histogram|bucketize|"
           r"searchsorted|spin_kernel|compute_cuda_kernel|^triton|triton_|-dtype_\w+$|rocprim|"
           r"token_ids|position_kernel)",
           "sorts and selection, Triton kernels of unknown purpose, MTIA operator kernels"),
    # The families the earlier single compute rule named without a category, kept so
    # every kernel it matched still matches a rule.
    Family("other", r"(?i)(cudnn|sm\d+_|ampere_|volta_|turing_|hopper_|^void at::|"
           r"at::native|miopen|index_select|fbgemm)",
           "other cuDNN, architecture-named and ATen native kernels"),
)

#: Operator base name -> category (exact names; ``aten::`` and the overload removed).
ATEN_OP_CATEGORIES: dict[str, str] = {
    **dict.fromkeys((
        "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm", "addmv", "mv",
        "dot", "addbmm", "_addmm_activation", "_int_mm", "einsum", "addr", "vdot",
        "_weight_int4pack_mm", "_weight_int8pack_mm"), "GEMM"),
    **dict.fromkeys((
        "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_backward",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
        "_flash_attention_forward", "_flash_attention_backward",
        "_efficient_attention_forward", "_efficient_attention_backward",
        "_scaled_dot_product_fused_attention_overrideable"), "attention"),
    **dict.fromkeys((
        "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "cudnn_convolution",
        "cudnn_convolution_transpose", "convolution_backward", "miopen_convolution",
        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "_convolution_mode",
        "cudnn_convolution_relu", "cudnn_convolution_add_relu"), "convolution"),
    **dict.fromkeys((
        "layer_norm", "native_layer_norm", "native_layer_norm_backward", "rms_norm",
        "_fused_rms_norm", "_fused_rms_norm_backward", "batch_norm", "native_batch_norm",
        "native_batch_norm_backward", "cudnn_batch_norm", "cudnn_batch_norm_backward",
        "miopen_batch_norm", "miopen_batch_norm_backward", "_batch_norm_impl_index",
        "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
        "batch_norm_backward", "group_norm", "native_group_norm",
        "native_group_norm_backward", "instance_norm", "softmax", "_softmax",
        "_softmax_backward_data", "log_softmax", "_log_softmax",
        "_log_softmax_backward_data", "_safe_softmax"), "normalization"),
    **dict.fromkeys((
        "add", "sub", "mul", "div", "rsub", "neg", "abs", "exp", "log", "log1p", "expm1",
        "pow", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "relu", "gelu", "silu",
        "sigmoid", "tanh", "hardtanh", "leaky_relu", "elu", "mish", "softplus", "clamp",
        "clamp_min", "clamp_max", "where", "masked_fill", "threshold",
        "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward",
        "tanh_backward", "dropout", "native_dropout", "native_dropout_backward",
        "addcmul", "addcdiv", "lerp", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
        "ge", "logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or",
        "floor", "ceil", "round", "sign", "erf", "nan_to_num", "square", "fmod",
        "remainder", "mish_backward", "hardswish", "isnan", "isinf"), "elementwise"),
    **dict.fromkeys((
        "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "norm",
        "linalg_vector_norm", "var", "std", "var_mean", "std_mean", "prod", "cumsum",
        "cumprod", "all", "any", "logsumexp", "count_nonzero", "_foreach_norm"),
        "reduction"),
    **dict.fromkeys((
        "embedding", "embedding_backward", "embedding_dense_backward",
        "_embedding_bag", "_embedding_bag_backward", "embedding_bag",
        "_embedding_bag_dense_backward", "embedding_renorm", "index_select",
        "index_select_backward"), "embedding"),
    **dict.fromkeys((
        "_grouped_mm", "_scaled_grouped_mm"), "MoE"),
    **dict.fromkeys((
        "copy", "_to_copy", "to", "clone", "contiguous", "fill", "zero", "zeros",
        "zeros_like", "ones", "ones_like", "full", "full_like", "cat", "stack",
        "_cat", "index_put", "_index_put_impl", "scatter", "scatter_add", "gather",
        "index", "index_copy", "masked_scatter", "repeat", "expand_as", "flip",
        "roll", "narrow_copy", "split_with_sizes_copy", "constant_pad_nd", "pad"),
        "copy/memset"),
}

#: (pattern on the full operator name, category), tried in order when the base name is
#: not in :data:`ATEN_OP_CATEGORIES`.
OP_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"(?i)(^c10d::|^nccl:|_c10d_functional|record_param_comms|all_?reduce|all_?gather|"
     r"reduce_?scatter|all_?to_?all|broadcast_)", "communication"),
    (r"(?i)(moe|expert|_grouped_mm)", "MoE"),
    (r"(?i)(attention|attn|sdpa|flash)", "attention"),
    (r"(?i)conv(?!ert)", "convolution"),
    (r"(?i)(norm|softmax)", "normalization"),
    (ROPE, "elementwise"),
    (r"(?i)embedding", "embedding"),
    (r"(?i)((?<!fb)gemm|matmul|_mm$|linear)", "GEMM"),
    (r"(?i)pool", "reduction"),
    (r"^aten::_foreach_", "elementwise"),
)

_OVERLOAD = re.compile(r"\.[A-Za-z_0-9]+$")


def op_base_name(op: str) -> str:
    """``aten::add_.Tensor`` -> ``add``: namespace, overload and in-place ``_`` removed."""
    base = op.split("::", 1)[1] if op.startswith("aten::") else op
    base = _OVERLOAD.sub("", base)
    if base.endswith("_") and not base.endswith("__") and len(base) > 1:
        base = base[:-1]
    return base


@lru_cache(maxsize=8192)
def op_category(op: str) -> str | None:
    """The category of an operator name, or None when the tables do not know it (the
    caller then falls back to its kernels' category)."""
    if op.startswith("aten::"):
        found = ATEN_OP_CATEGORIES.get(op_base_name(op))
        if found is not None:
            return found
    for pattern, category in OP_PATTERNS:
        if re.search(pattern, op):
            return category
    return None


def check_tables() -> None:
    """Raise ValueError when a table names a category outside :data:`CATEGORIES`."""
    names = [f.category for f in KERNEL_FAMILIES] + list(ATEN_OP_CATEGORIES.values())
    names += [c for _, c in OP_PATTERNS]
    bad = sorted(set(names) - set(CATEGORIES))
    if bad:
        raise ValueError(f"unknown categories in the tables: {bad}")


check_tables()
