"""What the generated job is made of: streams, kernels, names, and the per-step sizing."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

COMPUTE_STREAM = 7
NCCL_STREAM = 20
COPY_STREAM = 24
STREAMS = (COMPUTE_STREAM, NCCL_STREAM, COPY_STREAM)

#: Runtime calls that enqueue GPU work (the ones the ground truth counts as launches).
LAUNCH_NAMES = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "cudaGraphLaunch",
    }
)
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})

#: GPU activities per step that do not scale with the layer count: HtoD, memset, loss forward,
#: loss backward, 4 graph kernels, all-gather, DtoD, DtoH.
_FIXED_GPU_OPS = 11
_GPU_OPS_PER_LAYER = 5  # addmm, relu (forward); threshold_backward, 2 x mm (backward)
_LAYERS_PER_BUCKET = 4  # one gradient all-reduce per 4 layers (after a first 1-layer bucket)
_GRAPH_KERNELS = 4
MIN_KERNELS_PER_STEP = _FIXED_GPU_OPS + _GPU_OPS_PER_LAYER + 1

# Exact event counts (checked by the tests against len(traceEvents)).
_EV_TRACE_CONST = 24  # metadata, Trace span, instants, final sync, trailing unlinked launch
_EV_STEP_CONST = 70
_EV_PER_LAYER = 35  # 14 forward (ops, launches, kernels, flows, alloc) + 21 backward
_EV_PER_BUCKET = 9  # record_param_comms, annotation, 2 sync calls, launch + s, kernel + f, gpu ann
_EV_PER_EXTRA = 5  # aten::add, cudaLaunchKernel, ac2g s, kernel, ac2g f

_BASE_TIME_NS = 1_712_195_495_000_000_000
_START_OFFSET_NS = 519_689_047
_HIDDEN = 1024
_BATCH = 256
_NUM_SMS = 108
_CHUNK_EVENTS = 65_536
_GRAPH_ID = 1

_DEVICE_PROPERTIES: dict[str, Any] = {
    "name": "NVIDIA A100-SXM4-80GB",
    "totalGlobalMem": 85_097_971_712,
    "computeMajor": 8,
    "computeMinor": 0,
    "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiprocessor": 2048,
    "regsPerBlock": 65536,
    "regsPerMultiprocessor": 65536,
    "warpSize": 32,
    "sharedMemPerBlock": 49152,
    "sharedMemPerMultiprocessor": 167936,
    "numSms": _NUM_SMS,
    "sharedMemPerBlockOptin": 166912,
}

# --------------------------------------------------------------------------------------------
# Kernel catalogue
# --------------------------------------------------------------------------------------------


class _Kernel(NamedTuple):
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    regs: int
    smem: int
    blocks_per_sm: float
    warps_per_sm: float
    occupancy: int


def kernel_args(k: _Kernel, ext: int, stream: int, corr: int, device: int) -> dict[str, Any]:
    """A kernel event's ``args``, in Kineto's order."""
    return {
        "External id": ext,
        "queued": 0,
        "device": device,
        "context": 1,
        "stream": stream,
        "correlation": corr,
        "registers per thread": k.regs,
        "shared memory": k.smem,
        "blocks per SM": k.blocks_per_sm,
        "warps per SM": k.warps_per_sm,
        "grid": list(k.grid),
        "block": list(k.block),
        "est. achieved occupancy %": k.occupancy,
    }


def process_metadata(ts: Any, pid: int, device: int) -> list[dict[str, Any]]:
    """The CPU and GPU processes' name, label and sort-index ``M`` events at ``ts``."""

    def meta(name: str, p: int, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "ph": "M", "ts": ts, "pid": p, "tid": 0, "args": args}

    return [
        meta("process_name", pid, {"name": "python3.11"}),
        meta("process_labels", pid, {"labels": "CPU"}),
        meta("process_sort_index", pid, {"sort_index": pid}),
        meta("process_name", device, {"name": "python3.11"}),
        meta("process_labels", device, {"labels": f"GPU {device}"}),
        meta("process_sort_index", device, {"sort_index": 16_777_216 + device}),
    ]


def _kernel(
    name: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    regs: int,
    smem: int,
    occupancy: int,
) -> _Kernel:
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    bps = round(blocks / _NUM_SMS, 6)
    wps = round(bps * threads / 32, 6)
    return _Kernel(name, grid, block, regs, smem, bps, wps, occupancy)


