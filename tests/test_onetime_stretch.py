"""A first call whose thread records nothing for far longer than its later calls do (a
public 4-bit MLP benchmark's compiled first call: 2.47 ms after the Dynamo cache lookup,
41 µs in the later calls) is a one-time cost, on a trace built here with its twins."""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

from hta.analysis.findings.onetime import one_time_costs
from hta.analysis.findings.steady import steady_window
from hta.job.load import load_trace
from hta.model.trace import RankTrace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64"
PERIOD_NS = 4_000_000
FIRST_GAP_NS = 2_500_000


def timed_calls(folder: Path, gaps: list[int], steps: bool = False) -> RankTrace:
    """Five calls of a ``mlp`` annotation, 4 ms apart: a 100 µs cache lookup, then
    ``gaps[k]`` with nothing recorded, then an ``aten::mm`` launching a 400 µs GEMM and
    a ``cudaDeviceSynchronize`` that waits for it, 20 µs before the call ends."""
    b = TraceBuilder(rank=0)
    for k, gap in enumerate(gaps):
        t = 1_000_000 + k * PERIOD_NS
        if steps:
            b.annotation(f"ProfilerStep#{k}", t - 50_000, PERIOD_NS)
        mm = t + 100_000 + gap
        b.annotation("mlp", t, mm + 490_000 - t)
        b.cpu_op("TorchDynamo Cache Lookup", ts=t + 10_000, dur=90_000)
        b.cpu_op("aten::mm", ts=mm, dur=60_000)
        b.launch_kernel(GEMM, cpu_ts=mm + 20_000, cpu_dur=20_000, gpu_ts=mm + 60_000,
                        gpu_dur=400_000)
        b.runtime("cudaDeviceSynchronize", mm + 70_000, 400_000)
    b.write(folder / "rank-0.json")
    return load_trace(folder, progress=False, cache=False).rank(0)


def test_a_first_call_unrecorded_far_longer_than_its_later_calls_is_one_time(tmp_path):
    rt = timed_calls(tmp_path, [FIRST_GAP_NS, 40_000, 40_000, 40_000, 40_000])
    ot = one_time_costs(rt)
    assert list(ot.why) == ["first stretch"]
    # from the cache lookup's end to the end of the operator that ends the stretch
    assert (int(ot.start[0]), int(ot.end[0])) == (1_100_000, 1_100_000 + FIRST_GAP_NS + 60_000)
    assert rt.symbols[int(rt.column("name")[ot.rows[0]])] == "aten::mm"
    # the findings describe the calls after it: the window starts with the second one
    assert steady_window(rt)[0] >= 1_000_000 + FIRST_GAP_NS


def test_twin_a_stretch_every_call_has_recurs(tmp_path):
    rt = timed_calls(tmp_path, [FIRST_GAP_NS] * 5)
    assert not one_time_costs(rt).rows.size


def test_twin_a_first_stretch_under_ten_times_the_later_ones_recurs(tmp_path):
    rt = timed_calls(tmp_path, [FIRST_GAP_NS, 400_000, 400_000, 400_000, 400_000])
    assert not one_time_costs(rt).rows.size


def test_twin_with_profiler_steps_the_schedule_decides(tmp_path):
    """With ProfilerSteps the steps are the loop (a schedule's warm-up steps leave the
    first call out), so the stretch is not judged."""
    rt = timed_calls(tmp_path, [FIRST_GAP_NS, 40_000, 40_000, 40_000, 40_000], steps=True)
    assert "first stretch" not in set(one_time_costs(rt).why)
