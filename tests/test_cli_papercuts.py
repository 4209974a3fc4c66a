"""Smaller things a new user tripped on at the command line: diff's --iterations, outputs
into folders that do not exist, -q's help, cross-rank columns on one rank."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_runner import run_cli
from conftest import SAMPLE_TRACES

SYNTHETIC = SAMPLE_TRACES / "synthetic_4rank"


def test_diff_compares_the_selected_steps() -> None:
    proc = run_cli(["diff", str(SYNTHETIC), str(SYNTHETIC), "--no-cache", "--json",
                    "--iterations", "2-3"])
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)["steps"]
    assert sorted({s["iteration"] for s in steps}) == [2, 3]
    sides = run_cli(["diff", str(SYNTHETIC), str(SYNTHETIC), "--no-cache", "--json",
                     "--control-iterations", "1", "--test-iterations", "3"])
    by_side = {(s["side"], s["iteration"]) for s in json.loads(sides.stdout)["steps"]}
    assert {side for side, _ in by_side} == {"control", "test"}
    assert {it for side, it in by_side if side == "control"} == {1}
    assert {it for side, it in by_side if side == "test"} == {3}
    bad = run_cli(["diff", str(SYNTHETIC), str(SYNTHETIC), "--no-cache", "--iterations", "9"])
    assert bad.returncode == 2
    assert bad.stderr.startswith("hta: error: --iterations:") and "9" in bad.stderr


@pytest.mark.parametrize("sub", ["report", "counters", "export"])
def test_output_under_a_missing_folder_is_refused(sub: str, tmp_path: Path) -> None:
    target = tmp_path / "no_such_dir" / ("r.html" if sub == "report" else "out")
    proc = run_cli([sub, str(SYNTHETIC), "--no-cache", "-q", "-o", str(target)])
    assert proc.returncode == 1
    assert f"{tmp_path / 'no_such_dir'} does not exist; create it first" in proc.stderr
    assert not (tmp_path / "no_such_dir").exists()


@pytest.mark.parametrize("sub", ["counters", "export"])
def test_the_one_folder_o_names_is_created_and_said(sub: str, tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(SYNTHETIC, job)
    out = tmp_path / "out"
    proc = run_cli([sub, str(job), "--no-cache", "-q", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"Created folder {out}\n") and proc.stderr == ""
    assert out.is_dir()
    again = run_cli([sub, str(job), "--no-cache", "-q", "-o", str(out), "--force"])
    assert again.returncode == 0 and "Created folder" not in again.stdout


@pytest.mark.parametrize("sub", ["report", "counters", "export", "diff"])
def test_quiet_help_speaks_of_this_command(sub: str) -> None:
    text = run_cli([sub, "--help"]).stdout
    assert "in summary" not in text
    assert "no progress bar" in text


def test_quiet_help_of_summary_names_the_warnings() -> None:
    text = " ".join(run_cli(["summary", "--help"]).stdout.split())
    assert "no progress bar, no load warnings and no missing-ranks warning" in text


def test_one_rank_has_no_cross_rank_columns(tmp_path: Path) -> None:
    one = run_cli(["summary", str(SYNTHETIC), "--no-cache", "--ranks", "0"]).stdout
    header = one.split("Top 10 kernels")[1].splitlines()[1]
    assert "spread" not in header and "slowest rank" not in header
    assert header.split()[:2] == ["#", "total"]
    four = run_cli(["summary", str(SYNTHETIC), "--no-cache"]).stdout
    assert "spread %" in four.split("Top 10 kernels")[1].splitlines()[1]


def test_command_line_errors_name_no_python_argument(tmp_path: Path) -> None:
    from hta.errors import TraceDiscoveryError
    from hta.trace_analysis import TraceAnalysis

    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli(["summary", str(empty), "--no-cache"])
    assert proc.returncode == 3
    assert "trace_files" not in proc.stderr and "or give one trace file" in proc.stderr
    with pytest.raises(TraceDiscoveryError, match="trace_files="):
        TraceAnalysis(trace_dir=str(empty), cache=False, progress=False)
    twice = tmp_path / "twice"
    shutil.copytree(SYNTHETIC, twice)
    shutil.copy(twice / "rank-1.json.gz", twice / "copy.json.gz")
    proc = run_cli(["summary", str(twice), "--no-cache"])
    assert proc.returncode == 3
    assert "two files claim rank 1" in proc.stderr and "trace_files" not in proc.stderr
    assert "move one of them out of the folder" in proc.stderr
    with pytest.raises(TraceDiscoveryError, match=r"trace_files=\{rank: path\}"):
        TraceAnalysis(trace_dir=str(twice), cache=False, progress=False)


def test_errors_keep_their_command_line_text_through_pickling() -> None:
    import pickle

    from hta.errors import TraceDiscoveryError, TraceLoadError

    err = pickle.loads(pickle.dumps(TraceLoadError("f.json", "bad", "py hint", "cli hint")))
    assert str(err) == "f.json: bad (py hint)"
    assert err.for_command_line() == "f.json: bad (cli hint)"
    plain = pickle.loads(pickle.dumps(TraceLoadError("f.json", "bad", "hint")))
    assert plain.for_command_line() == str(plain) == "f.json: bad (hint)"
    disc = pickle.loads(pickle.dumps(TraceDiscoveryError("python text", cli_message="cli text")))
    assert str(disc) == "python text" and disc.for_command_line() == "cli text"


def test_warnings_with_nothing_to_do_only_with_verbose(tmp_path: Path) -> None:
    from kineto_builder import TraceBuilder

    b = TraceBuilder()
    b.cpu_op("aten::outer", 1_000, 5_000)
    b.cpu_op("aten::straddles", 4_000, 5_000)  # starts inside, ends after: not nested
    b.cpu_op("aten::mm", 12_000, 1_000)
    b.write(tmp_path / "rank-0.json")
    plain = run_cli(["summary", str(tmp_path), "--no-cache"])
    verbose = run_cli(["-v", "summary", str(tmp_path), "--no-cache"])
    assert plain.returncode == verbose.returncode == 0
    note = "overlap their parent without nesting in it"
    assert note not in plain.stderr and note in verbose.stderr
    assert "nothing to do" in verbose.stderr


def test_one_notion_of_the_slowest_rank() -> None:
    from hta.report.present import slowest_rank_text

    job = {"slowest_rank": 1, "slowest_rank_by": "compute_time(us)", "fastest_rank": 0,
           "slowest_rank_value": 1_235.0, "fastest_rank_value": 1_000.0}
    assert slowest_rank_text(job) == ("Slowest rank: 1 (compute 1.235 ms; fastest rank 0: "
                                      "1.000 ms, +23.5%)")
    alike = {**job, "slowest_rank_value": 1_019.0}
    assert slowest_rank_text(alike) == ("No slowest rank: compute 1.000 ms to 1.019 ms on "
                                        "every rank (+1.9%, under 2%)")
    assert slowest_rank_text({"slowest_rank": None}) is None


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_summary_keeps_to_columns(width: int, terminal: bool) -> None:
    import re

    env = {"COLUMNS": str(width)}
    if terminal:
        env.update(FORCE_COLOR="1", TERM="xterm-256color")
    proc = run_cli(["summary", str(SYNTHETIC), "--no-cache"], env=env)
    assert proc.returncode == 0, proc.stderr
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, max(lines, key=len)
    # kernels are named by their display names; a list that moved under its table has
    # its header
    assert "vectorized_elementwise_kernel<4, threshold_kernel_impl::λ, …>" in text
    if width == 80:
        at = next(i for i, line in enumerate(lines) if line.strip().startswith("1. ncclDev"))
        assert lines[at - 1].split() == ["#", "name"]


def test_plain_tables_wrap_headers_and_move_long_text_under_a_header() -> None:
    import io

    from hta.commands.args_and_output import Column, Printer

    out = io.StringIO()
    rows = [{"n": 1.5, "name": "x" * 70}, {"n": 22.25, "name": "short"}]
    Printer(out, rich=False, width=40).table("A title that is longer than forty characters", [
        Column("a long numeric header", lambda r: f"{r['n']:.2f}"),
        Column("name", lambda r: r["name"], numeric=False, wrap=True),
    ], rows)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 40
    assert lines[:2] == ["A title that is longer than forty", "  characters"]
    assert "# name" in [line.strip() for line in lines]
    assert any(line.strip().startswith("1. xxxx") for line in lines)
    # no width: one line per row, whole (as before)
    out = io.StringIO()
    Printer(out, rich=False).table("t", [Column("name", lambda r: r["name"], numeric=False,
                                                wrap=True)], rows)
    assert "x" * 70 in out.getvalue()


def test_figures_name_their_window() -> None:
    summary = run_cli(["summary", str(SYNTHETIC), "--no-cache"]).stdout
    assert ("GPU time per rank (ms; % of the GPU span: each rank's whole trace, first GPU "
            "work to last; per step: hta diff)") in summary
    steps = run_cli(["summary", str(SYNTHETIC), "--no-cache", "--iterations", "2-3"]).stdout
    assert "GPU time per rank (ms; % of the GPU span: the selected steps 2-3)" in steps
    diff = run_cli(["diff", str(SYNTHETIC), str(SYNTHETIC), "--no-cache"]).stdout
    assert ("gpu_time  (per step: each ProfilerStep its own window, mean over steps and "
            "ranks; hta summary's shares are of the whole trace's GPU span)") in diff


def test_summary_savings_are_the_replays_on_a_real_trace() -> None:
    from conftest import shared_trace

    folder = shared_trace("trace_filter")
    payload = json.loads(run_cli(["summary", str(folder), "--no-cache", "--json"]).stdout)
    by_rule = {}
    for f in payload["findings"]:
        by_rule.setdefault(f["rule"], f)
    # the steps are host-bound: overlapping communication replays to no saving, and the
    # finding says so instead of the rule's own estimate
    comm = by_rule["comm_exposed"]
    assert comm["saving_source"] == "replay" and comm["change"] == "overlap-comm"
    assert comm["est_saving(us)"] == 0 and comm["severity"] == "low"
    assert "other work bounds the steps" in comm["evidence"]
    # its host-bound time is long stretches with no operator, which the advice moves off
    # the step: no CUDA graph models that, so the finding keeps its GPU time and says so
    host = by_rule["host_bound"]
    assert host["change"] == "" and host["saving_source"] == "gpu-time"
    assert host["est_saving(us)"] > 0 and "long stretches of host work" in host["evidence"]
    assert [r["rank"] for r in payload["replay_uncertainty"]] == [0, 1]
    text = run_cli(["summary", str(folder), "--no-cache"]).stdout
    assert "largest saving first: the time the steps would lose with the fix" in text


def test_summary_without_replay_keeps_the_rules_gpu_time() -> None:
    from conftest import shared_trace

    folder = shared_trace("trace_filter")
    payload = json.loads(run_cli(["summary", str(folder), "--no-cache", "--json",
                                  "--no-replay"]).stdout)
    assert {f["saving_source"] for f in payload["findings"]} <= {"gpu-time", ""}
    assert payload["replay_uncertainty"] is None
    comm = next(f for f in payload["findings"] if f["rule"] == "comm_exposed")
    assert comm["est_saving(us)"] > 0  # the rule's own estimate, not the replay's 0
    text = run_cli(["summary", str(folder), "--no-cache", "--no-replay"]).stdout
    assert " GPU " in text


def test_a_job_too_large_to_replay_here_keeps_the_rules_savings_and_says_so(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import hta.report.answers as answers
    from hta.cli import main

    monkeypatch.setattr(answers, "REPLAY_MAX_EVENTS", 1_000)  # the sample has 2,032
    assert main(["summary", str(SYNTHETIC), "--no-cache", "-q", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert {f["saving_source"] for f in payload["findings"]} == {"gpu-time"}
    assert payload["replay_note"].startswith("The findings' savings are the rules' GPU-time "
                                             "estimates, not replayed: the job has 2,032 events")
    assert payload["replay_uncertainty"] is None
    assert main(["summary", str(SYNTHETIC), "--no-cache", "-q", "--replay", "--json"]) == 0
    forced = json.loads(capsys.readouterr().out)
    assert "replay" in {f["saving_source"] for f in forced["findings"]}
    assert forced["replay_note"] == ""
