"""HTA's example notebooks' calls, made through HTA's module names, on the shared traces.

The reference figures come from HTA 0.5 (pandas<3, in its own virtual environment) on the
same folders, printed by this script run with that environment's python::

    from hta.common.trace import Trace
    from hta.common.trace_filter import *
    t = Trace(trace_dir=D + "/trace_filter"); t.parse_traces(); t.decode_symbol_ids()
    df, st = t.get_trace(0), t.symbol_table
    print(len(NameFilter("aten::.*mm")(df, st)))                                  # 378
    print(len(TimeRangeFilter((1682725898237042, 1682725898240570))(df)))         # 93
    print(len(CompositeFilter([IterationIndexFilter(0), GPUKernelFilter(),
                               NameFilter("^nccl", symbol_table=st)])(df)))       # 5
    print(sorted(df.iteration.unique()))                                          # 551, 552
    from hta.trace_diff import LabeledTrace, DeviceType, TraceDiff
    c = LabeledTrace(label="Control", trace_dir=D + "/trace_diff/control")
    x = LabeledTrace(label="Test", trace_dir=D + "/trace_diff/test")
    print(c.ranks(), x.ranks(), c.iterations())                    # [3] [1] 1009..1014
    d = TraceDiff.compare_traces(c, x, 3, 1, 1010, 1010, DeviceType.CPU)
    print(d.shape, d[["Control_counts", "Test_counts"]].sum().tolist())  # (231, 7) 10641 9124
    print({k: len(v) for k, v in TraceDiff.ops_diff(c, x, 3, 1, 1010, 1010,
                                                    DeviceType.CPU).items()})
    k = TraceDiff.ops_diff(c, x, device_type=DeviceType.GPU)       # added 27, deleted 66
    from hta.utils.utils import shorten_name                       # 26 and 19 short names
    from hta.trace_analysis import TraceAnalysis
    from hta.analyzers.cupti_counter_analysis import CUDA_SASS_INSTRUCTION_COUNTER_FLOPS
    g = TraceAnalysis(trace_dir=D + "/cupti_profiler").get_cupti_counter_data_with_operators(
        ranks=[0])[0]                                              # 77 rows
    print(sum(g[c] * f for c, f in CUDA_SASS_INSTRUCTION_COUNTER_FLOPS.items()).sum())
    # 80231038456; row 0: top_level_op aten::rand, bottom_level_op aten::uniform_

with ``D = "/work/shared/traces/hta"``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_TRACES, needs_shared

SHARED = SHARED_TRACES
TRACE_FILTER = SHARED / "trace_filter"
TRACE_DIFF = SHARED / "trace_diff"
CUPTI = SHARED / "cupti_profiler"

needs_filter = needs_shared("trace_filter")
needs_diff = needs_shared("trace_diff")
needs_cupti = needs_shared("cupti_profiler")


@pytest.fixture(scope="module")
def parsed():  # type: ignore[no-untyped-def]
    from hta.common.trace import Trace

    t = Trace(trace_dir=str(TRACE_FILTER))
    t.parse_traces()
    t.decode_symbol_ids()
    return t


@needs_filter
def test_trace_parses_and_decodes_like_hta(parsed) -> None:  # type: ignore[no-untyped-def]
    assert parsed.get_ranks() == [0, 1]
    df = parsed.get_trace(0)
    for col in ("iteration", "index", "ts", "dur", "stream", "s_cat", "s_name"):
        assert col in df.columns
    # HTA 0.5: sorted(df.iteration.unique()) == [551, 552] (Trace keeps the last step)
    assert parsed.get_iterations(0) == [551, 552]
    assert set(df["s_cat"]) >= {"cpu_op", "kernel"}


@needs_filter
def test_trace_filters_select_what_hta_selects(parsed) -> None:  # type: ignore[no-untyped-def]
    from hta.common.trace_filter import (
        CompositeFilter,
        FirstIterationFilter,
        GPUKernelFilter,
        IterationIndexFilter,
        NameFilter,
        TimeRangeFilter,
    )

    df, st = parsed.get_trace(0), parsed.symbol_table
    # HTA 0.5 on rank 0: 378, 93 and 5 rows (trace_filter_demo's three cells)
    assert len(NameFilter("aten::.*mm")(df, st)) == 378
    assert len(TimeRangeFilter((1682725898237042, 1682725898240570))(df)) == 93
    nccl = CompositeFilter([IterationIndexFilter(0), GPUKernelFilter(),
                            NameFilter("^nccl", symbol_table=st)])(df)
    assert len(nccl) == 5 and (nccl["iteration"] == 551).all()
    # ids without the table fall back to the decoded s_name column
    assert len(NameFilter("^nccl")(GPUKernelFilter()(df))) == 10
    # HTA counts every row with a stream and a correlation (602 here, GPU user
    # annotations included); ours keeps GPU work only, by kind
    first = CompositeFilter([FirstIterationFilter(), GPUKernelFilter()])(df)
    assert set(first["kind"].astype(str)) <= {"computation", "communication", "memset",
                                               "memcpy_htod", "memcpy_dtoh", "memcpy_dtod"}
    assert (first["iteration"] == 551).all()
    ns = TimeRangeFilter((1682725898237042000, 1682725898240570000), unit="ns")(df)
    assert len(ns) == 93


@needs_filter
def test_rank_filter_needs_a_rank_column(parsed, caplog) -> None:  # type: ignore[no-untyped-def]
    from hta.common.trace_filter import RankFilter

    frames = parsed.get_all_traces()
    both = pd.concat([f.assign(rank=r) for r, f in frames.items()], ignore_index=True)
    assert len(RankFilter(1)(both)) == len(frames[1])
    # as HTA: a frame without a rank column comes back whole, with a warning
    one = parsed.get_trace(0)
    assert RankFilter(0)(one) is one
    assert "no 'rank' column" in caplog.text


@needs_filter
def test_call_graph_follows_parent_links(parsed) -> None:  # type: ignore[no-untyped-def]
    from hta.common.trace_call_graph import CallGraph

    cg = CallGraph(parsed, ranks=[0, 1])
    df = parsed.get_trace(0)
    deep = int(df.loc[df["depth"] == df["depth"].max(), "index"].iloc[0])
    stack = cg.get_stack_of_node(deep, 0)
    assert stack[-1] == deep and len(stack) == int(df["depth"].max()) + 1
    assert deep in cg.get_children(stack[-2], 0)


@needs_filter
def test_timelines_draw_the_filtered_gpu_work(parsed) -> None:  # type: ignore[no-untyped-def]
    from hta.analysis.timeline import timeline_segments
    from hta.analyzers.timeline import frame_trace, timeline_gpu_kernels_figure
    from hta.common.timeline import PlotFormat, Timeline
    from hta.common.trace_filter import GPUKernelFilter, NameFilter

    df, st = parsed.get_trace(0), parsed.symbol_table
    fig = Timeline(df, st, filter_func=GPUKernelFilter()).plot("gpu", PlotFormat.Fig)
    assert fig is not None and len(fig.data) > 0
    nccl = Timeline(df, st, filter_func=NameFilter("^nccl"))
    assert len(nccl.df) == 20  # 10 kernels and the 10 nccl:all_reduce annotations
    segments = timeline_segments(frame_trace(nccl.df, st))
    assert len(segments) == 10 and set(segments["kind"]) == {"communication"}
    ranks = list(parsed.get_all_traces())
    both = pd.concat([parsed.get_trace(r) for r in ranks], keys=ranks,
                     names=["rank", "idx"]).reset_index()
    fig2 = timeline_gpu_kernels_figure("t", both, st, ranks=[0, 1], iterations=[551])
    assert len(fig2.data) > 0


def test_not_supported_names_raise_and_say_what_instead() -> None:
    from hta.common import execution_trace
    from hta.common.timeline import align_module_with_kernels
    from hta.configs.config import HtaConfig

    for call, hint in ((lambda: execution_trace.load_execution_trace("x"), "op_args"),
                       (lambda: align_module_with_kernels(None, [], None),
                        "get_gpu_kernels_with_user_annotations"),
                       (lambda: HtaConfig.get_test_data_path("h100"), "trace_dir")):
        with pytest.raises(NotImplementedError, match=hint):
            call()


@needs_filter
def test_parser_config_joins_input_shapes() -> None:
    from hta.common.trace import Trace
    from hta.configs.parser_config import ParserConfig

    before = ParserConfig.get_default_cfg()
    cfg = ParserConfig.get_default_cfg()
    cfg.add_args(ParserConfig.ARGS_INPUT_SHAPE)
    ParserConfig.set_default_cfg(cfg)
    try:
        t = Trace(trace_dir=str(TRACE_FILTER))
        t.parse_traces(use_multiprocessing=False)
    finally:
        ParserConfig.set_default_cfg(before)
    df = t.get_trace(0)
    assert {"input_dims", "input_type"} <= set(df.columns)
    op_args = t.t.rank(0).table("op_args").set_index("index")
    joined = df.set_index("index").loc[op_args.index, "input_dims"]
    assert df["input_dims"].notna().sum() == len(op_args) == 2310
    assert (joined == op_args["input_dims"]).all()
    plain = Trace(trace_dir=str(TRACE_FILTER))
    plain.parse_traces()
    assert "input_dims" not in plain.get_trace(0).columns


@needs_diff
def test_labeled_trace_and_diff_as_hta() -> None:
    from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff
    from hta.utils.utils import flatten_column_names, shorten_name

    control = LabeledTrace(label="Control", trace_dir=str(TRACE_DIFF / "control"))
    test = LabeledTrace(label="Test", trace_dir=str(TRACE_DIFF / "test"))
    # HTA 0.5: [3] [1] and steps 1009..1014 for both
    assert control.ranks() == [3] and test.ranks() == [1]
    assert control.iterations() == test.iterations() == list(range(1009, 1015))
    df = TraceDiff.compare_traces(control, test, 3, 1, 1010, 1010, DeviceType.CPU)
    # HTA 0.5: (231, 7), these columns, counts summing to 10641 and 9124
    assert df.shape == (231, 7)
    assert list(df.columns) == ["Control_counts", "Control_total_duration", "Test_counts",
                                "Test_total_duration", "diff_counts", "diff_duration",
                                "counts_change_categories"]
    assert df[["Control_counts", "Test_counts"]].sum().tolist() == [10641, 9124]
    ops = TraceDiff.ops_diff(control, test, 3, 1, 1010, 1010, DeviceType.CPU)
    # HTA 0.5: added 5, deleted 72, increased 20, decreased 56, unchanged 78
    assert {k: len(v) for k, v in ops.items()} == {
        "added": 5, "deleted": 72, "increased": 20, "decreased": 56, "unchanged": 78}
    kernels = TraceDiff.ops_diff(control, test, device_type=DeviceType.GPU)
    # HTA 0.5: 27 added and 66 deleted kernels; 26 and 19 distinct short names
    assert len(kernels["added"]) == 27 and len(kernels["deleted"]) == 66
    assert len({shorten_name(n) for n in kernels["added"]}) == 26
    assert len({shorten_name(n) for n in kernels["deleted"]}) == 19
    wide = pd.DataFrame([[1, 2]], columns=pd.MultiIndex.from_tuples([("a", "x"), ("b", "")]))
    flatten_column_names(wide)
    assert list(wide.columns) == ["a_x", "b"]


@needs_cupti
def test_cupti_flops_per_rank_as_hta() -> None:
    from hta.analyzers.cupti_counter_analysis import CUDA_SASS_INSTRUCTION_COUNTER_FLOPS
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir=CUPTI, cache=False, progress=False)
    table = analyzer.get_cupti_counter_data_with_operators(ranks=[0])
    assert "rank" in table.columns  # still the one table with a rank column
    kernels = table[0]
    assert list(kernels.index[:3]) == [0, 1, 2]
    kernels["flops"] = 0
    for counter, flops in CUDA_SASS_INSTRUCTION_COUNTER_FLOPS.items():
        kernels["flops"] += kernels[counter] * flops
    # HTA 0.5: 77 kernels, 80231038456 FLOPs in all; row 0 under aten::rand / aten::uniform_
    assert len(kernels) == 77
    assert int(kernels["flops"].sum()) == 80231038456
    assert kernels.loc[0, "top_level_op"] == "aten::rand"
    assert kernels.loc[0, "bottom_level_op"] == "aten::uniform_"
    assert len(CUDA_SASS_INSTRUCTION_COUNTER_FLOPS) == 9
    with pytest.raises(KeyError, match="ranks in this result"):
        table[5]


@needs_filter
def test_launch_stats_index_by_rank() -> None:
    from hta.facade.per_rank import PerRankFrame
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir=TRACE_FILTER, cache=False, progress=False)
    stats = analyzer.get_cuda_kernel_launch_stats(visualize=False)
    assert isinstance(stats, PerRankFrame) and isinstance(stats, pd.DataFrame)
    per_rank = stats.per_rank()
    assert sorted(per_rank) == [0, 1]
    assert len(stats[0]) + len(stats[1]) == len(stats)
    assert (stats[1]["rank"] == 1).all()
    assert stats[np.int64(1)].equals(stats[1])
    # column access and derived tables are unchanged
    assert stats["rank"].nunique() == 2
    assert type(stats[stats["rank"] == 0]) is pd.DataFrame


SIMPLE_ADD = SHARED / "critical_path" / "simple_add"


@needs_shared("critical_path", "simple_add")
def test_critical_path_graph_saves_and_restores(tmp_path: Path) -> None:
    from hta.analyzers.critical_path_analysis import CPGraph, restore_cpgraph
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir=SIMPLE_ADD, cache=False, progress=False)
    annotation = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
    cp_graph, path = analyzer.critical_path_analysis(rank=0, annotation=annotation,
                                                     instance_id=1)
    assert isinstance(cp_graph, CPGraph) and len(path) == len(cp_graph.path_edges)
    zip_file = cp_graph.save(out_dir=tmp_path / "saved")
    assert Path(zip_file).is_file()
    restored = restore_cpgraph(zip_filename=zip_file, t_full=analyzer.t, rank=0)
    assert len(restored.nodes) == len(cp_graph.nodes) == cp_graph.num_nodes
    assert restored.critical_path_edges_set == cp_graph.critical_path_edges_set
    assert restored.summary().equals(cp_graph.summary())
    restored.path_edges = restored.path_edges[:0]
    assert restored.critical_path() is True
    assert restored.critical_path_edges_set == cp_graph.critical_path_edges_set
    with pytest.raises(KeyError):
        restore_cpgraph(zip_filename=zip_file, t_full=analyzer.t, rank=1)
