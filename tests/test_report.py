"""The HTML report builder (hta.report.builder) without a browser: escaping, formatting,
sections on a hand-built job and on real traces, failures kept inside their section."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from conftest import shared_trace
from overview_cases import GEMM, write_job

from hta.report import builder, context
from hta.report.builder import (
    SECTIONS,
    build_report,
    build_sections,
    figure_json,
    format_cell,
    table_of,
    write_report,
)
from hta.report.packing import report_figures, report_html
from hta.trace_analysis import TraceAnalysis


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> TraceAnalysis:
    folder = write_job(tmp_path_factory.mktemp("report_job"))
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


def test_figure_json_cannot_close_its_script_block() -> None:
    name = "</script><img src=x onerror=alert(1)> & \u2028"
    fig = go.Figure(go.Bar(x=[name], y=[1], name=name))
    text = figure_json(fig)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text)["data"][0]["x"] == [name]


@pytest.mark.parametrize("value, text", [
    (None, "-"), (float("nan"), "-"), (np.float64("inf"), "-"), (pd.NA, "-"),
    (3, "3"), (np.int64(1234567), "1,234,567"), (1234.56789, "1,234.568"),
    (np.float32(0.5), "0.500"), (True, "yes"), (np.bool_(False), "no"), ("<b>x</b>", "<b>x</b>"),
])
def test_format_cell(value: object, text: str) -> None:
    assert format_cell(value) == text


def test_table_of_keeps_the_first_rows_and_says_so() -> None:
    frame = pd.DataFrame({"name": [f"k{i}" for i in range(60)], "sum (us)": np.arange(60.0)})
    table = table_of(frame, "t", max_rows=50)
    assert table.headers == ["name", "sum (us)"] and table.numeric == [False, True]
    assert len(table.rows) == 50 and table.rows[1] == ["k1", "1.000"]
    assert table.note == "First 50 of 60 rows."
    assert table_of(frame.head(3), "t").note == ""


def test_sections_of_a_hand_built_job(job: TraceAnalysis) -> None:
    sections = build_sections(job)
    assert [s.id for s in sections] == [sid for sid, *_ in SECTIONS]
    assert all(s.error == "" for s in sections), [(s.id, s.error) for s in sections]
    by_id = {s.id: s for s in sections}
    times, _, causes = by_id["overview"].tables[:3]
    rows = {r[0]: dict(zip(times.headers, r)) for r in times.rows}
    assert rows["0"]["compute_time(us)"] == "46.000" and rows["1"]["compute_time(us)"] == "66.000"
    rows = {r[0]: dict(zip(causes.headers, r)) for r in causes.rows}
    assert rows["0"]["host_wait(us)"] == "214.000"
    assert "Slowest rank: 1" in by_id["overview"].notes[0]
    top = by_id["overview"].tables[4]
    assert top.rows[0][0] == GEMM
    for sid in ("temporal", "idle", "kernels", "overlap", "queue", "bandwidth", "operators",
                "critical-path"):
        assert by_id[sid].figures, sid
        assert by_id[sid].definitions, sid
    # no gpu_user_annotation in this job: the CPU ranges (ProfilerStep#1, #2) are shown
    assert by_id["annotations"].figures
    assert by_id["annotations"].intro == (
        "Time per annotation name, from the CPU annotations (user_annotation).")
    # "late_kernel" matches no kind rule (GEMM, NCCL and relu, an elementwise family, do)
    unclassified = by_id["unclassified"].tables[0]
    assert [(r[0], r[1], r[2]) for r in unclassified.rows] == [
        ("0", "late_kernel", "2"), ("1", "late_kernel", "2")]


def test_report_html(job: TraceAnalysis, tmp_path: Path) -> None:
    html = report_html(build_report(job, title="a <b>title</b>"))
    assert "<title>a &lt;b&gt;title&lt;/b&gt;</title>" in html
    ids = re.findall(r'<div class="figure" id="(fig-\d+)"', html)
    data = report_figures(html)
    assert ids and sorted(data) == sorted(ids)
    out = write_report(job, tmp_path / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(FileExistsError, match="pass force=True"):
        write_report(job, out)
    write_report(job, out, force=True, iterations=[2], ranks=[1])
    text = report_html(out.read_text())
    assert "steps analysed" in text and "1 (1) of world size 2" in text


def test_a_failing_analysis_stays_in_its_section(job: TraceAnalysis,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: object, section: object) -> None:
        raise RuntimeError("boom <here>")

    sections = [(sid, title, intro, broken if sid == "queue" else fn)
                for sid, title, intro, fn in SECTIONS]
    monkeypatch.setattr(builder, "SECTIONS", sections)
    html = report_html(build_report(job))
    assert "This analysis failed on this trace: RuntimeError: boom &lt;here&gt;" in html
    assert html.count('<span class="badge err">failed</span>') == 1
    assert '<section id="bandwidth">' in html


def test_unknown_rank_is_a_clear_error(job: TraceAnalysis) -> None:
    with pytest.raises(KeyError, match=r"rank 5 is not loaded; loaded ranks: \[0, 1\]"):
        build_sections(job, ranks=[5])


@pytest.mark.parametrize("folder", ["amd_trace", "cpu_only", "mixed_files",
                                    "ns_resolution_trace", "critical_path/alexnet"])
def test_every_section_builds_on_real_traces(folder: str) -> None:
    analyzer = TraceAnalysis(trace_dir=shared_trace(*folder.split("/")), cache=False,
                             progress=False)
    sections = build_sections(analyzer)
    assert [(s.id, s.error) for s in sections if s.error] == []
    for s in sections:
        for fig in s.figures:
            assert json.loads(fig.json)["data"], (s.id, fig.title)


def test_long_time_series_are_thinned_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context, "MAX_SERIES_POINTS", 3)
    series = pd.DataFrame({"rank": [0] * 8 + [1] * 2, "ts": np.arange(10),
                           "queue_length": [0, 5, 1, 9, 2, 0, 3, 1, 4, 4]})
    shown, note = context.thin(series, ["rank"], ["queue_length"])
    # rank 0: 8 points over a budget of 3: one time bin, its first (0), lowest (0, 5),
    # highest (3) and last (7) rows; rank 1: 2 points, both kept
    assert shown["ts"].tolist() == [0, 3, 7, 8, 9]
    assert note.startswith("Lines with more than 3 points")
    kept, no_note = context.thin(series.head(3), ["rank"], ["queue_length"])
    assert len(kept) == 3 and no_note == ""


def test_a_figure_of_many_lines_shares_one_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 lines of 5,000 points against a budget of 80,000 for the figure: at most 1,250
    a line instead of all 320,000, and never under the floor per line."""
    monkeypatch.setattr(context, "MAX_FIGURE_POINTS", 80_000)
    monkeypatch.setattr(context, "MAX_SERIES_POINTS", 200_000)
    series = pd.DataFrame({"rank": np.repeat(np.arange(64), 5_000),
                           "ts": np.tile(np.arange(5_000), 64),
                           "queue_length": np.tile(np.arange(5_000) % 7, 64)})
    shown, note = context.thin(series, ["rank"], ["queue_length"])
    sizes = shown.groupby("rank").size()
    assert (sizes <= 1_250).all() and (sizes > 600).all()
    assert note.startswith("Lines with more than 1,250 points")
    assert set(shown["queue_length"]) == set(range(7))  # every level still drawn
    monkeypatch.setattr(context, "MAX_FIGURE_POINTS", 640)  # the floor per line holds
    shown, note = context.thin(series, ["rank"], ["queue_length"])
    assert (shown.groupby("rank").size() <= context.MIN_LINE_POINTS).all()
    assert note.startswith(f"Lines with more than {context.MIN_LINE_POINTS:,} points")


