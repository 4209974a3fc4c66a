"""Generated traces for the host and copy findings rules, with the saving known by
construction. Every builder returns ``(trace, expected_saving_ns)``; the expected value is
computed from the construction parameters, never by the code under test.

All times in ns; step ``k`` (1-based) starts at ``(k - 1) * STEP_NS``.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from kineto_builder import COMPUTE_STREAM, TraceBuilder

from hta.job.load import load_trace
from hta.model.trace import Trace

STEP_NS = 200_000
STEPS = 4
COPY_STREAM = 24
DATA_LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _load(b: TraceBuilder, tmp_path: Path) -> Trace:
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def host_sync(tmp_path: Path, with_sync: bool = True, sync: str = "cudaStreamSynchronize",
              steps: int = STEPS) -> tuple[Trace, int]:
    """Each step: kernel A (20 µs on the GPU), then ``loss.item()``: the host blocks in
    ``sync`` until 1 µs after A ends, then takes 4 µs to launch kernel B, which starts 5 µs
    after A ended: a 5 µs bubble a step. Without the sync the host launches B at once and
    B runs right after A."""
    b = TraceBuilder(rank=0)
    bubble = 5_000
    for k in range(1, steps + 1):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            b.annotation("forward", ts=t + 500, dur=60_000)
            b.cpu_op("aten::mm", ts=t + 900, dur=700)
            b.launch_kernel("sgemm_a", cpu_ts=t + 1_000, cpu_dur=500, gpu_ts=t + 2_000,
                            gpu_dur=20_000)
            a_end = t + 22_000
            if with_sync:
                b.cpu_op("aten::item", ts=t + 2_800, dur=20_500)
                b.cpu_op("aten::_local_scalar_dense", ts=t + 2_900, dur=20_300)
                b.runtime(sync, ts=t + 3_000, dur=a_end + 1_000 - (t + 3_000))
                b.cpu_op("aten::add", ts=a_end + 3_000, dur=2_500)
                b.launch_kernel("elementwise_b", cpu_ts=a_end + 3_500, cpu_dur=1_000,
                                gpu_ts=a_end + bubble, gpu_dur=10_000)
            else:
                # the stream wait does not block the host: it must not count
                b.runtime("cudaStreamWaitEvent", ts=t + 1_600, dur=300)
                b.cpu_op("aten::add", ts=t + 2_000, dur=2_500)
                b.launch_kernel("elementwise_b", cpu_ts=t + 2_500, cpu_dur=1_000,
                                gpu_ts=a_end, gpu_dur=10_000)
    return _load(b, tmp_path), (steps * bubble if with_sync else 0)


def idle_gpu_sync(tmp_path: Path, steps: int = STEPS) -> tuple[Trace, int]:
    """A 2 µs ``cudaDeviceSynchronize`` when the GPU is already idle, then 50 µs of host
    work before the next kernel: the GPU is idle 52 µs after the call started, but
    removing the call saves only the 2 µs the host was blocked."""
    b = TraceBuilder(rank=0)
    for k in range(1, steps + 1):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            b.launch_kernel("sgemm_a", cpu_ts=t + 1_000, cpu_dur=500, gpu_ts=t + 2_000,
                            gpu_dur=20_000)
            b.runtime("cudaDeviceSynchronize", ts=t + 40_000, dur=2_000)
            b.launch_kernel("sgemm_b", cpu_ts=t + 92_000, cpu_dur=500, gpu_ts=t + 94_000,
                            gpu_dur=20_000)
    return _load(b, tmp_path), steps * 2_000


def data_loading(tmp_path: Path, stall: bool = True, steps: int = STEPS
                 ) -> tuple[Trace, int]:
    """Each step: a 30 µs data-loader span from 1 µs into the step. With a stall the step's
    kernel starts after the span and runs 7 µs into the next step, i.e. 6 µs into its span:
    the GPU is idle 30 µs of the span in step 1 and 24 µs in the others. Without a stall
    the host ran ahead: the step's kernel runs from 1 µs into the step and covers it."""
    b = TraceBuilder(rank=0)
    span, overlap = 30_000, 6_000
    for k in range(1, steps + 1):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS):
            b.annotation(DATA_LOADER, ts=t + 1_000, dur=span)
            if stall:
                b.launch_kernel("sgemm", cpu_ts=t + span + 1_500, cpu_dur=500,
                                gpu_ts=t + span + 2_000,
                                gpu_dur=STEP_NS - span - 2_000 + 1_000 + overlap)
            else:
                b.launch_kernel("sgemm", cpu_ts=t + 200, cpu_dur=500, gpu_ts=t + 1_000,
                                gpu_dur=STEP_NS)
    expected = span + (steps - 1) * (span - overlap) if stall else 0
    return _load(b, tmp_path), expected


