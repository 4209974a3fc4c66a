"""Memory timeline and peak from ``[memory]`` instants (hta.analysis.memory), its figure and
facade methods: a trace whose allocations are written here, and the real traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import shared_trace
from kineto_builder import CPU_PID, CPU_TID, TraceBuilder, us

from hta.analysis import memory
from hta.plots.memory import envelope, memory_timeline_figure, raw_memory_timeline_figure
from hta.trace_analysis import TraceAnalysis


def mem(b: TraceBuilder, ts: int, addr: int, nbytes: int, total: int, reserved: int, *,
        device_type: int = 1, device_id: int = 0, tid: int = CPU_TID) -> None:
    """A ``[memory]`` instant as PyTorch writes it (totals after the event)."""
    b.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                     "pid": CPU_PID, "tid": tid, "ts": us(ts),
                     "args": {"Device Type": device_type, "Device Id": device_id,
                              "Addr": addr, "Bytes": nbytes, "Total Allocated": total,
                              "Total Reserved": reserved}})


def memory_job(tmp_path: Path) -> TraceAnalysis:
    """Rank 0: cuda:0 peaks at 9000 B at 115 µs (step 2) with 4000 B from aten::mm,
    3000 B from aten::relu, 2000 B from aten::linear live; cpu peaks at 64 B.
    Rank 1: 1 MB allocated before the trace started, then one 500 B allocation."""
    b = TraceBuilder(rank=0, world_size=2)
    with b.step(1, ts=0, dur=100_000):
        b.cpu_op("aten::empty", ts=1_000, dur=1_000)
        mem(b, 1_200, 0x900, 64, 64, 0, device_type=0, device_id=-1)
        mem(b, 1_500, 0x100, 1000, 1000, 10_000)
        b.cpu_op("aten::linear", ts=9_000, dur=21_000)
        b.cpu_op("aten::mm", ts=10_000, dur=10_000)
        mem(b, 12_000, 0x200, 4000, 5000, 10_000)
        mem(b, 25_000, 0x300, 2000, 7000, 10_000)
        mem(b, 40_000, 0x100, -1000, 6000, 10_000)
        mem(b, 50_000, 0x900, -64, 0, 0, device_type=0, device_id=-1)
    with b.step(2, ts=100_000, dur=100_000):
        b.cpu_op("aten::relu", ts=110_000, dur=10_000)
        b.annotation("inside_relu", ts=112_000, dur=6_000)
        mem(b, 115_000, 0x100, 3000, 9000, 20_000)  # address reused: the peak
        mem(b, 130_000, 0x200, -4000, 5000, 20_000)
        mem(b, 140_000, 0x300, -2000, 3000, 20_000)
        mem(b, 150_000, 0x100, -3000, 0, 10_000)
        mem(b, 160_000, 0x500, 500, 500, 10_000, tid=CPU_TID + 1)  # no operator there
        b.cpu_op("aten::add", ts=165_000, dur=10_000)
        mem(b, 170_000, 0x600, 8500, 9000, 10_000)  # reaches the peak again, later
    b.write(tmp_path / "rank-0.json")
    r1 = TraceBuilder(rank=1, world_size=2)
    with r1.step(1, ts=0, dur=10_000):
        r1.cpu_op("aten::zeros", ts=1_000, dur=2_000)
        mem(r1, 1_500, 0x10, 500, 1_000_500, 2_000_000)
    r1.write(tmp_path / "rank-1.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)


def test_timeline_has_one_row_per_memory_event_with_exact_totals(tmp_path: Path) -> None:
    a = memory_job(tmp_path)
    tl = a.get_memory_timeline()
    assert list(tl.columns) == ["rank", "device", "ts", "total_allocated", "total_reserved"]
    assert {c: str(t) for c, t in tl.dtypes.items() if c != "device"} == {
        "rank": "int64", "ts": "int64", "total_allocated": "int64", "total_reserved": "int64"}
    cuda = tl[(tl["rank"] == 0) & (tl["device"] == "cuda:0")]
    assert cuda["ts"].tolist() == [1_500, 12_000, 25_000, 40_000, 115_000, 130_000, 140_000,
                                   150_000, 160_000, 170_000]
    assert cuda["total_allocated"].tolist() == [1000, 5000, 7000, 6000, 9000, 5000, 3000, 0,
                                                500, 9000]
    assert cuda["total_reserved"].max() == 20_000
    assert tl.groupby(["rank", "device"]).size().to_dict() == {
        (0, "cpu"): 2, (0, "cuda:0"): 10, (1, "cuda:0"): 1}
    assert a.get_memory_timeline(ranks=[1])["rank"].tolist() == [1]


def test_summary_peak_time_step_and_operators_live_at_the_peak(tmp_path: Path) -> None:
    a = memory_job(tmp_path)
    s = a.get_memory_summary().set_index(["rank", "device"])
    cuda = s.loc[(0, "cuda:0")]
    assert cuda["peak_allocated_bytes"] == 9000
    assert cuda["peak_ts"] == 115_000  # the first event at the peak, not the one at 170 µs
    assert cuda["peak_step"] == 2
    assert (cuda["peak_reserved_bytes"], cuda["reserved_at_peak_bytes"]) == (20_000, 20_000)
    assert (cuda["first_allocated_bytes"], cuda["last_allocated_bytes"]) == (1000, 9000)
    assert (cuda["allocations"], cuda["frees"]) == (6, 4)
    # 0x100's first block was freed before the peak; its reuse (relu) is live.
    assert (cuda["live_at_peak_bytes"], cuda["unseen_at_peak_bytes"]) == (9000, 0)
    assert cuda["top_operators"] == "aten::mm: 4000; aten::relu: 3000; aten::linear: 2000"
    cpu = s.loc[(0, "cpu")]
    assert (cpu["peak_allocated_bytes"], cpu["peak_ts"], cpu["peak_step"]) == (64, 1_200, 1)
    assert cpu["top_operators"] == "aten::empty: 64"
    r1 = s.loc[(1, "cuda:0")]
    assert (r1["peak_allocated_bytes"], r1["live_at_peak_bytes"],
            r1["unseen_at_peak_bytes"]) == (1_000_500, 500, 1_000_000)
    ops = a.get_memory_peak_operators(ranks=0)
    cuda_ops = ops[ops["device"] == "cuda:0"]
    assert cuda_ops["operator"].tolist() == ["aten::mm", "aten::relu", "aten::linear"]
    assert cuda_ops["share"].round(4).tolist() == [0.4444, 0.3333, 0.2222]


def test_operator_is_the_innermost_cpu_op_on_the_same_thread(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::outer", ts=0, dur=10_000)
    b.cpu_op("aten::inner", ts=1_000, dur=2_000)
    b.cpu_op("aten::other_thread", ts=0, dur=10_000, tid=CPU_TID + 5)
    mem(b, 1_000, 1, 10, 10, 0)     # at inner's start: inner
    mem(b, 3_000, 2, 20, 30, 0)     # at inner's end: outer
    mem(b, 4_000, 3, 40, 70, 0, tid=CPU_TID + 7)  # a thread without ops
    mem(b, 20_000, 4, 80, 150, 0)   # after every op
    b.write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    ops = a.get_memory_peak_operators().set_index("operator")["live_bytes"].to_dict()
    assert ops == {"(no operator)": 120, "aten::outer": 20, "aten::inner": 10}
    s = a.get_memory_summary()
    assert s["peak_step"].tolist() == [0]  # no ProfilerStep in the trace


def test_no_memory_events_gives_typed_empty_tables(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::mm", ts=0, dur=10)
    b.write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    tl, s = a.get_memory_timeline(), a.get_memory_summary()
    assert len(tl) == 0 and list(tl.columns) == memory.TIMELINE_COLUMNS
    assert len(s) == 0 and list(s.columns) == memory.SUMMARY_COLUMNS
    fig = memory_timeline_figure(tl, s)
    assert "profile_memory=True" in fig.layout.title.text


def test_device_names() -> None:
    assert memory.device_name(1, 3) == "cuda:3"
    assert memory.device_name(0, -1) == "cpu"
    assert memory.device_name(12, 0) == "xpu:0"
    assert memory.device_name(99, 1) == "type99:1"


def test_figure_thins_to_an_envelope_that_keeps_the_peak() -> None:
    n = 200_000
    rng = np.random.default_rng(0)
    alloc = rng.integers(0, 1_000_000, n)
    alloc[123_457] = 5_000_000
    tl = pd.DataFrame({"rank": 0, "device": "cuda:0", "ts": np.arange(n, dtype=np.int64) * 10,
                       "total_allocated": alloc, "total_reserved": np.full(n, 6_000_000)})
    keep = envelope(tl["ts"].to_numpy(), [alloc])
    assert keep.size < n // 10 and 123_457 in keep and int(np.argmin(alloc)) in keep
    fig = memory_timeline_figure(tl)
    allocated, reserved, peak = fig.data
    assert max(allocated.y) == 5_000_000 and len(allocated.y) < n // 10
    assert list(peak.y) == [5_000_000] and "5,000,000" in peak.text[0]
    assert "thinned" in fig.layout.title.text and f"of {n:,} points" in fig.layout.title.text
    small = memory_timeline_figure(tl.head(50))
    assert "thinned" not in small.layout.title.text and len(small.data[0].y) == 50


def test_facade_visualize_shows_the_figure(tmp_path: Path, monkeypatch) -> None:
    import hta.facade.memory as facade

    shown = []
    monkeypatch.setattr(facade, "show", shown.append)
    a = memory_job(tmp_path)
    a.get_memory_timeline(visualize=True)
    a.get_memory_summary(visualize=True)
    assert len(shown) == 2
    # peak markers from the summary: one per (rank, device)
    markers = [t for t in shown[1].data if t.name.endswith(" peak")]
    assert sorted(int(t.y[0]) for t in markers) == [64, 9000, 1_000_500]
    # only the highest is labelled, so equal peaks never print over each other
    assert [int(t.y[0]) for t in markers if t.mode == "markers+text"] == [1_000_500]
    with pytest.raises(TypeError, match="visualize"):
        a.get_memory_summary(True)


# -- real traces ------------------------------------------------------------------------------

def test_peak_equals_the_largest_total_allocated_of_the_real_trace() -> None:
    folder = shared_trace("df_index_resolver")
    data = json.loads(gzip.decompress(next(folder.glob("*.json.gz")).read_bytes()))
    expected: dict[str, list[int]] = {}
    for e in data["traceEvents"]:
        if e.get("name") == "[memory]":
            args = e["args"]
            dev = "cpu" if args["Device Type"] == 0 else f"cuda:{args['Device Id']}"
            expected.setdefault(dev, []).append(args["Total Allocated"])
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    s = a.get_memory_summary().set_index("device")
    assert set(s.index) == set(expected) == {"cpu", "cuda:1"}
    for dev, totals in expected.items():
        assert s.loc[dev, "peak_allocated_bytes"] == max(totals)
    assert s.loc["cuda:1", "peak_allocated_bytes"] == 6_629_508_096
    tl = a.get_memory_timeline()
    assert tl.groupby("device").size().to_dict() == {d: len(v) for d, v in expected.items()}
    assert (s["live_at_peak_bytes"] + s["unseen_at_peak_bytes"]
            == s["peak_allocated_bytes"]).all()
    assert (s["live_at_peak_bytes"] <= s["peak_allocated_bytes"]).all()
    assert s.loc["cuda:1", "top_operators"].startswith("aten::mm: ")


# HTA main's MemoryAnalysis on the shared export, computed once with
#   cd /tmp && /work/venv-hta/bin/python -I -c "import sys; sys.path.insert(0,
#   '/work/hta-main-src'); import numpy as np; from hta.memory_analysis import MemoryAnalysis;
#   t, s = MemoryAnalysis(PATH)._process_raw_events(); s = np.array(s).sum(axis=1);
#   print(len(t), s.max(), t[:3], s[:3])"
# gave 7721 times, peak 3082832104 B, first totals 332060904, 332023016, 332022504.
HTA_RAW_TIMES, HTA_RAW_PEAK = 7721, 3_082_832_104


def test_raw_memory_timeline_export_matches_hta_main() -> None:
    path = shared_trace("memory_analysis", "memory_timeline.raw.gz")
    df = memory.raw_memory_timeline(path)
    entries = json.loads(gzip.decompress(path.read_bytes()))
    running = np.cumsum([e[2] for e in entries])
    assert df["total"].max() == running.max() == HTA_RAW_PEAK
    assert len(df) == HTA_RAW_TIMES
    assert df["total"].head(3).tolist() == [332_060_904, 332_023_016, 332_022_504]
    assert (df[list(memory.RAW_CATEGORIES)].sum(axis=1) == df["total"]).all()
    fig = raw_memory_timeline_figure(df)
    assert len(fig.data) == len(memory.RAW_CATEGORIES)
    assert TraceAnalysis.plot_memory_timeline_raw(path, visualize=False).equals(df)


def test_raw_memory_timeline_refuses_a_kineto_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"ph": "X"}]))
    with pytest.raises(ValueError, match="not a memory timeline export"):
        memory.raw_memory_timeline(path)


def test_ranks_kept_out_of_memory_give_the_same_tables(tmp_path: Path) -> None:
    a = memory_job(tmp_path)
    lazy = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, in_memory=False)
    try:
        pd.testing.assert_frame_equal(lazy.get_memory_summary(), a.get_memory_summary())
        pd.testing.assert_frame_equal(lazy.get_memory_timeline(), a.get_memory_timeline())
        pd.testing.assert_frame_equal(lazy.get_memory_peak_operators(),
                                      a.get_memory_peak_operators())
    finally:
        lazy.close()
