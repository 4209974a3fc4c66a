"""The one runner of per-rank work (hta.model.runner): a visit of each rank, works in
order on it, restricted to the selected steps where the rank lives, a rank column, one
failure policy; the same answers in memory and on a job kept out of memory."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from hta.analysis.summary import rank_summary
from hta.job.distributed import DistributedJob
from hta.model.runner import RankWork, restrict_rank, run, run_one
from hta.model.selection import Selection
from hta.model.trace import RankTrace, Trace
from hta.trace_analysis import TraceAnalysis

SYNTHETIC = ROOT / "sample_traces" / "synthetic_4rank"


def _analyzer(in_memory: bool) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=SYNTHETIC, cache=False, progress=False,
                         in_memory=in_memory)


def events_per_step(rt: RankTrace, scale: int = 1, *, offset: int = 0) -> pd.DataFrame:
    """A per-rank work on one rank: no rank column (the runner adds it)."""
    counts = rt.events["iteration"].value_counts().sort_index()
    return pd.DataFrame({"step": counts.index.to_numpy(np.int64),
                         "n": scale * counts.to_numpy(np.int64) + offset})


def broken_on_two(rt: RankTrace) -> pd.DataFrame:
    if rt.rank == 2:
        raise ValueError("rank 2 is broken")
    return pd.DataFrame({"x": [1]})


def test_a_work_runs_on_each_rank_with_its_arguments_and_gets_a_rank_column() -> None:
    trace = _analyzer(True).t
    got = run_one(trace, RankWork(events_per_step, (2,), {"offset": 1}), Selection.of([3, 1]))
    assert list(got.columns) == ["rank", "step", "n"]
    assert got["rank"].unique().tolist() == [1, 3]
    one = trace.rank(1).events["iteration"].value_counts().sort_index()
    assert got[got["rank"] == 1]["n"].tolist() == (2 * one.to_numpy() + 1).tolist()
    empty = run_one(trace, RankWork(events_per_step), Selection.of([]))
    assert list(empty.columns) == ["rank"] and not len(empty)
    with pytest.raises(KeyError, match="rank 9 is not loaded"):
        run_one(trace, RankWork(events_per_step), Selection.of([9]))


def test_works_on_a_trace_answer_as_on_the_whole_trace() -> None:
    trace = _analyzer(True).t
    pd.testing.assert_frame_equal(run_one(trace, RankWork.of_trace(rank_summary)),
                                  rank_summary(trace))
    pd.testing.assert_frame_equal(run_one(trace, RankWork.of_trace(rank_summary), Selection.of([])),
                                  rank_summary(trace, Selection.of([])))


def test_iterations_restrict_each_rank_where_it_lives() -> None:
    analyzer = _analyzer(False)
    job = analyzer.t
    steps = sorted(int(s) for s in job.rank(0).events["iteration"].unique() if s > 0)[:2]
    got = run_one(job, RankWork(events_per_step), Selection.of(iterations=steps))
    assert sorted(got["step"].unique().tolist()) == steps
    on_one = RankWork(events_per_step).on_steps(steps[:1])
    whole, narrowed = run(job, [RankWork(events_per_step), on_one])
    assert set(narrowed["step"]) == {steps[0]} and len(whole) > len(narrowed)
    kept = restrict_rank(job.rank(0), steps)
    assert set(kept.events["iteration"]) == set(steps)
    analyzer.t.close()


def test_one_visit_of_each_rank_for_several_works(monkeypatch: pytest.MonkeyPatch) -> None:
    analyzer = _analyzer(False)
    job = analyzer.t
    assert isinstance(job, DistributedJob)
    calls: list[str] = []
    original = job.map_ranks

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(args[0].__name__)
        return original(*args, **kwargs)

    want = [run_one(_analyzer(True).t, RankWork.of_trace(rank_summary)),
            run_one(_analyzer(True).t, RankWork(events_per_step))]
    monkeypatch.setattr(job, "map_ranks", counting)
    got = run(job, [RankWork.of_trace(rank_summary), RankWork(events_per_step)])
    assert calls == ["visit"]
    for g, w in zip(got, want):
        pd.testing.assert_frame_equal(g, w)


def test_one_failure_policy() -> None:
    trace = _analyzer(True).t
    works = [RankWork(broken_on_two), RankWork(events_per_step, finish=len)]
    with pytest.raises(ValueError, match="rank 2 is broken"):
        run(trace, works)
    broken, count = run(trace, works, errors="return")
    assert isinstance(broken, ValueError) and count > 0  # the other work answered
    failing_finish = RankWork(events_per_step, finish=lambda f: 1 / 0)
    assert isinstance(run(trace, [failing_finish], errors="return")[0], ZeroDivisionError)
    with pytest.raises(ValueError, match="errors"):
        run(trace, works, errors="ignore")


def test_a_work_travels_to_a_worker() -> None:
    work = RankWork.of_trace(rank_summary, description="Rank summary").on_steps([5, 4])
    again = pickle.loads(pickle.dumps(work))
    assert again == work and again.steps == (4, 5)


def test_a_tuple_of_tables_is_concatenated_table_by_table() -> None:
    trace = _analyzer(True).t

    def pair(t: Trace, selection: Selection) -> tuple[pd.DataFrame, pd.DataFrame]:
        ranks = t.selected_ranks(selection.rank_list)
        return (pd.DataFrame({"rank": ranks}), pd.DataFrame({"r2": [2 * r for r in ranks]}))

    first, second = run_one(trace, RankWork.of_trace(pair))
    assert first["rank"].tolist() == trace.get_ranks()
    assert second["r2"].tolist() == [2 * r for r in trace.get_ranks()]
