"""``RankTrace.column`` and ``kind_codes``: the events' columns as arrays, kept while the
events table and the rank's generation stay the same, and the events' column labels
held as plain strings (the lookups' cost under pandas 3)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from hta.model import schema
from hta.model.trace import RankTrace, plain_labels


def _rank(n: int = 5) -> RankTrace:
    events = pd.DataFrame({
        "index": np.arange(n, dtype=np.int32),
        "ts": np.arange(n, dtype=np.int64) * 10,
        "end": np.arange(n, dtype=np.int64) * 10 + 5,
        "name": np.zeros(n, dtype=np.int32),
        "kind": pd.Categorical.from_codes(np.full(n, 6, dtype=np.int8),
                                          dtype=schema.KIND_DTYPE),
    })
    return RankTrace(rank=0, events=events, symbols=["k"], tables={}, meta={})


def test_a_column_is_the_events_column_read_only_and_kept() -> None:
    rt = _rank()
    ts = rt.column("ts")
    assert np.array_equal(ts, rt.events["ts"].to_numpy())
    assert ts.dtype == np.int64
    assert not ts.flags.writeable
    with pytest.raises(ValueError):
        ts[0] = 1
    assert rt.column("ts") is ts  # kept for the next call
    codes = rt.kind_codes()
    assert np.array_equal(codes, rt.events["kind"].array.codes)
    assert not codes.flags.writeable and rt.kind_codes() is codes


def test_new_events_or_a_new_generation_are_read_again() -> None:
    rt = _rank()
    old = rt.column("ts")
    rt.events = rt.events.assign(ts=rt.events["ts"] + 1)
    assert np.array_equal(rt.column("ts"), old + 1)
    # a change in place that bumps the generation (classify, remap_symbols) is seen
    before = rt.kind_codes()
    rt.events["kind"] = pd.Categorical.from_codes(np.full(5, 7, dtype=np.int8),
                                                  dtype=schema.KIND_DTYPE)
    rt.generation += 1
    assert (rt.kind_codes() == 7).all() and (before == 6).all()
    rt.filter_rows(np.array([True, False, True, True, False]))
    assert np.array_equal(rt.column("index"), [0, 1, 2])
    assert np.array_equal(rt.column("ts"), [1, 21, 31])


def test_the_kept_arrays_do_not_travel() -> None:
    rt = _rank()
    rt.column("ts")
    state = rt.__getstate__()
    assert "_columns" not in state
    back = pickle.loads(pickle.dumps(rt))
    assert np.array_equal(back.column("ts"), rt.column("ts"))


def test_events_column_labels_are_plain_strings() -> None:
    rt = _rank()
    assert rt.events.columns.dtype == object
    assert list(rt.events.columns) == ["index", "ts", "end", "name", "kind"]
    rt.events = rt.events[rt.events["ts"] > 0].reset_index(drop=True)
    assert rt.events.columns.dtype == object
    frame = pd.DataFrame({"a": [1]})
    assert plain_labels(frame) is frame and frame.columns.dtype == object
    assert plain_labels(pd.DataFrame()).columns.tolist() == []
