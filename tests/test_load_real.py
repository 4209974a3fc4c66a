"""Every real trace in ../shared/traces/hta loads, and what we load equals the JSON.

The reference figures are computed in this file from the raw file with the standard
``json`` and ``gzip`` modules (numbers parsed as ``decimal.Decimal``, so ``ts``/``dur``
are exact): complete events (``ts``, ``dur``, ``cat``, ``name``, ``pid``, ``tid``, event
by event), instant/flow/metadata/counter events, the typed args tables, GPU events and
the runtime <-> GPU links. Rank detection and the folders that are not plain Kineto
traces (``memory_analysis``, ``execution_trace``, files without a rank) are covered too.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, shared_trace
from kineto_builder import TraceBuilder

from hta.errors import TraceDiscoveryError, TraceLoadError
from hta.kineto import native
from hta.model.rules import GPU_KINDS, GPU_WORK_KINDS, MEMORY_KINDS, RUNTIME_KINDS
from hta.model.trace import RankTrace
from hta.trace_analysis import TraceAnalysis


@pytest.fixture(autouse=True, params=["native", "python"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each test on the native column builder and on the pure-Python decoder."""
    if request.param == "native" and not native.built():
        pytest.skip("the native scanner (hta.kineto._scan) is not built")
    monkeypatch.setenv("HTA_NATIVE", "1" if request.param == "native" else "0")
    return request.param

# Folders holding Kineto traces, and the ranks each must load as.
KINETO_FOLDERS: dict[str, list[int]] = {
    "amd_trace": [0],
    "call_stack": [0],
    "cpu_only": [34],
    "critical_path/alexnet": [0],
    "critical_path/cuda_event_sync": [0],
    "critical_path/cuda_event_sync_multi_stream": [0],
    "critical_path/end_to_end/simple_add/input": [0],
    "critical_path/end_to_end/simple_add/output": [0],
    "critical_path/simple_add": [0],
    "cupti_profiler": [0],
    "df_index_resolver": [1],
    "distributed_info_unavailable": [0],  # no distributedInfo, lone file: rank 0
    "execution_trace": [0],
    "mixed_files": [0],
    "mtia_inference_trace": [0],  # no distributedInfo: rank from "..._rank_0" in the name
    "mtia_trace_single_rank": [0],
    "nccl_parser_config": [0],
    "ns_resolution_trace": [0],
    "rank_non_gpu": [0],
    "rank_unavailable": [0],  # distributedInfo without rank, lone file: rank 0
    "timeline_analysis": [0],
    "trace_compare/base": [1],
    "trace_compare/test": [1],
    "trace_diff/control": [3],
    "trace_diff/test": [1],
    "trace_file_list": [1],
    "trace_filter": [0, 1],
    "triton_example": [0],
}
NOT_KINETO = {"memory_analysis"}

