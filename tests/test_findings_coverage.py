"""Coverage of the findings: what they explain of each rank's idle and exposed time, the
unexplained pieces and what the CPU did meanwhile, and kernels of unknown kind as a
coverage note (never a finding with a saving). Generated traces, answers by construction;
invariants on the real traces when they are there."""

from __future__ import annotations

import json
from pathlib import Path

import findings_cases as cases
import numpy as np
import pytest
from conftest import shared_trace
from findings_cases import DATA_LOADER
from findings_kernel_cases import UNKNOWN, unclassified
from kineto_builder import TraceBuilder

from hta.analysis.findings import analyse, analysis_window, default_rules, describe_rules, find
from hta.analysis.findings.claims import resolve
from hta.analysis.findings.coverage import CAUSE_TEXT, COLUMNS, PIECE_COLUMNS
from hta.cli import main
from hta.model.rules import Rule
from hta.report.builder import SECTIONS, _context
from hta.report.context import Section
from hta.trace_analysis import TraceAnalysis

STEP = 200_000
STEPS = 4


def _analyzer(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


def idle_job(tmp_path: Path, cause: str = "cpu") -> Path:
    """Per 200 µs step: kernel A ``[0, 30)`` µs, then the host works ``[40, 190)`` and
    launches kernel B, which runs ``[190, 200)``. The host work is (``cause``):

    * ``"cpu"``: ``my_tokenize`` (140 µs, with a nested 40 µs ``aten::copy_``) under the
      annotation ``preprocess``: no rule explains it, the GPU idles 160 of 200 µs (80%);
    * ``"loader"``: a data-loader span ``[40, 190)``: ``data_loading`` explains 150 µs of
      the 160 µs idle a step;
    * ``"busy"``: the same CPU work, but kernel A runs ``[0, 185)``: idle 5 µs a step;
    * ``"queued"``: the same CPU work, but kernel B is launched right after A, at 3 µs:
      the GPU idles 160 µs a step with B queued, waiting on nothing the trace shows.

    With ``"cpu"`` the host is what the GPU waits for (``host_bound``, a slow CPU
    operator); with ``"queued"`` no rule can name the cause.
    """
    b = TraceBuilder(rank=0)
    for k in range(1, STEPS + 1):
        t = (k - 1) * STEP
        with b.step(k, ts=t, dur=STEP):
            a_dur = 185_000 if cause == "busy" else 30_000
            b.launch_kernel("sgemm_a", cpu_ts=t + 1_000, cpu_dur=2_000, gpu_ts=t,
                            gpu_dur=a_dur)
            if cause == "loader":
                b.cpu_op(DATA_LOADER, ts=t + 40_000, dur=150_000)
            else:
                b.annotation("preprocess", ts=t + 40_000, dur=150_000)
                b.cpu_op("my_tokenize", ts=t + 45_000, dur=140_000)
                b.cpu_op("aten::copy_", ts=t + 100_000, dur=40_000)
            b_launch = t + 3_000 if cause == "queued" else t + 186_000
            b.launch_kernel("sgemm_b", cpu_ts=b_launch, cpu_dur=2_000, gpu_ts=t + 190_000,
                            gpu_dur=10_000)
    return b.write(tmp_path / "rank-0.json").parent


# -- idle time no finding explains ---------------------------------------------------------------
def test_unexplained_idle_is_said(tmp_path):
    a = _analyzer(idle_job(tmp_path, cause="queued"))
    assert a.get_findings().empty
    (row,) = a.get_findings_coverage().to_dict("records")
    assert list(a.get_findings_coverage().columns) == COLUMNS
    assert row["window(us)"] == 800.0
    assert row["idle(us)"] == row["not_computing(us)"] == row["unexplained(us)"] == 640.0
    assert row["explained(us)"] == 0.0 and row["idle_pctg"] == 80.0
    assert row["idle_explained_pctg"] == 0.0
    assert "The GPU is idle 80% of the window and the findings explain 0%" in row["note"]
    assert "my_tokenize 62% (100.0 µs)" in row["note"] and "under preprocess" in row["note"]
    pieces = a.get_unexplained_time()
    assert list(pieces.columns) == PIECE_COLUMNS
    assert pieces["dur(us)"].tolist() == [160.0] * 4
    first = pieces.iloc[0]
    assert first["gpu"] == "idle" and first["step"] in (1, 2, 3, 4)
    # exclusive time: 140 - 40 µs in my_tokenize, 40 µs in the nested copy
    assert first["cpu"] == "my_tokenize 62% (100.0 µs), aten::copy_ 25% (40.0 µs)"
    assert first["annotations"] == "preprocess"


def test_host_work_while_the_gpu_waits_is_host_bound(tmp_path):
    a = _analyzer(idle_job(tmp_path))
    out = a.get_findings()
    assert out["rule"].tolist() == ["host_bound"]
    row = out.iloc[0]
    assert row["subject"] == "slow_op" and row["est_saving(us)"] == 640.0
    assert "my_tokenize" in row["evidence"]
    (cov,) = a.get_findings_coverage().to_dict("records")
    assert cov["idle_explained_pctg"] == 100.0 and cov["note"] == ""


def test_idle_explained_by_a_finding_is_not_flagged(tmp_path):
    a = _analyzer(idle_job(tmp_path, cause="loader"))
    out = a.get_findings(replay=False)
    # the loader holds 150 µs of the 160 µs idle a step; the 10 µs before it, with
    # nothing recorded on the CPU, the GPU waits on the host
    assert out["rule"].tolist() == ["data_loading", "host_bound"]
    assert out["est_saving(us)"].tolist() == [600.0, 40.0]
    # replayed: with 4 workers the 150 µs span leaves the main thread (the rest of the
    # loop, 50 µs, hides the 37.5 µs a worker needs), less the host's usual CPU step
    replayed = a.get_findings().set_index("rule")
    assert replayed.loc["data_loading", "change"] == "workers:4"
    assert 4 * 140 <= replayed.loc["data_loading", "est_saving(us)"] <= 600
    (row,) = a.get_findings_coverage().to_dict("records")
    assert row["idle(us)"] == 640.0 and row["explained(us)"] == 640.0
    assert row["unexplained(us)"] == 0.0 and row["idle_explained_pctg"] == 100.0
    assert row["saving(us)"] == 640.0
    assert row["note"] == ""


def test_a_busy_gpu_is_not_flagged(tmp_path):
    a = _analyzer(idle_job(tmp_path, cause="busy"))
    (row,) = a.get_findings_coverage().to_dict("records")
    assert row["idle(us)"] == 20.0 and row["note"] == ""


# -- kernels of unknown kind: a coverage note, not a finding --------------------------------------
def test_unknown_kinds_are_a_coverage_note_not_a_finding(tmp_path):
    trace, _old_saving = unclassified(tmp_path)  # the rule used to claim 120 µs a step
    assert "unclassified_kernels" not in describe_rules()["rule"].tolist()
    result = analyse(trace)
    assert "unclassified_kernels" not in result.findings["rule"].tolist()
    (row,) = result.coverage.to_dict("records")
    # 160 of the 220 µs of GPU busy time a step (2 steps) are in unknown kernels
    assert row["unclassified(us)"] == 320.0 and row["unclassified_pctg"] == 72.73
    assert "72.7% of the GPU busy time" in row["unclassified_note"]
    assert "fancy_collective_step ×4" in row["unclassified_note"]
    assert "not a problem of the job" in row["unclassified_note"]
    assert UNKNOWN.startswith("void fancy_")


@pytest.mark.parametrize("twin", ["known", "user rule"])
def test_known_kinds_give_no_note(tmp_path, twin):
    rules = (Rule("communication", name="fancy_"),) if twin == "user rule" else ()
    trace, _ = unclassified(tmp_path, unknown=twin != "known", rules=rules)
    (row,) = analyse(trace).coverage.to_dict("records")
    assert row["unclassified(us)"] == 0.0 and row["unclassified_note"] == ""


# -- the front ends -------------------------------------------------------------------------------
def test_summary_prints_the_coverage(tmp_path, capsys):
    folder = idle_job(tmp_path, cause="queued")
    assert main(["summary", str(folder), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "What the findings explain of the time the GPU does not compute" in text
    assert "rank 0: The GPU is idle 80% of the window" in text
    assert "0.160 ms idle, step" in text


def test_summary_json_has_the_coverage(tmp_path, capsys):
    folder = idle_job(tmp_path, cause="queued")
    assert main(["summary", str(folder), "--no-cache", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    (cov,) = payload["findings_coverage"]
    assert cov["explained(us)"] == 0.0 and cov["idle_explained_pctg"] == 0.0
    assert payload["unexplained_time"][0]["dur(us)"] == 160.0


def test_unknown_kinds_in_summary(tmp_path, capsys):
    unclassified(tmp_path)
    assert main(["summary", str(tmp_path), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "Coverage note: 1 kernel name(s) match no kind rule (up to 72.7% of the GPU" in text
    assert "Kernels of unknown kind" not in text  # the old finding's title


def test_report_coverage_section_shows_the_coverage(tmp_path):
    a = _analyzer(idle_job(tmp_path, cause="queued"))
    ctx = _context(a, None, None, None)
    build = next(b for sid, _t, _i, b in SECTIONS if sid == "coverage")
    section = Section("coverage", "What the findings explain")
    build(ctx, section)
    titles = [t.title for t in section.tables]
    assert titles[0].startswith("What the findings explain")
    assert "The GPU is idle 80% of the window" in section.tables[0].note
    assert titles[1].startswith("Longest unexplained stretches")
    assert section.tables[1].rows[0][4].startswith("my_tokenize 62%")


# -- invariants on real traces --------------------------------------------------------------------
REAL = ["trace_diff/control", "critical_path/alexnet", "amd_trace", "ns_resolution_trace",
        "distributed_info_unavailable"]


@pytest.mark.parametrize("name", REAL)
def test_invariants_on_real_traces(name):
    folder = shared_trace(*name.split("/"))
    a = _analyzer(folder)
    result = analyse(a.t)
    cov = result.coverage
    assert (cov["saving(us)"] <= cov["window(us)"] + 1e-6).all()
    assert (cov["explained(us)"] <= cov["not_computing(us)"] + 1e-6).all()
    for row in result.findings.to_dict("records"):
        if row["severity"] == "high":
            assert "µs" in row["evidence"] or "ms" in row["evidence"]
    rules = [r for r in default_rules() if r.scope == "rank"]
    for rank in a.ranks:
        rt = a.t.rank(rank)
        window = analysis_window(rt)
        found = [f for r in rules for f in r.check(rt, None) if f.claim is not None]
        kept = resolve([f.claim for f in found], [f.est_saving_ns for f in found], window)
        _assert_no_time_twice(kept)


def _assert_no_time_twice(kept) -> None:
    parts = [k for k in kept if k.start.size]
    if not parts:
        return
    cuts = np.unique(np.concatenate([np.r_[k.start, k.end] for k in parts]))
    level = np.zeros(cuts.size)
    for k in parts:
        at = np.searchsorted(k.start, cuts, side="right") - 1
        inside = (at >= 0) & (cuts < k.end[np.clip(at, 0, None)])
        level += np.where(inside, k.density[np.clip(at, 0, None)], 0.0)
    assert level.max() <= 1.0 + 1e-9


def test_find_still_returns_the_findings_table(tmp_path):
    a = _analyzer(idle_job(tmp_path, cause="loader"))
    assert find(a.t)["rule"].tolist() == ["data_loading", "host_bound"]


def test_a_sliver_of_unknown_kinds_gets_no_coverage_note(tmp_path, capsys):
    """One unknown kernel of 1 µs beside 1 ms of known GEMMs (0.1% of the busy time, under
    the analysis's NOTE_SHARE): no note on the first screen (before, any unknown name
    printed one, "up to 0.0% of the GPU busy time"); --json still counts it."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=2_000_000):
        b.launch_kernel("sgemm_a", cpu_ts=1_000, cpu_dur=2_000, gpu_ts=10_000,
                        gpu_dur=1_000_000)
        b.launch_kernel("void fancy_thing(int)", cpu_ts=4_000, cpu_dur=2_000,
                        gpu_ts=1_100_000, gpu_dur=1_000)
    folder = b.write(tmp_path / "rank-0.json").parent
    assert main(["summary", str(folder), "--no-cache"]) == 0
    assert "Coverage note" not in capsys.readouterr().out
    assert main(["summary", str(folder), "--no-cache", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unclassified_kernels"] == 1


# -- idle time attributed top-down -------------------------------------------------------
@pytest.mark.parametrize(("cause", "top"), [("cpu", "host_bound"), ("loader", "data_loading"),
                                            ("queued", "queued")])
def test_idle_causes_add_up_to_the_idle_time(tmp_path, cause, top):
    a = _analyzer(idle_job(tmp_path, cause=cause))
    result = analyse(a.t)
    (row,) = result.coverage.to_dict("records")
    text = row["idle_causes"]
    assert text.startswith(CAUSE_TEXT.get(top, top))
    # each idle nanosecond once: the shares add up to 100% (rounded)
    shares = [float(p.rsplit(" ", 1)[1].rstrip("%")) for p in text.split(", ")]
    assert sum(shares) == pytest.approx(100, abs=1)
    if cause == "queued":
        assert row["idle_attributed_pctg"] == 0.0
        assert "the GPU had work queued that did not start" in row["note"]
        assert "does not record" in row["note"]
    else:
        assert row["idle_attributed_pctg"] == 100.0


def test_warm_up_time_is_attributed_to_the_note(tmp_path):
    trace, expected = cases.warm_up(tmp_path, steps=True)
    (row,) = analyse(trace).coverage.to_dict("records")
    assert row["idle_causes"].startswith("warmup ")
    assert row["idle_attributed_pctg"] == 100.0


@pytest.mark.parametrize("name", REAL)
def test_idle_causes_on_real_traces_cover_the_idle_time(name):
    a = _analyzer(shared_trace(*name.split("/")))
    cov = analyse(a.t).coverage
    for row in cov.to_dict("records"):
        if row["idle(us)"] > 0:
            assert 0.0 <= row["idle_attributed_pctg"] <= 100.0
            assert row["idle_attributed_pctg"] >= row["idle_explained_pctg"] - 0.5


def _queued_kernels(tmp_path: Path, gap_ns: int) -> Path:
    """Four steps, each launching twenty 50 µs kernels at once (all queued while the first
    runs) that the GPU runs ``gap_ns`` apart."""
    b = TraceBuilder(rank=0)
    for k in range(1, STEPS + 1):
        t = (k - 1) * 2_000_000
        with b.step(k, ts=t, dur=2_000_000):
            g = t + 100_000
            for i in range(20):
                b.launch_kernel(f"sgemm_{i}", cpu_ts=t + 1_000 + i * 3_000, cpu_dur=2_000,
                                gpu_ts=g, gpu_dur=50_000)
                g += 50_000 + gap_ns
    return b.write(tmp_path / "rank-0.json").parent


def test_short_gaps_before_queued_kernels_are_kernel_switches(tmp_path):
    """Gaps of a few µs between kernels queued back to back are the GPU's own switch from
    one kernel to the next, a named cause, not a wait the trace does not show."""
    (row,) = analyse(_analyzer(_queued_kernels(tmp_path, 2_000)).t).coverage.to_dict(
        "records")
    causes = dict(p.rsplit(" ", 1) for p in row["idle_causes"].split(", "))
    assert CAUSE_TEXT["switch"] in causes and CAUSE_TEXT["queued"] not in causes
    assert "did not start" not in row["note"]


def test_twin_long_gaps_before_queued_kernels_stay_unexplained_waits(tmp_path):
    (row,) = analyse(_analyzer(_queued_kernels(tmp_path, 40_000)).t).coverage.to_dict(
        "records")
    causes = dict(p.rsplit(" ", 1) for p in row["idle_causes"].split(", "))
    assert CAUSE_TEXT["queued"] in causes and CAUSE_TEXT["switch"] not in causes


def _late_first_kernel(tmp_path: Path, start_ns: int) -> Path:
    """One pass: twenty 1 ms kernels launched from 100 µs on, the first starting on the GPU
    at ``start_ns`` (later than its launch: the GPU still ran work queued before the
    trace began) and the others back to back."""
    b = TraceBuilder(rank=0)
    g = start_ns
    for i in range(20):
        b.launch_kernel(f"sgemm_{i}", cpu_ts=100_000 + i * 20_000, cpu_dur=10_000, gpu_ts=g,
                        gpu_dur=1_000_000)
        g += 1_001_000
    return b.write(tmp_path / "rank-0.json").parent


def test_idle_before_the_first_gpu_work_is_its_own_cause(tmp_path):
    """A public VGG16 trace queues its first kernel at 3.4 ms and the GPU starts it at
    8.9 ms: the wait is the GPU finishing work from before the trace, not queued work
    waiting on something the trace does not show."""
    (row,) = analyse(_analyzer(_late_first_kernel(tmp_path, 5_000_000)).t).coverage.to_dict(
        "records")
    assert row["idle_causes"].startswith(CAUSE_TEXT["start"])
    assert CAUSE_TEXT["queued"] not in row["idle_causes"]


def test_twin_a_first_kernel_started_at_once_leaves_no_such_cause(tmp_path):
    (row,) = analyse(_analyzer(_late_first_kernel(tmp_path, 115_000)).t).coverage.to_dict(
        "records")
    assert CAUSE_TEXT["start"] not in row["idle_causes"]
