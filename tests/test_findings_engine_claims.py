"""The findings engine shares each rank's time among its findings: no nanosecond counted
twice, same-rule findings about the same time merged, a rank's savings within its window.

Engine tests use rules written here, whose claims are known by construction; one pair uses
the real ``comm_exposed`` rule on a generated trace (the issue's "exposed communication
counted once per process group and once per stream").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kineto_builder import TraceBuilder
from test_stragglers import COMM_STREAM, NCCL

from hta.analysis.findings import Claim, Finding, FindingRule, analyse, analysis_window, find
from hta.analysis.findings.claims import claim_outside, resolve, segments
from hta.analysis.findings.communication import RULES as COMM_RULES
from hta.analysis.findings.engine import CLAIM_ORDER, MERGE_SHARE
from hta.analysis.intervals import Cover
from hta.job.load import load_trace

WINDOW = 1_000_000  # one step of 1 ms


def _job(tmp_path: Path, ranks: tuple[int, ...] = (0,)):
    for rank in ranks:
        b = TraceBuilder(rank=rank, world_size=len(ranks))
        with b.step(1, ts=0, dur=WINDOW):
            b.cpu_op("aten::mm", ts=1_000, dur=5_000)
        b.write(tmp_path / f"rank-{rank}.json")
    return load_trace(tmp_path, progress=False, cache=False)


def _rule(rule_id: str, *claims: tuple[str, int, list[tuple[int, int]], float | None],
          scope: str = "rank") -> FindingRule:
    """A rule giving, per ``(subject, estimate, intervals, density)``, one finding that
    claims those intervals (``density`` None: the whole intervals; no intervals and
    density None: no claim at all)."""
    def check(rt, iterations):
        start, end = analysis_window(rt, iterations)
        out = []
        for subject, estimate, spans, density in claims:
            claim = None
            if spans:
                s = np.array([a for a, _ in spans])
                e = np.array([b for _, b in spans])
                claim = Claim(s, e, None if density is None else (e - s) * density)
            out.append(Finding((rt.rank,), (1,), f"{subject} saves {estimate}", estimate,
                               end - start, subject=subject, claim=claim))
        return out
    return FindingRule(rule_id, rule_id.title(), "idle", f"advice {rule_id}", "model", check,
                       scope)


def _savings(out) -> dict[tuple[str, str], float]:
    return {(r["rule"], r["subject"]): r["est_saving(us)"] for r in out.to_dict("records")}


# -- the order, and no nanosecond twice --------------------------------------------------------
def test_the_stronger_cause_keeps_contested_time(tmp_path):
    trace = _job(tmp_path)
    # launch_bound comes after host_sync in CLAIM_ORDER: it keeps only what is left
    rules = [_rule("launch_bound", ("", 300_000, [(100_000, 400_000)], None)),
             _rule("host_sync", ("cudaStreamSynchronize", 200_000, [(200_000, 400_000)], None))]
    assert CLAIM_ORDER.index("host_sync") < CLAIM_ORDER.index("launch_bound")
    out = find(trace, rules=rules)
    assert _savings(out) == {("host_sync", "cudaStreamSynchronize"): 200.0,
                             ("launch_bound", ""): 100.0}
    lb = out[out["rule"] == "launch_bound"].iloc[0]["evidence"]
    assert "200.0 µs of the time it claims is held by host_sync (cudaStreamSynchronize)" in lb


def test_without_overlap_nothing_changes(tmp_path):
    trace = _job(tmp_path)
    rules = [_rule("launch_bound", ("", 100_000, [(100_000, 200_000)], None)),
             _rule("host_sync", ("sync", 200_000, [(200_000, 400_000)], None))]
    out = find(trace, rules=rules)
    assert _savings(out) == {("host_sync", "sync"): 200.0, ("launch_bound", ""): 100.0}
    assert not out["evidence"].str.contains("held by").any()


def test_partial_claims_share_an_interval(tmp_path):
    """Half of a kernel (fp32) and the grid-bound 30% of the same kernel fit together;
    a further 70% gets only what is left."""
    trace = _job(tmp_path)
    rules = [_rule("fp32_gemm", ("", 50_000, [(0, 100_000)], 0.5)),
             _rule("low_occupancy", ("", 30_000, [(0, 100_000)], 0.3))]
    assert _savings(find(trace, rules=rules)) == {("fp32_gemm", ""): 50.0,
                                                  ("low_occupancy", ""): 30.0}
    rules[1] = _rule("low_occupancy", ("", 70_000, [(0, 100_000)], 0.7))
    assert _savings(find(trace, rules=rules)) == {("fp32_gemm", ""): 50.0,
                                                  ("low_occupancy", ""): 50.0}


def test_a_saving_is_bounded_by_the_time_it_claims(tmp_path):
    trace = _job(tmp_path)
    out = find(trace, rules=[_rule("host_sync", ("x", 500_000, [(0, 100_000)], None))])
    assert _savings(out) == {("host_sync", "x"): 100.0}


# -- merging the same problem seen twice ---------------------------------------------------------
def test_same_rule_same_time_merges(tmp_path):
    trace = _job(tmp_path)
    rule = _rule("comm_exposed", ("process group 0", 300_000, [(100_000, 400_000)], None),
                 ("stream 21", 250_000, [(150_000, 400_000)], None))
    out = find(trace, rules=[rule])
    assert len(out) == 1
    row = out.iloc[0]
    assert (row["subject"], row["est_saving(us)"]) == ("process group 0", 300.0)
    assert "The same time also shows as stream 21 (250.0 µs of its 250.0 µs in common): its " \
        "0.0 µs is counted here" in row["evidence"]


def test_same_rule_mostly_other_time_stays_apart(tmp_path):
    trace = _job(tmp_path)
    # stream 21 shares 40% of its time with the group: under MERGE_SHARE, two findings
    assert MERGE_SHARE == 0.5
    rule = _rule("comm_exposed", ("process group 0", 300_000, [(100_000, 400_000)], None),
                 ("stream 21", 250_000, [(300_000, 550_000)], None))
    out = find(trace, rules=[rule])
    assert _savings(out) == {("comm_exposed", "process group 0"): 300.0,
                             ("comm_exposed", "stream 21"): 150.0}


def test_merged_saving_keeps_what_the_second_adds(tmp_path):
    trace = _job(tmp_path)
    rule = _rule("comm_exposed", ("a", 300_000, [(100_000, 400_000)], None),
                 ("b", 400_000, [(100_000, 500_000)], None))
    (row,) = find(trace, rules=[rule]).to_dict("records")
    # b (larger) goes first and keeps 400 us; a loses all of its 300 us to it and merges
    assert (row["subject"], row["est_saving(us)"]) == ("b", 400.0)


# -- the rank's window ---------------------------------------------------------------------------
def test_findings_without_a_claim_share_the_free_window(tmp_path):
    trace = _job(tmp_path)
    rules = [_rule("host_sync", ("x", 700_000, [(0, 700_000)], None)),
             _rule("other_rule", ("y", 600_000, [], None))]
    result = analyse(trace, rules=rules)
    assert _savings(result.findings) == {("host_sync", "x"): 700.0, ("other_rule", "y"): 300.0}
    assert result.coverage.iloc[0]["saving(us)"] == 1_000.0


def test_job_findings_take_only_the_free_window(tmp_path):
    trace = _job(tmp_path, ranks=(0, 1))

    def late(trace, selection):
        return [Finding((1,), (1,), "rank 1 late", 900_000, WINDOW, subject="rank 1")]

    rules = [_rule("host_sync", ("x", 400_000, [(0, 400_000)], None)),
             FindingRule("stragglers", "Late", "stragglers", "", "", late, "job")]
    result = analyse(trace, rules=rules)
    assert _savings(result.findings)[("stragglers", "rank 1")] == 600.0
    assert result.coverage.set_index("rank")["saving(us)"].tolist() == [400.0, 1_000.0]


@pytest.mark.parametrize("seed", range(8))
def test_invariants_hold_for_random_claims(seed):
    """Any claims: no time held beyond 100%, each saving within its kept amount, the total
    within the window."""
    rng = np.random.default_rng(seed)
    window = (0, 1_000_000)
    claims, estimates = [], []
    for _ in range(12):
        n = int(rng.integers(1, 40))
        s = rng.integers(-50_000, 1_000_000, n)
        e = s + rng.integers(1, 200_000, n)
        amount = None if rng.random() < 0.5 else (e - s) * rng.random(n)
        claims.append(Claim(s, e, amount))
        estimates.append(int(rng.integers(0, 2_000_000)))
    kept = resolve(claims, estimates, window)
    cuts = np.unique(np.concatenate([np.r_[k.start, k.end] for k in kept] + [np.r_[0]]))
    level = np.zeros(cuts.size)
    for k in kept:
        assert k.saving_ns <= round(k.amount_ns) and k.saving_ns >= 0
        assert k.amount_ns <= k.claimed_ns + 1e-6
        if k.start.size == 0:
            continue
        at = np.searchsorted(k.start, cuts, side="right") - 1
        inside = (at >= 0) & (cuts < k.end[np.clip(at, 0, None)])
        level += np.where(inside, k.density[np.clip(at, 0, None)], 0.0)
    assert level.max() <= 1.0 + 1e-9
    span = max(window[1], max(int(c.end.max()) for c in claims)) - min(
        window[0], min(int(c.start.min()) for c in claims))
    assert sum(k.saving_ns for k in kept) <= span


def test_segments_cap_density_and_clip():
    s, e, d = segments(Claim([0, 50], [100, 150], [100, 50]), (10, 140))
    assert s.tolist() == [10, 50, 100] and e.tolist() == [50, 100, 140]
    assert d.tolist() == [1.0, 1.0, 0.5]


def test_claim_outside_spreads_the_amount_over_what_is_left():
    c = claim_outside(np.array([0]), np.array([100]), np.array([30]), Cover(np.array([40]),
                                                                           np.array([90])))
    assert c.start.tolist() == [0, 90] and c.end.tolist() == [40, 100]
    assert c.amount.tolist() == pytest.approx([24.0, 6.0])


# -- the case: one exposed collective, counted per process group and per stream --------
def _twice(tmp_path: Path, same_time: bool = True):
    """Per step (1 ms): a 600 µs compute kernel, then an all-reduce with process-group args
    ``[600, 700)`` µs on stream 20 and a communication kernel without args on stream 21,
    at the same time (the same exchange seen twice) or, in the twin, ``[800, 900)``."""
    b = TraceBuilder(rank=0)
    for k in range(1, 4):
        t = (k - 1) * WINDOW
        with b.step(k, ts=t, dur=WINDOW):
            b.launch_kernel("sgemm", cpu_ts=t + 1_000, cpu_dur=500, gpu_ts=t, gpu_dur=600_000)
            b.launch_kernel(NCCL, cpu_ts=t + 2_000, cpu_dur=500, gpu_ts=t + 600_000,
                            gpu_dur=100_000, stream=COMM_STREAM,
                            **{"Process Group Name": "0", "Collective name": "allreduce"})
            other = 600_000 if same_time else 800_000
            b.launch_kernel(NCCL, cpu_ts=t + 3_000, cpu_dur=500, gpu_ts=t + other,
                            gpu_dur=100_000, stream=COMM_STREAM + 1)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_exposed_collective_seen_twice_is_one_finding(tmp_path):
    trace = _twice(tmp_path)
    rt = trace.rank(0)
    # The rule groups collectives by operation, so the all-reduce seen once with its
    # process group and once by stream is one group of the rule already; the engine's
    # merging of findings that claim the same time is tested on made-up rules below.
    raw = COMM_RULES[0].check(rt, None)
    assert [f.est_saving_ns for f in raw] == [300_000]
    out = find(trace, rules=COMM_RULES)
    assert len(out) == 1 and out.iloc[0]["est_saving(us)"] == 300.0


def test_exposed_collectives_at_different_times_count_both(tmp_path):
    """The twin: the second all-reduce runs apart, so both exposed 100 µs a step count."""
    trace = _twice(tmp_path, same_time=False)
    out = find(trace, rules=COMM_RULES)
    assert out["est_saving(us)"].tolist() == [600.0]


# -- a shared budget: the free computation two exposed groups would hide under ----------------
def _shared_budget(tmp_path: Path, enough_compute: bool = False):
    """Per step, on one stream: an all-reduce ``[100, 400)`` µs and an all-gather
    ``[500, 800)`` (two operation groups), and 100 µs of
    compute ``[0, 100)``: each group's saving is capped by the same 100 µs of free
    computation. The twin adds 600 µs of compute ``[1000, 1600)`` (2 ms steps): enough to
    hide both."""
    step = 2 * WINDOW if enough_compute else WINDOW
    b = TraceBuilder(rank=0)
    for k in range(1, 4):
        t = (k - 1) * step
        with b.step(k, ts=t, dur=step):
            b.launch_kernel("sgemm", cpu_ts=t + 1_000, cpu_dur=500, gpu_ts=t, gpu_dur=100_000)
            if enough_compute:
                b.launch_kernel("sgemm", cpu_ts=t + 1_600, cpu_dur=200, gpu_ts=t + 1_000_000,
                                gpu_dur=600_000)
            b.launch_kernel(NCCL, cpu_ts=t + 2_000, cpu_dur=500, gpu_ts=t + 100_000,
                            gpu_dur=300_000, stream=COMM_STREAM,
                            **{"Process Group Name": "0", "Collective name": "allreduce"})
            b.launch_kernel(NCCL, cpu_ts=t + 3_000, cpu_dur=500, gpu_ts=t + 500_000,
                            gpu_dur=300_000, stream=COMM_STREAM,
                            **{"Process Group Name": "0", "Collective name": "_allgather_base"})
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_two_groups_hiding_under_the_same_compute_count_it_once(tmp_path):
    trace = _shared_budget(tmp_path)
    # The rule shares the 300 µs of free computation between the two groups itself (in
    # proportion to their exposed time), and the engine's budget keeps the total at 300.
    raw = COMM_RULES[0].check(trace.rank(0), None)
    assert sorted(f.est_saving_ns for f in raw) == [150_000, 150_000]
    assert all(f.budget == ("computation time with no communication", 300_000) for f in raw)
    out = find(trace, rules=COMM_RULES)
    assert out["est_saving(us)"].sum() == 300.0


def test_two_groups_with_enough_compute_stay_two(tmp_path):
    trace = _shared_budget(tmp_path, enough_compute=True)
    out = find(trace, rules=COMM_RULES)
    assert sorted(out["est_saving(us)"].tolist()) == [900.0, 900.0]


# -- a late rank's wait is the straggler's, not the collective's ----------------------------------
def test_the_wait_for_a_late_rank_is_counted_once(tmp_path):
    """4 ranks, 3 steps, 4 all-reduces a step 100 µs apart after the compute kernel
    (nothing overlaps them), rank 2 starting each 70 µs late: on rank 0 each kernel runs
    110 µs (1 230 µs of communication in all, the kernels overlapping 10 µs), 70 of them
    waiting for rank 2. ``stragglers`` (rank 2) holds those 12 x 70 = 840 µs on every
    waiting rank; ``comm_exposed`` on rank 0 keeps the other 390 µs."""
    from test_stragglers import straggler_job

    trace = load_trace(straggler_job(tmp_path, late={2: 70_000}), progress=False,
                       cache=False)
    raw = COMM_RULES[0].check(trace.rank(0), None)
    assert [f.est_saving_ns for f in raw] == [1_230_000]  # the rule alone: wait included
    result = analyse(trace, rules=COMM_RULES)
    out = result.findings.set_index("rule")
    assert out.loc["stragglers", "est_saving(us)"] == 840.0
    cov = result.coverage.set_index("rank")
    assert cov.loc[0, "saving(us)"] == 390.0  # comm_exposed on rank 0, the wait left out
    assert cov.loc[0, "explained(us)"] == 1_230.0  # all of it explained, once
    assert cov.loc[2, "saving(us)"] == 480.0 + 840.0  # its transfers, and its lateness


def test_without_a_late_rank_the_collective_keeps_its_time(tmp_path):
    from test_stragglers import straggler_job

    trace = load_trace(straggler_job(tmp_path), progress=False, cache=False)
    out = find(trace, rules=COMM_RULES)
    assert out["rule"].tolist() == ["comm_exposed"]
    assert out.iloc[0]["est_saving(us)"] == 480.0
