"""HTA's ``Trace``, ``LabeledTrace`` and the critical path's result, as HTA's callers use
them, on traces built here (answers known by construction)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from kineto_builder import TraceBuilder

from hta.common.trace import RankNotLoadedError, Trace
from hta.trace_analysis import TraceAnalysis
from hta.trace_diff import DeviceType, LabeledTrace

GEMM = "void gemm_kernel<float>(float*, int)"


def two_steps(rank: int | None = 0) -> TraceBuilder:
    """Steps 7 and 8; each: aten::mm [+100, 2_000] launching one GEMM kernel (200 ns GPU)
    and one 4-byte DtoH copy; a cudaStreamSynchronize ends each step.

    Per step: CPU events ProfilerStep, aten::mm, cudaLaunchKernel, cudaMemcpyAsync,
    cudaStreamSynchronize (5); GPU events: the kernel and the copy (2).
    """
    b = TraceBuilder(rank=rank)
    for i, step in enumerate((7, 8)):
        t0 = i * 10_000
        b.annotation(f"ProfilerStep#{step}", t0, 9_000)
        b.cpu_op("aten::mm", t0 + 100, 2_000)
        b.launch_kernel(GEMM, cpu_ts=t0 + 200, cpu_dur=300, gpu_ts=t0 + 600, gpu_dur=200)
        b.memcpy("DtoH", cpu_ts=t0 + 2_200, cpu_dur=100, gpu_ts=t0 + 2_400, gpu_dur=50)
        b.runtime("cudaStreamSynchronize", t0 + 2_500, 500)
    return b


# -- Trace: ranks and files -------------------------------------------------------------------
def test_trace_files_map_ranks_to_files_before_and_after_parsing(tmp_path: Path) -> None:
    a = two_steps(rank=3).write(tmp_path / "job" / "worker_a.json")
    b = two_steps(rank=None).write(tmp_path / "job" / "rank-5.json")
    t = Trace(trace_dir=tmp_path / "job")
    # distributedInfo.rank from the file's head, else the rank in its name
    assert t.trace_files == {3: str(a), 5: str(b)}
    t.parse_traces()
    assert t.get_ranks() == [3, 5] and t.trace_files == {3: str(a), 5: str(b)}
    lone = Trace(trace_dir=tmp_path, trace_files=[str(a)])
    assert lone.trace_files == {3: str(a)}
    given = Trace(trace_files={9: str(b)})
    assert given.trace_files == {9: str(b)}
    given.parse_traces()
    assert given.get_ranks() == [9]


def test_trace_parses_the_files_the_caller_chose_after_construction(tmp_path: Path) -> None:
    for r in (0, 1):
        two_steps(rank=r).write(tmp_path / f"rank-{r}.json")
    t = Trace(trace_dir=tmp_path)
    t.trace_files = {1: t.trace_files[1]}
    t.parse_traces()
    assert t.get_ranks() == [1]
    edited = Trace(trace_dir=tmp_path)
    del edited.trace_files[0]  # edited in place, as HTA's callers do
    edited.parse_traces()
    assert edited.get_ranks() == [1]
    emptied = Trace(trace_dir=tmp_path)
    emptied.trace_files = {}
    with pytest.raises(ValueError, match="no trace file to parse"):
        emptied.parse_traces()


def test_trace_refuses_trace_files_of_another_type(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="trace_files must be a list"):
        Trace(trace_dir=tmp_path, trace_files=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="trace_files must be a list"):
        Trace(trace_dir=tmp_path, trace_files="rank-0.json")  # type: ignore[arg-type]
    # a folder that does not exist maps nothing; parsing it says why
    missing = Trace(trace_dir=tmp_path / "nowhere")
    assert missing.trace_files == {}


def test_a_rank_not_loaded_is_a_value_error_and_a_key_error(tmp_path: Path) -> None:
    two_steps().write(tmp_path / "rank-0.json")
    t = Trace(trace_dir=tmp_path)
    t.parse_traces()
    for kind in (ValueError, KeyError, RankNotLoadedError):
        with pytest.raises(kind, match=r"rank 999 is not loaded; loaded ranks: \[0\]"):
            t.get_trace(999)


# -- LabeledTrace: HTA 0.5's extract_ops and get_ops_summary ----------------------------------
@pytest.fixture
def labeled(tmp_path: Path) -> LabeledTrace:
    two_steps(rank=2).write(tmp_path / "rank-2.json")
    return LabeledTrace(label="base", trace_dir=tmp_path)


def test_extract_ops_by_rank_step_and_device(labeled: LabeledTrace) -> None:
    assert labeled.ranks() == [2] and labeled.iterations() == [7, 8]
    cpu = labeled.extract_ops(2, 8, DeviceType.CPU)
    assert len(cpu) == 5 and (cpu["iteration"] == 8).all()
    gpu = labeled.extract_ops(2, 8, DeviceType.GPU)
    assert len(gpu) == 2 and (gpu["stream"] >= 0).all()
    assert len(labeled.extract_ops(2, [7, 8], "ALL")) == 14
    # defaults: the first rank, the first step, every device
    first = labeled.extract_ops()
    assert len(first) == 7 and set(first["iteration"]) == {7}
    for bad, match in (({"rank": 4}, "no rank 4"), ({"iteration": 9}, "no step 9"),
                       ({"rank": "2"}, "rank must be an int"),
                       ({"device_type": "TPU"}, "device_type")):
        with pytest.raises(ValueError, match=match):
            labeled.extract_ops(**bad)


def test_get_ops_summary_counts_and_sums_per_name(labeled: LabeledTrace) -> None:
    cpu = labeled.extract_ops(2, [7, 8], DeviceType.CPU)
    summary = labeled.get_ops_summary(cpu)
    assert list(summary.columns) == ["cat", "name", "short_name", "counts", "total_duration",
                                     "cat_id", "name_id"]
    by_name = summary.set_index("name")
    assert by_name.loc["aten::mm", "counts"] == 2
    assert by_name.loc["aten::mm", "total_duration"] == 4.0  # µs: 2 x 2_000 ns
    assert by_name.loc["cudaStreamSynchronize", "total_duration"] == 1.0
    assert by_name.loc["ProfilerStep#7", "cat"] == "user_annotation"
    symbols = labeled.t.symbol_table.get_sym_table()
    assert all(symbols[i] == n for i, n in zip(summary["name_id"], summary["name"]))
    gpu = labeled.get_ops_summary(labeled.extract_ops(2, 7, DeviceType.GPU))
    assert gpu.set_index("short_name").loc["gemm_kernel", "total_duration"] == 0.2
    empty = labeled.get_ops_summary(cpu.iloc[0:0])
    assert empty.empty and list(empty.columns) == list(summary.columns)
    with pytest.raises(ValueError, match="dur"):
        labeled.get_ops_summary(cpu.drop(columns=["dur"]))


# -- the critical path: HTA's success flag and this package's path table ----------------------
def test_critical_path_second_item_is_a_success_flag_and_the_path(tmp_path: Path) -> None:
    two_steps().write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    cp_graph, success = a.critical_path_analysis(rank=0, annotation="ProfilerStep",
                                                 instance_id=0)
    # HTA's way: `if success:`
    assert success and success.success is True
    # this package's way: the path's edges as a DataFrame
    assert isinstance(success, pd.DataFrame) and len(success) > 0
    assert int(success["duration(ns)"].sum()) == cp_graph.path_length_ns
    derived = success[success["duration(ns)"] > 0]
    assert type(derived) is pd.DataFrame
    with pytest.raises(ValueError, match="ambiguous"):
        bool(derived)
    with pytest.raises(ValueError, match="no CPU event"):
        a.critical_path_analysis(rank=0, annotation="__nonexistent__")
