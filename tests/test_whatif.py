"""What-if replay: the schedule, the replay of unchanged traces, changes checked against
counterfactual programs, and the job's critical path.

The counterfactuals come from a small simulator (:func:`simulate`) that runs one program
(host ops launching kernels, an all-reduce coupling the ranks, a device synchronize
ending each step) and writes each rank's Kineto trace with ``kineto_builder``; the same
program with one thing changed is simulated again, and the prediction on the first must
equal the measured steps of the second within 5 %.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLE_TRACES, shared_trace
from kineto_builder import TraceBuilder

from hta.analysis.whatif import Change
from hta.analysis.whatif.schedule import edge_offsets, native_schedule_available, schedule
from hta.trace_analysis import TraceAnalysis

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
LAUNCH, LAT, GAP, SYNC, RET, OP_GAP = 2_000, 5_000, 1_000, 3_000, 2_000, 500


# -- the schedule ---------------------------------------------------------------------------
@pytest.fixture(params=["native", "python"])
def scheduler(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each schedule test runs on the compiled pass and on the NumPy one."""
    if request.param == "native" and not native_schedule_available():
        pytest.skip("the optional extension hta.analysis.whatif._schedule is not built")
    monkeypatch.setenv("HTA_NATIVE", "1" if request.param == "native" else "0")
    return str(request.param)


@pytest.mark.usefixtures("scheduler")
def test_schedule_by_hand() -> None:
    # 0->1 (5), 0->2 (2), 1->2 (1): t = [0, 5, 6], node 2 bound by the edge 1->2
    s = schedule(3, np.array([0, 0, 1]), np.array([1, 2, 2]), np.array([5, 2, 1]),
                 np.zeros(3, dtype=np.int64))
    assert s.t.tolist() == [0, 5, 6]
    assert s.via.tolist() == [-1, 0, 2]


@pytest.mark.usefixtures("scheduler")
def test_schedule_matches_a_plain_loop_on_random_dags() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(2, 60))
        pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, size=(3 * n, 2)) if a < b}
        pairs |= {(i, i + 1) for i in range(n - 1) if rng.random() < 0.6}  # chains
        src, dst = (np.array(x, dtype=np.int64) for x in zip(*sorted(pairs, key=lambda p:
                                                                         (p[1], p[0]))))
        delay = rng.integers(0, 100, size=src.size)
        base = rng.integers(0, 50, size=n)
        t = base.copy()
        for v in range(n):  # the definition, node by node
            into = dst == v
            if into.any():
                t[v] = max(t[u] + d for u, d in zip(src[into], delay[into], strict=True))
        assert schedule(n, src, dst, delay, base).t.tolist() == t.tolist()
        shuffled = rng.permutation(n)
        assert schedule(n, src, dst, delay, base, shuffled).t.tolist() == t.tolist()


@pytest.mark.usefixtures("scheduler")
def test_schedule_rejects_backward_edges() -> None:
    with pytest.raises(ValueError):
        schedule(2, np.array([1]), np.array([0]), np.array([1]), np.zeros(2, np.int64))


@pytest.mark.usefixtures("scheduler")
def test_schedule_rejects_edges_out_of_order_and_their_offsets_too() -> None:
    # edges 0->2 then 0->1 are not sorted by destination: both refuse them
    src, dst = np.array([0, 0]), np.array([2, 1])
    with pytest.raises(ValueError, match="sorted by destination"):
        schedule(3, src, dst, np.array([1, 1]), np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="sorted by destination"):
        edge_offsets(3, src, dst)
    with pytest.raises(ValueError, match="lower to a higher"):
        edge_offsets(2, np.array([1]), np.array([0]))


@pytest.mark.usefixtures("scheduler")
def test_schedule_with_offsets_made_ahead_matches() -> None:
    # edge_offsets made once and given back: the same times, binding edges and roots
    for n, src, dst, delay, base, chain in _random_graphs(17):
        offsets = edge_offsets(n, src, dst)
        assert offsets.tolist() == [0, *np.cumsum(np.bincount(dst, minlength=n)).tolist()]
        a = schedule(n, src, dst, delay, base, chain, roots=True)
        b = schedule(n, src, dst, delay, base, chain, roots=True, indptr=offsets)
        assert (a.t.tolist(), a.via.tolist(), a.root.tolist()) == (
            b.t.tolist(), b.via.tolist(), b.root.tolist())


@pytest.mark.usefixtures("scheduler")
def test_schedule_without_binding_edges_gives_the_same_times_and_roots() -> None:
    # binding=False (a prediction reads the times alone): no via, the same times, and the
    # roots still follow the binding edges when asked for
    for n, src, dst, delay, base, chain in _random_graphs(19):
        whole = schedule(n, src, dst, delay, base, chain, roots=True)
        times = schedule(n, src, dst, delay, base, chain, binding=False)
        rooted = schedule(n, src, dst, delay, base, chain, roots=True, binding=False)
        assert times.via is None and times.root is None and rooted.via is None
        assert times.t.tolist() == rooted.t.tolist() == whole.t.tolist()
        assert rooted.root.tolist() == whole.root.tolist()
    empty = schedule(0, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                     np.zeros(0, np.int64), binding=False)
    assert empty.t.size == 0 and empty.via is None


def _edited(rng: np.random.Generator, n: int, src: np.ndarray, dst: np.ndarray):  # type: ignore[no-untyped-def]
    """A change's edits of a random graph: float delays (some ending in .5, some
    negative), about a third of the edges dropped, and added edges in two lists (some
    backward, left out), with the graph they apply to."""
    from types import SimpleNamespace

    from hta.analysis.whatif.changes import Edits

    delay = rng.normal(1.0, 1.5, src.size)
    delay[::4] = np.floor(delay[::4]) + 0.5  # ties, rounded to even
    adds = [rng.integers(0, n, size=(2, int(rng.integers(0, 6)))) for _ in range(2)]
    edits = Edits(delay=delay, keep=rng.random(src.size) < 0.7,
                  add_src=[a[0] for a in adds], add_dst=[a[1] for a in adds],
                  add_delay=[rng.normal(1.0, 1.5, a.shape[1]) for a in adds])
    return edits, SimpleNamespace(src=src, dst=dst, node_ts=np.zeros(n, np.int64))


