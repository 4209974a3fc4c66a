"""Findings rules host_sync, data_loading and launch_bound: savings known by construction,
clean twins, and invariants on the real traces."""

from __future__ import annotations

import re

import findings_cases as cases
import numpy as np
import pytest
from conftest import SAMPLE_TRACES, shared_trace

from hta.analysis.findings import analysis_window, find, host, launch_bound
from hta.analysis.findings.engine import rank_findings
from hta.analysis.findings.rule_tools import DATA_ANNOTATION, DATA_LOADER, fmt_steps
from hta.analysis.findings.sync import BLOCKING_COPY, STREAM_WAIT
from hta.analysis.intervals import Cover
from hta.analysis.perf.calls import gpu_rows
from hta.job.load import load_trace
from hta.model.rules import GPU_WORK_KINDS
from hta.model.selection import Selection

RULES = host.RULES + launch_bound.RULES


def _findings(trace, rule, **kw):
    out = find(trace, rules=RULES, **kw)
    return out[out["rule"] == rule].reset_index(drop=True)


def _saving_ns(row) -> float:
    return row["est_saving(us)"] * 1e3


# -- host_sync ---------------------------------------------------------------------------
@pytest.mark.parametrize("sync", ["cudaStreamSynchronize", "cudaDeviceSynchronize",
                                  "cudaEventSynchronize", "cudaMemcpy", "hipMemcpyWithStream"])
def test_host_sync_saving_matches_construction(tmp_path, sync):
    trace, expected = cases.host_sync(tmp_path, sync=sync)
    out = _findings(trace, "host_sync")
    assert len(out) == 1
    row = out.iloc[0]
    assert _saving_ns(row) == pytest.approx(expected, rel=0.05)
    assert row["steps"] == [1, 2, 3, 4]
    assert "idle 20.0 µs (5.0 µs a step) in steps 1-4" in row["evidence"]
    assert "100% from aten::item under forward: 4 time(s) (1 a step)" in row["evidence"]
    assert f"in {sync} ×4" in row["evidence"]


def test_host_sync_absent_without_the_sync(tmp_path):
    trace, expected = cases.host_sync(tmp_path, with_sync=False)
    assert expected == 0
    assert _findings(trace, "host_sync", min_share=0.0).empty
    assert find(trace, rules=RULES, min_share=0.0).empty


def test_host_sync_saving_capped_by_the_time_blocked(tmp_path):
    trace, expected = cases.idle_gpu_sync(tmp_path)
    row = _findings(trace, "host_sync", min_share=0.0).iloc[0]
    assert _saving_ns(row) == pytest.approx(expected, rel=0.05)


def test_host_sync_iterations_and_window(tmp_path):
    trace, expected = cases.host_sync(tmp_path)
    row = _findings(trace, "host_sync", selection=Selection.of(iterations=[2, 3])).iloc[0]
    assert row["steps"] == [2, 3]
    assert _saving_ns(row) == pytest.approx(expected / 2, rel=0.05)


def test_host_sync_ops_stand_for_missing_runtime_calls(tmp_path):
    """Without runtime calls, a .item() operator is the blocking span."""
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0)
    for k in range(1, 4):  # the host shows nothing for 180 µs between the operators
        t = (k - 1) * 200_000
        with b.step(k, ts=t, dur=199_000):
            b.kernel("sgemm", ts=t + 1_000, dur=20_000)
            b.cpu_op("aten::_local_scalar_dense", ts=t + 2_000, dur=20_000)  # ends at 22 µs
            b.kernel("sgemm", ts=t + 25_000, dur=20_000)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    row = _findings(trace, "host_sync").iloc[0]
    assert "from aten::_local_scalar_dense: 3 time(s)" in row["evidence"]
    assert "in aten::_local_scalar_dense ×3" in row["evidence"]
    assert _saving_ns(row) == pytest.approx(3 * 4_000, rel=0.05)


# -- data_loading ------------------------------------------------------------------------
def test_data_loading_saving_matches_construction(tmp_path):
    trace, expected = cases.data_loading(tmp_path)
    out = _findings(trace, "data_loading")
    assert len(out) == 1
    assert _saving_ns(out.iloc[0]) == pytest.approx(expected, rel=0.05)
    assert out.iloc[0]["steps"] == [1, 2, 3, 4]
    assert cases.DATA_LOADER in out.iloc[0]["evidence"]


def test_data_loading_absent_when_the_gpu_is_busy(tmp_path):
    trace, expected = cases.data_loading(tmp_path, stall=False)
    assert expected == 0
    assert find(trace, rules=RULES, min_share=0.0).empty


