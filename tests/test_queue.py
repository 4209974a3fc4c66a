"""Launch queue length: exact step functions, statistics and full-queue time."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest
from conftest import SHARED_TRACES, params_or_absent, shared_trace
from counters_cases import (
    FULL_QUEUE,
    full_queue_case,
    load,
    queue_case,
)

from hta.analysis.launch import launch_pairing_summary
from hta.analysis.queue import (
    queue_length_summary,
    queue_length_time_series,
    time_spent_blocked_on_full_queue,
)
from hta.model.selection import EVERYTHING
from hta.trace_analysis import TraceAnalysis


def _steps(series, stream):
    part = series[series["stream"] == stream]
    return list(zip(part["ts"].tolist(), part["queue_length"].tolist()))


def test_step_function_per_stream(tmp_path):
    s = queue_length_time_series(load(tmp_path, queue_case()).t)
    assert _steps(s, 7) == [(0, 2), (50, 1), (100, 2), (200, 1), (300, 0)]
    assert _steps(s, 8) == [(1_000, 2), (2_000, 1), (3_000, 0)]  # graph kernels
    assert _steps(s, 9) == [(1_000, 1), (2_500, 0)]
    assert _steps(s, 0) == [(10_000, 1), (10_100, 0)]  # HIP launch
    assert (s["queue_length"] >= 0).all()
    assert list(s.columns) == ["rank", "pid", "tid", "stream", "ts", "queue_length"]
    assert (s["tid"] == s["stream"]).all() and (s["pid"] == 0).all()


def test_summary_is_time_weighted(tmp_path):
    a = load(tmp_path, queue_case())
    summary = queue_length_summary(a.t).set_index("stream")
    s7 = summary.loc[7]
    # window [0, 300): 2 for 150 ns, 1 for 150 ns
    assert s7["count"] == 5  # K1..K5; K4 and K5 never change the length
    assert s7["mean"] == 1.5 and s7["std"] == 0.5
    assert (s7["min"], s7["25%"], s7["50%"], s7["75%"], s7["90%"], s7["max"]) == (
        1, 1, 1, 2, 2, 2)
    assert s7["duration(us)"] == 0.3
    assert s7["unpaired_gpu_events"] == 1
    s8 = summary.loc[8]
    assert (s8["count"], s8["mean"], s8["max"], s8["unpaired_gpu_events"]) == (2, 1.5, 2, 0)
    assert summary.loc[0, "count"] == 1 and summary.loc[0, "mean"] == 1.0


def test_unpaired_and_skewed_events_are_counted(tmp_path):
    row = launch_pairing_summary(load(tmp_path, queue_case()).t).iloc[0]
    assert row["unpaired_launches"] == 1
    assert row["unpaired_gpu_events"] == 1
    assert row["gpu_before_launch"] == 1


def test_queue_fills_to_1024_and_blocks(tmp_path):
    a = load(tmp_path, full_queue_case())
    s = queue_length_time_series(a.t)
    assert s["queue_length"].max() == FULL_QUEUE
    full = s[s["queue_length"] == FULL_QUEUE]
    assert full["ts"].tolist() == [10_230]  # reached once, then held
    after = s[s["ts"] > 10_230].iloc[0]
    assert (after["ts"], after["queue_length"]) == (176_000, FULL_QUEUE - 1)
    blocked = time_spent_blocked_on_full_queue(a.t, FULL_QUEUE).iloc[0]
    assert round(blocked["duration_at_max_queue_length(us)"] * 1000) == 165_770
    assert blocked["relative_duration_at_max_queue_length"] == 165_770 / 1_200_000
    none = time_spent_blocked_on_full_queue(a.t, FULL_QUEUE + 1).iloc[0]
    assert none["duration_at_max_queue_length(us)"] == 0


def test_facade_accepts_hta_call_form(tmp_path):
    a = load(tmp_path, full_queue_case())
    series = a.get_queue_length_time_series()
    hta_form = a.get_time_spent_blocked_on_full_queue(series, max_queue_length=FULL_QUEUE)
    ours = a.get_time_spent_blocked_on_full_queue(queue_length_threshold=FULL_QUEUE)
    assert hta_form.equals(ours)
    summary = a.get_queue_length_summary()
    assert summary.loc[0, "max"] == FULL_QUEUE and summary.loc[0, "count"] == 1_100


def _gpu_trace_dirs():
    if not SHARED_TRACES.exists():
        return []
    return sorted({p.parent for p in SHARED_TRACES.rglob("*.json*")
                   if ".hta_cache" not in p.parts})


@pytest.mark.parametrize("folder", params_or_absent(_gpu_trace_dirs(), ids=lambda p: p.name))
def test_never_negative_on_real_traces(folder):
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    s = queue_length_time_series(a.t)
    if len(s) == 0:
        pytest.skip(f"{folder.name}: no launched GPU work")
    assert (s["queue_length"] >= 0).all()
    last = s.groupby(["rank", "pid", "stream"])["queue_length"].last()
    assert (last == 0).all()


def test_matches_an_independent_count_on_trace_filter():
    path = shared_trace("trace_filter", "sampled_rank-0.json.gz")
    a = TraceAnalysis(trace_files={0: path}, cache=False, progress=False)
    ours = queue_length_time_series(a.t)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    changes = defaultdict(list)  # stream -> [(ts_us, order, delta)]
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launch = launches.get(e["args"].get("correlation"))
        if launch is None:
            continue
        start = float(e["ts"])
        changes[e["args"]["stream"]] += [(min(float(launch["ts"]), start), 0, 1),
                                         (start, 1, -1)]
    for stream, items in changes.items():
        items.sort()
        expected, length = {}, 0
        for ts, _, delta in items:
            length += delta
            expected[round(ts)] = length
        steps, previous = [], None
        for ts, value in expected.items():
            if value != previous:
                steps.append((ts, value))
            previous = value
        got = ours[ours["stream"] == stream]
        assert list(zip((round(t / 1000) for t in got["ts"]), got["queue_length"])) == steps


def test_figure_has_one_step_line_per_stream(tmp_path):
    from hta.plots.queue import queue_length_figure

    s = queue_length_time_series(load(tmp_path, queue_case()).t)
    fig = queue_length_figure(s, threshold=1024)
    assert len(fig.data) == 4
    assert all(t.line.shape == "hv" for t in fig.data)
    assert [list(t.y) for t in fig.data][1] == [2, 1, 2, 1, 0]  # stream 7


def test_envelope_keeps_every_peak_and_the_ends_of_each_bin():
    """A line of 100 rows over a budget of 8 (two time bins of 50 rows): each bin keeps
    its first and last rows and its lowest and highest; a short line is kept whole."""
    import numpy as np
    import pandas as pd

    from hta.analysis.thinning import envelope

    value = np.ones(100, dtype=np.int64)
    value[37], value[62] = 9, 0  # a one-row spike in the first bin, a dip in the second
    series = pd.DataFrame({"line": [0] * 100 + [1] * 3, "ts": list(range(100)) + [0, 1, 2],
                           "v": list(value) + [5, 6, 7]})
    shown, thinned = envelope(series, ["line"], "ts", ["v"], 8)
    assert thinned
    # bin [0, 50): first 0, min 0 (first of the lows), max 37, last 49;
    # bin [50, 100): first 50, min 62, max 50 (first of the highs), last 99
    assert shown["ts"].tolist() == [0, 37, 49, 50, 62, 99, 0, 1, 2]
    same, thinned = envelope(series, ["line"], "ts", ["v"], 100)
    assert not thinned and same is series


def test_thinned_series_is_cut_where_the_rank_is(tmp_path):
    """The report's figure rows: each line cut per rank, as the envelope cuts the whole
    series; the flag says whether a line was cut."""
    from hta.analysis.queue import thinned_queue_series
    from hta.analysis.thinning import envelope

    trace = load(tmp_path, full_queue_case()).t
    full = queue_length_time_series(trace)
    longest = int(full.groupby(["rank", "pid", "stream"]).size().max())
    assert longest > 4
    shown, thinned = thinned_queue_series(trace, EVERYTHING, max_points_per_line=4)
    want, _ = envelope(full, ["rank", "pid", "stream"], "ts", ["queue_length"], 4)
    assert thinned and shown.reset_index(drop=True).equals(want.reset_index(drop=True))
    whole, thinned = thinned_queue_series(trace, EVERYTHING, max_points_per_line=longest)
    assert not thinned and len(whole) == len(full)
