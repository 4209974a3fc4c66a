"""Why a rank is late (hta.analysis.straggler_causes), on generated jobs whose answer is
known by construction (hta.synthetic.coupled), and send/recv never making a straggler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hta.analysis.straggler_causes import (
    CAUSE_COLUMNS,
    collective_instances,
    straggler_causes,
    stretches,
)
from hta.synthetic.coupled import generate_coupled_job
from hta.trace_analysis import TraceAnalysis

SHAPES = ("balanced", "slow_worker", "imbalance", "host", "slow_link", "1f1b")


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[TraceAnalysis, dict]]:
    """Each shape: 4 ranks, 4 steps, loaded, with its truth."""
    out = {}
    for shape in SHAPES:
        d = tmp_path_factory.mktemp(shape)
        _, truth = generate_coupled_job(d, shape, ranks=4, steps=4)
        out[shape] = (TraceAnalysis(trace_dir=d, cache=False, progress=False), truth)
    return out


def causes(jobs: dict, shape: str, **kw: Any) -> pd.DataFrame:
    return jobs[shape][0].get_straggler_causes(replay=False, **kw)


def test_a_job_without_a_straggler_has_no_cause(jobs: dict) -> None:
    out = causes(jobs, "balanced")
    assert list(out.columns) == CAUSE_COLUMNS and not len(out)


@pytest.mark.parametrize(("shape", "cause"), [
    ("slow_worker", "slow_compute"), ("host", "host"), ("slow_link", "slow_link")])
def test_one_late_rank_and_its_cause(jobs: dict, shape: str, cause: str) -> None:
    truth = jobs[shape][1]["straggler"]
    (row,) = causes(jobs, shape).to_dict("records")
    assert (row["rank"], row["cause"]) == (truth["rank"], cause)
    assert list(row["steps"]) == truth["steps"]
    assert row["recurring"]


def test_the_evidence_is_the_construction(jobs: dict) -> None:
    """slow_worker: the rank's compute is 1.3x the others' (1% jitter); host: its GPU idles
    3 ms longer a step; slow_link: its all-reduce's transfer is 2 ms against 1 ms."""
    (slow,) = causes(jobs, "slow_worker").to_dict("records")
    assert slow["compute(us)"] / slow["median_compute(us)"] == pytest.approx(1.3, rel=0.02)
    (host,) = causes(jobs, "host").to_dict("records")
    assert host["idle(us)"] - host["median_idle(us)"] == pytest.approx(3_000, rel=0.02)
    (link,) = causes(jobs, "slow_link").to_dict("records")
    assert (link["transfer(us)"], link["median_transfer(us)"]) == pytest.approx((2_000, 1_000))


def test_the_time_held_is_the_lag_behind_every_other_rank(jobs: dict) -> None:
    truth = jobs["host"][1]
    (row,) = causes(jobs, "host").to_dict("records")
    arrivals = jobs["host"][0].get_collective_arrivals()
    late = arrivals[arrivals["last"]]
    second = arrivals[~arrivals["last"]].groupby("collective")["start_ns"].max()
    expected = (late.set_index("collective")["start_ns"] - second).sum()
    assert row["held(us)"] * 1e3 == pytest.approx(expected)
    assert row["lag(us)"] * 1e3 == pytest.approx(
        sum(x["lag_ns"] for x in truth["late"]) / len(truth["late"]))


def test_imbalance_is_a_different_rank_each_step(jobs: dict) -> None:
    truth = jobs["imbalance"][1]["late"]
    out = causes(jobs, "imbalance")
    assert set(out["cause"]) == {"imbalance"} and not out["recurring"].any()
    got = {int(s): int(r) for r, steps in zip(out["rank"], out["steps"], strict=True)
           for s in steps}
    assert got == {x["step"]: x["rank"] for x in truth}


def test_steps_and_ranks_select(jobs: dict) -> None:
    out = causes(jobs, "slow_worker", iterations=[1, 2])
    assert [list(s) for s in out["steps"]] == [[1, 2]]
    assert not len(causes(jobs, "slow_worker", ranks=[0]))  # one rank: nothing to compare


def test_cost_is_the_replay_of_no_stragglers(jobs: dict) -> None:
    ta = jobs["slow_worker"][0]
    (row,) = ta.get_straggler_causes().to_dict("records")
    assert row["change"] == "no-stragglers:3"
    table = ta.what_if("no-stragglers:3").drop_duplicates("step")
    gain = (table["job_measured(us)"] - table["job_predicted(us)"]).clip(lower=0).sum()
    assert row["cost(us)"] == pytest.approx(gain)
    (host,) = jobs["host"][0].get_straggler_causes().to_dict("records")
    assert host["change"] == "" and host["cost(us)"] == host["held(us)"]


