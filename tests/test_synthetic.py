"""Tests of the synthetic Kineto trace generator (hta.synthetic) and its ground truth."""

from __future__ import annotations

import copy
import gzip
import json
import pickle
import re
import time
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hta import synthetic as syn
from hta.synthetic import (
    COMPUTE_STREAM,
    COPY_STREAM,
    LAUNCH_NAMES,
    MIN_KERNELS_PER_STEP,
    NCCL_STREAM,
    Microseconds,
    dumps_trace,
    events_per_rank_for,
    generate_job,
    generate_rank,
    kernels_per_step_for_events,
    step_plan,
    summarize_truth,
    write_rank,
)

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
TIME_RE = re.compile(rb'"(ts|dur)":(-?[0-9][0-9.eE+-]*)')
COLLECTIVE_KEYS = (
    "Collective name",
    "dtype",
    "In msg nelems",
    "Out msg nelems",
    "Group size",
    "In split size",
    "Out split size",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "Seq",
)


@pytest.fixture(scope="module")
def job() -> list[dict[str, Any]]:
    return [generate_rank(r, 4, steps=3, kernels_per_step=40, seed=0) for r in range(4)]


def ns(v: Any) -> int:
    return v.ns if isinstance(v, Microseconds) else round(v * 1000)


def gpu_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU_CATS]


# --------------------------------------------------------------------------------------------
# determinism and serialization
# --------------------------------------------------------------------------------------------


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = generate_job(tmp_path / "a", ranks=2, steps=2, kernels_per_step=30, seed=7)
    b = generate_job(tmp_path / "b", ranks=2, steps=2, kernels_per_step=30, seed=7)
    assert [p.name for p in a] == ["rank-0.json.gz", "rank-1.json.gz"]
    for pa, pb in zip(a, b, strict=True):
        assert pa.read_bytes() == pb.read_bytes()
    c = generate_job(tmp_path / "c", ranks=2, steps=2, kernels_per_step=30, seed=8)
    assert gzip.decompress(a[0].read_bytes()) != gzip.decompress(c[0].read_bytes())


def test_parallel_workers_write_same_bytes(tmp_path: Path) -> None:
    serial = generate_job(tmp_path / "s", ranks=3, steps=1, kernels_per_step=20, seed=1)
    parallel = generate_job(
        tmp_path / "p", ranks=3, steps=1, kernels_per_step=20, seed=1, workers=2
    )
    for a, b in zip(serial, parallel, strict=True):
        assert a.name == b.name and a.read_bytes() == b.read_bytes()


def test_dict_is_deterministic() -> None:
    one = dumps_trace(generate_rank(2, 4, steps=2, kernels_per_step=25, seed=3))
    two = dumps_trace(generate_rank(2, 4, steps=2, kernels_per_step=25, seed=3))
    assert one == two


@pytest.mark.parametrize("gz", [True, False])
def test_stream_writer_equals_dict_dump(tmp_path: Path, gz: bool) -> None:
    path = tmp_path / ("r.json.gz" if gz else "r.json")
    write_rank(path, 1, 4, steps=2, kernels_per_step=33, seed=5)
    raw = gzip.decompress(path.read_bytes()) if gz else path.read_bytes()
    assert raw == dumps_trace(generate_rank(1, 4, steps=2, kernels_per_step=33, seed=5))
    assert not list(tmp_path.glob("*.tmp"))


def test_written_file_parses_and_times_have_three_decimals(tmp_path: Path) -> None:
    (path,) = generate_job(tmp_path, ranks=1, steps=2, kernels_per_step=40, gzip=False)
    text = path.read_bytes()
    loaded = json.loads(text)
    assert list(loaded)[-1] == "traceName"
    assert loaded["displayTimeUnit"] == "ns"
    matches = TIME_RE.findall(text)
    n_ts = sum(1 for e in loaded["traceEvents"] if "ts" in e)
    n_dur = sum(1 for e in loaded["traceEvents"] if "dur" in e)
    assert len(matches) == n_ts + n_dur
    for _key, value in matches:
        assert re.fullmatch(rb"-?[0-9]+\.[0-9]{3}", value), value
    # the parsed float times 1000 is the exact ns the generator built
    built = generate_rank(0, 1, steps=2, kernels_per_step=40)
    for e_file, e_dict in zip(loaded["traceEvents"], built["traceEvents"], strict=True):
        for key in ("ts", "dur"):
            if key in e_dict:
                assert e_file[key] == float(e_dict[key])
                assert round(e_file[key] * 1000) == e_dict[key].ns


