"""GPU timeline: exact segments on hand-built ranks, the merge rule, the segment bound on a
generated large rank, busy time preserved on real traces, the figure and the facade."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from conftest import shared_trace
from kineto_builder import TraceBuilder

from hta.analysis.intervals import union_length
from hta.analysis.timeline import COLUMNS, WORK_KINDS, aggregated, timeline_segments
from hta.model.rules import GPU_WORK_KINDS, KINDS
from hta.model.selection import Selection
from hta.model.trace import RankTrace, Trace
from hta.plots.timeline import timeline_figure
from hta.trace_analysis import TraceAnalysis

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
TEMPLATED = "void gemm<float, 128>(float*)"


def _rank(rank: int, shift: int = 0) -> TraceBuilder:
    """GPU work (ns, before ``shift``)                 stream  kind           step
      K1   [1_000, 3_000)   sgemm                         7    computation      1
      K2   [3_500, 4_000)   relu                          7    computation      1
      S1   [4_200, 4_300)   Memset (Device)               7    memset           1
      C1   [2_000, 12_000)  NCCL all-reduce              20    communication    1
      M1   [500, 900)       Memcpy HtoD                  24    memcpy_htod      1
      K3   [10_000, 20_000) gemm<float, 128>              7    computation      2
      K4   [20_050, 20_100) sgemm                         7    computation      2
    """
    b = TraceBuilder(rank=rank, world_size=2)
    s = shift
    b.annotation("ProfilerStep#1", ts=s, dur=9_000)
    b.launch_kernel("sgemm", cpu_ts=s + 100, cpu_dur=50, gpu_ts=s + 1_000, gpu_dur=2_000)
    b.launch_kernel("relu", cpu_ts=s + 200, cpu_dur=50, gpu_ts=s + 3_500, gpu_dur=500)
    b.launch("Memset (Device)", "gpu_memset", cpu_ts=s + 300, cpu_dur=50, gpu_ts=s + 4_200,
             gpu_dur=100, launcher="cudaMemsetAsync")
    b.launch_kernel(NCCL, cpu_ts=s + 400, cpu_dur=50, gpu_ts=s + 2_000, gpu_dur=10_000,
                    stream=20)
    b.memcpy("HtoD", cpu_ts=s + 450, cpu_dur=20, gpu_ts=s + 500, gpu_dur=400, stream=24)
    b.annotation("ProfilerStep#2", ts=s + 9_000, dur=9_000)
    b.launch_kernel(TEMPLATED, cpu_ts=s + 9_100, cpu_dur=50, gpu_ts=s + 10_000,
                    gpu_dur=10_000)
    b.launch_kernel("sgemm", cpu_ts=s + 9_200, cpu_dur=50, gpu_ts=s + 20_050, gpu_dur=50)
    return b


@pytest.fixture
def job(tmp_path):
    for b in (_rank(0), _rank(1, shift=1_000_000)):
        b.write(tmp_path / f"rank-{b.rank}.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)


def _t0(analyzer: TraceAnalysis) -> int:
    """Where rank 0's written times start on the loaded clock (M1 was written at 500)."""
    ev = analyzer.t.rank(0).events
    return int(ev.loc[ev["kind"].astype(str).isin(GPU_WORK_KINDS), "ts"].min()) - 500


def test_every_event_is_a_segment_when_they_fit(job):
    df = timeline_segments(job.t, Selection.of(0))
    assert list(df.columns) == COLUMNS
    t0 = _t0(job)
    got = [(r.stream, r.kind, r.start_ns - t0, r.end_ns - t0, r.name, r.iteration)
           for r in df.itertuples()]
    assert got == [
        (7, "computation", 1_000, 3_000, "sgemm", 1),
        (7, "computation", 3_500, 4_000, "relu", 1),
        (7, "memset", 4_200, 4_300, "Memset (Device)", 1),
        (7, "computation", 10_000, 20_000, TEMPLATED, 2),
        (7, "computation", 20_050, 20_100, "sgemm", 2),
        (20, "communication", 2_000, 12_000, NCCL, 1),
        (24, "memcpy_htod", 500, 900, "Memcpy HtoD", 1),
    ]
    assert (df["count"] == 1).all() and (df["kind_count"] == 1).all()
    assert (df["busy_ns"] == df["end_ns"] - df["start_ns"]).all()
    assert (df["resolution_ns"] == 0).all() and (df["kinds"] == "").all()
    assert not aggregated(df)


