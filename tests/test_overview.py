"""The job overview (hta.report.overview) on a hand-built job with exact answers, and on the
bundled sample against figures computed here from the trace JSON."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import SAMPLE_TRACES, shared_trace
from overview_cases import GEMM, LATE, NCCL, RELU, write_job

from hta.analysis import queue
from hta.model.selection import EVERYTHING, Selection, restrict
from hta.report.overview import (
    RANK_COLUMNS,
    SPREAD_COLUMNS,
    TOP_KERNEL_COLUMNS,
    job_overview,
)
from hta.trace_analysis import TraceAnalysis


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> TraceAnalysis:
    folder = write_job(tmp_path_factory.mktemp("overview"))
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


def row(table, rank: int) -> dict:
    return table[table["rank"] == rank].iloc[0].to_dict()


def test_per_rank_figures_by_construction(job: TraceAnalysis) -> None:
    ov = job_overview(job.t)
    assert list(ov.ranks.columns) == RANK_COLUMNS
    assert ov.ranks["rank"].tolist() == [0, 1]
    r0, r1 = row(ov.ranks, 0), row(ov.ranks, 1)
    expected0 = {
        "events": 24, "gpu_events": 10, "steps": 2, "step_time_mean(us)": 100.0,
        "kernel_time(us)": 161.0, "busy_time(us)": 72.0, "compute_time(us)": 46.0,
        "exposed_comm_time(us)": 16.0, "exposed_memory_time(us)": 10.0, "idle_time(us)": 89.0,
        "memory_time(us)": 10.0, "compute_time_pctg": 28.57, "exposed_comm_time_pctg": 9.94,
        "exposed_memory_time_pctg": 6.21, "idle_time_pctg": 55.28,
        "comp_comm_overlap_pctg": 60.0, "overlap_note": "", "host_wait(us)": 214.0,
        "kernel_wait(us)": 2.0, "other_idle(us)": 74.0, "queue_length_max": 3.0,
        "memcpy_count": 2, "memcpy_bytes": 2_000_000.0, "memset_count": 0,
    }
    expected1 = dict(expected0, **{
        "busy_time(us)": 76.0, "compute_time(us)": 66.0, "exposed_comm_time(us)": 0.0,
        "idle_time(us)": 85.0, "compute_time_pctg": 40.99, "exposed_comm_time_pctg": 0.0,
        "idle_time_pctg": 52.8, "comp_comm_overlap_pctg": 100.0, "kernel_wait(us)": 56.0,
        "other_idle(us)": 0.0,
    })
    for got, expected in ((r0, expected0), (r1, expected1)):
        for key, value in expected.items():
            assert got[key] == pytest.approx(value, abs=1e-9) if isinstance(value, float) \
                else got[key] == value, key


def test_queue_columns_are_the_extremes_over_streams(job: TraceAnalysis) -> None:
    ov = job_overview(job.t)
    summary = queue.queue_length_summary(job.t)
    for rank in (0, 1):
        streams = summary[summary["rank"] == rank]
        assert sorted(streams["stream"]) == [7, 20, 24]
        assert row(ov.ranks, rank)["queue_length_mean"] == streams["mean"].max()
        assert row(ov.ranks, rank)["queue_length_max"] == streams["max"].max() == 3


def test_top_kernels_by_construction(job: TraceAnalysis) -> None:
    top = job_overview(job.t).top_kernels
    assert list(top.columns) == TOP_KERNEL_COLUMNS
    assert top["name"].tolist() == [GEMM, NCCL, "Memcpy HtoD", RELU, LATE]
    assert top["total(us)"].tolist() == [100.0, 80.0, 20.0, 8.0, 4.0]
    assert top["count"].tolist() == [4, 4, 4, 4, 4]
    assert top["kernel_type"].tolist() == ["COMPUTATION", "COMMUNICATION", "MEMORY",
                                           "COMPUTATION", "COMPUTATION"]
    gemm = top.iloc[0]
    assert gemm["share_pctg"] == pytest.approx(100 * 100 / 212)
    assert (gemm["mean(us)"], gemm["rank_mean_min(us)"], gemm["rank_mean_max(us)"]) == (
        25.0, 20.0, 30.0)
    assert gemm["slowest_rank"] == 1
    assert gemm["spread_pctg"] == pytest.approx(50.0)
    assert top.iloc[1]["spread_pctg"] == 0.0  # NCCL: 20 µs on both ranks
    assert job_overview(job.t, top=2).top_kernels["name"].tolist() == [GEMM, NCCL]
    assert job_overview(job.t, top=0).top_kernels.empty


def test_spread_and_slowest_rank(job: TraceAnalysis) -> None:
    ov = job_overview(job.t)
    assert list(ov.spread.columns) == SPREAD_COLUMNS
    spread = ov.spread.set_index("metric")
    compute = spread.loc["compute_time(us)"]
    assert (compute["min"], compute["min_rank"], compute["max"], compute["max_rank"]) == (
        46.0, 0, 66.0, 1)
    assert compute["mean"] == 56.0
    assert compute["spread_pctg"] == pytest.approx(100 * 20 / 46)
    assert spread.loc["step_time_mean(us)", "spread_pctg"] == 0.0
    assert spread.loc["exposed_comm_time(us)", "min"] == 0.0
    assert math.isnan(spread.loc["exposed_comm_time(us)", "spread_pctg"])  # min 0
    assert ov.job["slowest_rank"] == 1
    assert ov.job["slowest_rank_by"] == "compute_time(us)"
    assert (ov.job["fastest_rank"], ov.job["fastest_rank_value"]) == (0, 46.0)
    assert ov.job["world_size"] == 2
    assert ov.job["ranks"] == [0, 1]


def test_one_iteration(job: TraceAnalysis) -> None:
    """Step 2 only: its own window [110 000, 171 000) ns, gaps inside it only."""
    ov = job_overview(job.t, Selection.of(iterations=[2]))
    r0 = row(ov.ranks, 0)
    assert (r0["steps"], r0["events"], r0["gpu_events"]) == (1, 12, 5)
    assert (r0["kernel_time(us)"], r0["busy_time(us)"], r0["compute_time(us)"]) == (
        61.0, 36.0, 23.0)
    assert (r0["host_wait(us)"], r0["kernel_wait(us)"], r0["other_idle(us)"]) == (
        0.0, 1.0, 37.0)
    assert (r0["memcpy_count"], r0["memcpy_bytes"]) == (1, 1_000_000.0)
    assert ov.job["iterations"] == [2]
    assert job_overview(job.t,
                        Selection.of(iterations=[2])).top_kernels["total(us)"].iloc[0] == 50.0


def test_restrict_leaves_the_trace_alone(job: TraceAnalysis) -> None:
    before = {r: len(job.t.rank(r).events) for r in (0, 1)}
    restricted = restrict(job.t, Selection.of(iterations=[1]))
    assert {r: len(restricted.rank(r).events) for r in (0, 1)} == {0: 12, 1: 12}
    assert {r: len(job.t.rank(r).events) for r in (0, 1)} == before
    assert restrict(job.t, EVERYTHING) is job.t


def test_selected_ranks(job: TraceAnalysis) -> None:
    ov = job_overview(job.t, Selection.of([1]))
    assert ov.ranks["rank"].tolist() == [1]
    assert ov.top_kernels.iloc[0]["total(us)"] == 60.0
    assert ov.job["slowest_rank"] == 1


def test_a_rank_without_gpu_work() -> None:
    ov = job_overview(TraceAnalysis(trace_dir=SAMPLE_TRACES / "cpu_training", cache=False,
                                    progress=False).t)
    r0 = row(ov.ranks, 0)
    assert r0["gpu_events"] == 0 and r0["kernel_time(us)"] == 0.0
    assert math.isnan(r0["comp_comm_overlap_pctg"]) and r0["overlap_note"] == "no communication"
    assert math.isnan(r0["queue_length_max"])
    assert ov.top_kernels.empty
    assert ov.job["slowest_rank_by"] == "step_time_mean(us)"


# -- real traces, checked against the JSON ---------------------------------------------------
def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _reference(folder: Path) -> dict:
    """Per rank: complete events, step times (µs) and kernel totals (µs) from the JSON."""
    out = {}
    for path in sorted(folder.glob("*.json*")):
        events = _events(path)
        rank = int(path.name.split("-")[1].split(".")[0])
        complete = [e for e in events if e.get("ph") == "X"]
        steps = [float(e["dur"]) for e in complete if e["name"].startswith("ProfilerStep#")]
        totals: dict[str, float] = defaultdict(float)
        for e in complete:
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                totals[e["name"]] += float(e["dur"])
        out[rank] = {"events": len(complete), "steps": steps, "totals": totals}
    return out


@pytest.mark.parametrize("folder", ["synthetic_4rank", "trace_filter"])
def test_against_the_json(folder: str) -> None:
    path = SAMPLE_TRACES / folder if folder == "synthetic_4rank" else shared_trace(folder)
    ref = _reference(path)
    ov = job_overview(TraceAnalysis(trace_dir=path, cache=False, progress=False).t)
    for rank, expected in ref.items():
        r = row(ov.ranks, rank)
        assert r["events"] == expected["events"]
        assert r["steps"] == len(expected["steps"])
        assert r["step_time_mean(us)"] == pytest.approx(
            sum(expected["steps"]) / len(expected["steps"]), abs=1e-6)
    job_totals: dict[str, float] = defaultdict(float)
    for expected in ref.values():
        for name, total in expected["totals"].items():
            job_totals[name] += total
    everything = sum(job_totals.values())
    ranked = sorted(job_totals.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    top = ov.top_kernels
    assert top["name"].tolist() == [n for n, _ in ranked]
    assert top["total(us)"].tolist() == pytest.approx([t for _, t in ranked], abs=1e-6)
    assert top["share_pctg"].tolist() == pytest.approx(
        [100 * t / everything for _, t in ranked], abs=1e-6)


def test_overview_runs_next_to_the_data_on_a_distributed_job(tmp_path: Path) -> None:
    """Each rank's figures are computed where the rank is: the same overview as in memory,
    and no rank is read into the client (only one row per rank travels back)."""
    import pandas.testing as pdt

    folder = write_job(tmp_path)
    eager = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    lazy = TraceAnalysis(trace_dir=folder, cache=False, progress=False, in_memory=False,
                         max_workers=2)
    try:
        for iterations in (None, [2]):
            want = job_overview(eager.t, Selection.of(iterations=iterations))
            got = job_overview(lazy.t, Selection.of(iterations=iterations))
            pdt.assert_frame_equal(got.ranks, want.ranks)
            pdt.assert_frame_equal(got.top_kernels, want.top_kernels)
            pdt.assert_frame_equal(got.spread, want.spread)
        assert lazy.t.resident_ranks() == []
    finally:
        lazy.close()


@pytest.mark.parametrize("folder", ["synthetic_4rank", "cuda_h100/pageable_copy_steps",
                                    "cuda_h100/resnet_amp_nosched"])
def test_the_overview_s_shortcuts_give_the_full_tables_numbers(folder: str) -> None:
    """The kernels' sums and counts, the copies' totals and the event counts the overview
    reads equal those of the full tables they stand in for (every kernel kept, the copy
    statistics per direction, the rank summary), on the whole rank and on one step."""
    import pandas as pd

    from hta.analysis import bandwidth, kernels
    from hta.analysis.summary import event_counts, summary_of_rank
    from hta.model.runner import restrict_rank
    from hta.model.selection import rank_steps

    a = TraceAnalysis(trace_dir=str(SAMPLE_TRACES / folder), cache=False, progress=False)
    for rank in a.t.get_ranks():
        rt = a.t.rank(rank)
        steps = rank_steps(rt)["step"].tolist()
        for iterations in (None, steps[1:2] or None, [10**6]):
            full = kernels.rank_kernel_breakdown(rt, iterations, duration_ratio=1.0,
                                                 num_kernels=2**62)
            pd.testing.assert_frame_equal(
                kernels.rank_kernel_sums(rt, iterations),
                full[list(kernels.SUMS_COLUMNS)].reset_index(drop=True), check_exact=True)
            restricted = restrict_rank(rt, iterations)
            bw = bandwidth.rank_memory_bw_summary(restricted)
            is_set = bw["name"] == "Memset"
            assert bandwidth.copy_totals(restricted) == (
                int(bw[~is_set]["count"].sum()), float(bw[~is_set]["total_bytes"].sum()),
                int(bw[is_set]["count"].sum()))
            summary = summary_of_rank(restricted).iloc[0]
            assert event_counts(restricted) == (summary["events"], summary["gpu_events"])
    assert folder != "cuda_h100/pageable_copy_steps" or bandwidth.copy_totals(
        a.t.rank(a.t.get_ranks()[0]))[0] > 0
