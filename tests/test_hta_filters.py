"""HTA's filters (``hta.common.trace_filter``) on small frames whose answer is known.

Each case is a frame built here: the rows a filter must keep are read off the frame, as
HTA's filters keep them (HTA 0.5 and main), and the places where this package differs
on purpose (µs ranges on ns tables, negative step indices, empty results keeping their
columns) are pinned with the reason in ``hta/common/trace_filter.py``'s docstring.
"""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from hta.common.trace_filter import (
    CompositeFilter,
    CPUOperatorFilter,
    Filter,
    FirstIterationFilter,
    GPUKernelFilter,
    IterationFilter,
    IterationIndexFilter,
    MemCopyEventFilter,
    NameFilter,
    NameIdColumnFilter,
    NameStringColumnFilter,
    QueryFilter,
    RankFilter,
    TimeRangeFilter,
    ZeroDurationFilter,
)
from hta.common.trace_symbol_table import TraceSymbolTable

STEPS = pd.DataFrame({"iteration": [-1, 550, 551, 552, 553, 554],
                      "name": [307, 169, 230, 312, 155, 49]})


def _symbols(*names: str) -> TraceSymbolTable:
    table = TraceSymbolTable()
    table.add_symbols(names)
    return table


# -- iterations and ranks --------------------------------------------------------------------
def test_iteration_filter_keeps_the_named_steps() -> None:
    df = pd.DataFrame({"iteration": [1, 2, 3, 1]})
    assert IterationFilter(1)(df).index.tolist() == [0, 3]
    assert IterationFilter([1, 3])(df).index.tolist() == [0, 2, 3]


def test_iteration_index_filter_counts_steps_not_rows() -> None:
    assert IterationIndexFilter(1)(STEPS).equals(STEPS.iloc[2:3])
    assert IterationIndexFilter([1, 2, 3])(STEPS).equals(STEPS.iloc[2:5])
    assert FirstIterationFilter()(STEPS).equals(STEPS.iloc[1:2])
    # -1 (outside any step) is never a step; a frame without a step comes back whole
    only_outside = pd.DataFrame({"iteration": [-1, -1]})
    assert len(IterationIndexFilter(0)(only_outside)) == 2
    assert IterationIndexFilter(0)(pd.DataFrame({"iteration": [-1, 10, 20]}))[
        "iteration"].tolist() == [10]


def test_iteration_index_beyond_the_steps_selects_nothing_and_keeps_the_columns(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="hta.common.trace_filter"):
        out = IterationIndexFilter(5)(STEPS)
    assert out.empty and list(out.columns) == ["iteration", "name"]
    assert "select none of the 5 steps" in caplog.text


def test_negative_step_index_counts_from_the_end() -> None:
    # HTA selects nothing for -1; here -1 is the last step, as in Python
    assert IterationIndexFilter(-1)(STEPS)["iteration"].tolist() == [554]
    assert IterationIndexFilter([0, -1])(STEPS)["iteration"].tolist() == [550, 554]


def test_rank_filter() -> None:
    df = pd.DataFrame({"rank": [0, 1, 2, 0]})
    assert RankFilter(0)(df).index.tolist() == [0, 3]
    assert RankFilter([1, 2])(df).index.tolist() == [1, 2]


@pytest.mark.parametrize("make", [IterationFilter, IterationIndexFilter, RankFilter])
@pytest.mark.parametrize("bad", ["b", 1.5, None, True, ["1"]])
def test_whole_number_filters_refuse_other_types(make, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="an int or a list of ints"):
        make(bad)


@pytest.mark.parametrize("f, column", [(IterationFilter(1), "iteration"),
                                       (IterationIndexFilter(0), "iteration"),
                                       (RankFilter(0), "rank"),
                                       (TimeRangeFilter((0, 100)), "ts")])
