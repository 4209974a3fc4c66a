"""Kernel kind and category rules (one table) and the ATen-op category table."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES, absent_reason

from hta.model.categories import CATEGORIES, op_base_name, op_category
from hta.model.rules import DEFAULT_RULES, KERNEL_CATS, Rule, RuleSet, categories

RULES = RuleSet()
#: The real traces (``HTA_SHARED_TRACES`` overrides where a worktree has no ../shared).
TRACES = Path(os.environ.get("HTA_SHARED_TRACES", SHARED_TRACES))


@pytest.mark.parametrize(("name", "category"), [
    # Triton and torch.compile
    ("triton_poi_fused__to_copy_add_mul_0", "elementwise"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", "reduction"),
    ("triton_per_fused__softmax_0", "normalization"),
    ("triton_tem_fused_mm_0", "GEMM"),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x256x128x1_swiglu", "MoE"),
    ("_routing_compute_indx", "MoE"),
    ("_sum_bitmatrix_rows", "MoE"),
    ("fused_moe_kernel", "MoE"),
    ("void moe_permute_kernel<__nv_bfloat16>(...)", "MoE"),
    ("void moe_unpermute_kernel<__nv_bfloat16>(...)", "MoE"),
    # attention
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >(Flash_fwd_params)",
     "attention"),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
     "attention"),
    ("_attn_fwd", "attention"),
    ("void vllm::paged_attention_v1_kernel<__nv_bfloat16, 128>(...)", "attention"),
    ("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x64_4x1x1_kernel0_0", "attention"),
    ("void ck_tile::kentry<ck_tile::FmhaFwdKernel<...>>(...)", "attention"),
    # GEMM libraries
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", "GEMM"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopB_NTN", "GEMM"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn>"
     "(Params)", "GEMM"),
    ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_GRVW8", "GEMM"),
    ("void ck::kernel_gemm_xdl_cshuffle_v3<...>(...)", "GEMM"),
    ("volta_sgemm_128x64_nn", "GEMM"),
    ("fc-dtype_Float", "GEMM"),
    # convolution
    ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw", "convolution"),
    ("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "convolution"),
    ("void wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(...)", "convolution"),
    # norms, transposes, elementwise, reductions, embedding
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>()",
     "normalization"),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(...)", "normalization"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>()",
     "normalization"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>()", "copy/memset"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::"
     "direct_copy_kernel_cuda(at::TensorIteratorBase&)>", "copy/memset"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, ...)", "elementwise"),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>(...)", "elementwise"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps> >()",
     "reduction"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>()",
     "reduction"),
    ("void split_embedding_codegen_forward_unweighted_kernel<float, float, float>()",
     "embedding"),
    ("void permute_pooled_embs_kernel<float>(float const*, long const*)", "embedding"),
    ("split_eb_bwd_rowwise_adagrad-dtype_Half", "embedding"),
    # RoPE is pointwise, not a lookup; embedding kernels stay embedding
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
     "c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)", "elementwise"),
    ("apply_rotary_pos_emb_kernel", "elementwise"),
    ("rotary_kernel", "elementwise"),
    ("_fused_rope_fwd_kernel", "elementwise"),
    ("void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheKernel<true, 128u>(...)",
     "elementwise"),
    ("void transformer_engine::fused_rope_forward_kernel<float, float>(...)", "elementwise"),
    ("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, "
     "float, long>(...)", "embedding"),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned "
     "int, 2, 2, -2, true>(...)", "embedding"),
    ("void at::native::(anonymous namespace)::EmbeddingBag_updateOutputKernel_sum_mean<"
     "float, long>(...)", "embedding"),
    ("void at::native::embedding_bag_kernel<float>(...)", "embedding"),
    ("void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>()",
     "elementwise"),
    ("void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int> >()",
     "other"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "communication"),
])
def test_kernel_families(name: str, category: str) -> None:
    rule, matched = RULES.rule_for("kernel", name)
    assert matched, name
    assert RULES.category_of("kernel", name) == category
    assert rule.kind == ("communication" if category == "communication" else "computation")


def test_mtia_jobs_are_recognised() -> None:
    for name in ("pe_exe", "merge", "remote"):
        assert RULES.kind_of("mtia_ccp_events", name) == ("computation", True)
    assert RULES.kind_of("mtia_ccp_events", "dma_request")[0] == "memcpy_other"


def test_copies_and_unknown_kernels() -> None:
    assert RULES.category_of("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)") == "copy/memset"
    assert RULES.category_of("gpu_memset", "Memset (Device)") == "copy/memset"
    assert RULES.category_of("kernel", "my_secret_exchange") == "other"
    assert RULES.kind_of("kernel", "my_secret_exchange") == ("computation", False)
    assert RULES.category_of("cpu_op", "aten::mm") == ""


def test_user_rule_category() -> None:
    rules = RuleSet([Rule("computation", name="my_gemm", category="GEMM")])
    assert rules.category_of("kernel", "my_gemm_v2") == "GEMM"
    with pytest.raises(ValueError, match="unknown category"):
        Rule("computation", name="x", category="matmul")


def test_categories_vectorised_and_collective_args() -> None:
    symbols = ["kernel", "volta_sgemm_128x64_nn", "mystery", "gpu_memcpy", "Memcpy DtoD"]
    cat = np.array([0, 0, 3, 0])
    name = np.array([1, 2, 4, 1])
    out = categories(symbols, cat, name, RULES, collective_rows=np.array([1]))
    assert out.tolist() == ["GEMM", "communication", "copy/memset", "GEMM"]


# The single compute rule before the families were split out: every kernel it matched
# must still be computation (the kinds, and so every breakdown, do not move).
_OLD_COMPUTE = (
    r"(?i)(gemm|gemv|cutlass|cublas|cudnn|xmma|sm\d+_|ampere_|volta_|turing_|hopper_|"
    r"^void at::|at::native|elementwise|reduce|softmax|triton_|^triton|flash|fmha|attention|"
    r"conv|winograd|implicit_convolve|cijk_|ck_tile|ck::|hipblaslt|miopen|rocblas|"
    r"layer_?norm|rms_?norm|batch_?norm|dropout|embedding|index_select|copy_kernel|fill_kernel|"
    r"CatArray|sort|topk|adam|sgd)"
)


def _old_rules() -> RuleSet:
    rules = [r for r in DEFAULT_RULES if r.kind != "computation"]
    at = next(i for i, r in enumerate(rules) if r.kind == "communication") + 1
    rules.insert(at, Rule("computation", cat=KERNEL_CATS, name=_OLD_COMPUTE))
    return RuleSet(defaults=rules)


@pytest.mark.parametrize("name", [
    "volta_sgemm_128x64_nn", "void at::native::reduce_kernel<512, 1>()", "triton_poi_x",
    "flash_fwd_kernel", "sm90_xmma_gemm_x", "conv2d_fprop", "my_cudnn_thing",
])
def test_kinds_unchanged_for_old_matches(name: str) -> None:
    old = _old_rules()
    assert old.kind_of("kernel", name) == ("computation", True)
    assert RULES.kind_of("kernel", name) == ("computation", True)


def _real_files() -> list[Path]:
    names = ["trace_diff/control/control.json.gz", "trace_diff/test/test.json.gz",
             "df_index_resolver/df_index_resolver.json.gz",
             "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
             "trace_filter/sampled_rank-0.json.gz",
             "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
             "mtia_inference_trace/mtia_inference_rank_0.json.gz"]
    return [TRACES / n for n in names]


@pytest.mark.skipif(not TRACES.exists(), reason=absent_reason(TRACES))
@pytest.mark.parametrize("path", _real_files(), ids=lambda p: p.parent.name)
def test_real_traces_classified(path: Path) -> None:
    """Under 5% of kernel time unclassified; the kinds equal the old rules' kinds."""
    from hta.job.load import load_trace
    from hta.model.rules import classify, kind_codes

    trace = load_trace(None, [path], cache=False, progress=False, in_memory=True)
    for rt in trace:
        ev = rt.events
        codes = ev["kind"].cat.codes.to_numpy()
        kernel = np.isin(codes, kind_codes(["computation", "communication"]))
        dur = ev["dur"].to_numpy()
        assert dur[kernel & rt.unclassified].sum() < 0.05 * dur[kernel].sum()
        coll = rt.tables.get("collective_args")
        rows = coll["index"].to_numpy() if coll is not None and len(coll) else None
        old, old_unmatched = classify(rt.symbols, ev["cat"].to_numpy(),
                                      ev["name"].to_numpy(), _old_rules(), rows)
        assert np.array_equal(old, codes)
        assert not (rt.unclassified & ~old_unmatched).any()  # nothing newly unmatched


