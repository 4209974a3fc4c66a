"""The critical path graph stays a DAG whatever the trace does, and the longest path is right.

Acyclicity and path lengths are checked independently here: a plain Kahn's algorithm, and
a plain dynamic programme (or a brute-force path enumeration for small graphs).
"""

from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest
from kineto_builder import TraceBuilder

from hta.analysis.critical_path import critical_path_analysis, longest_path
from hta.trace_analysis import TraceAnalysis

GEMM = "ampere_sgemm_128x64_nn"


def load(tmp_path, b: TraceBuilder) -> TraceAnalysis:
    b.write(tmp_path / "rank-0.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)


def kahn_count(n: int, src, dst) -> int:
    """Nodes Kahn's algorithm can order; equals n exactly when the graph has no cycle."""
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src, dst):
        indeg[v] += 1
        succ[u].append(v)
    queue = deque(i for i in range(n) if indeg[i] == 0)
    seen = 0
    while queue:
        u = queue.popleft()
        seen += 1
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    return seen


def plain_dist(n: int, src, dst, w) -> list[int]:
    """dist(v) = 0 without predecessors, else w(v) + max dist(u), in a Kahn order."""
    preds: list[list[int]] = [[] for _ in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for u, v in zip(src, dst):
        preds[v].append(u)
        succ[u].append(v)
        indeg[v] += 1
    order = []
    queue = deque(i for i in range(n) if indeg[i] == 0)
    while queue:
        u = queue.popleft()
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    dist = [0] * n
    for v in order:
        if preds[v]:
            dist[v] = int(w[v]) + max(dist[u] for u in preds[v])
    return dist


def check_graph(g, df) -> None:
    """Every invariant the analysis promises, checked without its own code."""
    src, dst = g.edge_src.tolist(), g.edge_dst.tolist()
    assert kahn_count(g.num_nodes, src, dst) == g.num_nodes
    assert (g.node_ts[g.edge_src] <= g.node_ts[g.edge_dst]).all()
    assert (g.node_weight >= 0).all()
    assert g.dist.tolist() == plain_dist(g.num_nodes, src, dst, g.node_weight)
    path = g.path_nodes.tolist()
    assert g.dist[path[-1]] == g.dist.max()
    pairs = set(zip(src, dst))
    assert all((u, v) in pairs for u, v in zip(path, path[1:]))
    assert g.path_length_ns == int(g.node_weight[path[1:]].sum()) == int(df["duration(ns)"].sum())
    assert 0 <= g.path_length_ns <= g.span_ns
    assert df["bound_by"].notna().all()


# --------------------------------------------------------------------------------------
# the longest path itself


def brute_force(n: int, edges: list[tuple[int, int]], w: list[int]) -> list[int]:
    preds: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        preds[v].append(u)

    def best(v: int) -> int:  # longest path ending at v, by enumerating every path
        return max((best(u) + w[v] for u in preds[v]), default=0)

    return [best(v) for v in range(n)]


@pytest.mark.parametrize("seed", range(40))
def test_longest_path_matches_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    edges = sorted({(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.4},
                   key=lambda e: (e[1], e[0]))
    w = [rng.randint(0, 5) for _ in range(n)]
    src = np.asarray([u for u, _ in edges], dtype=np.int64)
    dst = np.asarray([v for _, v in edges], dtype=np.int64)
    result = longest_path(n, src, dst, np.asarray(w, dtype=np.int64))
    assert result.dist.tolist() == brute_force(n, edges, w)
    path = result.path.tolist()
    assert result.dist[path[-1]] == max(result.dist)
    assert all((u, v) in set(edges) for u, v in zip(path, path[1:]))
    assert sum(w[v] for v in path[1:]) == max(result.dist)


def test_longest_path_prefers_the_latest_predecessor_on_ties():
    # 0 -> 2, 1 -> 2, 2 -> 3 with zero weights: node 2 waited for node 1 (the later one)
    r = longest_path(4, np.array([0, 1, 2]), np.array([2, 2, 3]), np.zeros(4, dtype=np.int64))
    assert r.pred.tolist() == [-1, -1, 1, 2]
    assert r.path.tolist() == [1, 2, 3]


def test_longest_path_refuses_a_non_topological_numbering():
    with pytest.raises(ValueError, match="topological"):
        longest_path(3, np.array([2]), np.array([1]), np.zeros(3, dtype=np.int64))


def test_longest_path_of_a_long_chain_is_exact():
    n = 100_001
    src = np.arange(n - 1)
    dst = np.arange(1, n)
    w = np.arange(n) % 7
    r = longest_path(n, src, dst, w)
    assert r.dist[-1] == w[1:].sum()
    assert r.path.size == n


# --------------------------------------------------------------------------------------
# traces that would break a naive graph


def anomalies() -> TraceBuilder:
    """Every kind of disorder real traces show, each once.

    * aten::a [100, 1_000] and aten::b [500, 1_500] overlap without nesting;
    * a kernel [1_900, 2_400] starts before its launch call [2_000, 2_100] (clock skew):
      its launch edge would go back in time;
    * kernels [3_000, 3_600] and [3_500, 4_000] overlap on stream 7 (programmatic
      dependent launch): a start -> start edge instead of the stream edge, not dropped;
    * a device synchronize [4_100, 4_200] (Context Sync record) ends before the kernel
      [4_150, 5_000] launched at 4_050 it should wait for;
    * a zero-duration launch at 5_990, its zero-duration kernel at 6_000 and a
      zero-duration synchronize at 6_000 (record): the sync edge between equal times
      runs against the tie order and is dropped;
    * a Stream Wait Event names an event record (777777) that is not in the trace.
    """
    b = TraceBuilder()
    b.annotation("ProfilerStep#1", 0, 7_000)
    b.cpu_op("aten::a", 100, 900)
    b.cpu_op("aten::b", 500, 1_000)
    b.launch_kernel(GEMM, cpu_ts=2_000, cpu_dur=100, gpu_ts=1_900, gpu_dur=500)
    b.launch_kernel(GEMM, cpu_ts=2_800, cpu_dur=100, gpu_ts=3_000, gpu_dur=600)
    b.launch_kernel(GEMM, cpu_ts=2_900, cpu_dur=50, gpu_ts=3_500, gpu_dur=500)
    b.launch_kernel(GEMM, cpu_ts=4_050, cpu_dur=40, gpu_ts=4_150, gpu_dur=850)
    b.runtime("cudaDeviceSynchronize", 4_100, 100, correlation=9001)
    b.gpu("Context Sync", "cuda_sync", 4_101, 98, stream=-1, correlation=9001)
    b.launch_kernel(GEMM, cpu_ts=5_990, cpu_dur=0, gpu_ts=6_000, gpu_dur=0)
    b.runtime("cudaDeviceSynchronize", 6_000, 0, correlation=9002)
    b.gpu("Context Sync", "cuda_sync", 6_000, 0, stream=-1, correlation=9002)
    b.runtime("cudaStreamWaitEvent", 6_500, 50, correlation=9003)
    b.gpu("Stream Wait Event", "cuda_sync", 6_510, 1, stream=20, correlation=9003,
          wait_on_stream=7, wait_on_cuda_event_record_corr_id=777777)
    b.launch_kernel(GEMM, cpu_ts=6_600, cpu_dur=50, gpu_ts=6_700, gpu_dur=100, stream=20)
    return b


def test_anomalies_are_dropped_and_counted(tmp_path):
    g, df = critical_path_analysis(load(tmp_path, anomalies()).t.rank(0))
    check_graph(g, df)
    assert g.dropped == {
        "edges going backwards in time": 1,
        "synchronizations ending before the GPU work they wait for": 1,
        "edges between equal times that would close a cycle": 1,
        "synchronizations that could not be resolved": 1,
    }


def test_the_order_of_events_in_the_file_does_not_matter(tmp_path):
    ordered = anomalies()
    shuffled = anomalies()
    random.Random(7).shuffle(shuffled.events)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, df1 = critical_path_analysis(load(tmp_path / "a", ordered).t.rank(0))
    g2, df2 = critical_path_analysis(load(tmp_path / "b", shuffled).t.rank(0))
    check_graph(g2, df2)
    cols = ["type", "name", "duration(ns)", "bound_by"]
    assert df1[cols].astype(str).values.tolist() == df2[cols].astype(str).values.tolist()


def random_trace(seed: int) -> TraceBuilder:
    """Random operators (nested or overlapping), launches whose kernels may start before
    them or overlap, synchronizes with and without records, equal and zero times."""
    rng = random.Random(seed)
    b = TraceBuilder()
    q = 100  # quantised times make ties frequent
    b.annotation("ProfilerStep#1", 0, 200 * q)
    corr = 10_000
    for tid in (1000, 1001)[: rng.randint(1, 2)]:
        for _ in range(rng.randint(1, 6)):
            ts = rng.randint(0, 150) * q
            b.cpu_op(f"aten::op{rng.randint(0, 3)}", ts, rng.randint(0, 40) * q, tid=tid)
        for _ in range(rng.randint(0, 8)):
            ts = rng.randint(0, 180) * q
            b.launch_kernel(GEMM, cpu_ts=ts, cpu_dur=rng.randint(0, 3) * q,
                            gpu_ts=ts + rng.randint(-2, 30) * q, gpu_dur=rng.randint(0, 20) * q,
                            stream=rng.choice([7, 20]), tid=tid)
        for _ in range(rng.randint(0, 3)):
            ts = rng.randint(0, 190) * q
            dur = rng.randint(0, 10) * q
            corr += 1
            kind = rng.choice(["device", "stream", "wait", "bare"])
            if kind == "device":
                b.runtime("cudaDeviceSynchronize", ts, dur, correlation=corr, tid=tid)
                b.gpu("Context Sync", "cuda_sync", ts, dur, stream=-1, correlation=corr)
            elif kind == "stream":
                b.runtime("cudaStreamSynchronize", ts, dur, correlation=corr, tid=tid)
                b.gpu("Stream Sync", "cuda_sync", ts, dur, stream=7, correlation=corr)
            elif kind == "wait":
                b.runtime("cudaEventRecord", ts, q, correlation=corr, tid=tid)
                b.runtime("cudaStreamWaitEvent", ts + q, q, correlation=corr + 1, tid=tid)
                b.gpu("Stream Wait Event", "cuda_sync", ts + q, 0, stream=20,
                      correlation=corr + 1, wait_on_stream=7,
                      wait_on_cuda_event_record_corr_id=corr)
                corr += 1
            else:
                b.runtime("cudaDeviceSynchronize", ts, dur, tid=tid)
    return b


@pytest.mark.parametrize("seed", range(25))
def test_random_traces_always_give_a_dag(tmp_path, seed):
    rt = load(tmp_path, random_trace(seed)).t.rank(0)
    for annotation in ("", "ProfilerStep"):
        g, df = critical_path_analysis(rt, annotation)
        check_graph(g, df)


@pytest.mark.parametrize("seed,n", [(s, 400) for s in range(6)] + [(6, 50_000)])
def test_node_numbering_is_one_sort_by_every_key(seed: int, n: int) -> None:
    """:meth:`_Nodes.of` sorts by time, then only the runs of equal times by the other
    keys: the same numbering as one sort of all nodes by every key (the module
    docstring's total order), on events whose times collide often (zero durations,
    back-to-back kernels, nested calls sharing a start)."""
    from hta.analysis.critical_path.events import Cols
    from hta.analysis.critical_path.graph import _Nodes

    rng = np.random.default_rng(seed)
    ts = rng.integers(0, n // 7, n)  # (50,000 events: the packed sort of the times)
    dur = np.where(rng.random(n) < 0.2, 0, rng.integers(0, 8, n))
    z = np.zeros(n, dtype=np.int64)
    c = Cols(ts=ts, end=ts + dur, dur=dur, pid=z, tid=z, stream=z - 1, corr=z, ic=z - 1,
             parent=z - 1, depth=rng.integers(0, 4, n), codes=z.astype(np.int16), name=z)
    rows = np.sort(rng.choice(n, size=3 * n // 4, replace=False))
    is_gpu = rng.random(rows.size) < 0.3
    got = _Nodes.of(c, rows, is_gpu)

    m = rows.size
    t_s, t_e, d = ts[rows], ts[rows] + dur[rows], dur[rows]
    depth = np.where(is_gpu, 0, c.depth[rows])
    k2 = np.r_[np.arange(m), np.arange(m)]
    is_end = np.r_[np.zeros(m, dtype=bool), np.ones(m, dtype=bool)]
    g2 = np.r_[is_gpu, is_gpu]
    group = np.where(np.r_[d == 0, d == 0], 1, np.where(is_end, 0, 2))
    lane = np.where(group == 0, ~g2, g2).astype(np.int8)
    tb1 = np.where(group == 0, -np.r_[t_s, t_s], np.where(group == 2, -np.r_[t_e, t_e], k2))
    tb2 = np.where(group == 0, -np.r_[depth, depth],
                   np.where(group == 2, np.r_[depth, depth], is_end))
    order = np.lexsort((is_end, k2, tb2, tb1, lane, group, np.r_[t_s, t_e]))
    assert got.node_event.tolist() == rows[k2[order]].tolist()
    assert got.node_is_start.tolist() == (~is_end[order]).tolist()
    assert got.node_ts.tolist() == np.r_[t_s, t_e][order].tolist()
    position = np.empty(2 * m, dtype=np.int64)
    position[order] = np.arange(2 * m)
    assert got.start_node.tolist() == position[:m].tolist()
    assert got.end_node.tolist() == position[m:].tolist()
    assert got.cpu_nodes.tolist() == np.flatnonzero(~is_gpu[k2[order]]).tolist()
