"""A report that scales (issue 42, item 3): on a job of many ranks the per-rank time-series
figures draw only the ranks that stand out (hta.report.standout), each with its reason,
and say so under the figure; the tables keep every rank; a job of few ranks is unchanged.

The many-ranks case runs on a 4-rank synthetic job with the limit lowered to 2; the tests
that build the report's sections take seconds and are marked slow."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from hta.report import standout
from hta.report.builder import build_sections
from hta.report.context import Section
from hta.report.overview import RANK_COLUMNS, JobOverview
from hta.report.packing import report_figures, report_html
from hta.report.render import render
from hta.report.standout import drawn_note, standout_ranks
from hta.synthetic import generate_job
from hta.trace_analysis import TraceAnalysis

#: Title of each figure that draws the standout ranks only -> its section.
DRAWN_FIGURES = {
    "GPU timeline": "timeline",
    "Launch queue length per stream": "queue",
    "Memory allocated and reserved per rank and device": "memory",
    "Memory copy bandwidth": "bandwidth",
    "Per-copy memory bandwidth": "bandwidth",
    "Kernel launch statistics": "launch",
    "Operators: GPU and CPU time": "operators",
    "GPU time breakdown per rank (share of the GPU time span)": "temporal",
    "GPU idle time per stream, by cause (µs)": "idle",
    "COMPUTATION kernel duration per rank: mean, with min-max error bars": "kernels",
    "Communication overlapped by computation, per rank": "overlap",
}


# -- the choice, on a hand-made overview -----------------------------------------------------
def hand_made_overview(idle: list[float] | None = None) -> JobOverview:
    """Ten ranks, known by construction: rank 7 computes longest (slowest) and has the
    least exposed communication, rank 2 computes shortest (fastest) and waits most in its
    collectives, rank 5 has the longest mean step, rank 9 the most idle time, and rank 4
    the median compute time (53: the 5th of the ten sorted values)."""
    compute = [50.0, 52.0, 40.0, 51.0, 53.0, 54.0, 55.0, 90.0, 56.0, 57.0]
    table = pd.DataFrame({c: [0.0] * 10 for c in RANK_COLUMNS})
    table["rank"] = range(10)
    table["compute_time(us)"] = compute
    table["exposed_comm_time(us)"] = [30.0, 30.0, 60.0, 30.0, 30.0, 30.0, 30.0, 5.0, 30.0,
                                      30.0]
    table["idle_time(us)"] = idle or [1.0] * 9 + [9.0]
    table["step_time_mean(us)"] = [100.0] * 5 + [120.0] + [100.0] * 4
    job = {"slowest_rank": 7, "fastest_rank": 2, "longest_step_rank": 5}
    return JobOverview(table, pd.DataFrame(), pd.DataFrame(), job)  # type: ignore[arg-type]


def test_the_ranks_that_stand_out_with_their_reasons() -> None:
    assert standout_ranks(hand_made_overview()) == {
        2: ["fastest", "most exposed communication"],
        4: ["median compute"],
        5: ["longest mean step"],
        7: ["slowest", "least exposed communication"],
        9: ["most idle"],
    }
    with_path = standout_ranks(hand_made_overview(), critical_path_rank=3)
    assert with_path[3] == ["critical path"] and list(with_path) == [2, 3, 4, 5, 7, 9]


def test_the_limit_keeps_the_first_reasons_in_rank_order() -> None:
    """Slowest and fastest first, then the critical path: a rank kept for one reason
    still names its others."""
    assert standout_ranks(hand_made_overview(), limit=2) == {
        2: ["fastest", "most exposed communication"],
        7: ["slowest", "least exposed communication"]}
    assert list(standout_ranks(hand_made_overview(), critical_path_rank=3, limit=3)) == [
        2, 3, 7]


def test_a_figure_every_rank_shares_names_no_rank() -> None:
    chosen = standout_ranks(hand_made_overview(idle=[4.0] * 10))
    assert all("most idle" not in reasons for reasons in chosen.values())
    assert standout_ranks(JobOverview(pd.DataFrame({c: [] for c in RANK_COLUMNS}),
                                      pd.DataFrame(), pd.DataFrame())) == {}


def test_the_note_names_each_rank_and_why() -> None:
    note = drawn_note({3: ["slowest"], 17: ["fastest", "most idle"]}, 256,
                      "plot_timeline(ranks={ranks})")
    assert note == ("Drawn for 2 of 256 ranks, those that stand out: 3 (slowest), 17 "
                    "(fastest, most idle); the table covers every rank. "
                    "TraceAnalysis.plot_timeline(ranks=[...]) draws any other.")


# -- the report of a synthetic job -----------------------------------------------------------
@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> TraceAnalysis:
    folder = tmp_path_factory.mktemp("scale_job")
    generate_job(folder, ranks=4, steps=2, kernels_per_step=17)
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


@pytest.fixture(scope="module")
def many(job: TraceAnalysis) -> list[Section]:
    """The sections with at most 2 ranks drawn: the 4-rank job is a job of many ranks."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(standout, "MAX_DRAWN_RANKS", 2)
        return build_sections(job)


