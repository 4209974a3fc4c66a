"""Hidden synchronisations (issue 17, item 4): blocking copies, ``.item()``, explicit and
implicit synchronize calls. The GPU idle they cause is known by construction
(``sync_cases``); twins without the problem report nothing; the claims of ``host_sync``,
``pageable_copies`` and ``launch_bound`` never overlap."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import sync_cases as cases
from conftest import shared_trace
from kineto_builder import COMPUTE_STREAM, TraceBuilder

from hta.analysis.findings import analysis_window, copies, find, host, launch_bound
from hta.analysis.findings.engine import rank_findings
from hta.analysis.findings.rule_tools import data_loader_cover
from hta.analysis.findings.sync import sync_bubbles
from hta.analysis.findings.sync_sites import ADVICE, EXCHANGE_ADVICE
from hta.analysis.intervals import Cover
from hta.analysis.perf.calls import gpu_rows
from hta.job.load import load_trace
from hta.model.selection import Selection

RULES = host.RULES + launch_bound.RULES + copies.RULES
US = cases.US


def _row(out, rule):
    rows = out[out["rule"] == rule]
    assert len(rows) == 1, out[["rule", "subject", "est_saving(us)"]]
    return rows.iloc[0]


def _gpu_idle(rt, window) -> int:
    """GPU idle time in the window: no kernel, copy or memset on any stream (ns)."""
    ev = rt.events
    g = gpu_rows(rt)
    busy = Cover(ev["ts"].to_numpy()[g], ev["end"].to_numpy()[g])
    lo, hi = np.array([window[0]]), np.array([window[1]])
    return int((hi - lo)[0] - busy.within(lo, hi)[0])


# -- the TorchRec pattern --------------------------------------------------------------------
def test_torchrec_reads_are_the_top_finding(tmp_path):
    """Small pageable DtoH reads inside ## sparse_data_dist ##: the top finding names them,
    with the constructed idle as the saving, ahead of the exposed all-to-alls."""
    trace, expected = cases.hidden_sync(tmp_path)
    out = find(trace)  # every default rule
    top = out.iloc[0]
    assert top["rule"] == "host_sync" and top["severity"] == "high"
    assert top["subject"] == "aten::to under ## sparse_data_dist ##"
    assert top["est_saving(us)"] * 1e3 == expected
    assert top["steps"] == [1, 2, 3, 4]
    evidence = top["evidence"]
    assert evidence.startswith(f"rank 0: blocking calls left the GPU idle {expected / 1e6:.3f} "
                               f"ms ({expected / 4e6:.3f} ms a step) in steps 1-4")
    assert "100% from aten::to under ## sparse_data_dist ##: 8 time(s) (2 a step)" in evidence
    assert "in cudaMemcpyAsync ×8, cudaStreamSynchronize ×8" in evidence
    assert "copies: 8 × Memcpy DtoH (Device -> Pageable) of 256 B each" in evidence
    assert "the longest: cudaMemcpyAsync in step 1, 2.006 ms into it, 58.004 ms" in evidence
    assert top["advice"] == ADVICE["host_copy"] + EXCHANGE_ADVICE
    assert _row(out, "comm_exposed")["est_saving(us)"] < top["est_saving(us)"]
    # bounded by the GPU idle of the window
    rt = trace.rank(0)
    assert expected < _gpu_idle(rt, analysis_window(rt))


@pytest.mark.parametrize(("variant", "site", "calls", "advice"), [
    ("item", "aten::item under ## sparse_data_dist ##",
     "cudaMemcpyAsync ×8, cudaStreamSynchronize ×8", "host_read"),
    ("stream_sync", "outside any operator under ## sparse_data_dist ##",
     "cudaStreamSynchronize ×8", "explicit"),
])
def test_item_and_stream_sync_variants(tmp_path, variant, site, calls, advice):
    trace, expected = cases.hidden_sync(tmp_path, variant)
    out = find(trace)
    top = out.iloc[0]
    assert top["rule"] == "host_sync"
    assert top["est_saving(us)"] * 1e3 == expected
    assert f"100% from {site}: 8 time(s) (2 a step)" in top["evidence"]
    assert f"in {calls}" in top["evidence"]
    assert top["advice"].startswith(ADVICE[advice])
    if variant == "item":
        assert "8 × Memcpy DtoH (Device -> Pageable) of 4 B each" in top["evidence"]


def test_fixed_twin_has_no_finding(tmp_path):
    """Pinned non-blocking copies read a step later, the host ahead: nothing to report."""
    trace = cases.hidden_sync_fixed(tmp_path)
    assert find(trace, rules=RULES, min_share=0.0).empty
    assert not {"host_sync", "pageable_copies"} & set(find(trace, min_share=0.0)["rule"])


def test_host_waiting_keeps_only_the_first_gaps(tmp_path):
    """With no host work shown after the launches, the host may have waited on anything:
    only the gap from each drain to the all-to-all launched right after the read counts."""
    trace, expected = cases.hidden_sync(tmp_path, host_works=False)
    row = _row(find(trace, rules=RULES, min_share=0.0), "host_sync")
    assert row["est_saving(us)"] * 1e3 == expected == 8 * 38 * US


def test_iterations_select_steps(tmp_path):
    """Steps 2-3 only: both reads of each; the last one's claim stops at the window end,
    the one of step 2 goes on into step 3's first millisecond."""
    trace, _ = cases.hidden_sync(tmp_path)
    row = _row(find(trace, Selection.of(iterations=[2, 3]), rules=RULES), "host_sync")
    first = 38 * US + 29_960 * US  # after the first read of a step
    second = 38 * US + 14_960 * US + cases.MS  # then to the end of the step
    assert row["est_saving(us)"] * 1e3 == 2 * first + 2 * second + cases.MS
    assert row["steps"] == [2, 3]


