"""The breakdown methods of TraceAnalysis: thin wrappers with HTA's names and returns."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from breakdown_cases import idle_case, load, mixed

import hta.facade.breakdown as facade


@pytest.fixture
def shown(monkeypatch):
    figs = []
    monkeypatch.setattr(facade, "show", figs.append)
    return figs


def test_temporal_and_detail(tmp_path, shown):
    a = load(tmp_path, mixed(0), mixed(1))
    df = a.get_temporal_breakdown()
    assert df["rank"].tolist() == [0, 1] and len(shown) == 1
    assert shown[0].layout.title.text.startswith("GPU time breakdown")
    assert a.get_temporal_breakdown(ranks=[1], visualize=False)["rank"].tolist() == [1]
    detail = a.get_temporal_breakdown_detail(per_iteration=True, visualize=False)
    assert detail["iteration"].tolist() == [1, 1]
    assert len(shown) == 1


def test_hta_positional_visualize_is_caught(tmp_path):
    a = load(tmp_path, mixed(0))
    with pytest.raises(TypeError, match="visualize=False by keyword"):
        a.get_temporal_breakdown(False)
    with pytest.raises(TypeError, match="visualize"):
        a.get_gpu_kernel_breakdown(False)


def test_idle_threshold_names(tmp_path, shown, caplog):
    a = load(tmp_path, idle_case())
    df, stats = a.get_idle_time_breakdown(consecutive_kernel_delay_ns=1_000,
                                          show_idle_interval_stats=True)
    assert stats is not None and len(shown) == 1
    kw = df.set_index(["stream", "idle_category"]).loc[(7, "kernel_wait"), "idle_time"]
    assert kw == 1.2
    with caplog.at_level(logging.WARNING, logger="hta.facade.breakdown"):
        same, none = a.get_idle_time_breakdown(consecutive_kernel_delay=1_000, visualize=False)
    pd.testing.assert_frame_equal(df, same)
    assert none is None
    assert "taken as 1000 ns" in caplog.text
    with pytest.raises(ValueError, match="not both"):
        a.get_idle_time_breakdown(consecutive_kernel_delay_ns=1, consecutive_kernel_delay=1)


def test_kernel_breakdown_pair_and_figures(tmp_path, shown):
    a = load(tmp_path, mixed(0))
    types, table = a.get_gpu_kernel_breakdown(num_kernels=5)
    assert list(types.columns) == ["kernel_type", "sum", "percentage"]
    assert {"sum (us)", "mean (us)", "stddev", "kernel_type", "rank"} <= set(table.columns)
    # one type pie, then per kernel type: pies per rank and the duration distribution
    assert len(shown) == 1 + 2 * 3
    _, no_mem = a.get_gpu_kernel_breakdown(include_memory_kernels=False, visualize=False)
    assert "MEMORY" not in set(no_mem["kernel_type"])


def test_renderer_is_passed_to_plotly(tmp_path, monkeypatch):
    import plotly.graph_objects as go

    used = []
    monkeypatch.setattr(go.Figure, "show", lambda self, renderer=None: used.append(renderer))
    a = load(tmp_path, mixed(0))
    a.get_gpu_kernel_breakdown(image_renderer="notebook")
    assert used and set(used) == {"notebook"}


def test_overlap_and_annotations(tmp_path, shown):
    a = load(tmp_path, mixed(0))
    df = a.get_comm_comp_overlap()
    assert df["comp_comm_overlap_pctg"].tolist() == [50.0] and len(shown) == 1
    ann = a.get_gpu_user_annotation_breakdown(use_gpu_annotation=False)
    assert ann["name"].tolist() == ["ProfilerStep#1"]
    assert len(shown) == 3
    assert a.get_gpu_user_annotation_breakdown().empty  # no GPU annotations: no figure
    assert len(shown) == 3
