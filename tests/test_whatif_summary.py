"""What bounds the job's step in ``hta summary`` (text and ``--json``) and the report, on
generated jobs whose answer is known by construction: 3 ranks running one program, rank 2's
kernels 1.5 times as long (``tests/test_whatif.py``'s simulator). Every rank waits for
rank 2 at the all-reduce, so rank 2 bounds every step, and with rank 2 at the median the
job's step is the other ranks' step: the measured step of the same program without the
slow rank.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run_cli
from kineto_builder import TraceBuilder
from test_whatif import GPU_BOUND, simulate

from hta.report.builder import build_report, build_sections
from hta.report.packing import report_html
from hta.trace_analysis import TraceAnalysis

pytestmark = pytest.mark.slow  # each test runs the summary or the report: 1-3 s

SLOW = replace(GPU_BOUND, ranks=3, slow_rank=2, slow_factor=1.5)
#: A kernel name a page must not run and a terminal must not obey.
HOSTILE = '<img src=x onerror="alert(1)">gemm\x1b[2J'


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The slow job's folder and the mean measured step of the same job without it."""
    root = tmp_path_factory.mktemp("bound")
    slow = simulate(SLOW, root / "slow")
    fixed = TraceAnalysis(trace_dir=str(simulate(replace(SLOW, slow_factor=1.0),
                                                 root / "fixed")),
                          cache=False, progress=False)
    table = fixed.what_if()
    return slow, float(table.groupby("step")["job_measured(us)"].first().mean())


def _summary_json(folder: Path, *extra: str) -> dict:
    done = run_cli(["summary", str(folder), "--json", "--no-cache", "-q", *extra])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_summary_json_names_the_slow_rank_and_the_step_at_the_median(jobs) -> None:
    folder, fixed_step = jobs
    bound = _summary_json(folder, "--step-bound")["step_bound"]
    assert bound["rank"] == 2 and bound["rank_steps"] == SLOW.steps
    assert bound["other_ranks"] == [] and bound["steps"] == [1, 2, 3, 4]
    assert bound["change"] == "no-stragglers:2"
    assert bound["bound_by"] == "gpu" and bound["top_work"] == "gpu: gemm"
    assert bound["work_shares"].startswith("gpu ")
    # at the median, the job's step is the other ranks' step (by construction)
    assert bound["at_median(us)"] == pytest.approx(fixed_step, rel=0.05)
    assert bound["saving_at_median(us)"] > 150
    assert bound["measured(us)"] > 1.3 * fixed_step
    # the replay's honesty figures come with the prediction
    assert bound["replay_error_worst_pctg"] < 1e-6
    assert 0 <= bound["modelled_error_median_pctg"] <= bound["modelled_error_worst_pctg"] < 5


def test_summary_text_says_the_bound_and_the_replay_error(jobs) -> None:
    folder, fixed_step = jobs
    done = run_cli(["summary", str(folder), "--no-cache", "-q", "--step-bound"])
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stdout.splitlines() if "median" in x or "What bounds" in x]
    first = next(x for x in lines if x.startswith("What bounds the step"))
    assert "4 steps): rank 2: gpu " in first and "top: gpu gemm" in first
    second = next(x for x in lines if x.startswith("With rank 2 alone at the median"))
    assert "(no-stragglers:2)" in second and "Replay error per rank and step" in second
    assert f"{fixed_step / 1e3:,.3f} ms" in second or f"{fixed_step / 1e3:,.2f}" in second


def test_summary_without_the_flag_says_how_to_ask(jobs) -> None:
    folder, _ = jobs
    payload = _summary_json(folder)
    assert payload["step_bound"] is None
    assert "--step-bound" in payload["step_bound_note"]
    done = run_cli(["summary", str(folder), "--no-cache", "-q"])
    assert "What bounds the step: not computed (pass --step-bound" in done.stdout


def test_summary_step_bound_follows_the_selected_steps(jobs) -> None:
    folder, _ = jobs
    bound = _summary_json(folder, "--step-bound", "--iterations", "2-3")["step_bound"]
    assert bound["steps"] == [2, 3] and bound["rank"] == 2


