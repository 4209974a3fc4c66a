"""The joins on a rank's model: ``index`` is the row's position, and
:meth:`RankTrace.link`, :meth:`RankTrace.side_rows` and :meth:`RankTrace.side_row_of_event`
(which the analyses use instead of mapping ``index`` values themselves) agree with joins
done by hand on ``index``, on every shared real trace, before and after
:meth:`RankTrace.filter_rows`."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_TRACES, shared_trace

from hta.analysis.findings.base import link as cached_link
from hta.analysis.gpu_work import index_positions
from hta.model.trace import ARG_TABLES, LINK_COLUMNS, RankTrace
from hta.trace_analysis import TraceAnalysis


def _folders() -> list[str]:
    """Every folder under ../shared/traces/hta holding a JSON trace file (one
    placeholder when the folder is absent: its test skips)."""
    if not SHARED_TRACES.is_dir():
        return ["trace_filter"]
    found = {p.parent.relative_to(SHARED_TRACES).as_posix()
             for p in SHARED_TRACES.rglob("*.json*")
             if p.is_file() and ".hta_cache" not in p.parts}  # a cache is no trace folder
    return sorted(found) or ["trace_filter"]


FOLDERS = _folders()
#: A shared trace whose ranks have collective args (``trace_filter`` has none).
COLLECTIVE_FOLDER = "nccl_parser_config"


@functools.cache
def _ranks(folder: str) -> tuple[RankTrace, ...]:
    analyzer = TraceAnalysis(trace_dir=str(SHARED_TRACES / folder), cache=False,
                             progress=False)
    return tuple(analyzer.t.rank(r) for r in analyzer.t.get_ranks())


def _loaded(folder: str) -> tuple[RankTrace, ...]:
    shared_trace(folder)
    try:
        ranks = _ranks(folder)
    except Exception as exc:  # a folder that does not load has nothing to check
        pytest.skip(f"{folder} does not load: {exc}")
    if not ranks:
        pytest.skip(f"{folder} has no rank")
    return ranks


def _filtered(rt: RankTrace, keep: np.ndarray) -> RankTrace:
    """A copy of ``rt`` (the loaded one is shared by the tests) filtered to ``keep``."""
    out = dataclasses.replace(rt, tables=dict(rt.tables))
    out.filter_rows(keep)
    return out


def _mask(n: int, seed: int) -> np.ndarray:
    """Rows to keep: about two thirds, at random, never all."""
    keep = np.random.default_rng(seed).random(n) < 2 / 3
    if n:
        keep[n // 2] = False
    return keep


def _check_positions(rt: RankTrace) -> None:
    ev = rt.events
    n = len(ev)
    index = ev["index"].to_numpy()
    assert np.array_equal(index, np.arange(n)), f"rank {rt.rank}: index is not the position"
    for name in LINK_COLUMNS:
        pos = rt.link(name)
        assert pos.dtype == np.int64 and pos.shape == (n,)
        assert ((pos >= -1) & (pos < n)).all(), f"rank {rt.rank}: {name} out of range"
        if name in ev:
            values = ev[name].to_numpy().astype(np.int64)
            linked = pos >= 0
            # the row a link names has that link value as its own index
            assert np.array_equal(index[pos[linked]], values[linked])
            assert (values[~linked] == -1).all()
        else:
            assert (pos == -1).all()


@pytest.mark.parametrize("folder", FOLDERS)
def test_index_is_the_position_and_links_name_rows(folder):
    for rt in _loaded(folder):
        _check_positions(rt)


@pytest.mark.parametrize("folder", FOLDERS)
def test_filter_rows_keeps_index_the_position_and_the_links(folder):
    for rt in _loaded(folder):
        n = len(rt.events)
        keep = _mask(n, seed=rt.rank + n)
        if keep.all():
            continue
        small = _filtered(rt, keep)
        _check_positions(small)
        assert len(small.events) == int(keep.sum())
        # each kept link still names the same event (its old row, renumbered), or -1
        # where that event was dropped
        new_of_old = np.full(n, -1, dtype=np.int64)
        new_of_old[keep] = np.arange(int(keep.sum()))
        for name in LINK_COLUMNS:
            old = rt.link(name)[keep]
            expect = np.where(old >= 0, new_of_old[np.maximum(old, 0)], -1)
            assert np.array_equal(small.link(name), expect), name
        # the side tables still describe the same events
        for table in ARG_TABLES:
            frame, rows = rt.side_rows(table)
            small_frame, small_rows = small.side_rows(table)
            kept = (rows >= 0) & keep[np.maximum(rows, 0)]
            assert len(small_frame) == int(kept.sum()), table
            assert np.array_equal(small_rows, new_of_old[rows[kept]]), table


def _by_hand(rt: RankTrace, table: str) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The side table, per its row the events row with that ``index`` (-1: none), and per
    events row the last table row naming it (-1: none): a merge on ``index``."""
    frame = rt.tables.get(table)
    if frame is None or not len(frame) or "index" not in frame:
        return pd.DataFrame(), np.zeros(0, dtype=np.int64), np.full(len(rt.events), -1)
    events = pd.DataFrame({"index": rt.events["index"].to_numpy(np.int64),
                           "event_row": np.arange(len(rt.events), dtype=np.int64)})
    side = pd.DataFrame({"index": frame["index"].to_numpy(np.int64),
                         "table_row": np.arange(len(frame), dtype=np.int64)})
    merged = side.merge(events, on="index", how="left")
    merged = merged.sort_values("table_row")
    event_row = merged["event_row"].fillna(-1).to_numpy(np.int64)
    last = merged[merged["event_row"] >= 0].drop_duplicates("event_row", keep="last")
    table_row = np.full(len(rt.events), -1, dtype=np.int64)
    table_row[last["event_row"].to_numpy(np.int64)] = last["table_row"].to_numpy()
    return frame, event_row, table_row


