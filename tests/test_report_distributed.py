"""The report's "Why ranks are late" and "Pipeline" sections, on generated jobs whose
answer is known by construction (:mod:`hta.synthetic.coupled`, 4 ranks, 4 steps):
``slow_worker`` -> rank 3 slow_compute; ``1f1b`` -> one pipeline of 4 stages; and on the
samples (4 ranks with collectives only; one rank)."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest
from conftest import SAMPLE_TRACES

from hta.model.selection import Selection, resolve
from hta.report import standout
from hta.report.builder import SECTIONS, build_report
from hta.report.context import Context, Section
from hta.report.packing import report_html
from hta.report.sections_distributed import _drawn_pipelines, pipeline, straggler_causes
from hta.synthetic.coupled import generate_coupled_job
from hta.trace_analysis import TraceAnalysis


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TraceAnalysis]:
    """The generated jobs, loaded, by shape."""
    root = tmp_path_factory.mktemp("coupled")
    out = {}
    for shape in ("slow_worker", "1f1b", "imbalance"):
        generate_coupled_job(root / shape, shape, ranks=4, steps=4)
        out[shape] = TraceAnalysis(trace_dir=root / shape, cache=False, progress=False)
    return out


def _section_html(page: str, sid: str) -> str:
    start = page.index(f'<section id="{sid}">')
    return page[start:page.index("</section>", start)]


def _filled(analyzer: TraceAnalysis, build, sid: str, ranks: list[int] | None = None  # noqa: ANN001
            ) -> Section:
    section = Section(sid, sid)
    selection = resolve(Selection.of(ranks or analyzer.ranks), analyzer.t)
    build(Context(analyzer, selection, None), section)
    assert not section.error
    return section


def test_sections_follow_the_stragglers() -> None:
    ids = [sid for sid, *_ in SECTIONS]
    at = ids.index("stragglers")
    assert ids[at + 1:at + 3] == ["straggler-causes", "pipeline"]


@pytest.mark.slow  # the whole report: about 2 s
def test_report_shows_the_pipeline_and_its_figure(jobs: dict[str, TraceAnalysis]) -> None:
    page = report_html(build_report(jobs["1f1b"]))
    part = _section_html(page, "pipeline")
    assert 'class="error"' not in part
    assert "A pipeline of 4 stages, schedule 1f1b" in html.unescape(part)
    assert len(re.findall(r'id="fig-\d+"', part)) == 1  # the figure's div
    assert html.unescape(part).count("Per stage, mean per step") == 1
    causes = html.unescape(_section_html(page, "straggler-causes"))
    assert "No collective was matched on two or more ranks" in causes


@pytest.mark.slow  # the whole report: about 2 s
def test_report_names_the_slow_rank(jobs: dict[str, TraceAnalysis]) -> None:
    page = report_html(build_report(jobs["slow_worker"]))
    part = html.unescape(_section_html(page, "straggler-causes"))
    assert "Rank 3 held the others up the most: slow_compute on step(s) 0-3" in part
    assert len(re.findall(r'id="fig-\d+"', part)) == 1
    assert "no-stragglers:3" in part
    assert "No pipeline: no send/recv kernel was matched" in html.unescape(
        _section_html(page, "pipeline"))


@pytest.mark.slow  # the replay of the slow rank: about 0.4 s
def test_causes_section_table_and_figure(jobs: dict[str, TraceAnalysis]) -> None:
    s = _filled(jobs["slow_worker"], straggler_causes, "straggler-causes")
    (table,) = s.tables
    row = dict(zip(table.headers, table.rows[0]))
    assert (row["rank"], row["cause"], row["steps"], row["recurring"]) == (
        "3", "slow_compute", "0-3", "yes")
    (figure,) = s.figures
    assert figure.title.startswith("Why ranks are late")
    assert s.definitions.startswith("Why a rank is late at the collectives")
    assert s.source == "TraceAnalysis.get_straggler_causes"


def test_pipeline_section_tables(jobs: dict[str, TraceAnalysis]) -> None:
    s = _filled(jobs["1f1b"], pipeline, "pipeline")
    means, steps = s.tables
    assert [r[means.headers.index("stage")] for r in means.rows] == ["0", "1", "2", "3"]
    assert {r[means.headers.index("schedule")] for r in means.rows} == {"1f1b"}
    assert len(steps.rows) == 16  # 4 stages x 4 steps
    assert s.definitions.startswith("Pipeline parallelism")


def test_one_rank_says_so() -> None:
    a = TraceAnalysis(trace_dir=SAMPLE_TRACES / "cpu_training", cache=False, progress=False)
    for build, sid in ((straggler_causes, "straggler-causes"), (pipeline, "pipeline")):
        s = _filled(a, build, sid)
        assert s.notes[0].startswith("One rank selected") and not s.figures and not s.tables


@pytest.mark.slow  # the sample's four ranks: about 0.7 s
def test_sample_job_with_collectives_only() -> None:
    a = TraceAnalysis(trace_dir=SAMPLE_TRACES / "synthetic_4rank", cache=False,
                      progress=False)
    s = _filled(a, pipeline, "pipeline")
    assert s.notes[0].startswith("No pipeline") and not s.figures
    # its ranks were generated apart: a rank's all-reduce has ended before the last rank
    # started it, so nobody held anybody up
    causes = _filled(a, straggler_causes, "straggler-causes")
    assert causes.notes == ["No rank held the others up above the job's noise."]
    assert not causes.figures


@pytest.mark.slow  # four replays: about 0.5 s
def test_many_late_ranks_draw_those_that_held_most(jobs: dict[str, TraceAnalysis],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(standout, "MAX_DRAWN_RANKS", 2)
    s = _filled(jobs["imbalance"], straggler_causes, "straggler-causes")
    (note,) = s.notes
    assert note.startswith("Drawn for 2 of 4 ranks, those that stand out: 0 (held the others "
                           "up the most), 3 (held the others up the most)")
    assert "TraceAnalysis.get_straggler_causes()" in note
    assert len(s.tables[0].rows) == 4  # the table keeps every late rank


def test_many_stages_draw_the_pipeline_with_the_largest_bubble(
        monkeypatch: pytest.MonkeyPatch) -> None:
    means = pd.DataFrame({"pipeline": [0, 0, 1, 1], "stage": [0, 1, 0, 1],
                          "rank": [0, 1, 2, 3], "bubble_pctg": [10.0, 20.0, 30.0, 40.0]})
    assert _drawn_pipelines(means).equals(means)
    monkeypatch.setattr(standout, "MAX_DRAWN_RANKS", 2)
    assert _drawn_pipelines(means)["rank"].tolist() == [2, 3]