def drawn_ranks_of(fig: dict, title: str) -> set[int]:
    """The ranks a figure's traces name (the stragglers' lag panel: its scatter traces)."""
    data = fig["data"]
    if title.startswith("Stragglers"):
        data = [t for t in data if t.get("type") == "scattergl"]
    return {int(r) for r in re.findall(r"rank (\d+)", json.dumps(data))}


def section(sections: list[Section], sid: str) -> Section:
    return next(s for s in sections if s.id == sid)


@pytest.mark.slow  # builds the report sections (seconds)
def test_many_ranks_draw_the_standouts_only(job: TraceAnalysis, many: list[Section],
                                            tmp_path: Path) -> None:
    html = render(many, [], "scale", plotlyjs="cdn")
    (tmp_path / "report.html").write_text(html, encoding="utf-8")
    figures = report_figures(html)
    html = report_html(html)
    titles = {fig["layout"]["title"]["text"]: fig for fig in figures.values()}
    notes = [n for s in many for n in s.notes if n.startswith("Drawn for")]
    match = re.match(r"Drawn for 2 of 4 ranks, those that stand out: (\d+) \(([^)]*)\), "
                     r"(\d+) \(([^)]*)\)", notes[0])
    assert match, notes[0]
    drawn = {int(match.group(1)), int(match.group(3))}
    assert all(reason in standout.__doc__ for reason in
               ", ".join([match.group(2), match.group(4)]).split(", "))
    for title, sid in DRAWN_FIGURES.items():
        assert drawn_ranks_of(titles[title], title) == drawn, title
        assert any(n.startswith("Drawn for 2 of 4 ranks") for n in section(many, sid).notes)
    categories = titles["GPU time by category"]["data"]
    assert {int(r) for t in categories for r in t["x"]} == drawn
    assert any(n.startswith("Drawn for 2 of 4 ranks") for n in section(many, "hardware").notes)
    # the wait bars: the ranks that caused wait (at most WAIT_BARS), not every rank
    from hta.analysis.stragglers import straggler_summary

    summary = straggler_summary(job.get_collective_arrivals())
    waited = set(summary.loc[summary["total_wait_caused(us)"] > 0, "rank"].astype(int))
    bars = next(t for t in titles["Stragglers: late arrivals at collectives"]["data"]
                if t["type"] == "bar")
    assert waited and {int(x.split()[-1]) for x in bars["x"]} == waited
    lags = drawn_ranks_of(titles["Stragglers: late arrivals at collectives"], "Stragglers")
    assert drawn <= lags and len(lags) <= 3  # and the rank that caused the most wait
    # each note names its TraceAnalysis method, which exists
    for note in notes:
        method = re.search(r"TraceAnalysis\.(\w+)\(", note).group(1)  # type: ignore[union-attr]
        assert callable(getattr(TraceAnalysis, method)), method
    assert "plot_timeline(ranks=[...])" in section(many, "timeline").notes[0]
    assert html.count("Drawn for 2 of 4 ranks") == len(notes) >= len(DRAWN_FIGURES) + 2


