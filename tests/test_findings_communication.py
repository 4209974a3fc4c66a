"""Findings rules on communication: exposed collectives per operation, stragglers.

Each rule has a pair of tests on the generated job of ``test_stragglers``: with the
problem, the finding's saving is within 5% of the one known by construction; without
it, the rule reports nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SAMPLE_TRACES, shared_trace
from kineto_builder import TraceBuilder
from test_stragglers import COMM_STREAM, NCCL, TRANSFER_NS, straggler_job

from hta.analysis.findings import find
from hta.analysis.findings.communication import RULES, check_exposed, exposed_by_operation
from hta.analysis.overlap import comm_comp_overlap
from hta.analysis.stragglers import collective_arrivals, straggler_summary
from hta.job.load import load_trace
from hta.model.selection import Selection
from hta.trace_analysis import TraceAnalysis

STEPS, PER_STEP = 3, 4


def load(folder: Path):
    return load_trace(folder, progress=False, cache=False)


def rows(findings, rule: str):
    return findings[findings["rule"] == rule]


# -- comm_exposed ---------------------------------------------------------------------------
def test_exposed_communication_is_found(tmp_path: Path) -> None:
    # collectives after the compute kernel: every one of them exposed
    trace = load(straggler_job(tmp_path, steps=STEPS, per_step=PER_STEP))
    out = rows(find(trace, rules=RULES), "comm_exposed")
    assert len(out) == 1
    row = out.iloc[0]
    expected_us = STEPS * PER_STEP * TRANSFER_NS / 1e3  # 480 us per rank
    assert row["est_saving(us)"] == pytest.approx(expected_us, rel=0.05)
    assert row["subject"] == "all-reduce"  # not launched by the backward pass
    assert "process group 0 (default_pg) ×12" in row["evidence"]
    assert row["ranks"] == [0, 1, 2, 3] and row["steps"] == [1, 2, 3]
    assert row["section"] == "overlap"
    # the evidence quotes the overlap table
    table = comm_comp_overlap(trace, Selection.of(0))
    assert f"comm_time {table['comm_time(us)'].iloc[0]:,.1f} µs" in row["evidence"]
    assert "12 all-reduce kernels" in row["evidence"]
    assert "bucket_cap_mb" not in row["advice"]


def test_overlapped_communication_is_not_found(tmp_path: Path) -> None:
    trace = load(straggler_job(tmp_path, steps=STEPS, per_step=PER_STEP, overlap=True))
    assert comm_comp_overlap(trace)["comp_comm_overlap_pctg"].tolist() == [100.0] * 4
    assert not len(rows(find(trace, rules=RULES), "comm_exposed"))


def test_exposed_time_is_per_operation(tmp_path: Path) -> None:
    """Two operations on one rank: the all-reduce hidden under compute, the all-gather
    exposed."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.launch_kernel("sgemm", cpu_ts=1_000, cpu_dur=500, gpu_ts=100_000, gpu_dur=200_000)
        pg = {"Collective name": "allreduce", "Process Group Description": "dp"}
        b.launch_kernel(NCCL, cpu_ts=2_000, cpu_dur=500, gpu_ts=150_000, gpu_dur=50_000,
                        stream=COMM_STREAM, **pg, **{"Process Group Name": "1", "Seq": 1})
        b.launch_kernel(NCCL, cpu_ts=3_000, cpu_dur=500, gpu_ts=400_000, gpu_dur=30_000,
                        stream=COMM_STREAM + 1, **{"Process Group Name": "2", "Seq": 1,
                                                  "Collective name": "allgather"})
    rt = load(b.write(tmp_path / "rank-0.json")).rank(0)
    groups = exposed_by_operation(rt)[0].set_index("group")
    assert groups.loc["all-reduce", "exposed_ns"] == 0
    assert groups.loc["all-reduce", "comm_ns"] == 50_000
    assert groups.loc["all-gather", "exposed_ns"] == 30_000
    assert groups["free_compute_ns"].tolist() == [150_000, 150_000]
    found = RULES[0].check(rt, None)
    assert [f.subject for f in found] == ["all-gather"]
    assert found[0].est_saving_ns == 30_000
    assert "FSDP" in found[0].advice and "process group 2 ×1" in found[0].evidence