# -- sites and advice ------------------------------------------------------------------------
def _one_step(tmp_path, body) -> object:
    """One 1 ms step: kernel A [10, 210) µs, ``body(b)`` adds the blocking part, then the
    host launches kernel B at 400 µs (running [405, 505) µs); the host works in between."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000 * US):
        b.launch_kernel("sgemm_a", cpu_ts=2 * US, cpu_dur=5 * US, gpu_ts=10 * US,
                        gpu_dur=200 * US)
        body(b)
        b.complete("train.py(42): step", "python_function", ts=240 * US, dur=150 * US)
        b.launch_kernel("sgemm_b", cpu_ts=395 * US, cpu_dur=5 * US, gpu_ts=405 * US,
                        gpu_dur=100 * US)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_allocator_free_is_an_implicit_sync(tmp_path):
    """cudaFree inside the caching allocator waits for the device: [20, 230) µs blocked,
    the GPU idle from A's end (210 µs) to B (405 µs), capped by the 210 µs blocked."""
    def body(b):
        b.cpu_op("aten::empty", ts=15 * US, dur=220 * US)
        b.runtime("cudaFree", ts=20 * US, dur=210 * US)

    out = find(_one_step(tmp_path, body), rules=RULES)
    row = _row(out, "host_sync")
    assert row["est_saving(us)"] == pytest.approx(195.0)
    assert "100% from aten::empty: 1 time(s), the host blocked 210.0 µs in cudaFree ×1" in \
        row["evidence"]
    assert row["advice"] == ADVICE["allocator"]