def test_op_categories() -> None:
    assert op_base_name("aten::add_.Tensor") == "add"
    cases = {
        "aten::addmm": "GEMM", "aten::_scaled_mm": "GEMM", "aten::linear": "GEMM",
        "aten::_scaled_dot_product_flash_attention_backward": "attention",
        "aten::cudnn_convolution": "convolution", "aten::native_layer_norm": "normalization",
        "aten::_softmax": "normalization", "aten::mul_": "elementwise",
        "aten::sum": "reduction", "aten::embedding_dense_backward": "embedding",
        "aten::_grouped_mm": "MoE", "c10d::allreduce_": "communication",
        "aten::copy_": "copy/memset", "aten::_foreach_add_": "elementwise",
        "aten::max_pool2d_with_indices": "reduction", "vllm::unified_attention": "attention",
        "aten::something_new": None,
        "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function": "embedding",
        "vllm::rotary_embedding": "elementwise", "_C::rotary_embedding": "elementwise",
        "aten::embedding_bag": "embedding", "aten::index_select": "embedding",
        "aten::embedding_backward": "embedding",
    }
    for op, cat in cases.items():
        assert op_category(op) == cat, op
    assert all(c in CATEGORIES for c in cases.values() if c)
    assert re.fullmatch(r"\w+", op_base_name("aten::_to_copy"))


def _more_traces() -> list[Path]:
    root = os.environ.get("HTA_MORE_TRACES")
    if not root or not Path(root).is_dir():
        return []
    return sorted(p for p in Path(root).iterdir()
                  if p.is_dir() and not p.name.startswith((".", "_")))


@pytest.mark.skipif(not _more_traces(), reason="HTA_MORE_TRACES (public traces) not set")
@pytest.mark.parametrize("folder", _more_traces(), ids=lambda p: p.name)
def test_public_traces_classified(folder: Path) -> None:
    """The public traces of today's workloads (``HTA_MORE_TRACES=/work/public_traces``):
    under 5% of kernel time unclassified on the first rank file, kinds as before."""
    files = sorted(f for f in folder.rglob("*.json*") if "/." not in str(f))
    test_real_traces_classified(files[0])
