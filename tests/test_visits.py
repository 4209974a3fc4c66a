"""Several per-rank analyses in one visit of each rank (hta.model.runner.run), the values
they share there (hta.model.derived), and the summary built on both."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from hta.analysis.findings import analyse
from hta.analysis.findings.engine import findings_plan
from hta.analysis.summary import rank_summary
from hta.job.distributed import DistributedJob
from hta.model import derived as derived_module
from hta.model.derived import KEPT_RANKS, derived
from hta.model.runner import RankWork, run, run_one
from hta.model.selection import Selection, resolve
from hta.model.trace import RankTrace, Trace
from hta.report.answers import job_answers
from hta.report.overview import job_overview, overview_plan
from hta.trace_analysis import TraceAnalysis

SYNTHETIC = ROOT / "sample_traces" / "synthetic_4rank"


def _analyzer(in_memory: bool) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=SYNTHETIC, cache=False, progress=False,
                         in_memory=in_memory)


def _rank(n: int = 5) -> RankTrace:
    events = pd.DataFrame({"ts": np.arange(n, dtype=np.int64)})
    return RankTrace(rank=0, events=events, symbols=[], tables={}, meta={})


# -- derived ------------------------------------------------------------------------------
def test_derived_computes_once_per_events_table() -> None:
    derived_module.forget()
    rt = _rank()
    calls = []

    def compute() -> pd.DataFrame:
        calls.append(1)
        return pd.DataFrame({"x": [1, 2]})

    first = derived(rt, "k", compute)
    first.loc[0, "x"] = 99  # the caller's copy: the kept value is unchanged
    assert derived(rt, "k", compute)["x"].tolist() == [1, 2]
    assert len(calls) == 1
    assert derived(rt, ("k", 2), compute) is not None and len(calls) == 2  # another key
    rt.events = rt.events.iloc[:2].copy()  # a filtered rank: computed again
    derived(rt, "k", compute)
    assert len(calls) == 3


def test_derived_keeps_one_memo_a_thread() -> None:
    """A Dask worker runs several ranks at once in threads: each thread keeps its own
    ranks, so one never evicts (or races on) another's."""
    import threading

    derived_module.forget()
    rt = _rank()
    calls: list[str] = []
    derived(rt, "k", lambda: calls.append("main"))
    worker = threading.Thread(target=lambda: derived(rt, "k", lambda: calls.append("thread")))
    worker.start()
    worker.join()
    derived(rt, "k", lambda: calls.append("main again"))
    assert calls == ["main", "thread"]


def test_derived_follows_changes_the_model_makes_in_place() -> None:
    """Reclassifying a rank (new kind rules) changes its ``kind`` column in place: what
    was derived from it is computed again."""
    from hta.model.rules import Rule, RuleSet

    derived_module.forget()
    rt = _analyzer(True).t.rank(0)
    kinds = lambda: rt.events["kind"].value_counts().to_dict()  # noqa: E731
    before = derived(rt, "kinds", kinds)
    name = rt.symbols[int(rt.events.loc[rt.events["kind"] == "computation", "name"].iloc[0])]
    rt.classify(RuleSet((Rule("communication", name=re.escape(name)),)))
    after = derived(rt, "kinds", kinds)
    assert after != before and after == kinds()


def test_derived_keeps_few_ranks_and_read_only_arrays() -> None:
    derived_module.forget()
    ranks = [_rank() for _ in range(KEPT_RANKS + 3)]
    for rt in ranks:
        arr = derived(rt, "a", lambda: np.arange(3))
        with pytest.raises(ValueError):
            arr[0] = 5
    assert len(derived_module._entries()) == KEPT_RANKS
    got = derived(ranks[0], "t", lambda: ({"a": np.zeros(2)}, pd.DataFrame({"y": [1]})))
    assert not got[0]["a"].flags.writeable and list(got[1]["y"]) == [1]