@pytest.mark.parametrize("label, frame", [
    ("[param|pytorch.model.alex_net|0|0|0|warmup|forward]", None),
    ("forward", "vllm/v1/worker/gpu_worker.py(522): compile_or_warm_up_model"),
    ("Warm-Up", None),
])
def test_a_free_during_warm_up_is_not_a_finding(tmp_path, label, frame):
    """The same cudaFree as above under a warm-up label or Python frame (code that runs
    once, before the steady state: PARAM benchmarks, vLLM start-up) is no finding; its
    twin under another label is (test_allocator_free_is_an_implicit_sync)."""
    def body(b):
        if frame:
            b.complete(frame, "python_function", ts=12 * US, dur=226 * US)
        b.annotation(label, ts=14 * US, dur=222 * US)
        b.cpu_op("aten::empty", ts=15 * US, dur=220 * US)
        b.runtime("cudaFree", ts=20 * US, dur=210 * US)

    out = find(_one_step(tmp_path, body), rules=RULES)
    assert "host_sync" not in set(out["rule"])

    def twin(b):
        b.annotation("forward", ts=14 * US, dur=222 * US)
        b.cpu_op("aten::empty", ts=15 * US, dur=220 * US)
        b.runtime("cudaFree", ts=20 * US, dur=210 * US)

    twin_out = find(_one_step(tmp_path / "twin", twin), rules=RULES)
    assert _row(twin_out, "host_sync")["est_saving(us)"] == pytest.approx(195.0)


def test_nonzero_is_data_dependent(tmp_path):
    """Boolean indexing: aten::index -> aten::nonzero reads the count back (pageable)."""
    def body(b):
        b.annotation("loss", ts=12 * US, dur=230 * US)
        b.cpu_op("aten::index", ts=14 * US, dur=225 * US)
        b.cpu_op("aten::nonzero", ts=16 * US, dur=220 * US)
        b.memcpy("DtoH (Device -> Pageable)", cpu_ts=20 * US, cpu_dur=195 * US,
                 gpu_ts=210 * US, gpu_dur=2 * US, nbytes=8)
        b.runtime("cudaStreamSynchronize", ts=216 * US, dur=3 * US)

    row = _row(find(_one_step(tmp_path, body), rules=RULES), "host_sync")
    assert row["est_saving(us)"] == pytest.approx(405 - 212)
    assert "from aten::index under loss: 1 time(s)" in row["evidence"]
    assert row["advice"] == ADVICE["data_dependent"]


def test_gpu_annotation_names_a_site_without_cpu_label(tmp_path):
    """No record_function on the CPU side: the gpu_user_annotation around the copy."""
    def body(b):
        b.cpu_op("aten::to", ts=16 * US, dur=220 * US)
        b.memcpy("DtoH (Device -> Pageable)", cpu_ts=20 * US, cpu_dur=195 * US,
                 gpu_ts=210 * US, gpu_dur=2 * US, nbytes=8)
        b.gpu("metrics", "gpu_user_annotation", 205 * US, 10 * US, stream=COMPUTE_STREAM)

    row = _row(find(_one_step(tmp_path, body), rules=RULES), "host_sync")
    assert "from aten::to under metrics: 1 time(s)" in row["evidence"]


