"""Every TraceAnalysis method that takes ``ranks`` or ``iterations`` accepts ALL, FIRST,
"all", an int, a list and a range (issue: the front door's own example failed with
``iterations=hta.FIRST``)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pandas as pd
import pytest
from conftest import SAMPLE_TRACES, shared_trace

import hta
from hta.trace_analysis import TraceAnalysis

SYNTHETIC = SAMPLE_TRACES / "synthetic_4rank"
#: Methods that write files take an output folder (or file) too.
WRITES = {"generate_trace_with_counters": ("output_dir", ""),
          "write_perfetto_job": ("path", "job.pftrace")}
#: Methods that need a trace with CUPTI counters (the sample has none): the shared one.
CUPTI = {"get_cupti_counter_data_with_operators"}


def _methods(parameter: str) -> list[str]:
    return sorted(name for name in dir(TraceAnalysis) if not name.startswith("_")
                  and callable(getattr(TraceAnalysis, name))
                  and parameter in inspect.signature(getattr(TraceAnalysis, name)).parameters)


@pytest.fixture(scope="module")
def analyzer() -> TraceAnalysis:
    return TraceAnalysis(trace_dir=str(SYNTHETIC), cache=False, progress=False)


def _call(analyzer: TraceAnalysis, name: str, tmp: Path, **kwargs: object) -> object:
    if name in WRITES:
        argument, file_name = WRITES[name]
        if file_name:
            pytest.importorskip("perfetto", reason="the perfetto extra writes .pftrace files")
            tmp.mkdir(parents=True, exist_ok=True)
        kwargs[argument] = str(tmp / file_name) if file_name else str(tmp)
    return getattr(analyzer, name)(**kwargs)


def _same(a: object, b: object) -> None:
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    elif isinstance(a, dict) and a and all(isinstance(v, pd.DataFrame) for v in a.values()):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])


@pytest.mark.parametrize("parameter", ["ranks", "iterations"])
def test_every_selecting_method_makes_its_selection_first(analyzer: TraceAnalysis,
                                                         parameter: str,
                                                         tmp_path: Path) -> None:
    """Each method turns ``ranks`` and ``iterations`` into one Selection before any work
    (:func:`hta.facade.selecting.selected`): HTA's positional ``visualize`` landing in
    either is refused at once, with what to pass."""
    names = _methods(parameter)
    assert len(names) > (30 if parameter == "ranks" else 15)
    for name in names:
        kwargs: dict[str, object] = {parameter: True}
        if name in WRITES:  # nothing is written: the selection fails first
            argument, file_name = WRITES[name]
            kwargs[argument] = str(tmp_path / file_name)
        with pytest.raises(TypeError, match="positional `visualize`"):
            getattr(analyzer, name)(**kwargs)


def test_a_method_hands_its_selection_on_unchanged(analyzer: TraceAnalysis) -> None:
    """A Selection passed as ``ranks`` is the selection (what one method hands another)."""
    from hta.facade.selecting import selected

    selection = selected(analyzer.t, [0, 1], hta.FIRST)
    assert selection == hta.Selection((0, 1), (1,))
    assert selected(analyzer.t, selection, [2]) is selection
    _same(analyzer.get_collective_arrivals(selection),
          analyzer.get_collective_arrivals([0, 1], [1]))


def test_front_door_example_runs() -> None:
    analyzer = hta.load(str(SYNTHETIC), cache=False, progress=False)
    first = analyzer.get_temporal_breakdown(ranks=[0, 1], iterations=hta.FIRST)
    explicit = analyzer.get_temporal_breakdown(ranks=[0, 1], iterations=[1])
    _same(first, explicit)


@pytest.mark.slow
@pytest.mark.parametrize("name", _methods("iterations"))
def test_iterations_forms(analyzer: TraceAnalysis, name: str, tmp_path: Path) -> None:
    first = _call(analyzer, name, tmp_path / "a", iterations=hta.FIRST)
    _same(first, _call(analyzer, name, tmp_path / "b", iterations=[1]))
    _same(_call(analyzer, name, tmp_path / "c", iterations=1), first)
    whole = _call(analyzer, name, tmp_path / "d", iterations=None)
    for form in ("all", "ALL", hta.ALL):
        _same(_call(analyzer, name, tmp_path / "e", iterations=form), whole)
    _same(_call(analyzer, name, tmp_path / "f", iterations=range(1, 3)),
          _call(analyzer, name, tmp_path / "g", iterations=[1, 2]))


@pytest.mark.slow
@pytest.mark.parametrize("name", _methods("ranks"))
def test_ranks_forms(analyzer: TraceAnalysis, name: str, tmp_path: Path) -> None:
    if name in CUPTI:
        analyzer = TraceAnalysis(trace_dir=str(shared_trace("cupti_profiler")), cache=False,
                                 progress=False)
        rank = analyzer.ranks[0]
        whole = _call(analyzer, name, tmp_path, ranks=None)
        for form in (hta.ALL, "all"):
            _same(_call(analyzer, name, tmp_path, ranks=form), whole)
        _same(_call(analyzer, name, tmp_path, ranks=range(rank, rank + 1)),
              _call(analyzer, name, tmp_path, ranks=[rank]))
        return
    whole = _call(analyzer, name, tmp_path / "a", ranks=None)
    for form in (hta.ALL, "all"):
        _same(_call(analyzer, name, tmp_path / "b", ranks=form), whole)
    _same(_call(analyzer, name, tmp_path / "c", ranks=range(0, 2)),
          _call(analyzer, name, tmp_path / "d", ranks=[0, 1]))
    _call(analyzer, name, tmp_path / "e", ranks=1)


def test_bad_forms_say_what_to_pass(analyzer: TraceAnalysis) -> None:
    with pytest.raises(ValueError, match="pass a step number"):
        analyzer.get_temporal_breakdown(iterations="first")
    with pytest.raises(ValueError, match="pass rank numbers, or ALL"):
        analyzer.get_temporal_breakdown(ranks=hta.FIRST)