def test_derived_keeps_small_values_of_every_rank_within_its_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a second pass over the ranks (the findings' job rules, then their rank rules) reuses
    # the small values; large ones are computed again; the budget bounds what is kept
    derived_module.forget()
    ranks = [_rank() for _ in range(KEPT_RANKS + 3)]
    calls: list[str] = []

    def small() -> np.ndarray:
        calls.append("small")
        return np.zeros(4)

    def large() -> np.ndarray:
        calls.append("large")
        return np.zeros(derived_module.SMALL_BYTES // 8 + 1)

    for _ in range(2):
        for rt in ranks:
            derived(rt, "small", small)
            derived(rt, "large", large)
    assert calls.count("small") == len(ranks) and calls.count("large") == 2 * len(ranks)
    # a budget of two small values keeps the two ranks visited last
    derived_module.forget()
    monkeypatch.setattr(derived_module, "SMALL_BUDGET", 2 * 32)
    for rt in ranks:
        derived(rt, "small", small)
    assert len(derived_module._small()[0]) == 2 and derived_module._small()[1][0] == 64
    # a rank changed in place is not served its old small value
    calls.clear()
    rt = ranks[-1]
    rt.generation += 1
    derived(rt, "small", small)
    assert calls == ["small"]


def test_derived_values_marked_not_small_are_neither_kept_nor_carried() -> None:
    # small=False (a side table's columns, steps on the way to a rank's tables): kept for
    # the ranks being visited only, so they leave the budget to what later visits read
    derived_module.forget()
    ranks = [_rank() for _ in range(KEPT_RANKS + 2)]
    calls: list[str] = []

    def step() -> np.ndarray:
        calls.append("step")
        return np.zeros(4)

    for _ in range(2):
        for rt in ranks:
            derived(rt, "step", step, small=False)
            derived(rt, "kept", lambda: np.ones(2))
    assert calls.count("step") == 2 * len(ranks)
    assert [list(derived_module.small_values(rt)) for rt in ranks] == [["kept"]] * len(ranks)
    calls.clear()
    derived(ranks[-1], "step", step, small=False)  # the rank visited last: still kept
    assert calls == []


# -- visits ---------------------------------------------------------------------------------
def visited(trace: Trace, selection: Selection, log: list[int]) -> pd.DataFrame:
    """A per-rank analysis that records which ranks it saw in one call."""
    selected = trace.selected_ranks(selection.rank_list)
    log.append(len(selected))
    return pd.DataFrame({"rank": selected, "n": [len(trace.rank(r).events) for r in selected]})


def test_run_equals_one_work_at_a_time_in_memory() -> None:
    trace = _analyzer(True).t
    log: list[int] = []
    plans = [RankWork.of_trace(rank_summary), RankWork.of_trace(visited, (log,)),
             RankWork.of_trace(rank_summary, finish=len)]
    together = run(trace, plans, Selection.of([1, 3]))
    alone = [run_one(trace, plans[0], Selection.of([1, 3]))]
    pd.testing.assert_frame_equal(together[0], alone[0])
    assert together[1]["rank"].tolist() == [1, 3]
    assert log == [1, 1]  # one rank at a time: what a rank's analyses share stays warm
    assert together[2] == 2
    # no rank selected: each plan's own empty answer
    empty = run(trace, plans[:1], Selection.of([]))
    pd.testing.assert_frame_equal(empty[0], run_one(trace, plans[0], Selection.of([])))


def test_run_reads_each_rank_once_on_a_job_kept_out_of_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    analyzer = _analyzer(False)
    job = analyzer.t
    assert isinstance(job, DistributedJob)
    selection = resolve(Selection.of(None, None), job)
    calls = []
    original = job.map_ranks

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(args[0].__name__)
        return original(*args, **kwargs)

    want_findings = analyse(job)
    want_overview = job_overview(job)
    plans = [overview_plan(job, selection), findings_plan(job)]
    monkeypatch.setattr(job, "map_ranks", counting)
    overview, found = run(job, plans, Selection.of(list(selection.ranks)))
    assert calls == ["visit"]  # one pass over the ranks for both analyses
    pd.testing.assert_frame_equal(overview.ranks, want_overview.ranks)
    pd.testing.assert_frame_equal(overview.top_kernels, want_overview.top_kernels)
    pd.testing.assert_frame_equal(found.findings, want_findings.findings)
    pd.testing.assert_frame_equal(found.coverage, want_findings.coverage)


@pytest.mark.parametrize("in_memory", [True, False], ids=["in_memory", "kept_out"])
def test_summary_answers_equal_the_trace_analysis_methods(in_memory: bool) -> None:
    analyzer = _analyzer(in_memory)
    got = job_answers(analyzer, Selection.of(None, None), 10)
    pd.testing.assert_frame_equal(got.findings.findings, analyzer.get_findings())
    pd.testing.assert_frame_equal(got.findings.coverage, analyzer.get_findings_coverage())
    pd.testing.assert_frame_equal(got.findings.unexplained, analyzer.get_unexplained_time())
    pd.testing.assert_frame_equal(got.unclassified, analyzer.get_unclassified_kernels(),
                                  check_dtype=False)
    pd.testing.assert_frame_equal(got.op_summary, analyzer.get_op_performance_summary())
    pd.testing.assert_frame_equal(got.category_time, analyzer.get_category_time())
    pd.testing.assert_frame_equal(got.rank_summary, analyzer.get_rank_summary())
    want = job_overview(analyzer.t, top=10)
    pd.testing.assert_frame_equal(got.overview.ranks, want.ranks)
    pd.testing.assert_frame_equal(got.overview.spread, want.spread)
    assert got.overview.job == want.job
    # iterations narrow every answer alike
    steps = [int(s) for s in analyzer.t.rank(0).events["iteration"].unique() if s > 0][:1]
    narrowed = job_answers(analyzer, Selection.of(None, steps), 5)
    pd.testing.assert_frame_equal(narrowed.findings.findings,
                                  analyzer.get_findings(iterations=steps))



def failing(trace: Trace, selection: Selection) -> pd.DataFrame:
    """A per-rank analysis that fails on rank 2."""
    selected = trace.selected_ranks(selection.rank_list)
    if 2 in selected:
        raise ValueError("rank 2 is broken")
    return pd.DataFrame({"rank": selected})


def test_a_failing_analysis_fails_alone() -> None:
    trace = _analyzer(True).t
    plans = [RankWork.of_trace(failing), RankWork.of_trace(rank_summary)]
    with pytest.raises(ValueError, match="rank 2 is broken"):
        run(trace, plans)
    broken, summary = run(trace, plans, errors="return")
    assert isinstance(broken, ValueError)
    assert summary["rank"].tolist() == trace.get_ranks()  # the other analysis answered
    with pytest.raises(ValueError, match="errors"):
        run(trace, plans, errors="ignore")


def test_report_reads_each_rank_once_for_overview_findings_and_hardware(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hta.report import builder

    analyzer = _analyzer(False)
    job = analyzer.t
    visits: list[set[str]] = []  # per visit of the ranks, the works run on each
    original = job.map_ranks

    def counting(fn, ranks, args, *rest, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        visits.append({getattr(c[0], "fn", c[0]).__name__ for c in args[0]}
                      if fn.__name__ == "visit" else {fn.__name__})
        return original(fn, ranks, args, *rest, **kwargs)

    monkeypatch.setattr(job, "map_ranks", counting)
    ctx = builder._context(analyzer, None, None, None)
    for sid, _title, _intro, build in builder.SECTIONS:
        if sid in ("findings", "overview", "hardware"):
            section = builder.Section(sid, "", "")
            build(ctx, section)
            assert not section.error
    shared = {"overview_of_rank", "analysis_of_rank", "category_time_of_rank",
              "op_summary_of_rank"}
    together = [v for v in visits if v & shared]
    assert len(together) == 1 and shared <= together[0]  # one visit for all four
    pd.testing.assert_frame_equal(ctx.answers.findings.findings, analyzer.get_findings())
    pd.testing.assert_frame_equal(ctx.answers.category_time, analyzer.get_category_time())


def test_report_sections_on_steps_equal_the_methods() -> None:
    """The categories and operators of a step selection, restricted where the rank is."""
    from hta.report import builder

    analyzer = _analyzer(True)
    steps = sorted(int(s) for s in analyzer.t.rank(0).events["iteration"].unique() if s > 0)
    ctx = builder._context(analyzer, None, steps[:1], None)
    from hta.analysis.perf.summary import category_time
    from hta.model.selection import Selection, restrict

    want = category_time(restrict(analyzer.t, Selection.of(iterations=steps[:1])),
                         rules=analyzer.rules)
    pd.testing.assert_frame_equal(ctx.answers.category_time, want)
    full = category_time(analyzer.t, rules=analyzer.rules)
    assert float(ctx.answers.category_time["kernel_time(us)"].sum()) < float(
        full["kernel_time(us)"].sum())
