"""The whole job on one Perfetto timeline (hta.export.perfetto_job): files read back with
Perfetto's own trace protos and replayed (interned names resolved per sequence, slices
opened and closed per track) so every event, flow and finding can be checked."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runner import run_cli
from conftest import SAMPLE_TRACES, shared_trace
from kineto_builder import TraceBuilder
from test_clock import SKEW_NS, two_host_job

from hta.export.perfetto_job import begin_end_order, nest_lanes
from hta.trace_analysis import TraceAnalysis

pb = pytest.importorskip(
    "perfetto.protos.perfetto.trace.perfetto_trace_pb2",
    reason="Perfetto's Python package is not installed: pip install -e '.[perfetto]'")


@dataclass
class Slice:
    track: int
    name: str
    ts: int
    end: int = -1
    flows: list[int] = field(default_factory=list)
    terminating: list[int] = field(default_factory=list)
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass
class ReadBack:
    processes: dict[int, str]              # track uuid -> process name
    tracks: dict[int, tuple[int, str]]     # track uuid -> (parent uuid, name)
    slices: list[Slice]

    def on(self, process: str) -> list[Slice]:
        uuid = next(u for u, n in self.processes.items() if n == process)
        mine = {t for t, (parent, _) in self.tracks.items() if parent == uuid}
        return [s for s in self.slices if s.track in mine]

    def track_names(self, process: str) -> list[str]:
        uuid = next(u for u, n in self.processes.items() if n == process)
        return [n for t, (parent, n) in self.tracks.items() if parent == uuid]


def read_back(path: Path) -> ReadBack:
    """Replay the packets as Perfetto's importer does; fails on a slice end with nothing
    open, an unresolved interned name, time going back on a track or a slice left open."""
    trace = pb.Trace.FromString(path.read_bytes())
    names: dict[int, dict[int, str]] = defaultdict(dict)
    processes: dict[int, str] = {}
    tracks: dict[int, tuple[int, str]] = {}
    open_: dict[int, list[Slice]] = defaultdict(list)
    last: dict[int, int] = {}
    slices: list[Slice] = []
    for p in trace.packet:
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            names[seq] = {}
        for entry in p.interned_data.event_names:
            names[seq][entry.iid] = entry.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("process"):
                processes[d.uuid] = d.process.process_name
            else:
                tracks[d.uuid] = (d.parent_uuid, d.name)
            continue
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        assert e.track_uuid in tracks, "event on an undeclared track"
        assert p.timestamp >= last.get(e.track_uuid, 0), "time goes back on a track"
        last[e.track_uuid] = p.timestamp
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            name = e.name if e.HasField("name") else names[seq][e.name_iid]
            ann = {a.name: (a.string_value if a.HasField("string_value") else
                            a.double_value if a.HasField("double_value") else a.int_value)
                   for a in e.debug_annotations}
            s = Slice(e.track_uuid, name, p.timestamp, flows=list(e.flow_ids),
                      terminating=list(e.terminating_flow_ids), annotations=ann)
            open_[e.track_uuid].append(s)
            slices.append(s)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            assert open_[e.track_uuid], "slice end with nothing open"
            open_[e.track_uuid].pop().end = p.timestamp
    assert not any(open_.values()), "slices left open"
    return ReadBack(processes, tracks, slices)


def analyzer(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False, max_workers=1)


def event_set(rt: Any, offset: int = 0) -> list[tuple[str, int, int]]:
    ev = rt.decoded(["name", "ts", "end"])
    return sorted(zip(ev["name"], ev["ts"] - offset, ev["end"] - offset))


def test_two_host_job(tmp_path: Path) -> None:
    a = analyzer(two_host_job(tmp_path / "job", late={1: 300_000}))
    out = tmp_path / "job.pftrace"
    stats = a.write_perfetto_job(out)
    back = read_back(out)
    assert sorted(back.processes.values()) == [
        "rank 0 (node0)", "rank 1 (node0)", "rank 2 (node1)", "rank 3 (node1)"]
    offsets = a.clock_shifts()
    assert set(offsets) == {2, 3} and all(abs(o - SKEW_NS) < 50_000 for o in offsets.values())
    for rank in range(4):
        process = f"rank {rank} (node{rank // 2})"
        events = [s for s in back.on(process) if s.name and "finding" not in
                  back.tracks[s.track][1]]
        got = sorted((s.name, s.ts, s.end) for s in events)
        assert got == event_set(a.t.rank(rank), offsets.get(rank, 0))
        assert {"GPU 0 stream 7", "GPU 0 stream 20"} <= set(back.track_names(process))
    # the ranks line up: every all-reduce ends within the link jitter on every rank
    ends = defaultdict(list)
    for s in back.slices:
        if s.name.startswith("ncclDevKernel"):
            ends[s.ts // 20_000_000].append(s.end)
    assert len(ends) == 4 and all(max(v) - min(v) < 60_000 for v in ends.values())
    # flows: each GPU event ends one flow started by its launch
    started = {f for s in back.slices for f in s.flows}
    ended = [f for s in back.slices for f in s.terminating]
    assert len(ended) == stats.flows == 4 * 4 * 2 and set(ended) == started
    launches = {f: s for s in back.slices for f in s.flows}
    for s in back.slices:
        for f in s.terminating:
            assert launches[f].name == "cudaLaunchKernel" and launches[f].ts <= s.ts
    # findings: the straggler finding on the ranks that waited for rank 1
    straggler = [s for s in back.on("rank 0 (node0)")
                 if s.annotations.get("rule") == "stragglers"]
    assert len(straggler) == 1
    assert "rank 1" in straggler[0].annotations["evidence"]
    assert straggler[0].annotations["est_saving(us)"] > 0
    claimed = [s for s in back.on("rank 0 (node0)") if s.track == straggler[0].track
               and s is not straggler[0]]
    assert len(claimed) == 4 and all(s.annotations["claimed(us)"] > 0 for s in claimed)
    assert not [s for s in back.on("rank 2 (node1)")
                if s.annotations.get("rule") == "stragglers" and "rank 2" in
                s.annotations.get("evidence", "")]


def test_raw_clocks_keep_the_skew(tmp_path: Path) -> None:
    a = analyzer(two_host_job(tmp_path / "job"))
    out = tmp_path / "raw.pftrace"
    a.write_perfetto_job(out, align_clocks=False, findings=False)
    back = read_back(out)
    got = sorted((s.name, s.ts, s.end) for s in back.on("rank 3 (node1)"))
    assert got == event_set(a.t.rank(3))
    assert not [n for n in back.track_names("rank 0 (node0)") if n.startswith("finding")]


def test_overlapping_kernels_keep_every_kernel(tmp_path: Path) -> None:
    """Kernels of one stream overlapping without nesting (programmatic dependent launch)
    go to an overlap track; none is lost or cut."""
    b = TraceBuilder(rank=0)
    b.launch_kernel("k1", cpu_ts=0, cpu_dur=100, gpu_ts=1_000, gpu_dur=10_000)
    b.launch_kernel("k2", cpu_ts=200, cpu_dur=100, gpu_ts=8_000, gpu_dur=10_000)
    b.launch_kernel("k3", cpu_ts=400, cpu_dur=100, gpu_ts=16_000, gpu_dur=10_000)
    b.launch_kernel("k4", cpu_ts=600, cpu_dur=100, gpu_ts=30_000, gpu_dur=1_000)
    b.write(tmp_path / "job" / "rank-0.json")
    a = analyzer(tmp_path / "job")
    out = tmp_path / "pdl.pftrace"
    stats = a.write_perfetto_job(out, findings=False)
    back = read_back(out)
    kernels = {s.name: (s.ts, s.end, back.tracks[s.track][1]) for s in back.slices
               if s.name.startswith("k")}
    assert set(kernels) == {"k1", "k2", "k3", "k4"}
    assert kernels["k2"][2] == "GPU 0 stream 7 (overlap 1)"
    assert kernels["k1"][2] == kernels["k3"][2] == kernels["k4"][2] == "GPU 0 stream 7"
    assert stats.overlap_tracks == 1
    ev = a.t.rank(0).events
    base = int(ev["ts"].min())
    assert kernels["k2"][:2] == (int(ev["ts"].min()) + 8_000 - 0, base + 18_000)


def test_nest_lanes() -> None:
    ts = np.array([0, 0, 10, 50, 60])
    end = np.array([100, 40, 30, 70, 120])
    # [60, 120) starts inside [0, 100) and ends after it: the only one moved
    assert nest_lanes(ts, end).tolist() == [0, 0, 0, 0, 1]
    times, begin, which = begin_end_order(ts[:3], end[:3])
    assert times.tolist() == [0, 0, 10, 30, 40, 100]
    assert begin.tolist() == [True, True, True, False, False, False]
    assert which.tolist() == [0, 1, 2, 2, 1, 0]


def test_command(tmp_path: Path) -> None:
    out = tmp_path / "job.pftrace"
    r = run_cli(["export", str(SAMPLE_TRACES / "synthetic_4rank"), "--format", "perfetto",
                 "-o", str(out), "--no-cache"])
    assert r.returncode == 0, r.stderr
    assert "4 ranks" in r.stdout and out.exists()
    back = read_back(out)
    assert len(back.processes) == 4
    a = analyzer(SAMPLE_TRACES / "synthetic_4rank")
    assert sum(1 for s in back.slices if "finding" not in back.tracks[s.track][1]) == sum(
        len(rt.events) for rt in a.t)
    again = run_cli(["export", str(SAMPLE_TRACES / "synthetic_4rank"), "--format",
                     "perfetto", "-o", str(out), "--no-cache"])
    assert again.returncode == 1 and "--force" in again.stderr
    folder = run_cli(["export", str(SAMPLE_TRACES / "synthetic_4rank"), "--format",
                      "perfetto", "-o", str(tmp_path), "--no-cache"])
    assert folder.returncode == 1 and "writes a file" in folder.stderr


@pytest.mark.slow
def test_real_trace_every_event(tmp_path: Path) -> None:
    """A real 2-rank trace: every event comes back with its name and times."""
    a = analyzer(shared_trace("trace_filter"))
    out = tmp_path / "real.pftrace"
    stats = a.write_perfetto_job(out)
    back = read_back(out)
    assert len(back.processes) == len(a.ranks) == 2
    events = [s for s in back.slices if "finding" not in back.tracks[s.track][1]]
    assert len(events) == stats.slices == sum(len(rt.events) for rt in a.t)
    for rank in a.ranks:
        process = next(n for n in back.processes.values() if n.startswith(f"rank {rank}"))
        got = sorted((s.name, s.ts, s.end) for s in back.on(process)
                     if "finding" not in back.tracks[s.track][1])
        assert got == event_set(a.t.rank(rank), a.clock_shifts().get(rank, 0))
    assert stats.flows > 1_000


def test_without_perfetto_one_error_line(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    monkeypatch.setitem(sys.modules, "perfetto.protos.perfetto.trace",
                        None)
    r = run_cli(["export", str(SAMPLE_TRACES / "synthetic_4rank"), "--format", "perfetto",
                 "-o", str(tmp_path / "job.pftrace"), "--no-cache"])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "pip install perfetto" in lines[0]
    assert not (tmp_path / "job.pftrace").exists()


def test_the_export_read_as_a_trace_says_what_it_is(tmp_path: Path) -> None:
    from hta.errors import TraceDiscoveryError, TraceLoadError

    a = analyzer(two_host_job(tmp_path / "job"))
    out = tmp_path / "job.pftrace"
    a.write_perfetto_job(out, findings=False)
    with pytest.raises(TraceLoadError, match=r"job-wide Perfetto trace written by 'hta export "
                       r"--format perfetto' \(4 rank\(s\) on one timeline: 0, 1, 2, 3\), "
                       "not a profiler trace"):
        TraceAnalysis(trace_files=[out], cache=False, progress=False, strict=True)
    with pytest.raises(TraceDiscoveryError, match="job-wide Perfetto trace .* not a profiler"):
        TraceAnalysis(trace_dir=out, cache=False, progress=False)
