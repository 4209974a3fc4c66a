"""Every facade method answers the same on an in-memory job and on a Dask job, and the
per-rank methods leave a Dask job's ranks on the workers.

The job is a small generated one (3 ranks, :mod:`hta.synthetic`), loaded once in memory
and once on a two-worker Dask cluster. For each per-rank method the Dask job's
``rank()`` (the only way a rank is read into this process) is replaced by a function
that fails the test, and the job's client-side resident set must stay empty: the
method's answer was computed on the workers and only per-rank results travelled. The
methods about one rank (critical path, a kernel-sequence overlay, one rank's events)
read exactly that rank.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dask_cases import local_client
from kineto_builder import TraceBuilder

from hta.job.distributed import DistributedJob
from hta.model.job import Job
from hta.model.trace import Trace
from hta.synthetic import generate_job
from hta.trace_analysis import TraceAnalysis

distributed = pytest.importorskip("distributed")

Call = Callable[[TraceAnalysis], Any]

#: Per-rank facade methods, each with arguments that exercise its rules (folding,
#: thresholds, iterations); none may read a rank into the client.
PER_RANK: dict[str, Call] = {
    "get_rank_summary": lambda a: a.get_rank_summary(),
    "get_unclassified_kernels": lambda a: a.get_unclassified_kernels(),
    "metadata": lambda a: a.metadata(1),
    "get_temporal_breakdown": lambda a: a.get_temporal_breakdown(visualize=False),
    "get_temporal_breakdown_detail": lambda a: a.get_temporal_breakdown_detail(
        per_iteration=True, visualize=False),
    "get_idle_time_breakdown": lambda a: a.get_idle_time_breakdown(
        show_idle_interval_stats=True, visualize=False),
    "get_idle_time_breakdown(iterations)": lambda a: a.get_idle_time_breakdown(
        iterations=[1], consecutive_kernel_delay_ns=2_000, visualize=False),
    "get_gpu_kernel_breakdown": lambda a: a.get_gpu_kernel_breakdown(
        num_kernels=3, duration_ratio=0.5, visualize=False),
    "get_gpu_kernel_breakdown(no memory)": lambda a: a.get_gpu_kernel_breakdown(
        include_memory_kernels=False, ranks=[0, 2], iterations=[1], visualize=False),
    "get_comm_comp_overlap": lambda a: a.get_comm_comp_overlap(visualize=False),
    "get_gpu_user_annotation_breakdown": lambda a: a.get_gpu_user_annotation_breakdown(
        num_kernels=2, visualize=False),
    "get_gpu_user_annotation_breakdown(cpu)": lambda a: a.get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False, num_kernels=3, allowlist_patterns=["ProfilerStep"],
        visualize=False),
    "get_cuda_kernel_launch_stats": lambda a: a.get_cuda_kernel_launch_stats(
        include_memory_events=False, visualize=False),
    "get_launch_pairing_summary": lambda a: a.get_launch_pairing_summary(),
    "get_queue_length_time_series": lambda a: a.get_queue_length_time_series(),
    "get_queue_length_summary": lambda a: a.get_queue_length_summary(),
    "get_queue_length_summary_from_time_series":
        lambda a: a.get_queue_length_summary_from_time_series(
            a.get_queue_length_time_series(ranks=[0, 2])),
    "get_time_spent_blocked_on_full_queue": lambda a: a.get_time_spent_blocked_on_full_queue(2),
    "get_time_spent_blocked_on_full_queue(series)":
        lambda a: a.get_time_spent_blocked_on_full_queue(
            a.get_queue_length_time_series(), max_queue_length=2),
    "get_memory_bw_time_series": lambda a: a.get_memory_bw_time_series(),
    "get_memory_bw_summary": lambda a: a.get_memory_bw_summary(),
    "get_operator_breakdown": lambda a: a.get_operator_breakdown(
        group_by_input_shape=True, visualize=False),
    "get_profiler_steps": lambda a: a.get_profiler_steps(),
    "get_profiler_step_spans": lambda a: a.get_profiler_step_spans(),
    "get_aten_op_kernels_and_delay": lambda a: a.get_aten_op_kernels_and_delay(),
    "get_memory_timeline": lambda a: a.get_memory_timeline(),
    "get_memory_summary": lambda a: a.get_memory_summary(),
    "get_memory_peak_operators": lambda a: a.get_memory_peak_operators(),
    "get_timeline_segments": lambda a: a.get_timeline_segments(max_segments=200),
    "get_collective_arrivals": lambda a: a.get_collective_arrivals(),
    "get_straggler_summary": lambda a: a.get_straggler_summary(),
    "get_potential_stragglers": lambda a: a.get_potential_stragglers(),
}

#: Methods about one rank: they read that rank (and only it) into the client.
ONE_RANK: dict[str, tuple[int, Call]] = {
    "critical_path_analysis": (1, lambda a: a.critical_path_analysis(1)[1]),
    "get_critical_path_summary": (2, lambda a: a.get_critical_path_summary(
        2, visualize=False)),
    "get_gpu_kernels_with_user_annotations":
        (0, lambda a: a.get_gpu_kernels_with_user_annotations(0)),
    "get_events": (2, lambda a: a.get_events(2)),
}


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with local_client() as dask_client:
        yield dask_client


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("job3")
    generate_job(path, ranks=3, steps=2, kernels_per_step=24)
    return path


@pytest.fixture(scope="module")
def local(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


@pytest.fixture(scope="module")
def remote(folder: Path, client: Any) -> Iterator[TraceAnalysis]:
    analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False, client=client)
    yield analyzer
    analyzer.close()


def _no_read(self: DistributedJob, rank: int) -> None:
    raise AssertionError(f"rank {rank} was read into the client")


def assert_same(got: Any, expected: Any, what: str) -> None:
    """Equal answers: frames (every value and dtype), tuples, dicts, lists, scalars."""
    if isinstance(expected, pd.DataFrame):
        assert isinstance(got, pd.DataFrame), what
        if "op_stack" in expected:  # lists in cells: compare them as tuples
            expected = expected.assign(op_stack=expected["op_stack"].map(tuple))
            got = got.assign(op_stack=got["op_stack"].map(tuple))
        pd.testing.assert_frame_equal(got, expected, obj=what)
    elif isinstance(expected, (tuple, list)) and any(
            isinstance(e, pd.DataFrame) for e in expected):
        assert len(got) == len(expected), what
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{what}[{i}]")
    elif isinstance(expected, dict) and any(
            isinstance(e, pd.DataFrame) for e in expected.values()):
        assert sorted(got) == sorted(expected), what
        for key in expected:
            assert_same(got[key], expected[key], f"{what}[{key}]")
    else:
        assert got == expected, what


def test_the_jobs_are_what_they_should_be(local: TraceAnalysis,
                                          remote: TraceAnalysis) -> None:
    assert type(local.t) is Trace and isinstance(remote.t, DistributedJob)
    assert not isinstance(remote.t, Trace)  # composition, not a subclass
    assert isinstance(local.t, Job) and isinstance(remote.t, Job)
    assert remote.ranks == local.ranks == [0, 1, 2]
    assert remote.t.symbols == local.t.symbols
    assert remote.t.resident_ranks() == []  # loading brought no rank to the client


@pytest.mark.parametrize("name", list(PER_RANK))
def test_per_rank_method_runs_on_the_workers(name: str, local: TraceAnalysis,
                                             remote: TraceAnalysis,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    expected = PER_RANK[name](local)
    with monkeypatch.context() as patch:
        patch.setattr(DistributedJob, "rank", _no_read)
        got = PER_RANK[name](remote)
    assert remote.t.resident_ranks() == []
    assert_same(got, expected, name)


@pytest.mark.parametrize("name", list(ONE_RANK))
def test_one_rank_method_reads_only_its_rank(name: str, local: TraceAnalysis,
                                             remote: TraceAnalysis) -> None:
    rank, call = ONE_RANK[name]
    remote.t._resident.clear()
    expected = call(local)
    got = call(remote)
    assert remote.t.resident_ranks() == [rank]
    assert_same(got, expected, name)
    remote.t._resident.clear()


def test_kernel_sequences_found_on_the_workers_overlay_reads_one_rank(
        local: TraceAnalysis, remote: TraceAnalysis, tmp_path: Path) -> None:
    remote.t._resident.clear()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    expected = local.get_frequent_cuda_kernel_sequences("aten::linear", tmp_path / "a",
                                                        min_pattern_len=1, rank=1)
    got = remote.get_frequent_cuda_kernel_sequences("aten::linear", tmp_path / "b",
                                                    min_pattern_len=1, rank=1)
    assert len(expected) and remote.t.resident_ranks() == [1]  # the overlay's rank
    assert_same(got, expected, "get_frequent_cuda_kernel_sequences")
    written = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "a").iterdir()) and written
    remote.t._resident.clear()


def test_findings_agree(local: TraceAnalysis, remote: TraceAnalysis) -> None:
    assert_same(remote.get_findings(), local.get_findings(), "get_findings")


def _cupti_rank(rank: int, scale: int) -> TraceBuilder:
    """Two kernel launches under operators, their two CUPTI ranges."""
    b = TraceBuilder(rank=rank)
    b.cpu_op("aten::mm", 0, 1_000)
    b.runtime("cudaLaunchKernel", 100, 100, correlation=1)
    b.cpu_op("aten::relu", 1_000, 500)
    b.runtime("cudaLaunchKernel", 1_100, 100, correlation=2)
    for i, name in enumerate(["gemm", "relu_kernel"]):
        b.complete(name, "cuda_profiler_range", 10_000 + 100 * i, 100, pid=0, tid=0,
                   **{"x.sum": scale * (i + 1)})
    return b


def test_cupti_counters_are_read_on_the_workers(tmp_path: Path, client: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for rank in (0, 1):
        _cupti_rank(rank, 10 ** rank).write(tmp_path / f"rank-{rank}.json")
    expected = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False
                             ).get_cupti_counter_data_with_operators()
    remote = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, client=client)
    with monkeypatch.context() as patch:
        patch.setattr(DistributedJob, "rank", _no_read)
        got = remote.get_cupti_counter_data_with_operators()
    assert got["x.sum"].tolist() == [1.0, 2.0, 10.0, 20.0]  # by construction
    assert_same(got, expected, "get_cupti_counter_data_with_operators")
    remote.close()


def test_kernel_breakdown_folds_over_all_ranks_on_the_workers(
        local: TraceAnalysis, remote: TraceAnalysis) -> None:
    """The top kernels are chosen from the totals over every rank, not rank by rank; each
    rank's rows (kept kernels and ``others``) add up to its own kernel time."""
    table = remote.get_gpu_kernel_breakdown(num_kernels=2, duration_ratio=1.0,
                                            visualize=False)[1]
    events = pd.concat([local.t.rank(r).decoded() for r in local.ranks])
    compute = events[(events["kind"] == "computation").to_numpy()]
    totals = compute.groupby("name")["dur"].sum().reset_index()
    totals = totals.sort_values(["dur", "name"], ascending=[False, True])
    assert len(totals) > 2  # something to fold
    table = table[table["kernel_type"] == "COMPUTATION"]
    assert set(table["name"]) == set(totals["name"].iloc[:2]) | {"others"}
    for rank in local.ranks:
        mine = local.t.rank(rank).events
        busy = mine.loc[(mine["kind"] == "computation").to_numpy(), "dur"].sum()
        assert np.isclose(table.loc[table["rank"] == rank, "sum (us)"].sum(), busy / 1e3)
