"""A rank of the job without a trace is said, never silent: a warning on stderr, a field
in ``--json``, a line in the report (issue: a missing rank is silent)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_runner import run_cli
from conftest import SAMPLE_TRACES

from hta.trace_analysis import TraceAnalysis

SYNTHETIC = SAMPLE_TRACES / "synthetic_4rank"


@pytest.fixture()
def without_rank_2(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    shutil.copytree(SYNTHETIC, folder)
    (folder / "rank-2.json.gz").unlink()
    return folder


def test_facade_names_the_missing_rank(without_rank_2: Path) -> None:
    analyzer = TraceAnalysis(trace_dir=str(without_rank_2), cache=False, progress=False)
    assert analyzer.ranks == [0, 1, 3]
    assert analyzer.missing_ranks == [2]
    # ranks left out on purpose are not missing
    picked = TraceAnalysis(trace_dir=str(without_rank_2), ranks=[0, 1], cache=False,
                           progress=False)
    assert picked.missing_ranks == []
    asked = TraceAnalysis(trace_dir=str(without_rank_2), ranks=[1, 2, 3], cache=False,
                          progress=False)
    assert asked.missing_ranks == [2]


def test_whole_job_has_none_missing() -> None:
    analyzer = TraceAnalysis(trace_dir=str(SYNTHETIC), cache=False, progress=False)
    assert analyzer.missing_ranks == []
    proc = run_cli(["summary", str(SYNTHETIC), "--no-cache"])
    assert "no trace" not in proc.stderr


def test_summary_warns_and_json_lists_it(without_rank_2: Path) -> None:
    proc = run_cli(["summary", str(without_rank_2), "--no-cache"])
    assert proc.returncode == 0
    assert proc.stderr.count("hta: warning: 1 of the job's 4 ranks has no trace in") == 1
    assert "(rank 2)" in proc.stderr
    proc = run_cli(["summary", str(without_rank_2), "--no-cache", "--json"])
    assert json.loads(proc.stdout)["missing_ranks"] == [2]
    assert "rank 2" in proc.stderr
    quiet = run_cli(["summary", str(without_rank_2), "--no-cache", "--ranks", "0,1"])
    assert "no trace" not in quiet.stderr


def test_report_says_it(without_rank_2: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    proc = run_cli(["report", str(without_rank_2), "--no-cache", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert "rank 2" in proc.stderr
    page = out.read_text()
    assert "missing ranks" in page and "1 (2): no trace in the folder" in page
    # -q leaves the warning out; the page still says it
    quiet = run_cli(["report", str(without_rank_2), "--no-cache", "-q", "--force", "-o",
                     str(out)])
    assert quiet.returncode == 0 and "has no trace" not in quiet.stderr
    assert "1 (2): no trace in the folder" in out.read_text()


def test_diff_warns_for_each_side(without_rank_2: Path) -> None:
    proc = run_cli(["diff", str(SYNTHETIC), str(without_rank_2), "--no-cache"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("has no trace") == 1
    proc = run_cli(["diff", str(SYNTHETIC), str(without_rank_2), "--no-cache", "--json"])
    assert json.loads(proc.stdout)["missing_ranks"] == {"control": [], "test": [2]}