# Category families, written from the Kineto writer's categories (see KINETO.md), not
# from our rule table.
# GPU work on NVIDIA/AMD: kernels, copies, memsets (MTIA's "mtia_ccp_events" mixes work,
# DMA and event records, so it only counts among the GPU-side events).
GPU_WORK_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
GPU_CATS = GPU_WORK_CATS | {"cuda_sync", "gpu_user_annotation", "mtia_ccp_events"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime"}
KERNEL_CATS = {"kernel", "Kernel"}
MEMORY_CATS = {"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}
OP_CATS = {"cpu_op", "Operator", "user_annotation"}

# --------------------------------------------------------------------------------------------
# the reference: straight from the JSON
# --------------------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    """The file's JSON, numbers with a fraction as Decimal (exact)."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=Decimal)


def ns(value: Any) -> int:
    """Kineto microseconds (int or Decimal) to integer nanoseconds, exactly."""
    return int(Decimal(value) * 1000)


def num(value: Any) -> float:
    """An optional numeric arg as float; NaN where absent or not a number."""
    if value is None or isinstance(value, (list, dict, bool)):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def intarg(value: Any) -> int:
    """An optional integer arg (possibly a numeric string) as int; -1 where absent."""
    if value is None:
        return -1
    if isinstance(value, str):
        return int(value.strip(), 0)
    return int(value)


def dims(value: Any) -> list[int]:
    if isinstance(value, list) and len(value) == 3:
        return [int(v) for v in value]
    return [-1, -1, -1]


def thread_id(value: Any, named: dict[str, int]) -> int:
    """What a pid/tid must become: ints stay, numeric strings parse, names get ids."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text, 0)
    except ValueError:
        return named[text]


def complete_events(top: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``X`` events, in the order the loader must keep: by exact ts, ties in file
    order."""
    base = int(top.get("baseTimeNanoseconds") or 0)
    events = [e for e in top["traceEvents"] if e.get("ph") == "X"]
    for e in events:
        e["_ts"] = base + ns(e["ts"])
        e["_dur"] = max(ns(e["dur"]), 0) if "dur" in e else 0
    return sorted(events, key=lambda e: e["_ts"])


def table_text(rt: RankTrace, table: str, column: str) -> list[str]:
    """A text column of a side table, whether stored as text or as symbol ids."""
    values = rt.tables[table][column]
    if pd.api.types.is_integer_dtype(values):
        return [rt.symbols[i] for i in values.to_numpy()]
    return [str(v) for v in values]


# --------------------------------------------------------------------------------------------
# every folder is covered
# --------------------------------------------------------------------------------------------


def test_every_shared_folder_is_covered() -> None:
    root = shared_trace()
    folders = {str(p.parent.relative_to(root)) for p in root.rglob("*")
               if p.is_file() and ".hta_cache" not in p.parts}
    assert folders == set(KINETO_FOLDERS) | NOT_KINETO


# --------------------------------------------------------------------------------------------
# each real trace against its JSON
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", list(KINETO_FOLDERS))
def test_real_trace_matches_its_json(folder: str) -> None:
    path = shared_trace(*folder.split("/"))
    analyzer = TraceAnalysis(trace_dir=path, cache=False, progress=False)
    assert analyzer.ranks == KINETO_FOLDERS[folder]
    if folder != "execution_trace":
        assert analyzer.skipped == {}
    for rt in analyzer.t:
        top = read_json(Path(rt.meta["source"]))
        check_complete_events(rt, top)
        check_other_phases(rt, top)
        check_arg_tables(rt, top)
        check_links(rt, top)
        check_metadata(rt, top)


def check_complete_events(rt: RankTrace, top: dict[str, Any]) -> None:
    ref = complete_events(top)
    ev = rt.decoded()
    assert Counter(str(e.get("cat", "")) for e in ref) == Counter(ev["cat"])
    assert len(ev) == len(ref)
    assert ev["ts"].tolist() == [e["_ts"] for e in ref]  # exact to the ns, every event
    assert ev["dur"].tolist() == [e["_dur"] for e in ref]
    assert (ev["end"] == ev["ts"] + ev["dur"]).all()
    assert ev["name"].tolist() == [str(e.get("name", "")) for e in ref]
    assert ev["cat"].tolist() == [str(e.get("cat", "")) for e in ref]
    named = rt.meta["named_ids"]
    assert ev["pid"].tolist() == [thread_id(e.get("pid"), named) for e in ref]
    assert ev["tid"].tolist() == [thread_id(e.get("tid"), named) for e in ref]
    args = [e.get("args", {}) for e in ref]
    assert ev["correlation"].tolist() == [intarg(a.get("correlation")) for a in args]
    assert ev["stream"].tolist() == [intarg(a.get("stream")) for a in args]
    # GPU events: kernel/gpu_memcpy/gpu_memset rows are all GPU work, and every GPU-side
    # category lands on a GPU kind
    work_rows = ev["cat"].isin(GPU_WORK_CATS).to_numpy()
    assert ev["kind"][work_rows].isin(GPU_WORK_KINDS).all()
    assert int(work_rows.sum()) == sum(str(e.get("cat")) in GPU_WORK_CATS for e in ref)
    assert int(ev["kind"].isin(GPU_KINDS).sum()) == sum(
        str(e.get("cat")) in GPU_CATS for e in ref)


def check_other_phases(rt: RankTrace, top: dict[str, Any]) -> None:
    base = int(top.get("baseTimeNanoseconds") or 0)
    events = top["traceEvents"]
    instants = [e for e in events if e.get("ph") in ("i", "I")]
    flows = [e for e in events if e.get("ph") in ("s", "f", "t")]
    metadata = [e for e in events if e.get("ph") == "M"]
    counters = [e for e in events if e.get("ph") == "C"]
    assert len(rt.tables["instants"]) == len(instants)
    assert rt.tables["instants"]["ts"].tolist() == [base + ns(e["ts"]) for e in instants]
    assert table_text(rt, "instants", "name") == [str(e.get("name", "")) for e in instants]
    assert len(rt.tables["flows"]) == len(flows)
    assert rt.tables["flows"]["ts"].tolist() == [base + ns(e["ts"]) for e in flows]
    assert table_text(rt, "flows", "ph") == [e["ph"] for e in flows]
    assert len(rt.tables["metadata_events"]) == len(metadata)
    assert table_text(rt, "metadata_events", "name") == [str(e.get("name")) for e in metadata]
    series = sum(1 for e in counters for v in e.get("args", {}).values() if not math.isnan(num(v)))
    assert len(rt.tables["counters"]) == series


def check_arg_tables(rt: RankTrace, top: dict[str, Any]) -> None:
    ref = complete_events(top)
    cats = rt.decoded(["cat"])["cat"].to_numpy()

    def rows_of(table: str) -> pd.DataFrame:
        frame = rt.tables[table]
        assert frame["index"].is_monotonic_increasing
        return frame

    kernels = [e.get("args", {}) for e in ref if e.get("cat") in KERNEL_CATS]
    ka = rows_of("kernel_args")
    assert len(ka) == len(kernels)
    assert set(cats[ka["index"].to_numpy()]) <= KERNEL_CATS
    if kernels:
        grid = np.array([dims(a.get("grid")) for a in kernels])
        block = np.array([dims(a.get("block")) for a in kernels])
        assert np.array_equal(ka[["grid_x", "grid_y", "grid_z"]].to_numpy(), grid)
        assert np.array_equal(ka[["block_x", "block_y", "block_z"]].to_numpy(), block)
        for col, key in (("registers_per_thread", "registers per thread"),
                         ("shared_memory_bytes", "shared memory"),
                         ("blocks_per_sm", "blocks per SM"), ("warps_per_sm", "warps per SM"),
                         ("est_achieved_occupancy_pct", "est. achieved occupancy %")):
            np.testing.assert_array_equal(ka[col].to_numpy(dtype=float),
                                          [num(a.get(key)) for a in kernels], err_msg=col)
    check_memory_args(rt, ref)
    colls = [e.get("args", {}) for e in ref if e.get("args", {}).get("Collective name")]
    ca = rows_of("collective_args")
    assert len(ca) == len(colls)
    if colls:
        assert ca["collective_name"].tolist() == [str(a["Collective name"]) for a in colls]
        np.testing.assert_array_equal(ca["in_msg_nelems"].to_numpy(dtype=float),
                                      [num(a.get("In msg nelems")) for a in colls])
        np.testing.assert_array_equal(ca["group_size"].to_numpy(dtype=float),
                                      [num(a.get("Group size")) for a in colls])
    syncs = [e.get("args", {}) for e in ref if e.get("cat") == "cuda_sync"]
    sa = rows_of("sync_args")
    assert len(sa) == len(syncs)
    if syncs:
        assert sa["wait_on_stream"].tolist() == [intarg(a.get("wait_on_stream")) for a in syncs]
        assert sa["wait_on_event_correlation"].tolist() == [
            intarg(a.get("wait_on_cuda_event_record_corr_id")) for a in syncs]
    ops = [
        e.get("args", {}) for e in ref if e.get("cat") in OP_CATS and (
            "Input Dims" in e.get("args", {}) or "Input dims" in e.get("args", {})
            or intarg(e.get("args", {}).get("Sequence number")) != -1)
    ]
    oa = rows_of("op_args")
    assert len(oa) == len(ops)
    if ops:
        assert oa["sequence_number"].tolist() == [intarg(a.get("Sequence number")) for a in ops]
        dims_text = [a.get("Input Dims", a.get("Input dims")) for a in ops]
        assert [json.loads(t) if t else None for t in oa["input_dims"]] == dims_text


def check_memory_args(rt: RankTrace, ref: list[dict[str, Any]]) -> None:
    """Copies: ``bytes``, else the copy's own ``size`` (MTIA DMA), else its launch's
    ``size`` (ROCm hipMemcpy)."""
    launch_size = {e["args"]["correlation"]: num(e["args"].get("size")) for e in ref
                   if e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})}

    def copy_bytes(a: dict[str, Any]) -> float:
        for value in (num(a.get("bytes")), num(a.get("size")),
                      launch_size.get(a.get("correlation", -1), math.nan)):
            if not math.isnan(value):
                return value
        return math.nan

    rows = {i: e.get("args", {}) for i, e in enumerate(ref)}
    ma = rt.tables["memory_args"]
    in_cats = [i for i, e in enumerate(ref) if e.get("cat") in MEMORY_CATS]
    assert set(in_cats) <= set(ma["index"])
    if not len(ma):
        return
    assert ma["index"].is_monotonic_increasing and ma["index"].is_unique
    others = ma[~ma["index"].isin(in_cats)]
    assert rt.events["kind"].iloc[others["index"].to_numpy()].isin(MEMORY_KINDS).all()
    assert not others["bytes"].isna().any()  # extra rows only where a size was found
    np.testing.assert_array_equal(ma["bytes"].to_numpy(dtype=float),
                                  [copy_bytes(rows[i]) for i in ma["index"]])
    np.testing.assert_array_equal(
        ma["bandwidth_gbps"].to_numpy(dtype=float),
        [num(rows[i].get("memory bandwidth (GB/s)")) for i in ma["index"]])


