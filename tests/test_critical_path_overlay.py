"""The overlaid trace: critical marks, flow arrows in the file's own time units, filtering.

Files are read back with the standard ``json`` module, floats kept as their exact text.
"""

from __future__ import annotations

import gzip
import json

import pytest
from kineto_builder import CPU_PID, CPU_TID, TraceBuilder

from hta.trace_analysis import TraceAnalysis

GEMM = "ampere_sgemm_128x64_nn"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
BASE = 1_700_000_000_000_000_000


def gpu_bound(base: int | None) -> TraceBuilder:
    """As in test_critical_path: path step -> mm -> GEMM call -> GEMM -> NCCL -> sync.

    step [0, 10_600]; mm [100, 1_000]; GEMM call [200, 300], GEMM [400, 5_400]; NCCL call
    [500, 600] (not on the path), NCCL [5_410, 10_410]; cudaDeviceSynchronize [1_100, 10_500].
    """
    b = TraceBuilder(base_time_ns=base)
    b.annotation("ProfilerStep#1", 0, 10_600)
    b.cpu_op("aten::mm", 100, 900)
    b.launch_kernel(GEMM, cpu_ts=200, cpu_dur=100, gpu_ts=400, gpu_dur=5_000)
    b.launch_kernel(NCCL, cpu_ts=500, cpu_dur=100, gpu_ts=5_410, gpu_dur=5_000)
    b.runtime("cudaDeviceSynchronize", 1_100, 9_400)
    return b


def read(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=str)["traceEvents"]


def overlay(tmp_path, b: TraceBuilder, name: str = "rank-0.json", **kw) -> list[dict]:
    b.write(tmp_path / "in" / name)
    a = TraceAnalysis(trace_dir=tmp_path / "in", cache=False, progress=False)
    g, _ = a.critical_path_analysis(0)
    out = a.overlay_critical_path_analysis(0, g, tmp_path / "out", **kw)
    assert out.endswith("overlaid_critical_path_" + name)
    return read(out)


def critical_names(events: list[dict]) -> list[str]:
    return sorted(e["name"] for e in events
                  if e["ph"] == "X" and e.get("args", {}).get("critical") == 1)


ON_PATH = sorted(["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", GEMM, NCCL,
                  "cudaDeviceSynchronize"])


@pytest.mark.parametrize("base", [BASE, None])
def test_marks_and_flows_in_file_units(tmp_path, base):
    b = gpu_bound(base)
    original = json.loads(json.dumps(b.to_dict()))["traceEvents"]
    events = overlay(tmp_path, b, only_show_critical_events=False)
    assert critical_names(events) == ON_PATH
    assert len([e for e in events if e["ph"] == "X"]) == len(original)  # all kept
    flows = [e for e in events if e.get("cat") == "critical_path"]
    # the path crosses tracks twice: launch (GEMM call -> GEMM), sync (NCCL -> synchronize)
    # an end is placed min(dur / 2, 1 µs) early; times are relative to the base when given
    assert [(e["ph"], e["name"], e["ts"], e["pid"], e["tid"]) for e in flows] == [
        ("s", "launch", "0.200", CPU_PID, CPU_TID), ("f", "launch", "0.400", 0, 7),
        ("s", "sync", "9.410", 0, 7), ("f", "sync", "9.500", CPU_PID, CPU_TID),
    ]
    assert [e["id"] for e in flows] == [1, 1, 2, 2]
    assert [e.get("bp") for e in flows] == [None, "e", None, "e"]
    assert [e["args"] for e in flows[::2]] == [
        {"weight(ns)": 200, "critical": 1, "type": "launch"},
        {"weight(ns)": 90, "critical": 1, "type": "sync"},
    ]


def test_original_events_are_unchanged_except_the_marks(tmp_path):
    b = gpu_bound(BASE)
    events = overlay(tmp_path, b, only_show_critical_events=False)
    source = json.loads((tmp_path / "in" / "rank-0.json").read_text(), parse_float=str)
    for before, after in zip(source["traceEvents"], events):
        args = dict(after.get("args", {}))
        args.pop("critical", None)
        assert {**after, "args": args} == {**before, "args": before.get("args", {})}