def _all_gathers(tmp_path: Path, durations: list[int]) -> Path:
    """One rank of a 2-rank job whose peer is absent: a compute kernel of 1 ms, then
    all-gathers of the given durations, one after the other (all exposed)."""
    b = TraceBuilder(rank=0)
    b.extra_top_level["distributedInfo"] = {"rank": 0, "world_size": 2}
    with b.step(1, ts=0, dur=100_000_000):
        b.launch_kernel("sgemm", cpu_ts=1_000, cpu_dur=500, gpu_ts=10_000, gpu_dur=1_000_000)
        gpu = 2_000_000
        for i, dur in enumerate(durations):
            b.launch_kernel(NCCL, cpu_ts=2_000 + 1_000 * i, cpu_dur=500, gpu_ts=gpu,
                            gpu_dur=dur, stream=COMM_STREAM,
                            **{"Process Group Name": "0", "Seq": i + 1,
                               "Collective name": "allgather"})
            gpu += dur + 10_000
    return b.write(tmp_path / "rank-0.json")


def test_a_wait_far_longer_than_like_calls_is_no_missing_overlap(tmp_path: Path) -> None:
    """Four all-gathers of 100 µs and one of 40 ms (a wait for the absent peer): the
    40 ms call counts as 100 µs; the evidence says why."""
    rt = load(_all_gathers(tmp_path, [100_000] * 4 + [40_000_000]).parent).rank(0)
    groups, calls = exposed_by_operation(rt)
    assert groups.loc[0, "exposed_ns"] == 5 * 100_000
    assert calls["waited_ns"].tolist() == [0, 0, 0, 0, 39_900_000]
    (finding,) = check_exposed(rt, None)
    assert ("1 call(s) ran far longer than the median of their like calls (same operation, "
            "group, kernel and size; the longest 40.000 ms against 100.0 µs): the 39.900 ms "
            "beyond the median is a wait") in finding.evidence


def test_twin_like_calls_keep_their_time(tmp_path: Path) -> None:
    """Calls under 20x their median (no message size) are transfers: nothing is cut."""
    rt = load(_all_gathers(tmp_path, [100_000] * 4 + [1_900_000]).parent).rank(0)
    groups, calls = exposed_by_operation(rt)
    assert groups.loc[0, "exposed_ns"] == 4 * 100_000 + 1_900_000
    assert calls["waited_ns"].tolist() == [0] * 5
    (finding,) = check_exposed(rt, None)
    assert "far longer" not in finding.evidence