def test_absolute_time_text_is_exact(tmp_path: Path) -> None:
    trace = generate_rank(1, 2, steps=1, kernels_per_step=20, relative_time=False)
    assert "baseTimeNanoseconds" not in trace
    path = tmp_path / "abs.json"
    write_rank(path, 1, 2, steps=1, kernels_per_step=20, relative_time=False)
    text = path.read_bytes()
    values = TIME_RE.findall(text)
    assert values
    for key, value in values:
        assert re.fullmatch(rb"[0-9]+\.[0-9]{3}", value), value
        if key == b"ts":
            assert value.startswith(b"17121954955"), value  # absolute epoch microseconds
    exact = json.loads(text, parse_float=Decimal)
    for e_file, e_dict in zip(exact["traceEvents"], trace["traceEvents"], strict=True):
        for key in ("ts", "dur"):
            if key in e_dict:
                assert e_file[key] * 1000 == e_dict[key].ns
                assert int(e_file[key] * 1000) == e_dict[key].ns
    # same content, shifted by baseTimeNanoseconds
    rel = generate_rank(1, 2, steps=1, kernels_per_step=20)
    base = rel["baseTimeNanoseconds"]
    for a, r in zip(trace["traceEvents"], rel["traceEvents"], strict=True):
        if "ts" in a:
            assert a["ts"].ns == base + r["ts"].ns


def test_microseconds_value_semantics() -> None:
    m = Microseconds(1_712_195_495_519_689_047)
    assert m.text() == "1712195495519689.047"
    assert float(m) == float("1712195495519689.047")
    assert pickle.loads(pickle.dumps(m)).ns == m.ns
    assert copy.deepcopy(m).ns == m.ns
    assert Microseconds(512).text() == "0.512"
    assert Microseconds(-1_500).text() == "-1.500"
    assert json.loads(json.dumps({"ts": Microseconds(123_456)}))["ts"] == 123.456
    encoded = dumps_trace({"ts": Microseconds(7), "dur": Microseconds(0)})
    assert encoded == b'{"ts":0.007,"dur":0.000}'


# --------------------------------------------------------------------------------------------
# format and content
# --------------------------------------------------------------------------------------------


def test_top_level(job: list[dict[str, Any]]) -> None:
    t = job[2]
    assert list(t)[0] == "schemaVersion" and list(t)[-1] == "traceName"
    assert list(t)[-2] == "traceEvents"
    (dev,) = t["deviceProperties"]
    assert dev["id"] == 2 and dev["numSms"] == 108 and dev["computeMajor"] == 8
    d = t["distributedInfo"]
    assert d["backend"] == "nccl" and d["rank"] == 2 and d["world_size"] == 4
    assert d["pg_count"] == len(d["pg_config"]) == 1
    assert d["pg_config"][0]["ranks"] == [0, 1, 2, 3] and d["nccl_version"]
    assert t["displayTimeUnit"] == "ns"
    assert isinstance(t["baseTimeNanoseconds"], int)


