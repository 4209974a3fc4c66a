"""The links the trace model adds to every event, and the kind rules.

Hand-built traces (``tests/kineto_builder.py``) give answers known by construction:
``parent``/``depth`` (CPU call stacks), ``iteration`` (ProfilerStep spans),
``index_correlation`` (runtime call <-> GPU work), ``op_index`` (enclosing cpu_op) and
``kind`` (the rule table, user rules, unclassified kernels). The vectorised call-stack and
iteration code is also checked against a plain per-event implementation on real traces.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import shared_trace
from kineto_builder import TraceBuilder

from hta.model.rules import CPU_KINDS, GPU_KINDS, KINDS, RUNTIME_KINDS, Rule
from hta.trace_analysis import TraceAnalysis

T0 = 1_000_000  # ns; every hand-built time below is T0 + an offset


def load(tmp_path: Path, builder: TraceBuilder, **kwargs: Any) -> TraceAnalysis:
    """Write the built trace to ``tmp_path`` and load it without cache or progress bar."""
    builder.write(tmp_path / "rank-0.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, **kwargs)


def by_name(analyzer: TraceAnalysis) -> dict[str, pd.Series]:
    """Decoded events keyed by name (the built traces use unique names)."""
    ev = analyzer.get_events()
    assert ev["name"].is_unique, "test traces must use unique names"
    return {row["name"]: row for _, row in ev.iterrows()}


# --------------------------------------------------------------------------------------------
# call stacks
# --------------------------------------------------------------------------------------------


def test_call_stack_nesting_siblings_zero_length_and_threads(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("A", ts=T0, dur=1_000)                  # [0, 1000]    root
    b.cpu_op("B", ts=T0 + 100, dur=300)              # [100, 400]   child of A
    b.cpu_op("Z_in_B", ts=T0 + 200, dur=0)           # zero length inside B
    b.cpu_op("C", ts=T0 + 400, dur=300)              # [400, 700]   touches B: sibling
    b.cpu_op("D", ts=T0 + 450, dur=50)               # [450, 500]   child of C
    b.cpu_op("Z_at_C_end", ts=T0 + 700, dur=0)       # at C's end: not C's child, A's
    b.cpu_op("E", ts=T0 + 1_000, dur=100)            # starts where A ends: a root
    b.cpu_op("F_other_thread", ts=T0 + 50, dur=900, tid=2000)   # inside A's time, own thread
    b.cpu_op("G_other_thread", ts=T0 + 60, dur=10, tid=2000)
    b.cpu_op("H", ts=T0 + 5_000, dur=1_000)          # same start as I, longer: parent
    b.cpu_op("I", ts=T0 + 5_000, dur=500)
    b.kernel("gpu_k", ts=T0 + 150, dur=100)          # GPU rows never join a call stack
    ev = by_name(load(tmp_path, b))
    idx = {name: int(row["index"]) for name, row in ev.items()}
    expected = {
        "A": (-1, 0), "B": ("A", 1), "Z_in_B": ("B", 2), "C": ("A", 1), "D": ("C", 2),
        "Z_at_C_end": ("A", 1), "E": (-1, 0), "F_other_thread": (-1, 0),
        "G_other_thread": ("F_other_thread", 1), "H": (-1, 0), "I": ("H", 1),
        "gpu_k": (-1, -1),
    }
    for name, (parent, depth) in expected.items():
        want_parent = parent if parent == -1 else idx[parent]
        assert (int(ev[name]["parent"]), int(ev[name]["depth"])) == (want_parent, depth), name


def test_op_that_outlives_its_parent_by_a_few_ns(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("P", ts=T0, dur=1_000)                  # [0, 1000]
    b.cpu_op("Q", ts=T0 + 500, dur=505)              # [500, 1005]: 5 ns past P's end
    b.cpu_op("R", ts=T0 + 1_002, dur=2)              # after P ended, inside Q
    b.cpu_op("S", ts=T0 + 1_010, dur=10)             # after both: a root
    a = load(tmp_path, b)
    ev = by_name(a)
    assert int(ev["Q"]["parent"]) == int(ev["P"]["index"]) and int(ev["Q"]["depth"]) == 1
    assert int(ev["R"]["parent"]) == int(ev["Q"]["index"]) and int(ev["R"]["depth"]) == 2
    assert (int(ev["S"]["parent"]), int(ev["S"]["depth"])) == (-1, 0)
    warned = [w for w in a.metadata()["warnings"]
              if w.startswith("1 CPU event(s) overlap their parent without nesting in it")]
    assert len(warned) == 1
    # the warning says what it means for the results
    assert "GPU times and breakdowns are not affected" in warned[0]


def test_runtime_calls_are_part_of_the_call_stack(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::mm", ts=T0, dur=1_000)
    b.launch_kernel("sgemm", cpu_ts=T0 + 100, cpu_dur=50, gpu_ts=T0 + 2_000, gpu_dur=10)
    ev = by_name(load(tmp_path, b))
    assert int(ev["cudaLaunchKernel"]["parent"]) == int(ev["aten::mm"]["index"])
    assert int(ev["cudaLaunchKernel"]["depth"]) == 1
    assert (int(ev["sgemm"]["parent"]), int(ev["sgemm"]["depth"])) == (-1, -1)


# --------------------------------------------------------------------------------------------
# iterations
# --------------------------------------------------------------------------------------------


def _two_step_trace(step_cat: str = "user_annotation") -> TraceBuilder:
    """Steps 1 [0, 10000) and 2 [10000, 20000); a kernel launched in step 1 runs in step 2."""
    b = TraceBuilder(rank=0)
    b.cpu_op("before_steps", ts=T0 - 500, dur=100)
    b.complete("ProfilerStep#1", step_cat, ts=T0, dur=10_000)
    b.cpu_op("op1", ts=T0 + 100, dur=1_000)
    b.launch_kernel("late_kernel", cpu_ts=T0 + 200, cpu_dur=50, gpu_ts=T0 + 15_000,
                    gpu_dur=2_000)
    b.complete("ProfilerStep#2", step_cat, ts=T0 + 10_000, dur=10_000)
    b.cpu_op("op_at_step2_start", ts=T0 + 10_000, dur=100)
    b.launch_kernel("kernel2", cpu_ts=T0 + 10_200, cpu_dur=50, gpu_ts=T0 + 10_500,
                    gpu_dur=100, launcher="cudaLaunchKernelExC")
    b.kernel("unlinked_kernel", ts=T0 + 15_500, dur=10)   # no correlation: by its own ts
    b.cpu_op("between_steps", ts=T0 + 25_000, dur=100)
    return b


@pytest.mark.parametrize("step_cat", ["user_annotation", "cpu_op"])
def test_iteration_of_every_event(tmp_path: Path, step_cat: str) -> None:
    ev = by_name(load(tmp_path, _two_step_trace(step_cat)))
    expected = {
        "before_steps": -1, "ProfilerStep#1": 1, "op1": 1, "late_kernel": 1,
        "ProfilerStep#2": 2, "op_at_step2_start": 2, "kernel2": 2, "unlinked_kernel": 2,
        "between_steps": -1,
    }
    expected |= {"cudaLaunchKernel": 1, "cudaLaunchKernelExC": 2}
    assert {name: int(row["iteration"]) for name, row in ev.items()} == expected


def test_no_steps_means_iteration_zero_everywhere(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::mm", ts=T0, dur=1_000)
    b.launch_kernel("sgemm", cpu_ts=T0 + 100, cpu_dur=50, gpu_ts=T0 + 2_000, gpu_dur=10)
    b.kernel("lone", ts=T0 + 9_000, dur=10)
    ev = load(tmp_path, b).get_events()
    assert (ev["iteration"] == 0).all()


def test_include_last_profiler_step(tmp_path: Path) -> None:
    b = _two_step_trace()
    kept_all = load(tmp_path, b).get_events()
    assert len(kept_all) == 11  # the default keeps every event
    dropped = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False,
                            include_last_profiler_step=False).get_events()
    assert set(dropped["name"]) == {
        "before_steps", "ProfilerStep#1", "op1", "cudaLaunchKernel", "late_kernel",
        "between_steps",
    }
    assert (dropped["iteration"] != 2).all()
    assert len(dropped) == len(kept_all) - 5


def test_links_stay_valid_after_dropping_the_last_step(tmp_path: Path) -> None:
    b = _two_step_trace()
    b.cpu_op("after_parent", ts=T0 + 30_000, dur=1_000)
    b.cpu_op("after_child", ts=T0 + 30_100, dur=100)
    a = load(tmp_path, b, include_last_profiler_step=False)
    rt = a.t.rank(0)
    ev = rt.events
    assert (ev["index"].to_numpy() == np.arange(len(ev))).all()
    dec = a.get_events()
    child = dec.loc[dec["name"] == "after_child"].iloc[0]
    assert dec.iloc[int(child["parent"])]["name"] == "after_parent"
    assert set(rt.tables["kernel_args"]["index"]) <= set(
        np.flatnonzero(dec["cat"].to_numpy() == "kernel"))


def test_unclassified_kernels_after_dropping_the_last_step(tmp_path: Path) -> None:
    b = _two_step_trace()
    b.launch_kernel("mystery_kernel_in_step1", cpu_ts=T0 + 300, cpu_dur=50, gpu_ts=T0 + 400,
                    gpu_dur=10)
    a = load(tmp_path, b, include_last_profiler_step=False)
    names = set(a.get_unclassified_kernels()["name"])
    assert "mystery_kernel_in_step1" in names


# --------------------------------------------------------------------------------------------
# index_correlation and op_index
# --------------------------------------------------------------------------------------------


def test_index_correlation_both_ways_and_graph_launch(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::mm", ts=T0, dur=1_000)
    b.runtime("cudaLaunchKernel", ts=T0 + 100, dur=50, correlation=11)
    b.kernel("k_single", ts=T0 + 2_000, dur=100, correlation=11)
    b.runtime("cudaMemcpyAsync", ts=T0 + 200, dur=50, correlation=12)
    b.gpu("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", ts=T0 + 2_200, dur=100,
          correlation=12, bytes=1024)
    b.runtime("cudaGraphLaunch", ts=T0 + 5_000, dur=50, correlation=20)
    # written out of time order: the launch must point at the earliest one
    b.kernel("graph_k2", ts=T0 + 6_200, dur=100, correlation=20)
    b.kernel("graph_k1", ts=T0 + 6_000, dur=100, correlation=20)
    b.kernel("graph_k3", ts=T0 + 6_400, dur=100, correlation=20)
    b.runtime("cudaStreamSynchronize", ts=T0 + 7_000, dur=50, correlation=30)  # no GPU work
    b.kernel("orphan_kernel", ts=T0 + 8_000, dur=10, correlation=99)         # no launch
    b.cpu_op("op_with_corr", ts=T0 + 9_000, dur=10, correlation=11)          # not a runtime
    ev = by_name(load(tmp_path, b))
    row = {name: int(r["index"]) for name, r in ev.items()}
    ic = {name: int(r["index_correlation"]) for name, r in ev.items()}
    assert ic["k_single"] == row["cudaLaunchKernel"]
    assert ic["cudaLaunchKernel"] == row["k_single"]
    assert ic["Memcpy HtoD (Pinned -> Device)"] == row["cudaMemcpyAsync"]
    assert ic["cudaMemcpyAsync"] == row["Memcpy HtoD (Pinned -> Device)"]
    for k in ("graph_k1", "graph_k2", "graph_k3"):
        assert ic[k] == row["cudaGraphLaunch"], k
    assert ic["cudaGraphLaunch"] == row["graph_k1"]
    assert ev["cudaGraphLaunch"]["kind"] == "runtime_launch"
    assert ic["cudaStreamSynchronize"] == -1
    assert ic["orphan_kernel"] == -1
    assert ic["op_with_corr"] == -1
    assert ic["aten::mm"] == -1


def test_op_index_innermost_cpu_op(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("outer_op", ts=T0, dur=10_000)
    b.cpu_op("inner_op", ts=T0 + 100, dur=5_000)
    b.annotation("my_annotation", ts=T0 + 200, dur=1_000)     # not an op: skipped over
    b.runtime("cudaLaunchKernel", ts=T0 + 300, dur=50, correlation=1)
    b.kernel("k_inner", ts=T0 + 20_000, dur=10, correlation=1)
    b.runtime("cudaMemsetAsync", ts=T0 + 6_000, dur=50, correlation=2)
    b.gpu("Memset (Device)", "gpu_memset", ts=T0 + 21_000, dur=10, correlation=2)
    b.runtime("cuLaunchKernel", ts=T0 + 30_000, dur=50, correlation=3, cat="cuda_driver")
    b.kernel("k_no_op", ts=T0 + 31_000, dur=10, correlation=3)
    ev = by_name(load(tmp_path, b))
    op = {name: int(r["op_index"]) for name, r in ev.items()}
    row = {name: int(r["index"]) for name, r in ev.items()}
    assert op["cudaLaunchKernel"] == row["inner_op"]
    assert op["k_inner"] == row["inner_op"]
    assert op["cudaMemsetAsync"] == row["outer_op"]
    assert op["Memset (Device)"] == row["outer_op"]
    assert op["cuLaunchKernel"] == -1 and op["k_no_op"] == -1
    assert op["outer_op"] == op["inner_op"] == op["my_annotation"] == -1


# --------------------------------------------------------------------------------------------
# kinds
# --------------------------------------------------------------------------------------------

KIND_CASES = [
    ("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     {}, "communication"),
    ("kernel", "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", {}, "communication"),
    ("kernel", "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", {}, "communication"),
    ("kernel", "void nvshmemi_transfer_rma_kernel<int>(void*)", {}, "communication"),
    ("kernel", "void deep_ep::internode::dispatch<true, 8, 3>(int4*, float*)", {},
     "communication"),
    ("kernel", "void deep_ep::intranode::combine<nv_bfloat16, 8>(nv_bfloat16*)", {},
     "communication"),
    ("kernel", "void vllm::cross_device_reduce_1stage<float, 8>(vllm::RankData*)", {},
     "communication"),
    ("kernel", "my_fused_exchange_v3", {"Collective name": "all_to_allv",
                                         "dtype": "BFloat16"}, "communication"),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32", {}, "computation"),
    ("kernel", "Cijk_Alik_Bljk_SB_MT64x16x32", {}, "computation"),
    ("cuda_runtime", "cudaLaunchKernel", {}, "runtime_launch"),
    ("cuda_runtime", "cudaLaunchKernelExC", {}, "runtime_launch"),
    ("cuda_driver", "cuLaunchKernelEx", {}, "runtime_launch"),
    ("cuda_runtime", "cudaGraphLaunch", {}, "runtime_launch"),
    ("cuda_runtime", "hipExtModuleLaunchKernel", {}, "runtime_launch"),
    ("cuda_runtime", "hipLaunchKernel", {}, "runtime_launch"),
    ("cuda_runtime", "cudaMemcpyAsync", {}, "runtime_launch"),
    ("cuda_runtime", "cudaStreamSynchronize", {}, "runtime_sync"),
    ("cuda_runtime", "cudaDeviceSynchronize", {}, "runtime_sync"),
    ("cuda_runtime", "cudaGetDevice", {}, "runtime_other"),
    ("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", {}, "memcpy_htod"),
    ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", {}, "memcpy_dtoh"),
    ("gpu_memcpy", "Memcpy DtoD (Device -> Device)", {}, "memcpy_dtod"),
    ("gpu_memcpy", "Memcpy PtoP (Device -> Device)", {}, "memcpy_ptop"),
    ("gpu_memset", "Memset (Device)", {}, "memset"),
    ("cuda_sync", "Stream Sync", {}, "gpu_sync"),
    ("gpu_user_annotation", "forward", {}, "gpu_annotation"),
    ("Kernel", "legacy_kernel_gemm", {}, "computation"),       # PyTorch 1.8 categories
    ("Operator", "aten::add", {}, "cpu_op"),
    ("Runtime", "cudaLaunchKernel", {}, "runtime_launch"),
    ("python_function", "torch/nn/modules/module.py(1501): _call_impl", {},
     "python_function"),
    ("Trace", "PyTorch Profiler (0)", {}, "other"),
]


@pytest.mark.parametrize(("cat", "name", "args", "kind"), KIND_CASES,
                         ids=[f"{c[0]}:{c[1][:30]}" for c in KIND_CASES])
def test_kind_rules(tmp_path: Path, cat: str, name: str, args: dict[str, Any],
                    kind: str) -> None:
    b = TraceBuilder(rank=0)
    gpu = cat in ("kernel", "Kernel", "gpu_memcpy", "gpu_memset", "cuda_sync",
                  "gpu_user_annotation")
    if gpu:
        b.gpu(name, cat, ts=T0, dur=100, **args)
    else:
        b.complete(name, cat, ts=T0, dur=100, **args)
    ev = load(tmp_path, b).get_events()
    assert ev["kind"].tolist() == [kind]
    assert kind in KINDS


def test_user_rule_goes_first_and_unclassified_kernels_are_listed(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.kernel("my_exchange", ts=T0, dur=100)
    b.kernel("my_exchange", ts=T0 + 200, dur=50)
    b.kernel("zz_mystery_op_v2", ts=T0 + 400, dur=30)
    b.kernel("zz_mystery_op_v2", ts=T0 + 500, dur=12)
    b.kernel("sm80_xmma_gemm_f16", ts=T0 + 600, dur=10)
    a = load(tmp_path, b)
    unclassified = a.get_unclassified_kernels()
    assert unclassified.to_dict(orient="records") == [
        {"rank": 0, "name": "my_exchange", "count": 2, "total_duration(us)": 0.15},
        {"rank": 0, "name": "zz_mystery_op_v2", "count": 2, "total_duration(us)": 0.042},
    ]
    assert set(a.get_events()["kind"]) == {"computation"}
    b2 = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False,
                       kind_rules=[Rule("communication", name="my_exchange")])
    kinds = b2.get_events().groupby("name")["kind"].first().astype(str).to_dict()
    assert kinds == {"my_exchange": "communication", "zz_mystery_op_v2": "computation",
                     "sm80_xmma_gemm_f16": "computation"}
    assert b2.get_unclassified_kernels()["name"].tolist() == ["zz_mystery_op_v2"]
    rules = b2.describe_kind_rules()
    assert rules.iloc[0].to_dict()["source"] == "user"
    assert rules.iloc[0]["name"] == "my_exchange"


def test_rule_with_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown kind 'gpu_magic'"):
        Rule("gpu_magic", name="x")


# --------------------------------------------------------------------------------------------
# cross-check against a plain implementation on real traces
# --------------------------------------------------------------------------------------------


def plain_call_stacks(ev: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Parent/depth by definition: the parent is the open event (started no later, not yet
    ended) on the same thread that comes last in (ts, longer first, row) order."""
    n = len(ev)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.full(n, -1, dtype=np.int64)
    kinds = ev["kind"].astype(str).to_numpy()
    cpu_kinds = set(CPU_KINDS) | {"other"}
    cpu = np.array([k in cpu_kinds and k not in GPU_KINDS for k in kinds]) & (
        ev["pid"].to_numpy() >= 0)
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    threads: dict[tuple[int, int], list[int]] = {}
    for r in np.flatnonzero(cpu):
        threads.setdefault((int(ev["pid"].iat[r]), int(ev["tid"].iat[r])), []).append(int(r))
    for rows in threads.values():
        rows.sort(key=lambda r: (ts[r], -end[r], r))
        open_rows: list[int] = []
        for r in rows:
            open_rows = [p for p in open_rows if end[p] > ts[r]]
            if open_rows:
                parent[r] = open_rows[-1]
                depth[r] = depth[open_rows[-1]] + 1
            else:
                depth[r] = 0
            open_rows.append(r)
    return parent, depth