def launch_bound(tmp_path: Path, bound: bool = True, steps: int = STEPS,
                 kernels: int = 30, profiler_steps: bool = True,
                 copies: bool = False) -> tuple[Trace, int]:
    """Each step: ``kernels`` kernels of 2 µs. Launch-bound: calls of 6 µs back to back,
    each kernel starting 1 µs after its call returns: a 4 µs gap between kernels. Not
    launch-bound: the same kernels launched ahead of the GPU, 0.5 µs apart. Steps are
    150 µs longer than their kernels, so the gap between steps is no launch gap. Without
    ``profiler_steps`` the same work has no ``ProfilerStep`` spans around it; with
    ``copies`` two of every three are 2 µs device-to-device copies instead of kernels."""
    b = TraceBuilder(rank=0)
    call, kernel, latency = 6_000, 2_000, 1_000
    step = (kernels + 3) * call + 150_000  # > 100 µs between steps: not a launch gap
    for k in range(1, steps + 1):
        t = (k - 1) * step
        span = b.step(k, ts=t, dur=step - 1_000) if profiler_steps else nullcontext()
        with span:
            for i in range(kernels):
                cpu_ts = t + 1_000 + i * call
                if bound:
                    gpu_ts = cpu_ts + call + latency
                else:
                    gpu_ts = t + 1_000 + kernels * call + i * (kernel + 500)
                if copies and i % 3:
                    b.memcpy("DtoD (Device -> Device)", cpu_ts=cpu_ts, cpu_dur=call,
                             gpu_ts=gpu_ts, gpu_dur=kernel, stream=COMPUTE_STREAM)
                else:
                    b.launch_kernel(f"elementwise_{i % 3}", cpu_ts=cpu_ts, cpu_dur=call,
                                    gpu_ts=gpu_ts, gpu_dur=kernel)
    gap = call - kernel
    return _load(b, tmp_path), (steps * (kernels - 1) * gap if bound else 0)


def pageable_copies(tmp_path: Path, pageable: bool = True, steps: int = STEPS,
                    nbytes: int = 8 << 20, copy_ns: int = 1_600_000,
                    pinned_ns: int = 400_000) -> tuple[Trace, int]:
    """Each step: one ``nbytes`` HtoD copy taking ``copy_ns`` (pageable) and one pinned
    HtoD copy of the same size taking ``pinned_ns``, which sets the reference bandwidth.
    Without the problem both copies are pinned and take ``pinned_ns``."""
    b = TraceBuilder(rank=0)
    step = 4_000_000
    for k in range(1, steps + 1):
        t = (k - 1) * step
        with b.step(k, ts=t, dur=step - 1_000):
            src = "Pageable" if pageable else "Pinned"
            dur = copy_ns if pageable else pinned_ns
            b.memcpy(f"HtoD ({src} -> Device)", cpu_ts=t + 1_000, cpu_dur=dur + 5_000,
                     gpu_ts=t + 3_000, gpu_dur=dur, nbytes=nbytes, stream=COPY_STREAM)
            b.memcpy("HtoD (Pinned -> Device)", cpu_ts=t + dur + 10_000, cpu_dur=3_000,
                     gpu_ts=t + dur + 20_000, gpu_dur=pinned_ns, nbytes=nbytes,
                     stream=COPY_STREAM)
            b.launch_kernel("sgemm", cpu_ts=t + dur + 15_000, cpu_dur=500,
                            gpu_ts=t + dur + 20_000 + pinned_ns + 1_000, gpu_dur=100_000)
    return _load(b, tmp_path), (steps * (copy_ns - pinned_ns) if pageable else 0)


def copies_on_compute(tmp_path: Path, same_stream: bool = True, steps: int = STEPS
                      ) -> tuple[Trace, int]:
    """Each step: a 300 µs HtoD copy (pinned) launched at t + 1 µs, running from t + 2 µs;
    the next compute kernel is launched at t + 52 µs (call returns at t + 52.5 µs). On the
    compute stream it waits for the copy, from t + 52.5 µs to its end at t + 302 µs:
    249.5 µs a step. On a side stream it starts at t + 53 µs."""
    b = TraceBuilder(rank=0)
    step = 1_000_000
    for k in range(1, steps + 1):
        t = (k - 1) * step
        with b.step(k, ts=t, dur=step - 1_000):
            stream = COMPUTE_STREAM if same_stream else COPY_STREAM
            b.memcpy("HtoD (Pinned -> Device)", cpu_ts=t + 1_000, cpu_dur=500,
                     gpu_ts=t + 2_000, gpu_dur=300_000, nbytes=64 << 20, stream=stream)
            gpu_ts = t + 302_000 if same_stream else t + 53_000
            b.launch_kernel("sgemm", cpu_ts=t + 52_000, cpu_dur=500, gpu_ts=gpu_ts,
                            gpu_dur=400_000)
    return _load(b, tmp_path), (steps * (302_000 - 52_500) if same_stream else 0)


# -- warm-up (one-time costs) and host-bound steps ---------------------------------------
WARM_ITERS = 10
WARM_OP_NS = 16_000
WARM_KERNEL_NS = 200_000


