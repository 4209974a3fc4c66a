"""Findings on a rank whose compute kernels all last 0 ns: no rule divides by zero."""

from __future__ import annotations

from pathlib import Path

from diff_cases import load, write_job
from kineto_builder import TraceBuilder


def test_zero_duration_compute_kernels(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0, world_size=1)
    b.annotation("ProfilerStep#1", 0, 5_000_000)
    for i in range(4):
        b.cpu_op("aten::mm", 100_000 + i * 200_000, 50_000)
        b.launch_kernel("ampere_sgemm_128x64_tn", cpu_ts=110_000 + i * 200_000, cpu_dur=5_000,
                        gpu_ts=300_000 + i * 200_000, gpu_dur=0)
    findings = load(write_job(tmp_path / "job", b)).get_findings()
    assert "fp32_gemm" not in set(findings["rule"])
