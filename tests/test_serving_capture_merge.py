"""Capture merge in the operator tables (hta.analysis.perf.replayed): graph-replayed
kernels count with the operator calls that captured them in get_op_performance, its
summary, the category split, the roofline finding and the report, each kernel once; on a
generated replay + capture_traces/ job whose answer is known by construction, and on
TraceLens's SGLang and vLLM decode jobs when TRACELENS_TRACES names its tests/traces."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from kineto_builder import TraceBuilder
from test_serving_capture import ADD, GEMM, K, M, N

from hta.analysis.perf.op_performance import op_performance
from hta.analysis.perf.replayed import TABLE
from hta.model.categories import op_category
from hta.model.selection import Selection, restrict
from hta.trace_analysis import TraceAnalysis

LAYERS = 3
GEMM_US = 40  # each replayed GEMM: far below the H100's roof at these shapes
ADD_US = 6
TAIL = "tail_fill_kernel"  # its capture launch has no operator around it
TAIL_US = 8
MM_US = 20  # the ordinary aten::mm outside the graph
H100 = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]}
DIMS = {"Input Dims": [[M, K], [K, N]], "Input type": ["c10::BFloat16"] * 2}
GEMM_FLOPS = 2.0 * M * K * N


def capture_trace(path: Path) -> None:
    """One window: per layer aten::mm (under a wrapper) and aten::add, one launch each,
    then one launch outside any operator."""
    b = TraceBuilder(rank=0)
    b.runtime("cudaStreamBeginCapture", ts=100, dur=10)
    t = 1_000
    for _ in range(LAYERS):
        b.cpu_op("mylib::gemm_wrapper", ts=t, dur=900)
        b.cpu_op("aten::mm", ts=t + 100, dur=700, **DIMS)
        b.runtime("cudaLaunchKernel", ts=t + 200, dur=100, correlation=t)
        b.cpu_op("aten::add", ts=t + 1_000, dur=500,
                 **{"Input Dims": [[M, N], [M, N]], "Input type": ["c10::BFloat16"] * 2})
        b.runtime("cudaLaunchKernel", ts=t + 1_100, dur=100, correlation=t + 1)
        t += 2_000
    b.runtime("cudaLaunchKernel", ts=t, dur=100, correlation=t)
    b.runtime("cudaStreamEndCapture", ts=t + 500, dur=10)
    b.write(path)


def replay_job(folder: Path, capture: bool = True) -> Path:
    """Step 5: the runner's forward op around one graph launch of 2 * LAYERS + 1 kernels
    (GEMM, add per layer, then the tail); step 6: an ordinary aten::mm of the same
    shapes."""
    b = TraceBuilder(rank=0, extra_top_level=dict(H100))
    b.annotation("ProfilerStep#5", ts=30_000, dur=60_000)
    b.cpu_op("runner::forward", ts=39_000, dur=8_000)
    kernels = []
    t = 50_000
    for _ in range(LAYERS):
        kernels += [(GEMM, t, GEMM_US * 1_000, 7), (ADD, t + GEMM_US * 1_000, ADD_US * 1_000, 7)]
        t += (GEMM_US + ADD_US) * 1_000
    kernels.append((TAIL, t, TAIL_US * 1_000, 7))
    b.graph_launch(kernels, cpu_ts=40_000, cpu_dur=5_000)
    b.annotation("ProfilerStep#6", ts=300_000, dur=100_000)
    b.cpu_op("aten::mm", ts=310_000, dur=5_000, **DIMS)
    b.launch_kernel(GEMM, cpu_ts=311_000, cpu_dur=1_000, gpu_ts=320_000,
                    gpu_dur=MM_US * 1_000)
    b.write(folder / "replay.json")
    if capture:
        capture_trace(folder / "capture_traces" / "bs_32_rank0.json")
    return folder


def analyzer(folder: Path, **kw: object) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False, max_workers=1,
                         **kw)


def test_op_performance_counts_each_replayed_kernel_once(tmp_path: Path) -> None:
    bare = analyzer(replay_job(tmp_path / "bare", capture=False)).get_op_performance()
    merged = analyzer(replay_job(tmp_path / "merged")).get_op_performance()
    # without the capture: the runner's forward owns every replayed kernel
    fwd = bare[bare["op"] == "runner::forward"].iloc[0]
    assert fwd["kernels"] == 2 * LAYERS + 1 and not bare["captured"].any()
    # with it: one row per captured call; the forward keeps the tail alone
    cap = merged[merged["captured"]]
    assert sorted(cap["op"]) == ["aten::add"] * LAYERS + ["aten::mm"] * LAYERS
    assert cap["kernels"].tolist() == [1] * 2 * LAYERS
    fwd = merged[merged["op"] == "runner::forward"].iloc[0]
    assert fwd["kernels"] == 1 and fwd["kernel_time(us)"] == TAIL_US and not fwd["captured"]
    # nothing lost, nothing twice
    assert merged["kernels"].sum() == bare["kernels"].sum() == 2 * LAYERS + 2
    assert merged["kernel_time(us)"].sum() == pytest.approx(bare["kernel_time(us)"].sum())
    # GEMM FLOPs: three captured calls and the ordinary one, 2 M K N each
    gemm = merged[merged["category"] == "GEMM"]
    assert gemm["flops"].tolist() == [GEMM_FLOPS] * (LAYERS + 1)
    assert gemm["captured"].tolist() == [True] * LAYERS + [False]
    mm = cap[cap["op"] == "aten::mm"]
    assert mm["kernel_time(us)"].tolist() == [GEMM_US] * LAYERS
    assert mm["tflops_per_s"].tolist() == pytest.approx(
        [GEMM_FLOPS / (GEMM_US * 1e-6) / 1e12] * LAYERS)
    assert (mm["device"] == "H100 SXM").all() and mm["pct_of_peak"].notna().all()
    assert (cap["iteration"] == 5).all()


def test_captured_rows_equal_get_captured_op_performance(tmp_path: Path) -> None:
    a = analyzer(replay_job(tmp_path))
    rows = a.get_op_performance()
    mine = rows[rows["captured"]].reset_index(drop=True)
    theirs = a.get_captured_op_performance()
    assert list(theirs.columns) == list(rows.columns)
    pd.testing.assert_frame_equal(mine, theirs, check_dtype=False)
    # the index is the call's first replayed kernel's
    ev = a.t.rank(0).events
    first = ev.set_index("index").loc[mine["index"]]
    assert (np.asarray(a.t.symbols, dtype=object)[first["name"]]
            == np.where(mine["op"] == "aten::mm", GEMM, ADD)).all()


def test_summary_and_category_time(tmp_path: Path) -> None:
    a = analyzer(replay_job(tmp_path))
    s = a.get_op_performance_summary()
    mm = s[s["op"] == "aten::mm"].set_index("captured")
    assert mm.loc[True, "calls"] == LAYERS and mm.loc[False, "calls"] == 1
    assert mm.loc[True, "kernel_time(us)"] == LAYERS * GEMM_US
    cats = a.get_category_time().set_index("category")["kernel_time(us)"]
    assert cats["GEMM"] == pytest.approx(LAYERS * GEMM_US + MM_US)
    assert cats[op_category("aten::add")] == pytest.approx(LAYERS * ADD_US)
    assert cats.sum() == pytest.approx(LAYERS * (GEMM_US + ADD_US) + TAIL_US + MM_US)
    by = a.get_op_performance_summary(by="category").set_index("category")
    assert by.loc["GEMM", "calls"] == LAYERS + 1


def test_roofline_finding_covers_replayed_calls(tmp_path: Path) -> None:
    """The replayed GEMMs (3 x 40 µs at ~6.5 % of the roof) make an ops_below_roof
    finding; without the capture the one ordinary call (20 µs) is too short for one."""
    f = analyzer(replay_job(tmp_path / "m")).get_findings(min_share=0)
    roof = f[f["rule"] == "ops_below_roof"]
    assert len(roof) == 1
    assert "aten::mm [[32, 4096], [4096, 1024]]" in roof["evidence"].iloc[0]
    assert "capture traces" in roof["evidence"].iloc[0]
    assert "ran 4 time(s)" in roof["evidence"].iloc[0]  # 3 replayed + the ordinary one
    bare = analyzer(replay_job(tmp_path / "b", capture=False)).get_findings(min_share=0)
    assert not (bare["rule"] == "ops_below_roof").any()


def test_rows_of_some_calls_on_a_capture_merge(tmp_path: Path) -> None:
    """With a capture merge, the rows of some calls (``rank_op_columns``) are the
    table's rows of those calls, captured ones included."""
    from hta.analysis.perf.op_performance import op_frame, rank_op_columns, rank_op_performance

    a = analyzer(replay_job(tmp_path / "m"))
    a.merge_capture_traces()
    rt = a.t.rank(0)
    table = rank_op_performance(rt)
    picked = table.iloc[[0, int(np.argmax(table["captured"].to_numpy()))]]
    assert picked["captured"].tolist() == [False, True]
    pd.testing.assert_frame_equal(op_frame(rank_op_columns(rt, picked["index"].to_numpy())),
                                  picked.reset_index(drop=True))