def test_two_sites_one_finding(tmp_path):
    """A .item() under ``loss`` (blocked 20-215 µs, the GPU drained at 210 µs) and an
    explicit cudaDeviceSynchronize under ``log`` (310-410 µs, kernel B ends at 405 µs),
    the host working in between: one finding; the sync's 100 µs (405..505) first, then the
    .item()'s 93 µs (212..305: the idle before B, up to the sync's start)."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000 * US):
        b.launch_kernel("sgemm_a", cpu_ts=2 * US, cpu_dur=5 * US, gpu_ts=10 * US,
                        gpu_dur=200 * US)
        b.annotation("loss", ts=15 * US, dur=205 * US)
        b.cpu_op("aten::item", ts=18 * US, dur=200 * US)
        b.memcpy("DtoH (Device -> Pageable)", cpu_ts=20 * US, cpu_dur=193 * US,
                 gpu_ts=210 * US, gpu_dur=2 * US, nbytes=4)
        b.runtime("cudaStreamSynchronize", ts=213 * US, dur=2 * US)
        b.complete("train.py(7): step", "python_function", ts=220 * US, dur=75 * US)
        b.launch_kernel("sgemm_b", cpu_ts=296 * US, cpu_dur=3 * US, gpu_ts=305 * US,
                        gpu_dur=100 * US)
        b.annotation("log", ts=305 * US, dur=110 * US)
        b.runtime("cudaDeviceSynchronize", ts=310 * US, dur=100 * US)
        b.complete("train.py(9): log", "python_function", ts=412 * US, dur=80 * US)
        b.launch_kernel("sgemm_c", cpu_ts=494 * US, cpu_dur=3 * US, gpu_ts=505 * US,
                        gpu_dur=100 * US)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    row = _row(find(trace, rules=RULES), "host_sync")
    assert row["est_saving(us)"] == pytest.approx(100 + 93)
    evidence = row["evidence"]
    assert "52% from outside any operator under log: 1 time(s)" in evidence
    assert "Then: aten::item under loss 93.0 µs (1 time(s))." in evidence
    assert row["advice"] == ADVICE["explicit"]


# -- what the GPU did during the wait --------------------------------------------------------
def _wait_case(tmp_path, queued: bool) -> object:
    """A synchronous 256 B read (hipMemcpyWithStream) from 60 to 500 µs; its copy runs at
    480 µs. Without ``queued`` the GPU drained at 50 µs and idles through the wait (the
    call is slow on the host); with it, a kernel launched at 5 µs waits (behind a stream
    wait) until 400 µs: the GPU had work, which waited on something else. Then the host
    works until it launches kernel B at 600 µs (running from 610 µs)."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000 * US):
        b.launch_kernel("sgemm_a", cpu_ts=2 * US, cpu_dur=2 * US, gpu_ts=10 * US,
                        gpu_dur=40 * US)
        if queued:
            b.runtime("hipStreamWaitEvent", ts=4 * US, dur=1 * US)
            b.launch_kernel("sgemm_waiting", cpu_ts=5 * US, cpu_dur=2 * US,
                            gpu_ts=400 * US, gpu_dur=10 * US)
        b.cpu_op("aten::copy_", ts=55 * US, dur=450 * US)
        b.launch("Memcpy DtoH (Device -> Host)", "gpu_memcpy", cpu_ts=60 * US,
                 cpu_dur=440 * US, gpu_ts=480 * US, gpu_dur=2 * US,
                 launcher="hipMemcpyWithStream", bytes=256)
        b.complete("server.py(9): step", "python_function", ts=506 * US, dur=90 * US)
        b.launch_kernel("sgemm_b", cpu_ts=597 * US, cpu_dur=3 * US, gpu_ts=610 * US,
                        gpu_dur=100 * US)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_idle_during_the_wait_counts(tmp_path):
    """The GPU idles through the wait: from the call's start to B, but the call's own copy
    (2 µs): 60..480 and 482..610 µs, capped by the 440 µs blocked."""
    row = _row(find(_wait_case(tmp_path, queued=False), rules=RULES), "host_sync")
    assert row["est_saving(us)"] == pytest.approx(440.0)
    assert "work still queued" not in row["evidence"]


def test_idle_with_work_queued_is_not_the_wait(tmp_path):
    """A kernel launched before the wait runs at 400 µs: the GPU had work, so its idle
    before that is not the wait's doing; the claim starts when that work ends (410 µs),
    and the evidence shows the 340 µs of idle with work queued."""
    row = _row(find(_wait_case(tmp_path, queued=True), rules=RULES), "host_sync")
    assert row["est_saving(us)"] == pytest.approx((480 - 410) + (610 - 482))
    assert "the GPU also sat idle 340.0 µs with earlier work still queued" in row["evidence"]


