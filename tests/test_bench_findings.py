"""benchmarks/bench_findings.py runs end to end on the bundled sample (a benchmark, not a
timed test: only that it runs and reports every figure it promises)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "synthetic_4rank"


@pytest.mark.slow  # a load, the findings, a summary and a report, each in a fresh process
def test_bench_findings_reports_findings_summary_and_report(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    env = {**os.environ, "HTA_CACHE_DIR": str(tmp_path / "cache")}  # not the user's cache
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_findings.py"),
                           str(SAMPLE), "-n", "1", "--whole", "--without-replay", "--json",
                           str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "summary" in done.stdout and "report" in done.stdout
    (row,) = json.loads(out.read_text())
    assert row["trace_events"] > 0 and row["findings_median_s"] > 0
    # the loaded rows are fewer than the trace events (flow arrows and metadata are none)
    assert 0 < row["rows"] < row["trace_events"]
    assert row["findings_s_per_M_rows"] > row["findings_s_per_M_events"] > 0
    assert row["rules_median_s"] > 0 and row["replay_share"] < 1
    assert "without the replay" in done.stdout
    for key in ("summary_s", "summary_peak_MiB", "report_s", "report_peak_MiB",
                "report_MB"):
        assert row[key] > 0, key


def test_bench_findings_phases_reports_each_phase(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The phases' benchmark runs on the sample and cuts the call into its phases, which
    add up to no more than the call."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_findings_phases as bench
    finally:
        sys.path.pop(0)
    monkeypatch.setenv("HTA_CACHE_DIR", str(tmp_path / "cache"))  # not the user's cache
    run = bench.phases(SAMPLE, ROOT)
    assert run["ranks"] == 4 and run["events"] > 0 and run["wall"] > 0
    assert set(run["phases"]) == set(bench.PHASES)
    assert run["phases"]["job rules"] > 0 and run["phases"]["rank rules"] > 0
    assert sum(run["phases"].values()) <= run["wall"] * 1.01