def test_one_rank_and_no_steps_say_nothing_or_one_line(tmp_path: Path) -> None:
    one = simulate(GPU_BOUND, tmp_path / "one")
    payload = _summary_json(one, "--step-bound")
    assert payload["step_bound"] is None and payload["step_bound_note"].startswith("one rank")
    done = run_cli(["summary", str(one), "--no-cache", "-q", "--step-bound"])
    assert "What bounds the step" not in done.stdout
    # two ranks without ProfilerStep: one honest line, no replay
    for r in range(2):
        b = TraceBuilder(rank=r, world_size=2)
        b.launch_kernel("gemm", cpu_ts=1_000, cpu_dur=500, gpu_ts=2_000, gpu_dur=30_000)
        b.write(tmp_path / "nosteps" / f"rank-{r}.json")
    payload = _summary_json(tmp_path / "nosteps", "--step-bound")
    assert payload["step_bound"] is None and "no ProfilerStep" in payload["step_bound_note"]
    done = run_cli(["summary", str(tmp_path / "nosteps"), "--no-cache", "-q"])
    assert [x for x in done.stdout.splitlines() if x.startswith("What bounds")] == [
        "What bounds the step: no ProfilerStep in the traces: no step to bound (hta whatif "
        "replays the whole trace)."]


def test_report_section(jobs) -> None:
    folder, fixed_step = jobs
    a = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)
    s = {x.id: x for x in build_sections(a)}["step-bound"]
    assert s.error == ""
    assert s.intro.startswith("What bounds the step") and "rank 2:" in s.intro
    assert any("no-stragglers:2" in n and "Replay error" in n for n in s.notes)
    table = s.tables[0]
    assert len(table.rows) == SLOW.steps
    col = table.headers.index
    assert {row[col("rank")] for row in table.rows} == {"2"}
    at_median = np.asarray([float(row[col("at_median(us)")].replace(",", ""))
                            for row in table.rows])
    assert np.abs(at_median / fixed_step - 1).max() < 0.05
    assert "replay_error_pctg" in table.headers and "modelled_error_pctg" in table.headers
    # one rank selected: the replay still covers the job, and says so
    one = {x.id: x for x in build_sections(a, ranks=[0])}["step-bound"]
    assert any("Every loaded rank (3)" in n for n in one.notes)


def test_report_and_summary_escape_the_bounding_kernels_name(tmp_path: Path) -> None:
    ops = tuple((HOSTILE if name == "gemm" else name, host, kern)
                for name, host, kern in SLOW.ops)
    folder = simulate(replace(SLOW, ops=ops), tmp_path / "hostile")
    a = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)
    assert a.get_job_step_bound()["top_work"] == f"gpu: {HOSTILE}"
    html = report_html(build_report(a))
    page = html.split('<script type="application/json"')[0]
    section = page[page.index('<section id="step-bound">'):]
    section = section[:section.index("</section>")]
    assert "<img" not in section and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in section
    done = run_cli(["summary", str(folder), "--no-cache", "-q", "--step-bound"])
    first = next(x for x in done.stdout.splitlines() if x.startswith("What bounds the step"))
    assert "\x1b" not in first and "gemm\\x1b[2J" in first


def test_step_bounds_per_step_agree_with_what_if(jobs) -> None:
    folder, _ = jobs
    a = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)
    table = a.get_step_bounds(iterations=[2, 3])
    assert table["step"].tolist() == [2, 3] and (table["rank"] == 2).all()
    job = a.what_if().groupby("step").agg(m=("job_measured(us)", "first"),
                                          r=("replayed(us)", "max")).loc[[2, 3]]
    assert table["measured(us)"].tolist() == pytest.approx(job["m"].tolist())
    assert table["replayed(us)"].tolist() == pytest.approx(job["r"].tolist())
    # the host waits for the GPU each step: the path spans the whole step
    assert table["step(us)"].tolist() == pytest.approx(job["r"].tolist())
    assert (table["saving_at_median(us)"]
            == table["replayed(us)"] - table["at_median(us)"]).all()
    assert (table["replay_error_pctg"] == 0).all()