def check_links(rt: RankTrace, top: dict[str, Any]) -> None:
    ref = complete_events(top)
    runtime_corr = {e["args"]["correlation"] for e in ref
                    if e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})}
    gpu_corr = {e["args"]["correlation"] for e in ref
                if e.get("cat") in GPU_CATS and "correlation" in e.get("args", {})}

    def linked(cats: set[str]) -> int:
        return sum(1 for e in ref if e.get("cat") in cats
                   and e.get("args", {}).get("correlation", -1) in runtime_corr)

    ev = rt.events
    ic = ev["index_correlation"].to_numpy()
    kind = ev["kind"]
    cat = np.asarray(rt.symbols, dtype=object)[ev["cat"].to_numpy()]
    gpu = kind.isin(GPU_KINDS).to_numpy()
    assert int((gpu & (ic >= 0)).sum()) == linked(GPU_CATS)
    work = np.isin(cat, list(GPU_WORK_CATS))
    assert int((work & (ic >= 0)).sum()) == linked(GPU_WORK_CATS)
    sync = cat == "cuda_sync"
    assert int((sync & (ic >= 0)).sum()) == linked({"cuda_sync"})
    runtime = kind.isin(RUNTIME_KINDS).to_numpy()
    assert int((runtime & (ic >= 0)).sum()) == sum(
        1 for e in ref if e.get("cat") in RUNTIME_CATS
        and e.get("args", {}).get("correlation", -1) in gpu_corr)
    # each link joins a runtime call and a GPU event of the same correlation
    gpu_rows = np.flatnonzero(kind.isin(GPU_KINDS).to_numpy() & (ic >= 0))
    corr = ev["correlation"].to_numpy()
    assert (corr[ic[gpu_rows]] == corr[gpu_rows]).all()
    assert kind.iloc[ic[gpu_rows]].isin(RUNTIME_KINDS).all()
    rt_rows = np.flatnonzero(runtime & (ic >= 0))
    assert kind.iloc[ic[rt_rows]].isin(GPU_KINDS).all()
    assert (corr[ic[rt_rows]] == corr[rt_rows]).all()


