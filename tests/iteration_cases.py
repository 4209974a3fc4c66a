"""Generated traces for the iterations and one-time costs of issue 37, each with its twin.

Every builder writes one rank and returns the loaded trace; the quantities the tests
check (where the window starts, which calls are one-time) follow from the construction.
All times in ns.
"""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

from hta.job.load import load_trace
from hta.model.trace import Trace

#: The calls of one decoder layer: (operator, kernel, kernel ns).
LAYER = (("aten::layer_norm", "layer_norm_kernel", 8_000),
         ("aten::linear", "sm80_gemm_qkv", 40_000),
         ("aten::scaled_dot_product_attention", "flash_fwd_kernel", 60_000),
         ("aten::linear", "sm80_gemm_o", 30_000),
         ("aten::add", "elementwise_add", 6_000),
         ("aten::layer_norm", "layer_norm_kernel", 8_000),
         ("aten::linear", "sm80_gemm_up", 50_000),
         ("aten::gelu", "gelu_kernel", 10_000),
         ("aten::linear", "sm80_gemm_down", 50_000),
         ("aten::add", "elementwise_add", 6_000))
#: CPU time of each operator, and the gap to the next (ns).
OP_NS, GAP_NS = 20_000, 5_000
#: Blocking index lookups before the layers: each ``aten::nonzero`` copies 4 bytes to the
#: host and waits for it (``SYNC_NS`` each, the GPU idle meanwhile).
SYNCS, SYNC_NS = 6, 500_000


def _op(b: TraceBuilder, t: int, name: str, kernel: str, gpu_ns: int, scale: float = 1.0
        ) -> int:
    """One operator launching one kernel at ``t``; returns where the next starts. The
    kernel starts 7 µs after its launch, or when the stream's previous kernel ends (a
    queue: the host runs ahead of a busy GPU)."""
    dur = int(OP_NS * scale)
    b.cpu_op(name, ts=t, dur=dur)
    free = getattr(b, "stream_free", 0)
    start = max(t + 8_000, free)
    b.launch_kernel(kernel, cpu_ts=t + 1_000, cpu_dur=5_000, gpu_ts=start, gpu_dur=gpu_ns)
    b.stream_free = start + gpu_ns  # type: ignore[attr-defined]
    return t + dur + GAP_NS


def single_call(tmp_path: Path, layers: int = 32, frames: bool = False,
                first_layer_scale: float = 3.0, head: bool = True) -> Trace:
    """One inference call, profiled after its warm-up, with no ProfilerStep: an embedding,
    :data:`SYNCS` blocking ``aten::nonzero`` lookups, ``layers`` identical decoder layers
    (the first one's operators ``first_layer_scale`` times slower on the CPU: caches
    still cold, each still under 1 ms), then the head and the sampling. With ``frames``
    the trace has Python frames, as ``with_stack=True`` records them: the call's frame,
    the model's ``nn.Module`` frame and one per layer. Without ``head`` the trace ends
    with the last layer."""
    b = TraceBuilder(rank=0)
    t = 0
    starts = []
    t = _op(b, t, "aten::embedding", "indexSelectLargeIndex", 30_000)
    for _ in range(SYNCS):
        b.cpu_op("aten::nonzero", ts=t, dur=SYNC_NS + 20_000)
        b.launch_kernel("nonzero_kernel", cpu_ts=t + 1_000, cpu_dur=5_000,
                        gpu_ts=t + 8_000, gpu_dur=4_000)
        b.memcpy("DtoH (Device -> Pageable)", cpu_ts=t + 7_000, cpu_dur=4_000,
                 gpu_ts=t + 14_000, gpu_dur=2_000, nbytes=4)
        b.runtime("cudaStreamSynchronize", ts=t + 12_000, dur=SYNC_NS)
        t += SYNC_NS + 20_000 + GAP_NS
    for k in range(layers):
        starts.append(t)
        for name, kernel, gpu_ns in LAYER:
            t = _op(b, t, name, kernel, gpu_ns, first_layer_scale if k == 0 else 1.0)
        if frames:
            b.complete(f"nn.Module: DecoderLayer_{k}", "python_function", ts=starts[-1] - 500,
                       dur=t - starts[-1])
    layers_end = t
    if head:
        t = _op(b, t, "aten::layer_norm", "layer_norm_kernel", 8_000)
        t = _op(b, t, "aten::linear", "sm80_gemm_lm_head", 300_000)
        t = _op(b, t, "aten::argmax", "argmax_kernel", 20_000)
    if frames:
        b.complete("nn.Module: Decoder_0", "python_function", ts=starts[0] - 1_000,
                   dur=layers_end - starts[0] + 1_500)
        b.complete("nn.Module: CausalLM_0", "python_function", ts=-2_000, dur=t + 4_000)
        b.complete("serve.py(40): predict", "python_function", ts=-3_000, dur=t + 6_000)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def decode_loop(tmp_path: Path, iterations: int = 6, layers: int = 4, frames: bool = False,
                sync: bool = False) -> Trace:
    """The twin: a loop of ``iterations`` whole calls (embedding, ``layers`` layers, the
    head), the first one three times slower on the CPU (warm-up); with ``frames`` under
    one ``generate`` frame (a loop, not a module call) and one model frame per call. With
    ``sync`` each call ends reading the sampled token on the host (``aten::item``: a
    stream synchronize until the GPU's queue drains, then 100 µs of Python), so the GPU
    idles while the host catches up."""
    b = TraceBuilder(rank=0)
    t = 0
    for i in range(iterations):
        scale = 3.0 if i == 0 else 1.0
        call = t
        t = _op(b, t, "aten::embedding", "indexSelectLargeIndex", 30_000, scale)
        for _ in range(layers):
            for name, kernel, gpu_ns in LAYER:
                t = _op(b, t, name, kernel, gpu_ns, scale)
        t = _op(b, t, "aten::linear", "sm80_gemm_lm_head", 300_000, scale)
        t = _op(b, t, "aten::argmax", "argmax_kernel", 20_000, scale)
        if frames:
            b.complete("nn.Module: CausalLM_0", "python_function", ts=call - 500,
                       dur=t - call)
        if sync:
            drained = max(t, getattr(b, "stream_free", 0))
            b.cpu_op("aten::item", ts=t, dur=drained - t + 3_000)
            b.runtime("cudaStreamSynchronize", ts=t + 1_000, dur=drained - t + 1_000)
            t = drained + 100_000
        t += 200_000
    if frames:
        b.complete("generation/utils.py(2000): generate", "python_function", ts=-2_000,
                   dur=t + 4_000)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


