"""The diff's headline: each side's time in its own unit, the GPU span where a side has no
steps, and a note when one side has no GPU work (issue: the diff headline; CPU-only
traces)."""

from __future__ import annotations

from pathlib import Path

from diff_cases import load, write_job
from kineto_builder import TraceBuilder

from hta.analysis.diff.job import format_time, format_time_pair
from hta.trace_diff import TraceDiff

MS = 1_000_000


def one_step(rank: int, step_ns: int, kernel_ns: int) -> TraceBuilder:
    b = TraceBuilder(rank=rank, world_size=1)
    b.annotation("ProfilerStep#1", 0, step_ns)
    b.cpu_op("aten::mm", 100_000, 50_000)
    b.launch_kernel("gemm", cpu_ts=110_000, cpu_dur=5_000, gpu_ts=200_000, gpu_dur=kernel_ns)
    return b


def test_each_side_in_its_own_unit(tmp_path: Path) -> None:
    c = load(write_job(tmp_path / "c", one_step(0, 47_300_000, MS)))
    t = load(write_job(tmp_path / "t", one_step(0, 1_210_000_000, MS)))
    job = TraceDiff.compare_jobs(c, t)
    assert job.verdict.startswith("step time 47.3 ms -> 1.21 s (+2458.1%)"), job.verdict
    assert format_time_pair(812.0, 2_500.0) == ("812.0 µs", "2.5 ms")
    assert format_time(-1_500_000) == "-1.50 s"


def test_cpu_only_against_gpu_is_noted(tmp_path: Path) -> None:
    cpu = TraceBuilder(rank=0, world_size=1)
    cpu.annotation("ProfilerStep#1", 0, 10 * MS)
    cpu.cpu_op("aten::mm", 100_000, 5 * MS)
    c = load(write_job(tmp_path / "c", cpu))
    t = load(write_job(tmp_path / "t", one_step(0, 10 * MS, MS)))
    job = TraceDiff.compare_jobs(c, t)
    assert any(n.startswith("devices differ: control has no GPU work (a CPU-only trace), "
                            "test has") for n in job.notes), job.notes
    same = TraceDiff.compare_jobs(t, t)
    assert not any("devices differ" in n for n in same.notes)
