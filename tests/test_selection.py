"""The one selection vocabulary (:mod:`hta.model.selection`) and the one step table."""

from __future__ import annotations

import pickle

import pytest
from kineto_builder import TraceBuilder

from hta.job.load import load_trace
from hta.model.selection import (
    ALL,
    FIRST,
    STEP_COLUMNS,
    Selection,
    normalize_iterations,
    normalize_ranks,
    rank_steps,
    resolve,
    step_table,
)

US = 1_000  # ns


def _job(tmp_path, steps_of_rank):
    """Ranks whose ProfilerStep numbers and spans are known: step N of rank r starts at
    N x 100 µs and lasts (10 + r) µs."""
    for rank, steps in steps_of_rank.items():
        b = TraceBuilder(rank=rank, world_size=len(steps_of_rank))
        for step in steps:
            with b.step(step, ts=step * 100 * US, dur=(10 + rank) * US):
                b.cpu_op("aten::mm", ts=step * 100 * US + US, dur=2 * US)
        if not steps:
            b.cpu_op("aten::mm", ts=0, dur=2 * US)
        b.write(tmp_path / f"rank-{rank}.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_normalize_ranks():
    assert normalize_ranks(None) is ALL and normalize_ranks(ALL) is ALL
    assert normalize_ranks(3) == (3,)
    assert normalize_ranks([2, 0, 2]) == (0, 2)
    with pytest.raises(TypeError):
        normalize_ranks("0")
    with pytest.raises(ValueError):
        normalize_ranks(FIRST)


def test_normalize_iterations():
    assert normalize_iterations(None) is ALL
    assert normalize_iterations(None, none_means=FIRST) is FIRST
    assert normalize_iterations("All") is ALL and normalize_iterations(FIRST) is FIRST
    assert normalize_iterations(5) == (5,) and normalize_iterations([7, 5, 7]) == (5, 7)
    with pytest.raises(ValueError, match="FIRST"):
        normalize_iterations("first one")


def test_markers_survive_pickling_as_the_same_object():
    assert pickle.loads(pickle.dumps(ALL)) is ALL
    assert pickle.loads(pickle.dumps(Selection.of(None, None, none_means=FIRST))) == \
        Selection(ALL, FIRST)


def test_step_table_has_the_documented_columns_and_values(tmp_path):
    job = _job(tmp_path, {0: [3, 4], 1: [4, 5]})
    steps = step_table(job)
    assert list(steps.columns) == STEP_COLUMNS
    assert steps["rank"].tolist() == [0, 0, 1, 1]
    assert steps["step"].tolist() == [3, 4, 4, 5]
    assert steps["ts"].tolist() == [300 * US, 400 * US, 400 * US, 500 * US]
    assert steps["dur"].tolist() == [10 * US, 10 * US, 11 * US, 11 * US]
    assert (steps["end"] - steps["ts"] == steps["dur"]).all()
    assert step_table(job, Selection.of(1))["step"].tolist() == [4, 5]
    assert rank_steps(job.rank(0))["step"].tolist() == [3, 4]


def test_resolve_all_first_and_explicit(tmp_path):
    job = _job(tmp_path, {0: [3, 4], 1: [4, 5]})
    assert resolve(Selection(), job) == Selection((0, 1), ALL)
    # FIRST is the first step of the selected ranks, not of the job
    assert resolve(Selection.of(None, FIRST), job) == Selection((0, 1), (3,))
    assert resolve(Selection.of(1, FIRST), job) == Selection((1,), (4,))
    assert resolve(Selection.of([1, 0], [5, 4]), job).iteration_list == [4, 5]
    assert resolve(Selection.of(None, None), job).iteration_list is None


def test_resolve_errors_name_what_exists(tmp_path):
    job = _job(tmp_path, {0: [3, 4], 1: [4, 5]})
    with pytest.raises(KeyError, match=r"loaded ranks: \[0, 1\]"):
        resolve(Selection.of(7), job)
    with pytest.raises(ValueError, match=r"\[9\] not found.*ProfilerStep 3, 4"):
        resolve(Selection.of(0, [4, 9]), job)
    # lenient: at least one of the steps exists
    assert resolve(Selection.of(0, [4, 9]), job, strict=False).iteration_list == [4, 9]
    with pytest.raises(ValueError, match="not found"):
        resolve(Selection.of(0, [8, 9]), job, strict=False)


def test_first_without_steps_is_every_event(tmp_path):
    job = _job(tmp_path, {0: []})
    assert len(step_table(job)) == 0
    assert resolve(Selection.of(None, FIRST), job) == Selection((0,), ALL)


def test_iterations_must_be_resolved_before_reading_first():
    with pytest.raises(ValueError, match="resolve"):
        _ = Selection(ALL, FIRST).iteration_list


def test_describe():
    assert Selection((0, 1, 2, 5), (7,)).describe() == "rank(s) 0-2, 5, step(s) 7"
    assert Selection().describe() == "all ranks, every event"


def test_the_front_door(tmp_path):
    import subprocess
    import sys

    import hta

    job = _job(tmp_path, {0: [1, 2]})
    del job
    analyzer = hta.load(str(tmp_path), cache=False, progress=False)
    assert type(analyzer) is hta.TraceAnalysis and analyzer.ranks == [0]
    assert resolve(hta.Selection.of(None, hta.FIRST), analyzer.t).iteration_list == [1]
    assert {"load", "TraceAnalysis", "TraceDiff", "Selection", "ALL", "FIRST"} <= set(dir(hta))
    with pytest.raises(AttributeError):
        _ = hta.no_such_name
    light = subprocess.run([sys.executable, "-c", "import sys, hta; print('pandas' in "
                            "sys.modules)"], capture_output=True, text=True, check=True)
    assert light.stdout.strip() == "False"
