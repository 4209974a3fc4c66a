"""Iterations of a serving engine (hta.analysis.serving) on generated traces whose steps,
kinds and GPU times are known by construction, and on TraceLens's vLLM and SGLang test
jobs when they are available."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kineto_builder import TraceBuilder

from hta.analysis.serving import parse_step_name
from hta.trace_analysis import TraceAnalysis

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
ATTN = "flash_fwd_splitkv_kernel"


def vllm_step(ctx: int, gen: int, tokens: int) -> str:
    return (f"execute_{tokens}_context_{ctx}(sq1sk1sqsq1sqsk1)_generation_{gen}"
            f"(sq1sk1sqsq1sqsk1)")


def engine_job(folder: Path, names: list[str]) -> Path:
    """Step i (0-based) runs on the CPU for 1 ms from i * 10 ms and launches a GEMM of
    (i + 1) * 100 µs then an attention kernel of 50 µs, back to back from 2 ms into it."""
    b = TraceBuilder(rank=0)
    for i, name in enumerate(names):
        t0 = i * 10_000_000
        b.annotation(name, ts=t0, dur=1_000_000)
        b.launch_kernel(GEMM, cpu_ts=t0 + 10_000, cpu_dur=5_000, gpu_ts=t0 + 2_000_000,
                        gpu_dur=(i + 1) * 100_000)
        b.launch_kernel(ATTN, cpu_ts=t0 + 20_000, cpu_dur=5_000,
                        gpu_ts=t0 + 2_000_000 + (i + 1) * 100_000, gpu_dur=50_000)
    b.write(folder / "rank-0.json")
    return folder


def analyzer(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False, max_workers=1)


def test_vllm_iterations(tmp_path: Path) -> None:
    names = [vllm_step(4, 0, 2048), vllm_step(0, 4, 4), vllm_step(0, 4, 4),
             vllm_step(2, 3, 515)]
    a = analyzer(engine_job(tmp_path, names))
    it = a.get_server_iterations()
    assert list(it["kind"]) == ["prefill", "decode", "decode", "mixed"]
    assert list(it["batch"]) == [4, 4, 4, 5] and list(it["tokens"]) == [2048, 4, 4, 515]
    assert (it["source"] == "annotation").all()
    # step i: from its start to its last kernel's end, 2 ms + (i + 1) * 100 µs + 50 µs
    assert it["dur(us)"].tolist() == [2150.0, 2250.0, 2350.0, 2450.0]
    assert it["gpu_busy(us)"].tolist() == [150.0, 250.0, 350.0, 450.0]
    assert it["idle(us)"].tolist() == [2000.0] * 4
    assert it["GEMM(us)"].tolist() == [100.0, 200.0, 300.0, 400.0]
    assert it["attention(us)"].tolist() == [50.0] * 4
    s = a.get_server_iteration_summary().set_index("kind")
    assert s.loc["decode", "iterations"] == 2 and s.loc["decode", "steady_iterations"] == 1
    assert s.loc["decode", "steady_median(us)"] == 2350.0  # the first decode left out
    assert s.loc["prefill", "steady_median(us)"] == 2150.0  # a single one: itself
    assert s.loc["decode", "total(us)"] == 2250.0 + 2350.0
    assert s.loc["decode", "gpu_busy(us)"] == 600.0


def test_sglang_iterations(tmp_path: Path) -> None:
    names = ["step[EXTEND bs=2 toks=300]", "step[DECODE bs=2]", "step[MIXED bs=3]"]
    it = analyzer(engine_job(tmp_path, names)).get_server_iterations()
    assert list(it["kind"]) == ["prefill", "decode", "mixed"]
    assert list(it["batch"]) == [2, 2, 3] and list(it["tokens"]) == [300, -1, -1]


def test_graph_launches_without_annotations(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    for i in range(3):
        t0 = i * 1_000_000
        b.graph_launch([(GEMM, t0 + 100_000, 40_000, 7), (ATTN, t0 + 140_000, 10_000, 7)],
                       cpu_ts=t0, cpu_dur=20_000)
    b.write(tmp_path / "rank-0.json")
    it = analyzer(tmp_path).get_server_iterations()
    assert list(it["source"]) == ["graph launch"] * 3 and list(it["kind"]) == [""] * 3
    assert it["gpu_busy(us)"].tolist() == [50.0] * 3
    assert it["dur(us)"].tolist() == [150.0] * 3


def test_no_iterations(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.launch_kernel(GEMM, cpu_ts=0, cpu_dur=10, gpu_ts=100, gpu_dur=100)
    b.write(tmp_path / "rank-0.json")
    a = analyzer(tmp_path)
    assert a.get_server_iterations().empty and a.get_server_iteration_summary().empty


def test_parse_step_name() -> None:
    assert parse_step_name(vllm_step(0, 32, 32)) == ("decode", 32, 32)
    assert parse_step_name("step[DECODE bs=32]") == ("decode", 32, -1)
    assert parse_step_name("ProfilerStep#3") is None


@pytest.mark.slow
@pytest.mark.parametrize("job, kind, batch", [
    ("vllm_decode_full", "decode", 32), ("vllm_prefilldecode_piecewise", "mixed", 46),
    ("sglang_decode", "decode", 32), ("sglang_prefilldecode", "prefill", 15)])
def test_tracelens_jobs(job: str, kind: str, batch: int) -> None:
    """TraceLens's vLLM and SGLang test jobs (one engine step each). Set TRACELENS_TRACES
    to the folder holding TraceLens's tests/traces."""
    root = os.environ.get("TRACELENS_TRACES")
    folder = Path(root or "") / "inference" / job
    if not root or not folder.is_dir():
        pytest.skip("TraceLens's test traces not available: set TRACELENS_TRACES to its "
                    "tests/traces folder")
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    it = a.get_server_iterations()
    assert len(it) == 1 and it["kind"].iloc[0] == kind and it["batch"].iloc[0] == batch
    row = it.iloc[0]
    assert 0 < row["gpu_busy(us)"] <= row["dur(us)"]
    assert row["idle(us)"] == pytest.approx(row["dur(us)"] - row["gpu_busy(us)"])
    cats = [c for c in it.columns if c.endswith("(us)") and c not in (
        "dur(us)", "gpu_busy(us)", "idle(us)")]
    assert row[cats].sum() >= row["gpu_busy(us)"] * 0.999  # overlap can only add
