"""Critical path on the real traces of ../shared/traces/hta, checked against the JSON itself.

Tolerance: the path's length is at most the window's span (earliest to latest node) by
construction, and equals it when a slack-free path joins the first and the last node.
On these traces it does exactly; the test allows 1 % less, the margin documented in
docs/critical_path.md for a path that starts on a thread that began after the window.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal

import pytest
from conftest import shared_trace

from hta.trace_analysis import TraceAnalysis

#: The loader reads integer-µs epoch timestamps (old traces) through a float64, which
#: holds epoch nanoseconds to 256 ns; decimal timestamps are exact. Reported to the loader.
TS_SLACK_NS = 128

CASES = [
    ("critical_path/alexnet", "", None),
    ("critical_path/alexnet", "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    ("critical_path/simple_add", "", None),
    ("critical_path/cuda_event_sync", "ProfilerStep", 0),
    ("critical_path/cuda_event_sync", "", None),
    ("critical_path/cuda_event_sync_multi_stream", "", None),
    ("amd_trace", "ProfilerStep", 0),
    ("amd_trace", "ProfilerStep", 1),
    ("amd_trace", "", None),
]


def raw_events(folder) -> tuple[list[dict], int]:
    """The file's events (floats as exact Decimals) and the ns to add to its times."""
    (path,) = [p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz"))]
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    base = int(doc.get("baseTimeNanoseconds") or 0)
    events = doc["traceEvents"]
    x_ts = [e["ts"] for e in events if e.get("ph") == "X"]
    if base and max(x_ts) * 1000 >= base // 2:
        base = 0
    return events, base


def ns(value) -> int:
    return int(Decimal(value) * 1000)


@pytest.fixture(scope="module")
def loaded():
    cache: dict[str, TraceAnalysis] = {}

    def get(name: str) -> TraceAnalysis:
        if name not in cache:
            cache[name] = TraceAnalysis(trace_dir=shared_trace(*name.split("/")), cache=False,
                                        progress=False)
        return cache[name]

    return get


@pytest.mark.parametrize("name,annotation,instance", CASES)
def test_path_spans_the_window_and_its_events_exist(loaded, name, annotation, instance):
    a = loaded(name)
    g, df = a.critical_path_analysis(0, annotation, instance)
    assert len(df) > 0
    assert 0.99 * g.span_ns <= g.path_length_ns <= g.span_ns
    assert df["duration(ns)"].sum() == g.path_length_ns
    events, base = raw_events(shared_trace(*name.split("/")))
    x = [e for e in events if e.get("ph") == "X"]
    in_file: dict[tuple[str, int], list[int]] = {}
    for e in x:
        in_file.setdefault((e["name"], ns(e.get("dur", 0))), []).append(ns(e["ts"]) + base)
    ev = a.t.rank(0).decoded()
    rows = sorted(set(df["src_event"]) | set(df["dst_event"]))
    for n, t, d in zip(ev["name"].to_numpy()[rows], ev["ts"].to_numpy()[rows],
                       ev["dur"].to_numpy()[rows]):
        starts = in_file[(n, int(d))]
        assert min(abs(int(t) - s) for s in starts) <= TS_SLACK_NS, (n, t)
    if annotation:
        # the window is the chosen instance, counted in start order, from the file itself
        spans = sorted((ns(e["ts"]) + base, ns(e["dur"])) for e in x
                       if annotation in e["name"]
                       and e.get("cat") in ("user_annotation", "cpu_op", "python_function"))
        start, dur = spans[instance]
        assert abs(g.window_start_ns - start) <= TS_SLACK_NS
        assert abs(g.window_end_ns - (start + dur)) <= 2 * TS_SLACK_NS
        assert df["ts"].iloc[0] >= g.window_start_ns


def test_hip_launches_and_synchronizes_are_edges(loaded):
    a = loaded("amd_trace")
    g, _ = a.critical_path_analysis(0, "")
    edges = g.edges_frame()
    ev = a.t.rank(0).decoded()
    name = ev["name"].to_numpy()
    launchers = set(name[edges.loc[edges["type"] == "launch", "src_event"]])
    assert {"hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyWithStream"} <= launchers
    waiting = sorted(name[edges.loc[edges["type"] == "sync", "dst_event"]])
    # two blocking hipMemcpyWithStream copies and the hipDeviceSynchronize (no cuda_sync
    # records in ROCm traces: its scope comes from its name)
    assert waiting == ["hipDeviceSynchronize", "hipMemcpyWithStream", "hipMemcpyWithStream"]
    assert not g.dropped


def test_event_synchronize_and_stream_wait(loaded):
    a = loaded("critical_path/cuda_event_sync")
    g, _ = a.critical_path_analysis(0, "ProfilerStep", 0)
    edges = g.edges_frame()
    ev = a.t.rank(0).decoded()
    name = ev["name"].to_numpy()
    sync = edges[edges["type"] == "sync"]
    pairs = sorted(zip(name[sync["src_event"]], name[sync["dst_event"]]))
    spin = "at::cuda::(anonymous namespace)::spin_kernel(long)"
    pageable = "Memcpy DtoH (Device -> Pageable)"
    assert pairs == sorted([(spin, "cudaDeviceSynchronize"), (spin, "cudaEventSynchronize"),
                            (pageable, "cudaMemcpyAsync"), (pageable, "cudaStreamSynchronize")])
    a = loaded("critical_path/cuda_event_sync_multi_stream")
    g, _ = a.critical_path_analysis(0, "")
    edges = g.edges_frame()
    ev = a.t.rank(0).decoded()
    wait = edges[edges["type"] == "event_wait"]
    assert len(wait) == 1
    src, dst = ev.loc[int(wait["src_event"].iloc[0])], ev.loc[int(wait["dst_event"].iloc[0])]
    # the Stream Wait Event on stream 24 waits for event 1385, recorded on stream 20 after
    # the sgemm there; the next work enqueued on stream 24 is a memset
    assert (src["name"], src["stream"], dst["name"], dst["stream"]) == (
        "ampere_sgemm_128x64_nn", 20, "Memset (Device)", 24)


def test_overlay_agrees_with_htas_on_simple_add(loaded, tmp_path):
    """HTA's own overlay of this trace (whole trace, data_load_events=["data_load"]) marks
    624 complete events critical. Ours, on the same trace, marks at least 95 % of them
    (the rest: kernels near the end where HTA's zero-weight sync edges let its path jump).
    """
    folder = shared_trace("critical_path", "end_to_end", "simple_add")
    a = loaded("critical_path/end_to_end/simple_add/input")
    g, _ = a.critical_path_analysis(0, "", data_load_events=["data_load"])
    out = a.overlay_critical_path_analysis(0, g, tmp_path, only_show_critical_events=False)

    def critical(path) -> set[tuple]:
        with gzip.open(path, "rt") as f:
            events = json.load(f, parse_float=Decimal)["traceEvents"]
        return {(e["name"], e["ts"], e.get("dur"), e["pid"], e["tid"]) for e in events
                if e.get("ph") == "X" and e.get("args", {}).get("critical") == 1}

    theirs = critical(folder / "output" / "overlaid_critical_path_trace.json.gz")
    ours = critical(out)
    assert len(theirs) == 624
    assert len(theirs & ours) >= 0.95 * len(theirs)