def test_edited_times_equal_the_schedule_of_the_edited_edge_list() -> None:
    """The compiled pass over a change's edits (kept edges, added ones, float delays)
    gives the times of the schedule of the edge list the edits make, without it."""
    from hta.analysis.whatif.schedule import edited_times

    if not native_schedule_available():
        pytest.skip("the optional extension hta.analysis.whatif._schedule is not built")
    rng = np.random.default_rng(23)
    for n, src, dst, _, base, _ in _random_graphs(23):
        edits, jg = _edited(rng, n, src, dst)
        e_src, e_dst, e_delay = edits.edges(jg)  # type: ignore[arg-type]
        np.maximum(e_delay, 0, out=e_delay)
        want = schedule(n, e_src, e_dst, e_delay, base, binding=False).t
        got = edited_times(edge_offsets(n, src, dst), src, edits.delay, edits.keep,
                           edits.added(jg), base)  # type: ignore[arg-type]
        assert got.tolist() == want.tolist()
    with pytest.raises(ValueError, match="sorted by destination"):  # added, out of order
        edited_times(np.array([0, 0, 0, 0]), np.zeros(0, np.int64), np.zeros(0),
                     np.zeros(0, bool), (np.array([0, 0]), np.array([2, 1]), np.zeros(2)),
                     np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="lower to a higher"):  # added, backward
        edited_times(np.array([0, 0, 0]), np.zeros(0, np.int64), np.zeros(0),
                     np.zeros(0, bool), (np.array([1]), np.array([1]), np.zeros(1)),
                     np.zeros(2, np.int64))


def test_a_changed_replay_without_binding_edges_has_the_times_of_one_with() -> None:
    """A changed replay read for its times alone (a prediction's) schedules the edits
    without making their edge list; the times equal those of the replay with binding
    edges, which makes it, for changes that drop, add and scale edges."""
    from hta.analysis.whatif.changes import apply
    from hta.analysis.whatif.replay import parse_changes, replay

    jg, _ = TraceAnalysis(trace_dir=str(SAMPLE_TRACES / "synthetic_4rank"), progress=False,
                          cache=False).replay().graph()
    kinds = set()
    for change in ("overlap-comm", "no-host-sync", "no-launch-overhead", "no-stragglers",
                   "kernels:nccl*0.5"):
        edits = apply(jg, parse_changes(change))
        kinds |= {"added"} if edits.added(jg)[0].size else set()
        kinds |= {"dropped"} if not edits.keep.all() else set()
        kinds |= {"scaled"} if not np.array_equal(edits.delay, jg.delay) else set()
        assert np.array_equal(replay(jg, edits, binding=False).t, replay(jg, edits).t), change
    assert kinds == {"added", "dropped", "scaled"}


def _random_graphs(seed: int) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray, np.ndarray]]:
    """30 random DAGs of up to 80 nodes with delays of 0-2 (many ties): ``(n, src, dst,
    delay, base, chain)``, edges sorted by destination."""
    rng = np.random.default_rng(seed)
    for _ in range(30):
        n = int(rng.integers(1, 80))
        pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, size=(2 * n, 2)) if a < b}
        pairs |= {(i, i + 1) for i in range(n - 1) if rng.random() < 0.7}
        ordered = sorted(pairs, key=lambda p: (p[1], p[0]))
        src = np.array([a for a, _ in ordered], dtype=np.int64)
        dst = np.array([b for _, b in ordered], dtype=np.int64)
        yield (n, src, dst, rng.integers(0, 3, size=src.size), rng.integers(0, 3, size=n),
               rng.permutation(n))


