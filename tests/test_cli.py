"""The ``hta`` command, run as a real subprocess.

``python -m hta.cli`` always, and the ``hta`` console script when it is on PATH. Figures
printed by ``hta summary`` (text and ``--json``) are checked against
``TraceAnalysis.get_rank_summary()``; errors end as one line on stderr with exit code 3.
Shared traces are always read with ``--no-cache`` so nothing is written beside them.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, SAMPLE_TRACES, shared_trace
from kineto_builder import TraceBuilder

from hta.trace_analysis import TraceAnalysis

EXIT_TRACE_ERROR = 3

ENTRY_POINTS = [pytest.param([sys.executable, "-m", "hta.cli"], id="python-m")]
if shutil.which("hta"):
    ENTRY_POINTS.append(pytest.param([shutil.which("hta")], id="console-script"))


def run(cmd: list[str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd or ROOT, env=env)


def parse_table(stdout: str) -> dict[str, list[float]]:
    """The summary table (one figure per line, one column per rank) as numbers."""
    rows: dict[str, list[float]] = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith(("Job:", " ")) and parts[0] != "rank":
            cells = parts[1:]
            if all(c == "-" or c.replace(",", "").replace(".", "").isdigit() for c in cells):
                rows[parts[0]] = [math.nan if c == "-" else float(c.replace(",", ""))
                                  for c in cells]
    return rows


def check_text_against(summary: pd.DataFrame, stdout: str) -> None:
    header = next(line for line in stdout.splitlines() if line.strip().startswith("rank "))
    assert header.split() == [x for r in summary["rank"] for x in ("rank", str(r))]
    table = parse_table(stdout)
    assert set(table) == set(summary.columns) - {"rank"}
    for col, shown in table.items():
        for value, cell in zip(summary[col].tolist(), shown, strict=True):
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(cell), col
            elif pd.api.types.is_integer_dtype(summary[col]):
                assert cell == value, col
            else:
                assert abs(cell - value) <= 0.05 + 1e-9, col  # shown with one decimal


def check_json_against(summary: pd.DataFrame, stdout: str) -> dict:
    payload = json.loads(stdout)
    rows = payload["ranks"]
    assert [r["rank"] for r in rows] == summary["rank"].tolist()
    for row, (_, expected) in zip(rows, summary.iterrows(), strict=True):
        assert set(row) == set(summary.columns)
        for col in summary.columns:
            value = expected[col]
            if isinstance(value, float) and math.isnan(value):
                assert row[col] is None, col
            else:
                assert row[col] == value, col
    return payload


# --------------------------------------------------------------------------------------------
# summary on real traces
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_summary_on_shared_trace_filter(cmd: list[str]) -> None:
    folder = shared_trace("trace_filter")
    summary = TraceAnalysis(trace_dir=folder, cache=False, progress=False).get_rank_summary()
    assert summary["gpu_events"].min() > 0  # a real GPU job: the figures are not all zero
    text = run(cmd, "summary", str(folder), "--no-cache")
    assert text.returncode == 0, text.stderr
    assert text.stderr == ""
    assert text.stdout.startswith(f"Job: {folder}  ranks: 2 of world size 128\n")
    check_text_against(summary, text.stdout)
    as_json = run(cmd, "summary", str(folder), "--no-cache", "--json")
    assert as_json.returncode == 0, as_json.stderr
    payload = check_json_against(summary, as_json.stdout)
    assert payload["trace_dir"] == str(folder)
    assert payload["skipped"] == {}
    analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    assert payload["unclassified_kernels"] == analyzer.get_unclassified_kernels()["name"].nunique()
    assert not (folder / ".hta_cache").exists()


def test_summary_ranks_option() -> None:
    folder = shared_trace("trace_filter")
    proc = run([sys.executable, "-m", "hta.cli"], "summary", str(folder), "--no-cache",
               "--json", "--ranks", "1")
    assert proc.returncode == 0, proc.stderr
    assert [r["rank"] for r in json.loads(proc.stdout)["ranks"]] == [1]


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_summary_on_cpu_training_sample(cmd: list[str], tmp_path: Path) -> None:
    sample = SAMPLE_TRACES / "cpu_training"
    summary = TraceAnalysis(trace_dir=sample, cache=False, progress=False).get_rank_summary()
    assert summary["events"].iloc[0] > 1000
    text = run(cmd, "summary", str(sample), "--no-cache")
    assert text.returncode == 0, text.stderr
    check_text_against(summary, text.stdout)
    # default options on a copy: the cache is written beside it and reused
    copy = tmp_path / "cpu_training"
    shutil.copytree(sample, copy, ignore=shutil.ignore_patterns(".hta_cache"))
    for _ in range(2):
        as_json = run(cmd, "summary", str(copy), "--json", cwd=tmp_path)
        assert as_json.returncode == 0, as_json.stderr
        check_json_against(summary, as_json.stdout)
    assert len(list((copy / ".hta_cache").iterdir())) == 1


# --------------------------------------------------------------------------------------------
# errors: exit code 3 and one line on stderr
# --------------------------------------------------------------------------------------------


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == EXIT_TRACE_ERROR, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("hta: error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_missing_folder(cmd: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    line = one_line_error(run(cmd, "summary", str(missing), "--no-cache"))
    assert line == f"hta: error: trace folder not found: {missing}"


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_empty_folder(cmd: list[str], tmp_path: Path) -> None:
    line = one_line_error(run(cmd, "summary", str(tmp_path), "--no-cache"))
    assert f"no trace files (*.json, *.json.gz) in {tmp_path} (the folder is empty)" in line
    assert "pass trace_files=" in line


def write_job_with_corrupt_file(folder: Path) -> Path:
    for rank in (0, 1):
        b = TraceBuilder(rank=rank)
        b.cpu_op("aten::mm", ts=1_000, dur=500)
        b.launch_kernel("sgemm", cpu_ts=1_100, cpu_dur=50, gpu_ts=2_000, gpu_dur=300)
        b.write(folder / f"rank-{rank}.json.gz")
    bad = folder / "rank-2.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X"}]}')[:-12])
    return bad


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_corrupt_file_is_skipped_and_reported(cmd: list[str], tmp_path: Path) -> None:
    bad = write_job_with_corrupt_file(tmp_path)
    proc = run(cmd, "summary", str(tmp_path), "--no-cache", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert [r["rank"] for r in payload["ranks"]] == [0, 1]
    assert list(payload["skipped"]) == [str(bad)]
    assert "gzip stream is truncated or corrupt" in payload["skipped"][str(bad)]
    text = run(cmd, "summary", str(tmp_path), "--no-cache")
    assert text.returncode == 0
    lines = text.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"skipped {bad}: the gzip stream is truncated or corrupt")


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_corrupt_file_with_strict(cmd: list[str], tmp_path: Path) -> None:
    bad = write_job_with_corrupt_file(tmp_path)
    line = one_line_error(run(cmd, "summary", str(tmp_path), "--no-cache", "--strict"))
    assert line.startswith(f"hta: error: {bad}: the gzip stream is truncated or corrupt")
    assert "collect the trace again" in line


def test_only_corrupt_files(tmp_path: Path) -> None:
    (tmp_path / "rank-0.json").write_text('{"traceEvents": [')
    line = one_line_error(run([sys.executable, "-m", "hta.cli"], "summary", str(tmp_path),
                              "--no-cache"))
    assert line.startswith("hta: error: no rank could be loaded (rank-0.json: invalid JSON")


# --------------------------------------------------------------------------------------------
# help and usage
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_help(cmd: list[str]) -> None:
    proc = run(cmd, "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: hta")
    assert "summary" in proc.stdout
    sub = run(cmd, "summary", "--help")
    assert sub.returncode == 0
    for option in ("--json", "--no-cache", "--strict", "--ranks", "DIR"):
        assert option in sub.stdout


def test_no_command_prints_help_and_exits_2() -> None:
    proc = run([sys.executable, "-m", "hta.cli"])
    assert proc.returncode == 2
    assert proc.stdout.startswith("usage: hta")


def test_unknown_option_is_a_usage_error() -> None:
    proc = run([sys.executable, "-m", "hta.cli"], "summary", "--frobnicate", "x")
    assert proc.returncode == 2
    assert "unrecognized arguments: --frobnicate" in proc.stderr
