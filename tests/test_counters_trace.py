"""Augmented traces with counter tracks: written next to the input or elsewhere, loadable,
every original event kept, counters at the right time."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import shared_trace
from counters_cases import bandwidth_case, queue_case

from hta.analysis.bandwidth import memory_bw_time_series
from hta.analysis.queue import queue_length_time_series
from hta.export.counters_trace import (
    TimeSeriesTypes,
    generate_trace_with_counters,
    parse_time_series,
    us_text,
)
from hta.export.rawtrace import output_path
from hta.trace_analysis import TraceAnalysis

BASE = 1_700_000_000_000_000_000


def _combined(base_time_ns=None):
    b = queue_case()
    b.base_time_ns = base_time_ns
    extra = bandwidth_case()
    shift = 20_000  # after the queue case's events
    for e in extra.events:
        e = dict(e)
        e["ts"] = round(e["ts"] + shift / 1000, 3)
        if "correlation" in e.get("args", {}):
            e["args"] = {**e["args"], "correlation": e["args"]["correlation"] + 5_000}
        b.events.append(e)
    return b


def _load(path):
    return TraceAnalysis(trace_files={0: path}, cache=False, progress=False)


def _counter_table(rt):
    c = rt.tables["counters"]
    return c.sort_values(["name", "series", "pid", "tid", "ts"], ignore_index=True)


def _expected_counters(trace):
    q = queue_length_time_series(trace)
    bw = memory_bw_time_series(trace)
    rows = pd.concat([
        pd.DataFrame({"ts": q["ts"], "pid": q["pid"], "tid": q["tid"], "name": "Queue Length",
                      "series": "Queue Length", "value": q["queue_length"].astype(float)}),
        pd.DataFrame({"ts": bw["ts"], "pid": bw["pid"], "tid": 0, "name": "Memcpy BW",
                      "series": bw["name"], "value": bw["memory_bw_gbps"]}),
    ], ignore_index=True)
    return rows.sort_values(["name", "series", "pid", "tid", "ts"], ignore_index=True)


@pytest.mark.parametrize("base", [None, BASE], ids=["absolute", "relative-to-base"])
def test_counters_load_back_at_the_right_time(tmp_path, base):
    src = _combined(base).write(tmp_path / "in" / "rank-0.json.gz")
    a = _load(src)
    written = generate_trace_with_counters(a.t)
    out = written[0]
    assert out == src.parent / "rank-0_with_counters.json.gz"
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    b = _load(out)
    pd.testing.assert_frame_equal(b.t.rank(0).decoded(), a.t.rank(0).decoded())
    got = _counter_table(b.t.rank(0))[["ts", "pid", "tid", "name", "series", "value"]]
    pd.testing.assert_frame_equal(got, _expected_counters(a.t), check_dtype=False)
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    first = next(e for e in events if e.get("ph") == "C")
    assert first == {"ph": "C", "name": "Queue Length", "id": 0, "pid": 0, "tid": 0,
                     "ts": 10.0, "args": {"Queue Length": 1}}
    if base is not None:
        text = gzip.decompress(out.read_bytes())
        assert b'"ts":10.000,' in text  # relative to baseTimeNanoseconds, as the input


def test_absolute_timestamps_despite_a_base(tmp_path):
    b = queue_case()
    b.base_time_ns = 1_000  # the loader sees ts >= base / 2 and keeps them absolute
    src = b.write(tmp_path / "in" / "rank-0.json")
    a = _load(src)
    out = generate_trace_with_counters(a.t, "queue_length", output_dir=tmp_path / "out")[0]
    assert out == tmp_path / "out" / "rank-0_with_counters.json"
    assert out.read_bytes()[:1] == b"{"  # plain JSON in, plain JSON out
    got = _counter_table(_load(out).t.rank(0))
    q = queue_length_time_series(a.t)
    assert sorted(got["ts"]) == sorted(q["ts"])
    assert set(got["name"]) == {"Queue Length"}


def test_original_events_kept_byte_for_byte(tmp_path):
    src = _combined(BASE).write(tmp_path / "in" / "rank-0.json")
    a = _load(src)
    out = generate_trace_with_counters(a.t, TimeSeriesTypes.MEMCPY_BANDWIDTH)[0]
    before = json.loads(src.read_bytes())
    after = json.loads(out.read_bytes())
    n = len(before["traceEvents"])
    assert after["traceEvents"][:n] == before["traceEvents"]
    assert all(e["ph"] == "C" and e["name"] == "Memcpy BW" for e in after["traceEvents"][n:])
    assert list(after) == list(before)
    assert {k: v for k, v in after.items() if k != "traceEvents"} == {
        k: v for k, v in before.items() if k != "traceEvents"}


def test_never_overwrites_the_input(tmp_path):
    src = queue_case().write(tmp_path / "rank-0.json")
    a = _load(src)
    with pytest.raises(ValueError, match="refusing to overwrite"):
        generate_trace_with_counters(a.t, output_suffix="")
    out = generate_trace_with_counters(a.t, output_suffix="", output_dir=tmp_path / "o")[0]
    assert out == tmp_path / "o" / "rank-0.json"


def test_helpers():
    assert us_text(np.array([0, 1, 1500, -1, 1712195495519689047])) == [
        "0.000", "0.001", "1.500", "-0.001", "1712195495519689.047"]
    assert parse_time_series(None) == (TimeSeriesTypes.QUEUE_LENGTH
                                       | TimeSeriesTypes.MEMCPY_BANDWIDTH)
    assert parse_time_series(["memcpy_bandwidth"]) == TimeSeriesTypes.MEMCPY_BANDWIDTH
    with pytest.raises(ValueError, match="unknown time series"):
        parse_time_series("queue")
    assert output_path(Path("/x/rank-0.pt.trace.json.gz"), suffix="_c") == Path(
        "/x/rank-0.pt.trace_c.json.gz")
    assert output_path(Path("/x/trace"), suffix="_c", output_dir="/y") == Path(
        "/y/trace_c.json")


def test_facade(tmp_path):
    src = queue_case().write(tmp_path / "rank-0.json")
    a = _load(src)
    written = a.generate_trace_with_counters(ranks=[0], output_dir=tmp_path / "o")
    assert list(written) == [0] and written[0].exists()


def test_trace_filter_rank0_loads_back_with_the_counters(tmp_path):
    src = shared_trace("trace_filter", "sampled_rank-0.json.gz")
    a = _load(src)
    out = generate_trace_with_counters(a.t, output_dir=tmp_path)[0]
    assert out == tmp_path / "sampled_rank-0_with_counters.json.gz"
    b = _load(out)
    before, after = a.t.rank(0), b.t.rank(0)
    assert (after.decoded()["cat"].value_counts().to_dict()
            == before.decoded()["cat"].value_counts().to_dict())
    pd.testing.assert_frame_equal(after.decoded(), before.decoded())
    got = _counter_table(after)[["ts", "pid", "tid", "name", "series", "value"]]
    expected = _expected_counters(a.t)
    assert len(got) > 0
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    # independently of our loader: the JSON has the original events plus the counters
    original = json.loads(gzip.decompress(src.read_bytes()))["traceEvents"]
    written = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    assert written[:len(original)] == original
    assert len(written) - len(original) == len(expected)