def test_data_loading_names():
    pattern, label = DATA_LOADER, DATA_ANNOTATION
    assert pattern.search("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")
    assert pattern.search("torch/utils/data/dataloader.py(631): __next__")
    assert not pattern.search("aten::copy_")
    assert all(label.search(n) for n in ("data", "Data_Loading", "dataloader", "data load"))
    assert not label.search("metadata")


# -- launch_bound ------------------------------------------------------------------------
def test_launch_bound_saving_matches_construction(tmp_path):
    trace, expected = cases.launch_bound(tmp_path)
    out = _findings(trace, "launch_bound")
    assert len(out) == 1
    row = out.iloc[0]
    assert _saving_ns(row) == pytest.approx(expected, rel=0.05)
    assert row["steps"] == [1, 2, 3, 4]
    assert "median 2.0 µs on the GPU against 6.0 µs for their launch calls" in row["evidence"]


def test_launch_bound_evidence_names_kernels_with_a_time(tmp_path):
    """The evidence names the kernels after the gaps and the longest gap by kernel, step and
    time (before: only counts and medians, no event a reader could find)."""
    trace, _ = cases.launch_bound(tmp_path)
    evidence = _findings(trace, "launch_bound").iloc[0]["evidence"]
    assert "Kernels after the most gap time: elementwise_" in evidence
    assert re.search(r"the longest gap, 4\.0 µs, before elementwise_\d in step [1-4] at "
                     r"[\d.]+ (µs|ms) into the window", evidence)


def test_no_profiler_step_is_not_step_0(tmp_path):
    """Without ProfilerStep spans every event carries step 0: the evidence says "the trace
    (no ProfilerStep)", not "step 0" (before: "gaps in step 0"); with steps, it names them."""
    trace, _ = cases.launch_bound(tmp_path, steps=2, profiler_steps=False)
    evidence = _findings(trace, "launch_bound").iloc[0]["evidence"]
    assert "gaps in the trace (no ProfilerStep)" in evidence
    assert "step 0" not in evidence and "before elementwise_" in evidence
    assert "in no ProfilerStep at" in evidence
    twin, _ = cases.launch_bound(tmp_path / "steps", steps=2)
    assert "gaps in steps 1-2" in _findings(twin, "launch_bound").iloc[0]["evidence"]


def test_launch_bound_before_copies_gets_copy_advice(tmp_path):
    """Gaps mostly before small device-to-device copies get advice about batching copies
    (and DDP's buffer broadcast), not only CUDA graphs (before: the kernel advice, seen on
    a DDP trace whose gaps precede 904 DtoD copies); gaps before kernels keep the rule's
    advice (the twin). The saving is the same either way."""
    trace, expected = cases.launch_bound(tmp_path, copies=True)
    row = _findings(trace, "launch_bound").iloc[0]
    assert _saving_ns(row) == pytest.approx(expected, rel=0.05)
    assert row["advice"] == launch_bound.COPY_ADVICE
    assert "Memcpy DtoD (Device -> Device)" in row["evidence"]
    twin, _ = cases.launch_bound(tmp_path / "kernels")
    assert _findings(twin, "launch_bound").iloc[0]["advice"] == launch_bound.RULES[0].advice


def test_launch_bound_absent_when_the_host_runs_ahead(tmp_path):
    trace, expected = cases.launch_bound(tmp_path, bound=False)
    assert expected == 0
    assert find(trace, rules=RULES, min_share=0.0).empty


def test_launch_bound_needs_a_stretch(tmp_path):
    trace, _ = cases.launch_bound(tmp_path, steps=1, kernels=launch_bound.MIN_GAPS)
    assert _findings(trace, "launch_bound", min_share=0.0).empty


def test_host_rules_do_not_claim_the_same_idle(tmp_path):
    """A host-sync case has idle before short kernels: launch_bound must not count it."""
    trace, _ = cases.host_sync(tmp_path)
    assert set(find(trace, rules=RULES, min_share=0.0)["rule"]) == {"host_sync"}


# -- helpers -----------------------------------------------------------------------------
def test_cover_and_steps_text():
    c = Cover(np.array([0, 5, 20]), np.array([10, 12, 30]))
    assert c.within(np.array([0, 11, 12, 25]), np.array([40, 21, 20, 26])).tolist() == [
        22, 2, 0, 1]
    assert Cover(np.array([], np.int64), np.array([], np.int64)).within(
        np.array([0]), np.array([5])).tolist() == [0]
    assert fmt_steps([3, 4, 5]) == "steps 3-5"
    assert fmt_steps([3, 5]) == "steps 3, 5"
    assert fmt_steps([-1]) == "outside any ProfilerStep"


