"""Why ranks are late and the pipeline's bubbles in ``hta summary`` (text and ``--json``),
on generated jobs whose answer is known by construction (:mod:`hta.synthetic.coupled`,
4 ranks, 4 steps): ``host`` -> rank 1 late because of its host; ``slow_worker`` -> rank 3
slow_compute; ``1f1b`` -> one pipeline of 4 stages; ``balanced`` -> no late rank.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from cli_runner import run_cli
from conftest import SAMPLE_TRACES

from hta.commands.args_and_output import Printer
from hta.commands.summary_distributed import (
    NO_LATE_RANK,
    evidence_text,
    print_pipeline,
    print_straggler_causes,
    steps_text,
)
from hta.synthetic.coupled import generate_coupled_job

#: The tests that run the summary (about 1 s each).
slow = pytest.mark.slow

CAUSES_TITLE = "Why ranks are late"
PIPELINE_TITLE = "Pipeline bubbles (per step, mean"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The generated jobs, by shape."""
    root = tmp_path_factory.mktemp("coupled")
    out = {}
    for shape in ("host", "slow_worker", "1f1b", "balanced"):
        generate_coupled_job(root / shape, shape, ranks=4, steps=4)
        out[shape] = root / shape
    return out


def _summary(folder: Path, *extra: str, env: dict[str, str] | None = None) -> str:
    done = run_cli(["summary", str(folder), "--no-cache", "-q", *extra], env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _section(text: str, title: str) -> str:
    """The lines of the table titled ``title`` (to the blank line after it)."""
    start = text.index(title)
    return text[start:text.index("\n\n", start)]


@slow
def test_text_names_the_late_rank_and_its_host(jobs: dict[str, Path]) -> None:
    text = _summary(jobs["host"])
    table = _section(text, CAUSES_TITLE)
    (row,) = [line for line in table.splitlines() if " host " in line]
    assert row.split()[:5] == ["1", "host", "0-3", "yes", "11.967"]
    assert "GPU idle 3.028 ms/step vs median 0.028" in row
    assert NO_LATE_RANK not in text and PIPELINE_TITLE not in text
    # after the step-bound line, before the hardware lines
    assert text.index("What bounds the step") < text.index(CAUSES_TITLE) < text.index(
        "GPU time by category")


@slow
def test_json_has_the_causes_and_no_pipeline(jobs: dict[str, Path]) -> None:
    payload = json.loads(_summary(jobs["host"], "--json"))
    (cause,) = payload["straggler_causes"]
    assert (cause["rank"], cause["cause"], cause["steps"], cause["recurring"]) == (
        1, "host", [0, 1, 2, 3], True)
    assert cause["idle(us)"] > 10 * cause["median_idle(us)"]
    assert payload["pipeline"] == []


@slow
def test_slow_compute_cost_is_replayed_unless_told_not_to(jobs: dict[str, Path]) -> None:
    (cause,) = json.loads(_summary(jobs["slow_worker"], "--json"))["straggler_causes"]
    assert (cause["rank"], cause["cause"], cause["change"]) == (3, "slow_compute",
                                                               "no-stragglers:3")
    assert cause["cost(us)"] > 0
    (kept,) = json.loads(_summary(jobs["slow_worker"], "--json", "--no-replay")
                         )["straggler_causes"]
    assert kept["change"] == "" and kept["cost(us)"] == kept["held(us)"]


@slow
def test_pipeline_table_has_the_schedule_and_four_stages(jobs: dict[str, Path]) -> None:
    text = _summary(jobs["1f1b"])
    lines = _section(text, PIPELINE_TITLE).splitlines()
    rows = [line.split() for line in lines if line.split()[:1] in (["0"], ["1"], ["2"], ["3"])
            and "1f1b" in line]
    assert [r[:3] for r in rows] == [[str(s), str(s), "1f1b"] for s in range(4)]
    assert all(40 < float(r[4]) < 55 for r in rows)  # % of window: about 47
    # only p2p: no collective, so no word on late ranks
    assert CAUSES_TITLE not in text and NO_LATE_RANK not in text
    stages = json.loads(_summary(jobs["1f1b"], "--json"))["pipeline"]
    assert [s["stage"] for s in stages] == [0, 1, 2, 3]
    assert {s["schedule"] for s in stages} == {"1f1b"}


@slow
def test_balanced_job_has_no_late_rank(jobs: dict[str, Path]) -> None:
    text = _summary(jobs["balanced"])
    assert NO_LATE_RANK in text and CAUSES_TITLE not in text
    payload = json.loads(_summary(jobs["balanced"], "--json"))
    assert payload["straggler_causes"] == [] and payload["pipeline"] == []


@slow
def test_single_rank_has_null_keys_and_no_lines() -> None:
    folder = SAMPLE_TRACES / "cpu_training"
    payload = json.loads(_summary(folder, "--json"))
    assert payload["straggler_causes"] is None and payload["pipeline"] is None
    text = _summary(folder)
    assert NO_LATE_RANK not in text and CAUSES_TITLE not in text


@slow
def test_narrow_terminal_moves_the_evidence_under_the_table(jobs: dict[str, Path]) -> None:
    text = _summary(jobs["slow_worker"], env={"COLUMNS": "80"})
    table = _section(text, CAUSES_TITLE)
    assert all(len(line) <= 80 for line in table.splitlines())
    assert "1. GPU compute 6." in table and "no-stragglers:3" in table


@slow
def test_a_failing_analysis_does_not_sink_the_summary(jobs: dict[str, Path],
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    from hta.trace_analysis import TraceAnalysis

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(TraceAnalysis, "get_straggler_causes", broken)
    payload = json.loads(_summary(jobs["1f1b"], "--json"))
    assert payload["straggler_causes"] is None and len(payload["pipeline"]) == 4
    assert "straggler causes failed: broken on purpose" in caplog.text


# -- the printers, without a job --------------------------------------------------------------
def _printed(print_table, frame: pd.DataFrame | None) -> str:  # noqa: ANN001
    import io

    buffer = io.StringIO()
    print_table(Printer(buffer, rich=False), frame)
    return buffer.getvalue()


def test_printers_print_nothing_without_rows() -> None:
    assert _printed(print_straggler_causes, None) == ""
    assert _printed(print_straggler_causes, pd.DataFrame({"rank": []})) == ""
    assert _printed(print_pipeline, None) == ""


def test_steps_and_evidence_texts() -> None:
    assert steps_text((0, 1, 2, 3)) == "0-3" and steps_text([1, 4]) == "1, 4"
    row = {"cause": "slow_link", "transfer(us)": 2000.0, "median_transfer(us)": 1000.0}
    assert evidence_text(row) == "transfer 2.000 ms/step vs median 1.000"
    assert evidence_text({"cause": "unexplained"}) == "-"
