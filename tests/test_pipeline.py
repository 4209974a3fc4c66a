"""Pipeline bubbles (hta.analysis.pipeline), on generated GPipe and 1F1B jobs whose
bubbles, waits and transfers are known by construction (hta.synthetic.coupled)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hta.analysis.pipeline import COLUMNS, STEP_COLUMNS, stage_order
from hta.analysis.pipeline_bubbles import TIMELINE_COLUMNS, stage_means
from hta.plots.pipeline import pipeline_figure, straggler_causes_figure
from hta.synthetic.coupled import generate_coupled_job
from hta.trace_analysis import TraceAnalysis

P, M, STEPS = 4, 4, 3


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[TraceAnalysis, dict]]:
    out = {}
    for shape in ("gpipe", "1f1b"):
        d = tmp_path_factory.mktemp(shape)
        _, truth = generate_coupled_job(d, shape, ranks=P, steps=STEPS, micro_batches=M)
        out[shape] = (TraceAnalysis(trace_dir=d, cache=False, progress=False), truth)
    return out


@pytest.mark.parametrize("shape", ["gpipe", "1f1b"])
def test_bubble_per_stage_and_step_is_the_construction(jobs: dict, shape: str) -> None:
    ta, truth = jobs[shape]
    steps = ta.get_pipeline_bubbles(per="step")
    assert list(steps.columns) == STEP_COLUMNS and len(steps) == P * STEPS
    assert set(steps["schedule"]) == {shape} and (steps["micro_batches"] == M).all()
    want = pd.DataFrame(truth["bubbles"]).set_index(["rank", "step"])["bubble_ns"]
    got = steps.set_index(["rank", "step"])["bubble(us)"] * 1e3
    assert got.sort_index().to_numpy() == pytest.approx(want.sort_index().to_numpy(), abs=1)
    # the stage is the rank (stage order from the send/recv graph)
    assert (steps["stage"] == steps["rank"]).all()


@pytest.mark.parametrize("shape", ["gpipe", "1f1b"])
def test_wait_and_transfer_per_micro_batch_are_the_construction(jobs: dict, shape: str
                                                               ) -> None:
    ta, truth = jobs[shape]
    mb = ta.get_pipeline_bubbles()
    assert list(mb.columns) == COLUMNS
    p2p = pd.DataFrame(truth["p2p"])
    key = ["rank", "step", "phase", "micro_batch"]
    want = p2p.groupby(key)[["wait_ns", "transfer_ns"]].sum().sort_index()
    got = (mb[mb["phase"] != "flush"].groupby(key)[["wait(us)", "transfer(us)"]].sum() * 1e3)
    got = got.loc[want.index]
    assert got.to_numpy() == pytest.approx(want.to_numpy(), abs=1)


@pytest.mark.parametrize("shape", ["gpipe", "1f1b"])
def test_computation_per_micro_batch_from_the_annotations(jobs: dict, shape: str) -> None:
    ta, truth = jobs[shape]
    if not truth.get("annotated", False):
        pytest.skip("the generator writes no PP: annotations")
    mb = ta.get_pipeline_bubbles()
    comp = pd.DataFrame(truth["compute"]).assign(ns=lambda f: f["end_ns"] - f["start_ns"])
    key = ["rank", "step", "phase", "micro_batch"]
    want = comp.groupby(key)["ns"].sum().sort_index()
    got = mb[mb["phase"] != "flush"].groupby(key)["compute(us)"].sum() * 1e3
    assert got.loc[want.index].to_numpy() == pytest.approx(want.to_numpy(), abs=1)


def test_the_bubble_adds_up_to_the_window(jobs: dict) -> None:
    ta, _ = jobs["gpipe"]
    mb = ta.get_pipeline_bubbles()
    steps = ta.get_pipeline_bubbles(per="step")
    sums = mb.groupby(["rank", "step"])[["compute(us)", "bubble(us)"]].sum()
    s = steps.set_index(["rank", "step"])
    assert (sums["compute(us)"] + sums["bubble(us)"]).to_numpy() == pytest.approx(
        s["window(us)"].to_numpy())
    # the window is the same for every stage of a step
    spread = steps.groupby("step")["window(us)"].agg(lambda w: w.max() - w.min())
    assert (spread < 1e-6).all()
    # the theory: (P - 1) x the stage's computation per micro-batch
    per_mb = s["compute(us)"] / M
    assert s["bubble_theory(us)"].to_numpy() == pytest.approx((P - 1) * per_mb.to_numpy())


def test_gpipe_flushes_on_the_last_stage_first(jobs: dict) -> None:
    """In GPipe the last stage runs its backwards first and then waits for the others:
    its flush (after its last kernel) is the longest; the first stage's is 0."""
    mb = jobs["gpipe"][0].get_pipeline_bubbles()
    flush = mb[mb["phase"] == "flush"].groupby("stage")["bubble(us)"].mean()
    assert flush.loc[0] == pytest.approx(0, abs=1e-3)
    assert flush.idxmax() == P - 1


