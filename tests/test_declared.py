"""Analyses declared once (hta.model.declared): the empty table follows from the
declared columns, each steps policy reaches the per-rank function as documented, and
every declared analysis of the package answers with its declared columns."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hta
from hta.model.declared import PER_STEP, WHOLE, Analysis, Columns
from hta.model.runner import run
from hta.model.selection import Selection
from hta.model.trace import RankTrace
from hta.trace_analysis import TraceAnalysis

SAMPLE = Path(__file__).resolve().parents[1] / "sample_traces" / "synthetic_4rank"


def test_columns_give_the_empty_table_with_their_dtypes() -> None:
    cols = Columns.of({"rank": "int64", "name": "object", "share": "float64", "ok": "bool"})
    empty = cols.empty()
    assert list(empty.columns) == ["rank", "name", "share", "ok"]
    assert [str(d) for d in empty.dtypes] == ["int64", "object", "float64", "bool"]
    assert len(empty) == 0 and isinstance(empty.index, pd.RangeIndex)
    assert Columns.typed(["a", "b"]).empty().dtypes.tolist() == [np.dtype(object)] * 2
    assert Columns((), ()).empty().shape == (0, 0)
    joined = Columns.typed(["a"], "int64") + Columns.typed(["b"])
    assert joined.names == ("a", "b") and joined.dtypes == ("int64", "object")


def _steps_seen(rt: RankTrace, steps: list[int] | None = None) -> pd.DataFrame:
    held = sorted(int(i) for i in np.unique(rt.events["iteration"]) if i > 0)
    return pd.DataFrame({"rank": [rt.rank], "arg": [steps], "held": [held]})


COLS = Columns.typed(["rank", "arg", "held"])


@pytest.fixture(scope="module")
def analyzer() -> TraceAnalysis:
    return TraceAnalysis(trace_dir=str(SAMPLE), cache=False)


def test_each_steps_policy_reaches_the_per_rank_function(analyzer: TraceAnalysis) -> None:
    job = analyzer.t
    steps = sorted(analyzer.get_profiler_steps())[:1]
    chosen = Selection.of([0, 1], steps)
    restricted = Analysis("restricted", _steps_seen, COLS).run(job, chosen)
    assert list(restricted["rank"]) == [0, 1]
    assert all(h == steps for h in restricted["held"])  # the runner restricted the ranks
    assert all(a is None for a in restricted["arg"])
    per_step = Analysis("per step", _steps_seen, COLS, steps=PER_STEP).run(job, chosen)
    assert all(a == steps for a in per_step["arg"])  # the steps come first ...
    assert all(len(h) > 1 for h in per_step["held"])  # ... and the rank is read whole
    whole = Analysis("whole ranks", _steps_seen, COLS, steps=WHOLE)
    with pytest.raises(ValueError, match="whole ranks reads every event"):
        whole.run(job, chosen)
    assert len(whole.run(job, Selection.of([2]))) == 1


def test_no_rank_answers_the_declared_empty_table(analyzer: TraceAnalysis) -> None:
    declared = Analysis("none", _steps_seen, COLS, finish=lambda t: t.assign(done=True))
    (answer,) = run(analyzer.t, [declared.work()], Selection.of([]))
    assert answer.columns.tolist() == ["rank", "arg", "held", "done"] and len(answer) == 0


def _declared() -> list[tuple[str, Analysis]]:
    found = {}
    for info in pkgutil.walk_packages(hta.__path__, "hta."):
        if info.name.startswith(("hta.synthetic", "hta.cli", "hta.commands")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, Analysis):
                found[id(value)] = (f"{value.per_rank.__module__}.{name}", value)
    return sorted(found.values(), key=lambda pair: pair[0])


def _needs_only_the_rank(a: Analysis) -> bool:
    params = list(inspect.signature(a.per_rank).parameters.values())[1:]
    if a.steps == PER_STEP:
        params = params[1:]
    return all(p.default is not inspect.Parameter.empty for p in params)


DECLARED = _declared()


def test_the_package_declares_its_analyses() -> None:
    assert len(DECLARED) >= 20, [n for n, _ in DECLARED]


@pytest.mark.parametrize("name,analysis", [d for d in DECLARED if _needs_only_the_rank(d[1])],
                         ids=[n for n, a in DECLARED if _needs_only_the_rank(a)])
def test_a_declared_analysis_answers_its_declared_columns(
        analyzer: TraceAnalysis, name: str, analysis: Analysis) -> None:
    """The table a rank answers has the columns of the declared empty table (so no
    rank and some rank give the same columns)."""
    answer = analysis.run(analyzer.t, Selection.of([0]))
    empty = analysis.empty()
    for got, none in zip(*(((answer,), (empty,)) if not isinstance(empty, tuple)
                           else (answer, empty))):
        if isinstance(got, pd.DataFrame) and len(none.columns):
            assert list(got.columns) == list(none.columns), name
