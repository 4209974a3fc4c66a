"""Reopening a cached rank: memory-mapped, writable, and independent of the file.

The events table of a cache entry comes back as views of a copy-on-write mapping of its
Arrow file (``hta/job/arrow_files.py``): nothing is copied when it opens, a change
made to a reopened rank lands in private pages (never in the file, never in another
reopen), the rank survives its entry being deleted, and past ``MAX_MAPPED`` live
mappings the columns are copied instead, with the same values.
"""

from __future__ import annotations

import logging
import mmap
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from test_cache import assert_same_rank, entries, rich_trace

from hta.job import arrow_files
from hta.job.cache import read_entry, write_manifest
from hta.trace_analysis import TraceAnalysis


def _mapped(array: np.ndarray) -> bool:
    base: object = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return isinstance(base, mmap.mmap)


@pytest.fixture
def cached(tmp_path: Path) -> tuple[Path, Path, TraceAnalysis]:
    folder = tmp_path / "job"
    rich_trace(0).write(folder / "rank-0.json")
    cache = tmp_path / "cache"
    first = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    return folder, cache, first


def test_reopened_numeric_columns_are_views_of_the_file(cached: tuple) -> None:
    folder, cache, first = cached
    rt = read_entry(entries(cache)[0])
    assert rt is not None
    ev = rt.events
    for column in ("ts", "dur", "end", "pid", "tid", "name", "parent", "correlation"):
        assert _mapped(ev[column].to_numpy()), column
    assert_same_rank(first.t.rank(0), rt)
    assert rt.unclassified.dtype == bool and rt.unclassified.any()


def test_changes_to_a_reopened_rank_stay_in_memory(cached: tuple) -> None:
    folder, cache, first = cached
    entry = entries(cache)[0]
    before = (entry / "events.arrow").read_bytes()
    a = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    ev = a.t.rank(0).events
    ts0 = int(ev["ts"].iat[0])
    ev.loc[0, "ts"] = ts0 + 12345          # in place, as a notebook would
    ev.iloc[1, ev.columns.get_loc("dur")] = 7
    assert int(ev["ts"].iat[0]) == ts0 + 12345
    assert (entry / "events.arrow").read_bytes() == before
    again = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    assert int(again.t.rank(0).events["ts"].iat[0]) == ts0
    assert_same_rank(first.t.rank(0), again.t.rank(0))


def test_a_reopened_rank_outlives_its_entry(cached: tuple) -> None:
    folder, cache, first = cached
    a = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    for entry in entries(cache):
        for path in entry.iterdir():
            path.unlink()
        entry.rmdir()
    expected = first.get_temporal_breakdown(visualize=False)
    pd.testing.assert_frame_equal(a.get_temporal_breakdown(visualize=False), expected)
    assert_same_rank(first.t.rank(0), a.t.rank(0))


