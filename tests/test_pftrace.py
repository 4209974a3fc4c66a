"""Perfetto protobuf traces as input (hta.kineto.pftrace): a trace built with Perfetto's
protos in the layout of Kineto's Perfetto trace builder, next to the JSON of the same
events, gives the same answers; files are known by content, not name."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from cli_runner import run_cli
from kineto_builder import TraceBuilder

from hta.errors import TraceLoadError
from hta.kineto.decode import decode_trace
from hta.kineto.pftrace import infer_category, looks_like_protobuf
from hta.trace_analysis import TraceAnalysis

pb = pytest.importorskip(
    "perfetto.protos.perfetto.trace.perfetto_trace_pb2",
    reason="Perfetto's Python package is not installed: pip install -e '.[perfetto]'")

BASE_NS = 1_712_195_495_000_000_000
CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaStreamSynchronize": 131}


def run_events(rank: int = 0, world: int = 1) -> TraceBuilder:
    """One CPU-side run: two steps of operators, launches, kernels, a copy and a sync;
    runtime calls carry their cbid as Kineto writes it."""
    b = TraceBuilder(rank=rank, world_size=world, base_time_ns=BASE_NS,
                     extra_top_level={"deviceProperties": [
                         {"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]})
    for step in (1, 2):
        t0 = step * 1_000_000
        with b.step(step, ts=t0, dur=900_000):
            b.cpu_op("aten::mm", ts=t0 + 1_000, dur=20_000)
            b.launch_kernel("sm90_xmma_gemm_bf16", cpu_ts=t0 + 2_000, cpu_dur=5_000,
                            gpu_ts=t0 + 10_000, gpu_dur=300_000)
            b.cpu_op("aten::add", ts=t0 + 30_000, dur=10_000)
            b.launch_kernel("vectorized_elementwise_kernel", cpu_ts=t0 + 31_000,
                            cpu_dur=4_000, gpu_ts=t0 + 320_000, gpu_dur=50_000)
            b.memcpy("DtoH (Device -> Pinned)", cpu_ts=t0 + 40_000, cpu_dur=3_000,
                     gpu_ts=t0 + 400_000, gpu_dur=20_000)
            b.runtime("cudaStreamSynchronize", ts=t0 + 44_000, dur=380_000)
    for e in b.events:
        if e["cat"] == "cuda_runtime":
            e.setdefault("args", {})["cbid"] = CBID[e["name"]]
    return b


def write_kineto_pftrace(doc: dict[str, Any], path: Path, compress: bool = False) -> Path:
    """``doc`` (a Kineto JSON document) as Kineto's Perfetto trace builder lays it out: a
    ``Kineto Trace`` process with the metadata instants, a process per device, a thread
    track per resource and a child track per activity; args as the ``metadata`` JSON
    text without braces, the correlation as ``correlation_id``."""
    base = int(doc.get("baseTimeNanoseconds", 0))

    def ns(us: Any) -> int:  # µs as written (a 16-digit epoch too) to ns, exactly
        return int(Decimal(str(us)) * 1000)

    trace = pb.Trace()
    seq = 77
    uuids = iter(range(1, 1 << 30))

    def packet() -> Any:
        p = trace.packet.add()
        p.trusted_packet_sequence_id = seq
        return p

    main = next(uuids)
    d = packet().track_descriptor
    d.uuid, d.name = main, "Kineto Trace"
    d.process.pid, d.process.process_name = 0, "Kineto Trace"
    meta = packet().track_event
    meta.type, meta.name, meta.track_uuid = pb.TrackEvent.TYPE_INSTANT, "trace_metadata", main
    for key, value in doc.items():
        if key in ("traceEvents", "deviceProperties", "baseTimeNanoseconds"):
            continue
        a = meta.debug_annotations.add()
        a.name, a.string_value = key, json.dumps(value)
    props = packet().track_event
    props.type, props.name, props.track_uuid = (pb.TrackEvent.TYPE_INSTANT,
                                                "device_properties", main)
    a = props.debug_annotations.add()
    a.name = "properties"
    a.string_value = ", ".join(json.dumps(x) for x in doc.get("deviceProperties", []))
    processes: dict[int, int] = {}
    threads: dict[tuple[int, int], int] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if not str(e["pid"]).lstrip("-").isdigit():  # a span ("Spans"): the main track
            start = base + ns(e["ts"])
            for t, kind in ((start, pb.TrackEvent.TYPE_SLICE_BEGIN),
                            (start + ns(e["dur"]),
                             pb.TrackEvent.TYPE_SLICE_END)):
                p = packet()
                p.timestamp = t
                p.track_event.type, p.track_event.track_uuid = kind, main
                if kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
                    p.track_event.name = e["name"]
            continue
        pid, tid = int(e["pid"]), int(e["tid"])
        if pid not in processes:
            processes[pid] = next(uuids)
            d = packet().track_descriptor
            d.uuid, d.name = processes[pid], f"Device {pid}"
            d.process.pid, d.process.process_name = pid, f"Device {pid}"
        if (pid, tid) not in threads:
            threads[pid, tid] = next(uuids)
            d = packet().track_descriptor
            d.uuid, d.parent_uuid, d.name = threads[pid, tid], processes[pid], f"{tid}"
            d.thread.pid, d.thread.tid, d.thread.thread_name = pid, tid, f"{tid}"
        child = next(uuids)
        d = packet().track_descriptor
        d.uuid, d.parent_uuid, d.name = child, threads[pid, tid], f"{tid}"
        start = base + ns(e["ts"])
        end = start + ns(e["dur"])
        p = packet()
        p.timestamp = start
        ev = p.track_event
        ev.type, ev.name, ev.track_uuid = pb.TrackEvent.TYPE_SLICE_BEGIN, e["name"], child
        args = e.get("args") or {}
        if args:
            a = ev.debug_annotations.add()
            a.name, a.string_value = "metadata", json.dumps(args)[1:-1]
        if args.get("correlation"):
            a = ev.debug_annotations.add()
            a.name, a.int_value = "correlation_id", int(args["correlation"])
        p = packet()
        p.timestamp = end
        p.track_event.type = pb.TrackEvent.TYPE_SLICE_END
        p.track_event.track_uuid = child
    data = trace.SerializeToString()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def analyzer(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False, max_workers=1)


def twins(tmp_path: Path, world: int = 1, compress: bool = False) -> tuple[Path, Path]:
    for rank in range(world):
        b = run_events(rank, world)
        b.write(tmp_path / "json" / f"rank-{rank}.json")
        name = f"rank-{rank}.pb.gz" if compress else f"rank-{rank}.pftrace"
        write_kineto_pftrace(b.to_dict(), tmp_path / "pb" / name, compress)
    return tmp_path / "json", tmp_path / "pb"


def test_same_answers_as_the_json(tmp_path: Path) -> None:
    json_dir, pb_dir = twins(tmp_path, world=2)
    a, b = analyzer(json_dir), analyzer(pb_dir)
    assert a.ranks == b.ranks == [0, 1]
    pd.testing.assert_frame_equal(a.get_temporal_breakdown(), b.get_temporal_breakdown())
    pd.testing.assert_frame_equal(a.get_idle_time_breakdown()[0],
                                  b.get_idle_time_breakdown()[0])
    pd.testing.assert_frame_equal(a.get_gpu_kernel_breakdown()[1],
                                  b.get_gpu_kernel_breakdown()[1])
    for rank in (0, 1):
        ea = a.t.rank(rank).decoded(["ts", "end", "name", "kind", "iteration",
                                      "index_correlation", "stream"])
        eb = b.t.rank(rank).decoded(["ts", "end", "name", "kind", "iteration",
                                      "index_correlation", "stream"])
        pd.testing.assert_frame_equal(ea.reset_index(drop=True), eb.reset_index(drop=True))
    assert b.t.rank(0).meta["device_properties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert any("no category" in w for w in b.t.rank(0).meta["warnings"])


def test_gzipped_pb_beside_its_json_twin_is_read_once(tmp_path: Path) -> None:
    json_dir, pb_dir = twins(tmp_path, compress=True)
    # Kineto writes both of one run into one folder: the JSON is read, the twin skipped
    (json_dir / "rank-0.pb.gz").write_bytes((pb_dir / "rank-0.pb.gz").read_bytes())
    assert analyzer(json_dir).ranks == [0]
    alone = analyzer(pb_dir)
    assert alone.ranks == [0] and len(alone.t.rank(0).events) == len(
        analyzer(tmp_path / "json").t.rank(0).events)


def test_json_named_pftrace_is_json(tmp_path: Path) -> None:
    """PyTorch's CPU build asked for export_chrome_trace('x.pftrace') writes JSON under
    that name: one file and a folder of them load as JSON."""
    for rank in (0, 1):
        run_events(rank, 2).write(tmp_path / "f" / f"rank-{rank}.pftrace")
    a = analyzer(tmp_path / "f")
    assert a.ranks == [0, 1]
    assert not any("no category" in w for w in a.t.rank(0).meta["warnings"])
    one = TraceAnalysis(trace_dir=tmp_path / "f" / "rank-1.pftrace", cache=False,
                        progress=False)
    assert one.ranks == [1]


def test_truncated_and_foreign_files_one_error_line(tmp_path: Path) -> None:
    _, pb_dir = twins(tmp_path)
    data = (pb_dir / "rank-0.pftrace").read_bytes()
    cut = tmp_path / "cut" / "rank-0.pftrace"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 2 + 3])
    with pytest.raises(TraceLoadError, match="not a complete Perfetto protobuf trace"):
        decode_trace(cut)
    foreign = tmp_path / "foreign" / "x.pftrace"
    foreign.parent.mkdir()
    empty = pb.Trace()
    empty.packet.add().timestamp = 5  # a valid protobuf trace with no slice at all
    foreign.write_bytes(empty.SerializeToString())
    with pytest.raises(TraceLoadError, match="no slices"):
        decode_trace(foreign)
    for path in (cut, foreign):
        r = run_cli(["summary", str(path.parent), "--no-cache"])
        assert r.returncode == 3
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and path.name in lines[0], r.stderr
        assert "Perfetto protobuf" in lines[0] or "no slices" in lines[0]


def test_sniffing() -> None:
    assert not looks_like_protobuf(b'\n{"traceEvents": []}')
    assert looks_like_protobuf(b"\x0a\x7b\x08\x01\x10\x02")
    assert not looks_like_protobuf(b'{"a": 1}')
    assert infer_category("cudaLaunchKernel", {"cbid": 211, "correlation": 3}) == \
        "cuda_runtime"
    assert infer_category("cuLaunchKernel", {"cbid": 307}) == "cuda_driver"
    assert infer_category("Memcpy HtoD", {"device": 0, "stream": 7}) == "gpu_memcpy"
    assert infer_category("gemm", {"device": 0, "stream": 7}) == "kernel"
    assert infer_category("ProfilerStep#3", {}) == "user_annotation"
    assert infer_category("aten::mm", {"External id": 4}) == "cpu_op"


@pytest.mark.slow
def test_real_trace_twin(tmp_path: Path) -> None:
    """A real trace written again in Kineto's protobuf layout: the same GPU work, the same
    temporal breakdown (categories of CPU annotations are not in the protobuf; GPU work
    is told by its args)."""
    from conftest import shared_trace

    folder = shared_trace("trace_filter")
    source = sorted(folder.glob("*.json*"))[0]
    raw = source.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    write_kineto_pftrace(doc, tmp_path / "pb" / "rank.pftrace")
    a = TraceAnalysis(trace_files=[source], cache=False, progress=False)
    b = analyzer(tmp_path / "pb")
    pd.testing.assert_frame_equal(a.get_temporal_breakdown(), b.get_temporal_breakdown())
    gpu = ["computation", "communication", "memcpy_htod", "memcpy_dtoh", "memcpy_dtod",
           "memset"]
    ka = a.t.rank(a.ranks[0]).decoded(["name", "ts", "end", "kind"])
    kb = b.t.rank(b.ranks[0]).decoded(["name", "ts", "end", "kind"])
    ka, kb = (k[k["kind"].astype(str).isin(gpu)].reset_index(drop=True) for k in (ka, kb))
    assert len(ka) > 1_000
    pd.testing.assert_frame_equal(ka, kb)


@pytest.mark.slow
def test_torch_cpu_run(tmp_path: Path) -> None:
    """PyTorch's CPU build: export_chrome_trace('x.pftrace') writes JSON under that name
    (it has no protobuf output); a folder of such files loads as JSON, and the protobuf
    built from the same run in Kineto's layout gives the same events."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install "
                                "torch==2.13.0, the CPU build)")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        x = torch.randn(64, 64)
        for _ in range(3):
            x = x @ x + 1
    out = tmp_path / "run" / "x.pftrace"
    out.parent.mkdir()
    prof.export_chrome_trace(str(out))
    assert not looks_like_protobuf(out.read_bytes()[:64])  # JSON under a .pftrace name
    folder = TraceAnalysis(trace_dir=out.parent, cache=False, progress=False)
    a = TraceAnalysis(trace_dir=out, cache=False, progress=False)
    assert len(a.t.rank(a.ranks[0]).events) == len(folder.t.rank(folder.ranks[0]).events)
    write_kineto_pftrace(json.loads(out.read_bytes()), tmp_path / "pb" / "x.pftrace")
    b = analyzer(tmp_path / "pb")
    ea = a.t.rank(a.ranks[0]).decoded(["name", "ts", "end", "kind"])
    eb = b.t.rank(b.ranks[0]).decoded(["name", "ts", "end", "kind"])
    ops = ea["kind"].astype(str) == "cpu_op"
    assert ops.sum() > 10
    pd.testing.assert_frame_equal(ea[["name", "ts", "end"]].reset_index(drop=True),
                                  eb[["name", "ts", "end"]].reset_index(drop=True))
    assert (eb["kind"].astype(str).to_numpy()[ops.to_numpy()] == "cpu_op").all()


def test_without_perfetto_the_file_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    _, pb_dir = twins(tmp_path)
    monkeypatch.setitem(sys.modules, "perfetto.protos.perfetto.trace",
                        None)
    with pytest.raises(TraceLoadError, match="pip install perfetto"):
        decode_trace(pb_dir / "rank-0.pftrace")


def test_threaded_decode_of_a_protobuf_trace(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A large protobuf trace's JSON twin is decoded on several threads: the same tables
    as one thread."""
    from test_native_decode import assert_same

    from hta.kineto import decode, native, stream

    if not native.available():
        pytest.skip("the native scanner (hta.kineto._scan) is not built")
    monkeypatch.setattr(decode, "THREADED_MIN_TEXT_BYTES", 0)
    monkeypatch.setattr(stream, "TARGET_CHUNK", 2048)
    path = write_kineto_pftrace(run_events(0, 1).to_dict(), tmp_path / "rank-0.pftrace")
    threaded: list[int] = []
    real = decode._decode_threaded
    monkeypatch.setattr(decode, "_decode_threaded",
                        lambda *a: threaded.append(a[1]) or real(*a))
    one = decode_trace(path, workers=1)
    assert_same(one, decode_trace(path, workers=3))
    assert threaded == [3]
