"""Frequent kernel sequences and the overlaid trace that marks them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import shared_trace
from counters_cases import load, sequences_case

from hta.analysis.sequences import frequent_cuda_kernel_sequences
from hta.export.patterns_trace import with_arg, write_overlaid_trace
from hta.trace_analysis import TraceAnalysis

TWICE = "aten::linear|gemm|bias"
NESTED = "my_linear_layer|gemm|bias|relu_k"


def test_patterns_counts_and_durations(tmp_path):
    a = load(tmp_path, sequences_case())
    df = frequent_cuda_kernel_sequences(a.t, "linear", min_pattern_len=2)
    assert df["pattern"].tolist() == [TWICE, NESTED]
    assert df["count"].tolist() == [2, 1]
    assert df["kernels"].tolist() == [2, 3]
    assert df["GPU kernel duration (us)"].tolist() == [0.4, 0.3]
    assert df["CPU op duration (us)"].tolist() == [2.0, 2.0]


def test_min_pattern_len_and_roots(tmp_path):
    a = load(tmp_path, sequences_case())
    assert frequent_cuda_kernel_sequences(a.t, "linear")["pattern"].tolist() == [NESTED]
    one = frequent_cuda_kernel_sequences(a.t, "aten::linear", min_pattern_len=1)
    # the aten::linear inside my_linear_layer is a root when the annotation does not match
    assert dict(zip(one["pattern"], one["count"])) == {
        TWICE: 2, "aten::linear|gemm": 1, "aten::linear|gemm|bias|relu_k": 1}


def test_event_indices_cover_each_occurrence(tmp_path):
    a = load(tmp_path, sequences_case())
    ev = a.t.rank(0).decoded()
    df = frequent_cuda_kernel_sequences(a.t, "linear", min_pattern_len=2)
    first = ev[ev["index"].isin(df.loc[0, "event_indices"])]
    assert sorted(first["name"]) == sorted(
        ["aten::linear", "aten::addmm", "cudaLaunchKernel", "cudaLaunchKernel", "gemm",
         "bias"] * 2)
    nested = ev[ev["index"].isin(df.loc[1, "event_indices"])]
    assert sorted(nested["name"]) == sorted(
        ["my_linear_layer", "aten::linear"] + ["cudaLaunchKernel"] * 3
        + ["gemm", "bias", "relu_k"])


def test_errors_are_clear(tmp_path):
    a = load(tmp_path, sequences_case())
    with pytest.raises(ValueError, match="no operator name contains 'conv'"):
        frequent_cuda_kernel_sequences(a.t, "conv")
    with pytest.raises(ValueError, match="operator_name is empty"):
        frequent_cuda_kernel_sequences(a.t, "")


def test_with_arg_keeps_other_values_as_text():
    text = b'{"ph":"X","ts":1712195495519689.047,"id":123456789012345678901,"args":{"a":1}}'
    out = json.loads(with_arg(text, "Patterns", {"p": 2}))
    assert out["args"] == {"a": 1, "Patterns": {"p": 2}}
    assert b"1712195495519689.047" in with_arg(text, "x", 1)
    assert json.loads(with_arg(b'{"ph":"X"}', "k", [1]))["args"] == {"k": [1]}


def test_overlaid_trace_marks_exactly_the_occurrences(tmp_path):
    a = load(tmp_path, sequences_case())
    df = frequent_cuda_kernel_sequences(a.t, "linear", min_pattern_len=2)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    path = write_overlaid_trace(a.t.rank(0), df, out_dir)
    assert path == out_dir / "overlaid_rank-0.json"
    source = a.t.rank(0).meta["source"]
    original = json.loads(Path(source).read_bytes())["traceEvents"]
    overlaid = json.loads(path.read_bytes())["traceEvents"]
    assert len(overlaid) == len(original)
    marked = [e for e in overlaid if "Patterns" in e.get("args", {})]
    assert len(marked) == 12 + 8
    assert sum(e["args"]["Patterns"] == {TWICE: 2} for e in marked) == 12
    assert sum(e["args"]["Patterns"] == {NESTED: 1} for e in marked) == 8
    for before, after in zip(original, overlaid):
        args = dict(after.get("args", {}))
        args.pop("Patterns", None)
        assert {**after, "args": args} == {**before, "args": before.get("args", {})}


def test_facade_writes_top_k(tmp_path):
    a = load(tmp_path, sequences_case())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    df = a.get_frequent_cuda_kernel_sequences("linear", out_dir, min_pattern_len=2, top_k=1,
                                              compress_other_kernels=False)
    assert "event_indices" not in df.columns and len(df) == 2
    overlaid = json.loads((out_dir / "overlaid_rank-0.json").read_bytes())["traceEvents"]
    assert sum("Patterns" in e.get("args", {}) for e in overlaid) == 12
    with pytest.raises(NotADirectoryError):
        a.get_frequent_cuda_kernel_sequences("linear", tmp_path / "missing")


def test_real_trace_overlay_loads_back(tmp_path):
    folder = shared_trace("trace_filter")
    a = TraceAnalysis(trace_files={0: folder / "sampled_rank-0.json.gz"}, cache=False,
                      progress=False)
    df = frequent_cuda_kernel_sequences(a.t, "aten::linear", min_pattern_len=2)
    assert df["count"].sum() >= 1
    path = write_overlaid_trace(a.t.rank(0), df, tmp_path)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    marked = sum("Patterns" in e.get("args", {}) for e in events)
    assert marked == sum(len(x) for x in df["event_indices"])
    b = TraceAnalysis(trace_files={0: path}, cache=False, progress=False)
    assert len(b.t.rank(0).events) == len(a.t.rank(0).events)


def test_figure(tmp_path):
    from hta.plots.operators import frequent_sequences_figure

    df = frequent_cuda_kernel_sequences(load(tmp_path, sequences_case()).t, "linear",
                                        min_pattern_len=2)
    fig = frequent_sequences_figure(df, 0)
    assert list(fig.data[0].y) == [2, 1]
    assert fig.data[0].customdata[0] == TWICE.replace("|", "<br>")


def test_long_patterns_get_a_label_and_are_listed_once(tmp_path, monkeypatch):
    import hta.export.patterns_trace as overlay

    monkeypatch.setattr(overlay, "MAX_LABEL", 25)
    a = load(tmp_path, sequences_case())
    df = frequent_cuda_kernel_sequences(a.t, "linear", min_pattern_len=2)
    path = write_overlaid_trace(a.t.rank(0), df, tmp_path)
    trace = json.loads(path.read_bytes())
    label = "pattern 1: my_linear_layer|gemm|bias|relu_k... (3 GPU events)"
    assert trace["frequentKernelSequences"] == [
        {"label": TWICE, "pattern": TWICE, "count": 2, "kernels": 2},
        {"label": label, "pattern": NESTED, "count": 1, "kernels": 3},
    ]
    marked = [e["args"]["Patterns"] for e in trace["traceEvents"]
              if "Patterns" in e.get("args", {})]
    assert marked.count({label: 1}) == 8 and marked.count({TWICE: 2}) == 12


@pytest.mark.parametrize("text", [
    b'{"ph":"X","name":"a","args":{"x":1}}',
    b'{"ph": "X", "args" : { } , "name": "a"}',
    b'{"ph":"X","name":"a"}',
    b'{}',
    b'{"ph":"X","args":{"Patterns":{"old":1},"y":[1,{"args":{}}]}}',
    b'{"ph":"X","args":{"in":{"args":{}}}}',
])
def test_with_arg_fast_and_slow_paths_agree(text):
    expected = json.loads(text)
    expected.setdefault("args", {})["Patterns"] = {"p": 1}
    assert json.loads(with_arg(text, "Patterns", {"p": 1})) == expected


def test_overlay_after_the_last_step_was_dropped(tmp_path):
    b = sequences_case()
    b.annotation("ProfilerStep#1", 0, 4_500)
    b.annotation("ProfilerStep#2", 4_500, 6_000)
    folder = tmp_path / "trace"
    b.write(folder / "rank-0.json")
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False,
                      include_last_profiler_step=False)
    df = frequent_cuda_kernel_sequences(a.t, "linear", min_pattern_len=2)
    assert df["pattern"].tolist() == [TWICE]
    path = write_overlaid_trace(a.t.rank(0), df, tmp_path)
    events = json.loads(path.read_bytes())["traceEvents"]
    marked = [e for e in events if "Patterns" in e.get("args", {})]
    assert sorted(e["name"] for e in marked) == sorted(
        ["aten::linear", "aten::addmm", "cudaLaunchKernel", "cudaLaunchKernel", "gemm",
         "bias"] * 2)
    assert all(e["ts"] < 6.0 for e in marked)  # µs: none from the dropped step