# -- the sample job and the real traces ----------------------------------------------------
def _sample_sync_by_hand(rt) -> int:
    """The sample job's host_sync saving on one rank, recounted with plain loops: each
    step ends with a ``.item()`` whose ``cudaStreamSynchronize`` waits for the GPU to drain;
    the host then ends the step, loads the next batch (a data-loader span) and launches
    again. The GPU idle from the drain to the first GPU work after the loader, outside the
    loader span, is claimed up to the time the call blocked."""
    ev = rt.decoded(["name", "kind", "ts", "end"])
    gpu = ev[ev["kind"].isin(GPU_WORK_KINDS)].sort_values("ts")
    loaders = ev[ev["name"].str.startswith("enumerate(DataLoader)")]
    total = 0
    for call in ev[ev["name"] == "cudaStreamSynchronize"].itertuples():
        after = gpu[gpu["ts"] >= call.end]
        if after.empty:
            continue
        drain = max(call.ts, gpu[gpu["ts"] < call.end]["end"].max())
        loader = loaders[loaders["ts"] >= call.end].iloc[0]
        nxt = after[after["ts"] >= loader["end"]]["ts"].min()
        # cut [drain, nxt) at every GPU interval and the loader span; sum the free pieces
        spans = [(a, b) for a, b in zip(gpu["ts"], gpu["end"], strict=True)
                 if b > drain and a < nxt] + [(loader["ts"], loader["end"])]
        idle, t = 0, int(drain)
        for a, b in sorted(spans):
            idle += max(0, min(a, nxt) - t)
            t = max(t, b)
        idle += max(0, nxt - t)
        total += min(idle, call.end - call.ts)
    return total


def test_sample_job():
    """The sample job loads data on the host every step (by construction): data_loading
    fires on every rank; its end-of-step syncs leave a little idle, recounted by hand."""
    trace = load_trace(SAMPLE_TRACES / "synthetic_4rank", progress=False, cache=False)
    out = find(trace, rules=RULES)
    assert "launch_bound" not in set(out["rule"])
    row = out[out["rule"] == "data_loading"].iloc[0]
    assert row["ranks"] == [0, 1, 2, 3]
    # no GPU work overlaps the loader spans there: the saving is their whole length
    ev = trace.rank(0).decoded(["name", "dur"])
    spans = ev[ev["name"].str.startswith("enumerate(DataLoader)")]
    assert row["est_saving(us)"] * 1e3 == spans["dur"].sum()
    sync = out[out["rule"] == "host_sync"]
    assert (sync["severity"] == "low").all()
    raw = rank_findings(trace, rules=[r for r in RULES if r.id == "host_sync"])
    # abs: on rank 2 the copy call itself also blocks while the GPU idles 113 ns
    for rank, saving in zip(raw["rank"], raw["est_saving_ns"], strict=True):
        assert saving == pytest.approx(_sample_sync_by_hand(trace.rank(rank)), abs=200)
    assert sync.iloc[0]["est_saving(us)"] * 1e3 == raw["est_saving_ns"].max()


REAL = [
    ("critical_path", "cuda_event_sync"),
    ("amd_trace",),
    ("distributed_info_unavailable",),
    ("ns_resolution_trace",),
    ("trace_diff", "control"),
    ("timeline_analysis",),
]


@pytest.mark.parametrize("parts", REAL, ids=["/".join(p) for p in REAL])
def test_real_traces_invariants(parts):
    """Savings within the window; no host finding on a rank without GPU work; the
    evidence's idle figure is the saving; steps exist."""
    trace = load_trace(shared_trace(*parts), progress=False, cache=False)
    out = find(trace, rules=RULES, min_share=0.0)
    for _, row in out.iterrows():
        assert 0 < row["share_pctg"] <= 100.0
        rank = row["ranks"][0]
        rt = trace.rank(rank)
        assert gpu_rows(rt).size > 0
        start, end = analysis_window(rt)
        assert row["est_saving(us)"] * 1e3 <= end - start
        numbers = re.findall(r"idle ([\d.]+) (µs|ms)", row["evidence"])
        if row["rule"] != "data_loading" and "also shows as" not in row["evidence"]:
            value, unit = numbers[0]
            shown = float(value) * (1e3 if unit == "ms" else 1.0)
            assert shown == pytest.approx(row["est_saving(us)"], abs=0.1 if unit == "µs"
                                          else 1.0)


