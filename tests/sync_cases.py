"""Generated traces of hidden synchronisations (the TorchRec pattern of issue 17), with the
GPU idle time they cause known by construction. Times in ns; ``MS`` is a millisecond.

Every step ``k`` (from 1) starts at ``t = (k - 1) * STEP`` and runs ``STEP``:

* a forward kernel F runs ``[t + 1 ms, t + 60 ms)``;
* inside the user annotation ``## sparse_data_dist ##`` the host reads back a few bytes
  twice: the first read starts at ``t + 2 ms`` and blocks until F ends (the copy runs
  ``[t + 60 ms, +2 µs)``), the second starts at ``t + 100.1 ms`` and blocks until the
  embedding kernel E (``[t + 100 ms, t + 120 ms)``) ends;
* after each read the host launches an all-to-all at once (10 ms, then 5 ms, on a
  communication stream: exposed communication), then works in Python (traced Python
  frames, 20 µs apart) before it launches E (at ``t + 100 ms``) and the backward kernel B
  (``[t + 140 ms, t + 199 ms)``); it works in Python to the end of the step and into the
  next one, so the host never waits on anything but the reads.

The GPU idles ``[t, t + 1 ms)``, 38 µs between each read-back's copy and its all-to-all
(40 µs with no copy), ``[t + 70.04 ms, t + 100 ms)``, ``[t + 125.04 ms, t + 140 ms)`` and
``[t + 199 ms, t + 200 ms)``. Every piece after the first read of step 1 comes after a
read-back that blocked the host longer than the idle that follows it before the next
one, so the saving is the whole idle time but the first millisecond of step 1 (no read
before it) and the last millisecond of the last step (no GPU work after it in the trace).
"""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

from hta.job.load import load_trace
from hta.model.trace import Trace

MS = 1_000_000
US = 1_000
STEP = 200 * MS
STEPS = 4
COMM_STREAM = 20
SIDE_STREAM = 24
ANNOTATION = "## sparse_data_dist ##"
ALL_TO_ALL = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
READ_BYTES = 256
#: (start of the read, end of the kernel it waits for, all-to-all length) per read
READS = ((2 * MS, 60 * MS, 10 * MS), (100 * MS + 100 * US, 120 * MS, 5 * MS))


def _python(b: TraceBuilder, start: int, end: int) -> None:
    """Host work in Python (``with_stack`` frames) over ``[start, end)``: 1 ms frames with
    20 µs of untraced time between them."""
    while start < end:
        b.complete("torchrec/sparse/jagged_tensor.py(1452): permute", "python_function",
                   ts=start, dur=min(MS, end - start))
        start += MS + 20 * US


def _read_back(b: TraceBuilder, variant: str, start: int, drain: int) -> int:
    """One blocking read that starts at ``start`` and waits for the GPU to drain at
    ``drain``; returns when the host is free again."""
    if variant == "stream_sync":
        # torch.cuda.current_stream().synchronize(): no operator, no copy
        b.runtime("cudaStreamSynchronize", ts=start, dur=drain + 10 * US - start)
        return drain + 10 * US
    outer, inner = (("aten::to", "aten::_to_copy"), ("aten::item", "aten::_local_scalar_dense")
                    )[variant == "item"]
    nbytes = 4 if variant == "item" else READ_BYTES
    back = drain + 20 * US
    b.cpu_op(outer, ts=start, dur=back - start)
    b.cpu_op(inner, ts=start + 2 * US, dur=back - 2 * US - start - 2 * US)
    if variant == "to":
        b.cpu_op("aten::copy_", ts=start + 4 * US, dur=back - 4 * US - start - 4 * US)
    b.memcpy("DtoH (Device -> Pageable)", cpu_ts=start + 6 * US, cpu_dur=drain + 10 * US
             - start - 6 * US, gpu_ts=drain, gpu_dur=2 * US, nbytes=nbytes)
    b.runtime("cudaStreamSynchronize", ts=drain + 12 * US, dur=3 * US)
    return back


