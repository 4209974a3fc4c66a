"""``hta diff CONTROL_DIR TEST_DIR`` run through ``hta.cli.main`` (in this process): text,
``--json`` parsed back and compared with the in-process :func:`hta.analysis.diff.job_diff`,
options and errors."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from cli_runner import run_cli
from conftest import shared_trace
from diff_cases import GEMM_F, GEMM_H, NEW, load, make_control, make_test, write_job

from hta.analysis.diff import job_diff


def run(*args: str) -> subprocess.CompletedProcess:
    """``hta ARGS`` in this process (``hta.cli.main``; see ``cli_runner``)."""
    return run_cli(args)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli_diff")
    return (write_job(root / "control", make_control(0), make_control(1, steps=3)),
            write_job(root / "test", make_test(0), make_test(1)))


def summary_line(stdout: str, metric: str) -> list[str]:
    line = next(x for x in stdout.splitlines() if x.split()[:1] == [metric])
    return line.split()[1:]


def test_text_output(dirs):
    c, t = dirs
    proc = run("diff", str(c), str(t), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0] == f"control: {c}  ranks: 2  steps: 3"
    assert lines[1] == f"test:    {t}  ranks: 2  steps: 4"
    # rank 0: 2 steps of 10 ms, rank 1: 3 of 10 ms; test: 4 steps of 8 ms on both ranks
    assert lines[2] == ("step time 10.0 ms -> 8.0 ms (-20.0%); "
        "GPU busy time 1.5 ms -> 2.2 ms (+46.7%) per step")
    assert lines[3] == "note: steps per rank differ (2.5 vs 4): every time is per step"
    assert summary_line(proc.stdout, "step_time_mean(us)") == [
        "10,000.0", "8,000.0", "-2,000.0", "-20.0%"]
    assert summary_line(proc.stdout, "busy_time(us)") == ["1,500.0", "2,200.0", "+700.0",
                                                          "+46.7%"]
    assert summary_line(proc.stdout, "idle_time_pctg") == ["6.2", "12.0", "+5.8"]
    assert summary_line(proc.stdout, "comp_comm_overlap_pctg") == ["-", "-", "-"]
    text = proc.stdout
    reg = text.index("Top 10 regressions by kernel")
    imp = text.index("Top 10 improvements by kernel")
    block = text[reg:imp].splitlines()[1:]
    assert [x.split()[-1] for x in block if x.strip()] == ["int)", "new_kernel"]
    assert block[0].split()[:2] == ["+1,500.0", "µs"] and GEMM_H in block[0]
    assert "added" in block[1] and NEW in block[1]
    assert GEMM_F in text[imp:text.index("Top 10 regressions by operator")]
    ops = text[text.index("Top 10 regressions by operator"):]
    assert "slower    aten::mm" in ops and "added     aten::new" in ops


def test_json_matches_in_process(dirs):
    c, t = dirs
    proc = run("diff", str(c), str(t), "--no-cache", "--json", "--top", "1")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    job = job_diff(load(c).t, load(t).t)
    assert payload["verdict"] == job.verdict
    assert payload["control_dir"] == str(c) and payload["test_ranks"] == [0, 1]
    assert payload["skipped"] == {"control": {}, "test": {}}
    assert payload["notes"] == job.notes and payload["threshold_pct"] == 5.0
    assert len(payload["summary"]) == len(job.summary)
    for row, expected in zip(payload["summary"], job.summary.to_dict("records"), strict=True):
        for key, value in expected.items():
            if isinstance(value, float) and math.isnan(value):
                assert row[key] is None, (row["metric"], key)
            else:
                assert row[key] == value, (row["metric"], key)
    assert [r["name"] for r in payload["regressions"]["kernels"]] == [GEMM_H]
    assert [r["name"] for r in payload["improvements"]["kernels"]] == [GEMM_F]
    assert [r["name"] for r in payload["regressions"]["operators"]] == ["aten::mm"]
    assert payload["regressions"]["operators"][0]["status"] == "slower"
    assert len(payload["steps"]) == 5 + 8


def test_options(dirs):
    c, t = dirs
    proc = run("diff", str(c), str(t), "--no-cache", "--json", "--ranks", "1",
               "--short-names", "--threshold", "60")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["control_ranks"] == [1] and payload["test_ranks"] == [1]
    assert payload["verdict"] == ("step time 10.0 ms -> 8.0 ms (-20.0%); "
        "GPU busy time 1.5 ms -> 2.2 ms (+46.7%) per step")
    # with --threshold 60, gemm's +50% is unchanged: the regressions list only names
    # beyond the thresholds (slower or added)
    top = payload["regressions"]["kernels"]
    assert [(r["name"], r["delta_time(us)"], r["status"]) for r in top] == [
        ("new_kernel", 200.0, "added")]
    proc = run("diff", str(c), str(t), "--top", "0")
    assert proc.returncode == 2 and "positive integer" in proc.stderr


def test_terminal_safe_names(tmp_path):
    evil = "evil\x1b[2Jkernel"
    b = make_test(0)
    b.launch_kernel(evil, cpu_ts=100_000, cpu_dur=1_000, gpu_ts=3_000_000, gpu_dur=50_000)
    c = write_job(tmp_path / "c", make_control(0))
    t = write_job(tmp_path / "t", b)
    proc = run("diff", str(c), str(t), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    assert "evil\\x1b[2Jkernel" in proc.stdout
    payload = json.loads(run("diff", str(c), str(t), "--no-cache", "--json").stdout)
    assert evil in [r["name"] for r in payload["regressions"]["kernels"]]


def test_errors_and_help(tmp_path):
    missing = tmp_path / "nowhere"
    proc = run("diff", str(missing), str(tmp_path), "--no-cache")
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"hta: error: trace folder not found: {missing}"]
    helps = run("--help")
    assert "diff" in helps.stdout
    usage = run("diff", "--help")
    assert "CONTROL_DIR" in usage.stdout and "--top N" in usage.stdout


def test_shared_trace_compare():
    root = shared_trace("trace_compare")
    proc = run("diff", str(root / "base"), str(root / "test"), "--no-cache", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    # ProfilerStep#1009 (100298 µs) and #1010 (122149 µs) on both sides
    assert payload["verdict"] == ("step time 111.2 ms -> 111.2 ms (+0.0%); "
        "GPU busy time 843.0 µs -> 841.0 µs (-0.2%) per step")
    imp = payload["improvements"]["kernels"]
    assert len(imp) == 1 and "CUDAFunctor_add<int>" in imp[0]["name"]
    assert (imp[0]["control_time(us)"], imp[0]["test_time(us)"]) == (6.0, 4.0)
    assert payload["regressions"]["kernels"] == []
    assert not (root / "base" / ".hta_cache").exists()


def test_findings_that_appeared_text_and_json(tmp_path):
    """A host sync in every step of the test job: its finding appears, with the saving
    known by construction (4 steps x 5 µs), in the text and in --json."""
    import findings_cases as cases

    _, _ = cases.host_sync(tmp_path / "control", with_sync=False)
    _, expected = cases.host_sync(tmp_path / "test", with_sync=True)
    proc = run("diff", str(tmp_path / "control"), str(tmp_path / "test"), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("Findings ("))
    assert lines[head].startswith("Findings (1 appeared, 0 disappeared, 0 changed")
    # replayed: the host's 20 µs wait a step bounds the step (9.8% of it: medium); the
    # rule's own estimate is the 5 µs GPU bubble a step
    assert lines[head + 1].split()[:2] == ["appeared", "medium"]
    assert lines[head + 1].endswith(
        "Host synchronisation inside the step leaves the GPU idle: aten::item under forward")
    assert expected == 4 * 5_000
    assert 4 * 19 <= float(lines[head + 1].split("->")[1].split()[0]) <= 4 * 20
    payload = json.loads(run("diff", str(tmp_path / "control"), str(tmp_path / "test"),
                             "--no-cache", "--json").stdout)
    rows = [r for r in payload["findings"] if r["rule"] == "host_sync"]
    assert len(rows) == 1 and rows[0]["status"] == "appeared"
    assert rows[0]["control_saving(us)"] is None
    assert 4 * 19 <= rows[0]["test_saving(us)"] <= 4 * 20
    # the causes: the aten::item site appeared, one call a step
    (cause,) = [c for c in payload["causes"] if c["what"] == "aten::item"]
    assert (cause["cause"], cause["verdict"], cause["test"]) == ("sync", "added", 1.0)
    back = json.loads(run("diff", str(tmp_path / "test"), str(tmp_path / "control"),
                          "--no-cache", "--json").stdout)
    assert [r["status"] for r in back["findings"] if r["rule"] == "host_sync"] == [
        "disappeared"]
