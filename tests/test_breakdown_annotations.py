"""User annotation breakdown on a hand-built trace."""

from __future__ import annotations

import pytest
from breakdown_cases import load
from kineto_builder import TraceBuilder

from hta.analysis.annotations import COLUMNS, user_annotation_breakdown
from hta.model.selection import Selection


def _annotated(rank: int) -> TraceBuilder:
    """GPU ranges on stream 7: forward 10_000 and 14_000 (attention 4_000 nested in the
    first), backward 20_000; CPU ranges: ProfilerStep#1 and ProfilerStep#2, forward 3_000."""
    b = TraceBuilder(rank=rank, world_size=2)
    b.annotation("ProfilerStep#1", 0, 50_000)
    b.annotation("ProfilerStep#2", 50_000, 50_000)
    b.annotation("forward", 1_000, 3_000)
    for name, ts, dur in [("forward", 10_000, 10_000), ("attention", 12_000, 4_000),
                          ("backward", 22_000, 20_000), ("forward", 60_000, 14_000)]:
        b.gpu(name, "gpu_user_annotation", ts, dur)
    b.launch_kernel("ampere_sgemm", cpu_ts=5_000, cpu_dur=100, gpu_ts=10_000, gpu_dur=5_000)
    return b


def _get(df, rank, name):
    return df[(df["rank"] == rank) & (df["name"] == name)].iloc[0]


def test_gpu_annotations(tmp_path):
    a = load(tmp_path, _annotated(0), _annotated(1))
    df = user_annotation_breakdown(a.t)
    assert list(df.columns) == COLUMNS
    assert df[df["rank"] == 0]["name"].tolist() == ["attention", "backward", "forward"]
    fwd = _get(df, 0, "forward")
    assert (fwd["sum (us)"], fwd["count"], fwd["min (us)"], fwd["max (us)"]) == (24.0, 2, 10.0,
                                                                                  14.0)
    assert fwd["mean (us)"] == 12.0
    assert fwd["stddev"] == pytest.approx(2 * 2 ** 0.5)
    assert _get(df, 1, "attention")["sum (us)"] == 4.0  # nested ranges count on their own


def test_cpu_annotations_and_folding(tmp_path):
    a = load(tmp_path, _annotated(0))
    df = user_annotation_breakdown(a.t, use_gpu_annotation=False)
    assert df["name"].tolist() == ["ProfilerStep#1", "ProfilerStep#2", "forward"]
    assert _get(df, 0, "forward")["sum (us)"] == 3.0
    # job totals: ProfilerStep#1 50, ProfilerStep#2 50, forward 3: keep 1, fold the rest
    folded = user_annotation_breakdown(a.t, use_gpu_annotation=False, num_kernels=1)
    assert folded["name"].tolist() == ["ProfilerStep#1", "others"]
    assert _get(folded, 0, "others")["sum (us)"] == 53.0
    kept = user_annotation_breakdown(a.t, use_gpu_annotation=False, num_kernels=1,
                                     allowlist_patterns=["^forw"])
    assert kept["name"].tolist() == ["ProfilerStep#1", "forward", "others"]


def test_iterations_and_absence(tmp_path, caplog):
    a = load(tmp_path, _annotated(0))
    df = user_annotation_breakdown(a.t, Selection.of(iterations=[2]))
    assert df["name"].tolist() == ["forward"]
    assert df["sum (us)"].tolist() == [14.0]
    b = TraceBuilder(rank=0)
    b.launch_kernel("ampere_sgemm", cpu_ts=0, cpu_dur=100, gpu_ts=1_000, gpu_dur=5_000)
    none = user_annotation_breakdown(load(tmp_path / "plain", b).t)
    assert none.empty and list(none.columns) == COLUMNS
    assert "no gpu_annotation events" in caplog.text