def test_expected_content(job: list[dict[str, Any]]) -> None:
    t = job[0]
    ev = t["traceEvents"]
    names = {e.get("name") for e in ev}
    cats = {e.get("cat") for e in ev}
    assert {
        "cpu_op",
        "user_annotation",
        "cuda_runtime",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "gpu_user_annotation",
        "ac2g",
        "fwdbwd",
        "cpu_instant_event",
        "Trace",
    } <= cats
    assert {
        "ProfilerStep#1",
        "ProfilerStep#2",
        "ProfilerStep#3",
        "aten::linear",
        "aten::addmm",
        "record_param_comms",
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "cudaGraphLaunch",
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "Memcpy HtoD (Pinned -> Device)",
        "Memcpy DtoH (Device -> Pageable)",
        "Memcpy DtoD (Device -> Device)",
        "Memset (Device)",
        "[memory]",
        "Iteration Start: PyTorch Profiler",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWork*)",
        "process_name",
        "thread_name",
        "process_sort_index",
    } <= names
    assert {e["tid"] for e in gpu_events(t)} == {COMPUTE_STREAM, NCCL_STREAM, COPY_STREAM}
    assert {e["pid"] for e in gpu_events(t)} == {0}
    stream_names = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    assert "stream 7 " in stream_names
    # nested cpu ops carry the usual args
    addmm = next(e for e in ev if e.get("name") == "aten::addmm")
    assert {"External id", "Input Dims", "Input type"} <= set(addmm["args"])
    linear = next(e for e in ev if e.get("name") == "aten::linear")
    assert "Sequence number" in linear["args"]
    # kernels carry launch-configuration args; graph kernels share one correlation
    k = next(e for e in ev if e.get("cat") == "kernel")
    assert {
        "correlation",
        "External id",
        "device",
        "stream",
        "grid",
        "block",
        "registers per thread",
        "shared memory",
        "blocks per SM",
        "warps per SM",
        "est. achieved occupancy %",
    } <= set(k["args"])
    graph = [e for e in ev if e.get("cat") == "kernel" and "graph id" in e["args"]]
    by_corr = defaultdict(list)
    for e in graph:
        by_corr[e["args"]["correlation"]].append(e)
    assert len(by_corr) == 3 and all(len(v) == 4 for v in by_corr.values())
    launches = {e["args"]["correlation"]: e["name"] for e in ev if e.get("cat") == "cuda_runtime"}
    assert {launches[c] for c in by_corr} == {"cudaGraphLaunch"}
    # memcpy / memset args
    for e in ev:
        if e.get("cat") in ("gpu_memcpy", "gpu_memset"):
            assert e["args"]["bytes"] > 0 and e["args"]["memory bandwidth (GB/s)"] > 0
    # memory events: frees are negative, totals consistent
    mem = [e for e in ev if e.get("name") == "[memory]"]
    assert any(e["args"]["Bytes"] < 0 for e in mem)
    for e in mem:
        a = e["args"]
        assert e["ph"] == "i" and e["cat"] == "cpu_instant_event"
        assert a["Total Reserved"] >= a["Total Allocated"] > 0 and a["Device Type"] == 1
    # sub-microsecond kernels and exactly one zero-duration kernel
    durs = [ns(e["dur"]) for e in ev if e.get("cat") == "kernel"]
    assert durs.count(0) == 1 and sum(0 < d < 1000 for d in durs) >= 3


def test_flows(job: list[dict[str, Any]]) -> None:
    ev = job[1]["traceEvents"]
    runtime = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime"}
    gpu = defaultdict(list)
    for e in gpu_events(job[1]):
        gpu[e["args"]["correlation"]].append(e)
    starts = [e for e in ev if e.get("ph") == "s" and e["cat"] == "ac2g"]
    ends = [e for e in ev if e.get("ph") == "f" and e["cat"] == "ac2g"]
    assert starts and ends
    for s in starts:
        r = runtime[s["id"]]
        assert (s["pid"], s["tid"], ns(s["ts"])) == (r["pid"], r["tid"], ns(r["ts"]))
    for f in ends:
        assert f["bp"] == "e"
        assert any(
            (f["pid"], f["tid"], ns(f["ts"])) == (g["pid"], g["tid"], ns(g["ts"]))
            for g in gpu[f["id"]]
        )
    # one trailing launch whose kernel is outside the window: an unmatched start
    assert len({s["id"] for s in starts} - set(gpu)) == 1
    fs = [e for e in ev if e.get("cat") == "fwdbwd"]
    s_ids = {e["id"] for e in fs if e["ph"] == "s"}
    f_ids = {e["id"] for e in fs if e["ph"] == "f"}
    assert s_ids == f_ids and len(s_ids) == 3 * step_plan(40)[0]


# --------------------------------------------------------------------------------------------
# timing invariants
# --------------------------------------------------------------------------------------------


def test_stream_kernels_do_not_overlap(job: list[dict[str, Any]]) -> None:
    for t in job:
        per_stream = defaultdict(list)
        for e in gpu_events(t):
            per_stream[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["dur"])))
        assert len(per_stream) == 3
        for intervals in per_stream.values():
            intervals.sort()
            for (s0, d0), (s1, _d1) in zip(intervals, intervals[1:], strict=False):
                assert s1 >= s0 + d0