_K_GEMM_FWD = _kernel("ampere_sgemm_128x64_tn", (8, 4, 1), (128, 1, 1), 122, 16384, 12)
_K_GEMM_DGRAD = _kernel("ampere_sgemm_64x32_sliced1x4_nn", (16, 8, 1), (128, 1, 1), 126, 8192, 25)
_K_GEMM_WGRAD = _kernel(
    "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
    "aligna4_alignc4_execute_kernel__51_cublasLt",
    (8, 8, 1),
    (128, 1, 1),
    168,
    33280,
    12,
)
_K_RELU = _kernel(
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
    "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() "
    "const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
    (256, 1, 1),
    (128, 1, 1),
    22,
    0,
    83,
)
_K_THRESHOLD_BWD = _kernel(
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::"
    "{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, at::native::"
    "(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)"
    "::{lambda(float, float)#1}, at::detail::Array<char*, 3>)",
    (256, 1, 1),
    (128, 1, 1),
    24,
    0,
    81,
)
_K_ADD = _kernel(
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)",
    (2, 1, 1),
    (128, 1, 1),
    20,
    0,
    2,
)
_K_LOSS_FWD = _kernel(
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >"
    "(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4>)",
    (64, 1, 1),
    (32, 16, 1),
    32,
    16,
    28,
)
_K_LOSS_BWD = _kernel(
    "void at::native::vectorized_elementwise_kernel<4, at::native::mse_backward_cuda_kernel("
    "at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}::"
    "operator()() const::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, "
    "at::native::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::"
    "{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::"
    "{lambda(float, float)#1}, at::detail::Array<char*, 3>)",
    (256, 1, 1),
    (128, 1, 1),
    26,
    0,
    80,
)
_K_GRAPH = (
    _kernel(
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
        "(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::"
        "LpNormFunctor<float, (at::native::(anonymous namespace)::NormType)1, float, float>, "
        "float*, int>(at::native::(anonymous namespace)::TensorListMetadata<1>, "
        "at::native::(anonymous namespace)::LpNormFunctor<float, (at::native::"
        "(anonymous namespace)::NormType)1, float, float>, float*, int)",
        (320, 1, 1),
        (512, 1, 1),
        32,
        2048,
        95,
    ),
    *(
        _kernel(
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
            "(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::"
            "FusedSgdMathFunctor<float, 3>, double, double*, double, double, bool, bool, bool, "
            "float*, float const*>(at::native::(anonymous namespace)::TensorListMetadata<3>, "
            "at::native::(anonymous namespace)::FusedSgdMathFunctor<float, 3>, double, "
            "double*, double, double, bool, bool, bool, float*, float const*)",
            (432, 1, 1),
            (512, 1, 1),
            40,
            0,
            91,
        )
        for _ in range(_GRAPH_KERNELS - 1)
    ),
)
_K_ALLREDUCE = _kernel(
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    (16, 1, 1),
    (640, 1, 1),
    96,
    87568,
    0,
)
_K_ALLGATHER = _kernel(
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWork*)",
    (16, 1, 1),
    (544, 1, 1),
    96,
    87568,
    0,
)

_CBID = {
    "cudaLaunchKernel": 211,
    "cudaLaunchKernelExC": 430,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaGraphLaunch": 311,
    "cudaStreamSynchronize": 131,
    "cudaDeviceSynchronize": 165,
    "cudaEventRecord": 135,
    "cudaStreamWaitEvent": 147,
}

_DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
_MEMCPY_NAMES = {
    "HtoD": "Memcpy HtoD (Pinned -> Device)",
    "DtoH": "Memcpy DtoH (Device -> Pageable)",
    "DtoD": "Memcpy DtoD (Device -> Device)",
}
_MEMSET_NAME = "Memset (Device)"


# --------------------------------------------------------------------------------------------
# Sizing
# --------------------------------------------------------------------------------------------


def step_plan(kernels_per_step: int) -> tuple[int, int, int]:
    """Split ``kernels_per_step`` GPU activities into ``(layers, buckets, extras)``.

    Per step: 11 fixed activities, 5 per layer, 1 all-reduce per gradient bucket (like DDP, the
    first bucket holds the last layer alone, the next ones 4 layers each, so all but the last
    all-reduce overlap backward compute) and ``extras`` small elementwise ``aten::add``
    kernels, which add up to ``kernels_per_step``.
    """
    k = int(kernels_per_step)
    if k < MIN_KERNELS_PER_STEP:
        raise ValueError(f"kernels_per_step must be >= {MIN_KERNELS_PER_STEP}, got {k}")
    layers = max(1, (k - _FIXED_GPU_OPS) // 7)
    buckets = 1 + -(-(layers - 1) // _LAYERS_PER_BUCKET)  # DDP: a small first bucket
    extras = k - _FIXED_GPU_OPS - _GPU_OPS_PER_LAYER * layers - buckets
    return layers, buckets, extras


def events_per_rank_for(steps: int = 3, kernels_per_step: int = 40) -> int:
    """Exact number of ``traceEvents`` in one rank generated with these parameters."""
    layers, buckets, extras = step_plan(kernels_per_step)
    per_step = (
        _EV_STEP_CONST + _EV_PER_LAYER * layers + _EV_PER_BUCKET * buckets + _EV_PER_EXTRA * extras
    )
    return _EV_TRACE_CONST + steps * per_step


def kernels_per_step_for_events(events_per_rank: int, steps: int = 3) -> int:
    """Smallest ``kernels_per_step`` giving at least ``events_per_rank`` events per rank."""
    if steps < 1:
        raise ValueError("steps must be >= 1")
    lo = MIN_KERNELS_PER_STEP
    hi = max(lo, math.ceil(events_per_rank / steps / 4) + lo)
    while events_per_rank_for(steps, hi) < events_per_rank:
        hi *= 2
    while lo < hi:  # event count is non-decreasing in kernels_per_step
        mid = (lo + hi) // 2
        if events_per_rank_for(steps, mid) >= events_per_rank:
            hi = mid
        else:
            lo = mid + 1
    return lo