def test_the_straggler_finding_names_its_cause(jobs: dict) -> None:
    found = jobs["host"][0].get_findings(min_share=0)
    (row,) = found[found["rule"] == "stragglers"].to_dict("records")
    assert row["ranks"] == [1]
    assert "Why: host in steps 0-3 (recurring)" in row["evidence"]
    assert "waits for its host" in row["advice"]


def test_send_recv_are_paired_and_never_make_a_straggler(jobs: dict) -> None:
    ta, truth = jobs["1f1b"]
    arrivals = ta.get_collective_arrivals()
    assert set(arrivals["matched_by"]) == {"p2p"}
    assert (arrivals["participants"] == 2).all() and not arrivals["last"].any()
    assert (arrivals["wait_caused_ns"] == 0).all()
    pairs = arrivals.groupby("collective")
    assert (pairs["direction"].apply(sorted).map(tuple) == ("recv", "send")).all()
    # each half names the other as its peer
    for _, pair in pairs:
        a, b = pair.to_dict("records")
        assert (a["peer"], b["peer"]) == (b["rank"], a["rank"])
    # the wait of each half is the construction's
    p2p = pd.DataFrame(truth["p2p"])
    got = arrivals.set_index(["rank", "start_ns"])["waited_ns"]
    want = p2p.set_index(["rank", "start_ns"])["wait_ns"]
    assert got.sort_index().tolist() == want.sort_index().tolist()
    assert not len(ta.get_straggler_summary()) and not len(causes(jobs, "1f1b"))
    found = ta.get_findings(min_share=0)
    assert "stragglers" not in set(found["rule"])


def test_without_annotations_send_recv_stay_unmatched(tmp_path: Path) -> None:
    """A send/recv kernel whose peer no annotation names is a transfer of its own: one
    participant, no wait, no straggler."""
    generate_coupled_job(tmp_path, "gpipe", ranks=2, steps=1, micro_batches=2)
    for path in tmp_path.glob("rank-*.json.gz"):
        import gzip

        trace = json.loads(gzip.decompress(path.read_bytes()))
        trace["traceEvents"] = [e for e in trace["traceEvents"]
                                if not str(e.get("name", "")).startswith("nccl:")]
        path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    ta = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    arrivals = ta.get_collective_arrivals()
    assert (arrivals["matched_by"] == "p2p").all() and (arrivals["peer"] == -1).all()
    assert (arrivals["participants"] == 1).all()
    assert not len(ta.get_pipeline_bubbles())


def test_causes_from_tables() -> None:
    """Two ranks, two 10 ms steps, one all-reduce each: rank 1 starts it 500 µs after
    rank 0 both times, and in the stretch before it its GPU idled 1.5 ms against 1 ms for
    rank 0 (host); above the 2 % noise of a step."""
    profile = pd.DataFrame({"rank": [0, 1, 0, 1], "step": [0, 0, 1, 1],
                            "step_start_ns": [0, 0, 10**7, 10**7], "step_ns": [10**7] * 4})
    arrivals = pd.DataFrame({
        "collective": [0, 0, 1, 1], "rank": [0, 1, 0, 1], "iteration": [0, 0, 1, 1],
        "start_ns": [6_000_000, 6_500_000, 16_000_000, 16_500_000],
        "end_ns": [7_500_000] * 2 + [17_500_000] * 2,
        "arrival_lag_ns": [0, 500_000, 0, 500_000], "waited_ns": [500_000, 0, 500_000, 0],
        "wait_caused_ns": [0, 500_000, 0, 500_000], "last": [False, True, False, True],
        "participants": [2] * 4, "matched_by": ["seq"] * 4})
    instances = collective_instances(arrivals)
    assert instances["held_ns"].tolist() == [0, 0, 500_000, 500_000]  # by rank, then start
    # the stretch before each all-reduce: from the step's start, then from the last end
    bounds = stretches(instances, profile)
    assert bounds[1]["start_ns"].tolist() == [0, 7_500_000]
    assert bounds[1]["end_ns"].tolist() == [6_500_000, 16_500_000]
    measures = pd.DataFrame({"rank": [0, 1, 0, 1], "collective": [0, 0, 1, 1],
                             "compute_ns": [5_000_000] * 4,
                             "idle_ns": [10**6, 1_500_000, 10**6, 1_500_000]})
    (row,) = straggler_causes(profile, instances, measures).to_dict("records")
    assert (row["rank"], row["cause"], row["steps"]) == (1, "host", (0, 1))
    assert row["held(us)"] == 1_000 and row["wait_caused(us)"] == 1_000
    assert (row["idle(us)"], row["median_idle(us)"]) == (1_500, 1_000)
    # below the noise (2 % of the step): nothing
    quiet = arrivals.assign(start_ns=arrivals["start_ns"] - [0, 400_000, 0, 400_000])
    assert not len(straggler_causes(profile, collective_instances(quiet), measures))
    # a peer whose kernel ended before the last one started waited for nobody
    skewed = arrivals.assign(end_ns=[6_400_000, 7_000_000, 16_400_000, 17_000_000])
    assert (collective_instances(skewed)["held_ns"] == 0).all()


