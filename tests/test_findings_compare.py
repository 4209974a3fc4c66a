"""compare_findings: findings that appeared, disappeared or changed between two jobs,
on hand-written tables and on two generated jobs, one with a host sync in every step."""

from __future__ import annotations

import math

import findings_cases as cases
import pandas as pd
import pytest

from hta.analysis.findings import find
from hta.analysis.findings.compare import COLUMNS, compare_findings


def table(*rows: tuple[str, str, float]) -> pd.DataFrame:
    return pd.DataFrame([{"rule": r, "subject": s, "est_saving(us)": v, "severity": "low",
                          "ranks": [0], "title": f"T {r}", "section": "idle",
                          "evidence": f"ev {r} {s}"} for r, s, v in rows])


def test_statuses_and_order() -> None:
    control = table(("a", "", 100.0), ("b", "x", 50.0), ("c", "", 10.0), ("d", "", 40.0))
    test = table(("a", "", 100.0), ("b", "x", 80.0), ("b", "y", 30.0), ("e", "", 60.0),
                 ("d", "", 41.0))
    out = compare_findings(control, test)
    assert list(out.columns) == COLUMNS
    got = [(r["rule"], r["subject"], r["status"]) for r in out.to_dict("records")]
    assert got == [("e", "", "appeared"), ("b", "y", "appeared"), ("c", "", "disappeared"),
                   ("b", "x", "changed"), ("a", "", "unchanged"), ("d", "", "unchanged")]
    by = out.set_index(["rule", "subject"])
    assert by.loc[("b", "x"), "delta(us)"] == 30.0 and by.loc[("b", "x"), "delta_pctg"] == 60.0
    assert by.loc[("c", ""), "delta(us)"] == -10.0
    assert math.isnan(by.loc[("c", ""), "test_saving(us)"])
    assert math.isnan(by.loc[("e", ""), "delta_pctg"])
    assert by.loc[("e", ""), "control_severity"] == "" and by.loc[("e", ""), "test_ranks"] == [0]
    assert by.loc[("c", ""), "evidence"] == "ev c "  # the control side's, the only one
    # 2.5% change is under the default 10% threshold; not under a 1% one
    assert compare_findings(control, test, threshold_pct=1.0).set_index(
        ["rule", "subject"]).loc[("d", ""), "status"] == "changed"


def test_empty_sides() -> None:
    assert compare_findings(table(), table()).empty
    out = compare_findings(pd.DataFrame(), table(("a", "", 5.0)))
    assert out["status"].tolist() == ["appeared"]


@pytest.fixture()
def jobs(tmp_path):
    clean, _ = cases.host_sync(tmp_path / "control", with_sync=False)
    synced, expected = cases.host_sync(tmp_path / "test", with_sync=True)
    return clean, synced, expected


def test_a_sync_added_in_every_step_appears(jobs) -> None:
    clean, synced, expected = jobs
    out = compare_findings(find(clean), find(synced))
    host = out[out["rule"] == "host_sync"]
    assert len(host) == 1
    row = host.iloc[0]
    assert row["status"] == "appeared" and row["subject"] == "aten::item under forward"
    # the saving known by construction: a 5 µs bubble in each of the 4 steps
    assert row["test_saving(us)"] == pytest.approx(expected / 1e3, rel=0.05)
    assert row["delta(us)"] == pytest.approx(expected / 1e3, rel=0.05)
    # the other way round it disappeared; against itself nothing moved
    back = compare_findings(find(synced), find(clean))
    assert back.set_index("rule").loc["host_sync", "status"] == "disappeared"
    same = compare_findings(find(synced), find(synced))
    assert set(same["status"]) == {"unchanged"}


def test_trace_diff_compare_findings(jobs) -> None:
    from hta.trace_diff import TraceDiff

    clean, synced, expected = jobs
    out = TraceDiff.compare_findings(clean, synced)
    row = out.set_index("rule").loc["host_sync"]
    assert row["status"] == "appeared"
    assert row["test_saving(us)"] == pytest.approx(expected / 1e3, rel=0.05)