def check_metadata(rt: RankTrace, top: dict[str, Any]) -> None:
    meta = rt.meta
    info = top.get("distributedInfo") or {}
    assert meta["rank"] == rt.rank
    assert meta["world_size"] == (int(info["world_size"]) if "world_size" in info else None)
    base = top.get("baseTimeNanoseconds")
    assert meta["base_time_ns"] == (int(base) if base is not None else None)
    assert meta["device_properties"] == json.loads(
        json.dumps(top.get("deviceProperties") or [], default=float))
    if len(rt.events):
        assert meta["trace_start_ns"] == int(rt.events["ts"].min())
        assert meta["trace_end_ns"] == int(rt.events["end"].max())
    assert isinstance(meta["warnings"], list)


# --------------------------------------------------------------------------------------------
# nanosecond timestamps and ROCm
# --------------------------------------------------------------------------------------------


def test_ns_resolution_trace_is_exact_to_the_ns() -> None:
    folder = shared_trace("ns_resolution_trace")
    analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    rt = analyzer.t.rank(0)
    top = read_json(Path(rt.meta["source"]))
    assert "baseTimeNanoseconds" not in top  # absolute epoch µs with 3 decimals
    ref = complete_events(top)
    ours = rt.events
    assert ours["ts"].tolist() == [e["_ts"] for e in ref]
    assert ours["dur"].tolist() == [e["_dur"] for e in ref]
    # the file really has sub-µs digits, and float64 would have lost them
    assert sum(e["_ts"] % 1000 != 0 for e in ref) > len(ref) // 2
    lossy = sum(round(float(e["ts"]) * 1000) != e["_ts"] for e in ref)
    assert lossy > 0


