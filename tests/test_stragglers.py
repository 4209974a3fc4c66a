"""Stragglers: collectives matched across ranks, lags and waits known by construction,
``get_potential_stragglers``, the figure, real traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLE_TRACES, shared_trace
from kineto_builder import TraceBuilder

from hta.analysis.stragglers import (
    ARRIVAL_COLUMNS,
    SUMMARY_COLUMNS,
    collective_arrivals,
    match_collectives,
    potential_stragglers,
    rank_collectives,
    straggler_summary,
)
from hta.job.load import load_trace
from hta.model.selection import Selection
from hta.plots.stragglers import straggler_figure
from hta.trace_analysis import TraceAnalysis

COMM_STREAM = 20
STEP_NS = 2_000_000
COMPUTE_NS = 450_000  # longer than the 4 collectives of a step, so it can hide them
TRANSFER_NS = 40_000
GAP_NS = 100_000  # between the collectives of one step
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def collective_args(seq: int | None, nelems: int, pg: str = "0",
                    group: int = 4) -> dict[str, object]:
    """The args Kineto copies onto an NCCL kernel (``group``: the size of the group
    ``Process Group Ranks`` lists)."""
    args: dict[str, object] = {
        "Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
        "Group size": group, "dtype": "Float", "Process Group Name": pg,
        "Process Group Description": "default_pg",
        "Process Group Ranks": str(list(range(group))),
    }
    if seq is not None:
        args["Seq"] = seq
    return args


def straggler_job(folder: Path, *, late: dict[int, int] | None = None, steps: int = 3,
                  per_step: int = 4, world: int = 4, with_seq: bool = True,
                  overlap: bool = False) -> Path:
    """A ``world``-rank job: per step one compute kernel then ``per_step`` all-reduces on
    the NCCL stream. Rank r's collectives start ``late[r]`` ns after the nominal time;
    every kernel of a collective ends when the last rank's has run ``TRANSFER_NS``, as
    NCCL does (the early ranks' kernels wait inside). The compute kernel runs before the
    collectives, or with ``overlap`` under them (it covers them all when no rank is more
    than 110 us late)."""
    late = late or {}
    worst = max(late.values(), default=0)
    for rank in range(world):
        b = TraceBuilder(rank=rank, world_size=world)
        seq = 0
        for step in range(1, steps + 1):
            t0 = step * STEP_NS
            with b.step(step, ts=t0, dur=STEP_NS):
                comp_at = t0 + 2 * GAP_NS if overlap else t0 + 10_000
                b.launch_kernel("sgemm_128x128", cpu_ts=t0 + 1_000, cpu_dur=2_000,
                                gpu_ts=comp_at, gpu_dur=COMPUTE_NS)
                for j in range(per_step):
                    seq += 1
                    nominal = t0 + 2 * GAP_NS + j * GAP_NS + (0 if overlap else COMPUTE_NS)
                    start = nominal + late.get(rank, 0)
                    end = nominal + worst + TRANSFER_NS
                    b.launch_kernel(NCCL, cpu_ts=t0 + 5_000 + j * 3_000, cpu_dur=2_000,
                                    gpu_ts=start, gpu_dur=end - start, stream=COMM_STREAM,
                                    **collective_args(seq if with_seq else None, 1000 + j))
        b.write(folder / f"rank-{rank}.json")
    return folder


def load(folder: Path, **kw: object):
    return load_trace(folder, progress=False, cache=False, **kw)


# -- known by construction -------------------------------------------------------------------
def test_one_late_rank_is_the_straggler(tmp_path: Path) -> None:
    delay = 70_000
    straggler_job(tmp_path, late={2: delay})
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert analyzer.get_potential_stragglers(num_candidates=1) == [2]
    assert analyzer.get_potential_stragglers() == [2]  # nobody else made anyone wait

    arr = analyzer.get_collective_arrivals()
    assert list(arr.columns) == ARRIVAL_COLUMNS
    assert arr["collective"].nunique() == 3 * 4 and len(arr) == 3 * 4 * 4
    assert (arr["participants"] == 4).all() and (arr["matched_by"] == "seq").all()
    late = arr[arr["rank"] == 2]
    others = arr[arr["rank"] != 2]
    assert (late["arrival_lag_ns"] == delay).all() and late["last"].all()
    assert (late["wait_caused_ns"] == 3 * delay).all()
    assert (late["excess_lag_ns"] == delay).all()
    assert (late["waited_ns"] == 0).all()
    assert (others["arrival_lag_ns"] == 0).all() and not others["last"].any()
    assert (others["waited_ns"] == delay).all() and (others["wait_caused_ns"] == 0).all()
    assert sorted(arr["seq"].unique()) == list(range(1, 13))
    assert (arr.groupby("collective")["seq"].nunique() == 1).all()

    summary = analyzer.get_straggler_summary()
    assert list(summary.columns) == SUMMARY_COLUMNS
    top = summary.iloc[0]
    assert top["rank"] == 2 and top["late_count"] == 12 and top["collectives"] == 12
    assert top["score"] == 1.0
    assert top["total_wait_caused(us)"] == pytest.approx(12 * 3 * delay / 1e3)
    assert top["total_excess_lag(us)"] == pytest.approx(12 * delay / 1e3)
    assert top["mean_lag(us)"] == pytest.approx(delay / 1e3)
    rest = summary[summary["rank"] != 2]
    assert (rest["score"] == 0).all() and (rest["late_count"] == 0).all()
    assert rest["total_waited(us)"].tolist() == pytest.approx([12 * delay / 1e3] * 3)


def test_no_late_rank_has_no_straggler(tmp_path: Path) -> None:
    straggler_job(tmp_path)
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert analyzer.get_potential_stragglers(num_candidates=1) == []
    summary = analyzer.get_straggler_summary()
    assert (summary["score"] == 0).all() and (summary["late_count"] == 0).all()
    assert (summary["total_wait_caused(us)"] == 0).all()
    assert (summary["collectives"] == 12).all()


def test_score_weighs_the_wait_each_rank_caused(tmp_path: Path) -> None:
    # rank 1 late by 10 us at every collective; rank 3 by 50 us (so rank 3 is last)
    straggler_job(tmp_path, late={1: 10_000, 3: 50_000}, steps=2, per_step=2)
    arr = collective_arrivals(load(tmp_path))
    last = arr[arr["last"]]
    assert set(last["rank"]) == {3}
    # ranks 0 and 2 waited 50 us, rank 1 waited 40 us: 140 us per collective
    assert (last["wait_caused_ns"] == 140_000).all()
    assert (last["excess_lag_ns"] == 40_000).all()
    summary = straggler_summary(arr)
    assert summary["rank"].tolist()[0] == 3
    assert potential_stragglers(summary, 2) == [3]


def test_two_ranks_tied_for_last_share_the_wait(tmp_path: Path) -> None:
    straggler_job(tmp_path, late={1: 30_000, 2: 30_000}, steps=1, per_step=1)
    arr = collective_arrivals(load(tmp_path))
    assert arr.loc[arr["last"], "rank"].tolist() == [1, 2]
    assert arr.loc[arr["last"], "wait_caused_ns"].tolist() == [30_000, 30_000]
    assert (arr["excess_lag_ns"] == 0).all()  # neither alone could have saved it
    summary = straggler_summary(arr)
    assert summary.set_index("rank")["score"].to_dict() == {1: 0.5, 2: 0.5, 0: 0.0, 3: 0.0}


def test_matching_by_seq_survives_a_different_order(tmp_path: Path) -> None:
    """Rank 3 runs the two collectives of a step in the other order: with ``Seq`` they
    still match by sequence number; without it, by order (first with first)."""
    def job(folder: Path, with_seq: bool) -> pd.DataFrame:
        for rank in range(4):
            b = TraceBuilder(rank=rank, world_size=4)
            with b.step(1, ts=0, dur=STEP_NS):
                times = [100_000, 300_000] if rank != 3 else [300_000, 100_000]
                for seq, ts in zip((1, 2), times):
                    b.launch_kernel(NCCL, cpu_ts=1_000 * seq, cpu_dur=500, gpu_ts=ts,
                                    gpu_dur=TRANSFER_NS, stream=COMM_STREAM,
                                    **collective_args(seq if with_seq else None, 100 * seq))
            b.write(folder / f"rank-{rank}.json")
        return collective_arrivals(load(folder))

    by_seq = job(tmp_path / "seq", True)
    assert (by_seq["matched_by"] == "seq").all()
    assert (by_seq.groupby("collective")["in_msg_nelems"].nunique() == 1).all()
    r3 = by_seq[by_seq["rank"] == 3].set_index("seq")
    assert r3.loc[1, "arrival_lag_ns"] == 200_000 and r3.loc[2, "arrival_lag_ns"] == 0

    by_order = job(tmp_path / "order", False)
    assert (by_order["matched_by"] == "order").all() and (by_order["seq"] == -1).all()
    assert (by_order.groupby("collective")["in_msg_nelems"].nunique() == 2).all()
    assert (by_order["arrival_lag_ns"] == 0).all()


def test_order_matching_is_per_step_and_group(tmp_path: Path) -> None:
    straggler_job(tmp_path, late={0: 20_000}, with_seq=False)
    arr = collective_arrivals(load(tmp_path))
    assert (arr["matched_by"] == "order").all() and (arr["participants"] == 4).all()
    assert arr["collective"].nunique() == 12
    assert (arr.groupby("collective")["iteration"].nunique() == 1).all()
    assert set(arr.loc[arr["last"], "rank"]) == {0}
    assert (arr.loc[arr["last"], "wait_caused_ns"] == 60_000).all()


def test_iterations_and_ranks_select(tmp_path: Path) -> None:
    straggler_job(tmp_path, late={2: 5_000})
    trace = load(tmp_path)
    step2 = collective_arrivals(trace, Selection.of(iterations=[2]))
    assert set(step2["iteration"]) == {2} and step2["collective"].nunique() == 4
    without = collective_arrivals(trace, Selection.of([0, 1, 3]))
    assert set(without["rank"]) == {0, 1, 3}
    assert (without["wait_caused_ns"] == 0).all() and (without["arrival_lag_ns"] == 0).all()
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert analyzer.get_potential_stragglers(profiler_steps=[3], num_candidates=1) == [2]
    with pytest.raises(ValueError, match="profiler_steps"):
        analyzer.get_potential_stragglers(profiler_steps=[99])


def test_wait_is_capped_by_the_kernel_that_waited() -> None:
    """An early rank whose kernel ended before the last rank started (clock skew, or a
    kernel that did not wait) cannot have waited longer than its extra duration."""
    kernels = pd.DataFrame({
        "rank": [0, 1], "process_group": ["0", "0"], "process_group_desc": ["", ""],
        "group_ranks": ["", ""], "seq": [7, 7], "name": ["allreduce"] * 2,
        "kernel": [NCCL] * 2, "stream": [20, 20], "iteration": [1, 1],
        "start_ns": [0, 500], "end_ns": [60, 540], "in_msg_nelems": [1.0, 1.0],
    })
    arr = match_collectives(kernels)
    assert arr["arrival_lag_ns"].tolist() == [0, 500]
    assert arr["waited_ns"].tolist() == [20, 0]  # 60 - 40: what rank 0 ran beyond rank 1
    assert arr["wait_caused_ns"].tolist() == [0, 20]


def test_single_participant_and_empty() -> None:
    kernels = pd.DataFrame({
        "rank": [0], "process_group": ["stream 20"], "process_group_desc": [""],
        "group_ranks": [""], "seq": [-1], "name": [NCCL], "kernel": [NCCL],
        "stream": [20], "iteration": [1], "start_ns": [10], "end_ns": [20],
        "in_msg_nelems": [np.nan],
    })
    arr = match_collectives(kernels)
    assert arr["participants"].tolist() == [1] and not arr["last"].any()
    assert len(straggler_summary(arr)) == 0
    assert list(match_collectives(kernels.iloc[:0]).columns) == ARRIVAL_COLUMNS
    assert potential_stragglers(straggler_summary(arr)) == []


def test_lazy_trace_answers_like_in_memory(tmp_path: Path) -> None:
    straggler_job(tmp_path, late={1: 15_000}, steps=2)
    eager = collective_arrivals(load(tmp_path))
    lazy = collective_arrivals(load(tmp_path, in_memory=False))
    pd.testing.assert_frame_equal(eager, lazy, check_dtype=False)


def test_figure(tmp_path: Path) -> None:
    straggler_job(tmp_path, late={2: 70_000}, steps=2)
    arr = collective_arrivals(load(tmp_path))
    fig = straggler_figure(straggler_summary(arr), arr)
    assert fig.data[0].type == "bar"
    assert list(fig.data[0].y) == pytest.approx([0, 0, 8 * 3 * 70.0, 0])
    assert [t.name for t in fig.data[1:]] == [f"rank {r}" for r in range(4)]
    assert list(fig.data[3].y) == pytest.approx([70.0] * 8)
    empty = straggler_figure(straggler_summary(arr.iloc[:0]), arr.iloc[:0])
    assert len(empty.data) == 1 and empty.layout.annotations


# -- real traces ------------------------------------------------------------------------------
def check_invariants(arr: pd.DataFrame) -> None:
    """What holds on any job: lags from the earliest rank, waits bounded by lags and
    kernel durations, the wait caused equal to the wait suffered, shares summing to 1."""
    assert (arr["arrival_lag_ns"] >= 0).all()
    assert (arr.groupby("collective")["arrival_lag_ns"].min() == 0).all()
    assert (arr["waited_ns"] <= arr["arrival_lag_ns"].groupby(arr["collective"])
            .transform("max") - arr["arrival_lag_ns"]).all()
    assert (arr["waited_ns"] <= arr["end_ns"] - arr["start_ns"]).all()
    assert (arr["waited_ns"] >= 0).all() and (arr.loc[arr["last"], "waited_ns"] == 0).all()
    per = arr.groupby("collective")
    caused, suffered = per["wait_caused_ns"].sum(), per["waited_ns"].sum()
    ties = per["last"].sum().clip(lower=1)
    assert ((suffered - caused >= 0) & (suffered - caused < ties)).all()
    assert (arr["excess_lag_ns"] <= arr["wait_caused_ns"]).all()
    summary = straggler_summary(arr)
    if summary["total_wait_caused(us)"].sum() > 0:
        assert summary["score"].sum() == pytest.approx(1.0)


def test_real_two_ranks_trace_filter() -> None:
    folder = shared_trace("trace_filter")
    arr = collective_arrivals(load(folder))
    check_invariants(arr)
    assert set(arr["rank"]) == {0, 1} and (arr["matched_by"] == "order").all()
    assert (arr["participants"] == 2).all()  # every SendRecv kernel found on both ranks
    # by hand from the files: the first SendRecv on stream 84 of step 551 starts at
    # 1682725898094377 us on rank 0 and 1682725898129911 us on rank 1
    first = arr[arr["collective"] == 0].set_index("rank")
    assert first.loc[1, "arrival_lag_ns"] == 35_534_000


def test_sample_job() -> None:
    arr = collective_arrivals(load(SAMPLE_TRACES / "synthetic_4rank"))
    check_invariants(arr)
    assert (arr["matched_by"] == "seq").all() and (arr["participants"] == 4).all()
    assert arr["collective"].nunique() == 9
    # the generator does not make ranks wait for each other: kernels of one collective
    # last about as long on every rank, so almost no wait although starts differ
    summary = straggler_summary(arr)
    assert summary["total_wait_caused(us)"].sum() < 100


def test_real_single_rank_nccl_trace() -> None:
    arr = collective_arrivals(load(shared_trace("nccl_parser_config")))
    assert len(arr) == 21 and (arr["participants"] == 1).all()
    assert (arr["matched_by"] == "order").sum() == 21  # these kernels carry no Seq
    assert set(arr["process_group"]) == {"0"}
    assert len(straggler_summary(arr)) == 0


# -- against HTA main -----------------------------------------------------------------------
# Produced once with HTA main's source (/work/hta-main-src) on HTA 0.5.0's venv:
#   cd /tmp && /work/venv-hta/bin/python -I -c "import sys; sys.path.insert(0,
#   '/work/hta-main-src'); from hta.trace_analysis import TraceAnalysis as T;
#   a = T(trace_dir=DIR); print([a.get_potential_stragglers(num_candidates=k) for k in (1, 2)])"
# trace_filter: [[1], [0, 1]]; straggler_job(late={2: 70_000}, steps=4) with kernels named
# ncclKernel_AllReduce_RING_LL_Sum_float(...): [[2], [0, 1]] (its ties flag every rank);
# the same job with nobody late: [[0], [0, 1]]; with ncclDevKernel_* names HTA raises.
HTA_MAIN_TRACE_FILTER = [1]
HTA_MAIN_LATE_RANK = [2]


def test_agrees_with_hta_main_on_num_candidates_1(tmp_path: Path) -> None:
    real = TraceAnalysis(trace_dir=shared_trace("trace_filter"), cache=False, progress=False,
                         include_last_profiler_step=False)  # HTA's default
    assert real.get_potential_stragglers(num_candidates=1) == HTA_MAIN_TRACE_FILTER
    straggler_job(tmp_path, late={2: 70_000}, steps=4)
    job = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False,
                        include_last_profiler_step=False)
    assert job.get_potential_stragglers(num_candidates=1) == HTA_MAIN_LATE_RANK
    assert job.get_potential_stragglers(num_candidates=2) == [2]  # HTA main: [0, 1]


def test_what_a_rank_sends_for_matching_does_not_grow_with_the_group(tmp_path: Path) -> None:
    """Each rank's kernel table travels to the process that matches the ranks; the
    ``Process Group Ranks`` list (about 5 KB in a 1,000-rank group) is not part of it,
    or that process would hold ranks x ranks x collectives of it."""
    import pickle  # how a worker's answer travels

    def sent(group: int) -> int:
        b = TraceBuilder(rank=0, world_size=group)
        for j in range(50):
            b.launch_kernel(NCCL, cpu_ts=1_000 + j * 10_000, cpu_dur=2_000,
                            gpu_ts=5_000 + j * 10_000, gpu_dur=3_000, stream=COMM_STREAM,
                            **collective_args(j + 1, 1000, group=group))
        folder = tmp_path / f"g{group}"
        folder.mkdir()
        b.write(folder / "rank-0.json")
        kernels = rank_collectives(load(folder), Selection.of([0]))
        assert len(kernels) == 50
        return len(pickle.dumps(kernels))

    assert sent(1000) < sent(4) + 2_000