def test_restricted_to_steps(tmp_path: Path) -> None:
    """The table is keyed by start and stream, so a rank restricted to some steps (row
    numbers change) keeps its replayed calls."""
    a = analyzer(replay_job(tmp_path))
    a.merge_capture_traces()
    only5 = op_performance(restrict(a.t, Selection.of(iterations=[5])))
    assert only5["captured"].sum() == 2 * LAYERS
    assert not (~only5["captured"] & (only5["op"] == "aten::mm")).any()
    only6 = op_performance(restrict(a.t, Selection.of(iterations=[6])))
    assert not only6["captured"].any() and only6["op"].tolist() == ["aten::mm"]


def test_kept_out_of_memory(tmp_path: Path) -> None:
    """A job whose ranks stay in local entries gets the merge where the rank is read."""
    from hta.job.distributed import DistributedJob

    a = analyzer(replay_job(tmp_path), in_memory=False)
    assert isinstance(a.t, DistributedJob)
    rows = a.get_op_performance()
    assert rows["captured"].sum() == 2 * LAYERS
    assert rows.loc[rows["category"] == "GEMM", "flops"].sum() == (LAYERS + 1) * GEMM_FLOPS


def test_no_capture_folder_reads_nothing(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    a = analyzer(replay_job(tmp_path, capture=False))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no capture folder: nothing to read")

    monkeypatch.setattr(TraceAnalysis, "get_captured_kernels", refuse)
    rows = a.get_op_performance()
    assert not rows["captured"].any() and TABLE not in a.t.rank(0).tables
    assert a.merge_capture_traces().empty


def test_explicit_capture_dir(tmp_path: Path) -> None:
    """A capture folder elsewhere, named; merging again with None changes nothing."""
    folder = replay_job(tmp_path / "job", capture=False)
    capture_trace(tmp_path / "caps" / "bs_32_rank0.json")
    a = analyzer(folder)
    s = a.merge_capture_traces(tmp_path / "caps").iloc[0]
    assert s["with_op_time(us)"] == LAYERS * (GEMM_US + ADD_US)
    assert s["gemm_gflop"] == pytest.approx(LAYERS * GEMM_FLOPS / 1e9)
    a.merge_capture_traces()
    assert a.get_op_performance()["captured"].sum() == 2 * LAYERS


def _tracelens(job: str) -> Path:
    root = os.environ.get("TRACELENS_TRACES")
    folder = Path(root or "") / "inference" / job
    if not root or not folder.is_dir():
        pytest.skip("TraceLens's test traces not available: set TRACELENS_TRACES to its "
                    "tests/traces folder")
    return folder


def _before_and_after(folder: Path) -> tuple[TraceAnalysis, pd.DataFrame, pd.DataFrame]:
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    before = op_performance(a.t)  # the analysis itself: no merge yet
    return a, before, a.get_op_performance()


@pytest.mark.slow
def test_tracelens_sglang_decode_operator_table() -> None:
    """GEMM rows of get_op_performance: 484.358 GFLOP (TraceLens's de-duplicated total),
    145 captured aten::mm calls; their % of the roof as get_captured_op_performance."""
    a, before, rows = _before_and_after(_tracelens("sglang_decode"))
    assert before.loc[before["category"] == "GEMM", "flops"].sum() == 0
    gemm = rows[rows["category"] == "GEMM"]
    assert gemm["flops"].sum() / 1e9 == pytest.approx(484.358, rel=0.01)
    assert len(gemm) == 145 and gemm["captured"].all()
    theirs = a.get_captured_op_performance()
    mine = rows[rows["captured"]].reset_index(drop=True)
    np.testing.assert_allclose(mine["pct_of_peak"].to_numpy(float),
                               theirs["pct_of_peak"].to_numpy(float), equal_nan=True)
    # the 544 replayed kernels had no operator: now every one has
    assert rows["kernels"].sum() == before["kernels"].sum() + 544


@pytest.mark.slow
def test_tracelens_vllm_decode_full_operator_table() -> None:
    """vLLM's full-graph decode: the 421 replayed kernels leave the operator around the
    graph launch (or none) for their captured calls; the captured GEMMs' 40.910 GFLOP."""
    a, before, rows = _before_and_after(_tracelens("vllm_decode_full"))
    s = a.get_capture_summary().iloc[0]
    assert s["kernels"] == 421 and s["with_op_pctg"] == 100.0
    cap = rows[rows["captured"]]
    assert cap["kernels"].sum() == 421
    gemm = rows[rows["category"] == "GEMM"]  # 72 captured, and the eager lm_head
    assert len(gemm) == 73 and gemm["captured"].sum() == 72
    assert cap.loc[cap["category"] == "GEMM", "flops"].sum() / 1e9 == pytest.approx(
        40.910, rel=1e-3)
    # the graph launch has no operator around it here: before, its kernels counted
    # nowhere; now each counts once, with its call, beside the 13 ordinary calls
    assert not before["captured"].any() and before["kernels"].sum() == 13
    assert rows["kernels"].sum() == 13 + 421
    assert rows["kernel_time(us)"].sum() == pytest.approx(
        before["kernel_time(us)"].sum() + s["replay_time(us)"])


def test_report_hardware_section(tmp_path: Path) -> None:
    """The report's operator table and findings count the captured calls, and say so."""
    from hta.report.builder import build_sections

    sections = {s.id: s for s in build_sections(analyzer(replay_job(tmp_path)))}
    hw = sections["hardware"]
    assert not hw.error
    assert any("captured true are graph-replayed" in n for n in hw.notes)
    html = " ".join(str(t) for t in hw.tables)
    assert "captured" in html and "aten::mm" in html