def test_ranks_share_the_clock_and_filters_apply(job):
    both = timeline_segments(job.t)
    assert both["rank"].tolist() == [0] * 7 + [1] * 7
    first = both[both["rank"] == 0]["start_ns"].to_numpy()
    second = both[both["rank"] == 1]["start_ns"].to_numpy()
    assert (second - first == 1_000_000).all()  # rank 1 written 1 ms later, drawn 1 ms later
    assert timeline_segments(job.t, Selection.of([1]))["rank"].unique().tolist() == [1]
    assert timeline_segments(job.t, streams=[20, 24])["stream"].tolist() == [20, 24, 20, 24]
    step2 = timeline_segments(job.t, Selection.of(0, 2))
    assert step2["name"].tolist() == [TEMPLATED, "sgemm"]
    assert len(timeline_segments(job.t, streams=99)) == 0


def test_merge_rule_at_a_given_resolution(job):
    df = timeline_segments(job.t, Selection.of(0), resolution_ns=1_000)
    t0 = _t0(job)
    s7 = df[df["stream"] == 7]
    # K1 (long), K2 500 ns later, S1 200 ns later and short: one segment, mostly compute.
    # K3 is in step 2 (rule 3); K4 joins it (50 ns gap, same kind).
    got = [(r.kind, r.start_ns - t0, r.end_ns - t0, r.busy_ns, r.count, r.kind_count, r.kinds,
            r.name, r.iteration) for r in s7.itertuples()]
    assert got == [
        ("computation", 1_000, 4_300, 2_600, 3, 2, "computation 2, memset 1", "sgemm", 1),
        ("computation", 10_000, 20_100, 10_050, 2, 2, "computation 2", TEMPLATED, 2),
    ]
    assert (df["resolution_ns"] == 1_000).all() and aggregated(df)
    # at 300 ns, S1 is 200 ns after K2 but K2 lasts 500 ns: rule 2 keeps them apart
    fine = timeline_segments(job.t, Selection.of(0), streams=7, resolution_ns=300)
    assert fine["kind"].tolist() == ["computation", "computation", "memset", "computation"]
    assert fine["count"].tolist() == [1, 1, 1, 2]


def test_budget_picks_the_finest_resolution_that_fits(job):
    df = timeline_segments(job.t, Selection.of(0), max_segments=5)
    assert len(df) <= 5
    res = int(df["resolution_ns"].iloc[0])
    assert res > 0
    finer = timeline_segments(job.t, Selection.of(0), resolution_ns=res // 2, max_segments=10**6)
    assert len(finer) > 5
    # one segment per stream at worst, even when iterations x streams exceed the budget
    assert len(timeline_segments(job.t, Selection.of(0), max_segments=1)) == 3


def _check_preserved(segments: pd.DataFrame, analyzer: TraceAnalysis) -> None:
    """Per rank and stream: busy time = union of the GPU work, counts per kind kept."""
    for rank in segments["rank"].unique():
        ev = analyzer.t.rank(int(rank)).events
        work = ev[ev["kind"].astype(str).isin(GPU_WORK_KINDS)]
        for stream, events in work.groupby("stream"):
            seg = segments[(segments["rank"] == rank) & (segments["stream"] == stream)]
            expect = union_length(events["ts"].to_numpy(), events["end"].to_numpy())
            assert int(seg["busy_ns"].sum()) == expect, (rank, stream)
            assert int(seg["count"].sum()) == len(events)
            assert _kind_counts(seg) == events["kind"].astype(str).value_counts().to_dict()
            assert seg["start_ns"].min() == events["ts"].min()
            assert seg["end_ns"].max() == events["end"].max()


def _kind_counts(seg: pd.DataFrame) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind, count, kinds in zip(seg["kind"], seg["count"], seg["kinds"]):
        pairs = re.findall(r"(\w+) (\d+)", kinds) if kinds else [(kind, count)]
        for k, n in pairs:
            counts[k] = counts.get(k, 0) + int(n)
    return counts


@pytest.mark.parametrize("budget", [10**6, 50, 12, 1])
def test_aggregation_preserves_busy_time_and_counts(job, budget):
    _check_preserved(timeline_segments(job.t, max_segments=budget), job)


def _big_rank(n: int, streams: int = 4, seed: int = 1) -> Trace:
    """``n`` GPU events on ``streams`` streams, back to back with random gaps and kinds."""
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, streams, n)
    dur = rng.integers(500, 20_000, n)
    gap = rng.choice([50, 300, 2_000, 200_000], n, p=[0.5, 0.3, 0.19, 0.01])
    kinds = rng.choice(["computation", "memset", "communication", "memcpy_dtod"], n,
                       p=[0.9, 0.05, 0.03, 0.02])
    ts = np.empty(n, dtype=np.int64)
    for s in range(streams):  # events of one stream do not overlap
        sel = stream == s
        ts[sel] = 1_700_000_000_000_000_000 + np.cumsum(dur[sel] + gap[sel]) - dur[sel]
    order = np.argsort(ts, kind="stable")
    ts, dur, stream, kinds = ts[order], dur[order], stream[order], kinds[order]
    events = pd.DataFrame({
        "index": np.arange(n), "ts": ts, "dur": dur, "end": ts + dur,
        "name": rng.integers(0, 3, n).astype(np.int32), "cat": np.zeros(n, np.int32),
        "stream": stream + 7, "iteration": 1 + (np.arange(n) * 10) // n,
        "kind": pd.Categorical(kinds, categories=list(KINDS)),
    })
    rt = RankTrace(rank=0, events=events, symbols=["k0", "k1", "k2"], tables={}, meta={})
    return Trace({0: rt})