def test_exposed_saving_is_capped_by_free_compute(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.launch_kernel("sgemm", cpu_ts=1_000, cpu_dur=500, gpu_ts=10_000, gpu_dur=20_000)
        b.launch_kernel(NCCL, cpu_ts=2_000, cpu_dur=500, gpu_ts=100_000, gpu_dur=300_000,
                        stream=COMM_STREAM)
    rt = load(b.write(tmp_path / "rank-0.json")).rank(0)
    (f,) = RULES[0].check(rt, None)
    assert f.subject == "all-reduce"  # from the kernel name: no args, no launching op
    assert f"stream {COMM_STREAM} ×1" in f.evidence
    assert f.est_saving_ns == 20_000  # only 20 us of compute to hide 300 us under


# -- stragglers ------------------------------------------------------------------------------
def test_straggler_is_found(tmp_path: Path) -> None:
    delay = 70_000
    trace = load(straggler_job(tmp_path, late={2: delay}, steps=STEPS, per_step=PER_STEP,
                               overlap=True))
    out = find(trace, rules=RULES)
    assert not len(rows(out, "comm_exposed"))  # the waits still run under compute
    (row,) = rows(out, "stragglers").to_dict("records")
    expected_us = STEPS * PER_STEP * delay / 1e3
    assert row["est_saving(us)"] == pytest.approx(expected_us, rel=0.05)
    assert row["ranks"] == [2] and row["subject"] == "rank 2" and row["steps"] == [1, 2, 3]
    assert row["section"] == "stragglers"
    summary = straggler_summary(collective_arrivals(trace)).set_index("rank")
    assert "started last at 12 of 12 collectives" in row["evidence"]
    waited = summary.loc[2, "total_wait_caused(us)"] * 1e3
    assert f"waited {waited / 1e6:,.3f} ms for it" in row["evidence"]
    # the evidence names the late collectives by kernel, step and lag (before: counts only)
    assert re.search(r"the latest: ncclDevKernel_AllReduce_Sum_f32_RING_LL on .+ in step "
                     r"[1-3], started 70\.0 µs after every other rank", row["evidence"])


def test_no_straggler_is_not_found(tmp_path: Path) -> None:
    trace = load(straggler_job(tmp_path, steps=STEPS, per_step=PER_STEP, overlap=True))
    out = find(trace, rules=RULES)
    assert not len(rows(out, "stragglers")) and not len(out)


def test_get_findings_has_the_straggler(tmp_path: Path) -> None:
    straggler_job(tmp_path, late={1: 50_000}, steps=STEPS, per_step=PER_STEP, overlap=True)
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    out = analyzer.get_findings()
    (row,) = rows(out, "stragglers").to_dict("records")
    assert row["ranks"] == [1]
    assert row["est_saving(us)"] == pytest.approx(STEPS * PER_STEP * 50.0, rel=0.05)


def test_sample_job_has_no_straggler_finding() -> None:
    trace = load(SAMPLE_TRACES / "synthetic_4rank")
    out = find(trace, rules=RULES)
    assert not len(rows(out, "stragglers"))
    # the sample's all-reduces are 75% exposed (overlap table): that finding is real; its
    # few small all-gathers are exposed too, under the noise threshold
    (row,) = rows(out, "comm_exposed").to_dict("records")
    # launched on the pt_autograd_0 thread: gradient all-reduces, with the bucket advice
    assert row["subject"] == "all-reduce (gradients)" and "bucket_cap_mb" in row["advice"]
    overlap = comm_comp_overlap(trace).set_index("rank")
    worst = int(re.match(r"rank (\d+)", row["evidence"]).group(1))
    comm, both = overlap.loc[worst, ["comm_time(us)", "overlap_time(us)"]]
    groups = exposed_by_operation(trace.rank(worst))[0]
    assert groups["exposed_ns"].sum() == pytest.approx((comm - both) * 1e3)
    exposed = groups.set_index("group").loc["all-reduce (gradients)", "exposed_ns"]
    assert f"{exposed / 1e6:,.3f} ms of it with no computation" in row["evidence"]


# -- real traces -----------------------------------------------------------------------------
@pytest.mark.parametrize("parts", [("trace_filter",), ("nccl_parser_config",)])
def test_real_traces(parts: tuple[str, ...]) -> None:
    trace = load(shared_trace(*parts))
    out = find(trace, rules=RULES, min_share=0.0)
    assert (out["share_pctg"] <= 100).all()
    overlap = comm_comp_overlap(trace).set_index("rank")
    arrivals = collective_arrivals(trace)
    for row in out.to_dict("records"):
        if row["rule"] == "comm_exposed":
            m = re.search(r"comm_time ([\d,.]+) µs, overlap_time ([\d,.]+) µs", row["evidence"])
            assert m is not None
            comm = float(m.group(1).replace(",", ""))
            assert any(abs(comm - c) < 0.1 for c in overlap["comm_time(us)"])
        else:
            rank = row["ranks"][0]
            mine = arrivals[arrivals["rank"] == rank]
            assert row["est_saving(us)"] == pytest.approx(mine["excess_lag_ns"].sum() / 1e3)