def test_a_frame_without_the_column_comes_back_whole_with_a_warning(f, column, caplog
                                                                    ) -> None:  # type: ignore[no-untyped-def]
    df = pd.DataFrame({"a": [1, 2]})
    with caplog.at_level(logging.WARNING, logger="hta.common.trace_filter"):
        assert f(df) is df
    assert f"no '{column}' column" in caplog.text


# -- time ranges ------------------------------------------------------------------------------
def test_time_range_on_a_plain_frame_is_in_its_own_unit() -> None:
    df = pd.DataFrame({"ts": [10, 20, 30], "dur": [5, 5, 5]})
    assert len(TimeRangeFilter((10, 35))(df)) == 3
    # an event ending after the range's end is left out; one starting before its start too
    df2 = pd.DataFrame({"ts": [10, 20, 30], "dur": [5, 5, 10]})
    assert TimeRangeFilter((10, 35))(df2).index.tolist() == [0, 1]
    assert TimeRangeFilter((11, 100))(df2).index.tolist() == [1, 2]
    assert TimeRangeFilter((100, 200))(df2).empty


def test_time_range_in_us_on_this_packages_ns_tables() -> None:
    # a table of this package (it has `kind`) holds ns: the µs range is compared in ns
    df = pd.DataFrame({"ts": [10_000, 20_000, 30_000], "dur": [5_000, 5_000, 10_000],
                       "kind": ["cpu_op"] * 3})
    assert TimeRangeFilter((10, 35))(df).index.tolist() == [0, 1]
    assert TimeRangeFilter((10_000, 35_000), unit="ns")(df).index.tolist() == [0, 1]
    assert TimeRangeFilter((10.5, 40))(df).index.tolist() == [1, 2]


@pytest.mark.parametrize("bad", [(100, 10), "bad", (1, 2, 3), (1, "2"), None, (True, 3)])
def test_time_range_refuses_a_bad_range(bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="time_range"):
        TimeRangeFilter(bad)
    with pytest.raises(ValueError, match="unit"):
        TimeRangeFilter((1, 2), unit="ms")


# -- names ------------------------------------------------------------------------------------
def test_name_filter_on_text_columns() -> None:
    df = pd.DataFrame({"s_name": ["aten::mm", "nccl::send", "aten::add"]})
    assert NameFilter("aten::.*")(df).index.tolist() == [0, 2]
    assert NameStringColumnFilter("aten::.*")(df).index.tolist() == [0, 2]
    text = pd.DataFrame({"name": ["aten::mm", "nccl::send"]})
    assert NameFilter("nccl")(text).index.tolist() == [1]
    assert NameFilter("nccl", name_column="name")(text).index.tolist() == [1]
    # re.match: from the start only
    assert NameFilter("mm")(text).empty


def test_name_filter_on_ids_with_a_symbol_table_given_here_or_at_the_call() -> None:
    table = _symbols("aten::mm", "nccl::send")
    df = pd.DataFrame({"name": [0, 1, 0]})
    assert NameFilter("aten::.*", symbol_table=table)(df).index.tolist() == [0, 2]
    assert NameFilter("aten::.*", table)(df).index.tolist() == [0, 2]
    assert NameFilter("aten::.*")(df, symbol_table=table).index.tolist() == [0, 2]
    # the call's table wins over the filter's
    other = _symbols("nccl::send", "aten::mm")
    assert NameFilter("aten::", table)(df, other).index.tolist() == [1]
    assert NameIdColumnFilter("nccl")(df, table).index.tolist() == [1]
    # an empty table knows no name
    assert NameFilter("aten::")(df, TraceSymbolTable()).empty


def test_name_filter_on_ids_without_a_table(caplog) -> None:  # type: ignore[no-untyped-def]
    ids = pd.DataFrame({"name": [0, 1], "s_name": ["aten::mm", "nccl::send"]})
    assert NameFilter("nccl")(ids).index.tolist() == [1]  # falls back to s_name
    bare = pd.DataFrame({"name": [1, 2, 3]})
    with caplog.at_level(logging.WARNING, logger="hta.common.trace_filter"):
        assert len(NameFilter("aten::.*")(bare)) == 3
        assert len(NameIdColumnFilter("aten::")(bare, None)) == 3
    assert "decode_symbol_ids" in caplog.text and "needs the symbol table" in caplog.text


