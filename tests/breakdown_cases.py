"""Hand-built traces for the breakdown tests; every expected figure is derived in comments.

Times are integer ns. Streams: 7 and 8 compute, 20 communication, 24 copies.
"""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

from hta.trace_analysis import TraceAnalysis

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
SYMM = "multimem_all_reduce_kernel"
DEEPEP = "void deep_ep::intranode::dispatch<8, 768>(int4*, float*)"
FUSED = "my_fused_collective(float*)"  # an unknown name: communication by its args only
GEMM = "ampere_sgemm_128x64_nn"
TRITON = "triton_poi_fused_add_0"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"


def load(tmp: Path, *builders: TraceBuilder) -> TraceAnalysis:
    """Write one file per builder (``rank-N.json``) and load them."""
    for b in builders:
        b.write(tmp / f"rank-{b.rank}.json")
    return TraceAnalysis(trace_dir=tmp, cache=False, progress=False)


def mixed(rank: int = 0) -> TraceBuilder:
    """Compute, communication and memory overlapping on four streams.

    GPU work (ns)                         stream  class
      K1  [10_000, 20_000)  sgemm            7    compute
      C1  [15_000, 30_000)  NCCL            20    comm   (5_000 under K1: partly hidden)
      M1  [16_000, 18_000)  memcpy HtoD     24    memory (under K1 and C1)
      M2  [28_000, 34_000)  memcpy DtoH     24    memory (2_000 under C1, 4_000 exposed)
      K2  [40_000, 50_000)  sgemm            7    compute
      K3  [45_000, 55_000)  triton           8    compute (overlaps K2: another stream)
      C2  [42_000, 48_000)  symm-mem AR     20    comm   (fully hidden under K2)
      C3  [60_000, 61_000)  DeepEP          20    comm   (exposed)
      S   [70_500, 70_900)  triton           7    compute, sub-µs (400 ns)
      Z   [72_000, 72_000)  fill             7    compute, zero duration (ends the span)

    span 72_000 - 10_000 = 62_000; busy = [10k,34k) 24_000 + [40k,55k) 15_000 + 1_000
    + 400 = 40_400; idle 21_600; compute 10_000 + 15_000 + 400 = 25_400; non-compute
    15_000 = exposed comm ([20k,30k) + [60k,61k)) 11_000 + exposed memory [30k,34k) 4_000;
    comm union 15_000 + 6_000 + 1_000 = 22_000, under compute 5_000 + 6_000 = 11_000 (50 %);
    memory union 8_000.
    """
    b = TraceBuilder(rank=rank, world_size=2)
    b.annotation("ProfilerStep#1", 0, 100_000)
    b.launch_kernel(GEMM, cpu_ts=1_000, cpu_dur=500, gpu_ts=10_000, gpu_dur=10_000)
    b.launch_kernel(NCCL, cpu_ts=2_000, cpu_dur=500, gpu_ts=15_000, gpu_dur=15_000,
                    stream=20)
    b.memcpy("HtoD (Pinned -> Device)", cpu_ts=3_000, cpu_dur=500, gpu_ts=16_000,
             gpu_dur=2_000, stream=24)
    b.memcpy("DtoH (Device -> Pinned)", cpu_ts=4_000, cpu_dur=500, gpu_ts=28_000,
             gpu_dur=6_000, stream=24)
    b.launch_kernel(GEMM, cpu_ts=35_000, cpu_dur=500, gpu_ts=40_000, gpu_dur=10_000)
    b.launch_kernel(TRITON, cpu_ts=36_000, cpu_dur=500, gpu_ts=45_000, gpu_dur=10_000,
                    stream=8)
    b.launch_kernel(SYMM, cpu_ts=37_000, cpu_dur=500, gpu_ts=42_000, gpu_dur=6_000,
                    stream=20)
    b.launch_kernel(DEEPEP, cpu_ts=38_000, cpu_dur=500, gpu_ts=60_000, gpu_dur=1_000,
                    stream=20)
    b.launch_kernel(TRITON, cpu_ts=39_000, cpu_dur=500, gpu_ts=70_500, gpu_dur=400)
    b.launch_kernel(FILL, cpu_ts=39_600, cpu_dur=300, gpu_ts=72_000, gpu_dur=0)
    return b