def test_past_the_mapping_limit_columns_are_copied(cached: tuple,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder, cache, first = cached
    monkeypatch.setattr(arrow_files, "MAX_MAPPED", 0)
    rt = read_entry(entries(cache)[0])
    assert rt is not None
    assert not any(_mapped(rt.events[c].to_numpy()) for c in rt.events.columns
                   if c != "kind")
    assert_same_rank(first.t.rank(0), rt)


def test_map_columns_converts_what_it_cannot_view(tmp_path: Path) -> None:
    table = pa.table({
        "i64": pa.array([1, 2, 3], pa.int64()),
        "f64": pa.array([0.5, None, 2.0], pa.float64()),   # nulls: converted (NaN)
        "flag": pa.array([True, False, True]),              # bits: converted
        "i8": pa.array([-1, 0, 1], pa.int8()),
        "empty_ok": pa.array([4, 5, 6], pa.int32()),
    })
    path = tmp_path / "t.arrow"
    arrow_files.write_table(table, path)
    cols = arrow_files.map_columns(path)
    assert cols["i64"].tolist() == [1, 2, 3] and _mapped(cols["i64"])
    assert cols["i8"].dtype == np.int8 and _mapped(cols["i8"])
    assert np.isnan(cols["f64"][1]) and not _mapped(cols["f64"])
    assert cols["flag"].tolist() == [True, False, True] and not _mapped(cols["flag"])
    cols["i64"][0] = 99                                     # writable, private
    assert arrow_files.map_columns(path)["i64"].tolist() == [1, 2, 3]
    empty = tmp_path / "empty.arrow"
    arrow_files.write_table(pa.table({"x": pa.array([], pa.int64())}), empty)
    assert arrow_files.map_columns(empty)["x"].tolist() == []


def test_an_empty_file_is_an_unreadable_entry(tmp_path: Path) -> None:
    path = tmp_path / "events.arrow"
    path.write_bytes(b"")
    with pytest.raises(pa.ArrowInvalid):
        arrow_files.map_columns(path)
    with pytest.raises(pa.ArrowInvalid):
        arrow_files.read_table(path)


def test_reopened_side_tables_can_be_changed_in_place(cached: tuple) -> None:
    folder, cache, first = cached
    rt = read_entry(entries(cache)[0])
    assert rt is not None
    changed = 0
    for name in rt.tables:
        frame = rt.tables[name]
        for column in frame.columns:
            if len(frame) and frame[column].dtype.kind in "iuf":
                frame.loc[0, column] = 1
                assert frame[column].iat[0] == 1
                changed += 1
    assert changed > 20
    again = read_entry(entries(cache)[0])
    assert again is not None
    assert_same_rank(first.t.rank(0), again)


def test_loading_modules_import_no_circle() -> None:
    import ast

    root = Path(__file__).resolve().parent.parent / "hta" / "job"

    def deps(module: str) -> set[str]:
        tree = ast.parse((root / f"{module}.py").read_text())
        return {node.module.rsplit(".", 1)[-1] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module
                and node.module.startswith("hta.job.")}

    assert "load" not in deps("distributed") and "load" not in deps("rank_load")
    assert "distributed" not in deps("rank_load") and "distributed" in deps("load")


def test_side_tables_are_converted_on_first_use_and_act_as_a_dict(cached: tuple) -> None:
    import pickle

    folder, cache, first = cached
    rt = read_entry(entries(cache)[0])
    assert rt is not None
    tables = rt.tables
    assert isinstance(tables, arrow_files.ArrowTables)
    assert tables._frames == {}                       # nothing converted on opening
    expected = first.t.rank(0).tables
    assert list(tables) == list(expected) and len(tables) == len(expected)
    kernel_args = tables["kernel_args"]
    assert list(tables._frames) == ["kernel_args"]
    assert tables["kernel_args"] is kernel_args       # converted once
    copy = tables.copy()
    copy["kernel_args"] = kernel_args.iloc[:0]
    assert len(tables["kernel_args"]) == len(expected["kernel_args"]) > 0
    del copy["flows"]
    assert "flows" not in copy and "flows" in tables
    with pytest.raises(KeyError):
        tables["no_such_table"]
    plain = pickle.loads(pickle.dumps(tables))        # a process pool gets a plain dict
    assert type(plain) is dict and list(plain) == list(expected)
    for name in expected:
        pd.testing.assert_frame_equal(plain[name], expected[name], check_exact=True)
    assert dict(tables).keys() == expected.keys()


def test_to_frame_gives_what_the_written_record_restores() -> None:
    """The plain conversion (record skipped) only where it gives the same frame."""
    plain = pd.DataFrame({
        "i": np.arange(4, dtype=np.int64), "j": np.arange(4, dtype=np.int32),
        "f": [1.5, np.nan, 2.0, 0.0], "b": [True, False, True, True],
        "s": pd.array(["a", None, "ccc", ""], dtype="str"),
    })
    others = {
        "a labelled index": plain.set_index("i"),
        "a categorical": plain.assign(c=pd.Categorical(["x", "y", "x", "z"])),
        "a datetime": plain.assign(t=pd.to_datetime([0, 1, 2, 3], utc=True)),
        "a nullable integer": plain.assign(n=pd.array([1, None, 3, 4], dtype="Int64")),
    }
    table = pa.Table.from_pandas(plain, preserve_index=False)
    assert arrow_files._plain(table.schema.metadata[b"pandas"])
    pd.testing.assert_frame_equal(arrow_files.to_frame(table), table.to_pandas(),
                                  check_exact=True)
    # made column by column (pandas 3: its strings are Arrow's), the dtypes Arrow gives
    column_wise = arrow_files._plain_frame(table)
    assert (column_wise is not None) == (arrow_files._arrow_strings() is not None)
    if column_wise is not None:
        pd.testing.assert_frame_equal(column_wise, table.to_pandas(), check_exact=True)
        assert list(column_wise.dtypes) == list(table.to_pandas().dtypes)
        column_wise.loc[0, "i"] = 7  # its own, writable memory
        assert table.column("i")[0].as_py() == 0
    # an integer column with a missing value: Arrow's conversion makes it floats
    holed = pa.table({"i": pa.array([1, None], pa.int64()), "f": pa.array([None, 2.5])})
    assert arrow_files._plain_frame(holed) is None
    floats = arrow_files._plain_frame(holed.drop_columns(["i"]))  # a missing float: NaN
    assert floats is not None and floats["f"].isna().tolist() == [True, False]
    for what, frame in others.items():
        table = pa.Table.from_pandas(frame, preserve_index=what == "a labelled index")
        assert not arrow_files._plain(table.schema.metadata[b"pandas"]), what
        pd.testing.assert_frame_equal(arrow_files.to_frame(table), table.to_pandas(),
                                      check_exact=True)
    assert not arrow_files._plain(None) and not arrow_files._plain(b"not json")
    bare = pa.table({"x": [1, 2]})
    pd.testing.assert_frame_equal(arrow_files.to_frame(bare), bare.to_pandas())


def test_an_entry_with_kinds_out_of_range_is_rebuilt(cached: tuple,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    folder, cache, first = cached
    entry = entries(cache)[0]
    # copies: the file is rewritten below, so its mapped pages must not be the source
    columns = {k: np.array(v) for k, v in arrow_files.map_columns(entry / "events.arrow").items()}
    columns["kind"] = np.full(len(columns["kind"]), 99, dtype=np.int8)
    arrow_files.write_table(pa.table(columns), entry / "events.arrow")
    write_manifest(entry)  # an entry consistent with itself: the read's own checks count
    with caplog.at_level(logging.WARNING, logger="hta"):
        assert read_entry(entry) is None
    assert any("event kinds out of range" in r.getMessage() for r in caplog.records)
    again = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    warnings = again.t.rank(0).meta["warnings"]
    assert warnings[-1] == ("the cache entry could not be read (event kinds out of range); "
                            "rebuilt from the trace")
    warnings.pop()
    assert_same_rank(first.t.rank(0), again.t.rank(0))
