"""CUPTI range-profiler counters per kernel, with the operator stack of the launch."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from conftest import shared_trace
from counters_cases import load
from kineto_builder import TraceBuilder

from hta.analysis.cupti import cupti_counter_data_with_operators
from hta.trace_analysis import TraceAnalysis


def cupti_case(extra_launch: bool = False) -> TraceBuilder:
    """Three kernel launches (two under operators), one memcpy launch, three ranges."""
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::conv2d", 0, 1_000)
    b.cpu_op("aten::convolution", 100, 800)
    b.runtime("cudaLaunchKernel", 200, 100, correlation=1)
    b.cpu_op("aten::relu", 1_000, 500)
    b.runtime("cudaLaunchKernel", 1_100, 100, correlation=2)
    b.runtime("cudaMemcpyAsync", 1_600, 100, correlation=3)
    b.runtime("cudaLaunchKernel", 2_000, 100, correlation=4)
    if extra_launch:
        b.runtime("cudaLaunchKernel", 2_500, 100, correlation=5)
    for i, (name, metrics) in enumerate([
        ("conv_kernel", {"x.sum": 1, "y.sum": 2.5}),
        ("relu_kernel", {"x.sum": 3, "y.sum": 0}),
        ("__missing__", {"x.sum": 7}),
    ]):
        b.complete(name, "cuda_profiler_range", 10_000 + 100 * i, 100, pid=0, tid=0,
                   **metrics)
    return b


def test_counters_with_operator_stacks(tmp_path):
    df = cupti_counter_data_with_operators(load(tmp_path, cupti_case()).t)
    assert df["name"].tolist() == ["conv_kernel", "relu_kernel", "__missing__"]
    assert df["op_stack"].tolist() == [["aten::conv2d", "aten::convolution"], ["aten::relu"],
                                       []]
    assert df["top_level_op"].tolist() == ["aten::conv2d", "aten::relu", ""]
    assert df["bottom_level_op"].tolist() == ["aten::convolution", "aten::relu", ""]
    assert df["launch_name"].tolist() == ["cudaLaunchKernel"] * 3
    assert df["x.sum"].tolist() == [1.0, 3.0, 7.0]
    assert df["y.sum"].tolist()[:2] == [2.5, 0.0] and math.isnan(df["y.sum"].iloc[2])


def test_mismatched_counts_are_explained(tmp_path):
    a = load(tmp_path, cupti_case(extra_launch=True))
    with pytest.raises(ValueError, match="3 CUPTI range.*4 kernel launch"):
        cupti_counter_data_with_operators(a.t)


def test_trace_without_ranges_gets_a_clear_message(tmp_path):
    b = TraceBuilder(rank=0)
    b.launch_kernel("k", cpu_ts=0, cpu_dur=10, gpu_ts=20, gpu_dur=10)
    a = load(tmp_path, b)
    with pytest.raises(ValueError, match="no CUPTI range-profiler events.*profiler_metrics"):
        a.get_cupti_counter_data_with_operators()


def test_cupti_profiler_sample():
    folder = shared_trace("cupti_profiler")
    path = next(folder.glob("*.json.gz"))
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    df = cupti_counter_data_with_operators(a.t)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ranges = sorted((e for e in events if e.get("cat") == "cuda_profiler_range"),
                    key=lambda e: e["ts"])
    launches = [e for e in events if e.get("name") == "cudaLaunchKernel"]
    assert len(df) == len(ranges) == len(launches) == 77
    for metric in ranges[0]["args"]:
        assert df[metric].tolist() == [float(e["args"][metric]) for e in ranges]
    assert df["name"].tolist() == [e["name"] for e in ranges]
    assert all(len(s) > 0 for s in df["op_stack"])
    assert (df["top_level_op"] == [s[0] for s in df["op_stack"]]).all()


def test_rocm_sample_has_no_ranges():
    a = TraceAnalysis(trace_dir=shared_trace("amd_trace"), cache=False, progress=False)
    with pytest.raises(ValueError, match="cuda_profiler_range"):
        cupti_counter_data_with_operators(a.t)