def test_rocm_trace_links_hip_launches_to_kernels() -> None:
    folder = shared_trace("amd_trace")
    analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    rt = analyzer.t.rank(0)
    top = read_json(Path(rt.meta["source"]))
    kernel_corr = {e["args"]["correlation"] for e in top["traceEvents"]
                   if e.get("ph") == "X" and e.get("cat") == "kernel"}
    hip_launches = [e for e in top["traceEvents"] if e.get("ph") == "X"
                    and e.get("cat") == "cuda_runtime"
                    and e.get("args", {}).get("correlation") in kernel_corr]
    assert len(hip_launches) == len(kernel_corr) == 14
    ev = rt.decoded()
    kernels = ev[ev["cat"] == "kernel"]
    assert (kernels["index_correlation"] >= 0).all()
    launchers = ev.iloc[kernels["index_correlation"].to_numpy()]
    assert len(launchers) == len(hip_launches)
    assert set(launchers["name"]) <= {"hipLaunchKernel", "hipExtModuleLaunchKernel",
                                      "hipModuleLaunchKernel", "hipExtLaunchKernel"}
    assert set(launchers["name"]) == {str(e["name"]) for e in hip_launches}
    assert (launchers["kind"] == "runtime_launch").all()
    assert (ev.iloc[launchers["index_correlation"].to_numpy()]["cat"] == "kernel").all()


# --------------------------------------------------------------------------------------------
# folders that are not (only) Kineto traces
# --------------------------------------------------------------------------------------------


def test_memory_timeline_folder_is_refused_with_its_file_named() -> None:
    folder = shared_trace("memory_analysis")
    with pytest.raises(TraceDiscoveryError) as info:
        TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    message = str(info.value)
    assert "no trace files (*.json, *.json.gz)" in message
    assert "memory_timeline.raw.gz" in message and str(folder) in message
    # named explicitly, the file is read and refused as not a Kineto trace
    file = folder / "memory_timeline.raw.gz"
    with pytest.raises(TraceLoadError) as load_info:
        TraceAnalysis(trace_files=[file], cache=False, progress=False, strict=True)
    assert load_info.value.path == str(file)
    assert str(file) in str(load_info.value)
    assert "not a Kineto trace" in str(load_info.value)
    with pytest.raises(TraceDiscoveryError, match=r"no rank could be loaded \("
                       r"memory_timeline\.raw\.gz: the file is JSON but not a Kineto trace"):
        TraceAnalysis(trace_files=[file], cache=False, progress=False)


def test_execution_trace_beside_kineto_trace_is_skipped_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder = shared_trace("execution_trace")
    et_file = folder / "benchmark_simple_add_et.json.gz"
    kineto_file = folder / "benchmark_simple_add_trace.json.gz"
    with caplog.at_level(logging.WARNING, logger="hta"):
        analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    assert analyzer.ranks == [0]
    assert analyzer.metadata(0)["source"] == str(kineto_file)
    assert list(analyzer.skipped) == [str(et_file)]
    reason = analyzer.skipped[str(et_file)]
    assert "not a Kineto trace" in reason and "no 'traceEvents'" in reason
    assert "nodes" in reason  # the top-level keys say what the file is
    assert any(str(et_file) in r.getMessage() for r in caplog.records)
    with pytest.raises(TraceLoadError) as info:
        TraceAnalysis(trace_dir=folder, cache=False, progress=False, strict=True)
    assert info.value.path == str(et_file)