def warm_up(tmp_path: Path, free_ns: int = 5_000_000, every: bool = False,
            iterations: int = WARM_ITERS, steps: bool = False) -> tuple[Trace, int]:
    """A loop of ``iterations`` calls of ``aten::linear`` with no ProfilerStep: each call
    runs 16 µs on the CPU (a launch of 5 µs at +10 µs) and its kernel, 200 µs, starts 5 µs
    after its launch returns or after the previous kernel. With ``free_ns`` the first call
    also frees memory for that long before its launch (first cuBLAS use); with ``every``
    every call does; with ``steps`` each call is one ProfilerStep. Expected: the GPU
    idle inside the first call when it is one-time (the whole call: its kernel starts
    after it), else 0."""
    b = TraceBuilder(rank=0)
    t, gpu_free = 0, 0
    first_idle = 0
    for k in range(iterations):
        extra = free_ns if (k == 0 or every) else 0
        dur = WARM_OP_NS + extra
        if steps:
            b.annotation(f"ProfilerStep#{k + 1}", ts=t, dur=dur + 4_000)
        b.cpu_op("aten::linear", ts=t, dur=dur, **{"Input Dims": [[64, 64], [64, 64]]})
        if k == 0:  # the rank's first runtime call (context creation) is not the free
            b.runtime("cudaGetDevice", ts=t + 1_000, dur=1_000)
        if extra:
            b.runtime("cudaFree", ts=t + 5_000, dur=extra)
        launch = t + 10_000 + extra
        start = max(launch + 10_000, gpu_free)
        b.launch_kernel("elementwise_kernel", cpu_ts=launch, cpu_dur=5_000, gpu_ts=start,
                        gpu_dur=WARM_KERNEL_NS)
        if k == 0:
            first_idle = dur
        gpu_free = start + WARM_KERNEL_NS
        t += dur + 4_000
    return _load(b, tmp_path), (first_idle if free_ns and not every else 0)


HOST_STEP_GAP_NS = {"python": 200_000, "dispatch": 200_000, "slow_op": 1_500_000}
HOST_KERNEL_NS = 20_000


def host_bound(tmp_path: Path, kind: str = "python", bound: bool = True,
               steps: int = STEPS, frames: bool = False, graphed: bool = False
               ) -> tuple[Trace, int]:
    """Each step launches kernel A and, after ``H`` of host work (:data:`HOST_STEP_GAP_NS`),
    kernel B. The host work: nothing recorded (``python``), 20 CPU operators of H/20 each
    with no GPU work (``dispatch``), one CPU operator of H (``slow_op``).

    Host-bound: A and B run 20 µs, each starting 5 µs after its launch returns (A at
    +10 µs), so every GPU idle stretch waits on the host (the last, after the last B, to
    the end of the last step: the host works on in the step): expected saving = the
    steps' span less the kernels' time, less the 10 µs before the trace's first kernel
    (a profile of steps starts mid-run: the GPU may still run the unrecorded step
    before). Not bound: A and B run H + 40 µs each, both launched at the start of the
    step, back to back on the GPU across steps: no host gap but the first 6 µs, under the
    noise floor. With ``frames`` (``python`` only) the host
    work is a Python frame ``train.py(10): log_metrics`` whose second half is a child
    frame ``<built-in function sum>`` (``with_stack=True``). With ``graphed`` kernel A is
    replayed from a CUDA graph (``cudaGraphLaunch``), as torch.compile's reduce-overhead
    mode runs the compiled part."""
    b = TraceBuilder(rank=0)
    h = HOST_STEP_GAP_NS[kind]
    kernel = HOST_KERNEL_NS if bound else h + 40_000
    length = 6_000 + h + 10_000 + 2 * kernel + 20_000 if bound else 2 * kernel
    for k in range(1, steps + 1):
        t = (k - 1) * length
        with b.step(k, ts=t, dur=length):
            a_start = t + 10_000 if bound else t + 6_000
            if graphed:
                b.graph_launch([("kernel_a", a_start, kernel, COMPUTE_STREAM)],
                               cpu_ts=t + 1_000, cpu_dur=5_000)
            else:
                b.launch_kernel("kernel_a", cpu_ts=t + 1_000, cpu_dur=5_000,
                                gpu_ts=a_start, gpu_dur=kernel)
            work = t + 6_000 if bound else t + 12_000
            if kind == "dispatch":
                for i in range(20):
                    b.cpu_op("aten::view", ts=work + i * (h // 20), dur=h // 20 - 500)
            elif kind == "slow_op":
                b.cpu_op("aten::unique", ts=work, dur=h)
            if frames:
                b.complete("train.py(10): log_metrics", "python_function", ts=work, dur=h)
                b.complete("<built-in function sum>", "python_function", ts=work + h // 2,
                           dur=h // 2)
            if bound:
                launch, b_start = t + 6_000 + h, t + 6_000 + h + 10_000
            else:
                launch, b_start = t + 6_100, t + 6_000 + kernel
            b.launch_kernel("kernel_b", cpu_ts=launch, cpu_dur=5_000, gpu_ts=b_start,
                            gpu_dur=kernel)
    # after the last B the host works on to the end of the last step: a host gap too.
    # The 10 µs before the trace's first kernel are no gap: a profile of steps starts
    # mid-run, and the GPU may still run the unrecorded step before
    return _load(b, tmp_path), (steps * (length - 2 * kernel) - 10_000 if bound else 0)
