"""Hand-built control/test jobs for the trace diff tests; every expected figure is derived
in the docstrings. Times are integer ns; one compute stream (7)."""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

from hta.trace_analysis import TraceAnalysis

GEMM_F = "void gemm<float, 4>(float*, int)"
GEMM_H = "void gemm<half, 8>(half*, int)"
RELU = "relu_kernel"
NEW = "new_kernel"
MS = 1_000_000


def make_control(rank: int = 0, steps: int = 2, step_ns: int = 10 * MS) -> TraceBuilder:
    """``steps`` steps of ``step_ns``; in each step (offset ``o``):

    * ``aten::mm`` [o+100_000, +50_000) launches ``GEMM_F`` (cudaLaunchKernel at o+110_000,
      5_000 long), which runs [o+200_000, o+1_200_000): 1 ms;
    * ``aten::relu`` [o+290_000, +20_000) launches ``RELU`` (at o+300_000, 5_000 long), which
      runs [o+1_300_000, o+1_800_000): 0.5 ms.

    Per step: GPU span 1.6 ms, busy 1.5 ms (all compute), idle 0.1 ms: one 100 µs gap before
    RELU whose launch (o+300_000) came before the stream went idle (o+1_200_000) and which is
    >= 30 µs: ``other``.
    """
    b = TraceBuilder(rank=rank, world_size=2)
    for s in range(steps):
        o = s * step_ns
        b.annotation(f"ProfilerStep#{s + 1}", o, step_ns)
        b.cpu_op("aten::mm", o + 100_000, 50_000)
        b.launch_kernel(GEMM_F, cpu_ts=o + 110_000, cpu_dur=5_000, gpu_ts=o + 200_000,
                        gpu_dur=MS)
        b.cpu_op("aten::relu", o + 290_000, 20_000)
        b.launch_kernel(RELU, cpu_ts=o + 300_000, cpu_dur=5_000, gpu_ts=o + 1_300_000,
                        gpu_dur=500_000)
    return b


def make_test(rank: int = 0, steps: int = 4, step_ns: int = 8 * MS) -> TraceBuilder:
    """``steps`` steps of ``step_ns``; in each step (offset ``o``):

    * ``aten::mm`` launches ``GEMM_H`` (the same kernel with other template arguments),
      which runs [o+200_000, o+1_700_000): 1.5 ms (50 % slower than ``GEMM_F``);
    * ``aten::relu`` launches ``RELU`` at o+300_000, running [o+1_800_000, o+2_300_000);
    * a new ``aten::new`` [o+2_390_000, +20_000) launches ``NEW`` at o+2_400_000, running
      [o+2_500_000, o+2_700_000): 0.2 ms.

    Per step: span 2.5 ms, busy 2.2 ms, idle 0.3 ms: the 100 µs gap before RELU is
    ``other`` (as in control), the 200 µs gap before NEW is ``host_wait`` (its launch at
    o+2_400_000 came after the stream went idle at o+2_300_000).
    """
    b = TraceBuilder(rank=rank, world_size=2)
    for s in range(steps):
        o = s * step_ns
        b.annotation(f"ProfilerStep#{s + 1}", o, step_ns)
        b.cpu_op("aten::mm", o + 100_000, 50_000)
        b.launch_kernel(GEMM_H, cpu_ts=o + 110_000, cpu_dur=5_000, gpu_ts=o + 200_000,
                        gpu_dur=1_500_000)
        b.cpu_op("aten::relu", o + 290_000, 20_000)
        b.launch_kernel(RELU, cpu_ts=o + 300_000, cpu_dur=5_000, gpu_ts=o + 1_800_000,
                        gpu_dur=500_000)
        b.cpu_op("aten::new", o + 2_390_000, 20_000)
        b.launch_kernel(NEW, cpu_ts=o + 2_400_000, cpu_dur=5_000, gpu_ts=o + 2_500_000,
                        gpu_dur=200_000)
    return b


def write_job(folder: Path, *builders: TraceBuilder) -> Path:
    """One ``rank-N.json`` per builder in ``folder``."""
    for b in builders:
        b.write(folder / f"rank-{b.rank}.json")
    return folder


def load(folder: Path) -> TraceAnalysis:
    """Load a folder without cache or progress bar."""
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


def pair(tmp: Path) -> tuple[TraceAnalysis, TraceAnalysis]:
    """The default control (2 steps of 10 ms) and test (4 steps of 8 ms) on rank 0."""
    c = load(write_job(tmp / "control", make_control()))
    t = load(write_job(tmp / "test", make_test()))
    return c, t
