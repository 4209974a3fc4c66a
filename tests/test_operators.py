"""Operator view: exact per-call and per-operator times on a built trace; real traces."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conftest import shared_trace
from counters_cases import load, operators_case

from hta.analysis.operators import gpu_shares, operator_breakdown, operator_calls
from hta.analysis.summary import rank_summary
from hta.model.selection import Selection
from hta.trace_analysis import TraceAnalysis

CALLS = {  # (name, start): cpu total, cpu self, gpu, gpu self, union, kernels, self kernels
    ("aten::linear", 0): (100, 40, 50, 35, 50, 2, 1),
    ("aten::addmm", 10): (50, 40, 15, 15, 20, 1, 1),
    ("aten::linear", 200): (100, 50, 35, 0, 50, 1, 0),
    ("aten::addmm", 210): (50, 40, 35, 35, 50, 1, 1),
    ("aten::relu", 300): (50, 40, 35, 35, 50, 1, 1),
    ("aten::mm", 500): (100, 100, 0, 0, 0, 0, 0),
}


def test_gpu_shares_split_overlaps_equally():
    start = np.array([0, 5, 20, 20], dtype=np.int64)
    end = np.array([10, 15, 20, 30], dtype=np.int64)
    assert gpu_shares(start, end).tolist() == [7.5, 7.5, 0.0, 10.0]
    assert gpu_shares(start[:0], end[:0]).size == 0


def test_per_call_values(tmp_path):
    a = load(tmp_path, operators_case())
    calls = operator_calls(a.t)
    ts = a.t.rank(0).events.set_index("index")["ts"]
    got = {(n, int(ts[i])): (c, s, g, gs, u, k, sk) for n, i, c, s, g, gs, u, k, sk in zip(
        calls["name"], calls["index"], calls["cpu_total(ns)"], calls["cpu_self(ns)"],
        calls["gpu_time(ns)"], calls["gpu_self_time(ns)"], calls["gpu_union_time(ns)"],
        calls["kernels"], calls["self_kernels"])}
    assert got == CALLS
    top = calls[calls["top_level"]]
    assert sorted(top["name"]) == ["aten::linear", "aten::linear", "aten::mm", "aten::relu"]
    addmm = calls[calls["name"] == "aten::addmm"]
    linear_index = calls.loc[calls["name"] == "aten::linear", "index"].tolist()
    assert addmm["parent_op"].tolist() == linear_index


def test_breakdown_per_name(tmp_path):
    df = operator_breakdown(load(tmp_path, operators_case()).t)
    assert df["name"].tolist() == ["aten::linear", "aten::addmm", "aten::relu", "aten::mm"]
    linear = df.iloc[0]
    assert (linear["calls"], linear["kernels"], linear["self_kernels"]) == (2, 3, 1)
    ns = {c: round(linear[c] * 1000) for c in ("cpu_total_time(us)", "cpu_self_time(us)",
                                               "gpu_time(us)", "gpu_self_time(us)",
                                               "gpu_union_time(us)")}
    assert ns == {"cpu_total_time(us)": 200, "cpu_self_time(us)": 90, "gpu_time(us)": 85,
                  "gpu_self_time(us)": 35, "gpu_union_time(us)": 100}
    assert (df["input_shapes"] == "").all()


def test_breakdown_by_input_shape(tmp_path):
    df = operator_breakdown(load(tmp_path, operators_case()).t, group_by_input_shape=True)
    linear = df[df["name"] == "aten::linear"].set_index("input_shapes")
    assert round(linear.loc["[[2, 3], [3, 4]]", "gpu_time(us)"] * 1000) == 50
    assert round(linear.loc["[[5, 3], [3, 4]]", "gpu_time(us)"] * 1000) == 35
    assert linear["calls"].tolist() == [1, 1]


def test_top_level_gpu_time_within_busy_time(tmp_path):
    a = load(tmp_path, operators_case())
    calls = operator_calls(a.t)
    top = calls.loc[calls["top_level"], "gpu_time(ns)"].sum()
    assert top == 120  # 220 ns busy minus kernel D, launched outside any operator
    assert rank_summary(a.t).loc[0, "gpu_busy(us)"] == 0.22


def test_facade(tmp_path):
    a = load(tmp_path, operators_case())
    assert len(a.get_operator_breakdown(visualize=False)) == 4


def _busy_from_json(path):
    """Union of the GPU work intervals of a trace, in µs, from the JSON alone."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
                   if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy",
                                                               "gpu_memset"))
    busy, end = 0.0, -np.inf
    for s, e in spans:
        if e > end:
            busy += e - max(s, end)
            end = e
    return busy


@pytest.mark.parametrize("folder", ["trace_filter", "amd_trace", "critical_path/alexnet"])
def test_top_level_gpu_time_within_busy_time_on_real_traces(folder):
    path = shared_trace(*folder.split("/"))
    a = TraceAnalysis(trace_dir=path, cache=False, progress=False)
    calls = operator_calls(a.t)
    for rank in a.t.get_ranks():
        file = a.t.rank(rank).meta["source"]
        busy_us = _busy_from_json(type(path)(file))
        mine = calls[(calls["rank"] == rank) & calls["top_level"]]["gpu_time(ns)"].sum() / 1e3
        assert 0 < mine <= busy_us + 1e-6
        # the union per call is allowed to double count across streams: not bounded
        breakdown = operator_breakdown(a.t, Selection.of(rank))
        assert (breakdown["gpu_time(us)"] <= breakdown["gpu_union_time(us)"] + 1e-9).all()
        assert (breakdown["cpu_self_time(us)"] <= breakdown["cpu_total_time(us)"]).all()


def test_figure(tmp_path):
    from hta.plots.operators import operator_breakdown_figure

    df = operator_breakdown(load(tmp_path, operators_case()).t)
    fig = operator_breakdown_figure(df, max_rows=2)
    assert [t.name for t in fig.data] == ["GPU time", "CPU self time", "CPU total time"]
    assert list(fig.data[0].x) == [0.085, 0.05]
