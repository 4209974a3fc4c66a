"""Memory bandwidth: per copy, concurrent time series and summary, exact on a built trace."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
from conftest import shared_trace
from counters_cases import bandwidth_case, load

from hta.analysis.bandwidth import memory_bw_summary, memory_bw_time_series, memory_copies
from hta.trace_analysis import TraceAnalysis


def test_bandwidth_per_copy(tmp_path):
    copies = memory_copies(load(tmp_path, bandwidth_case()).t)
    got = [(n, int(ts), int(d), None if math.isnan(bw) else bw, src) for n, ts, d, bw, src in
           zip(copies["name"], copies["ts"], copies["dur"], copies["memory_bw_gbps"],
               copies["bw_source"])]
    assert got == [
        ("Memcpy HtoD", 1_000, 100, 10.0, "arg"),
        ("Memcpy HtoD", 1_050, 100, 30.0, "bytes/dur"),
        ("Memcpy DtoH", 2_000, 0, None, "undefined"),
        ("Memcpy DtoH", 2_100, 0, 5.0, "arg"),
        ("Memcpy DtoH", 2_200, 1_000, 2.0, "bytes/dur"),  # negative arg ignored
        ("Memset", 3_000, 1_000, 2.0, "bytes/dur"),
        ("Memcpy DtoD", 4_000, 100, 4.0, "bytes/dur"),
        ("Memcpy DtoD", 4_100, 100, 4.0, "bytes/dur"),
        ("Memcpy PtoP", 5_000, 500, 2.0, "bytes/dur"),
        ("Memcpy HtoD", 6_000, 100, None, "undefined"),  # no bytes
    ]
    assert (copies["memory_bw_gbps"].dropna() >= 0).all()


def test_time_series_sums_concurrent_copies(tmp_path):
    series = memory_bw_time_series(load(tmp_path, bandwidth_case()).t)

    def steps(name):
        part = series[series["name"] == name]
        return list(zip(part["ts"].tolist(), part["memory_bw_gbps"].tolist()))

    assert steps("Memcpy HtoD") == [(1_000, 10.0), (1_050, 40.0), (1_100, 30.0), (1_150, 0.0)]
    assert steps("Memcpy DtoH") == [(2_200, 2.0), (3_200, 0.0)]  # zero-duration: nothing
    assert steps("Memset") == [(3_000, 2.0), (4_000, 0.0)]
    assert steps("Memcpy DtoD") == [(4_000, 4.0), (4_200, 0.0)]  # back to back: no 8
    assert steps("Memcpy PtoP") == [(5_000, 2.0), (5_500, 0.0)]
    assert (series["memory_bw_gbps"] >= 0).all()


def test_summary_per_direction(tmp_path):
    summary = memory_bw_summary(load(tmp_path, bandwidth_case()).t).set_index("name")
    htod = summary.loc["Memcpy HtoD"]
    assert (htod["count"], htod["zero_duration_count"], htod["total_bytes"]) == (3, 0, 4_000)
    assert htod["busy_time(us)"] == 0.25  # [1000, 1150) and [6000, 6100)
    assert htod["achieved_bw_gbps"] == 4_000 / 250
    assert (htod["mean_bw_gbps"], htod["min_bw_gbps"], htod["p25_bw_gbps"],
            htod["p50_bw_gbps"], htod["p75_bw_gbps"], htod["max_bw_gbps"]) == (
        20.0, 10.0, 15.0, 20.0, 25.0, 30.0)
    assert htod["std_bw_gbps"] == np.std([10.0, 30.0], ddof=1)
    dtoh = summary.loc["Memcpy DtoH"]
    assert (dtoh["count"], dtoh["zero_duration_count"], dtoh["total_bytes"]) == (3, 2, 2_600)
    assert dtoh["busy_time(us)"] == 1.0 and dtoh["achieved_bw_gbps"] == 2.0
    assert (dtoh["mean_bw_gbps"], dtoh["min_bw_gbps"], dtoh["max_bw_gbps"]) == (3.5, 2.0, 5.0)
    assert summary.loc["Memcpy DtoD", "achieved_bw_gbps"] == 4.0
    assert sorted(summary.index) == ["Memcpy DtoD", "Memcpy DtoH", "Memcpy HtoD",
                                     "Memcpy PtoP", "Memset"]


def test_facade(tmp_path):
    a = load(tmp_path, bandwidth_case())
    assert len(a.get_memory_bw_time_series()) == 12
    assert len(a.get_memory_bw_summary()) == 5


def test_real_trace_matches_the_json():
    path = shared_trace("trace_filter", "sampled_rank-0.json.gz")
    a = TraceAnalysis(trace_files={0: path}, cache=False, progress=False)
    copies = memory_copies(a.t)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    raw = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    assert len(copies) == len(raw)
    expected = sorted(float(e["args"]["memory bandwidth (GB/s)"]) for e in raw)
    assert sorted(copies["memory_bw_gbps"]) == expected
    series = memory_bw_time_series(a.t)
    assert (series["memory_bw_gbps"] >= 0).all()
    last = series.groupby(["rank", "pid", "name"])["memory_bw_gbps"].last()
    assert (last == 0).all()


def test_figures(tmp_path):
    from hta.plots.bandwidth import memory_bw_figure, memory_bw_summary_figure

    a = load(tmp_path, bandwidth_case())
    fig = memory_bw_figure(memory_bw_time_series(a.t))
    assert len(fig.data) == 5
    htod = next(t for t in fig.data if "HtoD" in t.name)
    assert list(htod.y) == [10.0, 40.0, 30.0, 0.0]
    summary = memory_bw_summary(a.t)
    bars = memory_bw_summary_figure(summary)
    assert sorted(t.name for t in bars.data) == sorted(summary["name"])