def test_gpu_events_start_after_launch(job: list[dict[str, Any]]) -> None:
    for t in job:
        launch = {
            e["args"]["correlation"]: ns(e["ts"])
            for e in t["traceEvents"]
            if e.get("cat") == "cuda_runtime" and e["name"] in LAUNCH_NAMES
        }
        for e in gpu_events(t):
            assert ns(e["ts"]) > launch[e["args"]["correlation"]]


def test_cpu_events_nest_per_thread(job: list[dict[str, Any]]) -> None:
    per_thread = defaultdict(list)
    for e in job[0]["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in {"cpu_op", "user_annotation", "cuda_runtime"}:
            per_thread[e["tid"]].append((ns(e["ts"]), -ns(e["dur"])))
    assert len(per_thread) == 2
    for spans in per_thread.values():
        spans.sort()
        stack: list[int] = []
        for start, neg_dur in spans:
            end = start - neg_dur
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], "partially overlapping CPU events"
            stack.append(end)


def test_gpu_has_idle_gaps_and_comm_compute_overlap(job: list[dict[str, Any]]) -> None:
    truth = summarize_truth(job[0])
    assert truth["gpu_idle_ns"] > 400_000 * 3  # at least the data-loading gaps
    assert truth["comm_compute_overlap_ns"] > 0


# --------------------------------------------------------------------------------------------
# across ranks
# --------------------------------------------------------------------------------------------

_RANK_SPECIFIC_ARGS = {"Rank", "device", "Device Id", "Addr", "memory bandwidth (GB/s)"}


def _normalized(trace: dict[str, Any]) -> list[tuple[Any, ...]]:
    pid = next(e["pid"] for e in trace["traceEvents"] if e.get("cat") == "cpu_op")
    dev = trace["deviceProperties"][0]["id"]
    tids: dict[Any, str] = {}
    out = []
    for e in trace["traceEvents"]:
        p = e.get("pid")
        role = "cpu" if p == pid else "gpu" if p == dev else p
        tid = e.get("tid")
        if role == "cpu" and tid != 0:
            tid = tids.setdefault(tid, f"thread{len(tids)}")
        args = e.get("args", {})
        kept = {k: v for k, v in args.items() if k not in _RANK_SPECIFIC_ARGS}
        if e.get("ph") == "M":
            kept = {
                k: (v if isinstance(v, str) and "thread " not in v and "GPU " not in v else "*")
                for k, v in kept.items()
            }
            if e["name"] in ("process_sort_index", "thread_sort_index"):
                kept = {}
        out.append(
            (
                e.get("ph"),
                e.get("cat"),
                e.get("name"),
                role,
                tid,
                e.get("id"),
                json.dumps(kept, sort_keys=True),
            )
        )
    return out


def test_ranks_differ_only_where_they_should(job: list[dict[str, Any]]) -> None:
    ref = _normalized(job[0])
    for r in range(1, 4):
        assert _normalized(job[r]) == ref
        a, b = job[0]["traceEvents"], job[r]["traceEvents"]
        assert sum(ns(x["ts"]) != ns(y["ts"]) for x, y in zip(a, b, strict=True)) > len(a) // 2
        assert a[0]["pid"] != b[0]["pid"]
        assert {e["pid"] for e in gpu_events(job[r])} == {r}
        assert job[r]["distributedInfo"]["rank"] == r
    assert len({json.dumps(summarize_truth(t)["gpu_busy_ns"]) for t in job}) > 1


def test_collective_args_match_across_ranks(job: list[dict[str, Any]]) -> None:
    def collectives(trace: dict[str, Any], cat: str) -> list[tuple[Any, ...]]:
        return [
            tuple(e["args"][k] for k in COLLECTIVE_KEYS)
            for e in trace["traceEvents"]
            if e.get("cat") == cat and "Collective name" in e.get("args", {})
        ]

    layers, buckets, _ = step_plan(40)
    ref_cpu = collectives(job[0], "cpu_op")
    ref_gpu = collectives(job[0], "kernel")
    assert len(ref_cpu) == 3 * (buckets + 1)
    assert ref_cpu == ref_gpu  # the writer copies the collective args onto NCCL kernels
    assert [c[COLLECTIVE_KEYS.index("Seq")] for c in ref_cpu] == list(range(1, len(ref_cpu) + 1))
    for t in job[1:]:
        assert collectives(t, "cpu_op") == ref_cpu
        assert collectives(t, "kernel") == ref_gpu
    for e in job[3]["traceEvents"]:
        if e.get("name") == "record_param_comms":
            assert e["args"]["Rank"] == 3 and e["args"]["Process Group Ranks"] == "[0, 1, 2, 3]"
    nccl = [e for e in gpu_events(job[0]) if e["name"].startswith("nccl")]
    assert {e["tid"] for e in nccl} == {NCCL_STREAM}
    assert {e["name"].split("(")[0] for e in nccl} == {
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        "ncclKernel_AllGather_RING_LL_Sum_int8_t",
    }


