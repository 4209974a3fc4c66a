"""Idle time breakdown on hand-built traces: exact ns per stream and category."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from breakdown_cases import idle_case, load

from hta.analysis.idle import (
    idle_interval_stats,
    idle_intervals,
    idle_time_breakdown,
    idle_time_breakdown_and_stats,
)
from hta.model.selection import Selection
from hta.trace_analysis import TraceAnalysis

DELAY = 1_000  # ns


def _table(df):
    return {(r.stream, r.idle_category): (round(r.idle_time * 1000), r.idle_intervals)
            for r in df.itertuples()}


def test_categories_per_stream(tmp_path):
    a = load(tmp_path, idle_case())
    got = _table(idle_time_breakdown(a.t, consecutive_kernel_delay_ns=DELAY))
    assert got == {
        (7, "host_wait"): (33_500, 2), (7, "kernel_wait"): (1_200, 3), (7, "other"): (14_000, 2),
        (9, "host_wait"): (0, 0), (9, "kernel_wait"): (500, 1), (9, "other"): (0, 0),
        (24, "host_wait"): (0, 0), (24, "kernel_wait"): (0, 0), (24, "other"): (0, 0),
    }


def test_ratios(tmp_path):
    a = load(tmp_path, idle_case())
    df = idle_time_breakdown(a.t, consecutive_kernel_delay_ns=DELAY).set_index(
        ["stream", "idle_category"])
    assert df.loc[(7, "host_wait"), "idle_time_ratio"] == 33_500 / 48_700
    assert df.loc[(9, "kernel_wait"), "idle_time_ratio"] == 1.0
    assert df.loc[(24, "other"), "idle_time_ratio"] == 0.0  # never idle: 0, not NaN


def test_each_gap_with_its_bounds(tmp_path):
    a = load(tmp_path, idle_case())
    iv = idle_intervals(a.t, streams=7, consecutive_kernel_delay_ns=DELAY)
    got = [(r.start, r.end, r.idle_category, r.iteration) for r in iv.itertuples()]
    assert got == [
        (10_000, 10_400, "kernel_wait", 1), (12_000, 21_000, "host_wait", 1),
        (25_000, 30_000, "other", 1), (31_000, 55_500, "host_wait", 2),
        (60_500, 60_700, "kernel_wait", 2), (61_000, 70_000, "other", 2),
        (71_000, 71_600, "kernel_wait", 2),
    ]
    assert iv["idle_time(ns)"].tolist() == [400, 9_000, 5_000, 24_500, 200, 9_000, 600]


def test_threshold_is_strict_and_in_ns(tmp_path):
    a = load(tmp_path, idle_case())
    got = _table(idle_time_breakdown(a.t, streams=[7], consecutive_kernel_delay_ns=400))
    # gap 400 is not < 400 -> other; 200 stays kernel wait; 600 becomes other
    assert got[(7, "kernel_wait")] == (200, 1)
    assert got[(7, "other")] == (14_000 + 400 + 600, 4)
    # the default threshold is 30 µs = 30_000 ns: every non-host gap below it is kernel wait
    default = _table(idle_time_breakdown(a.t, streams=[7]))
    assert default[(7, "kernel_wait")] == (1_200 + 5_000 + 9_000, 5)


def test_iterations_exclude_gaps_between_steps(tmp_path):
    a = load(tmp_path, idle_case())
    step2 = _table(idle_time_breakdown(a.t, Selection.of(iterations=[2]), streams=7,
                                       consecutive_kernel_delay_ns=DELAY))
    assert step2 == {(7, "host_wait"): (0, 0), (7, "kernel_wait"): (800, 2),
                     (7, "other"): (9_000, 1)}
    both = _table(idle_time_breakdown(a.t, Selection.of(iterations=[1, 2]), streams=7,
                                      consecutive_kernel_delay_ns=DELAY))
    assert both[(7, "host_wait")] == (9_000, 1)  # the 24_500 between the steps is left out


def test_interval_stats(tmp_path):
    a = load(tmp_path, idle_case())
    df, stats = idle_time_breakdown_and_stats(a.t, streams=7, consecutive_kernel_delay_ns=DELAY,
                                              show_idle_interval_stats=True)
    s = stats.set_index("idle_category")
    assert s.loc["kernel_wait", "count"] == 3
    assert s.loc["kernel_wait", "mean"] == pytest.approx(0.4)  # µs
    assert s.loc["kernel_wait", "min"] == 0.2
    assert s.loc["kernel_wait", "max"] == 0.6
    assert s.loc["host_wait", "50%"] == pytest.approx((9.0 + 24.5) / 2)
    assert len(df) == 3
    none = idle_time_breakdown_and_stats(a.t, consecutive_kernel_delay_ns=DELAY)[1]
    assert none is None
    assert idle_interval_stats(idle_intervals(a.t, streams=9)).shape[0] == 1


def test_bad_threshold_is_a_clear_error(tmp_path):
    a = load(tmp_path, idle_case())
    with pytest.raises(ValueError, match="nanoseconds"):
        idle_time_breakdown(a.t, consecutive_kernel_delay_ns=-1)
    with pytest.raises(ValueError, match="nanoseconds"):
        idle_time_breakdown(a.t, consecutive_kernel_delay_ns=1.5)


def test_rows_dropped_after_loading_keep_launch_links(tmp_path):
    # index_correlation holds ``index`` values, which are positions only until rows are
    # dropped: drop the first row (ProfilerStep#1, iteration already assigned) so every
    # position shifts by one; host waits must still find their launch calls
    a = load(tmp_path, idle_case())
    rt = a.t.rank(0)
    rt.events = rt.events.iloc[1:].reset_index(drop=True)
    got = _table(idle_time_breakdown(a.t, streams=7, consecutive_kernel_delay_ns=DELAY))
    assert got == {(7, "host_wait"): (33_500, 2), (7, "kernel_wait"): (1_200, 3),
                   (7, "other"): (14_000, 2)}


def test_docs_example(tmp_path):
    # docs/breakdowns.md (ns, threshold 1_000): K2 kernel wait 50, K3 host wait 120,
    # K4 other 1_500
    from breakdown_cases import GEMM
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0)
    for launch, ts, dur in [(0, 0, 100), (50, 150, 150), (400, 420, 80), (410, 2_000, 100)]:
        b.launch_kernel(GEMM, cpu_ts=launch, cpu_dur=5, gpu_ts=ts, gpu_dur=dur)
    iv = idle_intervals(load(tmp_path, b).t, consecutive_kernel_delay_ns=1_000)
    assert list(zip(iv["idle_time(ns)"], iv["idle_category"])) == [
        (50, "kernel_wait"), (120, "host_wait"), (1_500, "other")]


def test_interval_stats_per_rank_equal_the_stats_of_every_gap():
    """The report's table: the statistics computed where each rank is (only they come
    back) equal those of every gap of every rank brought into one table, row for row."""
    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "synthetic_4rank"
    a = TraceAnalysis(trace_dir=str(sample), cache=False, progress=False, max_workers=1)
    last = int(a.t.rank(a.t.get_ranks()[0]).events["iteration"].max())
    for selection in (Selection.of(None, None), Selection.of([1, 3], [last])):
        every_gap = idle_interval_stats(idle_intervals(a.t, selection))
        per_rank = idle_time_breakdown_and_stats(a.t, selection,
                                                 show_idle_interval_stats=True)[1]
        assert len(every_gap) > 0
        pd.testing.assert_frame_equal(per_rank, every_gap)
