"""The ``hta`` command: ``hta.cli.main`` in this process (``cli_runner``), and the installed
console script and a closed pipe as real subprocesses.

Every assertion holds for both ways of running it; the console script runs only when it is
on PATH. What
``hta summary`` prints (plain text when piped, ``--json``) is checked against
:func:`hta.report.overview.job_overview` (whose figures ``test_overview.py`` checks by
construction) and against counts taken here from the trace JSON; ``report``, ``counters``
and ``export`` outputs are read back. Errors end as one line on stderr with a non-zero
exit code. Shared traces are always read with ``--no-cache`` so nothing is written beside
them.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from cli_runner import run_cli
from conftest import ROOT, SAMPLE_TRACES, shared_trace
from kineto_builder import TraceBuilder
from overview_cases import write_job

from hta.analysis.display_names import DISPLAY_WIDTH
from hta.report.overview import job_overview
from hta.report.packing import packed_plotly, report_html
from hta.report.present import display_name, full_text
from hta.trace_analysis import TraceAnalysis

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TRACE_ERROR = 0, 1, 2, 3
SYNTHETIC = SAMPLE_TRACES / "synthetic_4rank"
SUBCOMMANDS = ("summary", "report", "diff", "counters", "export")

#: ``hta.cli.main`` run in this process (:mod:`cli_runner`): what ``python -m hta.cli``
#: runs, without a Python start and a pandas import per call.
IN_PROCESS = ["hta.cli.main"]
#: Tests that the installed console script also runs as a real process.
ENTRY_POINTS = [pytest.param(IN_PROCESS, id="in-process")]
if shutil.which("hta"):
    ENTRY_POINTS.append(pytest.param([shutil.which("hta")], id="console-script"))
PY = IN_PROCESS
#: The module run as a real process (closed pipes need one).
PY_PROCESS = [sys.executable, "-m", "hta.cli"]


def run(cmd: list[str], *args: str, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``cmd ARGS``: in this process for :data:`IN_PROCESS` (``hta.cli.main``), else a real
    subprocess (the installed console script)."""
    if cmd is IN_PROCESS:
        return run_cli(args, cwd=cwd, env=env)
    full_env = dict(os.environ, PYTHONPATH=str(ROOT))
    for key in ("FORCE_COLOR", "NO_COLOR", "COLUMNS"):
        full_env.pop(key, None)
    full_env.update(env or {})
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd or ROOT, env=full_env)


