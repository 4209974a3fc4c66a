"""The report's first screen and its new sections: the job sentence, the findings with
links to their evidence, the GPU timeline, the memory timeline, the stragglers, and long
names shortened with the full (escaped) name on hover."""

from __future__ import annotations

import re
from pathlib import Path

import findings_cases as cases
import pandas as pd
import pytest
from conftest import SAMPLE_TRACES, shared_trace
from kineto_builder import TraceBuilder
from test_memory_timeline import memory_job
from test_stragglers import straggler_job

from hta.report.builder import SECTIONS, build_report, build_sections
from hta.report.context import LONG_NAME, display_name, table_of
from hta.report.packing import report_html
from hta.trace_analysis import TraceAnalysis

SECTION_IDS = [sid for sid, *_ in SECTIONS]


def analyzer_of(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


def by_id(sections: list) -> dict:
    return {s.id: s for s in sections}


@pytest.fixture(scope="module")
def sample() -> TraceAnalysis:
    return analyzer_of(SAMPLE_TRACES / "synthetic_4rank")


# -- first screen ---------------------------------------------------------------------------
def test_findings_come_first_and_link_to_report_sections(sample: TraceAnalysis) -> None:
    assert SECTION_IDS[0] == "findings"
    sections = by_id(build_sections(sample))
    expected = sample.get_findings()
    items = sections["findings"].findings
    assert len(items) == len(expected) >= 1
    seen = set()
    for item, row in zip(items, expected.to_dict("records"), strict=True):
        assert (item.rule, item.severity, item.title, item.evidence) == (
            row["rule"], row["severity"], row["title"], row["evidence"])
        # advice given once: a repeat says so
        assert item.advice == ("the same as above." if row["advice"] in seen else row["advice"])
        seen.add(row["advice"])
        assert item.section == row["section"] and item.section in SECTION_IDS
        assert item.section_title == sections[item.section].title
        assert item.saving.startswith("~") and f"({row['share_pctg']:.1f}%)" in item.saving
    html = report_html(build_report(sample))
    assert html.index('<section id="findings">') < html.index('<section id="overview">')
    for item in items:
        assert f'<a class="evidence-link" href="#{item.section}">' in html


def test_no_findings_says_so(tmp_path: Path) -> None:
    cases.host_bound(tmp_path, bound=False)  # the GPU busy, the host ahead of it
    analyzer = analyzer_of(tmp_path)
    assert analyzer.get_findings().empty
    s = by_id(build_sections(analyzer))["findings"]
    assert s.findings == [] and s.error == ""
    assert s.notes == ["No rule found a problem worth 0.5% of the analysed time or more."]


def test_a_sync_in_every_step_is_a_finding_of_the_report(tmp_path: Path) -> None:
    _, expected_ns = cases.host_sync(tmp_path)
    s = by_id(build_sections(analyzer_of(tmp_path)))["findings"]
    sync = [f for f in s.findings if f.rule == "host_sync"]
    assert len(sync) == 1 and sync[0].section == "idle" and sync[0].ranks == "rank 0"
    # the replayed saving (no-sync:aten::item): the host blocks 20 µs a step and its loop
    # bounds the step, so 4 steps end ~4 x 20 µs sooner (less the host's usual CPU step);
    # the rule's own estimate, 4 steps x 5 µs GPU bubble, stays in the evidence
    assert expected_ns == 4 * 5_000
    shown = float(re.match(r"~([\d.,]+) ms", sync[0].saving)[1])
    assert 4 * 19 <= shown * 1e3 <= 4 * 20
    assert "replayed with no-sync:aten::item" in sync[0].saving


def test_job_sentence_from_the_overview(sample: TraceAnalysis) -> None:
    from hta.report.overview import job_overview

    ranks = job_overview(sample.t).ranks
    busy = 100 * ranks["busy_time(us)"].sum() / ranks["kernel_time(us)"].sum()
    idle = 100 * ranks["idle_time(us)"].sum() / ranks["kernel_time(us)"].sum()
    mean_ms = ranks["step_time_mean(us)"].mean() / 1e3
    html = report_html(build_report(sample))
    sentence = re.search(r'<p class="summary">(.*?)</p>', html)[1]
    assert sentence == (f"4 ranks on 4 × NVIDIA A100-SXM4-80GB, 3 steps of {mean_ms:,.3f} ms "
                        f"on average, the GPUs are busy {busy:.0f}% and idle {idle:.0f}% of "
                        "their span.")


# -- long names -----------------------------------------------------------------------------
def test_long_names_are_shortened_with_the_full_name_on_hover() -> None:
    long = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add"
            "<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>)")
    hostile = "<script>alert(1)</script>" + "x" * LONG_NAME
    table = table_of(pd.DataFrame({"name": [long, "short", hostile], "n": [1, 2, 3]}), "t")
    assert table.rows[0][0] == "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, …>"
    assert table.hover[0] == [long, ""]
    assert table.rows[1][0] == "short" and table.hover[1] == ["", ""]
    # not a C++ signature: cut, never rewritten
    assert table.rows[2][0] == hostile[: LONG_NAME - 1] + "…"
    assert table.hover[2] == [hostile, ""]
    assert display_name("abc") == "abc"
    lam = "foo(int)::{lambda(float)#1}::operator()(float) const" + " " * LONG_NAME
    assert display_name(lam) == lam[: LONG_NAME - 1] + "…"