def test_name_filter_on_an_empty_frame() -> None:
    empty = pd.DataFrame()
    assert NameFilter("aten::.*")(empty).empty
    assert MemCopyEventFilter("Memcpy HtoD")(empty).empty


# -- query, device, copies --------------------------------------------------------------------
def test_zero_duration_and_query_filters() -> None:
    df = pd.DataFrame({"dur": [0, 5, 10]})
    assert ZeroDurationFilter(df).index.tolist() == [1, 2]
    assert QueryFilter("dur >= 10")(df).index.tolist() == [2]
    assert isinstance(ZeroDurationFilter, Filter)


def test_device_filters_on_a_plain_frame_use_stream_and_correlation() -> None:
    df = pd.DataFrame({"stream": [1, -1, 2, 3], "correlation": [1, 1, 1, -1]})
    assert GPUKernelFilter()(df).index.tolist() == [0, 2]
    assert CPUOperatorFilter()(df).index.tolist() == [1]
    bare = pd.DataFrame({"a": [1]})
    assert GPUKernelFilter()(bare) is bare and CPUOperatorFilter()(bare) is bare


def test_device_filters_count_sync_records_as_gpu_with_a_symbol_table() -> None:
    table = _symbols("aten::mm", "Event Sync", "kernel_a")
    df = pd.DataFrame({"stream": [-1, -1, 7], "correlation": [-1, -1, 5],
                       "name": [0, 1, 2]})
    assert GPUKernelFilter()(df, table).index.tolist() == [1, 2]
    assert CPUOperatorFilter()(df, table).index.tolist() == [0]
    # without the table the sync record is a CPU row, as in HTA
    assert CPUOperatorFilter()(df).index.tolist() == [0, 1]


def test_device_filters_on_this_packages_tables_use_the_kind() -> None:
    df = pd.DataFrame({"kind": ["cpu_op", "computation", "memcpy_htod", "gpu_annotation",
                                "gpu_sync", "runtime_launch"],
                       "name": [0, 1, 2, 3, 4, 5], "stream": [-1, 7, 7, 7, -1, -1]})
    table = _symbols("op", "k", "Memcpy HtoD (Pinned -> Device)", "a", "Event Sync", "launch")
    assert GPUKernelFilter()(df).index.tolist() == [1, 2]
    assert GPUKernelFilter()(df, table).index.tolist() == [1, 2, 4]
    assert CPUOperatorFilter()(df).index.tolist() == [0, 5]


def test_memcpy_filter_by_type() -> None:
    table = _symbols("Memcpy HtoD", "gpu_memcpy", "aten::mm", "kernel",
                     "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH")
    df = pd.DataFrame({"name": [0, 2, 4, 5], "cat": [1, 3, 1, 1]})
    assert MemCopyEventFilter("Memcpy HtoD")(df, table).index.tolist() == [0, 2]
    assert MemCopyEventFilter("Memcpy HtoD", symbol_table=table)(df).index.tolist() == [0, 2]
    assert MemCopyEventFilter()(df, table).index.tolist() == [0, 2, 3]
    assert MemCopyEventFilter("nonexistent")(df, table).empty
    text = pd.DataFrame({"name": ["Memcpy DtoH", "aten::mm"], "cat": ["gpu_memcpy", "cpu_op"]})
    assert MemCopyEventFilter("Memcpy DtoH")(text).index.tolist() == [0]
    with pytest.raises(TypeError, match="memory_copy_type"):
        MemCopyEventFilter(3)  # type: ignore[arg-type]