def _check_side_tables(rt: RankTrace, tables: tuple[str, ...]) -> None:
    for table in tables:
        frame, event_row, table_row = _by_hand(rt, table)
        got_frame, got_rows = rt.side_rows(table)
        assert len(got_frame) == len(frame), table
        if len(frame):
            assert got_frame is rt.tables[table]  # the table itself, rows in its order
        assert got_rows.dtype == np.int64
        assert np.array_equal(got_rows, event_row), table
        frame2, got_table_row = rt.side_row_of_event(table)
        assert len(frame2) == len(frame)
        assert got_table_row.shape == (len(rt.events),)
        assert np.array_equal(got_table_row, table_row), table


def test_side_rows_agree_with_a_join_on_index():
    ranks = _loaded(COLLECTIVE_FOLDER)
    with_args = [rt for rt in ranks if len(rt.tables.get("collective_args", ()))]
    assert with_args, f"{COLLECTIVE_FOLDER}: no rank with collective args"
    for rt in with_args:
        _check_side_tables(rt, ARG_TABLES)
        coll, rows = rt.side_rows("collective_args")
        assert (rows >= 0).all()  # every collective's args name a loaded event
        small = _filtered(rt, _mask(len(rt.events), seed=7))
        assert len(small.tables["collective_args"]) < len(coll)
        _check_side_tables(small, ARG_TABLES)


@pytest.mark.parametrize("folder", ["trace_filter", "trace_diff/control", "amd_trace"])
def test_side_rows_of_other_tables(folder):
    for rt in _loaded(folder):
        _check_side_tables(rt, ARG_TABLES)


def test_a_table_the_rank_lacks_is_empty():
    rt = _loaded("trace_filter")[0]
    frame, rows = rt.side_rows("no_such_table")
    assert len(frame) == 0 and rows.size == 0
    frame, rows = rt.side_row_of_event("collective_args")  # trace_filter has none
    assert len(frame) == 0 and rows.shape == (len(rt.events),) and (rows == -1).all()


@pytest.mark.parametrize("name", ["name", "index", "ts", "no_such_column"])
def test_link_refuses_a_column_that_is_not_a_link(name):
    rt = _loaded("trace_filter")[0]
    with pytest.raises(KeyError):
        rt.link(name)
    with pytest.raises(KeyError):
        cached_link(rt, name)


def test_the_findings_link_is_the_models_link_read_only():
    rt = _loaded("trace_filter")[0]
    for name in LINK_COLUMNS:
        got = cached_link(rt, name)
        assert np.array_equal(got, rt.link(name))
        assert not got.flags.writeable
        with pytest.raises(ValueError):
            got[:1] = 0


def test_index_positions_of_a_bare_frame():
    """The functions taking a bare events table read links with
    :func:`index_positions`: a rank's table gives the values back, a frame cut by hand
    (``events[mask]``, old ``index`` numbers) is looked up."""
    rt = _loaded("trace_filter")[0]
    ev = rt.events
    values = ev["index_correlation"].to_numpy()
    assert np.array_equal(index_positions(ev, values), rt.link("index_correlation"))
    keep = _mask(len(ev), seed=3)
    cut = ev[keep].reset_index(drop=True)
    got = index_positions(cut, cut["index_correlation"].to_numpy())
    small = _filtered(rt, keep)
    assert np.array_equal(got, small.link("index_correlation"))
    assert np.array_equal(index_positions(cut, np.array([-1, len(ev) + 5])), [-1, -1])