def test_real_sync_by_hand():
    """critical_path/cuda_event_sync: a .item() (cudaMemcpyAsync of a pageable DtoH copy,
    then cudaStreamSynchronize) and a cudaEventSynchronize after the last kernel. Read off
    the timeline: the .item() calls' bubble is min(next GPU start - drain, time blocked);
    the event sync has no GPU work after it, so no bubble."""
    trace = load_trace(shared_trace("critical_path", "cuda_event_sync"), progress=False,
                       cache=False)
    ev = trace.rank(0).decoded(["name", "ts", "end", "kind"])
    calls = ev[ev["name"].isin(["cudaMemcpyAsync", "cudaStreamSynchronize"])]
    assert len(calls) == 2
    gpu = ev[ev["kind"].isin(["computation", "memcpy_dtoh"])]
    returned = calls["end"].max()
    drained = gpu[gpu["ts"] < returned]["end"].max()
    nxt = gpu[gpu["ts"] >= returned]["ts"].min()
    blocked = int((calls["end"] - calls["ts"]).sum())  # the two calls do not overlap
    expected = min(nxt - drained, blocked)
    out = _findings(trace, "host_sync", min_share=0.0)
    assert len(out) == 1  # one finding a rank; the .item() is one site
    assert out["est_saving(us)"].sum() * 1e3 == pytest.approx(expected, abs=2)
    evidence = out["evidence"].iloc[0]
    assert "100% from aten::is_nonzero: 1 time(s)" in evidence
    assert "in cudaMemcpyAsync ×1, cudaStreamSynchronize ×1" in evidence
    assert "1 × Memcpy DtoH (Device -> Pageable) of 1 B each" in evidence


def test_get_findings_on_trace_analysis(tmp_path):
    """The issue's acceptance test through the public API: a sync in every step is
    reported with the constructed saving; the same job without it reports no sync."""
    from hta.trace_analysis import TraceAnalysis

    _, expected = cases.host_sync(tmp_path / "with")
    cases.host_sync(tmp_path / "without", with_sync=False)
    analyzer = TraceAnalysis(trace_dir=str(tmp_path / "with"), cache=False, progress=False)
    found = analyzer.get_findings(replay=False)  # the rule's own estimate
    row = found[found["rule"] == "host_sync"].iloc[0]
    assert row["est_saving(us)"] * 1e3 == pytest.approx(expected, rel=0.05)
    # replayed: the host's 20 µs wait a step bounds the step (less its usual CPU step)
    row = analyzer.get_findings().set_index("rule").loc["host_sync"]
    assert row["change"] == "no-sync:aten::item"
    assert 4 * 19 <= row["est_saving(us)"] <= 4 * 20
    assert "host_sync" in set(analyzer.describe_findings_rules()["rule"])
    without = TraceAnalysis(trace_dir=str(tmp_path / "without"), cache=False,
                            progress=False).get_findings()
    assert "host_sync" not in set(without["rule"])


def test_real_launch_bound_by_hand():
    """ns_resolution_trace: recount the launch-bound gaps with a plain loop over the
    kernels of each stream, and read the medians off the kernel launch statistics."""
    from hta.analysis.launch import cuda_kernel_launch_stats
    from hta.model.rules import GPU_WORK_KINDS

    trace = load_trace(shared_trace("ns_resolution_trace"), progress=False, cache=False)
    rt = trace.rank(0)
    ev = rt.events
    by_index = ev.set_index("index")
    gpu = ev[ev["kind"].isin(GPU_WORK_KINDS)].sort_values(["stream", "ts"], kind="stable")
    start, end = analysis_window(rt)
    gaps, kernels = [], []
    for _, rows in gpu.groupby("stream"):
        prev_end, prev_dur = None, None
        for r in rows.itertuples():
            if prev_end is not None and r.ts > prev_end and r.index_correlation >= 0:
                call_end = by_index.loc[r.index_correlation, "end"]
                if (call_end > prev_end and r.dur < 10_000 and prev_dur < 10_000
                        and r.ts - prev_end <= 100_000 and start <= r.ts < end):
                    gaps.append((prev_end, r.ts))
                    kernels.append(r.index)
            prev_end = r.end if prev_end is None else max(prev_end, r.end)
            prev_dur = r.dur
    busy = Cover(gpu["ts"].to_numpy(), gpu["end"].to_numpy())
    merged = Cover(np.array([g[0] for g in gaps]), np.array([g[1] for g in gaps]))
    idle = int((merged.e - merged.s).sum() - busy.within(merged.s, merged.e).sum())
    row = _findings(trace, "launch_bound", min_share=0.0).iloc[0]
    assert f"{len(gaps)} gaps" in row["evidence"]
    assert row["est_saving(us)"] * 1e3 == pytest.approx(idle, abs=1)  # no sync, no loader
    stats = cuda_kernel_launch_stats(trace, Selection.of(0))
    stats = stats[stats["gpu_index"].isin(kernels)]
    assert f"median {stats['gpu_duration(us)'].median():.1f} µs on the GPU" in row["evidence"]
    assert f"against {stats['cpu_duration(us)'].median():.1f} µs" in row["evidence"]