#: fp32 GEMM kernel of the accumulation case, and its GPU time (ns).
GEMM, GEMM_NS = "ampere_sgemm_128x64_nn", 7_000_000


def accumulation(tmp_path: Path, micro_batches: int = 3, late_cost: bool = True,
                 optimizer_kernels: int = 300) -> Trace:
    """A cold training run profiled from its start, no ProfilerStep: ``micro_batches``
    micro-batches of gradient accumulation (an fp32 GEMM of :data:`GEMM_NS`, a ReLU, a
    second GEMM), then one optimizer step of ``optimizer_kernels`` tiny kernels (5 µs).
    With ``late_cost`` the optimizer's first step loads its kernel module first
    (``cuModuleLoadData``, 2 ms, the GPU idle): a one-time cost after which most GPU
    *events* but 1 % of the GPU *time* run. Twin: the cost is made before the first
    micro-batch."""
    b = TraceBuilder(rank=0)
    t = 0
    if not late_cost:
        b.runtime("cuModuleLoadData", ts=t, dur=2_000_000)
        t += 2_010_000
    for _ in range(micro_batches):
        for name, kernel, gpu_ns in (("aten::mm", GEMM, GEMM_NS),
                                     ("aten::relu", "relu_kernel", 20_000),
                                     ("aten::mm", GEMM, GEMM_NS)):
            b.cpu_op(name, ts=t, dur=20_000, **{"Input Dims": [[4096, 4096], [4096, 4096]]
                                              if name == "aten::mm" else [[4096, 4096]]})
            b.launch_kernel(kernel, cpu_ts=t + 1_000, cpu_dur=5_000, gpu_ts=t + 8_000,
                            gpu_dur=gpu_ns)
            t += gpu_ns + 20_000
    if late_cost:
        b.runtime("cuModuleLoadData", ts=t, dur=2_000_000)
        t += 2_010_000
    for k in range(optimizer_kernels):
        b.cpu_op("aten::add_", ts=t, dur=20_000, **{"Input Dims": [[k + 1], [k + 1]]})
        b.launch_kernel("vectorized_add_kernel", cpu_ts=t + 1_000, cpu_dur=5_000,
                        gpu_ts=t + 8_000, gpu_dur=5_000)
        t += 25_000
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


#: The first call's CPU time in :func:`optimizer_only` (ns): lazy initialisation in
#: Python and the dispatcher, no runtime call inside.
FIRST_MUL_NS = 2_700_000


def optimizer_only(tmp_path: Path, steps: int = 3, params: int = 40, slow_first: bool = True
                   ) -> Trace:
    """An optimizer benchmark, no ProfilerStep: ``steps`` steps of an ``aten::mul_`` per
    parameter (each its own shape; 10 µs on the CPU, a 4 µs kernel), 20 µs apart and
    100 µs between steps. With ``slow_first`` the very first call takes
    :data:`FIRST_MUL_NS` (its kernel launched at its end)."""
    b = TraceBuilder(rank=0)
    t = 0
    for s in range(steps):
        for p in range(params):
            dur = FIRST_MUL_NS if slow_first and s == 0 and p == 0 else 10_000
            b.cpu_op("aten::mul_", ts=t, dur=dur, **{"Input Dims": [[p + 1, 64], []]})
            b.launch_kernel("elementwise_mul_kernel", cpu_ts=t + dur - 6_000,
                            cpu_dur=4_000, gpu_ts=t + dur, gpu_dur=4_000)
            t += dur + 20_000
        t += 100_000
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