def test_timeline_and_figure(jobs: dict) -> None:
    ta, _ = jobs["1f1b"]
    tl = ta.get_pipeline_bubbles(per="timeline")
    assert list(tl.columns) == TIMELINE_COLUMNS
    assert set(tl["kind"]) == {"compute", "bubble", "wait", "transfer"}
    steps = ta.get_pipeline_bubbles(per="step")
    # the bubble intervals of a stage and step add up to its bubble
    bub = tl[tl["kind"] == "bubble"].assign(ns=lambda f: f["end_ns"] - f["start_ns"])
    got = bub.groupby(["rank", "step"])["ns"].sum()
    assert got.to_numpy() == pytest.approx(
        steps.set_index(["rank", "step"])["bubble(us)"].to_numpy() * 1e3, abs=1)
    fig = pipeline_figure(stage_means(steps), tl)
    kinds = {t.name for t in fig.data}
    assert {"compute", "bubble", "wait", "transfer"} <= kinds
    means = stage_means(steps)
    assert (means["steps"] == STEPS).all() and means["bubble_pctg"].between(0, 100).all()
    with pytest.raises(ValueError, match="per="):
        ta.get_pipeline_bubbles(per="rank")


def test_no_pipeline(tmp_path: Path) -> None:
    generate_coupled_job(tmp_path, "balanced", ranks=2, steps=1)
    ta = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert not len(ta.get_pipeline_bubbles())
    assert not len(ta.get_pipeline_bubbles(per="step"))
    assert not len(ta.get_pipeline_bubbles(per="timeline"))
    assert len(pipeline_figure(stage_means(ta.get_pipeline_bubbles(per="step")),
                               ta.get_pipeline_bubbles(per="timeline")).data) == 0
    assert len(straggler_causes_figure(ta.get_straggler_causes(replay=False)).data) == 0


def test_stage_order_from_the_first_transfer() -> None:
    """A chain 5 - 2 - 9: rank 9's first transfer is a send, so it is stage 0."""
    rows = []
    for rank, peer, direction, start in [(9, 2, "send", 0), (2, 9, "recv", 0),
                                         (2, 5, "send", 10), (5, 2, "recv", 10)]:
        rows.append({"rank": rank, "peer": peer, "direction": direction, "start_ns": start,
                     "iteration": 0, "matched_by": "p2p"})
    assert stage_order(pd.DataFrame(rows)) == {9: (0, 0, 3), 2: (0, 1, 3), 5: (0, 2, 3)}


def test_the_truth_file_is_skipped(jobs: dict) -> None:
    ta, truth = jobs["gpipe"]
    assert ta.t.get_ranks() == list(range(P))
    assert json.dumps(truth)  # plain JSON


def test_a_selection_of_stages_is_a_pipeline_of_its_own(jobs: dict) -> None:
    """Ranks 0 and 1 of the 4 stages: a 2-stage pipeline; rank 1's transfers with rank 2
    (not selected: no known wait) are left out."""
    ta, _ = jobs["1f1b"]
    steps = ta.get_pipeline_bubbles(ranks=[0, 1], per="step")
    assert sorted(set(steps["rank"])) == [0, 1] and sorted(set(steps["stage"])) == [0, 1]
    whole = ta.get_pipeline_bubbles(per="step").set_index(["rank", "step"])
    part = steps.set_index(["rank", "step"])
    assert part.loc[0, "transfer(us)"].tolist() == whole.loc[0, "transfer(us)"].tolist()
    assert (part.loc[1, "transfer(us)"] < whole.loc[1, "transfer(us)"]).all()