# -- readable tables and distinct names (issue 28, item 5) ----------------------------------
CUTLASS = [  # two kernels that differ only in their template arguments
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
    "(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>"
    "(cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4::Params)",
]


@pytest.mark.parametrize("column, words, unit", [
    ("not_computing(us)", "not computing", "µs"), ("sum (us)", "sum", "µs"),
    ("idle_time_pctg", "idle time", "%"), ("share(%)", "share", "%"),
    ("mean_bw_gbps", "mean bw", "GB/s"), ("busbw(GB/s)", "busbw", "GB/s"),
    ("duration(ns)", "duration", "ns"), ("peak_time (UTC)", "peak time", "UTC"),
    ("count", "count", ""), ("25%", "25%", ""), ("kernel_type", "kernel type", ""),
])
def test_column_label(column: str, words: str, unit: str) -> None:
    assert context.column_label(column) == (words, unit)


def test_each_unit_is_said_once() -> None:
    cols = ["rank", "window(us)", "not_computing(us)", "idle_pctg"]
    labels, title = context.table_labels(cols, "Coverage")
    assert labels == ["rank", "window (µs)", "not computing (µs)", "idle (%)"]
    assert title == "Coverage"  # two units: each header says its own
    labels, title = context.table_labels(cols[:3], "Per rank")
    assert labels == ["rank", "window", "not computing"] and title == "Per rank (µs)"
    labels, title = context.table_labels(cols, "Idle (times in µs)")
    assert labels == ["rank", "window", "not computing", "idle (%)"]
    assert title == "Idle (times in µs)"


def test_different_names_never_read_the_same() -> None:
    frame = pd.DataFrame({"name": CUTLASS + ["cutlass::Kernel2", CUTLASS[0]],
                          "sum (us)": [1.0, 2.0, 3.0, 4.0]})
    table = table_of(frame, "Top kernels")
    shown = [r[0] for r in table.rows]
    assert len(set(shown[:3])) == 3, shown  # three names, three texts
    assert shown[3] == shown[0]  # the same name, the same text
    assert all(len(s) <= context.LONG_NAME + 4 for s in shown)
    assert [h[0] for h in table.hover] == [CUTLASS[0], CUTLASS[1], "", CUTLASS[0]]
    assert table.headers == ["name", "sum (us)"] and table.labels == ["name", "sum"]
    assert table.title == "Top kernels (µs)"