@pytest.mark.parametrize("folder", ["rank_unavailable", "distributed_info_unavailable"])
def test_lone_file_without_rank_is_rank_0(folder: str) -> None:
    path = shared_trace(folder)
    top = read_json(next(path.iterdir()))
    assert "rank" not in (top.get("distributedInfo") or {})
    analyzer = TraceAnalysis(trace_dir=path, cache=False, progress=False)
    assert analyzer.ranks == [0]
    assert analyzer.metadata(0)["world_size"] is None


def test_several_files_without_rank_are_each_reported(tmp_path: Path) -> None:
    src = shared_trace("rank_unavailable", "rank_not_found.json.gz")
    for name in ("job_a.json.gz", "job_b.json.gz"):
        (tmp_path / name).write_bytes(src.read_bytes())
    with pytest.raises(TraceDiscoveryError) as info:
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    message = str(info.value)
    assert "job_a.json.gz: no rank found" in message
    assert "job_b.json.gz: no rank found" in message
    analyzer = TraceAnalysis(trace_files={0: tmp_path / "job_a.json.gz",
                                          1: tmp_path / "job_b.json.gz"},
                             cache=False, progress=False)
    assert analyzer.ranks == [0, 1]


def test_rank_rules_are_documented() -> None:
    doc = (ROOT / "docs" / "loading.md").read_text()
    for phrase in ("distributedInfo.rank", "rank-3", "rank_3", "rank3", "worker3",
                   "lone file", "rank 0", "no rank found", "two files claim rank"):
        assert phrase in doc, phrase


# --------------------------------------------------------------------------------------------
# rank detection on built traces
# --------------------------------------------------------------------------------------------


def write_rank(path: Path, rank: int | None, *, op: str = "aten::mm") -> Path:
    b = TraceBuilder(rank=rank)
    b.cpu_op(op, ts=1_000, dur=500)
    return b.write(path)


def test_rank_from_distributed_info(tmp_path: Path) -> None:
    write_rank(tmp_path / "trace_a.json", 5)
    write_rank(tmp_path / "trace_b.json.gz", 6)
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert analyzer.ranks == [5, 6]
    assert analyzer.metadata(5)["source"] == str(tmp_path / "trace_a.json")


def test_quoted_rank_in_distributed_info(tmp_path: Path) -> None:
    b = TraceBuilder(rank=None, extra_top_level={"distributedInfo": {"rank": "3"}})
    b.cpu_op("x", ts=0, dur=1)
    b.write(tmp_path / "a.json")
    write_rank(tmp_path / "b.json", 4)
    assert TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False).ranks == [3, 4]


@pytest.mark.parametrize("name", ["rank-3.json", "rank_3.json.gz", "rank3.json",
                                  "worker3.json", "host-a.worker3.pt.trace.json.gz",
                                  "train_rank-3.Apr_03_18_51_38.1102.pt.trace.json.gz"])
def test_rank_from_file_name(tmp_path: Path, name: str) -> None:
    write_rank(tmp_path / name, None)
    write_rank(tmp_path / "rank-0.json", None)
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert analyzer.ranks == [0, 3]
    assert analyzer.metadata(3)["source"] == str(tmp_path / name)


def test_distributed_info_wins_over_file_name_and_trace_files_win_over_both(
    tmp_path: Path,
) -> None:
    write_rank(tmp_path / "rank-3.json", 5)
    write_rank(tmp_path / "rank-4.json", 4)
    assert TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False).ranks == [4, 5]
    explicit = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False,
                             trace_files={7: "rank-3.json", 8: "rank-4.json"})
    assert explicit.ranks == [7, 8]
    assert explicit.metadata(7)["source"] == str(tmp_path / "rank-3.json")


