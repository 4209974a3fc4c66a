"""The loader against the synthetic generator's ground truth (counted by construction)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from hta.analysis.intervals import union_length
from hta.kineto import native
from hta.model.rules import GPU_WORK_KINDS
from hta.synthetic import generate_job, summarize_truth
from hta.trace_analysis import TraceAnalysis

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "synthetic_4rank"
TRUTH_KIND = {"memcpy_HtoD": "memcpy_htod", "memcpy_DtoH": "memcpy_dtoh",
              "memcpy_DtoD": "memcpy_dtod", "memset": "memset",
              "computation": "computation", "communication": "communication"}


@pytest.fixture(scope="module", params=["native", "python"])
def sample(request: pytest.FixtureRequest) -> TraceAnalysis:
    """The sample job, loaded by the native column builder and by the Python decoder."""
    if request.param == "native" and not native.built():
        pytest.skip("the native scanner (hta.kineto._scan) is not built")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HTA_NATIVE", "1" if request.param == "native" else "0")
        return TraceAnalysis(trace_dir=SAMPLE, cache=False, progress=False)


def _truth(rank: int) -> dict:
    with gzip.open(SAMPLE / f"rank-{rank}.json.gz") as fh:
        return summarize_truth(json.load(fh))


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_counts_match_truth(sample: TraceAnalysis, rank: int) -> None:
    truth = _truth(rank)
    rt = sample.t.rank(rank)
    decoded = rt.decoded(["cat", "name", "kind"])
    x_cats = decoded["cat"].value_counts().to_dict()
    for cat, count in truth["counts_by_cat"].items():
        if cat in ("ac2g", "fwdbwd", "cpu_instant_event"):
            continue
        assert x_cats.get(cat, 0) == count, cat
    assert len(rt.events) == truth["counts_by_ph"]["X"]
    assert len(rt.tables["flows"]) == truth["counts_by_ph"]["s"] + truth["counts_by_ph"]["f"]
    assert len(rt.tables["instants"]) == truth["counts_by_ph"]["i"]
    assert len(rt.tables["metadata_events"]) == truth["counts_by_ph"]["M"]
    kinds = rt.events["kind"].value_counts()
    for truth_kind, count in truth["gpu_kind_counts"].items():
        assert kinds[TRUTH_KIND[truth_kind]] == count


@pytest.mark.parametrize("rank", [0, 3])
def test_gpu_time_exact(sample: TraceAnalysis, rank: int) -> None:
    truth = _truth(rank)
    ev = sample.t.rank(rank).events
    gpu = ev[ev["kind"].isin(GPU_WORK_KINDS)]
    assert int(gpu["ts"].min()) == truth["gpu_first_start_ns"]
    assert int(gpu["end"].max()) == truth["gpu_last_end_ns"]
    assert union_length(gpu["ts"].to_numpy(), gpu["end"].to_numpy()) == truth["gpu_busy_ns"]
    for truth_kind, total in truth["gpu_kind_time_ns"].items():
        assert int(gpu.loc[gpu["kind"] == TRUTH_KIND[truth_kind], "dur"].sum()) == total


def test_links_match_truth(sample: TraceAnalysis) -> None:
    truth = _truth(0)
    ev = sample.t.rank(0).events
    gpu = ev["kind"].isin(GPU_WORK_KINDS).to_numpy()
    launches = (ev["kind"] == "runtime_launch").to_numpy()
    linked = ev["index_correlation"].to_numpy() >= 0
    assert int((gpu & linked).sum()) == truth["gpu_events_linked"]
    assert int(launches.sum()) == truth["runtime_launches"]
    assert int((launches & linked).sum()) == truth["runtime_launches_linked"]
    # every GPU row points at a launch whose correlation is its own
    rows = np.flatnonzero(gpu & linked)
    corr = ev["correlation"].to_numpy()
    targets = ev["index_correlation"].to_numpy()[rows]
    assert (corr[targets] == corr[rows]).all()
    assert set(ev["kind"].iloc[targets]) == {"runtime_launch"}


def test_iterations_and_summary(sample: TraceAnalysis) -> None:
    truth = _truth(0)
    ev = sample.t.rank(0).events
    steps = sorted(int(s.split("#")[1]) for s in truth["profiler_step_names"])
    gpu = ev[ev["kind"].isin(GPU_WORK_KINDS)]
    assert sorted(gpu["iteration"].unique()) == steps
    summary = sample.get_rank_summary().set_index("rank")
    assert summary.loc[0, "gpu_busy(us)"] == truth["gpu_busy_ns"] / 1e3
    assert summary.loc[0, "gpu_idle(us)"] == truth["gpu_idle_ns"] / 1e3


def test_absolute_and_relative_time_agree(tmp_path: Path) -> None:
    rel = generate_job(tmp_path / "rel", ranks=1, steps=2, kernels_per_step=20)
    ab = generate_job(tmp_path / "abs", ranks=1, steps=2, kernels_per_step=20,
                      relative_time=False)
    a = TraceAnalysis(trace_files=rel, cache=False, progress=False).t.rank(0).events
    b = TraceAnalysis(trace_files=ab, cache=False, progress=False).t.rank(0).events
    assert (a["ts"].to_numpy() == b["ts"].to_numpy()).all()
    assert (a["dur"].to_numpy() == b["dur"].to_numpy()).all()
