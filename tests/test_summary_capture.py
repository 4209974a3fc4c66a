"""``hta summary`` says how much graph-replayed kernel time found its operator in the
capture traces beside the replay (issue: serving traces, capture merge)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import run_cli
from test_serving_capture import LAYERS, K, M, N, capture_trace, replay_job


def test_summary_reports_the_capture_merge(tmp_path: Path) -> None:
    folder = replay_job(tmp_path / "job")
    capture_trace(folder / "capture_traces" / "bs_32_rank0.json")
    proc = run_cli(["summary", str(folder), "--no-cache"])
    assert proc.returncode == 0, proc.stderr
    gflop = LAYERS * 2 * M * K * N / 1e9
    assert (f"Graph replays: 1 of 1 matched a capture in capture_traces/; 100.0% of the "
            f"replayed kernel time ({LAYERS * 12.0 / 1e3:,.3f} ms) found its operator (GEMM "
            f"{gflop:,.3f} GFLOP)") in proc.stdout
    payload = json.loads(run_cli(["summary", str(folder), "--no-cache", "--json"]).stdout)
    assert payload["capture_merge"][0]["with_op_pctg"] == 100.0


def test_no_capture_folder_no_line(tmp_path: Path) -> None:
    folder = replay_job(tmp_path / "job")
    proc = run_cli(["summary", str(folder), "--no-cache"])
    assert "Graph replays" not in proc.stdout
    payload = json.loads(run_cli(["summary", str(folder), "--no-cache", "--json"]).stdout)
    assert payload["capture_merge"] is None
