"""The findings' replayed fixes at once (:mod:`hta.analysis.whatif.together`): savings that
overlap are not added up.

A step built here launches twenty small operators one by one (the GPU waits for the host:
``host_bound`` dispatch, fixed by a CUDA graph), then a 1 ms GEMM, then waits for it with
``cudaDeviceSynchronize`` (``host_sync``, fixed by removing the wait). Each fix alone
shortens the step; made together they save less than the sum of the two, since the
graph's launches and the wait overlap on the step's critical path. The twin without the
synchronize has one replayed finding and nothing to combine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from kineto_builder import TraceBuilder

from hta.analysis.findings.sync import TIMING
from hta.analysis.whatif.findings import change_for, step_savings
from hta.analysis.whatif.together import TOGETHER_COLUMNS, combinable, together
from hta.report.present import together_text
from hta.trace_analysis import TraceAnalysis

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64"
STEP_NS = 3_000_000
STEPS = 6


def launches_then_sync(folder: Path, *, sync: bool = True) -> Path:
    """Six 3 ms ``ProfilerStep``s: twenty ``aten::add`` (55 µs of host time each, a 10 µs
    kernel), an ``aten::mm`` launching a 1 ms GEMM, then (``sync``) a
    ``cudaDeviceSynchronize`` that waits for it."""
    folder.mkdir(parents=True, exist_ok=True)
    b = TraceBuilder(rank=0)
    for k in range(STEPS):
        t = 1_000_000 + k * STEP_NS
        b.annotation(f"ProfilerStep#{k}", t, STEP_NS)
        for j in range(20):
            ts = t + 50_000 + j * 60_000
            b.cpu_op("aten::add", ts=ts, dur=55_000)
            b.launch_kernel("vectorized_elementwise_kernel<4, add>", cpu_ts=ts + 40_000,
                            cpu_dur=10_000, gpu_ts=ts + 55_000, gpu_dur=10_000)
        ts = t + 50_000 + 20 * 60_000
        b.cpu_op("aten::mm", ts=ts, dur=60_000)
        b.launch_kernel(GEMM, cpu_ts=ts + 20_000, cpu_dur=20_000, gpu_ts=ts + 60_000,
                        gpu_dur=1_000_000)
        if sync:
            b.runtime("cudaDeviceSynchronize", ts + 70_000, 1_000_000)
    b.write(folder / "rank-0.json")
    return folder


def graphed_without_sync(folder: Path) -> Path:
    """The same steps after both fixes: one ``cudaGraphLaunch`` replays the twenty small
    kernels and the GEMM back to back, and nothing waits for them."""
    folder.mkdir(parents=True, exist_ok=True)
    b = TraceBuilder(rank=0)
    for k in range(STEPS):
        t = 1_000_000 + k * STEP_NS
        b.annotation(f"ProfilerStep#{k}", t, 1_300_000)
        kernels = [("vectorized_elementwise_kernel<4, add>", t + 60_000 + j * 11_000, 10_000,
                    7) for j in range(20)]
        kernels.append((GEMM, t + 60_000 + 20 * 11_000, 1_000_000, 7))
        b.graph_launch(kernels, cpu_ts=t + 20_000, cpu_dur=15_000)
    b.write(folder / "rank-0.json")
    return folder


def analysis(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)


# -- the arithmetic, on what-if tables known by construction ----------------------------------
def _findings(rows: list[tuple[str, str, float]], steps: list[int]) -> pd.DataFrame:
    """A replayed findings table: (rule, change, saving) rows, each over ``steps``,
    100 µs a step being 10 % of the step."""
    return pd.DataFrame({
        "rule": [r[0] for r in rows], "change": [r[1] for r in rows],
        "saving_source": ["replay" if r[1] else "gpu-time" for r in rows],
        "est_saving(us)": [r[2] for r in rows], "steps": [steps] * len(rows),
        "saving_per_step(us)": [r[2] / len(steps) for r in rows],
        "saving_step_pctg": [r[2] / len(steps) / 10.0 for r in rows]})


def _table(saved: list[float], step_us: float = 1000.0) -> pd.DataFrame:
    """A what-if table of one rank whose steps save ``saved`` (µs) each."""
    n = len(saved)
    return pd.DataFrame({"rank": [0] * n, "step": list(range(n)),
                         "measured(us)": [step_us] * n, "replayed(us)": [step_us] * n,
                         "predicted(us)": [step_us - s for s in saved]})


def test_the_saving_together_is_the_replay_of_every_change_at_once():
    found = _findings([("host_bound", "cuda-graphs", 600.0), ("host_sync", "no-sync:x", 450.0),
                       ("fp64_work", "", 900.0)], [0, 1, 2])
    asked = []

    def predict(changes):
        asked.append(changes)
        return _table([300.0, 250.0, 250.0])

    row = together(found, predict).iloc[0]
    assert list(together(found, predict).columns) == TOGETHER_COLUMNS
    # the changes together, then their conservative variants together (cuda-graphs has one)
    assert asked[0] == ["cuda-graphs", "no-sync:x"]
    assert [str(c) for c in asked[1]][1] == "no-sync:x" and asked[1][0] != "cuda-graphs"
    assert row["changes"] == "cuda-graphs + no-sync:x"
    assert row["findings"] == 2  # the GPU-time finding is never combined
    assert row["saving_per_step(us)"] == 250.0  # the median of 300, 250, 250
    assert row["est_saving(us)"] == 750.0
    assert row["saving_step_pctg"] == pytest.approx(25.0)  # 100 µs is 10 % (the findings')
    assert row["sum_of_savings(us)"] == 1050.0
    assert row["saving_low(us)"] <= 750.0 <= row["saving_high(us)"]
    assert "less than the sum of their savings (1.050 ms): they overlap" in together_text(row)
    assert row["gpu_time_findings"] == 1  # the fp64 finding's GPU time is not in it
    assert together_text(row).endswith("Not in it: the GPU-time saving of 1 finding (fixes "
                                       "the replay cannot model).")


def test_an_upper_bound_and_a_fix_that_saves_nothing_are_left_out():
    found = _findings([("host_bound", "cuda-graphs", 600.0), ("comm_exposed", "overlap-comm",
                                                              300.0),
                       ("fp32_gemm", "dtype:bf16", 0.0), ("host_sync", "no-sync:x", 450.0)],
                      [0, 1])
    rows, left = combinable(found)
    assert list(rows["change"]) == ["cuda-graphs", "no-sync:x"]
    assert left == ["overlap-comm (its replay is an upper bound)",
                    "dtype:bf16 (it saves nothing alone)"]
    row = together(found, lambda changes: _table([700.0, 700.0])).iloc[0]
    assert row["left_out"] == "; ".join(left)
    text = together_text(row)  # 1.4 ms together against 1.05 ms added up
    assert "more than the sum of their savings (1.050 ms)" in text
    assert text.endswith("Not combined: overlap-comm (its replay is an upper bound); "
                         "dtype:bf16 (it saves nothing alone).")


@pytest.mark.parametrize("rows", [[("host_bound", "cuda-graphs", 600.0)],
                                  [("host_bound", "cuda-graphs", 600.0),
                                   ("fp64_work", "", 900.0)]])
def test_fewer_than_two_replayed_fixes_have_nothing_to_add(rows):
    found = _findings(rows, [0, 1])
    assert together(found, lambda changes: _table([1.0, 1.0])).empty
    assert together(_findings(rows * 2, [0, 1]), None).empty


def test_a_timing_synchronize_is_replayed_at_its_site():
    """The timing suffix of a ``host_sync`` subject is no part of the site its change
    removes (the change matched nothing, so the saving fell back to GPU time)."""
    assert change_for("host_sync", [0], "outside any operator" + TIMING) == \
        "no-sync:outside any operator"
    assert change_for("host_sync", [0], "outside any operator under loop" + TIMING) == \
        "no-sync:outside any operator"


# -- on a trace built here --------------------------------------------------------------------
def test_overlapping_fixes_save_less_together_than_their_sum(tmp_path):
    a = analysis(launches_then_sync(tmp_path / "job"))
    found = a.get_findings()
    replayed = found[found["saving_source"] == "replay"]
    assert set(replayed["rule"]) == {"host_bound", "host_sync"}
    row = a.get_findings_together().iloc[0]
    assert row["findings"] == 2
    changes = row["changes"].split(" + ")
    assert set(changes) == set(replayed["change"])
    # by definition: the median over the analysed steps of replayed - predicted, all at once
    steps = [int(s) for s in replayed.iloc[0]["steps"]]
    per = step_savings(a.what_if(changes), steps)
    assert row["saving_per_step(us)"] == pytest.approx(float(np.median(per["saving"])))
    assert row["sum_of_savings(us)"] == pytest.approx(replayed["est_saving(us)"].sum())
    assert row["est_saving(us)"] < row["sum_of_savings(us)"]
    assert row["est_saving(us)"] >= replayed["est_saving(us)"].max()


def test_twin_without_the_synchronize_has_nothing_to_combine(tmp_path):
    a = analysis(launches_then_sync(tmp_path / "job", sync=False))
    found = a.get_findings()
    assert (found["saving_source"] == "replay").sum() == 1
    assert a.get_findings_together().empty


def test_the_summary_says_it_and_its_json_holds_it(tmp_path, capsys):
    from hta.cli import main

    folder = launches_then_sync(tmp_path / "job")
    assert main(["summary", str(folder), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "Together, the 2 replayed fixes" in text
    assert "less than the sum of their savings" in text
    assert main(["summary", str(folder), "--no-cache", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["findings_together"]["findings"] == 2
    twin = launches_then_sync(tmp_path / "twin", sync=False)
    assert main(["summary", str(twin), "--no-cache", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings_together"] is None


def test_the_diff_sets_the_fixes_together_against_the_measured_change(tmp_path, capsys):
    from hta.cli import main

    before = launches_then_sync(tmp_path / "before")
    after = graphed_without_sync(tmp_path / "after")
    assert main(["diff", str(before), str(after), "--no-cache", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    predictions = payload["predictions"]
    # the timing synchronize's site is gone: no "still there" note on its finding
    gone = [f for f in payload["findings"] if f["rule"] == "host_sync"]
    assert [f["status"] for f in gone] == ["disappeared"] and gone[0]["note"] == ""
    assert [p["rule"] for p in predictions] == ["host_bound", "host_sync", "together"]
    alone = [p["predicted(us)"] for p in predictions[:2]]
    both = predictions[2]
    assert both["change"] == "cuda-graphs + no-sync:outside any operator"
    assert max(alone) <= both["predicted(us)"] < sum(alone)
    assert len({p["measured(us)"] for p in predictions}) == 1  # one measured change
    assert main(["diff", str(before), str(after), "--no-cache"]) == 0
    assert "The fixes together: predicted" in capsys.readouterr().out


def test_the_report_notes_it_under_the_findings(tmp_path):
    from hta.report.builder import build_sections

    a = analysis(launches_then_sync(tmp_path / "job"))
    findings = next(s for s in build_sections(a) if s.id == "findings")
    together_row = a.get_findings_together().iloc[0].to_dict()
    assert together_text(together_row) in findings.notes


def test_predicted_ahead_on_forked_workers_with_the_findings_changes(tmp_path, monkeypatch):
    """On a large graph the findings' changes are replayed ahead on forked workers. The
    fixes together are too where they will be asked for next (the summary and the report,
    :func:`hta.report.answers.job_answers`): this process replays none of them. After
    ``get_findings`` alone only the fixes together are replayed here, when asked. The
    answers are those replayed here."""
    from hta.analysis.whatif import replayer
    from hta.model.selection import Selection
    from hta.model.spread import can_fork
    from hta.report.answers import job_answers

    if not can_fork():
        pytest.skip("forked workers need Linux")
    folder = launches_then_sync(tmp_path / "job")
    here = analysis(folder).get_findings_together()
    monkeypatch.setattr(replayer, "PARALLEL_MIN_NODES", 0)
    asked: list[object] = []
    real = replayer.Replay.predict

    def counted(self, changes=None, *args, **kwargs):
        asked.append(changes)
        return real(self, changes, *args, **kwargs)

    a = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False, max_workers=2)
    a.get_findings()
    monkeypatch.setattr(replayer.Replay, "predict", counted)
    pd.testing.assert_frame_equal(a.get_findings_together(), here)
    assert asked and all(isinstance(c, list) for c in asked)  # only the fixes together

    monkeypatch.setattr(replayer.Replay, "predict", real)
    summary = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False,
                            max_workers=2)
    monkeypatch.setattr(replayer.Replay, "predict", counted)
    asked.clear()
    got = job_answers(summary, Selection.of(None, None)).together
    pd.testing.assert_frame_equal(got, here)
    assert asked == []  # every table was predicted ahead