@pytest.mark.slow  # builds the report sections (seconds)
def test_the_tables_keep_every_rank(many: list[Section]) -> None:
    for sid, title in [("timeline", "GPU work per rank and stream"),
                       ("queue", "Queue length per rank and stream"),
                       ("memory", "Peak allocation per rank and device")]:
        table = next(t for t in section(many, sid).tables if t.title.startswith(title))
        ranks = {row[table.headers.index("rank")] for row in table.rows}
        assert ranks == {"0", "1", "2", "3"}, sid
    timeline = section(many, "timeline").tables[0]
    bars = {row[0]: row[timeline.headers.index("bars")] for row in timeline.rows}
    assert sorted(r for r, b in bars.items() if b == "-") and any(b != "-" for b in
                                                                   bars.values())


@pytest.mark.slow  # builds the report sections (seconds)
def test_a_job_of_few_ranks_draws_every_rank(job: TraceAnalysis) -> None:
    few = build_sections(job)
    for s in few:
        assert not any(n.startswith("Drawn for") for n in s.notes), s.id
    for s in few:
        for fig in s.figures:
            if fig.title in DRAWN_FIGURES:
                assert drawn_ranks_of(json.loads(fig.json), fig.title) == {0, 1, 2, 3}


def test_step_bound_not_replayed_on_a_job_too_big_for_this_process(
        job: TraceAnalysis, monkeypatch: pytest.MonkeyPatch) -> None:
    # the summary's rule: above REPLAY_MAX_EVENTS (here 0) a job is not replayed in this
    # process, so the report's step bound says why instead of building every rank's graph
    from hta.report import answers, builder, sections_whatif

    monkeypatch.setattr(answers, "REPLAY_MAX_EVENTS", 0)
    monkeypatch.setattr(type(job), "get_job_step_bound",
                        lambda *a, **k: pytest.fail("replayed a job too big"))
    s = Section("step-bound", "What bounds the step")
    sections_whatif.step_bound(builder._context(job, None, None, None), s)
    assert s.notes and s.notes[0].startswith("Not computed: the job has ")
    assert "TraceAnalysis.get_job_step_bound()" in s.notes[0] and not s.tables


@pytest.mark.slow  # builds the report sections (seconds)
def test_many_ranks_get_distributions_across_every_rank(many: list[Section]) -> None:
    """Above the limit the temporal breakdown and the overlap open with a distribution of
    every rank's shares, the ranks drawn marked on it; a job of few ranks has none."""
    temporal = section(many, "temporal")
    box = json.loads(temporal.figures[0].json)
    assert temporal.figures[0].title.startswith("GPU time shares across the 4 ranks")
    assert [t["type"] for t in box["data"]] == ["box", "scatter"]
    assert list(box["data"][0]["x"])[0] == "compute"
    marked = {int(t.split()[1]) for t in box["data"][1]["text"]}
    assert len(marked) == 2 and marked <= {0, 1, 2, 3}
    idle = section(many, "idle")
    assert idle.figures[0].title.startswith("GPU idle time by cause across the 4 ranks")
    assert json.loads(idle.figures[0].json)["data"][0]["x"] == ["host wait", "kernel wait",
                                                               "other"]
    kernels = section(many, "kernels")
    assert kernels.figures[0].title.startswith("GPU busy time by kernel type across the 4 "
                                               "ranks")
    assert "COMPUTATION" in json.loads(kernels.figures[0].json)["data"][0]["x"]
    overlap = section(many, "overlap")
    assert overlap.figures[0].title.startswith("Communication overlapped by computation "
                                               "across the 4 ranks")