def plain_iterations(ev: pd.DataFrame, symbols: list[str]) -> np.ndarray:
    """Step number whose [start, end) holds the event's ts (a GPU event: its launch's)."""
    kinds = ev["kind"].astype(str).to_numpy()
    names = np.asarray(symbols, dtype=object)[ev["name"].to_numpy()]
    steps = [
        (int(ev["ts"].iat[r]), int(ev["end"].iat[r]), int(names[r].split("#", 1)[1]))
        for r in range(len(ev))
        if kinds[r] in ("user_annotation", "cpu_op") and names[r].startswith("ProfilerStep#")
        and names[r].split("#", 1)[1].isdigit()
    ]
    if not steps:
        return np.zeros(len(ev), dtype=np.int64)
    out = np.full(len(ev), -1, dtype=np.int64)
    for r, t in enumerate(ev["ts"].to_numpy().tolist()):
        inside = [s for s in steps if s[0] <= t < s[1]]
        if inside:
            out[r] = max(inside)[2]  # the latest-starting step holding t
    launch_of: dict[int, int] = {}
    runtime_kinds = set(RUNTIME_KINDS)
    corr = ev["correlation"].to_numpy()
    for r in range(len(ev)):
        if kinds[r] in runtime_kinds and corr[r] >= 0:
            launch_of.setdefault(int(corr[r]), r)
    for r in range(len(ev)):
        if kinds[r] in GPU_KINDS and corr[r] >= 0 and int(corr[r]) in launch_of:
            out[r] = out[launch_of[int(corr[r])]]
    return out


@pytest.mark.parametrize("folder", ["trace_filter", "critical_path/alexnet",
                                    "ns_resolution_trace"])
def test_vectorised_links_match_a_plain_implementation(folder: str) -> None:
    path = shared_trace(*folder.split("/"))
    hta_logger = logging.getLogger("hta")
    level = hta_logger.level
    hta_logger.setLevel(logging.ERROR)  # the load's warnings are not under test here
    try:
        a = TraceAnalysis(trace_dir=path, cache=False, progress=False)
    finally:  # later tests read hta's warnings
        hta_logger.setLevel(level)
    for rt in a.t:
        ev = rt.events
        parent, depth = plain_call_stacks(ev)
        assert np.array_equal(ev["parent"].to_numpy(), parent)
        assert np.array_equal(ev["depth"].to_numpy().astype(np.int64), depth)
        assert (depth > 0).sum() > 100  # the trace really has call stacks
        iteration = plain_iterations(ev, rt.symbols)
        assert np.array_equal(ev["iteration"].to_numpy(), iteration)
        assert len(set(iteration.tolist()) - {-1}) >= 1
