"""Hand-built traces for the launch, queue, bandwidth, operator and sequence tests.

Every time is an integer ns; the expected answers in the tests follow from the times
written here (each case's docstring gives the derivation).
"""

from __future__ import annotations

from pathlib import Path

from kineto_builder import CPU_TID, TraceBuilder

from hta.trace_analysis import TraceAnalysis

BW_ARG = "memory bandwidth (GB/s)"


def load(tmp_path: Path, builder: TraceBuilder, name: str = "rank-0.json") -> TraceAnalysis:
    """Write the trace into its own folder under ``tmp_path`` and load it."""
    folder = tmp_path / name.split(".")[0]
    builder.write(folder / name)
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


def driver_launch(b: TraceBuilder, corr: int, *, cpu_ts: int, cpu_dur: int, gpu_ts: int,
                  gpu_dur: int, name: str = "k_driver") -> None:
    """``cuLaunchKernel`` (category ``cuda_driver``) and its kernel, correlation ``corr``."""
    b.runtime("cuLaunchKernel", cpu_ts, cpu_dur, correlation=corr, cat="cuda_driver")
    b.kernel(name, gpu_ts, gpu_dur, correlation=corr)


def launch_case() -> TraceBuilder:
    """Launches of every family, one graph launch, one copy, unpaired events.

    Rows of the launch statistics (launch order), in ns:

    ===================  ======  =====  =======================================
    launch               cpu     gpu    delay = gpu start - launch end
    ===================  ======  =====  =======================================
    cudaLaunchKernel     4000    2000   5100 - 5000 = 100
    cudaLaunchKernelExC  60000   1000   200000 - 70000 = 130000
    cuLaunchKernel       2000    5000   301000 - 302000 = -1000
    hipLaunchKernel      3000    500    410000 - 403000 = 7000
    cudaLaunchCoop...    1000    1000   425000 - 421000 = 4000
    cudaGraphLaunch      10000   500    515000 - 510000 = 5000   (stream 8)
    cudaGraphLaunch      10000   1000   520000 - 510000 = 10000
    cudaGraphLaunch      10000   2000   521000 - 510000 = 11000
    cudaMemcpyAsync      2000    1000   603000 - 602000 = 1000
    ===================  ======  =====  =======================================

    plus a launch without GPU event (correlation 999) and a kernel without launch (998).
    """
    b = TraceBuilder(rank=0)
    b.launch_kernel("k_short", cpu_ts=1_000, cpu_dur=4_000, gpu_ts=5_100, gpu_dur=2_000)
    b.launch_kernel("k_exc", cpu_ts=10_000, cpu_dur=60_000, gpu_ts=200_000, gpu_dur=1_000,
                    launcher="cudaLaunchKernelExC")
    driver_launch(b, 500, cpu_ts=300_000, cpu_dur=2_000, gpu_ts=301_000, gpu_dur=5_000)
    b.launch_kernel("k_hip", cpu_ts=400_000, cpu_dur=3_000, gpu_ts=410_000, gpu_dur=500,
                    launcher="hipLaunchKernel", stream=0)
    b.launch_kernel("k_coop", cpu_ts=420_000, cpu_dur=1_000, gpu_ts=425_000, gpu_dur=1_000,
                    launcher="cudaLaunchCooperativeKernel")
    b.graph_launch([("g0", 520_000, 1_000, 7), ("g1", 521_000, 2_000, 7),
                    ("g2", 515_000, 500, 8)], cpu_ts=500_000, cpu_dur=10_000)
    b.memcpy("HtoD", cpu_ts=600_000, cpu_dur=2_000, gpu_ts=603_000, gpu_dur=1_000,
             stream=24)
    b.runtime("cudaLaunchKernel", 700_000, 1_000, correlation=999)
    b.kernel("orphan", 710_000, 1_000, correlation=998)
    return b