@pytest.mark.slow  # builds the report sections (seconds)
def test_few_ranks_get_no_distribution(job: TraceAnalysis) -> None:
    few = build_sections(job)
    assert not any(f.title.startswith("GPU time shares across") for s in few
                   for f in s.figures)


def test_tables_keep_the_rows_of_the_ranks_that_stand_out() -> None:
    """A table cut to its first rows still shows the rows of the ranks the figures draw,
    after them, in the table's own order, and says so."""
    from hta.report.context import table_of

    frame = pd.DataFrame({"rank": [5, 0, 9, 7, 1, 7], "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    table = table_of(frame, "Per rank", max_rows=3, keep_ranks=[7, 0, 4])
    assert [row[0] for row in table.rows] == ["5", "0", "9", "7", "7"]
    assert table.note == ("First 3 of 6 rows, then 2 more of the ranks that stand out (7).")
    plain = table_of(frame, "Per rank", max_rows=3)
    assert [row[0] for row in plain.rows] == ["5", "0", "9"]
    assert plain.note == "First 3 of 6 rows."
    whole = table_of(frame, "Per rank", max_rows=10, keep_ranks=[7])
    assert len(whole.rows) == 6 and whole.note == ""


def test_bandwidth_statistics_where_the_ranks_are_equal_those_of_every_copy(
        job: TraceAnalysis) -> None:
    # the report's bandwidth section on many ranks: the statistics come back from where
    # each rank is, and only the drawn ranks' copies travel for the figures
    from hta.analysis import bandwidth
    from hta.model.selection import Selection

    last = int(job.t.rank(0).events["iteration"].max())
    for steps in (None, [last]):
        every = bandwidth.memory_copies(job.t, Selection.of(None, steps))
        assert len(every)
        pd.testing.assert_frame_equal(
            bandwidth.MEMORY_BW_SUMMARY_OF_STEPS.run(job.t, Selection.of(None, steps)),
            bandwidth.bw_summary(every))
        drawn = bandwidth.memory_copies(job.t, Selection.of([1, 3], steps))
        pd.testing.assert_frame_equal(
            drawn, every[every["rank"].isin([1, 3])].reset_index(drop=True))
        pd.testing.assert_frame_equal(bandwidth.bw_series(drawn),
                                      bandwidth.bw_series(every[every["rank"].isin([1, 3])]))


@pytest.mark.slow  # builds the report twice (seconds)
def test_a_report_that_frees_the_replay_builds_its_graph_once_and_reads_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # keep_replay=False (hta report): the job graph is freed once the sections that replay
    # are built, so no later section is built beside it; none of them builds it again,
    # and the page is the one a report keeping the graph writes
    from hta.analysis.whatif.replayer import Replay
    from hta.report.builder import build_report

    generate_job(tmp_path, ranks=4, steps=2, kernels_per_step=17)
    built: list[bool] = []
    graph = Replay.graph

    def counted(self: Replay):  # type: ignore[no-untyped-def]
        if self._graph is None:
            built.append(True)
        return graph(self)

    monkeypatch.setattr(Replay, "graph", counted)
    pages = {}
    for keep in (True, False):
        ta = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
        built.clear()
        html = build_report(ta, keep_replay=keep)
        pages[keep] = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "", html)
        assert len(built) == 1
        assert (ta.replay()._graph is None) is (not keep)
    assert pages[True] == pages[False]


def test_hta_report_frees_the_replay_graph(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # the command ends with the report: it has no use for the graph afterwards
    from hta.cli import main
    from hta.report import builder

    generate_job(tmp_path / "job", ranks=2, steps=2, kernels_per_step=17)
    asked: dict = {}
    monkeypatch.setattr(builder, "build_report", lambda *a, **k: asked.update(k) or "<html>")
    assert main(["report", str(tmp_path / "job"), "-o", str(tmp_path / "r.html"),
                 "--no-cache", "--quiet"]) == 0
    assert asked["keep_replay"] is False
