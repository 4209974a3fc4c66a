"""Commands on jobs of many ranks keep the ranks out of the command's process; small
local jobs load and stay in it."""

from __future__ import annotations

from pathlib import Path

import pytest

import hta.job.load as loading
from hta.commands.args_and_output import OUT_OF_MEMORY_FILES, in_memory_for
from hta.job.distributed import DistributedJob
from hta.model.trace import Trace


def _job(tmp_path: Path, files: int) -> Path:
    """A generated job of ``files`` small ranks."""
    from hta.synthetic.writer import generate_job

    generate_job(tmp_path, ranks=files, steps=2, kernels_per_step=20)
    return tmp_path


@pytest.fixture()
def no_small_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job counts as big (the generated ones here are a few kB)."""
    monkeypatch.setattr(loading, "SMALL_JOB_BYTES", 0)


def test_many_files_stay_out_of_memory(tmp_path: Path, no_small_jobs: None) -> None:
    assert in_memory_for(str(_job(tmp_path, OUT_OF_MEMORY_FILES))) is False


def test_a_small_job_loads_here(tmp_path: Path) -> None:
    """A few MB in all: decoded in this process one file after the other, kept in memory,
    the same tables as through worker processes."""
    from hta.trace_analysis import TraceAnalysis

    folder = _job(tmp_path, 3)
    assert loading.small_local_job([str(p) for p in folder.glob("*.json*")])
    assert in_memory_for(str(folder)) is None
    here = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    assert isinstance(here.t, Trace)
    workers = TraceAnalysis(trace_dir=folder, cache=False, progress=False, in_memory=False)
    assert isinstance(workers.t, DistributedJob)
    for rank in here.ranks:
        assert here.t.rank(rank).events.equals(workers.t.rank(rank).events)
    assert not loading.small_local_job(["s3://bucket/rank-0.json"])


def test_few_files_let_the_loader_decide(tmp_path: Path) -> None:
    assert in_memory_for(str(_job(tmp_path, OUT_OF_MEMORY_FILES - 1))) is None
    assert in_memory_for(str(tmp_path / "missing")) is None


def test_summary_of_a_big_job_matches_in_memory(tmp_path: Path, no_small_jobs: None) -> None:
    """The same tables either way: the command only moves where the ranks are."""
    import argparse

    from hta.commands.args_and_output import load
    from hta.report.overview import job_overview

    folder = _job(tmp_path, OUT_OF_MEMORY_FILES)
    args = argparse.Namespace(trace_dir=str(folder), no_cache=True, strict=False, quiet=True)
    lazy = load(args)
    assert isinstance(lazy.t, DistributedJob)
    from hta.trace_analysis import TraceAnalysis

    eager = TraceAnalysis(trace_dir=folder, cache=False, progress=False, in_memory=True)
    assert isinstance(eager.t, Trace)
    got, want = job_overview(lazy.t), job_overview(eager.t)
    assert got.ranks.equals(want.ranks) and got.top_kernels.equals(want.top_kernels)
    assert lazy.t.resident_ranks() == []
    lazy.close()