def queue_case() -> TraceBuilder:
    """Queue lengths with ties, clock skew, a graph launch and unpaired events.

    Stream 7: K1..K3 give (0, 2), (50, 1), (100, 2), (200, 1), (300, 0); K4 starts the
    nanosecond it is launched and K5 before its launch: no change. An unpaired kernel on
    stream 7 at 5000 changes nothing. Graph kernels: stream 8 (1000, 2), (2000, 1),
    (3000, 0); stream 9 (1000, 1), (2500, 0). HIP launch on stream 0: (10000, 1),
    (10100, 0).
    """
    b = TraceBuilder(rank=0)
    b.launch_kernel("K1", cpu_ts=0, cpu_dur=5, gpu_ts=50, gpu_dur=10)
    b.launch_kernel("K2", cpu_ts=0, cpu_dur=5, gpu_ts=200, gpu_dur=10, tid=CPU_TID + 1)
    b.launch_kernel("K3", cpu_ts=100, cpu_dur=5, gpu_ts=300, gpu_dur=10)
    b.launch_kernel("K4", cpu_ts=500, cpu_dur=5, gpu_ts=500, gpu_dur=10)
    b.launch_kernel("K5", cpu_ts=600, cpu_dur=5, gpu_ts=590, gpu_dur=5)
    b.graph_launch([("G0", 2_000, 10, 8), ("G1", 3_000, 10, 8), ("G2", 2_500, 10, 9)],
                   cpu_ts=1_000, cpu_dur=50)
    b.kernel("orphan", 5_000, 10, correlation=998)
    b.runtime("cudaLaunchKernel", 6_000, 5, correlation=999)
    b.launch_kernel("H1", cpu_ts=10_000, cpu_dur=5, gpu_ts=10_100, gpu_dur=10,
                    launcher="hipLaunchKernel", stream=0)
    return b


FULL_LAUNCHES = 1_100
FULL_QUEUE = 1_024


def full_queue_case() -> TraceBuilder:
    """A stream whose queue fills to 1024 entries and blocks the launching thread.

    Launch i < 1024 at 10 i ns; kernel i runs [100000 + 1000 i, +1000). Launch i >= 1024
    blocks until a slot frees: it is issued when kernel i - 1024 starts. The queue reaches
    1024 at 10230 ns and stays there until kernel 76 starts at 176000 ns, the last launch
    (1099) coinciding with kernel 75: 165770 ns at 1024. The trace spans [0, 1200000).
    """
    b = TraceBuilder(rank=0)
    for i in range(FULL_LAUNCHES):
        cpu = 10 * i if i < FULL_QUEUE else 100_000 + 1_000 * (i - FULL_QUEUE)
        b.launch_kernel(f"k{i % 3}", cpu_ts=cpu, cpu_dur=5, gpu_ts=100_000 + 1_000 * i,
                        gpu_dur=1_000)
    return b


def bandwidth_case() -> TraceBuilder:
    """Copies with and without the bandwidth arg, zero-duration ones, every direction.

    HtoD: 10 GB/s (arg) over [1000, 1100), 3000 B over [1050, 1150) = 30 GB/s, and one
    without bytes over [6000, 6100) (undefined). DtoH: 500 B in 0 ns (undefined), 100 B in
    0 ns with the arg 5, 2000 B over [2200, 3200) with a negative arg (ignored: 2 GB/s).
    Memset 2000 B over [3000, 4000) = 2. DtoD 400 B over [4000, 4100) and [4100, 4200) =
    4 each. PtoP 1000 B over [5000, 5500) = 2.
    """
    b = TraceBuilder(rank=0)
    b.memcpy("HtoD", cpu_ts=0, cpu_dur=100, gpu_ts=1_000, gpu_dur=100, nbytes=1_000,
             **{BW_ARG: 10.0})
    b.memcpy("HtoD", cpu_ts=200, cpu_dur=100, gpu_ts=1_050, gpu_dur=100, nbytes=3_000)
    b.memcpy("DtoH", cpu_ts=300, cpu_dur=100, gpu_ts=2_000, gpu_dur=0, nbytes=500)
    b.memcpy("DtoH", cpu_ts=400, cpu_dur=100, gpu_ts=2_100, gpu_dur=0, nbytes=100,
             **{BW_ARG: 5.0})
    b.memcpy("DtoH", cpu_ts=500, cpu_dur=100, gpu_ts=2_200, gpu_dur=1_000, nbytes=2_000,
             **{BW_ARG: -1.0})
    b.launch("Memset (Device)", "gpu_memset", cpu_ts=600, cpu_dur=100, gpu_ts=3_000,
             gpu_dur=1_000, launcher="cudaMemsetAsync", bytes=2_000)
    b.memcpy("DtoD (Device -> Device)", cpu_ts=700, cpu_dur=100, gpu_ts=4_000, gpu_dur=100,
             nbytes=400)
    b.memcpy("DtoD (Device -> Device)", cpu_ts=800, cpu_dur=100, gpu_ts=4_100, gpu_dur=100,
             nbytes=400)
    b.memcpy("PtoP (Device -> Device)", cpu_ts=900, cpu_dur=100, gpu_ts=5_000, gpu_dur=500,
             nbytes=1_000)
    b.launch("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", cpu_ts=1_000, cpu_dur=100,
             gpu_ts=6_000, gpu_dur=100, launcher="cudaMemcpyAsync")
    return b


