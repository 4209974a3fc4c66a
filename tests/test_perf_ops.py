"""get_op_performance, its summary and the category split on traces built in code."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES, absent_reason
from kineto_builder import TraceBuilder

from hta.model.devices import custom_device
from hta.trace_analysis import TraceAnalysis

TRACES = Path(os.environ.get("HTA_SHARED_TRACES", SHARED_TRACES))
H100 = {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85e9, "numSms": 132}
M, K, N = 4096, 4096, 4096


def _job(tmp_path: Path, shapes: bool = True, props: dict | None = None) -> TraceAnalysis:
    """One step: linear -> addmm -> GEMM kernel (bf16, 1 ms); relu -> kernel (0.5 ms);
    a graph replay of two kernels outside any operator; an all-reduce kernel."""
    b = TraceBuilder(rank=0)
    b.extra_top_level["deviceProperties"] = [props or H100]
    bf16 = "c10::BFloat16"
    dims = {"Input Dims": [[M, K], [N, K], [N]], "Input type": [bf16] * 3} if shapes else {}
    with b.step(1, ts=0, dur=100_000):
        b.cpu_op("aten::linear", ts=1_000, dur=20_000, **dims)
        adims = {"Input Dims": [[N], [M, K], [K, N], [], []],
                 "Input type": [bf16] * 3 + ["Scalar"] * 2} if shapes else {}
        b.cpu_op("aten::addmm", ts=2_000, dur=10_000, **adims)
        b.launch_kernel("sm90_xmma_gemm_bf16bf16_bf16f32", cpu_ts=3_000, cpu_dur=1_000,
                        gpu_ts=30_000, gpu_dur=1_000_000 // 1000 * 1000)
        rdims = {"Input Dims": [[M, N]], "Input type": [bf16]} if shapes else {}
        b.cpu_op("aten::relu", ts=25_000, dur=5_000, **rdims)
        b.launch_kernel("void at::native::vectorized_elementwise_kernel<4, relu>", cpu_ts=26_000,
                        cpu_dur=1_000, gpu_ts=1_040_000, gpu_dur=500_000)
        b.graph_launch([("triton_poi_fused_add_0", 1_600_000, 100_000, 7),
                        ("nvjet_tst_128x256", 1_700_000, 200_000, 7)], cpu_ts=40_000,
                       cpu_dur=2_000)
        b.launch_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", cpu_ts=50_000,
                        cpu_dur=1_000, gpu_ts=2_000_000, gpu_dur=300_000, stream=20)
    b.write(tmp_path / "rank-0.json")
    return TraceAnalysis(tmp_path, cache=False, progress=False)


def test_rows_at_innermost_operator(tmp_path: Path) -> None:
    df = _job(tmp_path).get_op_performance()
    assert df["op"].tolist() == ["aten::addmm", "aten::relu"]  # linear is not a row
    mm = df.iloc[0]
    assert mm["category"] == "GEMM" and mm["kernels"] == 1
    assert mm["kernel_time(us)"] == 1000.0
    flops = 2.0 * M * N * K
    assert mm["flops"] == flops
    assert mm["bytes"] == 2 * (N + M * K + K * N + M * N)
    assert mm["tflops_per_s"] == pytest.approx(flops / 1e-3 / 1e12)
    # H100 SXM bf16 dense 989.5 TFLOP/s, 3.35 TB/s; intensity ~1365 > ridge ~295
    assert mm["device"] == "H100 SXM" and mm["bound"] == "compute"
    assert mm["pct_of_peak"] == pytest.approx(100 * flops / 1e-3 / 1e12 / 989.5)
    relu = df.iloc[1]
    assert relu["category"] == "elementwise" and relu["bound"] == "memory"
    assert relu["bytes"] == 2 * 2 * M * N
    assert relu["pct_of_peak"] == pytest.approx(100 * (4 * M * N / 5e-4 / 1e12) / 3.35)


def test_columns_of_some_calls_equal_the_table_s(tmp_path: Path) -> None:
    """``rank_op_columns`` models only the calls asked for (what the roofline finding
    reads of the calls no other rule claims): their rows, in order, equal the whole
    table's; none asked, none given."""
    import pandas as pd

    from hta.analysis.perf.op_performance import op_frame, rank_op_columns, rank_op_performance

    rt = _job(tmp_path).t.rank(0)
    table = rank_op_performance(rt)
    assert len(table) == 2
    for picked in ([0], [1], [0, 1], [1, 0]):
        want = table.iloc[sorted(picked)].reset_index(drop=True)
        got = op_frame(rank_op_columns(rt, table["index"].to_numpy()[picked]))
        pd.testing.assert_frame_equal(got, want)
    assert len(op_frame(rank_op_columns(rt, np.array([-5])))) == 0


