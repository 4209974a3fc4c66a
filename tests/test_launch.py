"""Kernel launch statistics: exact values on a hand-built trace, and on the ROCm sample."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conftest import shared_trace
from counters_cases import launch_case, load

from hta.analysis.launch import cuda_kernel_launch_stats, launch_pairing_summary
from hta.trace_analysis import TraceAnalysis

EXPECTED = [  # launch name, GPU name, cpu ns, gpu ns, delay ns, stream
    ("cudaLaunchKernel", "k_short", 4_000, 2_000, 100, 7),
    ("cudaLaunchKernelExC", "k_exc", 60_000, 1_000, 130_000, 7),
    ("cuLaunchKernel", "k_driver", 2_000, 5_000, -1_000, 7),
    ("hipLaunchKernel", "k_hip", 3_000, 500, 7_000, 0),
    ("cudaLaunchCooperativeKernel", "k_coop", 1_000, 1_000, 4_000, 7),
    ("cudaGraphLaunch", "g2", 10_000, 500, 5_000, 8),
    ("cudaGraphLaunch", "g0", 10_000, 1_000, 10_000, 7),
    ("cudaGraphLaunch", "g1", 10_000, 2_000, 11_000, 7),
    ("cudaMemcpyAsync", "Memcpy HtoD", 2_000, 1_000, 1_000, 24),
]


def _rows(df):
    ns = {c: [round(x * 1000) for x in df[f"{c}(us)"]]
          for c in ("cpu_duration", "gpu_duration", "launch_delay")}
    return list(zip(df["launch_name"], df["name"], ns["cpu_duration"], ns["gpu_duration"],
                    ns["launch_delay"], df["stream"]))


def test_every_launch_family_is_paired_with_exact_times(tmp_path):
    a = load(tmp_path, launch_case())
    df = cuda_kernel_launch_stats(a.t)
    assert _rows(df) == EXPECTED
    assert df["cpu_duration(us)"].iloc[0] == 4.0
    assert df["launch_delay(us)"].iloc[0] == 0.1


def test_graph_launch_pairs_with_all_its_kernels(tmp_path):
    a = load(tmp_path, launch_case())
    df = cuda_kernel_launch_stats(a.t)
    graph = df[df["launch_name"] == "cudaGraphLaunch"]
    assert graph["launch_index"].nunique() == 1
    assert graph["correlation"].nunique() == 1
    assert sorted(graph["name"]) == ["g0", "g1", "g2"]


def test_graph_launch_is_flagged_once(tmp_path):
    """A graph launch longer than the runtime cutoff is one runtime outlier, not one per
    replayed kernel (before: each of its kernels repeated the call's duration and was
    flagged); a plain launch of the same duration stays flagged (the twin)."""
    a = load(tmp_path, launch_case())
    df = cuda_kernel_launch_stats(a.t, runtime_cutoff=5)
    graph = df[df["launch_name"] == "cudaGraphLaunch"]
    assert int(graph["runtime_outlier"].sum()) == 1
    assert graph.loc[graph["runtime_outlier"], "name"].tolist() == ["g2"]
    assert int(graph["launch_delay_outlier"].sum()) == 0
    plain = df[df["name"] == "k_exc"]  # a 60 µs plain launch
    assert plain["runtime_outlier"].all()


def test_flags_follow_the_cutoffs(tmp_path):
    a = load(tmp_path, launch_case())
    df = cuda_kernel_launch_stats(a.t).set_index("name")
    # short: gpu < cpu and cpu <= 50 us
    # the graph launch is judged once, on its first kernel (g2): 3.5 µs of GPU work < 10 µs
    assert set(df.index[df["short_kernel"]]) == {"k_short", "k_hip", "g2", "Memcpy HtoD"}
    assert set(df.index[df["runtime_outlier"]]) == {"k_exc"}
    assert set(df.index[df["launch_delay_outlier"]]) == {"k_exc"}
    tight = cuda_kernel_launch_stats(a.t, runtime_cutoff=2, launch_delay_cutoff=5)
    tight = tight.set_index("name")
    assert set(tight.index[tight["runtime_outlier"]]) == {"k_short", "k_exc", "k_hip", "g2"}
    # g0 and g1 start 10-11 µs after the graph call: the graph's own runtime, no delay
    assert set(tight.index[tight["launch_delay_outlier"]]) == {"k_exc", "k_hip"}


def test_memory_events_can_be_left_out(tmp_path):
    a = load(tmp_path, launch_case())
    df = cuda_kernel_launch_stats(a.t, include_memory_events=False)
    assert "Memcpy HtoD" not in set(df["name"])
    assert len(df) == len(EXPECTED) - 1


def test_pairing_summary_counts_unpaired_events(tmp_path):
    a = load(tmp_path, launch_case())
    row = launch_pairing_summary(a.t).iloc[0]
    assert row.to_dict() == {
        "rank": 0, "launches": 8, "paired_launches": 7, "unpaired_launches": 1,
        "gpu_events": 10, "paired_gpu_events": 9, "unpaired_gpu_events": 1,
        "gpu_before_launch": 0,
    }


def test_rows_dropped_after_loading_keep_links_right(tmp_path):
    a = load(tmp_path, launch_case())
    rt = a.t.rank(0)
    full = cuda_kernel_launch_stats(a.t)
    first_launch = rt.events["index"][rt.decoded()["name"] == "cudaLaunchKernel"].iloc[0]
    rt.events = rt.events[rt.events["index"] != first_launch].reset_index(drop=True)
    df = cuda_kernel_launch_stats(a.t)
    assert _rows(df) == _rows(full)[1:]


def test_facade_returns_the_table(tmp_path):
    a = load(tmp_path, launch_case())
    df = a.get_cuda_kernel_launch_stats(visualize=False)
    assert len(df) == len(EXPECTED)
    with pytest.raises(TypeError, match="visualize"):
        a.get_cuda_kernel_launch_stats(False)


def test_launch_stats_on_the_rocm_sample():
    folder = shared_trace("amd_trace")
    path = next(folder.glob("*.json.gz"))
    a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    df = cuda_kernel_launch_stats(a.t)
    assert len(df) > 0
    # independently: pair GPU work with cuda_runtime calls by correlation in the JSON
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    runtime = {e["args"]["correlation"]: e for e in events
               if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    pairs = [(runtime[g["args"]["correlation"]], g) for g in gpu
             if g["args"].get("correlation") in runtime]
    assert len(df) == len(pairs)
    expected = sorted(round(float(r["dur"]) * 1000) for r, _ in pairs)
    assert sorted(np.rint(df["cpu_duration(us)"] * 1000).astype(int)) == expected
    assert set(df["launch_name"]) <= {"hipLaunchKernel", "hipExtModuleLaunchKernel",
                                      "hipMemcpyWithStream"}
    assert {"hipLaunchKernel", "hipExtModuleLaunchKernel"} <= set(df["launch_name"])


def test_figure_shows_the_flagged_rows(tmp_path):
    from hta.plots.launch import launch_stats_figure

    df = cuda_kernel_launch_stats(load(tmp_path, launch_case()).t)
    fig = launch_stats_figure(df, 50, 100)
    short, runtime, delay = (list(t.x) for t in fig.data)
    assert sorted(short) == sorted(df.loc[df["short_kernel"], "cpu_duration(us)"])
    assert runtime == [60.0] and delay == [130.0]
    assert "> 50 µs" in fig.layout.annotations[1].text


def test_facade_visualize_shows_the_figures(tmp_path, monkeypatch):
    import hta.facade.counters as facade

    shown = []
    monkeypatch.setattr(facade, "show", shown.append)
    a = load(tmp_path, launch_case())
    a.get_cuda_kernel_launch_stats(visualize=True)
    a.get_queue_length_time_series(visualize=True)
    a.get_memory_bw_time_series(visualize=True)
    a.get_memory_bw_summary(visualize=True)
    a.get_operator_breakdown(visualize=True)
    assert len(shown) == 5 and all(hasattr(f, "to_dict") for f in shown)


def test_histograms_count_each_flagged_launch_in_its_bin(tmp_path):
    """Per rank and flag, the bins hold exactly the flagged rows of the statistics table:
    the short kernels' call durations (4, 3, 1 and 2 µs here: the case's calls whose GPU
    work ran shorter) and the two outliers (a 60 µs call, a 130 µs delay)."""
    from hta.analysis.launch import BINS_PER_DECADE, flagged_launch_histograms

    a = load(tmp_path, launch_case())
    stats = cuda_kernel_launch_stats(a.t)
    hist = flagged_launch_histograms(a.t)
    for flag, column in (("short_kernel", "cpu_duration(us)"),
                         ("runtime_outlier", "cpu_duration(us)"),
                         ("launch_delay_outlier", "launch_delay(us)")):
        values = stats.loc[stats[flag], column].to_numpy()
        bins = hist[hist["flag"] == flag]
        assert int(bins["launches"].sum()) == len(values) > 0
        for v in values:  # each value inside the bin that counts it
            hit = bins[(bins["lo(us)"] <= v) & (v < bins["hi(us)"])]
            assert len(hit) == 1, (flag, v)
        assert (bins["value"] == column).all()
    # the grid: 20 bins a decade, edges at 10 ** (k / 20) whatever the rank
    edges = np.log10(hist["lo(us)"].to_numpy()) * BINS_PER_DECADE
    np.testing.assert_allclose(edges, np.round(edges), atol=1e-9)
    runtime = hist[hist["flag"] == "runtime_outlier"]
    assert runtime["launches"].tolist() == [1]
    # the counts per rank the report shows: the bins' sums, zero for a rank without flags
    from hta.analysis.launch import flag_counts

    counts = flag_counts(hist, [0, 9])
    assert counts.to_dict("records") == [
        {"rank": 0, **{f: int(stats[f].sum()) for f in ("short_kernel", "runtime_outlier",
                                                          "launch_delay_outlier")}},
        {"rank": 9, "short_kernel": 0, "runtime_outlier": 0, "launch_delay_outlier": 0}]
    assert runtime["lo(us)"].iloc[0] <= 60.0 < runtime["hi(us)"].iloc[0]


def test_histogram_figure_draws_each_rank_as_steps(tmp_path):
    from hta.analysis.launch import flagged_launch_histograms
    from hta.plots.launch import _steps, launch_histogram_figure

    hist = flagged_launch_histograms(load(tmp_path, launch_case()).t)
    fig = launch_histogram_figure(hist, 50, 100)
    assert [t.line.shape for t in fig.data] == ["hv"] * 3
    assert fig.layout.xaxis.type == "log"
    x, y = _steps(hist[hist["flag"] == "launch_delay_outlier"])
    assert y[0] == 1 and y[-1] == 0 and x[0] <= 130.0 < x[-1]
    import pandas as pd

    two = pd.DataFrame({"lo(us)": [1.0, 10.0], "hi(us)": [1.2, 12.0], "launches": [3, 4]})
    assert _steps(two) == ([1.0, 1.2, 10.0, 12.0], [3, 0, 4, 0])  # zero between gaps