def operators_case() -> TraceBuilder:
    """Nested operators, overlapping kernels of one call and across calls.

    linear#1 [0, 100) > addmm [10, 60) > launch [20, 30) -> A [70, 90) stream 7;
    linear#1 > launch [65, 75) -> B [80, 120) stream 8. A and B share [80, 90): A 15, B 35.
    linear#2 [200, 300) > addmm [210, 260) > launch [220, 230) -> C [400, 450) stream 7;
    relu [300, 350) > launch [310, 320) -> E [420, 470) stream 9. C and E share
    [420, 450): C 35, E 35. mm [500, 600) launches nothing. A launch outside any operator
    [700, 710) -> D [1000, 1100). GPU busy: 50 + 70 + 100 = 220 ns.
    """
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::linear", 0, 100, **{"Input Dims": [[2, 3], [3, 4]]})
    b.cpu_op("aten::addmm", 10, 50)
    b.launch_kernel("A", cpu_ts=20, cpu_dur=10, gpu_ts=70, gpu_dur=20)
    b.launch_kernel("B", cpu_ts=65, cpu_dur=10, gpu_ts=80, gpu_dur=40, stream=8)
    b.cpu_op("aten::linear", 200, 100, **{"Input Dims": [[5, 3], [3, 4]]})
    b.cpu_op("aten::addmm", 210, 50)
    b.launch_kernel("C", cpu_ts=220, cpu_dur=10, gpu_ts=400, gpu_dur=50)
    b.cpu_op("aten::relu", 300, 50)
    b.launch_kernel("E", cpu_ts=310, cpu_dur=10, gpu_ts=420, gpu_dur=50, stream=9)
    b.cpu_op("aten::mm", 500, 100)
    b.launch_kernel("D", cpu_ts=700, cpu_dur=10, gpu_ts=1_000, gpu_dur=100)
    return b


def sequences_case() -> TraceBuilder:
    """Operators whose names contain "linear", some nested in another match.

    Two aten::linear calls [0, 1000) and [3000, 4000), each addmm > launch gemm, then a
    launch of bias: pattern ``aten::linear|gemm|bias`` twice (GPU 100 + 100 per call).
    aten::linear [5000, 6000) launches gemm only. The annotation my_linear_layer
    [7000, 9000) holds aten::linear [7100, 8000) launching gemm, bias, relu_k: its pattern
    is ``my_linear_layer|gemm|bias|relu_k`` (the nested match is not a root).
    """
    b = TraceBuilder(rank=0)
    for base in (0, 3_000):
        b.cpu_op("aten::linear", base, 1_000)
        b.cpu_op("aten::addmm", base + 100, 400)
        b.launch_kernel("gemm", cpu_ts=base + 200, cpu_dur=100, gpu_ts=base + 2_000,
                        gpu_dur=100)
        b.launch_kernel("bias", cpu_ts=base + 600, cpu_dur=100, gpu_ts=base + 2_100,
                        gpu_dur=100)
    b.cpu_op("aten::linear", 5_000, 1_000)
    b.launch_kernel("gemm", cpu_ts=5_100, cpu_dur=100, gpu_ts=6_000, gpu_dur=100)
    b.annotation("my_linear_layer", 7_000, 2_000)
    b.cpu_op("aten::linear", 7_100, 900)
    for i, name in enumerate(("gemm", "bias", "relu_k")):
        b.launch_kernel(name, cpu_ts=7_200 + 100 * i, cpu_dur=50, gpu_ts=9_500 + 100 * i,
                        gpu_dur=100)
    return b