def test_only_critical_events_keeps_annotations(tmp_path):
    events = overlay(tmp_path, gpu_bound(BASE))  # only_show_critical_events=True
    x = [e for e in events if e["ph"] == "X"]
    assert sorted(e["name"] for e in x) == ON_PATH  # the NCCL call, off the path, is gone
    assert len([e for e in events if e.get("cat") == "critical_path"]) == 4


def test_all_edges(tmp_path):
    b = gpu_bound(None)
    b.write(tmp_path / "in" / "rank-0.json.gz")
    a = TraceAnalysis(trace_dir=tmp_path / "in", cache=False, progress=False)
    g, _ = a.critical_path_analysis(0)
    out = a.overlay_critical_path_analysis(0, g, tmp_path / "out",
                                           only_show_critical_events=False, show_all_edges=True)
    assert out.endswith(".json.gz")
    flows = [e for e in read(out) if e.get("cat") == "critical_path"]
    edges = g.edges_frame()
    between = edges[edges["src_event"] != edges["dst_event"]]
    assert len(flows) == 2 * len(between)
    assert sum(e["args"]["critical"] for e in flows) == 2 * int(between["critical"].sum())
    assert len({e["id"] for e in flows}) == len(between)
    # show_all_edges is ignored when only critical events are kept (their ends would dangle)
    out = a.overlay_critical_path_analysis(0, g, tmp_path / "out2", show_all_edges=True)
    assert len([e for e in read(out) if e.get("cat") == "critical_path"]) == 4


def test_flow_ids_stay_clear_of_the_files_flows(tmp_path):
    b = gpu_bound(None)
    b.flow("s", 41, 200, pid=CPU_PID, tid=CPU_TID)
    b.flow("f", 41, 400, pid=0, tid=7)
    events = overlay(tmp_path, b)
    ours = [e["id"] for e in events if e.get("cat") == "critical_path"]
    assert min(ours) == 42


def test_errors_say_what_is_wrong(tmp_path):
    b = gpu_bound(None)
    b.write(tmp_path / "in" / "rank-0.json")
    a = TraceAnalysis(trace_dir=tmp_path / "in", cache=False, progress=False)
    g, _ = a.critical_path_analysis(0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="pass a folder"):
        a.overlay_critical_path_analysis(0, g, tmp_path / "file")
    (tmp_path / "in" / "rank-0.json").unlink()
    with pytest.raises(FileNotFoundError, match="needs the original file"):
        a.overlay_critical_path_analysis(0, g, tmp_path / "out")


@pytest.mark.parametrize("raw,expected", [
    (b'{"ph":"X","args":{"a":1}}', {"ph": "X", "args": {"critical": 1, "a": 1}}),
    (b'{"ph":"X","args":{}}', {"ph": "X", "args": {"critical": 1}}),
    (b'{"ph":"X", "args" : { } }', {"ph": "X", "args": {"critical": 1}}),
    (b'{"ph":"X","name":"x"}', {"ph": "X", "name": "x", "args": {"critical": 1}}),
    (b'{"ph":"X","args":{"critical":0}}', {"ph": "X", "args": {"critical": 1}}),
    (b'{"ph":"X","args":null}', {"ph": "X", "args": {"args": None, "critical": 1}}),
])
def test_marking_keeps_the_event_valid(raw, expected):
    import msgspec

    from hta.export.critical_path_overlay import _mark_critical

    assert json.loads(_mark_critical(msgspec.Raw(raw))) == expected


def test_events_the_loader_skipped_do_not_shift_the_marks(tmp_path):
    """An X event without ``ts`` is dropped by the loader; matching falls back to keys."""
    b = gpu_bound(None)
    b.events.insert(3, {"ph": "X", "cat": "cpu_op", "name": "broken", "pid": CPU_PID,
                        "tid": CPU_TID, "dur": 1})
    events = overlay(tmp_path, b, only_show_critical_events=False)
    assert critical_names(events) == ON_PATH