def test_a_straggler_late_for_its_host_keeps_the_rules_estimate(jobs: dict) -> None:
    """no-stragglers models slower computation: a rank late for its host gets no replay
    (its saving is the measured wait, gpu-time, and the finding says why)."""
    found = jobs["host"][0].get_findings()
    (row,) = found[found["rule"] == "stragglers"].to_dict("records")
    assert (row["change"], row["saving_source"]) == ("", "gpu-time")
    assert "does not model" in row["evidence"]
    slow = jobs["slow_worker"][0].get_findings()
    (row,) = slow[slow["rule"] == "stragglers"].to_dict("records")
    assert (row["change"], row["saving_source"]) == ("no-stragglers:3", "replay")


def test_two_causes_share_the_time_held() -> None:
    """Rank 1 is 500 µs late at one all-reduce, with 300 µs more computation and 300 µs
    more idle time than rank 0 before it: late for both, each with half the held time."""
    profile = pd.DataFrame({"rank": [0, 1], "step": [0, 0], "step_start_ns": [0, 0],
                            "step_ns": [10**7] * 2})
    arrivals = pd.DataFrame({
        "collective": [0, 0], "rank": [0, 1], "iteration": [0, 0],
        "start_ns": [6_000_000, 6_500_000], "end_ns": [7_500_000] * 2,
        "arrival_lag_ns": [0, 500_000], "waited_ns": [500_000, 0],
        "wait_caused_ns": [0, 500_000], "last": [False, True], "participants": [2] * 2,
        "matched_by": ["seq"] * 2})
    measures = pd.DataFrame({"rank": [0, 1], "collective": [0, 0],
                             "compute_ns": [5_000_000, 5_300_000],
                             "idle_ns": [10**6, 1_300_000]})
    out = straggler_causes(profile, collective_instances(arrivals), measures)
    assert sorted(zip(out["cause"], out["held(us)"], strict=True)) == [
        ("host", 250.0), ("slow_compute", 250.0)]
    # a second excess under a quarter of the sum is no cause of its own
    small = measures.assign(idle_ns=[10**6, 1_050_000])
    (row,) = straggler_causes(profile, collective_instances(arrivals), small).to_dict(
        "records")
    assert (row["cause"], row["held(us)"]) == ("slow_compute", 500.0)


def _rewrite(folder: Path, edit) -> None:
    """Apply ``edit(trace)`` to every rank file of a generated job."""
    import gzip

    for path in folder.glob("rank-*.json.gz"):
        trace = json.loads(gzip.decompress(path.read_bytes()))
        edit(trace)
        path.write_bytes(gzip.compress(json.dumps(trace).encode()))


def test_the_peer_from_the_cpu_range_without_gpu_annotations(tmp_path: Path) -> None:
    """Without the GPU copies of the nccl:send/recv ranges, the CPU range around each
    launch still names the peer."""
    generate_coupled_job(tmp_path, "gpipe", ranks=3, steps=1, micro_batches=2)

    def drop(trace: dict) -> None:
        trace["traceEvents"] = [e for e in trace["traceEvents"]
                                if e.get("cat") != "gpu_user_annotation"]
    _rewrite(tmp_path, drop)
    arrivals = TraceAnalysis(trace_dir=tmp_path, cache=False,
                             progress=False).get_collective_arrivals()
    assert (arrivals["peer"] >= 0).all() and (arrivals["participants"] == 2).all()


def test_batched_send_recv_are_never_a_straggler(tmp_path: Path) -> None:
    """batch_isend_irecv: one kernel, ``coalesced``, several transfers: no single peer,
    so no pair, no straggler and no pipeline stage."""
    generate_coupled_job(tmp_path, "1f1b", ranks=4, steps=2)

    def batch(trace: dict) -> None:
        for e in trace["traceEvents"]:
            if str(e.get("name", "")).startswith(("nccl:send", "nccl:recv")):
                e["name"] = "nccl:coalesced"
            args = e.get("args") or {}
            if args.get("Collective name") in ("send", "recv"):
                args["Collective name"] = "coalesced"
    _rewrite(tmp_path, batch)
    ta = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    arrivals = ta.get_collective_arrivals()
    assert set(arrivals["direction"]) == {"sendrecv"} and (arrivals["peer"] == -1).all()
    assert (arrivals["participants"] == 1).all() and not arrivals["last"].any()
    assert not len(ta.get_straggler_summary()) and not len(ta.get_pipeline_bubbles())
    assert "stragglers" not in set(ta.get_findings(min_share=0)["rule"])