def test_model_chunks_from_the_annotations_make_an_interleaved_schedule() -> None:
    """A rank whose computation was launched in PP:0F.. and PP:2F.. runs two chunks
    (stages 0 and 2 of 4 virtual stages on 2 ranks): v = 2 halves the theory."""
    from hta.analysis.pipeline_bubbles import model_chunks, pipeline_steps, schedule_of

    runs = pd.DataFrame({"rank": [0, 0, 1, 1], "chunk": [0, 2, 1, 3]})
    assert model_chunks(runs) == {0: 2, 1: 2}
    assert model_chunks(runs.assign(chunk=-1)) == {0: 1, 1: 1}
    rows = []
    for rank in (0, 1):
        for mb in range(4):
            for phase, us in (("forward", 1_000.0), ("backward", 2_000.0)):
                rows.append({"pipeline": 0, "stage": rank, "rank": rank, "step": 0,
                             "micro_batch": mb, "phase": phase, "compute(us)": us,
                             "bubble(us)": 100.0, "wait(us)": 0.0, "transfer(us)": 0.0})
    bubbles = pd.DataFrame(rows)
    chunks = {0: 2, 1: 2}
    assert schedule_of(bubbles, {0: False}, chunks) == {0: "interleaved"}
    steps = pipeline_steps(bubbles, schedules={0: "interleaved"}, chunks=chunks)
    # (P - 1) / v x the stage's computation per micro-batch: 1 / 2 x 3 000 µs
    assert steps["bubble_theory(us)"].tolist() == [1_500.0, 1_500.0]
    assert steps["chunks"].tolist() == [2, 2]


def test_two_pipelines_with_global_ranks(tmp_path: Path) -> None:
    """Two 4-stage 1F1B pipelines side by side, the second on ranks 4-7 (its process
    group lists them, so its `nccl:send 0->1` names group ranks 0 and 1, global 4 and 5):
    two pipelines of four stages, each stage its own bubble."""
    import gzip

    generate_coupled_job(tmp_path / "a", "1f1b", ranks=4, steps=2)
    generate_coupled_job(tmp_path / "b", "1f1b", ranks=4, steps=2, seed=1)
    job = tmp_path / "job"
    job.mkdir()
    for side, shift in (("a", 0), ("b", 4)):
        for r in range(4):
            trace = json.loads(gzip.decompress((tmp_path / side / f"rank-{r}.json.gz")
                                               .read_bytes()))
            trace["distributedInfo"]["rank"] = r + shift
            trace["distributedInfo"]["world_size"] = 8
            text = json.dumps(trace).replace('"[0, 1, 2, 3]"', f'"{[4, 5, 6, 7]}"' if shift
                                             else '"[0, 1, 2, 3]"')
            (job / f"rank-{r + shift}.json").write_text(text)
    ta = TraceAnalysis(trace_dir=job, cache=False, progress=False)
    steps = ta.get_pipeline_bubbles(per="step")
    stages = steps.drop_duplicates("rank").set_index("rank")[["pipeline", "stage"]]
    assert stages.to_dict("index") == {r: {"pipeline": r // 4, "stage": r % 4}
                                       for r in range(8)}
    assert set(steps["schedule"]) == {"1f1b"}
    assert (ta.get_collective_arrivals()["peer"] // 4
            == ta.get_collective_arrivals()["rank"] // 4).all()


def test_overlap_comm_is_capped_at_the_computation_that_could_hide_it(jobs: dict) -> None:
    """overlap-comm replays an upper bound: on a pipeline it frees every stage from its
    peers' transfers, far more than the computation with no communication could hide.
    The finding's saving is the rule's own estimate, and the evidence says why."""
    ta, _ = jobs["1f1b"]
    replayed = ta.get_findings()
    rules = ta.get_findings(replay=False)
    (row,) = replayed[replayed["rule"] == "comm_exposed"].to_dict("records")
    (own,) = rules[rules["rule"] == "comm_exposed"].to_dict("records")
    assert (row["change"], row["saving_source"]) == ("overlap-comm", "replay")
    assert row["est_saving(us)"] == pytest.approx(own["est_saving(us)"])
    assert row["saving_high(us)"] <= own["est_saving(us)"] + 1e-6
    assert "capped at the rule's own estimate" in row["evidence"]
    uncapped = ta.what_if("overlap-comm").drop_duplicates("step")
    gain = (uncapped["job_measured(us)"] - uncapped["job_predicted(us)"]).sum()
    assert gain > 2 * own["est_saving(us)"]
