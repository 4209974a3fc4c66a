"""A hand-built 2-rank job whose overview figures are known by construction (ns).

Both ranks have two ``ProfilerStep`` spans of 100 000 ns at offsets ``o`` = 0 and 100 000.
In each step (rank 0: ``g`` = 20 000 ns, rank 1: ``g`` = 30 000 ns):

========================  ==================  ==============================  ======
launch call (CPU, ns)     GPU event            GPU interval                    stream
========================  ==================  ==============================  ======
o+2000, 500               ``GEMM``            [o+10 000, o+10 000+g)           7
o+2600, 300               ``RELU``            [o+11 000+g, o+13 000+g)         7
o+3000, 500               ``NCCL`` (comm)     [o+20 000, o+40 000)             20
o+4000, 500 (memcpy)      ``Memcpy HtoD``     [o+50 000, o+55 000), 1 MB       24
o+5000, 500               ``LATE``            [o+70 000, o+71 000)             7
========================  ==================  ==============================  ======

plus ``aten::mm`` [o+1000, o+6000) around the launches. Rank 0: GPU span 10 000 ->
171 000 = 161 µs; union per step 36 µs (72 in all), idle 89; compute (20+2+1) x 2 = 46;
exposed communication 8 x 2 = 16 (NCCL [20, 40) minus compute [20, 30) and [31, 33));
exposed memory 10; overlap 24 / 40 = 60 %. Rank 1: union 38 per step (76), idle 85,
compute 66, exposed comm 0 (NCCL under the GEMM), memory 10, overlap 100 %.

Idle gaps (threshold 30 000 ns): rank 0, stream 7: RELU 1 µs after GEMM (launched
before: kernel wait), LATE 37 µs after RELU (>= 30 µs: other), step 2's GEMM 39 µs after
LATE (launched at 102 000 > 71 000: host wait); stream 20: 80 µs host wait; stream 24: 95
µs host wait. Totals: host 214, kernel 2, other 74. Rank 1: LATE comes 27 µs after RELU
(< 30: kernel wait): host 214, kernel 56, other 0.

Queue on stream 7: launches at o+2000, o+2600, o+5000 before the GPU starts at o+10 000:
max 3. Kernel totals over both ranks (µs): GEMM 100 (rank means 20 and 30), NCCL 80,
Memcpy HtoD 20, RELU 8, LATE 4; all GPU work 212.
"""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

GEMM = "void gemm_kernel<float, 128>(float const*, float*, int)"
RELU = "relu_kernel"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
LATE = "late_kernel"
STEP_NS = 100_000
GEMM_NS = {0: 20_000, 1: 30_000}


def build_rank(rank: int, gemm_name: str = GEMM, op_name: str = "aten::mm") -> TraceBuilder:
    """One rank of the job described in the module docstring."""
    b = TraceBuilder(rank=rank, world_size=2)
    g = GEMM_NS[rank]
    for s in (1, 2):
        o = (s - 1) * STEP_NS
        b.annotation(f"ProfilerStep#{s}", o, STEP_NS)
        b.cpu_op(op_name, o + 1_000, 5_000)
        b.launch_kernel(gemm_name, cpu_ts=o + 2_000, cpu_dur=500, gpu_ts=o + 10_000,
                        gpu_dur=g)
        b.launch_kernel(RELU, cpu_ts=o + 2_600, cpu_dur=300, gpu_ts=o + 11_000 + g,
                        gpu_dur=2_000)
        b.launch_kernel(NCCL, cpu_ts=o + 3_000, cpu_dur=500, gpu_ts=o + 20_000,
                        gpu_dur=20_000, stream=20)
        b.memcpy("HtoD", cpu_ts=o + 4_000, cpu_dur=500, gpu_ts=o + 50_000, gpu_dur=5_000,
                 nbytes=1_000_000, stream=24)
        b.launch_kernel(LATE, cpu_ts=o + 5_000, cpu_dur=500, gpu_ts=o + 70_000, gpu_dur=1_000)
    return b


def write_job(folder: Path, **kw: str) -> Path:
    """``rank-0.json`` and ``rank-1.json`` in ``folder``."""
    for rank in (0, 1):
        build_rank(rank, **kw).write(folder / f"rank-{rank}.json")
    return folder