#: The pageable copy of :func:`busy_wait`: bytes, and its time on the GPU (ns); the host
#: works ``AFTER_COPY_NS`` (Python, nothing recorded) after the copy returns.
COPY_BYTES, COPY_NS, AFTER_COPY_NS = 17 << 20, 1_600_000, 300_000


def busy_wait(tmp_path: Path, steps: int = 4, pageable: bool = True) -> Trace:
    """Each step: a kernel (500 µs), then a :data:`COPY_BYTES` host-to-device copy from
    pageable memory (:data:`COPY_NS` on the GPU; its ``cudaMemcpyAsync`` returns when the
    copy is done: the host waits while the GPU copies), then :data:`AFTER_COPY_NS` of
    Python before the next kernel (2 ms) is launched: the GPU is idle after the copy,
    never during the wait. Twin (``pageable=False``): the copy is pinned, its call returns
    at once, and the host's Python runs while the GPU copies."""
    b = TraceBuilder(rank=0)
    step = 5_000_000
    for k in range(1, steps + 1):
        t = (k - 1) * step
        with b.step(k, ts=t, dur=step - 1_000):
            b.cpu_op("aten::relu", ts=t, dur=8_000)
            b.launch_kernel("relu_kernel", cpu_ts=t + 1_000, cpu_dur=5_000,
                            gpu_ts=t + 10_000, gpu_dur=500_000)
            src = "Pageable" if pageable else "Pinned"
            call = COPY_NS + 20_000 if pageable else 10_000
            b.cpu_op("aten::copy_", ts=t + 10_000, dur=call + 2_000)
            b.memcpy(f"HtoD ({src} -> Device)", cpu_ts=t + 11_000, cpu_dur=call,
                     gpu_ts=t + 20_000, gpu_dur=COPY_NS, nbytes=COPY_BYTES, stream=24)
            resume = t + 11_000 + call + 2_000 + AFTER_COPY_NS
            start = max(resume + 10_000, t + 20_000 + COPY_NS + 1_000)
            b.cpu_op("aten::mm", ts=resume, dur=8_000)
            b.launch_kernel("sm80_gemm", cpu_ts=resume + 1_000, cpu_dur=5_000,
                            gpu_ts=start, gpu_dur=2_000_000)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


#: :func:`loader_restarts`: an iterator's start-up (ns) and one batch's fetch (ns).
ITER_START_NS, FETCH_NS = 9_500_000, 3_900_000


def loader_restarts(tmp_path: Path, steps: int = 4, every_step: bool = True) -> Trace:
    """A training loop recorded with ``with_stack=True`` whose DataLoader iterator is
    created each step (``every_step``; else once, before the first step): the
    ``dataloader.py: __iter__`` frame (:data:`ITER_START_NS`, starting the workers) and
    then one ``__next__`` (:data:`FETCH_NS`) per step, the GPU idle through both, then a
    2 ms kernel."""
    b = TraceBuilder(rank=0)
    t = 0
    step_ns = ITER_START_NS + FETCH_NS + 2_500_000
    for k in range(1, steps + 1):
        length = step_ns if every_step or k == 1 else step_ns - ITER_START_NS - 10_000
        with b.step(k, ts=t, dur=length):
            c = t + 10_000
            if every_step or k == 1:
                b.complete("torch/utils/data/dataloader.py(480): __iter__", "python_function",
                           ts=c, dur=ITER_START_NS)
                b.complete("torch/utils/data/dataloader.py(420): _get_iterator",
                           "python_function", ts=c + 1_000, dur=ITER_START_NS - 2_000)
                c += ITER_START_NS + 10_000
            b.annotation("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                         ts=c, dur=FETCH_NS)
            c += FETCH_NS + 10_000
            b.cpu_op("aten::mm", ts=c, dur=20_000)
            b.launch_kernel("sm80_gemm", cpu_ts=c + 1_000, cpu_dur=5_000, gpu_ts=c + 10_000,
                            gpu_dur=2_000_000)
        t += length
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def new_shapes(tmp_path: Path, every_step: bool = True, steps: int = 4) -> Trace:
    """ProfilerSteps of a decoder: six ``aten::scaled_dot_product_attention`` calls a step,
    on a sequence one token longer each step (a new shape each step). The first call of
    a shape takes 3 ms on the CPU (set-up for the shape), the others 100 µs. With
    ``every_step`` False the shape stays that of step 1 (only step 1 pays)."""
    b = TraceBuilder(rank=0)
    t = 0
    for k in range(1, steps + 1):
        start = t
        seq = 100 + (k if every_step else 1)
        for i in range(6):
            slow = i == 0 and (every_step or k == 1)
            dur = 3_000_000 if slow else 100_000
            b.cpu_op("aten::scaled_dot_product_attention", ts=t, dur=dur,
                     **{"Input Dims": [[1, 16, seq, 64]] * 3})
            b.launch_kernel("flash_fwd_kernel", cpu_ts=t + dur - 8_000, cpu_dur=5_000,
                            gpu_ts=t + dur, gpu_dur=30_000)
            t += dur + 40_000
        b.annotation(f"ProfilerStep#{k}", ts=start, dur=t - start)
        t += 10_000
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)