def test_gaps_inside_a_graph_replay_are_not_idle(tmp_path):
    """Traces often keep only some kernels of a replayed graph: the gap between two of
    them is not taken as idle. A sync from 5 to 400 µs (the GPU drains at 390 µs), then a
    graph replay whose recorded kernels run [405, 410) and [600, 610) µs, then the host
    works until B at 800 µs: 15 + 190 µs, not the 395 µs blocked."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000 * US):
        b.launch_kernel("sgemm_a", cpu_ts=2 * US, cpu_dur=2 * US, gpu_ts=10 * US,
                        gpu_dur=380 * US)
        b.runtime("cudaDeviceSynchronize", ts=5 * US, dur=395 * US)
        b.graph_launch([("sgemm_g1", 405 * US, 5 * US, COMPUTE_STREAM),
                        ("sgemm_g2", 600 * US, 10 * US, COMPUTE_STREAM)],
                       cpu_ts=401 * US, cpu_dur=3 * US)
        b.complete("train.py(3): step", "python_function", ts=405 * US, dur=390 * US)
        b.launch_kernel("sgemm_b", cpu_ts=796 * US, cpu_dur=3 * US, gpu_ts=800 * US,
                        gpu_dur=100 * US)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    row = _row(find(trace, rules=RULES, min_share=0.0), "host_sync")
    assert row["est_saving(us)"] == pytest.approx((405 - 390) + (800 - 610))


def test_capture_only_trace_has_no_host_sync(tmp_path):
    """Syncs in a graph-capture warm-up (captures, no replay) are not the step's."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000 * US):
        b.launch_kernel("sgemm_a", cpu_ts=2 * US, cpu_dur=2 * US, gpu_ts=10 * US,
                        gpu_dur=80 * US)
        b.runtime("hipDeviceSynchronize", ts=5 * US, dur=95 * US)
        b.runtime("hipStreamBeginCapture", ts=110 * US, dur=5 * US)
        b.runtime("hipStreamEndCapture", ts=300 * US, dur=5 * US)
        b.launch_kernel("sgemm_b", cpu_ts=400 * US, cpu_dur=3 * US, gpu_ts=410 * US,
                        gpu_dur=100 * US)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    assert "host_sync" not in set(find(trace, rules=RULES, min_share=0.0)["rule"])


# -- no time claimed twice -------------------------------------------------------------------
def test_sync_and_pageable_copy_claim_different_time(tmp_path):
    """A 4 MB pageable DtoH copy of 1 ms that blocks the host, then 300 µs of host work:
    the host waits for its own copy with the GPU busy copying, so host_sync claims
    nothing (the idle after the copy is the host's work, issue 37); pageable_copies
    claims the copy's excess over 12 GB/s while nothing else runs; a compute kernel on
    another stream hides 200 µs of the copy, which no one claims."""
    b = TraceBuilder(rank=0)
    nbytes = 4_000_000  # 333.3 µs at 12 GB/s
    with b.step(1, ts=0, dur=2_000 * US):
        b.launch_kernel("sgemm_side", cpu_ts=2 * US, cpu_dur=5 * US, gpu_ts=10 * US,
                        gpu_dur=210 * US, stream=30)
        b.cpu_op("aten::to", ts=5 * US, dur=1_020 * US)
        b.memcpy("DtoH (Device -> Pageable)", cpu_ts=8 * US, cpu_dur=1_010 * US,
                 gpu_ts=20 * US, gpu_dur=1_000 * US, nbytes=nbytes)
        b.complete("train.py(42): step", "python_function", ts=1_030 * US, dur=290 * US)
        b.launch_kernel("sgemm_b", cpu_ts=1_320 * US, cpu_dur=5 * US, gpu_ts=1_330 * US,
                        gpu_dur=600 * US)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    out = find(trace, rules=RULES, min_share=0.0)
    assert "host_sync" not in out["rule"].tolist()
    page = _row(out, "pageable_copies")
    # alone 800 µs (220..1020), excess 1000 - 333.3 µs: the smaller of the two
    assert page["est_saving(us)"] == pytest.approx(1_000 - nbytes / 12_000, abs=0.01)
    assert "while no other GPU work ran (666.7 µs longer in all" in page["evidence"]
    rt = trace.rank(0)
    window = analysis_window(rt)
    assert page["est_saving(us)"] * 1e3 <= window[1] - window[0]


