"""Capture merge (hta.analysis.capture): graph-replayed kernels mapped to the operators
that captured them, on a generated replay + capture_traces/ job whose FLOPs are known by
construction, and on TraceLens's SGLang decode test job when it is available."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from kineto_builder import TraceBuilder

from hta.trace_analysis import TraceAnalysis

M, K, N = 32, 4096, 1024
LAYERS = 3
GEMM = "Cijk_Alik_Bljk_gemm"
ADD = "elementwise_add_kernel"


def capture_trace(path: Path, layers: int = LAYERS, m: int = M) -> None:
    """One capture window: per layer a wrapper op around aten::mm (one launch) and an
    aten::add (one launch), for batch ``m``; kernels do not run while capturing."""
    b = TraceBuilder(rank=0)
    dims = {"Input Dims": [[m, K], [K, N]], "Input type": ["c10::BFloat16"] * 2}
    b.runtime("cudaStreamBeginCapture", ts=100, dur=10)
    t = 1_000
    for _ in range(layers):
        b.cpu_op("mylib::gemm_wrapper", ts=t, dur=900)
        b.cpu_op("aten::mm", ts=t + 100, dur=700, **dims)
        b.runtime("cudaLaunchKernel", ts=t + 200, dur=100, correlation=t)
        b.cpu_op("aten::add", ts=t + 1_000, dur=500,
                 **{"Input Dims": [[M, N], [M, N]],
                    "Input type": ["c10::BFloat16", "c10::BFloat16"]})
        b.runtime("cudaLaunchKernel", ts=t + 1_100, dur=100, correlation=t + 1)
        t += 2_000
    b.runtime("cudaStreamEndCapture", ts=t, dur=10)
    b.write(path)


def replay_job(folder: Path, layers: int = LAYERS, step: str | None = None) -> Path:
    b = TraceBuilder(rank=0)
    if step:
        b.annotation(step, ts=39_000, dur=10_000)
    kernels = []
    t = 50_000
    for _ in range(layers):
        kernels += [(GEMM, t, 10_000, 7), (ADD, t + 10_000, 2_000, 7)]
        t += 12_000
    b.graph_launch(kernels, cpu_ts=40_000, cpu_dur=5_000)
    b.write(folder / "replay.json")
    return folder


def analyzer(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False, max_workers=1)


def test_replayed_kernels_find_their_operators(tmp_path: Path) -> None:
    folder = replay_job(tmp_path)
    capture_trace(folder / "capture_traces" / "bs_32_rank0.json")
    a = analyzer(folder)
    assert a.ranks == [0]  # capture_traces/ is not read as a rank
    k = a.get_captured_kernels()
    assert len(k) == 2 * LAYERS and k["matched"].all()
    assert list(k["kernel"][:2]) == [GEMM, ADD]
    # the wrapper yields to aten::mm (it has a model), counted once per call
    assert set(k.loc[k["kernel"] == GEMM, "op"]) == {"aten::mm"}
    assert set(k.loc[k["kernel"] == ADD, "op"]) == {"aten::add"}
    gemm = k[k["category"] == "GEMM"]
    assert gemm["flops"].tolist() == [2.0 * M * K * N] * LAYERS
    s = a.get_capture_summary().iloc[0]
    assert s["replays"] == s["matched_replays"] == 1 and s["kernels"] == 2 * LAYERS
    assert s["with_op_pctg"] == 100.0
    assert s["gemm_gflop"] == pytest.approx(LAYERS * 2 * M * K * N / 1e9)
    assert s["replay_time(us)"] == pytest.approx(LAYERS * 12.0)


def test_captured_op_performance(tmp_path: Path) -> None:
    folder = replay_job(tmp_path)
    capture_trace(folder / "capture_traces" / "bs_32_rank0.json")
    p = analyzer(folder).get_captured_op_performance(device="H100 SXM")
    from hta.analysis.perf.op_performance import COLUMNS
    assert list(p.columns) == COLUMNS and len(p) == 2 * LAYERS
    gemm = p[p["op"] == "aten::mm"]
    assert gemm["kernels"].tolist() == [1] * LAYERS
    assert gemm["kernel_time(us)"].tolist() == [10.0] * LAYERS
    # 2 M K N FLOPs in 10 µs
    assert gemm["tflops_per_s"].tolist() == pytest.approx([2 * M * K * N / 10e-6 / 1e12]
                                                          * LAYERS)
    assert (gemm["pct_of_peak"] > 0).all() and (gemm["device"] == "H100 SXM").all()


def test_a_capture_that_does_not_match_says_so(tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    folder = replay_job(tmp_path)
    capture_trace(folder / "capture_traces" / "bs_16_rank0.json", layers=LAYERS + 1)
    a = analyzer(folder)
    with caplog.at_level(logging.WARNING):
        s = a.get_capture_summary().iloc[0]
    assert s["matched_replays"] == 0 and s["with_op_pctg"] == 0.0 and s["gemm_gflop"] == 0
    assert "match none of the 1 graph replay" in caplog.text
    # the rest of the analysis goes on
    assert a.get_temporal_breakdown()["compute_time(us)"].iloc[0] == pytest.approx(36.0)


def test_captures_of_several_batch_sizes(tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """Two captures with as many kernels, for batch 16 and 32 (execution_details.json):
    the step's annotation (a vLLM decode of 32) picks the batch-32 one."""
    step = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk99sqsq32sqsk99)"
    folder = replay_job(tmp_path / "a", step=step)
    for m in (16, 32):
        capture_trace(folder / "capture_traces" / f"bs_{m}_rank0.json", m=m)
    (folder / "capture_traces" / "execution_details.json").write_text(
        '[{"file": "bs_16_rank0.json", "batch_size": 16, "mode": "FULL"},'
        ' {"file": "bs_32_rank0.json", "batch_size": 32, "mode": "FULL"}]')
    s = analyzer(folder).get_capture_summary().iloc[0]
    assert s["gemm_gflop"] == pytest.approx(LAYERS * 2 * 32 * K * N / 1e9)
    # no annotation: ambiguous, the first is taken and a warning says so
    bare = replay_job(tmp_path / "b")
    (bare / "capture_traces").mkdir()
    for f in (folder / "capture_traces").glob("*.json"):
        (bare / "capture_traces" / f.name).write_bytes(f.read_bytes())
    with caplog.at_level(logging.WARNING):
        s = analyzer(bare).get_capture_summary().iloc[0]
    assert s["gemm_gflop"] == pytest.approx(LAYERS * 2 * 16 * K * N / 1e9)
    assert "took the first" in caplog.text