def test_no_shapes_no_model(tmp_path: Path) -> None:
    df = _job(tmp_path, shapes=False).get_op_performance()
    assert df["flops"].isna().all() and df["pct_of_peak"].isna().all()
    assert df["category"].tolist() == ["GEMM", "elementwise"]


def test_device_override_and_unknown_device(tmp_path: Path) -> None:
    a = _job(tmp_path, props={"name": "Mystery GPU"})
    assert a.get_op_performance()["pct_of_peak"].isna().all()
    assert a.plot_roofline(visualize=False) is None
    mine = custom_device("mine", {"bf16": 100.0}, 1.0)
    df = a.get_op_performance(device=mine)
    assert df.iloc[0]["pct_of_peak"] == pytest.approx(100 * 2.0 * M * N * K / 1e-3 / 1e14)
    assert a.get_op_performance(device="A100 40GB").iloc[0]["device"] == "A100 40GB"


def test_summary_category_time_and_figure(tmp_path: Path) -> None:
    a = _job(tmp_path)
    s = a.get_op_performance_summary()
    assert s["op"].tolist() == ["aten::addmm", "aten::relu"]
    assert s.iloc[0]["calls"] == 1
    by_cat = a.get_op_performance_summary(by="category").set_index("category")
    assert by_cat.loc["GEMM", "modelled(%)"] == 100.0
    assert by_cat.loc["GEMM", "tflops_per_s"] == pytest.approx(2.0 * M * N * K / 1e-3 / 1e12)
    with pytest.raises(ValueError, match="by"):
        a.get_op_performance_summary(by="kernel")
    cats = a.get_category_time().set_index("category")["kernel_time(us)"]
    # addmm 1000 + graph-replayed nvjet 200 (no operator: the kernel's category)
    assert cats.to_dict() == {"GEMM": 1200.0, "elementwise": 600.0, "communication": 300.0}
    fig = a.plot_roofline(visualize=False)
    names = {t.name for t in fig.data}
    assert {"GEMM", "elementwise", "roof bf16 matrix"} <= names


def _real(rel: str) -> Path:
    path = TRACES / rel
    if not path.exists():
        pytest.skip(absent_reason(path))
    return path


def test_real_trace_elementwise_near_bandwidth() -> None:
    """On the A100 trace the large fp32 adds reach 70-95% of HBM bandwidth (a sane
    model and device); nothing exceeds 100% of the roof by more than rounding."""
    a = TraceAnalysis(_real("trace_diff/control"), cache=False, progress=False)
    df = a.get_op_performance()
    assert (df["device"] == "A100 40GB").all()
    big_adds = df[(df["op"] == "aten::add") & (df["kernel_time(us)"] > 500)]
    assert len(big_adds) and big_adds["pct_of_peak"].between(70, 95).all()
    modelled = df[df["pct_of_peak"].notna() & (df["kernel_time(us)"] > 50)]
    assert (modelled["pct_of_peak"] < 105).all()
    assert np.isclose(a.get_category_time()["share(%)"].sum(), 100.0)


def test_summary_command_prints_categories_and_ops_below_roof(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from hta.cli import main

    a = _job(tmp_path)  # the GEMM is at 13.9% of its H100 roof, the relu at 4.0%
    del a
    assert main(["summary", str(tmp_path), "--no-cache", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    hw = payload["hardware_efficiency"]
    assert {r["category"] for r in hw["category_time"]} == {"GEMM", "elementwise",
                                                           "communication"}
    assert [r["op"] for r in hw["ops_below_half_roof"]] == ["aten::addmm", "aten::relu"]
    assert main(["summary", str(tmp_path), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "GPU time by category (all ranks): GEMM" in text
    assert "below half of their roof (H100 SXM)" in text
    assert main(["summary", str(tmp_path), "--no-cache", "--device", "A100 40GB"]) == 0
    assert "(A100 40GB)" in capsys.readouterr().out
    assert main(["summary", str(tmp_path), "--no-cache", "--device", "Z9000"]) == 2
    assert "unknown device" in capsys.readouterr().err


def test_report_section(tmp_path: Path) -> None:
    from hta.report.builder import build_sections

    def hardware(a: TraceAnalysis):  # noqa: ANN202
        return next(s for s in build_sections(a) if s.id == "hardware")

    s = hardware(_job(tmp_path / "shapes"))
    assert s.error == "" and [f.title for f in s.figures] == [
        "GPU time by category", "Roofline — H100 SXM, rank 0"]
    ops = s.tables[1]
    assert ops.rows[0][1] == "aten::addmm"
    s = hardware(_job(tmp_path / "noshapes", shapes=False))
    assert s.error == "" and len(s.figures) == 1
    assert any("record_shapes=True" in n for n in s.notes)