def test_pageable_saving_limited_to_time_alone(tmp_path):
    """The same copy under a compute kernel for 900 of its 1000 µs: at most 100 µs."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=2_000 * US):
        b.launch_kernel("sgemm_side", cpu_ts=2 * US, cpu_dur=5 * US, gpu_ts=10 * US,
                        gpu_dur=910 * US, stream=30)
        b.memcpy("DtoH (Device -> Pageable)", cpu_ts=8 * US, cpu_dur=5 * US,
                 gpu_ts=20 * US, gpu_dur=1_000 * US, nbytes=4_000_000, stream=24)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    row = _row(find(trace, rules=copies.RULES, min_share=0.0), "pageable_copies")
    assert row["est_saving(us)"] == pytest.approx(100.0)


def test_launch_bound_leaves_sync_claims_out(tmp_path):
    """Short kernels launched one by one right after a long sync: the gaps are the host
    catching up after the sync (host_sync), not launch overhead; the two rules' savings
    add up to no more than the idle."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=2_000 * US):
        b.launch_kernel("sgemm_a", cpu_ts=2 * US, cpu_dur=5 * US, gpu_ts=10 * US,
                        gpu_dur=500 * US)
        b.runtime("cudaDeviceSynchronize", ts=10 * US, dur=505 * US)
        for i in range(60):  # 2 µs kernels, a 6 µs launch every 6 µs: 4 µs gaps
            cpu = 515 * US + i * 6 * US
            b.launch_kernel(f"elementwise_{i % 3}", cpu_ts=cpu, cpu_dur=6 * US,
                            gpu_ts=cpu + 7 * US, gpu_dur=2 * US)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    out = find(trace, rules=RULES, min_share=0.0)
    rt = trace.rank(0)
    window = analysis_window(rt)
    assert out["est_saving(us)"].sum() * 1e3 <= _gpu_idle(rt, window)
    # the sync blocked 505 µs; from the drain at 510 µs to the last kernel the host
    # launched (876 µs) the GPU idles 12 µs before the first kernel and 4 µs before each
    # of the 59 others: all of it is the sync's (505 µs blocked is more)
    sync = _row(out, "host_sync")
    assert sync["est_saving(us)"] == 12 + 59 * 4


# -- real traces -----------------------------------------------------------------------------
REAL = [("critical_path", "cuda_event_sync"), ("amd_trace",), ("df_index_resolver",),
        ("trace_diff", "control"), ("trace_diff", "test")]


@pytest.mark.parametrize("parts", REAL, ids=["/".join(p) for p in REAL])
def test_real_traces_sync_bounds(parts):
    """On every rank: the host_sync saving is at most the GPU idle of the window outside
    data-loader spans, and at most the time the host was blocked; the claimed ranges of
    distinct groups do not overlap."""
    trace = load_trace(shared_trace(*parts), progress=False, cache=False)
    raw = rank_findings(trace, rules=host.RULES[:1])
    for rank in trace.get_ranks():
        rt = trace.rank(rank)
        window = analysis_window(rt)
        sb = sync_bubbles(rt, data_loader_cover(rt), window)
        mine = raw[raw["rank"] == rank]
        saving = int(mine["est_saving_ns"].sum())
        assert saving <= _gpu_idle(rt, window)
        assert saving <= int((sb.end - sb.start).sum())
        starts, ends = [], []
        for grp in np.unique(sb.group[sb.saving > 0]).tolist():
            at = np.flatnonzero(sb.group == grp)[0]
            starts.append(sb.bubble_start[at])
            ends.append(sb.bubble_end[at])
        order = np.argsort(starts)
        assert (np.array(starts)[order][1:] >= np.array(ends)[order][:-1]).all()