def test_lone_file_without_any_rank_is_rank_0(tmp_path: Path) -> None:
    write_rank(tmp_path / "trace.json", None)
    assert TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False).ranks == [0]
    # a single file passed as trace_dir is a lone file too
    single = TraceAnalysis(trace_dir=tmp_path / "trace.json", cache=False, progress=False)
    assert single.ranks == [0]


def test_two_files_with_the_same_rank(tmp_path: Path) -> None:
    write_rank(tmp_path / "a.json", 2)
    write_rank(tmp_path / "b.json", 2)
    with pytest.raises(TraceDiscoveryError) as info:
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    message = str(info.value)
    assert "two files claim rank 2" in message
    assert str(tmp_path / "a.json") in message and str(tmp_path / "b.json") in message
    assert "trace_files=" in message  # says what to do


def test_a_failed_load_leaves_no_temporary_entries(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks that loaded before the load failed (two files for one rank, a strict
    failure) had their temporary Arrow folders left behind, one per rank per try."""
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again, here and in workers
    job = tmp_path / "job"
    job.mkdir()
    write_rank(job / "a.json", 2)
    write_rank(job / "b.json", 2)
    write_rank(job / "c.json", 3)
    with pytest.raises(TraceDiscoveryError, match="two files claim rank 2"):
        TraceAnalysis(trace_dir=job, cache=False, progress=False)
    (job / "b.json").write_text('{"traceEvents": [')
    with pytest.raises(TraceLoadError):
        TraceAnalysis(trace_dir=job, cache=False, progress=False, strict=True)
    assert TraceAnalysis(trace_dir=job, cache=False, progress=False).ranks == [2, 3]
    assert sorted(p.name for p in temp.iterdir() if p.name.startswith("hta-load-")) == []


def test_ranks_option_loads_only_those(tmp_path: Path) -> None:
    for r in range(3):
        write_rank(tmp_path / f"rank-{r}.json", r)
    analyzer = TraceAnalysis(trace_dir=tmp_path, ranks=[0, 2], cache=False, progress=False)
    assert analyzer.ranks == [0, 2]
    with pytest.raises(TraceDiscoveryError) as info:
        TraceAnalysis(trace_dir=tmp_path, ranks=[5], cache=False, progress=False)
    assert str(info.value) == f"none of the ranks [5] is in {tmp_path}; found ranks [0, 1, 2]"


# --------------------------------------------------------------------------------------------
# variants on built traces: base time, string pids, legacy names, counters, side tables
# --------------------------------------------------------------------------------------------


def test_ids_the_table_keeps_narrow_are_checked(tmp_path: Path) -> None:
    """``device`` and ``graph_id`` are int32 in the events table and ``depth`` int16 (103
    bytes an event, not 113): a value they cannot hold is -1 with a warning, never a
    wrapped number."""
    b = TraceBuilder()
    b.gpu("k_ok", "kernel", 1_000, 100, device=3, **{"graph id": 7})
    b.gpu("k_big", "kernel", 2_000, 100, device=1, **{"graph id": 2**31 + 5})
    b.write(tmp_path / "trace.json")
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    ev = analyzer.t.rank(0).events
    assert ev["device"].dtype == np.int32 and ev["graph_id"].dtype == np.int32
    assert ev["depth"].dtype == np.int16
    by_name = dict(zip(analyzer.t.rank(0).decoded()["name"], ev["graph_id"]))
    assert by_name == {"k_ok": 7, "k_big": -1}
    warnings = analyzer.metadata(0)["warnings"]
    assert any("graph_id outside" in w and str(2**31 + 5) in w for w in warnings)


def test_base_time_nanoseconds_is_added_exactly(tmp_path: Path) -> None:
    base = 1_735_632_360_000_000_000
    b = TraceBuilder(rank=0, base_time_ns=base)
    b.cpu_op("aten::mm", ts=4_203_669_604_595_407, dur=1_001)
    b.instant("[memory]", ts=4_203_669_604_595_500)
    analyzer = TraceAnalysis(trace_dir=b.write(tmp_path / "rank-0.json"), cache=False,
                             progress=False)
    rt = analyzer.t.rank(0)
    assert rt.events["ts"].tolist() == [base + 4_203_669_604_595_407]
    assert rt.events["dur"].tolist() == [1_001]
    assert rt.tables["instants"]["ts"].tolist() == [base + 4_203_669_604_595_500]
    assert rt.meta["base_time_ns"] == base


def test_integer_microsecond_timestamps_are_exact(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    # old traces: absolute epoch µs written as integers, no baseTimeNanoseconds
    b.events.append({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1,
                     "ts": 1682725897226747, "dur": 3})
    b.events.append({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1,
                     "ts": 1682725897226751, "dur": 1})
    rt = TraceAnalysis(trace_dir=b.write(tmp_path / "rank-0.json"), cache=False,
                       progress=False).t.rank(0)
    assert rt.events["ts"].tolist() == [1682725897226747000, 1682725897226751000]
    assert rt.events["dur"].tolist() == [3000, 1000]


def test_mixed_integer_and_decimal_timestamps_are_exact(tmp_path: Path) -> None:
    # written as text: a Python float cannot hold 1712195495519689.047
    (tmp_path / "rank-0.json").write_text(
        '{"traceEvents": ['
        '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, '
        '"ts": 1712195495519689, "dur": 3}, '
        '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, '
        '"ts": 1712195495519689.047, "dur": 0.001}]}')
    rt = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False).t.rank(0)
    assert rt.events["ts"].tolist() == [1712195495519689000, 1712195495519689047]
    assert rt.events["dur"].tolist() == [3000, 1]


def test_legacy_categories_and_external_id(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.complete("aten::add", "Operator", ts=1_000, dur=500, **{"external id": 9,
                                                                "Input dims": [[2, 2]]})
    b.complete("cudaLaunchKernel", "Runtime", ts=1_100, dur=50, correlation=4)
    b.complete("add_kernel", "Kernel", ts=2_000, dur=100, pid=0, tid=7, correlation=4,
               stream=7, device=0)
    b.complete("Memcpy HtoD", "Memcpy", ts=3_000, dur=100, pid=0, tid=7, bytes=64)
    ev = TraceAnalysis(trace_dir=b.write(tmp_path / "rank-0.json"), cache=False,
                       progress=False).get_events()
    assert ev["kind"].astype(str).tolist() == ["cpu_op", "runtime_launch", "computation",
                                               "memcpy_htod"]
    assert ev["external_id"].tolist()[0] == 9
    assert ev["index_correlation"].tolist()[:3] == [-1, 2, 1]


def test_counter_events_become_one_row_per_series(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::mm", ts=1_000, dur=500)
    b.events.append({"ph": "C", "name": "gpu_util", "pid": 0, "tid": 0, "ts": 2.5,
                     "args": {"sm": 81.5, "dram": 12}})
    b.events.append({"ph": "C", "name": "queue", "pid": 0, "tid": 7, "ts": 3.001,
                     "args": {"length": 4, "label": "not a number"}})
    rt = TraceAnalysis(trace_dir=b.write(tmp_path / "rank-0.json"), cache=False,
                       progress=False).t.rank(0)
    counters = rt.tables["counters"]
    assert counters[["ts", "series", "value"]].to_dict(orient="records") == [
        {"ts": 2_500, "series": "sm", "value": 81.5},
        {"ts": 2_500, "series": "dram", "value": 12.0},
        {"ts": 3_001, "series": "length", "value": 4.0},
    ]


def test_side_table_names_survive_the_shared_symbol_table(tmp_path: Path) -> None:
    for rank in (0, 1):
        b = TraceBuilder(rank=rank)
        if rank == 1:  # symbols that rank 0 lacks shift rank 1's ids
            b.cpu_op("only_in_rank_1_a", ts=0, dur=10)
            b.cpu_op("only_in_rank_1_b", ts=20, dur=10)
        b.cpu_op("aten::mm", ts=100, dur=1_000)
        b.instant("[memory]", ts=200, Bytes=512)
        b.flow("s", 1, 300, pid=1000, tid=1000)
        b.write(tmp_path / f"rank-{rank}.json")
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    for rt in analyzer.t:
        assert table_text(rt, "instants", "name") == ["[memory]"], rt.rank
        assert table_text(rt, "instants", "cat") == ["cpu_instant_event"], rt.rank
        assert table_text(rt, "flows", "ph") == ["s"], rt.rank
        assert table_text(rt, "flows", "cat") == ["ac2g"], rt.rank