def test_report_top_kernels_keep_template_kernels_apart(tmp_path: Path) -> None:
    """The overview's top-kernels table of a job running both cutlass kernels shows two
    different names, each with its full name on hover; its headers are words."""
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0, world_size=1)
    b.annotation("ProfilerStep#1", 0, 100_000)
    for i, name in enumerate(CUTLASS * 3):
        b.launch_kernel(name, cpu_ts=1_000 + 10_000 * i, cpu_dur=500,
                        gpu_ts=3_000 + 10_000 * i, gpu_dur=4_000 + 1_000 * (i % 2))
    b.write(tmp_path / "job" / "rank-0.json")
    a = TraceAnalysis(trace_dir=tmp_path / "job", cache=False, progress=False)
    ctx = builder._context(a, None, None, None)
    section = context.Section("overview", "Overview")
    next(build for sid, *_, build in SECTIONS if sid == "overview")(ctx, section)
    top = next(t for t in section.tables if t.title.startswith("Top kernels"))
    names = [r[top.headers.index("name")] for r in top.rows]
    full = [h[top.headers.index("name")] or r[top.headers.index("name")]
            for r, h in zip(top.rows, top.hover)]
    assert sorted(full) == sorted(CUTLASS) and len(set(names)) == 2, names
    assert not any("_" in label or "(us)" in label for label in top.labels), top.labels
    html = context_html(section)
    assert 'title="total(us)"' in html and ">total (µs)</th>" in html
    for name in CUTLASS:
        assert f'title="{escape(name)}"' in html


def context_html(section: context.Section) -> str:
    """One section rendered by the report's template."""
    from hta.report.render import render

    return render([section], [], "t", plotlyjs="cdn")


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_kernel_duration_panels_leave_room_for_the_axis_above(n: int) -> None:
    """Between two panels, room for the upper one's tick labels and axis title and the
    lower one's title (about 100 px at Plotly's default fonts), whatever the count."""
    from hta.plots._figure_parts import PANEL_GAP_PX
    from hta.plots.kernels import kernel_duration_figure

    names = [f"void k{i}<float, {i}>(Params)" for i in range(n - 2)] + CUTLASS[: min(n, 2)]
    df = pd.DataFrame([{"name": k, "rank": r, "kernel_type": "COMPUTATION",
                        "sum (us)": 10.0 * (i + 1), "mean (us)": 5.0, "min (us)": 4.0,
                        "max (us)": 6.0, "count": 2} for i, k in enumerate(names)
                       for r in range(2)])
    fig = kernel_duration_figure(df)
    layout = fig.layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    axes = sorted((layout[k] for k in layout if k.startswith("yaxis")),
                  key=lambda a: -a.domain[1])
    assert len(axes) == n
    for upper, lower in zip(axes, axes[1:]):
        assert (upper.domain[0] - lower.domain[1]) * plot_px >= min(PANEL_GAP_PX, 100) - 1
    titles = [a.text for a in layout.annotations]
    assert len(set(titles)) == n and not any("<" in t for t in titles)
    assert all(a.hovertext for a in layout.annotations if len(a.text) > 100)


def test_figures_keep_different_names_apart() -> None:
    """Names equal in their first 70 characters would be one pie slice or one bar:
    the figures show them apart, each with its full name in the data."""
    from hta.plots._figure_parts import distinct_short
    from hta.plots.diff import duration_diff_figure
    from hta.plots.kernels import kernel_pies_figure

    long = ["k" * 80 + "<float>", "k" * 80 + "<half>", "k" * 80 + "<half>"]
    shown = distinct_short(long, 70)
    assert shown[0] != shown[1] and shown[1] == shown[2]
    assert all(len(s) <= 70 for s in shown)
    assert distinct_short(["a" * 80 + "x", "a" * 80 + "y"], 20)[0].endswith("x")
    # two kernels of a real trace (trace_diff/control) that both read
    # "void at::native::(anonymous namespace)::CatArrayBatchedCopy…" before
    cat = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, "
           "{}>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, "
           "unsigned int, {}>, int, unsigned int)")
    pair = distinct_short([cat.format("2, 128, 1", "128, 1"), cat.format("2, 64, 64", "64, 64")],
                          context.LONG_NAME, context.display_name)
    assert pair[0] != pair[1] and all("CatArrayBatchedCopy<" in p for p in pair), pair
    assert "2, 128, 1>" in pair[0] and "2, 64, 64>" in pair[1]
    df = pd.DataFrame({"name": long[:2], "rank": [0, 0], "kernel_type": "COMPUTATION",
                       "sum (us)": [1.0, 2.0]})
    pie = kernel_pies_figure(df, "COMPUTATION").data[0]
    assert len(set(pie.labels)) == 2 and list(pie.customdata) == long[:2]
    diff = pd.DataFrame({"control_total_duration": [1.0, 2.0],
                         "test_total_duration": [2.0, 3.0], "diff_duration": [1.0, 1.0]},
                        index=long[:2])
    bars = duration_diff_figure(diff).data[0]
    assert len(set(bars.x)) == 2 and list(bars.customdata) == long[:2]
