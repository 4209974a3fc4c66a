"""The findings engine: merging per-rank findings, severity, thresholds, windows."""

from __future__ import annotations

import logging

import pytest
from kineto_builder import TraceBuilder

from hta.analysis.findings import Finding, FindingRule, analysis_window, find, step_table
from hta.analysis.findings.engine import severity
from hta.job.load import load_trace
from hta.model.selection import Selection


def _job(tmp_path, ranks=(0, 1, 2)):
    for rank in ranks:
        b = TraceBuilder(rank=rank, world_size=len(ranks))
        for step in (1, 2):
            start = (step - 1) * 100_000
            with b.step(step, ts=start, dur=100_000):
                b.cpu_op("aten::mm", ts=start + 1_000, dur=5_000)
        b.write(tmp_path / f"rank-{rank}.json")
    return load_trace(tmp_path, progress=False, cache=False)


def _rule(saving_of_rank, scope="rank", rule_id="r", subject=""):
    def check(rt, iterations):
        start, end = analysis_window(rt, iterations)
        saving = saving_of_rank(rt.rank)
        if saving is None:
            return []
        return [Finding((rt.rank,), (1, 2) if rt.rank else (1,), f"saves {saving}", saving,
                        end - start, subject=subject)]
    return FindingRule(rule_id, "Title", "idle", "advice", "definition", check, scope)


def test_window_and_steps(tmp_path):
    trace = _job(tmp_path, ranks=(0,))
    rt = trace.rank(0)
    assert step_table(rt)["step"].tolist() == [1, 2]
    assert analysis_window(rt) == (0, 200_000)
    assert analysis_window(rt, [2]) == (100_000, 200_000)
    assert analysis_window(rt, 1) == (0, 100_000)


def test_merge_takes_the_worst_rank_and_unions(tmp_path):
    trace = _job(tmp_path)
    out = find(trace, rules=[_rule(lambda r: 10_000 * (r + 1))])
    assert len(out) == 1
    row = out.iloc[0]
    assert row["ranks"] == [0, 1, 2]
    assert row["steps"] == [1, 2]
    assert row["est_saving(us)"] == 30.0
    assert row["evidence"] == "rank 2 (worst of 3 ranks): saves 30000"
    assert row["share_pctg"] == 15.0
    assert row["severity"] == "high"
    assert list(out.columns[:7]) == ["rule", "severity", "ranks", "steps", "evidence",
                                     "est_saving(us)", "advice"]


def test_severity_thresholds_and_noise_floor(tmp_path):
    assert severity(0.10) == "high"
    assert severity(0.0999) == "medium"
    assert severity(0.03) == "medium"
    assert severity(0.0299) == "low"
    trace = _job(tmp_path)
    # 0.4% of the 200 us window: under the default 0.5% floor
    assert find(trace, rules=[_rule(lambda r: 800)]).empty
    assert len(find(trace, rules=[_rule(lambda r: 800)], min_share=0.001)) == 1


def test_subjects_stay_apart_and_sort_by_saving(tmp_path):
    trace = _job(tmp_path, ranks=(0,))
    rules = [_rule(lambda r: 5_000, rule_id="a", subject="x"),
             _rule(lambda r: 50_000, rule_id="b", subject="y")]
    out = find(trace, rules=rules)
    assert out["rule"].tolist() == ["b", "a"]
    assert out["evidence"].tolist() == ["rank 0: saves 50000", "rank 0: saves 5000"]


def test_failing_job_rule_is_logged_not_fatal(tmp_path, caplog):
    trace = _job(tmp_path, ranks=(0,))

    def broken(trace, selection):
        raise RuntimeError("boom")

    rules = [FindingRule("bad", "Bad", "idle", "", "", broken, "job"),
             _rule(lambda r: 50_000)]
    with caplog.at_level(logging.WARNING):
        out = find(trace, rules=rules)
    assert out["rule"].tolist() == ["r"]
    assert "bad" in caplog.text


@pytest.mark.parametrize("ranks", [[1], 1])
def test_rank_selection(tmp_path, ranks):
    trace = _job(tmp_path)
    out = find(trace, Selection.of(ranks), rules=[_rule(lambda r: 20_000)])
    assert out.iloc[0]["ranks"] == [1]
