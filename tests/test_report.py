"""The HTML report builder (hta.report.builder) without a browser: escaping, formatting,
sections on a hand-built job and on real traces, failures kept inside their section."""

from __future__ import annotations

import json
import re
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
from hta.report.packing import report_figures
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
    html = build_report(job, title="a <b>title</b>")
    assert "<title>a &lt;b&gt;title&lt;/b&gt;</title>" in html
    ids = re.findall(r'<div class="figure" id="(fig-\d+)"', html)
    data = report_figures(html)
    assert ids and sorted(data) == sorted(ids)
    out = write_report(job, tmp_path / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(FileExistsError, match="pass force=True"):
        write_report(job, out)
    write_report(job, out, force=True, iterations=[2], ranks=[1])
    text = out.read_text()
    assert "steps analysed" in text and "1 (1) of world size 2" in text


def test_a_failing_analysis_stays_in_its_section(job: TraceAnalysis,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: object, section: object) -> None:
        raise RuntimeError("boom <here>")

    sections = [(sid, title, intro, broken if sid == "queue" else fn)
                for sid, title, intro, fn in SECTIONS]
    monkeypatch.setattr(builder, "SECTIONS", sections)
    html = build_report(job)
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
                           "queue_length": np.arange(10)})
    shown, note = context.thin(series, ["rank"])
    # rank 0: 8 points, every 3rd (0, 3, 6) and the last (7); rank 1: 2 points, all kept
    assert shown["ts"].tolist() == [0, 3, 6, 7, 8, 9]
    assert note.startswith("Lines with more than 3 points")
    kept, no_note = context.thin(series.head(3), ["rank"])
    assert len(kept) == 3 and no_note == ""


def test_a_figure_of_many_lines_shares_one_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 lines of 5,000 points against a budget of 80,000 for the figure: 1,250 a line
    (every 4th point, and the last), instead of all 320,000."""
    monkeypatch.setattr(context, "MAX_FIGURE_POINTS", 80_000)
    series = pd.DataFrame({"rank": np.repeat(np.arange(64), 5_000),
                           "ts": np.tile(np.arange(5_000), 64)})
    shown, note = context.thin(series, ["rank"])
    assert (shown.groupby("rank").size() == 1_251).all()  # 0, 4, ..., 4996 and 4999
    assert note.startswith("Lines with more than 1,250 points")
    monkeypatch.setattr(context, "MAX_FIGURE_POINTS", 640)  # the floor per line holds
    shown, _ = context.thin(series, ["rank"])
    assert (shown.groupby("rank").size() == 1_001).all()
