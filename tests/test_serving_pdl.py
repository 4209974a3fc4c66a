"""Kernels that overlap on one stream (programmatic dependent launch: a kernel starts
before the previous one on its stream ends), on a generated trace: no kernel is lost and
busy time, idle time, queue length and the critical path count the overlap once."""

from __future__ import annotations

from pathlib import Path

import pytest
from kineto_builder import TraceBuilder

from hta.trace_analysis import TraceAnalysis


@pytest.fixture
def pdl(tmp_path: Path) -> TraceAnalysis:
    """k1 [10, 30) µs, k2 [25, 45) µs (starts 5 µs before k1 ends), k3 [60, 70) µs on
    stream 7; the CPU launches them at 1, 3 and 5 µs and synchronizes from 7 to 71 µs."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=72_000):
        b.launch_kernel("k1", cpu_ts=1_000, cpu_dur=1_000, gpu_ts=10_000, gpu_dur=20_000)
        b.launch_kernel("k2", cpu_ts=3_000, cpu_dur=1_000, gpu_ts=25_000, gpu_dur=20_000)
        b.launch_kernel("k3", cpu_ts=5_000, cpu_dur=1_000, gpu_ts=60_000, gpu_dur=10_000)
        b.runtime("cudaDeviceSynchronize", ts=7_000, dur=64_000)
    b.write(tmp_path / "rank-0.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, max_workers=1)


def test_no_kernel_lost(pdl: TraceAnalysis) -> None:
    ev = pdl.t.rank(0).decoded(["name", "kind"])
    assert sorted(ev[ev["kind"].astype(str) == "computation"]["name"]) == ["k1", "k2", "k3"]
    seg = pdl.get_timeline_segments(resolution_ns=0)
    assert sorted(seg["name"]) == ["k1", "k2", "k3"]


def test_busy_and_idle_count_the_overlap_once(pdl: TraceAnalysis) -> None:
    t = pdl.get_temporal_breakdown().iloc[0]
    # GPU span 10..70 µs; busy: the union 10..45 and 60..70 = 45 µs, not 50
    assert t["compute_time(us)"] == pytest.approx(45.0)
    assert t["idle_time(us)"] == pytest.approx(15.0)
    idle = pdl.get_idle_time_breakdown()[0]
    assert idle["idle_time"].sum() == pytest.approx(15.0)
    assert idle.set_index("idle_category").loc["kernel_wait", "idle_intervals"] == 1


def test_queue_length(pdl: TraceAnalysis) -> None:
    q = pdl.get_queue_length_summary()
    # all three launched before the first runs: three kernels queued at most (k1 and
    # k2 in flight together are two kernels, not more)
    assert int(q["max"].iloc[0]) == 3 and int(q["count"].iloc[0]) == 3


def test_critical_path_counts_the_overlap_once(pdl: TraceAnalysis) -> None:
    graph, path = pdl.critical_path_analysis(0, annotation="")
    assert graph.path_length_ns == path["duration(ns)"].sum() == 72_000  # the step
    gpu = path[path["bound_by"] == "gpu_compute_bound"]
    # k1 alone 10..25, k2 25..45, k3 60..70: 45 µs of GPU work, the busy time above
    assert gpu["duration(ns)"].sum() == 45_000
    assert list(gpu["name"].astype(str)) == ["k1", "k2", "k3"]
    # from the launch call's start (1 µs) to k1's start (10 µs)
    assert path[path["bound_by"] == "launch_overhead"]["duration(ns)"].sum() == 9_000