def hidden_sync(tmp_path: Path, variant: str = "to", steps: int = STEPS,
                host_works: bool = True) -> tuple[Trace, int]:
    """The module's job. ``variant``: ``to`` (``tensor.to("cpu")`` of 256 bytes into
    pageable memory), ``item`` (``.item()``, 4 bytes), ``stream_sync`` (an explicit
    ``cudaStreamSynchronize``). Returns the trace and the GPU idle the reads cause (ns).
    Without ``host_works`` the trace shows no host work between the launches (the host
    could as well be waiting on something else): only the gap from each read's drain to
    the all-to-all launched right after it is the reads' doing."""
    b = TraceBuilder(rank=0)
    for k in range(1, steps + 1):
        t = (k - 1) * STEP
        with b.step(k, ts=t, dur=STEP):
            b.launch_kernel("sgemm_fwd", cpu_ts=t + 980 * US, cpu_dur=10 * US,
                            gpu_ts=t + MS, gpu_dur=59 * MS)
            b.annotation(ANNOTATION, ts=t + 1_500 * US, dur=130 * MS)
            for i, (start, drain, comm) in enumerate(READS):
                if i:
                    b.launch_kernel("embedding_fwd_kernel", cpu_ts=t + 99_980 * US,
                                    cpu_dur=10 * US, gpu_ts=t + 100 * MS, gpu_dur=20 * MS)
                if host_works:
                    _python(b, t + (99_990 if i else 990) * US, t + start)
                back = _read_back(b, variant, t + start, t + drain)
                b.cpu_op("c10d::alltoall_base_", ts=back + 5 * US, dur=20 * US)
                b.launch_kernel(ALL_TO_ALL, cpu_ts=back + 10 * US, cpu_dur=10 * US,
                                gpu_ts=t + drain + 40 * US, gpu_dur=comm,
                                stream=COMM_STREAM)
                if host_works:
                    _python(b, back + 30 * US, t + (139_970 if i else 99_970) * US)
            b.launch_kernel("sgemm_bwd", cpu_ts=t + 139_980 * US, cpu_dur=10 * US,
                            gpu_ts=t + 140 * MS, gpu_dur=59 * MS)
            if host_works:  # the host works on through the steps
                _python(b, t + 10 * US, t + 970 * US)
                _python(b, t + 140 * MS, t + STEP - 10 * US)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    gap = 40 * US if variant == "stream_sync" else 38 * US  # no 2 µs copy to wait for
    per_step = (gap + (100 * MS - 70_040 * US)            # after the first read
                + gap + (140 * MS - 125_040 * US) + MS    # after the second, to the end
                + MS)                                     # and the next step's first ms
    if not host_works:
        return trace, 2 * steps * gap
    # step 1 has no read before its first ms; the last step's last ms has no work after it
    return trace, steps * per_step - 2 * MS


def hidden_sync_fixed(tmp_path: Path, steps: int = STEPS) -> Trace:
    """The same job with the reads fixed: ``non_blocking=True`` copies into pinned memory
    on a side stream, read a step later. The host runs ahead, the GPU never idles inside
    the steps and the all-to-alls run under the embedding and backward kernels."""
    b = TraceBuilder(rank=0)
    for k in range(1, steps + 1):
        t = (k - 1) * STEP
        with b.step(k, ts=t, dur=STEP):
            b.annotation(ANNOTATION, ts=t + 200 * US, dur=MS)
            b.launch_kernel("sgemm_fwd", cpu_ts=t + 10 * US, cpu_dur=10 * US, gpu_ts=t,
                            gpu_dur=100 * MS)
            for i in range(2):
                b.cpu_op("aten::to", ts=t + 300 * US + i * 100 * US, dur=30 * US)
                b.memcpy("DtoH (Device -> Pinned)", cpu_ts=t + 310 * US + i * 100 * US,
                         cpu_dur=8 * US, gpu_ts=t + 100 * MS + i * 10 * US, gpu_dur=2 * US,
                         nbytes=READ_BYTES, stream=SIDE_STREAM)
                b.launch_kernel(ALL_TO_ALL, cpu_ts=t + 350 * US + i * 100 * US,
                                cpu_dur=10 * US, gpu_ts=t + 101 * MS + i * 20 * MS,
                                gpu_dur=10 * MS, stream=COMM_STREAM)
            b.launch_kernel("embedding_fwd_kernel", cpu_ts=t + 500 * US, cpu_dur=10 * US,
                            gpu_ts=t + 100 * MS, gpu_dur=20 * MS)
            b.launch_kernel("sgemm_bwd", cpu_ts=t + 600 * US, cpu_dur=10 * US,
                            gpu_ts=t + 120 * MS, gpu_dur=80 * MS)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)