def test_hover_names_are_escaped_in_the_page(tmp_path: Path) -> None:
    hostile = '<img src=x onerror="alert(1)">' + "k" * LONG_NAME
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=100_000):
        b.launch_kernel(hostile, cpu_ts=1_000, cpu_dur=500, gpu_ts=2_000, gpu_dur=30_000)
    b.write(tmp_path / "rank-0.json")
    html = report_html(build_report(analyzer_of(tmp_path)))
    escaped = "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" + "k" * LONG_NAME
    assert f'title="{escaped}"' in html
    assert "<img" not in html.split('<script type="application/json"')[0]


# -- timeline, memory, stragglers -----------------------------------------------------------
def test_timeline_section_busy_time_per_stream(tmp_path: Path) -> None:
    """Rank 0: two kernels of 10 and 20 µs on stream 7 (5 µs apart) and a 4 µs copy on
    stream 24: busy 30 µs and 4 µs."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=100_000):
        b.launch_kernel("k1", cpu_ts=1_000, cpu_dur=500, gpu_ts=10_000, gpu_dur=10_000)
        b.launch_kernel("k2", cpu_ts=2_000, cpu_dur=500, gpu_ts=25_000, gpu_dur=20_000)
        b.memcpy("HtoD", cpu_ts=3_000, cpu_dur=500, gpu_ts=50_000, gpu_dur=4_000, stream=24)
    b.write(tmp_path / "rank-0.json")
    s = by_id(build_sections(analyzer_of(tmp_path)))["timeline"]
    assert s.error == "" and len(s.figures) == 1
    table = s.tables[0]
    rows = [dict(zip(table.headers, r)) for r in table.rows]
    assert [(r["stream"], r["events"], r["busy(us)"], r["span(us)"]) for r in rows] == [
        ("7", "2", "30.000", "35.000"), ("24", "1", "4.000", "4.000")]


def test_memory_section_with_and_without_memory_events(tmp_path: Path) -> None:
    s = by_id(build_sections(memory_job(tmp_path / "mem")))["memory"]
    assert s.error == "" and len(s.figures) == 1
    rows = [dict(zip(s.tables[0].headers, r)) for r in s.tables[0].rows]
    peaks = {(r["rank"], r["device"]): r["peak_allocated_bytes"] for r in rows}
    # the largest "Total Allocated" written per rank and device (see memory_job)
    assert peaks == {("0", "cuda:0"): "9,000", ("0", "cpu"): "64", ("1", "cuda:0"): "1,000,500"}
    cases.host_sync(tmp_path / "none")
    none = by_id(build_sections(analyzer_of(tmp_path / "none")))["memory"]
    assert none.error == "" and none.figures == [] and none.tables == []
    assert none.notes == ["The trace has no [memory] events: record it with "
                          "torch.profiler.profile(profile_memory=True) to see allocations."]


def test_stragglers_section_names_the_late_rank(tmp_path: Path) -> None:
    delay = 70_000
    straggler_job(tmp_path, late={2: delay})
    analyzer = analyzer_of(tmp_path)
    s = by_id(build_sections(analyzer))["stragglers"]
    assert s.error == "" and len(s.figures) == 1
    # 3 steps x 4 collectives; at each, the 3 other ranks waited the whole delay
    caused_us = 12 * 3 * delay / 1e3
    assert s.intro == (f"Rank 2 caused the most wait: {caused_us:,.1f} µs over 12 "
                       "collective(s) where it arrived last (score 1.00).")
    assert s.tables[0].rows[0][0] == "2"
    one = by_id(build_sections(analyzer, ranks=[1]))["stragglers"]
    assert one.notes == ["One rank selected: no other rank to be late against."]
    assert one.figures == []


@pytest.mark.parametrize("folder", ["trace_filter", "df_index_resolver", "amd_trace"])
def test_new_sections_on_real_traces(folder: str) -> None:
    analyzer = analyzer_of(shared_trace(folder))
    sections = by_id(build_sections(analyzer))
    for sid in ("findings", "timeline", "memory", "stragglers"):
        assert sections[sid].error == "", (sid, sections[sid].error)
    assert sections["timeline"].figures
    memory = analyzer.get_memory_timeline()
    assert bool(sections["memory"].figures) == (len(memory) > 0)
    findings = analyzer.get_findings()
    assert [f.rule for f in sections["findings"].findings] == findings["rule"].tolist()
    assert all(f.section in SECTION_IDS for f in sections["findings"].findings)


def test_job_sentence_without_gpu_work() -> None:
    html = report_html(build_report(analyzer_of(shared_trace("cpu_only"))))
    sentence = re.search(r'<p class="summary">(.*?)</p>', html)[1]
    assert sentence.endswith(", no GPU work."), sentence


def test_an_operator_above_its_roof_is_flagged() -> None:
    from hta.report.sections_hardware import over_roof_note

    rows = pd.DataFrame({"op": ["aten::mm", "aten::add"], "input_dims": ["[[8,8],[8,8]]", "[]"],
                         "pct_of_peak": [106.0, 40.0]})
    note = over_roof_note(rows)
    assert note is not None and note.startswith("1 operator row(s) run above 100% of their "
                                                "roof (up to 106%: aten::mm [[8,8],[8,8]])")
    assert "guessed wrong" in note
    assert over_roof_note(rows.assign(pct_of_peak=[101.0, 40.0])) is None  # rounding