# -- composites --------------------------------------------------------------------------------
def test_composite_filter_chains_its_filters() -> None:
    df = pd.DataFrame({"iteration": [1, 2, 3], "rank": [0, 0, 1]})
    assert CompositeFilter([IterationFilter([1, 2]), RankFilter(0)])(df).index.tolist() == [0, 1]
    assert CompositeFilter([])(df) is df


def test_composite_filter_refuses_what_is_not_a_filter_and_itself() -> None:
    with pytest.raises(TypeError, match="instances of Filter"):
        CompositeFilter(["not a filter"])  # type: ignore[list-item]
    f = CompositeFilter.__new__(CompositeFilter)
    with pytest.raises(ValueError, match="itself"):
        CompositeFilter.__init__(f, [f])


def test_symbol_table_grows_and_keeps_ids() -> None:
    table = TraceSymbolTable(["a"])
    table.add_symbols(["b", "a", "c"])
    assert table.get_sym_table() == ["a", "b", "c"]
    assert table.get_sym_id_map() == {"a": 0, "b": 1, "c": 2}
    assert table.find_matches(["b", "c"]) == [1, 2]
    assert table.get_symbol_names([2, 0, 9]) == {2: "c", 0: "a"}
    assert TraceSymbolTable().is_empty() and not table.is_empty()
    with pytest.raises(TypeError, match="a symbol is a str"):
        table.add_symbols([1])  # type: ignore[list-item]


def test_symbol_table_builds_from_frames_maps_and_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    df = pd.DataFrame({"name": ["a", "b", "a", "c"],
                       "cat": ["kernel", "cpu_op", "kernel", "kernel"]})
    table = TraceSymbolTable.create_from_df(df)
    assert table.get_sym_table() == ["kernel", "cpu_op", "a", "b", "c"]
    encoded = df.copy()
    table.encode_df(encoded)
    assert encoded["name"].tolist() == [2, 3, 2, 4] and encoded["cat"].tolist() == [0, 1, 0, 0]
    table.decode_df(encoded)
    assert encoded["s_name"].tolist() == df["name"].tolist()
    assert encoded["s_cat"].tolist() == df["cat"].tolist()
    with pytest.raises(ValueError, match="'name' holds int64"):
        TraceSymbolTable.create_from_df(pd.DataFrame({"name": [1], "cat": ["x"]}))
    with pytest.raises(KeyError, match="lacks"):
        TraceSymbolTable(["kernel"]).encode_df(df.copy())
    gaps = TraceSymbolTable.create_from_symbol_id_map({"A": 1, "B": 2, "C": 4})
    assert gaps.get_sym_table() == ["Undefined-0", "A", "B", "Undefined-3", "C"]
    combined = TraceSymbolTable.combine_symbol_tables([TraceSymbolTable(["x", "y"]),
                                                       TraceSymbolTable(["y", "z"])])
    assert combined.get_sym_id_map() == {"x": 0, "y": 1, "z": 2}
    clone = TraceSymbolTable.clone(combined)
    clone.add_symbols(["w"])
    assert "w" not in combined.sym_index and clone.get_sym_table()[:3] == ["x", "y", "z"]
    assert combined.get_sym_table_series().tolist() == ["x", "y", "z"]
    assert combined.get_sym_index_series().to_dict() == {"x": 0, "y": 1, "z": 2}
    path = tmp_path / "symbols.csv"
    combined.to_csv_file(path)
    assert TraceSymbolTable.from_csv_file(path).get_sym_table() == ["x", "y", "z"]
    with pytest.raises(FileNotFoundError):
        TraceSymbolTable.from_csv_file(tmp_path / "absent.csv")
    # ids written with one table, re-encoded with another
    old = TraceSymbolTable(["p", "q"])
    frame = pd.DataFrame({"name": [1, 0], "cat": [0, 0]})
    TraceSymbolTable(["q", "p"]).update_encoded_df(frame, old)
    assert frame["name"].tolist() == [0, 1] and frame["cat"].tolist() == [1, 1]
