"""The diff in terms of causes (host syncs, copies, kernels) and the findings' predictions
checked against the test job, on jobs whose differences are known by construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_whatif_fixes import PAGEABLE_BW, PINNED_BW, Sim, _copies, _training

from hta.analysis.diff.causes import change_causes, predicted_vs_measured


def _causes(tmp: Path, before: Sim, after: Sim) -> pd.DataFrame:
    a, b = before.load(tmp / "control"), after.load(tmp / "test")
    return change_causes(a.t, b.t).set_index(["cause", "what"])


def test_a_removed_sync_site_is_named_with_its_calls_and_time(tmp_path: Path) -> None:
    causes = _causes(tmp_path, Sim().steps(4, _training(True)), Sim().steps(4, _training(False)))
    row = causes.loc[("sync", "aten::item")]
    assert row["verdict"] == "removed"
    assert (row["control"], row["test"]) == (1.0, 0.0)
    # the call blocks until sgemm_fwd (200 µs, launched mid-op) is done: ~200 µs a step
    assert 190 <= row["control(us)"] <= 215 and row["test(us)"] == 0
    # the step's own device synchronize is still there, and no kernel came or went
    assert ("sync", "cudaDeviceSynchronize") not in causes.index or \
        causes.loc[("sync", "cudaDeviceSynchronize"), "verdict"] in ("longer", "shorter")
    assert "kernel" not in causes.index.get_level_values(0)


def test_the_same_bytes_faster_are_not_a_disappeared_copy(tmp_path: Path) -> None:
    causes = _causes(tmp_path, Sim().steps(4, _copies(True)), Sim().steps(4, _copies(False)))
    row = causes.loc[("copy", "host to device")]
    assert row["verdict"] == "same bytes, faster"
    assert "pageable, pinned -> pinned memory" in row["note"]
    mb = ((64 << 20) + (1 << 20)) / 1e6
    assert f"{mb:,.1f} -> {mb:,.1f} MB a step" in row["note"]
    bw = ((64 << 20) + (1 << 20)) / ((64 << 20) / PAGEABLE_BW + (1 << 20) / PINNED_BW)
    assert f"at {bw:,.1f} -> {PINNED_BW:,.1f} GB/s" in row["note"]
    # the pageable copy's call blocked the host: that site is gone too
    assert causes.loc[("sync", "aten::copy_"), "verdict"] in ("removed", "fewer")


def test_kernels_gone_and_new(tmp_path: Path) -> None:
    def body(kernel: str):  # noqa: ANN202
        def run(s: Sim, k: int) -> None:
            s.op("aten::mm", 10_000, kernel, 100_000)
            s.op("aten::relu", 10_000, "relu", 20_000)
        return run

    causes = _causes(tmp_path, Sim().steps(3, body("sgemm_128")),
                     Sim().steps(3, body("s16816gemm_bf16")))
    assert causes.loc[("kernel", "sgemm_128"), "verdict"] == "gone"
    assert causes.loc[("kernel", "sgemm_128"), "control(us)"] == pytest.approx(100)
    assert causes.loc[("kernel", "s16816gemm_bf16"), "verdict"] == "new"
    assert ("kernel", "relu") not in causes.index


def test_the_same_program_twice_changes_nothing(tmp_path: Path) -> None:
    assert _causes(tmp_path, Sim().steps(3, _training(True)),
                   Sim().steps(3, _training(True))).empty


def test_predicted_against_measured() -> None:
    findings = pd.DataFrame({
        "rule": ["host_sync", "fp32_gemm"], "subject": ["aten::item", ""],
        "title": ["Host sync", "fp32"], "change": ["no-sync:aten::item", "dtype:bf16"],
        "saving_source": ["replay", "replay"], "saving_per_step(us)": [200.0, 50.0],
        "est_saving(us)": [800.0, 200.0],
        "saving_low(us)": [600.0, 0.0], "saving_high(us)": [1000.0, 400.0]})
    comparison = pd.DataFrame({"rule": ["host_sync", "fp32_gemm"],
                               "subject": ["aten::item", ""],
                               "status": ["disappeared", "unchanged"],
                               "delta(us)": [-800.0, 0.0]})
    control = np.array([1000.0, 1010.0, 990.0, 1000.0])
    out = predicted_vs_measured(findings, comparison, control, control - 210.0)
    assert out["rule"].tolist() == ["host_sync"]  # the fp32 GEMMs were not fixed
    row = out.iloc[0]
    assert row["predicted(us)"] == 200.0
    assert (row["predicted_low(us)"], row["predicted_high(us)"]) == (150.0, 250.0)
    assert row["measured(us)"] == pytest.approx(210.0) and row["status"] == "improved"
    noisy = predicted_vs_measured(findings, comparison, control, control - 5.0)
    assert noisy.iloc[0]["status"] == "noise"
    same = predicted_vs_measured(findings, comparison, control, control.copy())
    assert same.iloc[0]["status"] == "unchanged"


def test_a_pageable_copy_that_ran_faster_did_not_disappear(tmp_path: Path) -> None:
    """The same pageable copy, 8x faster in the test run (noise between runs, not a fix):
    the finding falls under the threshold, and the diff says the copies are still there."""
    from hta.analysis.diff.causes import still_there
    from hta.analysis.findings.compare import compare_findings

    def body(bw: float):  # noqa: ANN202
        def run(s: Sim, k: int) -> None:
            s.copy(1 << 20, False, PINNED_BW)
            s.copy(64 << 20, True, bw)
            s.op("aten::mm", 10_000, "sgemm", 3_000_000)
        return run

    a = Sim().steps(4, body(PAGEABLE_BW)).load(tmp_path / "control")
    b = Sim().steps(4, body(8 * PAGEABLE_BW)).load(tmp_path / "test")
    causes = change_causes(a.t, b.t)
    copy = causes.set_index(["cause", "what"]).loc[("copy", "host to device")]
    assert copy["verdict"] == "same bytes, faster" and "memory;" not in copy["note"]
    comparison = compare_findings(a.get_findings(), b.get_findings())
    notes = still_there(comparison, causes)
    gone = comparison["rule"] == "pageable_copies"
    assert comparison.loc[gone, "status"].tolist() == ["disappeared"]
    assert notes[gone].iloc[0].startswith("the copies are still from pageable memory: "
                                          "host to device (same bytes, faster)")