def test_a_large_rank_fits_the_bound():
    # speed is benchmarks/bench_timeline.py's business (about 0.3 s here), not a test's
    n = 300_000
    trace = _big_rank(n)
    df = timeline_segments(trace, max_segments=20_000)
    assert len(df) <= 20_000
    assert int(df["count"].sum()) == n
    ev = trace.rank(0).events
    for stream, events in ev.groupby("stream"):
        seg = df[df["stream"] == stream]
        assert int(seg["busy_ns"].sum()) == union_length(events["ts"].to_numpy(),
                                                         events["end"].to_numpy())
        assert _kind_counts(seg) == events["kind"].astype(str).value_counts().to_dict()
    res = int(df["resolution_ns"].iloc[0])
    assert len(timeline_segments(trace, resolution_ns=res // 2, max_segments=10**7)) > 20_000
    assert set(df["kind"]) <= set(WORK_KINDS)


@pytest.mark.parametrize("name", ["timeline_analysis", "trace_filter"])
def test_real_traces_busy_time_is_the_union_of_gpu_events(name):
    analyzer = TraceAnalysis(trace_dir=shared_trace(name), cache=False, progress=False)
    exact = timeline_segments(analyzer.t)
    assert not aggregated(exact)
    _check_preserved(exact, analyzer)
    merged = timeline_segments(analyzer.t, max_segments=60)
    assert aggregated(merged)
    assert merged.groupby("rank").size().max() <= 60
    _check_preserved(merged, analyzer)


def test_figure_rows_colours_hover_and_note(job):
    exact = timeline_figure(timeline_segments(job.t), title="t")
    assert isinstance(exact, go.Figure)
    assert not exact.layout.annotations  # nothing merged: no note
    assert list(exact.layout.yaxis.ticktext) == [
        f"rank {r} · stream {s}" for r in (0, 1) for s in (7, 20, 24)]
    assert list(exact.layout.yaxis.tickvals) == [5, 4, 3, 2, 1, 0]  # rank 0 on top
    legend = [tr.name for tr in exact.data if tr.showlegend is not False]
    assert legend == ["computation", "communication", "memcpy_htod", "memset"]
    hover = [tr for tr in exact.data if tr.mode == "markers"]
    names = [row[0] for tr in hover for row in tr.customdata]
    assert "void gemm&lt;float, 128&gt;(float*)" in names  # escaped for Plotly
    assert all("<" not in n for n in names)
    compute = next(tr for tr in exact.data if tr.name == "computation" and tr.mode == "lines")
    assert len(compute.x) == 3 * 2 * 4  # 4 kernels per rank, 2 ranks, 3 points each
    merged = timeline_figure(timeline_segments(job.t, max_segments=3))
    note = merged.layout.annotations[0].text
    assert "14 GPU events drawn as" in note and "merged" in note
    empty = timeline_figure(timeline_segments(job.t, streams=99))
    assert "no GPU work" in empty.layout.annotations[0].text


def test_facade_methods(job, monkeypatch):
    shown = []
    monkeypatch.setattr("hta.facade.timeline.show", lambda fig, **kw: shown.append(fig))
    fig = job.plot_timeline(iterations=[1])
    assert isinstance(fig, go.Figure) and not shown
    assert "iteration(s) 1" in fig.layout.title.text
    segments = job.get_timeline_segments(max_segments=6)
    assert len(segments) <= 6 and set(segments["rank"]) == {0, 1}  # 3 per rank
    assert job.plot_timeline_gpu_kernels("GPU kernels", ranks=[0], streams=[7]) is None
    assert len(shown) == 1 and shown[0].layout.title.text == "GPU kernels"


def test_lazy_ranks_give_the_same_segments(job):
    lazy = TraceAnalysis(trace_dir=job.trace_dir, cache=False, progress=False,
                         in_memory=False, max_workers=1)
    try:
        for budget in (10**6, 6):
            pd.testing.assert_frame_equal(lazy.get_timeline_segments(max_segments=budget),
                                          job.get_timeline_segments(max_segments=budget))
    finally:
        lazy.close()
