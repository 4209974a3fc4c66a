"""Figures of the breakdowns: they build, say what they show (titles, axis units, rank
labels) and write standalone HTML."""

from __future__ import annotations

import pytest
from breakdown_cases import idle_case, load, mixed, overlap_rank

from hta.analysis.annotations import user_annotation_breakdown
from hta.analysis.idle import idle_time_breakdown
from hta.analysis.kernels import gpu_kernel_breakdown, kernel_type_breakdown
from hta.analysis.overlap import comm_comp_overlap
from hta.analysis.temporal import temporal_breakdown, temporal_breakdown_detail
from hta.plots.annotations import user_annotation_duration_figure, user_annotation_figure
from hta.plots.idle import idle_time_breakdown_figure
from hta.plots.kernels import kernel_duration_figure, kernel_pies_figure, kernel_type_figure
from hta.plots.overlap import comm_comp_overlap_figure
from hta.plots.temporal import temporal_breakdown_figure


@pytest.fixture
def two_ranks(tmp_path):
    return load(tmp_path, mixed(0), mixed(1))


def _check(fig, tmp_path, title_words, x_unit=None, y_unit=None):
    title = fig.layout.title.text
    assert title and all(w in title for w in title_words), title
    if y_unit is not None:
        assert y_unit in fig.layout.yaxis.title.text
    if x_unit is not None:
        assert x_unit in fig.layout.xaxis.title.text
    out = tmp_path / "fig.html"
    fig.write_html(out, include_plotlyjs="cdn")
    assert title.split()[0] in out.read_text()


def test_temporal(two_ranks, tmp_path):
    fig = temporal_breakdown_figure(temporal_breakdown(two_ranks.t))
    _check(fig, tmp_path, ["GPU time", "rank"], x_unit="rank", y_unit="(%)")
    assert [t.name for t in fig.data] == ["compute", "non-compute (communication, memory)",
                                          "idle"]
    assert list(fig.data[0].x) == ["rank 0", "rank 1"]
    assert fig.data[2].y[0] == round(100 * 21_600 / 62_000, 2)
    detail = temporal_breakdown_figure(temporal_breakdown_detail(two_ranks.t, per_iteration=True))
    assert [t.name for t in detail.data][1:3] == ["exposed communication", "exposed memory"]
    assert list(detail.data[0].x) == ["rank 0, step 1", "rank 1, step 1"]


def test_idle(tmp_path):
    a = load(tmp_path, idle_case())
    df = idle_time_breakdown(a.t, consecutive_kernel_delay_ns=1_000)
    fig = idle_time_breakdown_figure(df)
    _check(fig, tmp_path, ["idle", "stream"], x_unit="stream", y_unit="(%)")
    assert fig.data[0].name.startswith("host wait")
    assert list(fig.data[0].x) == ["rank 0, stream 7", "rank 0, stream 9", "rank 0, stream 24"]
    assert fig.data[0].y[0] == pytest.approx(100 * 33_500 / 48_700)
    absolute = idle_time_breakdown_figure(df, pctg=False)
    assert "(µs)" in absolute.layout.yaxis.title.text
    assert absolute.data[0].y[0] == 33.5


def test_kernels(two_ranks, tmp_path):
    types, table = gpu_kernel_breakdown(two_ranks.t)
    fig = kernel_type_figure(types)
    _check(fig, tmp_path, ["kernel type"])
    assert "COMPUTATION overlapping COMMUNICATION" in list(fig.data[0].labels)
    per_rank = kernel_type_figure(kernel_type_breakdown(two_ranks.t, by_rank=True))
    assert [a.text for a in per_rank.layout.annotations] == ["rank 0", "rank 1"]
    pies = kernel_pies_figure(table, "COMMUNICATION")
    _check(pies, tmp_path, ["COMMUNICATION", "per rank"])
    assert [a.text for a in pies.layout.annotations] == ["rank 0", "rank 1"]
    dist = kernel_duration_figure(table, "COMPUTATION")
    _check(dist, tmp_path, ["COMPUTATION", "duration", "min-max"], x_unit="rank",
           y_unit="(µs)")
    gemm = [t for t in dist.data if t.name == "ampere_sgemm_128x64_nn"][0]
    assert list(gemm.x) == ["rank 0", "rank 1"]
    assert list(gemm.y) == [10.0, 10.0]
    assert list(gemm.error_y.array) == [0.0, 0.0]
    triton = [t for t in dist.data if t.name == "triton_poi_fused_add_0"][0]
    assert list(triton.error_y.arrayminus) == pytest.approx([5.2 - 0.4] * 2)
    assert list(triton.error_y.array) == pytest.approx([10.0 - 5.2] * 2)