# --------------------------------------------------------------------------------------------
# ground truth
# --------------------------------------------------------------------------------------------


def _busy_by_mask(trace: dict[str, Any]) -> tuple[int, int, int]:
    iv = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in gpu_events(trace)]
    lo = min(s for s, _ in iv)
    hi = max(e for _, e in iv)
    mask = np.zeros(hi - lo, dtype=bool)
    for s, e in iv:
        mask[s - lo : e - lo] = True
    return int(mask.sum()), hi - lo, lo


@pytest.mark.parametrize(("steps", "kps"), [(3, 40), (1, MIN_KERNELS_PER_STEP), (2, 57)])
def test_truth_self_consistent(steps: int, kps: int) -> None:
    trace = generate_rank(1, 4, steps=steps, kernels_per_step=kps, seed=11)
    t = summarize_truth(trace)
    n = len(trace["traceEvents"])
    assert t["num_events"] == n == events_per_rank_for(steps, kps)
    assert sum(t["counts_by_ph"].values()) == n
    assert sum(t["counts_by_cat"].values()) == n - t["counts_by_ph"]["M"] - 2  # 2 cat-less 'i'
    gpu_total = sum(t["gpu_kind_counts"].values())
    assert gpu_total == t["gpu_events"] == kps * steps
    assert gpu_total == sum(t["counts_by_cat"][c] for c in GPU_CATS)
    assert sum(t["gpu_events_by_stream"].values()) == gpu_total
    kinds = t["gpu_kind_counts"]
    layers, buckets, extras = step_plan(kps)
    assert kinds["communication"] == steps * (buckets + 1)
    assert kinds["memcpy_HtoD"] == kinds["memcpy_DtoH"] == kinds["memcpy_DtoD"] == steps
    assert kinds["memset"] == steps
    assert kinds["computation"] + kinds["communication"] == t["counts_by_cat"]["kernel"]
    assert t["zero_duration_gpu_events"] == 1
    # launches: every one is linked except the trailing out-of-window launch
    assert t["runtime_launches"] == sum(t["runtime_by_name"].get(k, 0) for k in LAUNCH_NAMES)
    assert t["runtime_launches_linked"] == t["runtime_launches"] - 1
    assert t["gpu_events_linked"] == gpu_total
    assert t["runtime_launches"] == gpu_total - steps * 3 + 1  # graph: 1 launch, 4 kernels
    assert t["runtime_events"] == t["counts_by_cat"]["cuda_runtime"]
    # busy/idle: exact, checked against an independent ns-resolution mask
    busy, span, first = _busy_by_mask(trace)
    base = trace["baseTimeNanoseconds"]
    assert t["gpu_busy_ns"] == busy
    assert t["gpu_span_ns"] == span == t["gpu_last_end_ns"] - t["gpu_first_start_ns"]
    assert t["gpu_first_start_ns"] == base + first
    assert t["gpu_idle_ns"] == span - busy > 0
    assert max(t["gpu_kind_time_ns"].values()) <= busy <= sum(t["gpu_kind_time_ns"].values())
    assert t["profiler_steps"] == steps
    assert t["profiler_step_names"] == [f"ProfilerStep#{i + 1}" for i in range(steps)]
    assert len(t["collectives"]) == steps * (buckets + 1)
    assert t["flow_counts"]["fwdbwd_s"] == t["flow_counts"]["fwdbwd_f"] == steps * layers
    assert t["flow_counts"]["ac2g_s"] == t["runtime_launches"]
    assert t["flow_counts"]["ac2g_f"] == gpu_total
    assert t["memory_events"] == steps * (2 * layers + 2)
    json.dumps(t)  # plain JSON-serializable values


