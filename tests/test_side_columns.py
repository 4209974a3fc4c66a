"""A rank's side-table columns read once (:mod:`hta.analysis.side_columns`), the operator
calls of some calls alone (:func:`hta.analysis.perf.calls.op_calls_of`) and the heaviest
name of some rows (:func:`hta.analysis.findings.rule_tools.heaviest_name`): each equal to
what it stands for, on traces whose answer is known by construction and on the bundled
sample traces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLE_TRACES

from hta.analysis.findings.rule_tools import heaviest_name
from hta.analysis.perf.calls import op_calls, op_calls_of
from hta.analysis.side_columns import side_codes, side_slots, side_text, side_text_of
from hta.model.rules import RuleSet
from hta.model.trace import RankTrace
from hta.trace_analysis import TraceAnalysis

FOLDERS = ("synthetic_4rank", "cuda_h100/sync_steps", "cuda_h100/dataloader_steps")


def _ranks(folder: str) -> list[RankTrace]:
    path = SAMPLE_TRACES / folder
    if not path.is_dir():
        pytest.skip(f"{path} is not bundled")
    ta = TraceAnalysis(trace_dir=str(path), cache=False, progress=False)
    return [ta.t.rank(r) for r in ta.t.get_ranks()]


def _with_table(rt: RankTrace, name: str, frame: pd.DataFrame) -> RankTrace:
    """``rt`` with side table ``name`` replaced (a new events table: nothing derived
    from the old one is read)."""
    rt.tables[name] = frame
    rt.events = rt.events.copy()
    return rt


@pytest.mark.parametrize("folder", FOLDERS)
def test_side_slots_are_the_event_slots_made_once(folder: str) -> None:
    for rt in _ranks(folder):
        for table in ("op_args", "collective_args", "kernel_args", "memory_args"):
            frame, slots = side_slots(rt, table)
            expected_frame, expected = rt.side_row_of_event(table)
            assert frame.equals(expected_frame)
            assert slots.tolist() == expected.tolist()
            assert not slots.flags.writeable
            assert side_slots(rt, table)[1] is slots  # kept for the rank


def test_side_codes_number_texts_by_first_appearance_missing_as_empty() -> None:
    rt = _ranks("synthetic_4rank")[0]
    texts = ["[[2, 3]]", None, "", "[[1]]", "[[2, 3]]", None, "[[1]]", "x"]
    arrow = pd.Series(texts, dtype=pd.StringDtype("pyarrow"))
    for column in (arrow, pd.Series(texts, dtype=object)):  # Arrow's, and Python strings
        frame = pd.DataFrame({"index": np.arange(len(texts)), "input_dims": column})
        rt = _with_table(rt, "op_args", frame)
        codes, empty = side_codes(rt, "op_args", "input_dims")
        # "" and a missing text are the same code (1); the others by first appearance
        assert codes.tolist() == [0, 1, 1, 2, 0, 1, 2, 3]
        assert empty == 1
        assert not codes.flags.writeable
    frame = pd.DataFrame({"index": [0, 1], "input_dims": pd.Series(["a", "b"], dtype="str")})
    rt = _with_table(rt, "op_args", frame)
    assert side_codes(rt, "op_args", "input_dims")[1] == 2  # no row empty: a code none has


@pytest.mark.parametrize("folder", FOLDERS)
def test_side_codes_and_texts_of_some_rows_equal_the_whole_columns(folder: str) -> None:
    for rt in _ranks(folder):
        for table in ("op_args", "collective_args", "metadata_events"):
            frame = rt.tables.get(table)
            if frame is None or not len(frame):
                continue
            for column in frame.columns:
                if not (frame[column].dtype == object or isinstance(frame[column].dtype,
                                                                    pd.StringDtype)):
                    continue
                whole = side_text(rt, table, column, missing="")
                codes, empty = side_codes(rt, table, column)
                expected, uniq = pd.factorize(whole)
                assert codes.tolist() == expected.tolist()
                found = np.flatnonzero(np.asarray(uniq, dtype=object) == "")
                assert empty == (int(found[0]) if found.size else len(uniq))
                rows = np.arange(len(frame))[::3][::-1]
                assert side_text_of(rt, table, column, rows, "").tolist() == \
                    whole[rows].tolist()


@pytest.mark.parametrize("folder", FOLDERS)
def test_op_calls_of_some_calls_are_their_rows_of_op_calls(folder: str) -> None:
    rules = RuleSet()
    for rt in _ranks(folder):
        calls, work = op_calls(rt, rules)
        if not calls:
            continue
        index = rt.column("index")[calls["op"]]
        for pick in (index[::2], index[1:2], index[:0]):
            mine = np.isin(index, pick)
            got, got_work = op_calls_of(rt, rules, pick)
            if not mine.any():
                assert not got
                continue
            assert set(got) == set(calls)
            for key, values in calls.items():
                assert np.asarray(got[key]).tolist() == np.asarray(values)[mine].tolist(), key
            # the GPU work of those calls alone, in the same order
            owners = work["owner"].to_numpy()
            own = (owners >= 0) & np.isin(rt.column("index")[np.maximum(owners, 0)], pick)
            assert list(got_work) == list(work.columns)  # the frame's columns, as arrays
            for column in work.columns:
                assert np.asarray(got_work[column]).tolist() == \
                    work[column].to_numpy()[own].tolist(), column


def test_heaviest_name_weighs_every_row_of_a_name_ties_to_the_lowest_id() -> None:
    rt = _ranks("synthetic_4rank")[0]
    names = rt.column("name")
    rng = np.random.default_rng(3)
    for case in range(40):
        rows = rng.choice(len(names), size=int(rng.integers(1, 30)), replace=False)
        weights = rng.integers(0, 4, rows.size)  # small: ties are frequent
        totals: dict[int, int] = {}
        for i, w in zip(names[rows].tolist(), weights.tolist(), strict=True):
            totals[i] = totals.get(i, 0) + w
        most = max(totals.values())
        expected = rt.symbols[min(i for i, t in totals.items() if t == most)]
        assert heaviest_name(rt, rows, weights) == expected, case