def load(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


def json_event_counts(folder: Path) -> dict[int, int]:
    """Complete events per rank, counted in the JSON with the standard library."""
    out = {}
    for path in sorted(folder.glob("*.json*")):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as fh:
            doc = json.load(fh)
        out[int(doc["distributedInfo"]["rank"])] = sum(
            1 for e in doc["traceEvents"] if e.get("ph") == "X")
    return out


def text_table(stdout: str, title: str) -> list[list[str]]:
    """The rows (cells split on 2+ spaces) of the plain-text table under ``title``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def close(cell: str, value: float, digits: int) -> bool:
    if cell == "-":
        return value is None or (isinstance(value, float) and math.isnan(value))
    return abs(float(cell.replace(",", "")) - value) <= 0.5 * 10 ** -digits + 1e-9


# --------------------------------------------------------------------------------------------
# summary
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_summary_text_on_the_sample(cmd: list[str]) -> None:
    expected = job_overview(load(SYNTHETIC).t)
    proc = run(cmd, "summary", str(SYNTHETIC), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "\x1b[" not in proc.stdout  # piped: plain text, no colour codes
    assert proc.stdout.startswith(
        f"Job: {SYNTHETIC}  ranks: 4 of world size 4  device: NVIDIA A100-SXM4-80GB  "
        f"events: {sum(json_event_counts(SYNTHETIC).values()):,}\n")
    gpu = text_table(proc.stdout, "GPU time per rank")
    assert len(gpu) == 4
    for cells, r in zip(gpu, expected.ranks.to_dict("records"), strict=True):
        assert cells[0] == str(r["rank"]) and cells[1] == str(r["steps"])
        assert close(cells[2], r["step_time_mean(us)"] / 1e3, 3)
        assert close(cells[3], r["kernel_time(us)"] / 1e3, 3)
        for cell, key in zip(cells[4:9], ["compute_time_pctg", "exposed_comm_time_pctg",
                                          "exposed_memory_time_pctg", "idle_time_pctg",
                                          "comp_comm_overlap_pctg"]):
            assert close(cell, r[key], 1), key
    idle = text_table(proc.stdout, "Why the GPU is idle")
    for cells, r in zip(idle, expected.ranks.to_dict("records"), strict=True):
        # one idle figure (the idle % of the span, in ms) and its causes as shares
        assert close(cells[1], r["idle_time(us)"] / 1e3, 3)
        # the same figure as the idle % of the first table (rounded to 0.01 %)
        assert abs(float(cells[1]) - r["idle_time_pctg"] * r["kernel_time(us)"] / 1e5) \
            <= 5e-5 * r["kernel_time(us)"] / 1e3 + 5e-4
        gaps = r["host_wait(us)"] + r["kernel_wait(us)"] + r["other_idle(us)"]
        assert close(cells[2], 100 * r["host_wait(us)"] / gaps, 1)
        assert close(cells[3], 100 * r["kernel_wait(us)"] / gaps, 1)
        assert close(cells[4], 100 * r["other_idle(us)"] / gaps, 1)
        assert abs(sum(float(c) for c in cells[2:5]) - 100) <= 0.15
        assert close(cells[6], r["queue_length_max"], 0)
        assert cells[7] == str(r["memcpy_count"]) and cells[9] == str(r["memset_count"])
    kernels = text_table(proc.stdout, "Top 10 kernels")
    # each kernel by its display name (function and key template parameters), at most
    # DISPLAY_WIDTH characters; --json keeps the whole name
    shown = [c[-1] for c in kernels]
    assert shown == [full_text(display_name(n, DISPLAY_WIDTH))
                     for n in expected.top_kernels["name"]]
    assert max(len(n) for n in shown) <= DISPLAY_WIDTH
    assert "ncclDevKernel_AllReduce_Sum_f32_RING_LL" in shown
    spread = text_table(proc.stdout, "Spread across ranks")
    assert [c[0] for c in spread] == ["mean step time", "GPU span", "GPU busy", "compute",
                                      "exposed communication", "GPU idle"]
    # the sample's ranks compute within 0.3% of each other: no rank is called the slowest,
    # and no second notion of it ("longest mean step") is printed beside it
    job = expected.job
    lo, hi = job["fastest_rank_value"], job["slowest_rank_value"]
    assert 100 * (hi - lo) / lo < 2
    assert "No slowest rank: compute " in proc.stdout and "Slowest rank:" not in proc.stdout
    assert "Longest mean step" not in proc.stdout


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_summary_json_on_the_sample(cmd: list[str]) -> None:
    analyzer = load(SYNTHETIC)
    expected = job_overview(analyzer.t)
    proc = run(cmd, "summary", str(SYNTHETIC), "--no-cache", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["trace_dir"] == str(SYNTHETIC)
    assert payload["iterations"] is None
    assert payload["skipped"] == {} and payload["unclassified_kernels"] == 0
    counts = json_event_counts(SYNTHETIC)
    assert [r["rank"] for r in payload["ranks"]] == [0, 1, 2, 3]
    for got, want in zip(payload["ranks"], expected.ranks.to_dict("records"), strict=True):
        assert got["events"] == counts[got["rank"]]
        assert set(got) == set(want)
        for key, value in want.items():
            if isinstance(value, float) and math.isnan(value):
                assert got[key] is None, key
            else:
                assert got[key] == value, key
    assert [k["name"] for k in payload["top_kernels"]] == expected.top_kernels["name"].tolist()
    assert payload["job"]["slowest_rank"] == expected.job["slowest_rank"]
    assert [s["metric"] for s in payload["spread"]] == expected.spread["metric"].tolist()
    summary = analyzer.get_rank_summary()
    assert [r["gpu_events"] for r in payload["rank_summary"]] == summary["gpu_events"].tolist()


def test_summary_opens_with_the_top_findings() -> None:
    """The findings table comes first (after the header line), the top 5 of
    get_findings() in order, one line each; --json has them all."""
    expected = load(SYNTHETIC).get_findings()
    assert len(expected) >= 1
    proc = run(PY, "summary", str(SYNTHETIC), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[2].startswith("Findings (")
    assert lines.index(lines[2]) < next(i for i, x in enumerate(lines)
                                        if x.startswith("GPU time per rank"))
    rows = text_table(proc.stdout, "Findings (")
    top = expected.head(5).to_dict("records")
    assert len(rows) == len(top)
    for cells, want in zip(rows, top, strict=True):
        assert cells[0] == want["severity"]
        gpu = want["saving_source"] == "gpu-time"  # labelled: not replayed step time
        assert cells[1].endswith(" GPU") == gpu
        assert close(cells[1].removesuffix(" GPU"), want["est_saving(us)"] / 1e3, 3)
        if want["saving_source"] == "replay":  # the replayed saving's range
            low, high = (float(x) for x in cells[2].split("-"))
            assert low <= float(cells[1]) <= high
        assert close(cells[3], want["share_pctg"], 1)
        assert cells[5].startswith(want["title"])
    payload = json.loads(run(PY, "summary", str(SYNTHETIC), "--no-cache", "--json").stdout)
    assert [f["rule"] for f in payload["findings"]] == expected["rule"].tolist()
    assert [f["est_saving(us)"] for f in payload["findings"]] == pytest.approx(
        expected["est_saving(us)"].tolist())
    assert all(isinstance(f["ranks"], list) for f in payload["findings"])


def test_summary_findings_of_a_generated_sync(tmp_path: Path) -> None:
    """A job with a host sync in every step: its finding is listed with the saving known by
    construction; the same job without the sync lists none of that rule."""
    import findings_cases as cases

    _, expected = cases.host_sync(tmp_path / "sync")
    text = run(PY, "summary", str(tmp_path / "sync"), "--no-cache").stdout
    rows = [r for r in text_table(text, "Findings (") if "Host synchronisation" in r[-1]]
    assert len(rows) == 1 and rows[0][4] == "0"
    # the replayed saving (no-sync:aten::item): the host blocks 20 µs a step in the sync
    # and its loop bounds the step, so each step ends 20 µs sooner, less the host's usual
    # CPU step; the rule's own estimate is the 5 µs GPU bubble a step
    assert expected == 4 * 5_000
    assert 4 * 19_000 <= float(rows[0][1]) * 1e6 <= 4 * 20_000
    cases.host_sync(tmp_path / "clean", with_sync=False)
    payload = json.loads(run(PY, "summary", str(tmp_path / "clean"), "--no-cache",
                             "--json").stdout)
    assert [f for f in payload["findings"] if f["rule"] == "host_sync"] == []


def test_summary_json_on_a_hand_built_job(tmp_path: Path) -> None:
    """Exact figures of overview_cases.py, through the command line."""
    folder = write_job(tmp_path)
    payload = json.loads(run(PY, "summary", str(folder), "--no-cache", "--json").stdout)
    r0, r1 = payload["ranks"]
    assert (r0["compute_time(us)"], r1["compute_time(us)"]) == (46.0, 66.0)
    assert (r0["host_wait(us)"], r0["kernel_wait(us)"], r0["other_idle(us)"]) == (
        214.0, 2.0, 74.0)
    assert (r0["comp_comm_overlap_pctg"], r1["comp_comm_overlap_pctg"]) == (60.0, 100.0)
    assert payload["job"]["slowest_rank"] == 1
    assert payload["top_kernels"][0]["total(us)"] == 100.0
    one = json.loads(run(PY, "summary", str(folder), "--no-cache", "--json",
                         "--iterations", "2", "--ranks", "0", "--top", "1").stdout)
    assert one["iterations"] == [2]
    assert [r["rank"] for r in one["ranks"]] == [0]
    assert one["ranks"][0]["kernel_time(us)"] == 61.0
    assert len(one["top_kernels"]) == 1 and one["top_kernels"][0]["total(us)"] == 20.0


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_summary_on_shared_trace_filter(cmd: list[str]) -> None:
    folder = shared_trace("trace_filter")
    counts = {0: None, 1: None}
    for path in sorted(folder.glob("*.json.gz")):
        with gzip.open(path, "rt") as fh:
            doc = json.load(fh)
        counts[int(path.name.split("-")[1].split(".")[0])] = sum(
            1 for e in doc["traceEvents"] if e.get("ph") == "X")
    text = run(cmd, "summary", str(folder), "--no-cache")
    assert text.returncode == 0, text.stderr
    # ranks 0 and 1 of a 128-rank job: the only thing on stderr is that warning
    assert text.stderr == (f"hta: warning: 126 of the job's 128 ranks have no trace in {folder} "
                           "(ranks 2-127); cross-rank figures cover the 2 loaded rank(s) only\n")
    assert text.stdout.startswith(f"Job: {folder}  ranks: 2 of world size 128  "
                                  "device: unknown device  "  # GPU work, no deviceProperties
                                  f"events: {sum(counts.values()):,}\n")
    as_json = run(cmd, "summary", str(folder), "--no-cache", "--json")
    assert as_json.returncode == 0, as_json.stderr
    payload = json.loads(as_json.stdout)
    assert {r["rank"]: r["events"] for r in payload["ranks"]} == counts
    assert all(r["gpu_events"] > 0 for r in payload["ranks"])
    assert payload["skipped"] == {}
    analyzer = load(folder)
    assert payload["unclassified_kernels"] == analyzer.get_unclassified_kernels()["name"].nunique()
    assert not (folder / ".hta_cache").exists()


def test_summary_ranks_and_iterations_options() -> None:
    folder = shared_trace("trace_filter")
    proc = run(PY, "summary", str(folder), "--no-cache", "--json", "--ranks", "1",
               "--iterations", "552")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert [r["rank"] for r in payload["ranks"]] == [1]
    assert payload["iterations"] == [552] and payload["ranks"][0]["steps"] == 1


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_summary_on_cpu_training_sample_and_cache(cmd: list[str], tmp_path: Path) -> None:
    sample = SAMPLE_TRACES / "cpu_training"
    expected = job_overview(load(sample).t).ranks.iloc[0]
    text = run(cmd, "summary", str(sample), "--no-cache")
    assert text.returncode == 0, text.stderr
    # a CPU-only profile: steps per rank instead of GPU tables of zeros
    assert "No GPU work in these traces (a CPU-only profile)" in text.stdout
    steps = text_table(text.stdout, "Steps per rank")
    assert steps == [["0", f"{expected['events']:,}", "3",
                      f"{expected['step_time_mean(us)'] / 1e3:,.3f}"]]
    assert "GPU time per rank" not in text.stdout
    assert "Top " not in text.stdout  # no GPU kernels
    # default options on a copy: the cache is written beside it and reused
    copy = tmp_path / "cpu_training"
    shutil.copytree(sample, copy, ignore=shutil.ignore_patterns(".hta_cache"))
    for _ in range(2):
        as_json = run(cmd, "summary", str(copy), "--json", cwd=tmp_path)
        assert as_json.returncode == 0, as_json.stderr
        assert json.loads(as_json.stdout)["ranks"][0]["events"] == expected["events"]
    assert len(list((copy / ".hta_cache").iterdir())) == 1


def test_summary_on_a_terminal_escapes_markup(tmp_path: Path) -> None:
    """Rich tables with colour when forced to a terminal; a kernel named like rich markup
    prints as written and styles nothing."""
    weird = "[bold red]boom[/bold red] <script>alert(1)</script>"
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        b.annotation("ProfilerStep#1", 0, 100_000)
        b.cpu_op("aten::[link=x]op[/link]", 1_000, 5_000)
        b.launch_kernel(weird, cpu_ts=2_000, cpu_dur=500, gpu_ts=10_000,
                        gpu_dur=20_000 + 1_000 * rank)
        b.write(tmp_path / f"rank-{rank}.json")
    proc = run(PY, "summary", str(tmp_path), "--no-cache",
               env={"FORCE_COLOR": "1", "COLUMNS": "200", "TERM": "xterm-256color"})
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" in proc.stdout and "┃" in proc.stdout
    plain = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    assert weird in plain
    assert "\x1b[1;31mboom" not in proc.stdout
    assert "Slowest rank: 1" in plain


# --------------------------------------------------------------------------------------------
# report, counters, export
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_report_writes_once_and_refuses_to_overwrite(cmd: list[str], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = run(cmd, "report", str(SYNTHETIC), "--no-cache", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"Wrote {out.resolve()} ({out.stat().st_size / 1e6:,.1f} MB)\n"
    html = report_html(out.read_text())
    assert html.startswith("<!DOCTYPE html>")
    plotly_js = packed_plotly()[0]
    assert html.count(plotly_js) == 1  # embedded once (compressed: hta/report/packing.py)
    page = html.replace(plotly_js, "")
    assert [re.sub(r"\d+", "N", t) for t in re.findall(r"<script\b[^>]*>", page)] == [
        '<script type="text/plain" id="hta-figures" data-deflated="N">', "<script>",
        '<script type="text/plain" id="hta-plotly" data-deflated="N">', "<script>",
    ]  # nothing loaded from elsewhere: works offline
    assert "http://" not in page and "https://" not in page
    for sid in ("overview", "temporal", "idle", "kernels", "overlap", "annotations", "launch",
                "queue", "bandwidth", "operators", "critical-path", "unclassified"):
        assert f'<section id="{sid}">' in html
    assert "failed on this trace" not in html
    again = run(cmd, "report", str(SYNTHETIC), "--no-cache", "-o", str(out))
    assert again.returncode == EXIT_ERROR
    assert again.stderr == (f"hta: error: {out} already exists; pass --force to overwrite, "
                            "or choose another output with -o\n")
    assert again.stdout == ""
    forced = run(cmd, "report", str(SYNTHETIC), "--no-cache", "-o", str(out), "--force",
                 "--iterations", "2", "--title", "step two")
    assert forced.returncode == 0, forced.stderr
    assert "<title>step two</title>" in out.read_text()


def test_report_on_shared_trace_filter(tmp_path: Path) -> None:
    folder = shared_trace("trace_filter")
    out = tmp_path / "r.html"
    proc = run(PY, "report", str(folder), "--no-cache", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert "of world size 128" in html
    assert "failed on this trace" not in html
    assert not (folder / ".hta_cache").exists()


@pytest.mark.parametrize("folder", ["synthetic_4rank", "trace_filter"])
def test_counters_writes_traces_that_load_back(folder: str, tmp_path: Path) -> None:
    source = SYNTHETIC if folder == "synthetic_4rank" else shared_trace(folder)
    out = tmp_path / "augmented"
    proc = run(PY, "counters", str(source), "--no-cache", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    original = load(source)
    written = sorted(out.iterdir())
    assert len(written) == len(original.ranks)
    assert proc.stdout.splitlines() == [f"Created folder {out}"] + [
        f"Wrote {p} (rank {original.t.rank(r).rank})"
        for r, p in zip(original.ranks, sorted(written, key=lambda p: p.name))]
    again = load(out)
    for rank in original.ranks:
        before, after = original.t.rank(rank), again.t.rank(rank)
        assert len(after.events) == len(before.events)
        assert len(before.tables["counters"]) == 0
        names = set(after.tables["counters"]["name"].astype(str))
        assert {"Queue Length", "Memcpy BW"} <= names or "Queue Length" in names
    refused = run(PY, "counters", str(source), "--no-cache", "-o", str(out))
    assert refused.returncode == EXIT_ERROR
    assert refused.stderr.startswith(f"hta: error: {written[0]} and ")
    only_queue = run(PY, "counters", str(source), "--no-cache", "-o", str(tmp_path / "q"),
                     "--series", "queue_length", "--suffix", "_q")
    assert only_queue.returncode == 0, only_queue.stderr
    assert all(p.name.count("_q.json") == 1 for p in (tmp_path / "q").iterdir())


@pytest.mark.parametrize("folder", ["synthetic_4rank", "trace_filter"])
def test_export_writes_decoded_parquet(folder: str, tmp_path: Path) -> None:
    source = SYNTHETIC if folder == "synthetic_4rank" else shared_trace(folder)
    out = tmp_path / "parquet"
    proc = run(PY, "export", str(source), "--no-cache", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    analyzer = load(source)
    counts = json_event_counts(source) if folder == "synthetic_4rank" else None
    for rank in analyzer.ranks:
        rt = analyzer.t.rank(rank)
        events = pd.read_parquet(out / f"rank-{rank}" / "events.parquet")
        decoded = rt.decoded()
        assert len(events) == len(rt.events)
        if counts:
            assert len(events) == counts[rank]
        assert events["name"].tolist() == decoded["name"].tolist()
        assert events["cat"].tolist() == decoded["cat"].tolist()
        assert events["ts"].dtype == "int64" and events["ts"].tolist() == rt.events["ts"].tolist()
        assert events["kind"].astype(str).tolist() == rt.events["kind"].astype(str).tolist()
        for table, frame in rt.tables.items():
            back = pd.read_parquet(out / f"rank-{rank}" / f"{table}.parquet")
            assert len(back) == len(frame), table
        instants = pd.read_parquet(out / f"rank-{rank}" / "instants.parquet")
        if len(instants):
            assert instants["name"].map(type).eq(str).all()
        meta = json.loads((out / f"rank-{rank}" / "meta.json").read_text())
        assert meta["rank"] == rank
    assert proc.stdout.splitlines()[0] == f"Created folder {out}"
    assert proc.stdout.splitlines()[1].startswith(f"Wrote {out / 'rank-0'}/ (events.parquet: ")
    refused = run(PY, "export", str(source), "--no-cache", "-o", str(out))
    assert refused.returncode == EXIT_ERROR and "--force" in refused.stderr


# --------------------------------------------------------------------------------------------
# errors: one line on stderr and a non-zero exit code
# --------------------------------------------------------------------------------------------


def one_line_error(proc: subprocess.CompletedProcess, code: int = EXIT_TRACE_ERROR) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("hta: error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


def command_line(sub: str, folder: Path, tmp_path: Path) -> list[str]:
    if sub == "diff":
        return [sub, str(folder), str(folder), "--no-cache"]
    if sub == "summary":
        return [sub, str(folder), "--no-cache"]
    return [sub, str(folder), "--no-cache", "-o", str(tmp_path / "out")]


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_missing_folder(sub: str, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    line = one_line_error(run(PY, *command_line(sub, missing, tmp_path)))
    assert line == f"hta: error: trace folder not found: {missing}"


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_empty_folder(sub: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line_error(run(PY, *command_line(sub, empty, tmp_path)))
    assert f"no trace files (*.json, *.json.gz) in {empty} (the folder is empty)" in line
    assert "or give one trace file" in line and "trace_files" not in line
    assert not (tmp_path / "out").exists()


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
    job = tmp_path / "job"
    job.mkdir()
    bad = write_job_with_corrupt_file(job)
    proc = run(cmd, "summary", str(job), "--no-cache", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert [r["rank"] for r in payload["ranks"]] == [0, 1]
    assert list(payload["skipped"]) == [str(bad)]
    assert "gzip stream is truncated or corrupt" in payload["skipped"][str(bad)]
    for sub in SUBCOMMANDS:
        if sub == "diff":
            continue
        (tmp_path / sub).mkdir()
        proc = run(cmd, *command_line(sub, job, tmp_path / sub))
        assert proc.returncode == 0, (sub, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, (sub, proc.stderr)
        assert lines[0].startswith(
            f"hta: warning: skipped {bad}: the gzip stream is truncated or corrupt")


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_corrupt_file_with_strict(sub: str, tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    bad = write_job_with_corrupt_file(job)
    line = one_line_error(run(PY, *command_line(sub, job, tmp_path), "--strict"))
    assert line.startswith(f"hta: error: {bad}: the gzip stream is truncated or corrupt")
    assert "collect the trace again" in line


def test_only_corrupt_files(tmp_path: Path) -> None:
    (tmp_path / "rank-0.json").write_text('{"traceEvents": [')
    line = one_line_error(run(PY, "summary", str(tmp_path), "--no-cache"))
    assert line.startswith("hta: error: no rank could be loaded (rank-0.json: invalid JSON")


@pytest.mark.parametrize("args, message", [
    (["--ranks", "x"], "hta: error: --ranks 'x': expected numbers and ranges such as 0,2,4-7"),
    (["--ranks", "3-1"], "hta: error: --ranks '3-1': expected numbers and ranges such as "
                         "0,2,4-7"),
    (["--iterations", "9"], "hta: error: --iterations 9: no such ProfilerStep in "
                            f"{SYNTHETIC}; its steps are 1-3"),
])
def test_bad_option_values_are_usage_errors(args: list[str], message: str) -> None:
    line = one_line_error(run(PY, "summary", str(SYNTHETIC), "--no-cache", *args), EXIT_USAGE)
    assert line == message


def test_unknown_rank(tmp_path: Path) -> None:
    line = one_line_error(run(PY, "summary", str(SYNTHETIC), "--no-cache", "--ranks", "7"),
                          EXIT_USAGE)
    assert line == f"hta: error: none of the ranks [7] is in {SYNTHETIC}; found ranks [0, 1, 2, 3]"


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    proc = run(PY, "summary", str(tmp_path / "nowhere"), "--no-cache", "--verbose")
    assert proc.returncode == EXIT_TRACE_ERROR
    assert "Traceback" in proc.stderr and "trace folder not found" in proc.stderr


@pytest.mark.parametrize("verbose", [[], ["-v"]], ids=["plain", "verbose"])
@pytest.mark.parametrize("args, code", [
    (["--ranks", "7"], EXIT_USAGE),           # a rank the folder does not hold
    (["--iterations", "9-12"], EXIT_USAGE),   # steps the traces do not have
    (["--ranks", "x"], EXIT_USAGE),
], ids=["absent-rank", "absent-steps", "bad-value"])
def test_exit_codes_by_cause_with_or_without_verbose(args, code, verbose) -> None:  # type: ignore[no-untyped-def]
    proc = run(PY, *verbose, "summary", str(SYNTHETIC), "--no-cache", *args)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("hta: error:")
    # -v adds the traceback and leaves the exit code as it is
    assert ("Traceback" in proc.stderr) == bool(verbose)


# --------------------------------------------------------------------------------------------
# help and usage
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ENTRY_POINTS)
def test_help(cmd: list[str]) -> None:
    proc = run(cmd, "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: hta")
    for sub in SUBCOMMANDS:
        assert sub in proc.stdout


@pytest.mark.parametrize("sub, options", [
    ("summary", ["DIR", "--json", "--ranks", "--iterations", "--top", "--no-cache", "--strict"]),
    ("report", ["DIR", "--output", "--force", "--iterations", "--title", "--ranks"]),
    ("diff", ["CONTROL_DIR", "TEST_DIR", "--json"]),
    ("counters", ["DIR", "--output", "--series", "--suffix", "--force"]),
    ("export", ["DIR", "--output", "--force", "--ranks"]),
])
def test_subcommand_help(sub: str, options: list[str]) -> None:
    proc = run(PY, sub, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: hta {sub}")
    for option in options + ["--verbose"]:
        assert option in proc.stdout, option


def test_no_command_prints_help_and_exits_2() -> None:
    proc = run(PY)
    assert proc.returncode == EXIT_USAGE
    assert proc.stdout.startswith("usage: hta")


def test_unknown_option_is_a_usage_error() -> None:
    proc = run(PY, "summary", "--frobnicate", "x")
    assert proc.returncode == EXIT_USAGE
    assert "unrecognized arguments: --frobnicate" in proc.stderr


def test_output_is_required_for_counters_and_export() -> None:
    for sub in ("counters", "export"):
        proc = run(PY, sub, str(SYNTHETIC))
        assert proc.returncode == EXIT_USAGE
        assert "the following arguments are required: -o/--output" in proc.stderr


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_closed_pipe_ends_quietly(extra: list[str]) -> None:
    """``hta summary DIR | head`` (and ``--json | head``), with the reader gone before
    anything is printed: no traceback, no error line, exit code 0 (what the reader took
    is all it wanted)."""
    proc = subprocess.Popen([*PY_PROCESS, "summary", str(SYNTHETIC), "--no-cache", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    proc.stdout.close()  # closed while the command still loads: its first write fails
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert stderr == ""
    assert proc.returncode == EXIT_OK