def test_truth_from_parsed_file_matches(tmp_path: Path, job: list[dict[str, Any]]) -> None:
    path = write_rank(tmp_path / "rank-0.json.gz", 0, 4, steps=3, kernels_per_step=40, seed=0)
    with gzip.open(path) as fh:
        parsed = json.load(fh)
    assert summarize_truth(parsed) == summarize_truth(job[0])


def test_gpu_kind_names() -> None:
    assert syn.gpu_kind("kernel", "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWork*)") == (
        "communication"
    )
    assert syn.gpu_kind("kernel", "ampere_sgemm_128x64_tn") == "computation"
    assert syn.gpu_kind("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)") == "memcpy_DtoH"
    assert syn.gpu_kind("gpu_memset", "Memset (Device)") == "memset"


# --------------------------------------------------------------------------------------------
# sizing, CLI, validation, speed
# --------------------------------------------------------------------------------------------


def test_step_plan_adds_up() -> None:
    for k in range(MIN_KERNELS_PER_STEP, 2_000):
        layers, buckets, extras = step_plan(k)
        assert layers >= 1 and buckets >= 1 and extras >= 0
        assert 11 + 5 * layers + buckets + extras == k
    with pytest.raises(ValueError):
        step_plan(MIN_KERNELS_PER_STEP - 1)


@pytest.mark.parametrize(("steps", "kps"), [(1, 17), (1, 18), (2, 24), (3, 40), (1, 101)])
def test_events_per_rank_for_is_exact(steps: int, kps: int) -> None:
    assert len(generate_rank(0, 2, steps=steps, kernels_per_step=kps)["traceEvents"]) == (
        events_per_rank_for(steps, kps)
    )


def test_kernels_per_step_for_events() -> None:
    for target, steps in [(1_000, 1), (50_000, 3), (1_000_000, 3), (10, 1)]:
        k = kernels_per_step_for_events(target, steps)
        assert events_per_rank_for(steps, k) >= target
        assert k == MIN_KERNELS_PER_STEP or events_per_rank_for(steps, k - 1) < target


def test_invalid_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        generate_rank(4, 4)
    with pytest.raises(ValueError):
        generate_rank(0, 1, steps=0)
    with pytest.raises(ValueError):
        generate_job(tmp_path / "x", ranks=0)
    with pytest.raises(ValueError):
        generate_job(tmp_path / "y", kernels_per_step=3)
    assert not (tmp_path / "y").exists()


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "job"
    rc = syn.main(
        [
            str(out),
            "--ranks",
            "2",
            "--steps",
            "1",
            "--kernels-per-step",
            "20",
            "--seed",
            "3",
            "--no-gzip",
        ]
    )
    assert rc == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["rank-0.json", "rank-1.json"]
    assert str(events_per_rank_for(1, 20)) in capsys.readouterr().out
    data = json.loads((out / "rank-1.json").read_bytes())
    assert data["distributedInfo"]["world_size"] == 2
    assert (out / "rank-1.json").read_bytes() == dumps_trace(
        generate_rank(1, 2, steps=1, kernels_per_step=20, seed=3)
    )


def test_committed_samples_match_generator() -> None:
    sample_dir = Path(__file__).resolve().parents[1] / "sample_traces" / "synthetic_4rank"
    files = sorted(sample_dir.glob("rank-*.json.gz"))
    if not files:
        pytest.skip("sample_traces/synthetic_4rank not generated")
    assert [f.name for f in files] == [f"rank-{r}.json.gz" for r in range(4)]
    for r, f in enumerate(files):
        assert f.stat().st_size < 150_000
        expected = dumps_trace(generate_rank(r, 4, steps=3, kernels_per_step=40, seed=0))
        assert gzip.decompress(f.read_bytes()) == expected


def test_generates_200k_events_quickly(tmp_path: Path) -> None:
    steps = 2
    kps = kernels_per_step_for_events(200_000, steps)
    t0 = time.perf_counter()
    path = write_rank(tmp_path / "big.json.gz", 0, 8, steps=steps, kernels_per_step=kps)
    elapsed = time.perf_counter() - t0
    assert elapsed < 30, f"200k events took {elapsed:.1f} s"
    assert path.stat().st_size > 0
    with gzip.open(path) as fh:
        head = fh.read(200)
    assert head.startswith(b'{"schemaVersion":1,')
