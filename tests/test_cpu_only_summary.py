"""``hta summary`` on a CPU-only profile says so instead of GPU tables of zeros (issue:
CPU-only traces: 'idle % of window 100.0' beside 'GPU idle 0.000', and advice to record
shapes the trace has)."""

from __future__ import annotations

import json

from cli_runner import run_cli
from conftest import SAMPLE_TRACES

CPU = SAMPLE_TRACES / "cpu_training"


def test_cpu_only_summary_has_no_gpu_tables() -> None:
    proc = run_cli(["summary", str(CPU), "--no-cache"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "No GPU work in these traces (a CPU-only profile)" in out
    assert "idle % of window" not in out and "GPU idle" not in out
    assert "What the findings explain" not in out
    assert "record_shapes" not in out  # the sample was recorded with shapes
    assert "no operator launched GPU work" in out
    steps = out.split("Steps per rank\n")[1].splitlines()
    assert steps[0].split() == ["rank", "events", "steps", "step", "(ms)"]
    assert steps[1].split()[0] == "0" and steps[1].split()[2] == "3"


def test_cpu_only_json_says_it() -> None:
    payload = json.loads(run_cli(["summary", str(CPU), "--no-cache", "--json"]).stdout)
    assert payload["cpu_only"] is True
    gpu = json.loads(run_cli(["summary", str(SAMPLE_TRACES / "synthetic_4rank"), "--no-cache",
                              "--json"]).stdout)
    assert gpu["cpu_only"] is False
