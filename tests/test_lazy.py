"""Ranks kept out of memory (DistributedJob) with the local executor, and the executors.

A distributed job must answer exactly as the in-memory one (every per-rank analysis runs
through the runner; tests/test_distributed_job.py goes over each facade method); it holds
at most its LRU budget of ranks; worker processes that die lose only their own rank.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import shared_trace
from scale_cases import assert_same_answers, complete_events_in_json, make_job

import hta.job.executors as parallel_module
import hta.job.load as loader_module
from hta.analysis.summary import rank_summary
from hta.job.distributed import DistributedJob
from hta.job.executors import (
    FAULT_ENV,
    DaskExecutor,
    LocalExecutor,
    SerialExecutor,
    WorkerDiedError,
    resolve_executor,
)
from hta.job.rank_load import rank_nbytes
from hta.model.rules import KINDS
from hta.model.runner import RankWork, run, run_one
from hta.model.selection import Selection
from hta.model.trace import RankTrace, Trace
from hta.trace_analysis import TraceAnalysis


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("job8")
    make_job(folder)
    return folder


@pytest.fixture(scope="module")
def eager_job(job: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=job, cache=False, progress=False)


def _lazy(folder: Path, **kwargs: Any) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False, in_memory=False,
                         **kwargs)


# -- same answers --------------------------------------------------------------------------


def test_lazy_trace_filter_answers_like_in_memory() -> None:
    folder = shared_trace("trace_filter")
    eager = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    lazy = _lazy(folder)
    assert isinstance(lazy.t, DistributedJob) and not isinstance(eager.t, DistributedJob)
    assert_same_answers(eager, lazy)
    # independent check: events per rank counted from the JSON
    for path in sorted(folder.glob("*.json.gz")):
        rank = int(path.name.split("-")[1].split(".")[0])
        assert lazy.get_rank_summary(ranks=[rank])["events"].item() == \
            complete_events_in_json(path)
    # the breakdowns run per rank where the rank is, and agree
    pd.testing.assert_frame_equal(lazy.get_idle_time_breakdown(visualize=False)[0],
                                  eager.get_idle_time_breakdown(visualize=False)[0])
    pd.testing.assert_frame_equal(lazy.get_gpu_kernel_breakdown(visualize=False)[1],
                                  eager.get_gpu_kernel_breakdown(visualize=False)[1])
    lazy.close()


def test_lazy_generated_job_answers_like_in_memory(job: Path, eager_job: TraceAnalysis) -> None:
    lazy = _lazy(job, max_workers=2)
    assert lazy.ranks == list(range(8))
    assert_same_answers(eager_job, lazy, ranks=[0, 7])
    lazy.close()


def test_lazy_drops_the_last_step_like_in_memory(job: Path) -> None:
    eager = TraceAnalysis(trace_dir=job, cache=False, progress=False,
                          include_last_profiler_step=False)
    lazy = _lazy(job, include_last_profiler_step=False)
    assert set(lazy.t.get_trace(0)["iteration"]) == set(eager.t.get_trace(0)["iteration"])
    assert_same_answers(eager, lazy, ranks=[3])
    lazy.close()


def _describe(rt: RankTrace) -> tuple[str, int, int]:
    return type(rt).__name__, rt.rank, len(rt.events)


def test_a_rank_read_from_a_distributed_job_is_a_private_copy(job: Path) -> None:
    lazy = _lazy(job)
    assert not isinstance(lazy.t, Trace)  # composition: a job holding handles, not a Trace
    before = len(lazy.t.get_trace(0))
    changed = lazy.t.rank(0)
    changed.filter_rows(np.arange(len(changed.events)) < 3)  # changes only this copy
    assert len(changed.events) == 3 and len(lazy.t.get_trace(0)) == before
    assert not hasattr(lazy.t, "add")  # ranks come from loading only
    with pytest.raises(KeyError, match="rank 42 is not loaded"):
        lazy.t.get_trace(42)
    with pytest.raises(KeyError, match="rank 42 is not loaded"):
        lazy.t.meta(42)
    assert lazy.t.meta(3) == lazy.t.rank(3).meta
    # a rank read here is a plain rank, and travels to a process pool as one
    sent = LocalExecutor(2).map(_describe, [lazy.t.rank(3), lazy.t.rank(4)], progress=False)
    assert [o.value for o in sent] == [("RankTrace", 3, len(lazy.t.get_trace(3))),
                                       ("RankTrace", 4, len(lazy.t.get_trace(4)))]
    in_memory = lazy.t.to_memory()
    assert type(in_memory) is Trace and in_memory.get_ranks() == lazy.ranks
    pd.testing.assert_frame_equal(in_memory.get_trace(5), lazy.t.get_trace(5))
    lazy.close()


# -- bounded memory -----------------------------------------------------------------------


def test_lazy_trace_holds_at_most_its_budget(job: Path, eager_job: TraceAnalysis) -> None:
    lazy = _lazy(job)
    one_rank = max(h.nbytes for h in lazy.t.handles.values())
    lazy.t._resident.budget = one_rank  # room for one rank
    seen = [len(rt.events) for rt in lazy.t]  # every rank read in turn
    assert seen == [len(eager_job.t.get_trace(r)) for r in eager_job.ranks]
    assert lazy.t.resident_ranks() == [7]
    events = lazy.t.get_all_traces()
    assert sorted(events) == lazy.ranks and len(events) == 8
    pd.testing.assert_frame_equal(events[2], eager_job.t.get_trace(2))
    assert lazy.t.resident_ranks() == [2]
    lazy.close()


def test_a_rank_s_events_are_counted_without_reading_it(job: Path) -> None:
    # as loaded (before the transforms: here none, the last step kept)
    eager = TraceAnalysis(trace_dir=job, cache=False, progress=False,
                          include_last_profiler_step=True)
    lazy = _lazy(job, include_last_profiler_step=True)
    counts = [lazy.t.rank_events(r) for r in lazy.ranks]
    assert lazy.t.resident_ranks() == []
    assert counts == [eager.t.rank_events(r) for r in eager.ranks] == \
        [len(eager.t.get_trace(r)) for r in eager.ranks]
    lazy.close()


def test_the_replay_decides_to_build_ahead_without_reading_a_rank(job: Path) -> None:
    # hta summary on a job of more events than it replays here (max_events) read every
    # rank into this process only to count its events
    from hta.analysis.whatif.replayer import Replay

    lazy = _lazy(job)
    assert not Replay(lazy.t).build_ahead(max_events=0)
    assert lazy.t.resident_ranks() == []
    lazy.close()


def test_in_memory_is_chosen_from_the_ranks_size(job: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # the rule for jobs over SMALL_JOB_BYTES (smaller ones load in this process)
    monkeypatch.setattr(loader_module, "SMALL_JOB_BYTES", 0)
    monkeypatch.setattr(loader_module, "available_memory", lambda: 10 << 30)
    assert not isinstance(TraceAnalysis(trace_dir=job, cache=False, progress=False).t,
                          DistributedJob)
    monkeypatch.setattr(loader_module, "available_memory", lambda: 1000)
    small = TraceAnalysis(trace_dir=job, cache=False, progress=False)
    assert isinstance(small.t, DistributedJob)
    small.close()
    forced = TraceAnalysis(trace_dir=job, cache=False, progress=False, in_memory=True)
    assert not isinstance(forced.t, DistributedJob)


def test_rank_nbytes_counts_every_column_and_symbol() -> None:
    events = pd.DataFrame({
        "ts": np.arange(10, dtype=np.int64), "name": np.zeros(10, dtype=np.int32),
        "kind": pd.Categorical.from_codes(np.zeros(10, dtype=np.int8), categories=KINDS),
    })
    rt = RankTrace(rank=0, events=events, symbols=["ab"],
                   tables={"flows": pd.DataFrame({"id": np.zeros(4, dtype=np.int64)})},
                   meta={}, unclassified=np.zeros(10, dtype=bool))
    categories = events["kind"].memory_usage(index=False, deep=False) - 10
    # 10 x (8 + 4 + 1) event bytes, the categories, 4 x 8 flow ids, "ab" (2 + 49 + 8), 10 flags
    assert rank_nbytes(rt) == 130 + categories + 32 + 59 + 10


# -- temporary entries -----------------------------------------------------------------------


def test_temporary_entries_live_until_close(job: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    lazy = _lazy(job)
    entries = [Path(h.entry) for h in lazy.t.handles.values()]
    assert all(h.temporary for h in lazy.t.handles.values())
    assert all(e.is_dir() and e.is_relative_to(tmp_path) for e in entries)
    lazy.close()
    assert not any(e.exists() for e in entries)
    assert list(tmp_path.iterdir()) == []


def test_a_lost_entry_is_loaded_again(job: Path, eager_job: TraceAnalysis,
                                      caplog: pytest.LogCaptureFixture) -> None:
    import shutil

    lazy = _lazy(job, max_workers=1)  # per-rank work in this process: its log is seen
    shutil.rmtree(lazy.t.handles[3].entry)
    with caplog.at_level(logging.WARNING, logger="hta.job.distributed"):
        pd.testing.assert_frame_equal(lazy.get_rank_summary(), eager_job.get_rank_summary())
    assert "rank 3: its loaded copy" in caplog.text and "loading" in caplog.text
    lazy.close()


def test_cached_lazy_load_reads_the_cache(job: Path, tmp_path: Path,
                                          eager_job: TraceAnalysis) -> None:
    first = TraceAnalysis(trace_dir=job, cache_dir=tmp_path, progress=False, in_memory=False)
    assert not any(h.temporary for h in first.t.handles.values())
    first.close()
    assert len(list(tmp_path.iterdir())) == 8  # close() keeps cache entries
    again = TraceAnalysis(trace_dir=job, cache_dir=tmp_path, progress=False, in_memory=False)
    assert_same_answers(eager_job, again, ranks=[1])


# -- worker death ---------------------------------------------------------------------------


def test_a_worker_that_dies_while_loading_loses_only_its_rank(
    job: Path, eager_job: TraceAnalysis, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(FAULT_ENV, "rank-3.")
    with caplog.at_level(logging.WARNING):
        analyzer = TraceAnalysis(trace_dir=job, cache=False, progress=False, max_workers=2)
    assert analyzer.ranks == [0, 1, 2, 4, 5, 6, 7]
    [(path, reason)] = analyzer.skipped.items()
    assert path == str(job / "rank-3.json.gz")
    assert "rank-3.json.gz: the worker process running it died" in reason
    expected = eager_job.get_rank_summary()
    pd.testing.assert_frame_equal(analyzer.get_rank_summary(),
                                  expected[expected["rank"] != 3].reset_index(drop=True))


def test_a_worker_that_dies_in_an_analysis_loses_only_its_rank(
    job: Path, eager_job: TraceAnalysis, monkeypatch: pytest.MonkeyPatch
) -> None:
    lazy = _lazy(job, max_workers=2)
    monkeypatch.setenv(FAULT_ENV, "rank-6.")
    got = lazy.get_temporal_breakdown(visualize=False)
    expected = eager_job.get_temporal_breakdown(visualize=False)
    pd.testing.assert_frame_equal(got, expected[expected["rank"] != 6].reset_index(drop=True))
    reason = lazy.skipped[str(job / "rank-6.json.gz")]
    assert reason.startswith("rank 6 left out of Temporal breakdown: rank-6.json.gz: the worker")
    monkeypatch.delenv(FAULT_ENV)
    pd.testing.assert_frame_equal(lazy.get_temporal_breakdown(visualize=False), expected)
    lazy.close()


# -- the runner on a lazy job ---------------------------------------------------------------


def _count_rows(trace: Trace, selection: Selection, scale: int = 1, *, offset: int = 0
                ) -> pd.DataFrame:
    ranks = _ranks(trace, selection)
    return pd.DataFrame({"rank": [rt.rank for rt in ranks],
                         "n": [scale * len(rt.events) + offset for rt in ranks]})


def _ranks(trace: Trace, selection: Selection) -> list[RankTrace]:
    return [trace.rank(r) for r in trace.selected_ranks(selection.rank_list)]


def _fails(trace: Trace, selection: Selection) -> pd.DataFrame:
    raise ValueError("iteration 9 does not exist")


def test_the_runner_passes_arguments_and_keeps_rank_order(job: Path,
                                                           eager_job: TraceAnalysis) -> None:
    lazy = _lazy(job, max_workers=2)
    count = RankWork.of_trace(_count_rows, (2,), {"offset": 1})
    got = run_one(lazy.t, count, Selection.of([5, 1, 3]))
    expected = run_one(eager_job.t, count, Selection.of([1, 3, 5]))
    pd.testing.assert_frame_equal(got, expected)
    assert got["n"].tolist() == [2 * len(eager_job.t.get_trace(r)) + 1 for r in (1, 3, 5)]
    assert run_one(lazy.t, RankWork.of_trace(_count_rows), Selection.of(4))["rank"].tolist() == [4]
    with pytest.raises(ValueError, match="iteration 9 does not exist"):
        run_one(lazy.t, RankWork.of_trace(_fails))
    with pytest.raises(KeyError, match="rank 9 is not loaded"):
        run_one(lazy.t, RankWork.of_trace(rank_summary), Selection.of([9]))
    lazy.close()


def test_the_runner_on_an_in_memory_trace(eager_job: TraceAnalysis) -> None:
    calls = []

    def record(trace: Trace, selection: Selection) -> pd.DataFrame:
        calls.append((selection.rank_list, trace.get_ranks()))
        return rank_summary(trace, selection)

    got = run_one(eager_job.t, RankWork.of_trace(record), Selection.of([2, 0]))
    assert calls == [([0, 2], eager_job.t.get_ranks())]  # one work: one call over them
    pd.testing.assert_frame_equal(got, rank_summary(eager_job.t, Selection.of([0, 2])))
    calls.clear()
    run(eager_job.t, [RankWork.of_trace(record), RankWork.of_trace(record)], Selection.of([2, 0]))
    assert calls == [([0], [0]), ([0], [0]), ([2], [2]), ([2], [2])]  # rank by rank


# -- executors -----------------------------------------------------------------------------


def _square(x: int) -> int:
    if x == 3:
        raise ValueError("three is bad")
    return x * x


def test_executors_keep_order_and_report_each_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    bars: list[list[int]] = []

    class Bar:
        def __init__(self) -> None:
            self.updates: list[int] = []
            bars.append(self.updates)

        def update(self, n: int = 1) -> None:
            self.updates.append(n)

    from contextlib import contextmanager

    @contextmanager
    def fake_bar(total: int, description: str = "", *, enabled: bool = True) -> Any:
        yield Bar()

    monkeypatch.setattr(parallel_module, "progress_bar", fake_bar)
    for executor in (SerialExecutor(), LocalExecutor(2)):
        outcomes = executor.map(_square, list(range(6)), description="squares")
        assert [o.value for o in outcomes] == [0, 1, 4, None, 16, 25]
        assert [o.ok for o in outcomes] == [True, True, True, False, True, True]
        assert str(outcomes[3].error) == "three is bad"
    assert bars == [[1] * 6, [1] * 6]  # one tick per item with either executor


def _identity(x: int) -> int:
    return x


def test_local_executor_survives_a_dying_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "item 2")
    outcomes = LocalExecutor(2).map(_identity, list(range(5)), progress=False)
    assert [o.value for o in outcomes] == [0, 1, None, 3, 4]
    assert isinstance(outcomes[2].error, WorkerDiedError)
    assert str(outcomes[2].error).startswith("item 2: the worker process running it died")


def test_resolve_executor_checks_its_arguments() -> None:
    assert isinstance(resolve_executor(), LocalExecutor)
    serial = SerialExecutor()
    assert resolve_executor(serial) is serial
    with pytest.raises(ValueError, match="either executor= or client="):
        resolve_executor(serial, client=object())
    pytest.importorskip("distributed")
    with pytest.raises(TypeError, match="must be a distributed.Client, got object"):
        resolve_executor(client=object())
    assert DaskExecutor.remote and not LocalExecutor.remote