def test_real_torchrec_trace_by_hand():
    """trace_diff/control (a TorchRec DLRM rank, 6 steps), read on the timeline: the
    input distribution reads the all-to-all splits back with .item() and .to("cpu") (8 B to
    8 KB pageable copies); most waits end when an all-to-all kernel or queued compute ends,
    the GPU busy meanwhile, and the host goes on launching at once, so the idle they cause
    is small (low). The largest site is the .item() under ## all2all_id_list_score_data:init
    ##, twice a step."""
    trace = load_trace(shared_trace("trace_diff", "control"), progress=False, cache=False)
    row = _row(find(trace, rules=host.RULES[:1], min_share=0.0), "host_sync")
    assert row["severity"] == "low"
    evidence = row["evidence"]
    assert ("from aten::item under ## all2all_id_list_score_data:init ## (inside "
            "## sparse_data_dist ##): 12 time(s) (2 a step)") in evidence
    assert "12 × Memcpy DtoH (Device -> Pageable) of 8 B each" in evidence
    assert " Then: aten::to under ## sparse_data_dist ##" in evidence
    assert row["advice"] == ADVICE["host_read"] + EXCHANGE_ADVICE


# -- public traces (HTA_MORE_TRACES=/work/public_traces; skipped without them) ---------------
MORE = os.environ.get("HTA_MORE_TRACES", "")


def _public(name: str):
    path = Path(MORE) / name
    if not MORE or not path.is_dir():
        pytest.skip(f"public trace {name} not available (set HTA_MORE_TRACES)")
    return load_trace(path, progress=False, cache=False)


def test_public_hipfree_is_the_cause():
    """mi300x_resnet18_ddp_train, read on the timeline: the GPU gaps of 48-68 ms are each
    one hipFree under a convolution or ReLU backward (1360 calls, 3.3 s), the GPU idle
    89 % of its span: the allocator frees memory back to the driver every op."""
    trace = _public("mi300x_resnet18_ddp_train")
    row = _row(find(trace), "host_sync")
    assert row["severity"] == "high"
    assert "in hipFree ×" in row["evidence"] and row["advice"] == ADVICE["allocator"]
    rt = trace.rank(0)
    window = analysis_window(rt)
    assert 0.85 * _gpu_idle(rt, window) < row["est_saving(us)"] * 1e3 <= _gpu_idle(rt, window)


def test_public_torchrec_wait_behind_queued_work():
    """a100_torchrec_rank0_of16: aten::to in ## sparse_data_dist ## blocks ~146 ms a step,
    but the GPU had work queued all along (a graph replay launched before the wait, whose
    kernels the trace mostly lacks), so the wait leaves little idle of its own; the
    evidence says how long the GPU sat idle with work queued."""
    trace = _public("a100_torchrec_rank0_of16")
    row = _row(find(trace, min_share=0.0), "host_sync")
    assert row["severity"] == "low"
    assert "from aten::to under ## sparse_data_dist ##: 45 time(s) (9 a step)" in \
        row["evidence"]
    assert "with earlier work still queued" in row["evidence"]


def test_public_sglang_wait_for_the_previous_batch():
    """mi300x_sglang_qwen3_8b_decode_graphs: one 463 ms hipMemcpyWithStream; the kernels
    before its copy were launched before the wait and held by a hipStreamWaitEvent (the
    overlap scheduler waits for the previous batch, not in the trace): not the copy's
    idle, and said so."""
    trace = _public("mi300x_sglang_qwen3_8b_decode_graphs")
    row = _row(find(trace, min_share=0.0), "host_sync")
    assert row["est_saving(us)"] < 1_000
    assert "the GPU also sat idle 463.0" in row["evidence"]