def test_schedule_native_and_numpy_agree_on_ties_and_roots(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # delays of 0-2 make many ties: both passes bind the later edge and find one root
    if not native_schedule_available():
        pytest.skip("the optional extension hta.analysis.whatif._schedule is not built")
    for n, src, dst, delay, base, chain in _random_graphs(11):
        answers = []
        for native in ("1", "0"):
            monkeypatch.setenv("HTA_NATIVE", native)
            s = schedule(n, src, dst, delay, base, chain, roots=True)
            answers.append((s.t.tolist(), s.via.tolist(), s.root.tolist()))
        assert answers[0] == answers[1]



def test_schedule_in_chunks_matches_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    # the numpy pass turns the multi-predecessor nodes' edges into lists a chunk at a
    # time: chunks of 1 or 3 nodes give the times, binding edges and roots of one chunk
    from hta.analysis.whatif import schedule as module

    monkeypatch.setenv("HTA_NATIVE", "0")
    for n, src, dst, delay, base, chain in _random_graphs(13):
        answers = []
        for chunk in (1 << 30, 1, 3):
            monkeypatch.setattr(module, "MULTI_CHUNK", chunk)
            s = schedule(n, src, dst, delay, base, chain, roots=True)
            answers.append((s.t.tolist(), s.via.tolist(), s.root.tolist()))
        assert answers[0] == answers[1] == answers[2]


# -- a small simulator of a training program -------------------------------------------------
@dataclass(frozen=True)
class Program:
    """Per rank and step: ops ``(kernel name, host ns, kernel ns)``; an all-reduce of
    ``transfer`` ns after them (ranks > 1), then a device synchronize (``sync``). With a
    ``queue`` depth Q, a launch call returns only once the kernel launched Q before it
    has finished. With ``graph`` the step's kernels are submitted at its start (a CUDA
    graph): launch calls take no time and kernels wait only for their stream."""

    ops: tuple[tuple[str, int, int], ...]
    ranks: int = 1
    steps: int = 4
    transfer: int = 50_000
    sync: bool = True
    slow_rank: int | None = None
    slow_factor: float = 1.0
    kernel_factor: dict[str, float] | None = None
    queue: int = 0  # launch queue depth (0: unbounded)
    graph: bool = False  # launches cost nothing, kernels may start at the step's start
    jitter: int = 0  # seed: launch latencies, stream gaps and host times vary (0: constant)


def simulate(p: Program, out: Path) -> Path:
    """Run the program (module docstring) and write one trace per rank into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    b = [TraceBuilder(rank=r, world_size=p.ranks) for r in range(p.ranks)]
    cpu = [1_000_000] * p.ranks
    free = [1_000_000] * p.ranks  # when the stream is free
    done: list[list[int]] = [[] for _ in range(p.ranks)]  # kernel ends, in launch order
    rng = np.random.default_rng(p.jitter)

    def vary(value: int, lo: float, hi: float) -> int:
        return int(value * rng.uniform(lo, hi)) if p.jitter else value
    for step in range(1, p.steps + 1):
        pending, step_start = [], list(cpu)
        for r in range(p.ranks):
            c = cpu[r]
            for name, host_ns, kern in p.ops:
                host = vary(host_ns, 0.9, 1.1)
                k = kern * (p.kernel_factor or {}).get(name, 1.0)
                if r == p.slow_rank:
                    k *= p.slow_factor
                k = int(k)
                ls = c + host // 2
                call_end = ls + (0 if p.graph else LAUNCH)
                if p.queue and len(done[r]) >= p.queue:
                    call_end = max(call_end, done[r][-p.queue] + RET)
                op_end = call_end + (c + host - ls - LAUNCH)
                b[r].cpu_op(f"aten::{name}", c, op_end - c)
                ready = step_start[r] if p.graph else ls + vary(LAT, 0.6, 1.6)
                g0 = max(ready, free[r] + vary(GAP, 0.5, 2.0))
                b[r].launch_kernel(name, cpu_ts=ls, cpu_dur=call_end - ls, gpu_ts=g0,
                                   gpu_dur=k)
                free[r] = g0 + k
                done[r].append(free[r])
                c = op_end + OP_GAP
            if p.ranks > 1:
                g0 = max(c + vary(LAT, 0.6, 1.6), free[r] + vary(GAP, 0.5, 2.0))
                pending.append((r, c, g0))
                c += LAUNCH + OP_GAP
            cpu[r] = c
        last = max(g for _, _, g in pending) if pending else 0
        for r, c_launch, g0 in pending:
            end = last + p.transfer
            b[r].launch(NCCL, "kernel", cpu_ts=c_launch, cpu_dur=LAUNCH, gpu_ts=g0,
                        gpu_dur=end - g0, **{"Collective name": "allreduce",
                                             "Process Group Name": "0", "Seq": step,
                                             "Group size": p.ranks})
            free[r] = end
        for r in range(p.ranks):
            s0, c = step_start[r], cpu[r]
            if p.sync:
                end = max(c + SYNC, free[r] + RET)
                b[r].runtime("cudaDeviceSynchronize", c, end - c)
            else:
                end = c + SYNC
                b[r].runtime("cudaGetDevice", c, end - c)
            b[r].annotation(f"ProfilerStep#{step}", s0, end - s0)
            cpu[r] = end + OP_GAP
    for r in range(p.ranks):
        b[r].write(out / f"rank-{r}.json")
    return out


def measured_and_predicted(base: Program, variant: Program, change: str, tmp: Path
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = TraceAnalysis(trace_dir=str(simulate(base, tmp / "base")), cache=False, progress=False)
    b = TraceAnalysis(trace_dir=str(simulate(variant, tmp / "variant")), cache=False,
                      progress=False)
    pred = a.what_if(change)
    meas = b.what_if()
    return (pred["measured(us)"].to_numpy(), pred["predicted(us)"].to_numpy(),
            meas["measured(us)"].to_numpy())


GPU_BOUND = Program(ops=(("gemm", 10_000, 200_000), ("relu", 10_000, 30_000),
                         ("gemm", 10_000, 200_000), ("add", 10_000, 20_000)))
HOST_BOUND = Program(ops=(("gemm", 300_000, 40_000), ("relu", 200_000, 10_000),
                          ("gemm", 300_000, 40_000)))


def test_replay_of_unchanged_program_is_exact(tmp_path: Path) -> None:
    a = TraceAnalysis(trace_dir=str(simulate(GPU_BOUND, tmp_path)), cache=False,
                      progress=False)
    df = a.what_if()
    assert len(df) == GPU_BOUND.steps
    assert (df["replay_error_pctg"].abs() < 1e-9).all()
    assert (df["predicted(us)"] == df["measured(us)"]).all()
    # the stricter replay: every dependency here takes its usual delay, so it is exact too
    assert (df["modelled_error_pctg"].abs() < 1.0).all()


def _close(pred: np.ndarray, actual: np.ndarray, tol: float = 0.05) -> None:
    err = np.abs(pred - actual) / actual
    assert err.max() <= tol, (pred, actual, err)


def test_faster_kernel_family_gpu_bound(tmp_path: Path) -> None:
    variant = replace(GPU_BOUND, kernel_factor={"gemm": 0.5})
    measured, pred, actual = measured_and_predicted(GPU_BOUND, variant, "kernels:gemm*0.5",
                                                    tmp_path)
    assert (pred < 0.75 * measured).all()  # the change matters here
    _close(pred, actual)


def test_faster_kernels_change_nothing_when_host_bound(tmp_path: Path) -> None:
    variant = replace(HOST_BOUND, kernel_factor={"gemm": 0.5})
    measured, pred, actual = measured_and_predicted(HOST_BOUND, variant, "kernels:gemm*0.5",
                                                    tmp_path)
    assert np.allclose(pred, measured)
    _close(pred, actual)


def test_launch_queue_back_pressure(tmp_path: Path) -> None:
    # no synchronize: the host is held back only by the full launch queue
    queued = Program(ops=tuple(("gemm", 10_000, 100_000) for _ in range(12)), sync=False,
                     queue=4, steps=5)
    variant = replace(queued, kernel_factor={"gemm": 0.5})
    measured, pred, actual = measured_and_predicted(queued, variant, "kernels:gemm*0.5",
                                                    tmp_path)
    a = TraceAnalysis(trace_dir=str(tmp_path / "base"), cache=False, progress=False)
    _, jg = a.replay().graph()[0], a.replay().graph()[0]
    assert jg.ranks[0].queue_depth == 4
    # steady steps are queue-bound: half-time kernels make them about half as long
    assert (pred[2:] < 0.6 * measured[2:]).all()
    _close(pred, actual)


def test_no_launch_overhead_as_a_cuda_graph(tmp_path: Path) -> None:
    # launch-bound: short kernels, each waiting for its launch
    launch_bound = Program(ops=tuple(("relu", 20_000, 3_000) for _ in range(10)))
    measured, pred, actual = measured_and_predicted(
        launch_bound, replace(launch_bound, graph=True), "no-launch-overhead", tmp_path)
    assert (pred < measured).all()
    _close(pred, actual)


def test_overlap_comm_by_construction(tmp_path: Path) -> None:
    # gemm [10, 110] µs, all-reduce [112, 212] on the same stream, then add [214, 314];
    # the synchronize [30, 316] waits for add, the step ends 4 µs later
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=320_000):
        b.launch_kernel("gemm", cpu_ts=1_000, cpu_dur=2_000, gpu_ts=10_000, gpu_dur=100_000)
        b.launch_kernel(NCCL, cpu_ts=5_000, cpu_dur=2_000, gpu_ts=112_000, gpu_dur=100_000,
                        **{"Collective name": "allreduce", "Process Group Name": "0"})
        b.launch_kernel("add", cpu_ts=25_000, cpu_dur=2_000, gpu_ts=214_000, gpu_dur=100_000)
        b.runtime("cudaDeviceSynchronize", 30_000, 286_000)
    b.write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False)
    pred = a.what_if("overlap-comm")
    # add no longer waits for the all-reduce: it starts the rank's usual launch latency
    # (gemm's, 9 µs) after its launch at 25 µs and ends at 134 µs; the synchronize still
    # waits for the all-reduce (212 µs), returns 2 µs later, and the step ends 4 µs after
    assert pred["predicted(us)"].iloc[0] == pytest.approx(212 + 2 + 4)
    assert a.what_if()["predicted(us)"].iloc[0] == pytest.approx(320)


def test_no_data_loader(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    for step, t0 in ((1, 0), (2, 500_000)):
        b.cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 1_000,
                 200_000)
        b.cpu_op("aten::mm", t0 + 202_000, 10_000)
        b.launch_kernel("gemm", cpu_ts=t0 + 203_000, cpu_dur=2_000, gpu_ts=t0 + 210_000,
                        gpu_dur=50_000)
        b.runtime("cudaDeviceSynchronize", t0 + 213_000, 49_000)
        b.annotation(f"ProfilerStep#{step}", t0, 263_000)
    b.write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False)
    pred = a.what_if("no-data-loader")
    assert pred["predicted(us)"].tolist() == pytest.approx([63.0, 63.0])


@pytest.mark.parametrize("jitter", [1, 2])
def test_counterfactuals_with_varying_latencies(jitter: int, tmp_path: Path) -> None:
    # launch latencies, stream gaps and host times vary: the replay's floors are medians,
    # so predictions are close, not exact
    gpu = replace(GPU_BOUND, jitter=jitter)
    m, pred, actual = measured_and_predicted(gpu, replace(gpu, kernel_factor={"gemm": 0.5}),
                                             "kernels:gemm*0.5", tmp_path / "gemm")
    _close(pred, actual)
    host = replace(HOST_BOUND, jitter=jitter)
    m, pred, actual = measured_and_predicted(host, replace(host, kernel_factor={"gemm": 0.5}),
                                             "kernels:gemm*0.5", tmp_path / "host")
    _close(pred, actual)
    slow = replace(GPU_BOUND, ranks=3, slow_rank=2, slow_factor=1.5, jitter=jitter)
    m, pred, actual = measured_and_predicted(slow, replace(slow, slow_factor=1.0),
                                             "no-stragglers", tmp_path / "slow")
    _close(pred, actual)
    m, pred, actual = measured_and_predicted(gpu, replace(gpu, sync=False), "no-host-sync",
                                             tmp_path / "sync")
    _close(pred, actual)
    launches = Program(ops=tuple(("relu", 20_000, 3_000) for _ in range(10)), jitter=jitter)
    m, pred, actual = measured_and_predicted(launches, replace(launches, graph=True),
                                             "no-launch-overhead", tmp_path / "launch")
    _close(pred, actual)


def test_category_change_equals_kernel_change(tmp_path: Path) -> None:
    a = TraceAnalysis(trace_dir=str(simulate(GPU_BOUND, tmp_path)), cache=False,
                      progress=False)
    by_cat = a.what_if("category:GEMM*0.5")["predicted(us)"].to_numpy()
    by_name = a.what_if(Change("kernels", "gemm", 0.5))["predicted(us)"].to_numpy()
    assert np.array_equal(by_cat, by_name)


def test_rank_no_longer_slow(tmp_path: Path) -> None:
    slow = replace(GPU_BOUND, ranks=3, slow_rank=2, slow_factor=1.5)
    fixed = replace(GPU_BOUND, ranks=3)
    a = TraceAnalysis(trace_dir=str(simulate(slow, tmp_path / "a")), cache=False,
                      progress=False)
    b = TraceAnalysis(trace_dir=str(simulate(fixed, tmp_path / "b")), cache=False,
                      progress=False)
    base = a.what_if()
    # coupled: every rank's step is as slow as the slow rank's
    assert base["measured(us)"].min() > 1.3 * b.what_if()["measured(us)"].max()
    pred = a.what_if("no-stragglers")
    _close(pred["predicted(us)"].to_numpy(), b.what_if()["measured(us)"].to_numpy())
    _close(pred["job_predicted(us)"].to_numpy(), b.what_if()["job_measured(us)"].to_numpy())


def test_sync_removed(tmp_path: Path) -> None:
    # the host no longer waits, but the GPU still runs every kernel: a step is done when
    # its work is, so the step shrinks by the sync's bubble only (the host's part), not
    # to the host's own time
    measured, pred, actual = measured_and_predicted(
        GPU_BOUND, replace(GPU_BOUND, sync=False), "no-host-sync", tmp_path)
    assert (pred < measured).all()
    assert (pred > 0.9 * measured).all()
    _close(pred, actual, 0.05)


def test_changes_parse_and_reject() -> None:
    assert str(Change.parse("kernels:gemm*0.5")) == "kernels:gemm*0.5"
    assert Change.parse("no-stragglers:3").rank == 3
    for bad in ("kernels:gemm", "category:nope*2", "kernels:(*2", "faster", "kernels:x*-1"):
        with pytest.raises(ValueError):
            Change.parse(bad)


# -- the job's critical path ----------------------------------------------------------------
def test_job_critical_path_adds_up_and_crosses_ranks(tmp_path: Path) -> None:
    slow = replace(GPU_BOUND, ranks=2, slow_rank=1, slow_factor=1.5)
    a = TraceAnalysis(trace_dir=str(simulate(slow, tmp_path)), cache=False, progress=False)
    df = a.what_if()
    for step in (1, 2):
        path = a.get_job_critical_path(iteration=step)
        assert list(path.columns) == ["rank", "kind", "name", "start(us)", "dur(us)"]
        job = df.loc[df["step"] == step, "replayed(us)"].max()
        assert path["dur(us)"].sum() == pytest.approx(job)
        assert set(path["kind"]) <= {"cpu", "launch", "gpu", "comm", "wait"}
    # the slow rank's kernels hold the all-reduce up: its GPU work is on the path
    path = a.get_job_critical_path(iteration=2)
    gpu = path[path["kind"] == "gpu"]
    assert set(gpu["rank"]) == {1}
    assert "comm" in set(path["kind"])


def test_job_critical_path_agrees_with_one_rank_path(tmp_path: Path) -> None:
    a = TraceAnalysis(trace_dir=str(simulate(GPU_BOUND, tmp_path)), cache=False,
                      progress=False)
    _, cp = a.critical_path_analysis(0, "ProfilerStep", instance_id=1)
    job = a.get_job_critical_path(iteration=2)
    assert job["dur(us)"].sum() * 1e3 == pytest.approx(cp["duration(ns)"].sum())
    gpu_cp = cp[cp["bound_by"].str.contains("gpu")]["duration(ns)"].sum()
    gpu_job = job[job["kind"].isin(["gpu", "comm"])]["dur(us)"].sum() * 1e3
    assert gpu_job == pytest.approx(gpu_cp, rel=0.01)


# -- real traces ----------------------------------------------------------------------------
@pytest.mark.parametrize("folder", ["trace_filter", "ns_resolution_trace"])
def test_replay_error_on_real_traces(folder: str) -> None:
    logging.disable(logging.WARNING)
    try:
        a = TraceAnalysis(trace_dir=str(shared_trace(folder)), cache=False, progress=False)
        df = a.what_if()
    finally:
        logging.disable(logging.NOTSET)
    assert len(df) and (df["step"] >= 0).all()
    assert df["replay_error_pctg"].abs().max() <= 5.0
    # slower kernels never finish the steps sooner: each rank's steps together take
    # longer (one step alone may shrink: it starts at the previous step's completion)
    slower = a.what_if("kernels:.**2").groupby("rank")[["measured(us)", "predicted(us)"]]
    total = slower.sum()
    assert (total["predicted(us)"] >= total["measured(us)"] - 1e-6).all()


def test_unresolved_event_synchronize_waits_for_the_gpu(tmp_path: Path) -> None:
    # no cuda_sync record: the call is taken to wait for the work enqueued before it
    b = TraceBuilder(rank=0)
    for step, t0 in ((1, 0), (2, 1_000_000)):
        b.cpu_op("aten::mm", t0 + 1_000, 20_000)
        b.launch_kernel("gemm", cpu_ts=t0 + 2_000, cpu_dur=2_000, gpu_ts=t0 + 9_000,
                        gpu_dur=800_000)
        b.runtime("cudaEventSynchronize", t0 + 30_000, 781_000)
        b.annotation(f"ProfilerStep#{step}", t0, 812_000)
    b.write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False)
    pred = a.what_if("kernels:gemm*0.5")
    assert (pred["replay_error_pctg"] == 0).all()
    # 9 µs to the kernel start + 400 µs of kernel + 2 µs return + 1 µs to the step's end
    assert pred["predicted(us)"].tolist() == pytest.approx([412.0, 412.0])


def test_cli_whatif(tmp_path: Path) -> None:
    import json

    from cli_runner import run_cli

    folder = simulate(GPU_BOUND, tmp_path / "job")
    done = run_cli(["whatif", str(folder), "kernels:gemm*0.5", "--json", "--no-cache", "-q"])
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["changes"] == ["kernels:gemm*0.5"]
    rows = payload["rows"]
    assert len(rows) == GPU_BOUND.steps
    assert all(r["predicted(us)"] < r["measured(us)"] for r in rows)
    text = run_cli(["whatif", str(folder), "--no-cache", "-q"])
    assert text.returncode == 0 and "Replay error" in text.stdout
    bad = run_cli(["whatif", str(folder), "kernels:gemm"])
    assert bad.returncode == 2 and "unknown change" in bad.stderr


def test_unresolved_stream_wait_and_thread_handoff(tmp_path: Path) -> None:
    from hta.analysis.whatif import build_job
    from hta.analysis.whatif.graph import EDGE

    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.cpu_op("aten::copy_", 1_000, 10_000)
        b.launch("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", cpu_ts=2_000, cpu_dur=2_000,
                 gpu_ts=10_000, gpu_dur=300_000, launcher="cudaMemcpyAsync", stream=20)
        # the compute stream waits for the copy (no record says which event)
        b.runtime("cudaStreamWaitEvent", 20_000, 1_000)
        b.cpu_op("aten::mm", 22_000, 10_000)
        b.launch_kernel("gemm", cpu_ts=23_000, cpu_dur=2_000, gpu_ts=311_000, gpu_dur=200_000)
        # a second thread starts work after the main thread's op (the backward pass)
        b.cpu_op("aten::relu", 40_000, 10_000, tid=2)
        b.launch_kernel("relu", cpu_ts=41_000, cpu_dur=2_000, gpu_ts=512_000,
                        gpu_dur=100_000, tid=2)
        b.runtime("cudaDeviceSynchronize", 60_000, 553_000)
    b.write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False)
    rt = a.t.rank(0)
    jg = build_job([rt])
    assert (jg.type == EDGE["event_wait"]).sum() == 1
    assert (jg.type == EDGE["thread"]).sum() == 1
    base = a.what_if()
    assert base["replay_error_pctg"].abs().max() == 0
    # half-time copy: the gemm, the relu behind it and the synchronize move 150 µs earlier
    pred = a.what_if("kernels:Memcpy*0.5")
    assert pred["predicted(us)"].iloc[0] == pytest.approx(1_000 - 150)


def test_findings_get_their_change_and_the_replayed_saving(tmp_path: Path) -> None:
    import pandas as pd

    from hta.analysis.whatif.findings import findings_with_changes

    slow = replace(GPU_BOUND, ranks=3, slow_rank=2, slow_factor=1.5)
    a = TraceAnalysis(trace_dir=str(simulate(slow, tmp_path)), cache=False, progress=False)
    findings = pd.DataFrame({
        "rule": ["stragglers", "fp32_gemm", "small_kernels"],
        "severity": ["high", "low", "low"],
        "ranks": [[2], [0], [0]], "steps": [[2, 3], [], []],
        "evidence": ["late.", "fp32.", "small."],
        "est_saving(us)": [100.0, 7.0, 5.0], "advice": ["", "", ""], "title": ["", "", ""],
        "subject": ["", "", ""], "section": ["", "", ""], "share_pctg": [10.0, 0.7, 0.5]})
    out = findings_with_changes(findings, a.what_if).set_index("rule")
    pred = a.what_if("no-stragglers:2")
    steps = pred[pred["step"].isin([2, 3])].groupby("step")
    # the job's step (its slowest rank) without and with the change, over the two steps
    per_step = steps["replayed(us)"].max() - steps["predicted(us)"].max()
    expected = float(per_step.sum())
    assert expected > 2 * 150  # two steps, each over 150 µs shorter
    st = out.loc["stragglers"]
    assert st["change"] == "no-stragglers:2" and st["saving_source"] == "replay"
    assert st["est_saving(us)"] == pytest.approx(expected)
    assert st["saving_per_step(us)"] == pytest.approx(expected / 2)
    replayed = float(steps["replayed(us)"].max().sum())
    assert st["saving_step_pctg"] == pytest.approx(100 * expected / replayed)
    assert st["share_pctg"] == pytest.approx(100 * expected / replayed, abs=0.01)
    assert st["saving_low(us)"] <= expected <= st["saving_high(us)"]
    assert "Replayed with no-stragglers:2" in st["evidence"]
    # no deviceProperties in these traces: dtype cannot be modelled, GPU time is kept
    assert out.loc["fp32_gemm", "change"] == ""
    assert out.loc["fp32_gemm", "saving_source"] == "gpu-time"
    assert out.loc["fp32_gemm", "est_saving(us)"] == 7.0
    assert "cannot model dtype:bf16" in out.loc["fp32_gemm", "evidence"]
    assert "GPU time, not step time" in out.loc["small_kernels", "evidence"]
    assert list(out.index) == ["stragglers", "fp32_gemm", "small_kernels"]


def test_findings_with_one_fix_are_one_saving(tmp_path: Path) -> None:
    import pandas as pd

    from hta.analysis.whatif.findings import findings_with_changes

    launch_bound = Program(ops=tuple(("relu", 20_000, 3_000) for _ in range(10)))
    a = TraceAnalysis(trace_dir=str(simulate(launch_bound, tmp_path)), cache=False,
                      progress=False)
    findings = pd.DataFrame({
        "rule": ["host_bound", "launch_bound"], "severity": ["high", "high"],
        "ranks": [[0], [0]], "steps": [[], []], "evidence": ["host.", "launch."],
        "est_saving(us)": [100.0, 50.0], "advice": ["", ""], "title": ["Host", "Launch"],
        "subject": ["", ""], "section": ["", ""], "share_pctg": [10.0, 5.0]})
    out = findings_with_changes(findings, a.what_if)
    assert out["rule"].tolist() == ["host_bound"]  # launch_bound folded in: one fix
    assert out["change"].iloc[0] == "cuda-graphs"
    assert "'Launch' (launch_bound), counted once: launch." in out["evidence"].iloc[0]
    pred = a.what_if("cuda-graphs")
    assert out["est_saving(us)"].iloc[0] == pytest.approx(
        float((pred["replayed(us)"] - pred["predicted(us)"]).sum()))


def test_step_bounds_name_the_slow_rank_and_its_saving(tmp_path: Path) -> None:
    slow = replace(GPU_BOUND, ranks=3, slow_rank=2, slow_factor=1.5)
    a = TraceAnalysis(trace_dir=str(simulate(slow, tmp_path / "a")), cache=False,
                      progress=False)
    b = TraceAnalysis(trace_dir=str(simulate(replace(GPU_BOUND, ranks=3), tmp_path / "b")),
                      cache=False, progress=False)
    bounds = a.get_step_bounds()
    assert len(bounds) == slow.steps
    assert (bounds["rank"] == 2).all()
    assert (bounds["bound_by"] == "gpu").all()
    assert bounds["top_work"].str.startswith("gpu: gemm").all()
    fixed = b.what_if().groupby("step")["job_measured(us)"].first().to_numpy()
    _close(bounds["at_median(us)"].to_numpy(), fixed)
    assert (bounds["saving_at_median(us)"] > 150).all()
    # every rank waits for rank 2's all-reduce: the path's GPU work is rank 2's
    path = a.get_job_critical_path(iteration=2)
    assert set(path.loc[path["kind"] == "gpu", "rank"]) == {2}


def test_main_thread_waits_for_the_backward_thread(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.annotation("## backward ##", 10_000, 900_000)
        # the autograd thread works while the main thread sits in backward()
        b.cpu_op("autograd::engine::evaluate_function: MmBackward0", 20_000, 880_000, tid=2)
        b.launch_kernel("gemm_bwd", cpu_ts=30_000, cpu_dur=2_000, gpu_ts=40_000,
                        gpu_dur=800_000, tid=2)
        b.runtime("cudaDeviceSynchronize", 50_000, 792_000, tid=2)
    b.write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False)
    assert a.what_if()["replay_error_pctg"].iloc[0] == 0
    pred = a.what_if("kernels:gemm_bwd*0.5")
    # the kernel ends 400 µs earlier; so do the synchronize, the autograd op, the main
    # thread's backward() and the step
    assert pred["predicted(us)"].iloc[0] == pytest.approx(1_000 - 400)
    path = a.get_job_critical_path(iteration=1)
    assert "gemm_bwd" in set(path["name"])


def _forward_then_backward_thread(tmp_path: Path) -> TraceAnalysis:
    """No ProfilerStep. The main thread runs a forward pass of five operators (a kernel
    each) from 0 to 5 ms and calls backward(); the autograd thread, holding more events
    (fifteen operators, a kernel each), runs the backward pass from 6 to 21 ms."""
    b = TraceBuilder(rank=0)
    for i in range(5):
        t = i * 1_000_000
        b.cpu_op("aten::mm", t, 900_000)
        b.launch_kernel("gemm_fwd", cpu_ts=t + 10_000, cpu_dur=10_000, gpu_ts=t + 50_000,
                        gpu_dur=100_000)
    for i in range(15):
        t = 6_000_000 + i * 1_000_000
        b.cpu_op("autograd::engine::evaluate_function: MmBackward0", t, 900_000, tid=2)
        b.launch_kernel("gemm_bwd", cpu_ts=t + 10_000, cpu_dur=10_000, gpu_ts=t + 50_000,
                        gpu_dur=100_000, tid=2)
    b.write(tmp_path / "rank-0.json")
    return TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False)


def test_the_thread_that_starts_first_hands_work_to_a_busier_one(tmp_path: Path) -> None:
    """A public ResNet training step ran its backward on the autograd thread, which held
    more events than the forward's thread; taken for the main thread, its work was replayed
    from time 0 and the replay ran 15.7 % short. The thread that starts first is the main
    one: the backward waits for the forward, and the replay matches the trace."""
    a = _forward_then_backward_thread(tmp_path)
    assert abs(a.what_if()["replay_error_pctg"].iloc[0]) < 0.5


def test_launch_queue_on_a_real_gpu_bound_trace() -> None:
    # ns_resolution_trace: GPU-bound steps, no synchronize inside them; the host is held
    # back by the full launch queue (about 1,022 items), so faster kernels shorten the steps
    logging.disable(logging.WARNING)
    try:
        a = TraceAnalysis(trace_dir=str(shared_trace("ns_resolution_trace")), cache=False,
                          progress=False)
        jg, _ = a.replay().graph()
        pred = a.what_if("kernels:.**0.5")
    finally:
        logging.disable(logging.NOTSET)
    assert 1000 <= jg.ranks[0].queue_depth <= 1100
    steady = pred[pred["step"] >= 103]
    assert (steady["predicted(us)"] < 0.8 * steady["measured(us)"]).all()


def test_cli_whatif_missing_folder(tmp_path: Path) -> None:
    from cli_runner import run_cli

    missing = tmp_path / "nope"
    done = run_cli(["whatif", str(missing)])
    assert done.returncode == 3
    assert done.stderr.strip() == f"hta: error: trace folder not found: {missing}"


def test_job_critical_path_figure(tmp_path: Path) -> None:
    slow = replace(GPU_BOUND, ranks=2, slow_rank=1, slow_factor=1.5)
    a = TraceAnalysis(trace_dir=str(simulate(slow, tmp_path)), cache=False, progress=False)
    fig = a.plot_job_critical_path(iteration=2, visualize=False)
    path = a.get_job_critical_path(iteration=2)
    assert sum(sum(t.x) for t in fig.data) == pytest.approx(path["dur(us)"].sum())
    assert {t.name for t in fig.data} == set(path["kind"])
    assert {y for t in fig.data for y in t.y} == {f"rank {r}" for r in set(path["rank"])}


def test_no_stragglers_never_slows_the_job() -> None:
    """On the bundled 4-rank sample, host-bound ranks whose GPU work is shorter than the
    median sit on the critical path: setting every rank to the median (the former model)
    predicted the job 15% slower; capping at the median never lengthens it."""

    a = TraceAnalysis(trace_dir=str(SAMPLE_TRACES / "synthetic_4rank"), cache=False,
                      progress=False)
    pred = a.what_if("no-stragglers")
    job = pred.groupby("step").agg(replayed=("replayed(us)", "max"),
                                   predicted=("job_predicted(us)", "first"))
    assert job["predicted"].sum() <= job["replayed"].sum() + 0.5


def test_cli_whatif_says_why_nothing_changes(tmp_path: Path) -> None:
    from cli_runner import run_cli

    folder = simulate(GPU_BOUND, tmp_path / "job")
    bad = run_cli(["whatif", str(folder), "kernels:nomatch*0.5", "--no-cache", "-q"])
    assert bad.returncode == 2 and "no name in these traces matches 'nomatch'" in bad.stderr
    moved = run_cli(["whatif", str(folder), "kernels:gemm*0.5", "--no-cache", "-q"])
    assert "All steps together:" in moved.stdout
    host = simulate(HOST_BOUND, tmp_path / "host")
    idle = run_cli(["whatif", str(host), "kernels:gemm*0.5", "--no-cache", "-q"])
    assert "No step changes: what kernels:gemm*0.5 changes is on no step's critical path" \
        in idle.stdout
    b = TraceBuilder()
    b.annotation("ProfilerStep#1", 0, 10_000)
    b.cpu_op("aten::mm", 1_000, 5_000)
    b.write(tmp_path / "cpu" / "rank-0.json")
    cpu = run_cli(["whatif", str(tmp_path / "cpu"), "kernels:mm*0.5", "--no-cache", "-q"])
    assert cpu.returncode == 2, cpu.stderr
    assert "these traces hold no GPU work (a CPU-only profile)" in cpu.stderr


def test_step_start_nodes_are_those_of_the_last_row_of_each_step_number() -> None:
    from hta.analysis.whatif.changes import _step_start_nodes

    rng = np.random.default_rng(1)
    for _ in range(500):
        n = int(rng.integers(0, 6))
        numbers, starts = rng.integers(0, 5, n), rng.integers(0, 100, n)
        it = rng.integers(-1, 6, int(rng.integers(0, 20)))
        last = dict(zip(numbers.tolist(), starts.tolist(), strict=True))  # a later row wins
        expected = [last.get(k, -1) for k in it.tolist()]
        steps = pd.DataFrame({"step": numbers, "start_node": starts})
        assert _step_start_nodes(steps, it).tolist() == expected


def test_edges_into_nodes_are_those_of_their_ranks_whose_destination_is_among_them() -> None:

    from hta.analysis.whatif.graph import EDGE

    a = TraceAnalysis(trace_dir=str(SAMPLE_TRACES / "synthetic_4rank"), cache=False,
                      progress=False)
    jg, _ = a.replay().graph()
    rng = np.random.default_rng(2)
    for edge_type in ("cpu", "sync", "launch"):
        for i in range(len(jg.ranks)):
            nodes = jg.nodes_of(i)
            assert nodes.tolist() == np.flatnonzero(jg.node_pos == i).tolist()
            into = jg.edges_into(i, edge_type)  # by the definition, over every edge
            expected_into = np.flatnonzero((jg.type == EDGE[edge_type])
                                           & (jg.node_pos[jg.dst] == i))
            assert into.tolist() == expected_into.tolist()
            for k in (0, 1, 5, nodes.size // 3):
                picked = rng.choice(nodes, size=k, replace=True)  # repeats count once
                mask = np.zeros(jg.num_nodes, dtype=bool)
                mask[picked] = True
                expected = into[mask[jg.dst[into]]]
                got = jg.edges_into_nodes(picked, edge_type)
                assert got.tolist() == expected.tolist()
                assert (jg.type[got] == EDGE[edge_type]).all()
                both = jg.edges_into_nodes(picked, edge_type, "gpu")
                gpu = np.flatnonzero(jg.type == EDGE["gpu"])
                assert both.tolist() == np.union1d(expected, gpu[mask[jg.dst[gpu]]]).tolist()


def test_cpu_edges_within_spans_are_those_a_span_of_their_thread_holds() -> None:
    """By the definition, span by span: a ``cpu`` edge of the rank is inside when one span
    of its destination's thread starts at or before its source and ends at or after its
    destination; nested, overlapping and repeated spans included."""

    from hta.analysis.whatif.changes import cpu_edges_within
    from hta.model.rules import KIND_CODE
    from hta.model.trace import thread_keys

    a = TraceAnalysis(trace_dir=str(SAMPLE_TRACES / "synthetic_4rank"), cache=False,
                      progress=False)
    jg, _ = a.replay().graph()
    rng = np.random.default_rng(5)
    for i, g in enumerate(jg.ranks):
        rt = g.trace
        thread = thread_keys(rt.column("pid"), rt.column("tid"))
        edges = jg.edges_into(i, "cpu")
        src, dst = jg.src[edges], jg.dst[edges]
        edge_thread = thread[jg.node_row[dst]]
        cpu = np.flatnonzero(rt.kind_codes() == KIND_CODE["cpu_op"])
        for k in (0, 1, 3, 40, cpu.size):
            rows = rng.choice(cpu, size=min(k, cpu.size), replace=True)
            expected = np.zeros(edges.size, dtype=bool)
            for r in rows.tolist():
                s, e = g.start_node[r], g.end_node[r]
                if s < 0 or e < 0:
                    continue
                lo, hi = jg.global_node(i, np.asarray([s, e]))
                expected |= (edge_thread == thread[r]) & (src >= lo) & (dst <= hi)
            got = cpu_edges_within(jg, i, rows)
            assert got.tolist() == edges[expected].tolist()
            assert k < 40 or expected.any()


def test_edges_within_a_union_of_spans_by_construction() -> None:
    """Overlapping spans merge, a span ending before its start holds nothing."""
    from hta.analysis.whatif.changes import _within_union

    dst = np.asarray([1, 2, 3, 5, 8, 9, 12])
    assert _within_union(dst, np.asarray([2, 4, 10]), np.asarray([3, 1, 12])).tolist() == [
        1, 2, 6]
    assert _within_union(dst, np.asarray([2, 3]), np.asarray([5, 9])).tolist() == [
        1, 2, 3, 4, 5]


def test_replays_that_keep_the_edges_reuse_the_graphs_offsets(tmp_path: Path) -> None:
    # the job graph's edge offsets are made once; a replay whose change keeps every edge
    # (a kernel scaled) schedules with them, as a schedule made from scratch would
    from hta.analysis.whatif.changes import apply
    from hta.analysis.whatif.replay import parse_changes, replay

    a = TraceAnalysis(trace_dir=str(simulate(GPU_BOUND, tmp_path)), cache=False,
                      progress=False)
    jg, _ = a.replay().graph()
    assert jg.edge_offsets() is jg.edge_offsets()
    edits = apply(jg, parse_changes("kernels:gemm*0.5"))
    assert edits.keep.all() and not edits.add_src
    src, dst, delay = edits.edges(jg)
    fresh = schedule(jg.num_nodes, src.copy(), dst.copy(), np.maximum(delay, 0), jg.base)
    assert replay(jg, edits).t.tolist() == fresh.t.tolist()
    assert replay(jg).t.tolist() == schedule(jg.num_nodes, jg.src, jg.dst, jg.delay,
                                             jg.base).t.tolist()


def test_rank_graph_steps_are_the_step_events_nodes(tmp_path: Path) -> None:
    # each step's nodes are those of its ProfilerStep event, not of an operator starting
    # with it (found for all steps at once)
    from hta.analysis.whatif.graph import rank_graph

    b = TraceBuilder()
    for i, (t0, dur) in enumerate([(0, 1_000), (1_000, 1_500)]):
        b.cpu_op("aten::early", t0, 400)  # starts with the step, ends before it
        b.annotation(f"ProfilerStep#{i + 1}", t0, dur)
        b.launch_kernel(f"k{i}", cpu_ts=t0 + 100, cpu_dur=50, gpu_ts=t0 + 200, gpu_dur=300)
    b.write(tmp_path / "rank-0.json")
    rt = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False).t.rank(0)
    g = rank_graph(rt)
    names = [rt.symbols[i] for i in rt.column("name")[g.node_event[g.steps["start_node"]]]]
    assert names == ["ProfilerStep#1", "ProfilerStep#2"]
    ends = g.node_event[g.steps["end_node"]]
    assert (g.node_event[g.steps["start_node"]] == ends).all()
    assert not g.node_is_start[g.steps["end_node"]].any()


def test_job_graph_edge_order_is_a_stable_sort_by_destination_then_source() -> None:
    # one sort by destination, then the groups whose sources came out of order sorted
    # again: the order of a stable sort of the (dst, src) key, duplicates in position
    # order; None where the edges are sorted already. The sources and destinations come
    # in that order, whether the destinations are given up to the sort or not, and on
    # edge lists long enough for the packed sort (PACKED_SORT_MIN) too.
    from hta.analysis.whatif.graph import _by_dst_then_src
    from hta.model.arrays import PACKED_SORT_MIN

    rng = np.random.default_rng(5)
    for trial in range(66):
        n = int(rng.integers(1, 400))
        m = int(rng.integers(0, 3_000))
        if trial >= 60:  # the packed sort's sizes, many nodes
            n, m = int(rng.integers(1_000, 200_000)), PACKED_SORT_MIN + int(
                rng.integers(0, 50_000))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        if trial % 3 == 0:  # a rank's sorted edges, then a tail of others (barrier edges)
            o = np.lexsort((src, dst))
            src = np.r_[src[o], rng.integers(0, n, m // 10)]
            dst = np.r_[dst[o], rng.integers(0, n, m // 10)]
        if trial % 4 == 0:  # repeated edges
            src, dst = np.r_[src, src[:7]], np.r_[dst, dst[:7]]
        key = dst * n + src
        expected = None if key.size < 2 or (key[1:] > key[:-1]).all() else \
            np.argsort(key, kind="stable").tolist()
        for consume in (False, True):
            given = dst.copy()
            got, sorted_src, sorted_dst = _by_dst_then_src(src, given, consume=consume)
            assert (None if got is None else got.tolist()) == expected
            in_order = slice(None) if got is None else got
            assert sorted_dst.tolist() == dst[in_order].tolist()
            assert sorted_src.tolist() == src[in_order].tolist()
            if not consume:
                assert (given == dst).all()
    assert _by_dst_then_src(np.array([0, 1, 0]), np.array([1, 2, 3]))[0] is None
    assert _by_dst_then_src(np.array([1, 1]), np.array([2, 2]))[0].tolist() == [0, 1]


def test_binding_medians_are_each_type_s_median_of_its_edges() -> None:
    """The floors of a rank graph: per edge type ``int(np.median(...))`` of its binding
    edges' measured delays (0 for a type without any), grouped by type once, on
    random delays up to 10^14 ns, odd and even counts."""
    from hta.analysis.whatif.graph import JOB_EDGE_TYPES, binding_medians

    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(0, 40))
        measured = rng.integers(-5, 10 ** int(rng.integers(1, 15)), n)
        typ = rng.integers(0, len(JOB_EDGE_TYPES), n).astype(np.int8)
        want = [int(np.median(measured[typ == code])) if (typ == code).any() else 0
                for code in range(len(JOB_EDGE_TYPES))]
        assert binding_medians(measured, typ).tolist() == want


def test_the_job_graph_keeps_node_positions_and_rows_in_32_bits_where_they_fit() -> None:
    """``node_pos`` and ``node_row`` (one value per node of the job) are int32 below 2^31
    ranks or event rows, int64 beyond; their values as the int64 ones."""
    from hta.analysis.whatif.graph import index_type

    assert index_type(0) is np.int32 and index_type(2**31 - 2) is np.int32
    assert index_type(2**31 - 1) is np.int64 and index_type(2**40) is np.int64
    folder = SAMPLE_TRACES / "synthetic_4rank"
    if not folder.is_dir():
        pytest.skip(f"{folder} is not bundled")
    jg, _ = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False).replay().graph()
    assert jg.node_pos.dtype == np.int32 and jg.node_row.dtype == np.int32
    for i, g in enumerate(jg.ranks):
        nodes = jg.nodes_of(i)
        assert (jg.node_pos[nodes] == i).all()
        assert jg.node_row[nodes].tolist() == g.node_event.tolist()