def test_blocking_call_names():
    blocking, wait = BLOCKING_COPY, STREAM_WAIT
    for name in ("cudaMemcpy", "cudaMemcpy2D", "cuMemcpyDtoH_v2", "hipMemcpy",
                 "hipMemcpyWithStream", "hipMemcpyDtoH"):
        assert blocking.search(name), name
    for name in ("cudaMemcpyAsync", "cuMemcpyDtoHAsync_v2", "hipMemcpyAsync",
                 "cudaMemsetAsync", "enqueueCommand memcpyDtoHAsync"):
        assert not blocking.search(name), name
    assert wait.search("cudaStreamWaitEvent") and wait.search("enqueueCommand waitOnEvent")
    assert not wait.search("cudaEventSynchronize")


def test_data_loading_nested_frames_count_once(tmp_path):
    """A Python frame of the loader inside its annotation: one span, no double time."""
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0)
    for k in (1, 2):
        t = (k - 1) * 100_000
        with b.step(k, ts=t, dur=99_000):
            b.annotation(cases.DATA_LOADER, ts=t + 1_000, dur=20_000)
            b.complete("torch/utils/data/dataloader.py(631): __next__", "python_function",
                       ts=t + 2_000, dur=18_000)
            b.launch_kernel("sgemm", cpu_ts=t + 22_000, cpu_dur=500, gpu_ts=t + 23_000,
                            gpu_dur=50_000)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    row = _findings(trace, "data_loading").iloc[0]
    assert row["est_saving(us)"] == pytest.approx(40.0)
    assert row["evidence"].startswith("rank 0: 2 data-loader span(s)")


# -- a multi-process loader's first batch ----------------------------------------------------
MP_NEXT = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def _loader_pass(tmp_path, batches_ms: list[int]):
    """No ProfilerStep: per batch, a multi-process loader's ``__next__`` of the given time
    (the GPU idle), then a forward of 2 ms of kernels; the first is the iterator's."""
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0)
    t = 1_000
    for ms in batches_ms:
        b.annotation(MP_NEXT, ts=t, dur=ms * 1_000_000)
        t += ms * 1_000_000 + 10_000
        b.cpu_op("aten::linear", ts=t, dur=50_000)
        b.launch_kernel("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_tn", cpu_ts=t + 1_000,
                        cpu_dur=5_000, gpu_ts=t + 20_000, gpu_dur=2_000_000)
        t += 2_100_000
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_a_multi_process_loaders_only_batch_is_its_start_up(tmp_path):
    """One batch of a fresh multi-process iterator (800 ms): a one-time cost, no
    data_loading saving (no worker count makes a first batch faster)."""
    from hta.analysis.findings.onetime import one_time_costs

    trace = _loader_pass(tmp_path, [800])
    ot = one_time_costs(trace.rank(0))
    names = [trace.rank(0).symbols[n] for n in
             trace.rank(0).events["name"].to_numpy()[ot.rows]]
    assert MP_NEXT in names and "loader start" in ot.why.tolist()
    assert _findings(trace, "data_loading").empty


def test_a_first_batch_ten_times_the_later_ones_is_one_time(tmp_path):
    """A first batch of 800 ms, then four of 40 ms: the first is one-time; the later
    waits recur and data_loading claims them."""
    from hta.analysis.findings.onetime import one_time_costs

    trace = _loader_pass(tmp_path, [800, 40, 40, 40, 40])
    assert "loader start" in one_time_costs(trace.rank(0)).why.tolist()
    rows = _findings(trace, "data_loading", min_share=0.0)
    assert len(rows) == 1
    assert _saving_ns(rows.iloc[0]) == pytest.approx(4 * 40_000_000, rel=0.01)


def test_twin_batches_of_one_rate_keep_the_first(tmp_path):
    """Five batches of 40 ms: the first is no start-up; all five recur."""
    from hta.analysis.findings.onetime import one_time_costs

    trace = _loader_pass(tmp_path, [40] * 5)
    assert "loader start" not in one_time_costs(trace.rank(0)).why.tolist()
    assert not _findings(trace, "data_loading").empty
