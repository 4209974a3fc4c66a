"""The default kind rules on names seen in the wild (unit level: one pair at a time)."""

from __future__ import annotations

import pytest

from hta.model.rules import RuleSet

RULES = RuleSet()


@pytest.mark.parametrize(("cat", "name", "kind"), [
    ("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "communication"),
    ("kernel", "void tensorrt_llm::kernels::allreduce_fusion_kernel<float>(Params)",
     "communication"),
    ("kernel", "void reduce_scatter_kernel<bf16>(...)", "communication"),
    ("kernel", "void deep_ep::intranode::combine<8, 768>(...)", "communication"),
    ("kernel", "void at::native::reduce_kernel<512, 1>(...)", "computation"),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "computation"),
    ("gpu_memcpy", "Memcpy DtoD (Device -> Device)", "memcpy_dtod"),
    ("gpu_memcpy", "Memcpy PtoP (Device -> Device)", "memcpy_ptop"),
    ("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", "memcpy_dtoh"),
    ("mtia_runtime", "runFunction - job_prep_and_submit_for_execution", "runtime_launch"),
    ("mtia_runtime", "enqueueCommand memcpyHtoDAsync", "runtime_launch"),
    ("mtia_ccp_events", "dma_request", "memcpy_other"),
    ("mtia_ccp_events", "event_wait", "gpu_sync"),
    ("cuda_runtime", "cudaLaunchKernelExC", "runtime_launch"),
    ("cuda_driver", "cuLaunchKernelEx", "runtime_launch"),
    ("cuda_runtime", "hipExtModuleLaunchKernel", "runtime_launch"),
    ("cuda_runtime", "cudaStreamSynchronize", "runtime_sync"),
    ("cuda_runtime", "cudaGetDevice", "runtime_other"),
])
def test_default_rules(cat: str, name: str, kind: str) -> None:
    assert RULES.kind_of(cat, name)[0] == kind


def test_kernel_matching_no_rule_is_flagged() -> None:
    assert RULES.kind_of("kernel", "my_secret_exchange") == ("computation", False)