def test_no_capture_folder(tmp_path: Path) -> None:
    a = analyzer(replay_job(tmp_path))
    k = a.get_captured_kernels()
    assert len(k) == 2 * LAYERS and not k["matched"].any() and (k["op"] == "").all()


@pytest.mark.slow
def test_tracelens_sglang_decode() -> None:
    """TraceLens's SGLang decode job (its tests/traces/inference/sglang_decode: a replay
    trace and capture_traces/): GEMM FLOPs within 1 % of the 484.358 GFLOP TraceLens
    reports (145 GEMMs, without its wrapper rows). Set TRACELENS_TRACES to the folder
    holding TraceLens's tests/traces."""
    root = os.environ.get("TRACELENS_TRACES")
    folder = Path(root or "") / "inference" / "sglang_decode"
    if not root or not folder.is_dir():
        pytest.skip("TraceLens's test traces not available: set TRACELENS_TRACES to its "
                    "tests/traces folder")
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    k = a.get_captured_kernels()
    s = a.get_capture_summary().iloc[0]
    assert s["gemm_gflop"] == pytest.approx(484.358, rel=0.01)
    assert int((k["category"] == "GEMM").sum()) == 145
    assert s["with_op_pctg"] > 99
    # TraceLens's GEMM table: 96.02 TFLOP/s mean for the [32, 4096] x [4096, 24576] call
    p = a.get_captured_op_performance()
    big = p[(p["op"] == "aten::mm") & (p["input_dims"] == "[[32, 4096], [4096, 24576]]")]
    assert len(big) == 36
    assert big["tflops_per_s"].mean() == pytest.approx(96.02, rel=0.01)