def idle_case() -> TraceBuilder:
    """Gaps of every category on stream 7, in two steps; threshold 1_000 ns in the tests.

    step 1 = [0, 50_000), step 2 = [50_000, 100_000) (CPU).   launch   gap     category
      A [ 2_000, 10_000)                                       1_000
      B [10_400, 12_000)                                       3_000    400  kernel_wait
      C [21_000, 25_000)                                      20_000  9_000  host_wait
      D [30_000, 31_000)                                      21_000  5_000  other
      E [55_500, 60_000)  (step 2)                            55_000 24_500  host_wait
      F [57_000, 58_000)  inside E: no gap                    56_000
      G [60_000, 60_500)  touches E: no gap                   56_200
      H [60_700, 61_000)                                      56_400    200  kernel_wait
      I [70_000, 71_000)  no launch in the trace (step 2 by ts)   -   9_000  other
      J [71_000, 71_000)  zero duration, touches I            62_000
      K [71_600, 71_900)  sub-µs                              63_000    600  kernel_wait
    stream 7: host 9_000 + 24_500 = 33_500, kernel 400 + 200 + 600 = 1_200,
              other 5_000 + 9_000 = 14_000.
    stream 9: P [1_000, 2_000); Q launched at 2_000 == P's end (not after it: no host
              wait), runs [2_500, 3_000): kernel_wait 500.
    stream 24: memcpy [5_000, 6_000) then [6_000, 7_000): touching, never idle.
    """
    b = TraceBuilder(rank=0)
    b.annotation("ProfilerStep#1", 0, 50_000)
    b.annotation("ProfilerStep#2", 50_000, 50_000)
    for cpu, ts, dur in [(1_000, 2_000, 8_000), (3_000, 10_400, 1_600),
                         (20_000, 21_000, 4_000), (21_000, 30_000, 1_000),
                         (55_000, 55_500, 4_500), (56_000, 57_000, 1_000),
                         (56_200, 60_000, 500), (56_400, 60_700, 300)]:
        b.launch_kernel(GEMM, cpu_ts=cpu, cpu_dur=100, gpu_ts=ts, gpu_dur=dur)
    b.kernel(GEMM, 70_000, 1_000)
    b.launch_kernel(FILL, cpu_ts=62_000, cpu_dur=100, gpu_ts=71_000, gpu_dur=0)
    b.launch_kernel(TRITON, cpu_ts=63_000, cpu_dur=100, gpu_ts=71_600, gpu_dur=300)
    b.launch_kernel(GEMM, cpu_ts=100, cpu_dur=100, gpu_ts=1_000, gpu_dur=1_000, stream=9)
    b.launch_kernel(GEMM, cpu_ts=2_000, cpu_dur=100, gpu_ts=2_500, gpu_dur=500, stream=9)
    b.memcpy("HtoD (Pinned -> Device)", cpu_ts=4_000, cpu_dur=200, gpu_ts=5_000,
             gpu_dur=1_000, stream=24)
    b.memcpy("HtoD (Pinned -> Device)", cpu_ts=4_300, cpu_dur=100, gpu_ts=6_000,
             gpu_dur=1_000, stream=24)
    return b


def overlap_rank(rank: int, comm: list[tuple[int, int]], compute: list[tuple[int, int]],
                 comm_name: str = NCCL, **comm_args: object) -> TraceBuilder:
    """One rank with the given communication and compute kernels (ts, dur in ns)."""
    b = TraceBuilder(rank=rank, world_size=4)
    cpu = 0
    for ts, dur in comm:
        b.launch_kernel(comm_name, cpu_ts=cpu, cpu_dur=10, gpu_ts=ts, gpu_dur=dur, stream=20,
                        **comm_args)
        cpu += 20
    for ts, dur in compute:
        b.launch_kernel(GEMM, cpu_ts=cpu, cpu_dur=10, gpu_ts=ts, gpu_dur=dur)
        cpu += 20
    return b


def kernels_rank(rank: int, durations: dict[str, list[int]]) -> TraceBuilder:
    """Back-to-back compute kernels on stream 7 with the given durations per name."""
    b = TraceBuilder(rank=rank, world_size=2)
    t = 10_000
    for name, durs in durations.items():
        for d in durs:
            b.launch_kernel(name, cpu_ts=t - 5_000, cpu_dur=100, gpu_ts=t, gpu_dur=d)
            t += d + 1_000
    return b


#: Kernel durations (ns) per rank for the folding tests; job totals A 50_000, B 30_000,
#: C 15_000, D 5_000 (100_000).
FOLD_DURATIONS = {
    0: {"gemm_A": [10_000, 10_000, 5_000], "gemm_B": [15_000], "gemm_C": [5_000, 2_000],
        "gemm_D": [2_000]},
    1: {"gemm_A": [25_000], "gemm_B": [10_000, 5_000], "gemm_C": [8_000],
        "gemm_D": [3_000]},
}