def test_overlap_with_a_rank_without_communication(tmp_path):
    a = load(tmp_path, overlap_rank(0, comm=[(0, 1_000)], compute=[(500, 1_000)]),
             overlap_rank(1, comm=[], compute=[(0, 1_000)]))
    fig = comm_comp_overlap_figure(comm_comp_overlap(a.t))
    _check(fig, tmp_path, ["Communication", "rank"], x_unit="rank", y_unit="(%)")
    assert list(fig.data[0].x) == ["rank 0", "rank 1"]
    assert [n.text for n in fig.layout.annotations] == ["no communication"]
    assert fig.layout.annotations[0].x == "rank 1"


def test_annotations(tmp_path):
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0)
    b.gpu("forward", "gpu_user_annotation", 0, 10_000)
    b.gpu("backward", "gpu_user_annotation", 10_000, 20_000)
    df = user_annotation_breakdown(load(tmp_path, b).t)
    fig = user_annotation_figure(df)
    _check(fig, tmp_path, ["annotation", "rank"])
    assert sorted(fig.data[0].labels) == ["backward", "forward"]
    bars = user_annotation_duration_figure(df)
    _check(bars, tmp_path, ["annotation", "duration"], x_unit="rank", y_unit="(µs)")
    assert [a.text for a in bars.layout.annotations] == ["backward", "forward"]


def test_long_kernel_names_are_cut_in_labels_but_kept_in_hover():
    import pandas as pd

    from hta.plots._figure_parts import pie_grid

    name = "void " + "x" * 200
    fig = pie_grid([("rank 0", pd.DataFrame({"name": [name, "b"], "sum (us)": [1.0, 2.0]}))],
                   "name", "sum (us)", "title")
    label = fig.data[0].labels[0]
    assert len(label) == 70 and label.endswith("…")
    assert fig.data[0].customdata[0] == name


def test_figures_have_their_own_titles_and_no_step_minus_one() -> None:
    """Issue 40, item 6: the two temporal and the two idle figures of the report each
    have a title of their own; the per-step figure draws no "step -1" (the time outside
    the steps); pie labels stay inside their slices (never over a subplot title)."""
    import pandas as pd
    from conftest import SAMPLE_TRACES

    from hta.report.builder import build_sections
    from hta.trace_analysis import TraceAnalysis

    per_step = pd.DataFrame({
        "rank": [0, 0, 0], "iteration": [-1, 1, 2],
        **{c: [1.0, 2.0, 3.0] for c in ("kernel_time(us)", "compute_time(us)",
                                        "exposed_comm_time(us)", "exposed_memory_time(us)",
                                        "idle_time(us)")},
        **{c: [25.0] * 3 for c in ("compute_time_pctg", "exposed_comm_time_pctg",
                                   "exposed_memory_time_pctg", "idle_time_pctg")}})
    fig = temporal_breakdown_figure(per_step)
    assert list(fig.data[0].x) == ["rank 0, step 1", "rank 0, step 2"]
    assert "per rank and step" in fig.layout.title.text
    a = TraceAnalysis(trace_dir=SAMPLE_TRACES / "synthetic_4rank", cache=False, progress=False)
    titles = [f.title for s in build_sections(a) for f in s.figures]
    assert len(titles) == len(set(titles)), sorted(titles)
    pies = kernel_pies_figure(a.get_gpu_kernel_breakdown(visualize=False)[1], "COMPUTATION")
    assert {t.textposition for t in pies.data} == {"inside"}
    # slices are named by display name (function and key template parameters), all apart
    labels = list(pies.data[0].labels)
    assert "vectorized_elementwise_kernel<4, threshold_kernel_impl::λ, …>" in labels
    assert len(set(labels)) == len(labels)
