"""Critical path on hand-built traces whose path and attribution are known by construction.

Every case lists its events (ns) and derives the path: each step is
(edge type, attributed event, weight ns); weights are ``ts(v) - R(v)`` with ``R(v)`` the
latest predecessor of ``v`` (see ``hta/analysis/critical_path/graph.py``).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from kineto_builder import TraceBuilder

from hta.analysis.critical_path import (
    BOUND_TYPES,
    critical_path_analysis,
    critical_path_summary,
)
from hta.trace_analysis import TraceAnalysis

GEMM = "ampere_sgemm_128x64_nn"
TRITON = "triton_poi_fused_add_0"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
STEP = "ProfilerStep#1"


def load(tmp_path, b: TraceBuilder) -> TraceAnalysis:
    b.write(tmp_path / "rank-0.json")
    return TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)


def sync_record(b: TraceBuilder, name: str, ts: int, dur: int, corr: int, stream: int = -1,
                **args) -> None:
    """A ``cuda_sync`` record on the GPU timeline (``Context Sync``, ``Stream Sync`` ...)."""
    b.gpu(name, "cuda_sync", ts, dur, stream=stream, correlation=corr, **args)


def steps(df) -> list[tuple[str, str, int]]:
    return [(str(t), str(n), int(d)) for t, n, d in
            zip(df["type"], df["name"], df["duration(ns)"])]


def bounds(df) -> dict[str, int]:
    b, _ = critical_path_summary(df)
    return dict(zip(b["bound_by"], b["duration(ns)"].astype(int)))


def zero_bounds(**kw: int) -> dict[str, int]:
    out = dict.fromkeys(BOUND_TYPES, 0)
    out.update(kw)
    return out


# --------------------------------------------------------------------------------------
# CPU bound: the GPU is starved


def cpu_bound_trace() -> TraceBuilder:
    """Three 2.9 µs operators; two launch 200 ns kernels the GPU finishes at once.

    step [0, 10_000]; a [100, 3_000] launches K1 (call [200, 400], kernel [500, 700]);
    b [3_100, 6_000] launches K2 (call [3_200, 3_400], kernel [3_500, 3_700]);
    c [6_100, 9_000]; cudaDeviceSynchronize [9_100, 9_500] (no record: device scope by name).
    The GPU ends at 3_700 and never holds anyone up: the path is the thread, 10_000 ns.
    """
    b = TraceBuilder()
    b.annotation(STEP, 0, 10_000)
    b.cpu_op("aten::a", 100, 2_900)
    b.launch_kernel(GEMM, cpu_ts=200, cpu_dur=200, gpu_ts=500, gpu_dur=200)
    b.cpu_op("aten::b", 3_100, 2_900)
    b.launch_kernel(GEMM, cpu_ts=3_200, cpu_dur=200, gpu_ts=3_500, gpu_dur=200)
    b.cpu_op("aten::c", 6_100, 2_900)
    b.runtime("cudaDeviceSynchronize", 9_100, 400)
    return b


def test_cpu_bound_path_is_the_thread(tmp_path):
    a = load(tmp_path, cpu_bound_trace())
    g, df = a.critical_path_analysis(0)
    assert steps(df) == [
        ("cpu", STEP, 100), ("cpu", "aten::a", 100), ("cpu", "cudaLaunchKernel", 200),
        ("cpu", "aten::a", 2_600), ("cpu", STEP, 100), ("cpu", "aten::b", 100),
        ("cpu", "cudaLaunchKernel", 200), ("cpu", "aten::b", 2_600), ("cpu", STEP, 100),
        ("cpu", "aten::c", 2_900), ("cpu", STEP, 100), ("cpu", "cudaDeviceSynchronize", 400),
        ("cpu", STEP, 500),
    ]
    assert g.path_length_ns == g.span_ns == 10_000
    assert bounds(df) == zero_bounds(cpu_bound=10_000)
    _, events = critical_path_summary(df)
    per_event = dict(zip(events["name"], events["duration(ns)"]))
    assert per_event == {"aten::c": 2_900, "aten::a": 2_700, "aten::b": 2_700, STEP: 900,
                         "cudaLaunchKernel": 400, "cudaDeviceSynchronize": 400}
    # the device synchronize still waits for K2, through a sync edge off the path
    edges = g.edges_frame()
    assert (edges["type"] == "sync").sum() == 1


# --------------------------------------------------------------------------------------
# GPU bound: long kernels, a communication kernel, CUDA / HIP launch calls


@pytest.mark.parametrize("launcher,sync", [
    ("cudaLaunchKernel", "cudaDeviceSynchronize"),
    ("cudaLaunchKernelExC", "cudaDeviceSynchronize"),
    ("hipLaunchKernel", "hipDeviceSynchronize"),
    ("hipExtModuleLaunchKernel", "hipDeviceSynchronize"),
])
def test_gpu_bound_path_runs_through_the_kernels(tmp_path, launcher, sync):
    """step [0, 10_600]; aten::mm [100, 1_000] launches GEMM (call [200, 300], kernel
    [400, 5_400]) and NCCL (call [500, 600], kernel [5_410, 10_410]) on stream 7; the
    synchronize [1_100, 10_500] has no record.

    Path: step start -> mm start (100, step) -> GEMM call start (100, mm) -> GEMM start
    (launch 200) -> GEMM end (5_000) -> NCCL start (stream gap 10: its launch at 500 is
    slack) -> NCCL end (5_000) -> synchronize end (90) -> step end (100) = 10_600.
    """
    b = TraceBuilder()
    b.annotation(STEP, 0, 10_600)
    b.cpu_op("aten::mm", 100, 900)
    b.launch_kernel(GEMM, cpu_ts=200, cpu_dur=100, gpu_ts=400, gpu_dur=5_000,
                    launcher=launcher)
    b.launch_kernel(NCCL, cpu_ts=500, cpu_dur=100, gpu_ts=5_410, gpu_dur=5_000,
                    launcher=launcher)
    b.runtime(sync, 1_100, 9_400)
    g, df = critical_path_analysis(load(tmp_path, b).t.rank(0))
    assert steps(df) == [
        ("cpu", STEP, 100), ("cpu", "aten::mm", 100), ("launch", GEMM, 200),
        ("gpu", GEMM, 5_000), ("stream", NCCL, 10), ("gpu", NCCL, 5_000), ("sync", sync, 90),
        ("cpu", STEP, 100),
    ]
    assert bounds(df) == zero_bounds(cpu_bound=390, gpu_compute_bound=5_000,
                                     gpu_communication_bound=5_000, launch_overhead=200,
                                     kernel_kernel_overhead=10)
    assert g.path_length_ns == g.span_ns == 10_600
    assert not g.dropped


# --------------------------------------------------------------------------------------
# a cross-stream event wait


def event_wait_trace(with_record: bool = True) -> TraceBuilder:
    """GEMM on stream 7 [300, 8_300] (call [100, 200]); cudaEventRecord [300, 350]
    (correlation 9001); cudaStreamWaitEvent [400, 450] makes stream 20 wait for it
    (record on stream 20, wait_on_stream 7, event 9001); triton on stream 20
    [8_310, 9_310] (call [500, 600]); cudaDeviceSynchronize [700, 9_400] with a
    Context Sync record; step [0, 9_500].

    Path: step start -> GEMM call (100, step) -> GEMM start (launch 200) -> GEMM end
    (8_000) -> triton start (event_wait 10) -> triton end (1_000) -> sync end (90) ->
    step end (100) = 9_500.
    """
    b = TraceBuilder()
    b.annotation(STEP, 0, 9_500)
    b.launch_kernel(GEMM, cpu_ts=100, cpu_dur=100, gpu_ts=300, gpu_dur=8_000)
    b.runtime("cudaEventRecord", 300, 50, correlation=9001)
    b.runtime("cudaStreamWaitEvent", 400, 50, correlation=9002)
    if with_record:
        sync_record(b, "Stream Wait Event", 420, 1, 9002, stream=20, wait_on_stream=7,
                    wait_on_cuda_event_record_corr_id=9001)
    b.launch_kernel(TRITON, cpu_ts=500, cpu_dur=100, gpu_ts=8_310, gpu_dur=1_000, stream=20)
    b.runtime("cudaDeviceSynchronize", 700, 8_700, correlation=9003)
    sync_record(b, "Context Sync", 701, 8_698, 9003)
    return b


def test_cross_stream_event_wait(tmp_path):
    g, df = critical_path_analysis(load(tmp_path, event_wait_trace()).t.rank(0))
    assert steps(df) == [
        ("cpu", STEP, 100), ("launch", GEMM, 200), ("gpu", GEMM, 8_000),
        ("event_wait", TRITON, 10), ("gpu", TRITON, 1_000),
        ("sync", "cudaDeviceSynchronize", 90), ("cpu", STEP, 100),
    ]
    assert bounds(df) == zero_bounds(cpu_bound=290, gpu_compute_bound=9_000,
                                     launch_overhead=200, kernel_kernel_overhead=10)
    assert g.path_length_ns == g.span_ns == 9_500
    edges = g.edges_frame()
    # the Context Sync waits for both streams: one sync edge from each kernel
    assert sorted(edges.loc[edges["type"] == "sync", "weight(ns)"]) == [90, 90]
    assert (edges["type"] == "event_wait").sum() == 1


def test_event_wait_without_its_record_falls_back_to_the_launch(tmp_path, caplog):
    """No Stream Wait Event record: nothing says stream 20 waited, so triton's start
    depends on its launch only (7_810 ns of launch delay) and the GEMM leads to nothing:
    the path is step -> triton call (500, step) -> triton (launch 7_810, gpu 1_000) ->
    sync (90) -> step end (100) = 9_500; the unmatched cudaStreamWaitEvent is counted.
    """
    with caplog.at_level(logging.INFO, logger="hta.analysis.critical_path.graph"):
        g, df = critical_path_analysis(load(tmp_path, event_wait_trace(False)).t.rank(0))
    # one note at INFO (nothing to do), which says what the left-out synchronization means
    # for the answer
    warned = [r.getMessage() for r in caplog.records if "critical path" in r.getMessage()]
    assert len(warned) == 1
    assert all(r.levelno == logging.INFO for r in caplog.records
               if "critical path" in r.getMessage())
    assert "1 synchronizations that could not be resolved left out" in warned[0]
    assert "counts as CPU work of its own length" in warned[0]
    assert steps(df) == [
        ("cpu", STEP, 100), ("cpu", "cudaLaunchKernel", 100), ("cpu", STEP, 100),
        ("cpu", "cudaEventRecord", 50), ("cpu", STEP, 50), ("cpu", "cudaStreamWaitEvent", 50),
        ("cpu", STEP, 50), ("launch", TRITON, 7_810), ("gpu", TRITON, 1_000),
        ("sync", "cudaDeviceSynchronize", 90), ("cpu", STEP, 100),
    ]
    assert g.dropped == {"synchronizations that could not be resolved": 1}


# --------------------------------------------------------------------------------------
# synchronize: device and stream, with and without a cuda_sync record


@pytest.mark.parametrize("call,record", [
    ("cudaDeviceSynchronize", "Context Sync"),
    ("cudaDeviceSynchronize", None),
    ("cudaStreamSynchronize", "Stream Sync"),
    ("cudaStreamSynchronize", None),  # stream unknown: the thread's current stream
])
def test_synchronize_hands_the_path_back_to_the_cpu(tmp_path, call, record):
    """step [0, 6_000]; GEMM call [100, 200], kernel [250, 4_250]; the synchronize
    [300, 4_300] waits for it; aten::add [4_400, 5_400] runs after.

    Path: step start -> call (100, step) -> GEMM start (launch 150) -> GEMM end (4_000) ->
    synchronize end (50) -> add start (100, step) -> add end (1_000) -> step end (600).
    """
    b = TraceBuilder()
    b.annotation(STEP, 0, 6_000)
    b.launch_kernel(GEMM, cpu_ts=100, cpu_dur=100, gpu_ts=250, gpu_dur=4_000)
    b.runtime(call, 300, 4_000, correlation=9001)
    if record == "Context Sync":
        sync_record(b, record, 301, 3_998, 9001)
    elif record == "Stream Sync":
        sync_record(b, record, 301, 3_998, 9001, stream=7)
    b.cpu_op("aten::add", 4_400, 1_000)
    g, df = critical_path_analysis(load(tmp_path, b).t.rank(0))
    assert steps(df) == [
        ("cpu", STEP, 100), ("launch", GEMM, 150), ("gpu", GEMM, 4_000), ("sync", call, 50),
        ("cpu", STEP, 100), ("cpu", "aten::add", 1_000), ("cpu", STEP, 600),
    ]
    assert bounds(df) == zero_bounds(cpu_bound=1_850, gpu_compute_bound=4_000,
                                     launch_overhead=150)
    assert not g.dropped


def test_old_traces_write_no_stream_as_uint32(tmp_path):
    """Old writers put ``stream: 4294967295`` on Context Sync records: still a device sync."""
    b = TraceBuilder()
    b.annotation(STEP, 0, 6_000)
    b.launch_kernel(GEMM, cpu_ts=100, cpu_dur=100, gpu_ts=250, gpu_dur=4_000)
    b.runtime("cudaDeviceSynchronize", 300, 4_000, correlation=9001)
    b.gpu("Context Sync", "cuda_sync", 301, 3_998, stream=4294967295, correlation=9001)
    g, df = critical_path_analysis(load(tmp_path, b).t.rank(0))
    assert ("sync", "cudaDeviceSynchronize", 50) in steps(df)


# --------------------------------------------------------------------------------------
# a CUDA graph launch


def test_graph_launch_kernels_all_hang_off_the_launch(tmp_path):
    """cudaGraphLaunch [100, 300] enqueues three kernels under one correlation id on
    stream 7: [400, 1_400], [1_410, 2_410], [2_420, 3_420]; cudaStreamSynchronize
    [400, 3_500] (Stream Sync record); step [0, 3_600].

    Path: step start -> graph launch start (100) -> K1 start (launch 300) -> K1 (1_000) ->
    K2 (stream 10, 1_000) -> K3 (stream 10, 1_000) -> sync end (80) -> step end (100).
    """
    b = TraceBuilder()
    b.annotation(STEP, 0, 3_600)
    b.runtime("cudaGraphLaunch", 100, 200, correlation=9001)
    b.kernel(GEMM, 400, 1_000, correlation=9001, **{"graph id": 1})
    b.kernel(TRITON, 1_410, 1_000, correlation=9001, **{"graph id": 1})
    b.kernel(FILL, 2_420, 1_000, correlation=9001, **{"graph id": 1})
    b.runtime("cudaStreamSynchronize", 400, 3_100, correlation=9002)
    sync_record(b, "Stream Sync", 401, 3_098, 9002, stream=7)
    g, df = critical_path_analysis(load(tmp_path, b).t.rank(0))
    assert steps(df) == [
        ("cpu", STEP, 100), ("launch", GEMM, 300), ("gpu", GEMM, 1_000),
        ("stream", TRITON, 10), ("gpu", TRITON, 1_000), ("stream", FILL, 10),
        ("gpu", FILL, 1_000), ("sync", "cudaStreamSynchronize", 80), ("cpu", STEP, 100),
    ]
    assert bounds(df) == zero_bounds(cpu_bound=280, gpu_compute_bound=3_000,
                                     launch_overhead=300, kernel_kernel_overhead=20)
    edges = g.edges_frame()
    assert (edges["type"] == "launch").sum() == 3  # one launch edge per graph kernel


# --------------------------------------------------------------------------------------
# blocking memcpy


@pytest.mark.parametrize("direction,blocking", [
    ("DtoH (Device -> Pageable)", True),
    ("DtoH (Device -> Pinned)", False),
])
def test_blocking_memcpy(tmp_path, direction, blocking):
    """cudaMemcpyAsync [100, 900] copies [300, 800]; step [0, 1_000]. Into pageable memory
    the call returns only after the copy: step -> call start (100) -> copy start (launch
    200) -> copy end (500) -> call end (sync 100) -> step end (100). Into pinned memory
    the call does not wait: the path is the thread alone.
    """
    b = TraceBuilder()
    b.annotation(STEP, 0, 1_000)
    b.memcpy(direction, cpu_ts=100, cpu_dur=800, gpu_ts=300, gpu_dur=500)
    g, df = critical_path_analysis(load(tmp_path, b).t.rank(0))
    copy = f"Memcpy {direction}"
    if blocking:
        assert steps(df) == [
            ("cpu", STEP, 100), ("launch", copy, 200), ("gpu", copy, 500),
            ("sync", "cudaMemcpyAsync", 100), ("cpu", STEP, 100),
        ]
        assert bounds(df) == zero_bounds(cpu_bound=300, gpu_compute_bound=500,
                                         launch_overhead=200)
    else:
        assert steps(df) == [("cpu", STEP, 100), ("cpu", "cudaMemcpyAsync", 800),
                             ("cpu", STEP, 100)]


# --------------------------------------------------------------------------------------
# windows: annotation instances, work from an earlier window, the whole trace


def two_steps() -> TraceBuilder:
    """Step 1 [0, 1_000] launches GEMM [300, 5_300] (call [100, 200]); step 2
    [1_000, 2_000] launches triton [5_310, 6_310] (call [1_100, 1_200]) on the same stream
    and synchronizes [1_300, 6_400] (no record)."""
    b = TraceBuilder()
    b.annotation("ProfilerStep#1", 0, 1_000)
    b.launch_kernel(GEMM, cpu_ts=100, cpu_dur=100, gpu_ts=300, gpu_dur=5_000)
    b.annotation("ProfilerStep#2", 1_000, 1_000)
    b.launch_kernel(TRITON, cpu_ts=1_100, cpu_dur=100, gpu_ts=5_310, gpu_dur=1_000)
    b.runtime("cudaDeviceSynchronize", 1_300, 5_100)
    return b


def test_second_step_waits_on_the_first_steps_kernel(tmp_path):
    """Window = step 2. Triton's start waits for the GEMM of step 1 (outside the window):
    R = 5_300, so its launch edge weighs 10 and 4_200 ns (1_100 -> 5_300) are slack.
    Path: step 2 start -> call (100) -> triton start (launch 10) -> triton (1_000) ->
    synchronize end (90) = 1_200 of a 5_400 span (1_000 -> 6_400)."""
    a = load(tmp_path, two_steps())
    g, df = a.critical_path_analysis(0, "ProfilerStep", instance_id=1)
    assert steps(df) == [
        ("cpu", "ProfilerStep#2", 100), ("launch", TRITON, 10), ("gpu", TRITON, 1_000),
        ("sync", "cudaDeviceSynchronize", 90),
    ]
    assert (g.window_start_ns - a.t.rank(0).events["ts"].min(), g.span_ns) == (1_000, 5_400)
    assert g.path_length_ns == 1_200
    assert g.external_ready.max() - g.node_ts.min() == 4_300  # GEMM end, relative to 1_000


def test_first_step_and_both_steps(tmp_path):
    a = load(tmp_path, two_steps())
    g, df = a.critical_path_analysis(0, "ProfilerStep", instance_id=0)
    assert steps(df) == [("cpu", "ProfilerStep#1", 100), ("launch", GEMM, 200),
                         ("gpu", GEMM, 5_000)]
    g, df = a.critical_path_analysis(0, "ProfilerStep", instance_id=(0, 1))
    assert steps(df) == [
        ("cpu", "ProfilerStep#1", 100), ("launch", GEMM, 200), ("gpu", GEMM, 5_000),
        ("stream", TRITON, 10), ("gpu", TRITON, 1_000), ("sync", "cudaDeviceSynchronize", 90),
    ]
    assert g.path_length_ns == g.span_ns == 6_400


def test_whole_trace_without_annotation(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::mm", 0, 1_000)
    b.launch_kernel(GEMM, cpu_ts=100, cpu_dur=100, gpu_ts=300, gpu_dur=2_000)
    a = load(tmp_path, b)
    with pytest.raises(ValueError, match="annotation=''"):
        a.critical_path_analysis(0)
    for annotation in ("", None):
        g, df = a.critical_path_analysis(0, annotation)
        assert steps(df) == [("cpu", "aten::mm", 100), ("launch", GEMM, 200),
                             ("gpu", GEMM, 2_000)]
        assert g.annotation == ""


def test_instance_out_of_range_says_how_many(tmp_path):
    a = load(tmp_path, two_steps())
    with pytest.raises(ValueError, match="has 2 instance"):
        a.critical_path_analysis(0, "ProfilerStep", instance_id=2)


# --------------------------------------------------------------------------------------
# data loading, HTA-compatible helpers, the facade's summary


def test_data_load_events_are_flagged(tmp_path):
    """step [0, 1_000]; a data loader annotation [100, 600] holds aten::copy_ [200, 400].
    Path = the thread; inside the loader: 100 + 200 + 200 = 500 ns."""
    b = TraceBuilder()
    b.annotation(STEP, 0, 1_000)
    b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 500)
    b.cpu_op("aten::copy_", 200, 200)
    rt = load(tmp_path, b).t.rank(0)
    _, df = critical_path_analysis(rt, data_load_events=[r"DataLoader"])
    assert list(zip(df["name"].astype(str), df["duration(ns)"], df["data_load"])) == [
        (STEP, 100, False),
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, True),
        ("aten::copy_", 200, True),
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 200, True),
        (STEP, 400, False),
    ]
    b_sum, _ = critical_path_summary(df)
    assert b_sum.set_index("bound_by").loc["cpu_bound", "data_load(us)"] == 0.5
    _, again = critical_path_analysis(rt, data_load_events="DataLoader")  # one pattern
    assert again["data_load"].tolist() == df["data_load"].tolist()
    _, df = critical_path_analysis(rt)
    assert not df["data_load"].any()


def test_hta_compatible_helpers(tmp_path):
    a = load(tmp_path, event_wait_trace())
    g, df = a.critical_path_analysis(0)
    pct = g.summary()
    assert pct["gpu_compute_bound"] == pytest.approx(100 * 9_000 / 9_500)
    assert pct.sum() == pytest.approx(100.0)
    rows = set(df["src_event"]) | set(df["dst_event"])
    assert g.critical_path_events_set == rows
    assert g.critical_path_nodes == df["src_node"].tolist() + [int(df["dst_node"].iloc[-1])]
    assert g.get_critical_path_breakdown().equals(df)


def test_summary_table_and_figure(tmp_path, monkeypatch):
    import hta.facade.critical_path as facade

    shown = []
    monkeypatch.setattr(facade, "show", shown.append)
    a = load(tmp_path, event_wait_trace())
    b_sum, events = a.get_critical_path_summary(0, top_k=3)
    assert b_sum["bound_by"].tolist() == list(BOUND_TYPES)
    assert b_sum["duration(ns)"].tolist() == [290, 9_000, 0, 200, 10]
    assert b_sum["duration_pctg"].sum() == pytest.approx(100.0)
    # ties (200 ns) in bound type order; a launch edge is attributed to the launched event
    assert events[["bound_by", "name", "duration(ns)"]].head(4).values.tolist() == [
        ["gpu_compute_bound", GEMM, 8_000], ["gpu_compute_bound", TRITON, 1_000],
        ["cpu_bound", STEP, 200], ["launch_overhead", GEMM, 200]]
    assert events["duration(ns)"].sum() == 9_500
    (fig,) = shown
    bars = fig.data[0]
    assert list(bars.y) == list(BOUND_TYPES)[::-1]
    assert list(bars.x) == [0.01, 0.2, 0.0, 9.0, 0.29]
    top = [x for trace in fig.data[1:] for x in trace.x]
    assert sorted(top) == [0.2, 1.0, 8.0]
    assert "9.500 µs of a 9.500 µs span" in fig.layout.title.text
    # reusing a graph gives the same tables without recomputing the path
    g, _ = a.critical_path_analysis(0)
    again, _ = a.get_critical_path_summary(0, critical_path_graph=g, visualize=False)
    assert again.equals(b_sum)


def test_path_frame_columns_add_up(tmp_path):
    g, df = critical_path_analysis(load(tmp_path, cpu_bound_trace()).t.rank(0))
    assert df["duration(ns)"].sum() == g.path_length_ns
    assert (df["end"] - df["ts"] == df["duration(ns)"]).all()
    assert (df["step"] == np.arange(len(df))).all()
    assert (df["src_node"].iloc[1:].to_numpy() == df["dst_node"].iloc[:-1].to_numpy()).all()
