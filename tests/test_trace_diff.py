"""TraceDiff on hand-built traces: HTA's per-name tables and the job-level comparison, with
every expected value derived from the construction in ``diff_cases``."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from diff_cases import (
    GEMM_F,
    GEMM_H,
    MS,
    NEW,
    RELU,
    load,
    make_control,
    make_test,
    pair,
    write_job,
)
from kineto_builder import TraceBuilder

import hta.trace_diff as facade
from hta.analysis.diff import job_diff, name_totals, ops_diff
from hta.analysis.diff.metrics import IDLE_SECTION
from hta.commands.args_and_output import dumps
from hta.model.selection import step_table
from hta.trace_diff import DeviceType, TraceDiff

HTA_COLUMNS = ["Control_counts", "Control_total_duration", "Test_counts",
               "Test_total_duration", "diff_counts", "diff_duration",
               "counts_change_categories"]

# step 1 of each side: name -> (count, total ns)
CONTROL_STEP1 = {
    "ProfilerStep#1": (1, 10 * MS), "aten::mm": (1, 50_000), "cudaLaunchKernel": (2, 10_000),
    GEMM_F: (1, MS), "aten::relu": (1, 20_000), RELU: (1, 500_000),
}
TEST_STEP1 = {
    "ProfilerStep#1": (1, 8 * MS), "aten::mm": (1, 50_000), "cudaLaunchKernel": (3, 15_000),
    GEMM_H: (1, 1_500_000), "aten::relu": (1, 20_000), RELU: (1, 500_000),
    "aten::new": (1, 20_000), NEW: (1, 200_000),
}
GPU_NAMES = {GEMM_F, GEMM_H, RELU, NEW}


@pytest.fixture
def shown(monkeypatch):
    figs = []
    monkeypatch.setattr(facade, "show", figs.append)
    return figs


def expected_table(control: dict, test: dict) -> pd.DataFrame:
    names = sorted(set(control) | set(test))
    rows = []
    for n in names:
        cc, cd = control.get(n, (0, 0))
        tc, td = test.get(n, (0, 0))
        rows.append([cc, cd / 1e3, tc, td / 1e3, tc - cc, (td - cd) / 1e3,
                     "+" if tc > cc else "-" if tc < cc else "="])
    return pd.DataFrame(rows, columns=HTA_COLUMNS,
                        index=pd.Index(names, name="name", dtype=object))


# -- compare_traces ---------------------------------------------------------------------------
def test_compare_traces_first_step_by_default(tmp_path):
    c, t = pair(tmp_path)
    df = TraceDiff.compare_traces(c, t)
    assert list(df.columns) == HTA_COLUMNS
    assert df.index.name == "name"
    pd.testing.assert_frame_equal(df, expected_table(CONTROL_STEP1, TEST_STEP1),
                                  check_dtype=False)
    assert df["Control_counts"].dtype == np.int64 and df["diff_counts"].dtype == np.int64


@pytest.mark.parametrize("device", ["GPU", "gpu", DeviceType.GPU])
def test_compare_traces_gpu_only(tmp_path, device):
    c, t = pair(tmp_path)
    df = TraceDiff.compare_traces(c.t, t.t, device_type=device)
    expected = expected_table({k: v for k, v in CONTROL_STEP1.items() if k in GPU_NAMES},
                              {k: v for k, v in TEST_STEP1.items() if k in GPU_NAMES})
    pd.testing.assert_frame_equal(df, expected, check_dtype=False)


def test_compare_traces_cpu_only(tmp_path):
    c, t = pair(tmp_path)
    df = TraceDiff.compare_traces(c, t, device_type=DeviceType.CPU)
    expected = expected_table({k: v for k, v in CONTROL_STEP1.items() if k not in GPU_NAMES},
                              {k: v for k, v in TEST_STEP1.items() if k not in GPU_NAMES})
    pd.testing.assert_frame_equal(df, expected, check_dtype=False)


def test_device_type_all_is_cpu_plus_gpu(tmp_path):
    c, t = pair(tmp_path)
    parts = [TraceDiff.compare_traces(c, t, control_iteration="all", test_iteration="all",
                                      device_type=d) for d in ("CPU", "GPU")]
    whole = TraceDiff.compare_traces(c, t, control_iteration="all", test_iteration="all")
    assert set(parts[0].index).isdisjoint(parts[1].index)
    pd.testing.assert_frame_equal(pd.concat(parts).sort_index(), whole, check_index_type=False)


def test_short_names_match_changed_templates(tmp_path):
    c, t = pair(tmp_path)
    df = TraceDiff.compare_traces(c, t, use_short_name=True)
    assert df.index.name == "short_name"
    row = df.loc["gemm"]
    assert (row["Control_counts"], row["Test_counts"]) == (1, 1)
    assert row["Control_total_duration"] == 1000.0 and row["Test_total_duration"] == 1500.0
    assert row["diff_duration"] == 500.0 and row["counts_change_categories"] == "="
    # ProfilerStep#N -> ProfilerStep: steps of any number match
    assert df.loc["ProfilerStep", "diff_duration"] == -2000.0
    assert GEMM_F not in df.index and GEMM_H not in df.index


def test_iterations_lists_all_and_errors(tmp_path):
    c, t = pair(tmp_path)
    df = TraceDiff.compare_traces(c, t, control_iteration=[1, 2], test_iteration="all")
    assert df.loc[GEMM_F, "Control_counts"] == 2 and df.loc[GEMM_H, "Test_counts"] == 4
    assert df.loc["aten::new", "Test_total_duration"] == 80.0
    one = TraceDiff.compare_traces(c, t, control_iteration=2, test_iteration=3)
    pd.testing.assert_frame_equal(
        one.drop(["ProfilerStep#2", "ProfilerStep#3"]),
        expected_table(CONTROL_STEP1, TEST_STEP1).drop("ProfilerStep#1"), check_dtype=False)
    with pytest.raises(ValueError, match=r"iteration\(s\) \[5\] not found.*ProfilerStep 1, 2"):
        TraceDiff.compare_traces(c, t, control_iteration=5)
    with pytest.raises(ValueError, match="\"all\""):
        TraceDiff.compare_traces(c, t, test_iteration="every")


def test_ranks_pool_and_default_to_first(tmp_path):
    c = load(write_job(tmp_path / "c", make_control(0), make_control(1, steps=3)))
    t = load(write_job(tmp_path / "t", make_test(0)))
    default = TraceDiff.compare_traces(c, t, control_iteration="all")
    assert default.loc[GEMM_F, "Control_counts"] == 2  # rank 0 only
    both = TraceDiff.compare_traces(c, t, control_rank=[0, 1], control_iteration="all")
    assert both.loc[GEMM_F, "Control_counts"] == 5
    assert both.loc[GEMM_F, "Control_total_duration"] == 5000.0
    assert TraceDiff.compare_traces(c, t, control_rank=1).loc[GEMM_F, "Control_counts"] == 1
    with pytest.raises(KeyError, match="rank 7 is not loaded"):
        TraceDiff.compare_traces(c, t, control_rank=7)


def test_trace_without_steps(tmp_path):
    b = TraceBuilder(rank=0)
    b.launch_kernel(GEMM_F, cpu_ts=0, cpu_dur=1_000, gpu_ts=2_000, gpu_dur=3_000)
    b.launch_kernel(GEMM_F, cpu_ts=10_000, cpu_dur=1_000, gpu_ts=12_000, gpu_dur=4_000)
    c = load(write_job(tmp_path / "c", b))
    t = load(write_job(tmp_path / "t", make_test()))
    df = TraceDiff.compare_traces(c, t)  # no steps: every event of control
    assert df.loc[GEMM_F, "Control_counts"] == 2
    assert df.loc[GEMM_F, "Control_total_duration"] == 7.0
    with pytest.raises(ValueError, match="none"):
        TraceDiff.compare_traces(c, t, control_iteration=1)


def test_labels_and_inputs(tmp_path):
    c, t = pair(tmp_path)
    df = TraceDiff.compare_traces(c, t, control_label="before", test_label="after")
    assert list(df.columns[:4]) == ["before_counts", "before_total_duration", "after_counts",
                                    "after_total_duration"]
    assert ops_diff(df)["deleted"] == [GEMM_F]
    with pytest.raises(ValueError, match="different labels"):
        TraceDiff.compare_traces(c, t, control_label="x", test_label="x")
    from_dir = TraceDiff.compare_traces(str(tmp_path / "control"), tmp_path / "test")
    pd.testing.assert_frame_equal(from_dir, TraceDiff.compare_traces(c.t, t))
    with pytest.raises(TypeError, match="TraceAnalysis"):
        TraceDiff.compare_traces(42, t)
    with pytest.raises(ValueError, match="device_type='TPU'"):
        TraceDiff.compare_traces(c, t, device_type="TPU")


def test_ops_diff_groups(tmp_path):
    c, t = pair(tmp_path)
    groups = TraceDiff.ops_diff(c, t)
    assert groups == {
        "added": ["aten::new", "new_kernel", GEMM_H],
        "deleted": [GEMM_F],
        "increased": ["cudaLaunchKernel"],
        "decreased": [],
        "unchanged": ["ProfilerStep#1", "aten::mm", "aten::relu", RELU],
    }
    # every name in exactly one group
    table = TraceDiff.compare_traces(c, t)
    assert sorted(sum(groups.values(), [])) == sorted(table.index)
    # test -> control swaps added/deleted and increased/decreased
    back = TraceDiff.ops_diff(t, c)
    assert back["deleted"] == groups["added"] and back["added"] == groups["deleted"]
    assert back["decreased"] == groups["increased"]
    short = TraceDiff.ops_diff(c, t, use_short_name=True, device_type="GPU")
    assert short == {"added": ["new_kernel"], "deleted": [], "increased": [], "decreased": [],
                     "unchanged": ["gemm", RELU]}


def test_name_totals_exact_ns(tmp_path):
    c, _ = pair(tmp_path)
    totals = name_totals(c.t, device_type="GPU")
    assert totals.set_index("name").to_dict("index") == {
        GEMM_F: {"counts": 2, "total_duration(ns)": 2 * MS},
        RELU: {"counts": 2, "total_duration(ns)": MS},
    }


def test_step_table(tmp_path):
    c, t = pair(tmp_path)
    steps = step_table(t.t)
    assert steps["step"].tolist() == [1, 2, 3, 4]
    assert steps["ts"].tolist() == [0, 8 * MS, 16 * MS, 24 * MS]
    assert (steps["dur"] == 8 * MS).all()


# -- figures ----------------------------------------------------------------------------------
def test_visualize_counts_and_duration(tmp_path, shown):
    c, t = pair(tmp_path)
    df = TraceDiff.compare_traces(c, t)
    fig = TraceDiff.visualize_counts_diff(df)
    assert shown == [fig]
    assert [tr.name for tr in fig.data] == ["Control", "Test", "Difference"]
    assert list(fig.data[0].y) == df["Control_counts"].tolist()
    assert list(fig.data[2].y) == df["diff_counts"].tolist()
    assert list(fig.data[1].customdata) == list(df.index)
    out = tmp_path / "dur.html"
    fig = TraceDiff.visualize_duration_diff(df, show_image=False, export_image_path=str(out))
    assert len(shown) == 1 and "<html>" in out.read_text()[:100]
    assert list(fig.data[1].y) == df["Test_total_duration"].tolist()
    assert fig.layout.yaxis.title.text == "total duration (µs)"
    with pytest.raises(ValueError, match="compare_traces"):
        TraceDiff.visualize_counts_diff(df.drop(columns=["Test_total_duration"]),
                                        show_image=False)


# -- job level --------------------------------------------------------------------------------
def metric(job, section: str, name: str) -> tuple[float, float]:
    row = job.metric(name, section)
    return float(row["control"]), float(row["test"])


def test_job_step_time_and_verdict(tmp_path):
    c, t = pair(tmp_path)
    job = TraceDiff.compare_jobs(c, t)
    assert job.verdict == ("step time 10.0 ms -> 8.0 ms (-20.0%); "
        "GPU busy time 1.5 ms -> 2.2 ms (+46.7%) per step")
    assert job.notes == ["steps per rank differ (2 vs 4): every time is per step"]
    assert metric(job, "steps", "step_time_mean(us)") == (10_000.0, 8_000.0)
    row = job.metric("step_time_mean(us)")
    assert row["delta"] == -2000.0 and row["delta_pctg"] == pytest.approx(-20.0)
    assert metric(job, "steps", "steps_per_rank") == (2.0, 4.0)
    assert job.steps.groupby("side")["iteration"].apply(list).to_dict() == {
        "control": [1, 2], "test": [1, 2, 3, 4]}
    assert (job.steps["step_time(us)"] == job.steps["side"].map(
        {"control": 10_000.0, "test": 8_000.0})).all()


def test_job_gpu_time_per_step(tmp_path):
    c, t = pair(tmp_path)
    job = job_diff(c.t, t.t)
    expected = {"kernel_time(us)": (1600, 2500), "busy_time(us)": (1500, 2200),
                "compute_time(us)": (1500, 2200), "idle_time(us)": (100, 300),
                "exposed_comm_time(us)": (0, 0), "exposed_memory_time(us)": (0, 0),
                "comm_time(us)": (0, 0), "memory_time(us)": (0, 0),
                "compute_time_pctg": (93.75, 88.0), "idle_time_pctg": (6.25, 12.0)}
    for name, values in expected.items():
        assert metric(job, "gpu_time", name) == pytest.approx(values), name
    pct = job.metric("idle_time_pctg")
    assert pct["delta"] == pytest.approx(5.75) and math.isnan(pct["delta_pctg"])
    assert metric(job, "kernel_types", "COMPUTATION(us)") == (1500, 2200)
    assert metric(job, "kernel_types", "COMPUTATION_pctg") == (100, 100)
    assert metric(job, "overlap", "comm_time(us)") == (0, 0)
    assert all(math.isnan(v) for v in metric(job, "overlap", "comp_comm_overlap_pctg"))
    idle = {k: metric(job, IDLE_SECTION, k) for k in
            ("host_wait(us)", "kernel_wait(us)", "other(us)", "total(us)")}
    assert idle == {"host_wait(us)": (0, 200), "kernel_wait(us)": (0, 0),
                    "other(us)": (100, 100), "total(us)": (100, 300)}
    assert metric(job, IDLE_SECTION, "host_wait_pctg") == pytest.approx((0, 200 / 3))


def test_job_kernels_full_and_short_names(tmp_path):
    c, t = pair(tmp_path)
    job = job_diff(c.t, t.t)
    k = job.kernels.set_index("name")
    assert k.loc[GEMM_F, ["control_time(us)", "test_time(us)", "status"]].tolist() == [
        1000.0, 0.0, "removed"]
    assert k.loc[GEMM_H, "status"] == "added" and k.loc[NEW, "status"] == "added"
    assert k.loc[RELU, ["control_count", "test_count", "delta_time(us)", "status"]].tolist() \
        == [1.0, 1.0, 0.0, "unchanged"]
    assert (k["kernel_type"] == "COMPUTATION").all()
    assert job.regressions()["name"].tolist() == [GEMM_H, NEW]
    assert job.improvements()["name"].tolist() == [GEMM_F]
    short = job_diff(c.t, t.t, use_short_name=True).kernels.set_index("name")
    assert short.loc["gemm", ["control_time(us)", "test_time(us)", "delta_time(us)",
                              "delta_pctg", "status"]].tolist() == [1000.0, 1500.0, 500.0,
                                                                    50.0, "slower"]
    loose = job_diff(c.t, t.t, use_short_name=True, threshold_pct=60).kernels
    assert loose.set_index("name").loc["gemm", "status"] == "unchanged"
    with pytest.raises(ValueError, match="threshold_pct"):
        job_diff(c.t, t.t, threshold_pct=-1)


def test_job_operators(tmp_path):
    c, t = pair(tmp_path)
    ops = job_diff(c.t, t.t).operators.set_index("name")
    assert ops.loc["aten::mm", ["control_time(us)", "test_time(us)", "status"]].tolist() == [
        1000.0, 1500.0, "slower"]
    assert ops.loc["aten::relu", "status"] == "unchanged"
    assert ops.loc["aten::new", ["control_count", "test_count", "status"]].tolist() == [
        0.0, 1.0, "added"]
    assert list(ops.index) == ["aten::mm", "aten::new", "aten::relu"]  # largest growth first
    # a kernel whose launch is in no operator
    b = make_control()
    b.launch_kernel(RELU, cpu_ts=5_000_000, cpu_dur=1_000, gpu_ts=5_100_000, gpu_dur=10_000)
    c2 = load(write_job(tmp_path / "c2", b))
    ops2 = job_diff(c2.t, t.t).operators.set_index("name")
    assert ops2.loc["(no operator)", ["control_count", "control_time(us)", "status"]].tolist() \
        == [0.5, 5.0, "removed"]


def test_job_mean_over_ranks_with_different_steps(tmp_path):
    """Rank 0: 2 steps of 10 ms; rank 1: 3 steps of 12 ms; test has rank 0 only."""
    c = load(write_job(tmp_path / "c", make_control(0), make_control(1, steps=3,
                                                                     step_ns=12 * MS)))
    t = load(write_job(tmp_path / "t", make_test(0)))
    job = TraceDiff.compare_jobs(c, t)
    assert metric(job, "steps", "step_time_mean(us)") == (11_000.0, 8_000.0)
    assert metric(job, "steps", "step_time_median(us)") == (11_000.0, 8_000.0)
    assert metric(job, "steps", "step_time_max(us)") == (12_000.0, 8_000.0)
    assert metric(job, "steps", "steps_per_rank") == (2.5, 4.0)
    assert metric(job, "steps", "ranks") == (2.0, 1.0)
    assert "ranks differ (2 vs 1): every time is a mean over ranks" in job.notes
    # both control ranks run one GEMM_F of 1 ms per step
    k = job.kernels.set_index("name")
    assert k.loc[GEMM_F, ["control_count", "control_time(us)"]].tolist() == [1.0, 1000.0]
    only1 = TraceDiff.compare_jobs(c, t, control_ranks=1, control_iterations=[2, 3])
    assert metric(only1, "steps", "steps_per_rank") == (2.0, 4.0)
    with pytest.raises(ValueError, match=r"rank\(s\) \[0\] hold none of the selected steps"):
        TraceDiff.compare_jobs(c, t, control_iterations=[3])


def test_job_without_steps(tmp_path):
    b = TraceBuilder(rank=0)
    b.launch_kernel(GEMM_F, cpu_ts=0, cpu_dur=1_000, gpu_ts=2_000, gpu_dur=3_000_000)
    c = load(write_job(tmp_path / "c", b))
    _, t = pair(tmp_path)
    job = TraceDiff.compare_jobs(c, t)
    # control: 3 ms span and busy in its single "step"; test: 2.5 ms span, 2.2 ms busy per
    # step (make_test): the span, how long the traced work took, leads
    assert job.verdict == ("GPU span 3.0 ms -> 2.5 ms (-16.7%) per step (a trace without "
                           "steps counts as one); GPU busy time 3.0 ms -> 2.2 ms (-26.7%)")
    assert job.notes[0] == "control has no ProfilerStep: the whole trace counts as one step"
    assert all(math.isnan(v) for v in metric(job, "steps", "step_time_mean(us)")[:1])
    both = TraceDiff.compare_jobs(c, c)
    assert both.verdict == ("GPU span 3.0 ms -> 3.0 ms (+0.0%) per trace; GPU busy time "
                            "3.0 ms -> 3.0 ms (+0.0%)")
    with pytest.raises(ValueError, match="no ProfilerStep"):
        TraceDiff.compare_jobs(c, t, control_iterations=[1])


def test_job_identical_traces_change_nothing(tmp_path):
    c, _ = pair(tmp_path)
    job = TraceDiff.compare_jobs(c, c)
    assert job.verdict == ("step time 10.0 ms -> 10.0 ms (+0.0%); "
        "GPU busy time 1.5 ms -> 1.5 ms (+0.0%) per step")
    assert (job.summary["delta"].fillna(0) == 0).all()
    assert set(job.kernels["status"]) == {"unchanged"}
    assert job.regressions().empty and job.improvements("operator").empty


def test_job_to_dict_and_figure(tmp_path, shown):
    c, t = pair(tmp_path)
    job = TraceDiff.compare_jobs(c, t, visualize=True)
    fig = shown[0]
    assert fig.layout.title.text == job.verdict
    steps = [tr for tr in fig.data if tr.name in ("control", "test") and tr.xaxis == "x"]
    assert [list(tr.y) for tr in steps] == [[10_000.0], [8_000.0]]
    stacked = [tr for tr in fig.data if tr.legendgroup == "gpu_time"]
    assert [tr.name for tr in stacked] == ["compute", "exposed communication",
                                           "exposed memory", "idle"]
    assert list(stacked[3].base) == [1500.0, 2200.0]  # idle sits on top of compute
    changes = fig.data[-1]
    assert list(changes.x) == [-1000.0, 200.0, 1500.0]  # bottom to top
    assert list(changes.y) == [GEMM_F, NEW, GEMM_H]
    payload = json.loads(dumps(job.to_dict(top=1)))
    assert payload["verdict"] == job.verdict
    assert [r["name"] for r in payload["regressions"]["kernels"]] == [GEMM_H]
    assert [r["name"] for r in payload["improvements"]["kernels"]] == [GEMM_F]
    assert payload["summary"][0] == {"section": "steps", "metric": "ranks", "control": 1.0,
                                     "test": 1.0, "delta": 0.0, "delta_pctg": 0.0}
    with pytest.raises(KeyError, match="matches 0 rows"):
        job.metric("nope")
    with pytest.raises(ValueError, match="kernel"):
        job.regressions(by="stream")


def test_verdict_digits_show_the_change_and_tiny_changes_are_unchanged() -> None:
    import pandas as pd

    from hta.analysis.diff.job import _name_diff, format_time_pair

    # one decimal would print 1.9 ms twice for a +3.6% change
    assert format_time_pair(1_851.0, 1_917.6) == ("1.85 ms", "1.92 ms")
    assert format_time_pair(1_851.0, 1_851.0) == ("1.9 ms", "1.9 ms")
    assert format_time_pair(10_000.0, 8_000.0) == ("10.0 ms", "8.0 ms")
    c = pd.DataFrame({"name": ["tiny", "gemm", "same"], "count": [1.0, 1.0, 1.0],
                      "time(us)": [2.0, 1_000.0, 50.0]})
    t = pd.DataFrame({"name": ["tiny", "gemm", "same"], "count": [1.0, 1.0, 1.0],
                      "time(us)": [2.2, 2_000.0, 50.0]})
    table = _name_diff(c, t, threshold_pct=5.0, with_type=False).set_index("name")
    # +10% of 2 µs is 0.2 µs per step: below MIN_DELTA_US, unchanged
    assert table.loc["tiny", "delta_pctg"] == pytest.approx(10.0)
    assert table.loc["tiny", "status"] == "unchanged"
    assert table.loc["gemm", "status"] == "slower"
    assert table.loc["same", "status"] == "unchanged"


def test_a_diff_of_jobs_kept_out_of_memory_reads_each_rank_where_it_is() -> None:
    """The diff's per-rank work (names, kernels and operators, causes, GPU work) runs
    through the runner: jobs whose ranks stay out of memory (read by worker processes)
    compare as they do in memory, and nothing refuses them."""
    from conftest import SAMPLE_TRACES

    from hta.analysis.diff.causes import change_causes
    from hta.job.distributed import DistributedJob
    from hta.trace_analysis import TraceAnalysis

    folder = SAMPLE_TRACES / "synthetic_4rank"
    eager = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)
    lazy = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False, in_memory=False)
    assert isinstance(lazy.t, DistributedJob)
    want, got = TraceDiff.compare_jobs(eager, eager), TraceDiff.compare_jobs(lazy, lazy)
    for table in ("kernels", "operators", "summary", "steps"):
        pd.testing.assert_frame_equal(getattr(want, table), getattr(got, table))
    pd.testing.assert_frame_equal(TraceDiff.compare_traces(eager, eager, control_rank=[0, 1]),
                                  TraceDiff.compare_traces(lazy, lazy, control_rank=[0, 1]))
    pd.testing.assert_frame_equal(change_causes(eager.t, eager.t), change_causes(lazy.t, lazy.t))
