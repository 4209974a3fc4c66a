"""Ranks and steps travel as one object: every analysis entry point, the runner and the
findings' job rules take a :class:`~hta.model.selection.Selection`; only per-rank
functions take a step list (issue: 98 signatures spelled ``Iterable[int] | int | None``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pandas as pd
import pytest
from conftest import SAMPLE_TRACES

import hta
import hta.analysis
from hta.analysis.findings.catalog import default_rules
from hta.analysis.summary import rank_summary
from hta.analysis.temporal import temporal_breakdown
from hta.model.declared import WHOLE, Analysis, check_whole_ranks
from hta.model.runner import RankWork, restrict_rank, run, run_one
from hta.model.selection import ALL, EVERYTHING, FIRST, Selection, resolve
from hta.model.trace import RankTrace, Trace
from hta.trace_analysis import TraceAnalysis

SYNTHETIC = SAMPLE_TRACES / "synthetic_4rank"

#: Functions whose ``ranks`` parameter is not a selection of the job's ranks, and why.
NOT_A_SELECTION = {
    # The what-if replay's per-rank objects (graphs, kept replays), not rank numbers.
    "hta.analysis.whatif.coupled": {"coupled_predict", "coupled_critical_path", "solve",
                                    "_settled", "coupled_ranks", "of"},
    "hta.analysis.whatif.graph": {"job_graph", "_coupling", "_barriers"},
    # The diff's rule for its default step (FIRST when None), on ranks it resolved.
    "hta.analysis.diff.scope": {"resolve_iterations"},
    # A table of histograms labelled with the ranks they came from.
    "hta.analysis.launch": {"flag_counts"},
    # The serving summary's ``iterations`` is a table of server iterations.
    "hta.analysis.serving": {"iteration_summary"},
    # The ranks a finding names (a what-if change for them), the ranks whose device
    # names a diff compares, and the facts of a resolved overview: lists, not choices.
    "hta.analysis.whatif.findings": {"change_for"},
    "hta.analysis.diff.vendors": {"device_names"},
    "hta.report.overview": {"_job"},
    # A filter of one events table (a per-rank frame).
    "hta.analysis.select": {"select_iterations"},
    # The runner's far side: the rank numbers the transport hands it.
    "hta.model.runner": {"visit", "_visit", "_joined_visit", "_items"},
}


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(hta.analysis.__path__, "hta.analysis.")]
    return names + ["hta.model.runner", "hta.model.selection", "hta.report.overview"]


def _per_rank(fn: object) -> bool:
    """A per-rank function: its first parameter is one rank (or its number)."""
    first = next(iter(inspect.signature(fn).parameters.values()), None)
    return first is not None and first.annotation in ("RankTrace", "int", RankTrace, int)


def test_no_entry_point_takes_ranks_and_iterations_apart() -> None:
    offenders = []
    for name in _modules():
        module = importlib.import_module(name)
        allowed = NOT_A_SELECTION.get(name, set())
        for fname, fn in vars(module).items():
            if not inspect.isfunction(fn) or fn.__module__ != name or fname in allowed:
                continue
            params = inspect.signature(fn).parameters
            if "ranks" in params or ("iterations" in params and not _per_rank(fn)):
                offenders.append(f"{name}.{fname}")
    assert not offenders, offenders


@pytest.fixture(scope="module")
def trace() -> Trace:
    return TraceAnalysis(trace_dir=str(SYNTHETIC), cache=False, progress=False).t


def _steps_seen(rt: RankTrace) -> pd.DataFrame:
    return pd.DataFrame({"steps": [sorted(set(rt.events["iteration"].tolist()) - {-1})]})


def test_the_runner_restricts_to_the_selection(trace: Trace) -> None:
    got = run_one(trace, RankWork(_steps_seen), Selection.of([2, 0], [2]))
    assert got["rank"].tolist() == [0, 2] and got["steps"].tolist() == [[2], [2]]
    whole = run_one(trace, RankWork(_steps_seen), Selection.of(iterations=[2]).every_event())
    assert whole["rank"].tolist() == trace.get_ranks()
    assert all(len(s) > 1 for s in whole["steps"])
    default = run(trace, [RankWork(_steps_seen)])[0]
    pd.testing.assert_frame_equal(default, run_one(trace, RankWork(_steps_seen), EVERYTHING))


def test_an_unresolved_first_step_is_refused_with_what_to_do(trace: Trace) -> None:
    with pytest.raises(ValueError, match="resolve the selection"):
        run_one(trace, RankWork(_steps_seen), Selection.of(iterations=FIRST))
    resolved = resolve(Selection.of([1], FIRST), trace)
    assert resolved == Selection((1,), (1,))
    got = run_one(trace, RankWork(_steps_seen), resolved)
    assert got["steps"].tolist() == [[1]]


def test_a_function_on_a_trace_gets_the_selection_of_its_rank(trace: Trace) -> None:
    seen: list[Selection] = []

    def record(one: Trace, selection: Selection) -> pd.DataFrame:
        seen.append(selection)
        return rank_summary(one, selection)

    got = run_one(trace, RankWork.of_trace(record), Selection.of([3, 1], [2]))
    assert seen == [Selection((1,), ALL), Selection((3,), ALL)]
    steps_only = Trace({r: restrict_rank(trace.rank(r), [2]) for r in (1, 3)})
    pd.testing.assert_frame_equal(got, rank_summary(steps_only, Selection.of([1, 3])))


def test_facade_and_analysis_answer_alike(trace: Trace) -> None:
    analyzer = hta.load(str(SYNTHETIC), cache=False, progress=False)
    pd.testing.assert_frame_equal(
        analyzer.get_temporal_breakdown(ranks=[0, 1], iterations=hta.FIRST, visualize=False),
        temporal_breakdown(trace, Selection.of([0, 1], [1])))


def test_job_rules_take_the_selection(trace: Trace) -> None:
    job_rules = [r for r in default_rules() if r.scope == "job"]
    assert job_rules
    for rule in job_rules:
        params = list(inspect.signature(rule.check).parameters)
        assert params[:2] == ["trace", "selection"], (rule.id, params)
        assert isinstance(rule.check(trace, Selection.of([0, 1], [1])), list)


def _whole_rank_analyses() -> list[object]:
    """Every entry point that reads whole ranks: it calls ``check_whole_ranks``, or runs
    an analysis of its module declared ``steps=WHOLE``."""
    found = []
    for name in _modules():
        module = importlib.import_module(name)
        whole = [re.compile(rf"\b{n}\.run\(trace, selection") for n, v in vars(module).items()
                 if isinstance(v, Analysis) and v.steps == WHOLE]
        for fn in vars(module).values():
            if not (inspect.isfunction(fn) and fn.__module__ == name
                    and fn is not check_whole_ranks):
                continue
            source = inspect.getsource(fn)
            if "check_whole_ranks(selection" in source or any(w.search(source) for w in whole):
                found.append(fn)
    return found


def test_no_step_is_silently_ignored(trace: Trace) -> None:
    """An analysis that reads every event of its ranks refuses a selection with steps
    (it used to take ``ranks`` only), saying what to pass."""
    analyses = _whole_rank_analyses()
    assert len(analyses) >= 20
    for fn in analyses:
        params = inspect.signature(fn).parameters
        required = {p: None for p, v in list(params.items())[1:]
                    if v.default is inspect.Parameter.empty and p != "selection"}
        for steps in ([1], FIRST):
            with pytest.raises(ValueError, match="takes no steps"):
                fn(trace, selection=Selection.of(iterations=steps), **required)
