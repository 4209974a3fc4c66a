"""Iterations and one-time costs from evidence (issue 37): each failure class on a
generated trace, with its twin."""

from __future__ import annotations

import iteration_cases as cases
import pytest

from hta.analysis.findings import analysis_window, find
from hta.analysis.findings.loops import iterations_found
from hta.analysis.findings.onetime import one_time_costs
from hta.analysis.findings.warmup import ONE_ITERATION, window_text


def _rules(out) -> list[str]:
    return out["rule"].tolist()


# -- layers of one call are no iterations ---------------------------------------------
def test_layers_of_one_call_are_one_iteration(tmp_path):
    """One inference call: its 32 layers repeat, the first one slower, but the embedding
    and the blocking lookups before them and the head after them run once: one
    iteration, nothing cut as warm-up, and the six blocking syncs are the top finding."""
    trace = cases.single_call(tmp_path)
    rt = trace.rank(0)
    assert iterations_found(rt) is None
    lo, hi = analysis_window(rt)
    assert (lo, hi) == (int(rt.events["ts"].min()), int(rt.events["end"].max()))
    assert window_text(rt).startswith(ONE_ITERATION)
    out = find(trace)
    assert _rules(out)[0] == "host_sync"
    assert out.iloc[0]["est_saving(us)"] >= cases.SYNCS * cases.SYNC_NS / 1e3 * 0.99
    assert "aten::nonzero" in out.iloc[0]["evidence"]
    assert "warmup" not in _rules(out)


def test_layers_under_one_module_frame_are_one_iteration(tmp_path):
    """With Python frames, layers under one nn.Module call are one pass, even with no work
    after them to tell."""
    trace = cases.single_call(tmp_path, frames=True, head=False)
    assert iterations_found(trace.rank(0)) is None


def test_without_frames_or_head_the_layers_stay_a_repeat(tmp_path):
    """The twin of the frame test: no frames and nothing after the layers, so nothing in
    the trace says one pass: the layers are a repeat (and the slow first one warm-up)."""
    trace = cases.single_call(tmp_path, head=False)
    it = iterations_found(trace.rank(0))
    assert it is not None and it.starts.size == 32


def test_a_loop_of_whole_calls_is_iterations(tmp_path):
    """The twin: a decoding loop repeats the whole call; its slow first call is warm-up."""
    for frames in (False, True):
        folder = tmp_path / str(frames)
        folder.mkdir()
        trace = cases.decode_loop(folder, frames=frames)
        rt = trace.rank(0)
        it = iterations_found(rt)
        assert it is not None and (it.starts.size, it.warm_up) == (6, 1)
        assert analysis_window(rt)[0] == int(it.starts[1])
        assert not window_text(rt).startswith(ONE_ITERATION)


# -- the steady window keeps the work ---------------------------------------------------
def test_a_late_one_time_cost_does_not_drop_the_gemms(tmp_path):
    """A one-time cost before the optimizer's 300 tiny kernels: most GPU events but 1 % of
    the GPU time run after it, and the fp32 GEMMs of every micro-batch before it. The
    window stays the whole trace; the fp32_gemm finding holds half the GEMM time."""
    trace = cases.accumulation(tmp_path)
    rt = trace.rank(0)
    assert list(one_time_costs(rt).why) == ["setup"]
    assert analysis_window(rt) == (0, int(rt.events["end"].max()))
    assert "held by the warm-up note" in window_text(rt)
    out = find(trace)
    (gemm,) = out[out["rule"] == "fp32_gemm"].to_dict("records")
    assert gemm["severity"] == "high"
    assert gemm["est_saving(us)"] == 3 * 2 * cases.GEMM_NS / 2 / 1e3


def test_an_early_one_time_cost_is_cut(tmp_path):
    """The twin: the same cost before the first micro-batch is left out of the window."""
    trace = cases.accumulation(tmp_path, late_cost=False)
    rt = trace.rank(0)
    assert analysis_window(rt)[0] == 2_000_000
    assert window_text(rt).startswith(f"{ONE_ITERATION}, after its leading one-time costs")


# -- a first call far slower than the later ones is one-time ---------------------------
def test_a_slow_first_call_without_runtime_calls_is_one_time(tmp_path):
    """The first aten::mul_ of an optimizer takes 2.7 ms, the later ones 10 µs, with no
    runtime call making it slow: one-time, left out of the window, sold by no rule."""
    for steps in (3, 1):  # with one step, each shape runs once: judged by its name
        folder = tmp_path / str(steps)
        folder.mkdir()
        trace = cases.optimizer_only(folder, steps=steps)
        rt = trace.rank(0)
        ot = one_time_costs(rt)
        assert list(ot.why) == ["first"]
        assert int(ot.end[0] - ot.start[0]) == cases.FIRST_MUL_NS
        assert analysis_window(rt)[0] == cases.FIRST_MUL_NS + 20_000
        out = find(trace)
        saving = out[out["rule"] != "warmup"]["est_saving(us)"].sum()
        window = analysis_window(rt)
        assert saving * 1e3 <= window[1] - window[0]


def test_even_first_call_is_not_one_time(tmp_path):
    trace = cases.optimizer_only(tmp_path, slow_first=False)
    assert one_time_costs(trace.rank(0)).rows.size == 0


# -- no CUDA-graph advice where graphs already run -------------------------------------
def test_no_graph_advice_where_graphs_already_replay(tmp_path):
    """A host-bound step whose first kernel replays from a CUDA graph: the advice says the
    rank already replays graphs and what to look for outside them, not "capture the step
    in a CUDA graph"; the twin without the graph gets the capture advice."""
    import findings_cases

    from hta.analysis.findings.gpu_cover import graph_launches

    for graphed in (True, False):
        folder = tmp_path / str(graphed)
        folder.mkdir()
        trace, _ = findings_cases.host_bound(folder, graphed=graphed)
        assert graph_launches(trace.rank(0)) == (findings_cases.STEPS if graphed else 0)
        out = find(trace)
        (row,) = out[out["rule"] == "host_bound"].to_dict("records")
        if graphed:
            assert row["advice"].startswith("This rank already replays CUDA/HIP graphs (4 ")
            assert "capture the step" not in row["advice"]
        else:
            assert "capture the step in a CUDA graph" in row["advice"]


# -- a wait with the GPU busy caused no idle ---------------------------------------------
def test_a_wait_for_its_own_copy_is_not_host_sync(tmp_path):
    """The host waits 1.6 ms in each pageable copy's call while the GPU copies: the wait
    left the GPU busy, so host_sync claims nothing; the 300 µs of idle after each copy are
    the host's Python (host_bound), and pageable_copies names the copy."""
    trace = cases.busy_wait(tmp_path)
    out = find(trace)
    rules = _rules(out)
    assert "host_sync" not in rules
    assert {"host_bound", "pageable_copies"} <= set(rules)
    from hta.analysis.findings import analyse

    (cov,) = analyse(trace).coverage.to_dict("records")
    assert cov["idle_causes"].startswith("host_bound 100%")


def test_a_sync_on_queued_work_stays_host_sync(tmp_path):
    """The twin: loss.item() waits for a queued kernel (its own copy is tiny): host_sync."""
    import findings_cases

    trace, expected = findings_cases.host_sync(tmp_path)
    out = find(trace)
    assert "host_sync" in _rules(out)
    assert out[out["rule"] == "host_sync"]["est_saving(us)"].iloc[0] * 1e3 == expected


# -- the recurring saving is the median over steps ---------------------------------------
def _one_finding():
    import pandas as pd

    return pd.DataFrame({
        "rule": ["host_sync"], "severity": ["high"], "ranks": [[0]], "steps": [[]],
        "evidence": ["sync."], "est_saving(us)": [1000.0], "advice": [""],
        "title": ["Sync"], "subject": ["aten::item"], "section": [""],
        "share_pctg": [10.0]})


def test_the_saving_is_the_median_step_times_the_steps():
    """Five steps saving 900, 100, 100, 110 and 90 µs: the recurring saving is 100 µs a
    step, 500 µs over the five; the first step's 800 µs more is named as one-time."""
    import pandas as pd

    from hta.analysis.whatif.findings import findings_with_changes

    saved = [900.0, 100.0, 100.0, 110.0, 90.0]
    table = pd.DataFrame({"rank": 0, "step": [1, 2, 3, 4, 5],
                          "measured(us)": 2_000.0, "replayed(us)": 2_000.0,
                          "predicted(us)": [2_000.0 - s for s in saved]})
    (row,) = findings_with_changes(_one_finding(), lambda change: table).to_dict("records")
    assert row["saving_source"] == "replay"
    assert row["saving_per_step(us)"] == pytest.approx(100.0)
    assert row["est_saving(us)"] == pytest.approx(500.0)
    assert row["saving_step_pctg"] == pytest.approx(5.0)
    assert "800.000 ms" not in row["evidence"]
    assert "0.800 ms more in all than the median says, most in step 1" in row["evidence"]
    assert row["saving_low(us)"] <= 500.0 <= row["saving_high(us)"]


def test_the_saving_never_exceeds_what_the_replay_saves():
    """Steps saving 0, 100, 100 and 100 µs: the median says 400 over four, the replay
    300: the saving is 300, and the range stays within the replayed steps."""
    import pandas as pd

    from hta.analysis.whatif.findings import findings_with_changes

    table = pd.DataFrame({"rank": 0, "step": [1, 2, 3, 4], "measured(us)": 150.0,
                          "replayed(us)": 150.0, "predicted(us)": [150.0, 50.0, 50.0, 50.0]})
    (row,) = findings_with_changes(_one_finding(), lambda change: table).to_dict("records")
    assert row["est_saving(us)"] == pytest.approx(300.0)
    assert row["saving_high(us)"] <= 600.0
    assert "the total is what the replay saves over the steps" in row["evidence"]


def test_even_steps_have_no_one_time_excess():
    import pandas as pd

    from hta.analysis.whatif.findings import findings_with_changes

    table = pd.DataFrame({"rank": 0, "step": [1, 2, 3, 4], "measured(us)": 2_000.0,
                          "replayed(us)": 2_000.0, "predicted(us)": 1_900.0})
    (row,) = findings_with_changes(_one_finding(), lambda change: table).to_dict("records")
    assert row["est_saving(us)"] == pytest.approx(400.0)
    assert "one-time excess" not in row["evidence"]


def test_a_stepless_loop_is_replayed_iteration_by_iteration(tmp_path):
    """A decoding loop without ProfilerStep: the replay measures the findings' savings per
    iteration of the steady state (numbered from 1): a token read each iteration is a
    host_sync whose saving is the number of iterations times its median iteration's (at
    most what the replay saves over them)."""
    from hta.analysis.findings.warmup import iteration_windows
    from hta.trace_analysis import TraceAnalysis

    trace = cases.decode_loop(tmp_path, sync=True)
    windows = iteration_windows(trace.rank(0))
    n = len(windows)
    assert n >= 5
    a = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False)
    pred = a.replay().predict("no-host-sync", modelled=False, windows=a.replay().stepless_windows())
    assert pred["step"].tolist() == list(range(1, n + 1))
    out = a.get_findings()
    (top,) = out[out["rule"] == "host_sync"].to_dict("records")
    assert top["saving_source"] == "replay"
    assert top["saving_per_step(us)"] > 50.0  # the 100 µs of Python after each read
    # n x the median iteration, at most what the replay saves over them
    assert 0 < top["est_saving(us)"] <= n * top["saving_per_step(us)"] + 1e-6
    assert f"over {n} steps" in top["evidence"]


# -- the data loader's recurring cost apart from its start-up ----------------------------
def test_an_iterator_started_every_step_is_told_apart(tmp_path):
    """Each step starts a new DataLoader iterator (9.5 ms) and fetches one batch (3.9 ms):
    the finding says both, one start-up a step, and advises creating it once."""
    trace = cases.loader_restarts(tmp_path)
    (row,) = find(trace).query("rule == 'data_loading'").to_dict("records")
    assert "4 DataLoader iterator start-up(s)" in row["evidence"]
    assert "1.0 a step, so the loop starts a new iterator again and again" in row["evidence"]
    assert "the GPU idle 15.600 ms in them" in row["evidence"]  # 4 x 3.9 ms fetching
    assert row["advice"].startswith("Create the DataLoader and its iterator once")
    # both recur: the saving holds the start-ups and the fetches
    assert row["est_saving(us)"] >= 4 * (cases.ITER_START_NS + cases.FETCH_NS) / 1e3 * 0.99


def test_an_iterator_started_once_is_one_time(tmp_path):
    """The twin: one iterator for the loop: its start-up is named as one-time and not
    counted; the saving is the fetches' idle."""
    trace = cases.loader_restarts(tmp_path, every_step=False)
    out = find(trace)
    assert "warmup" in _rules(out)  # the start-up is held by the note
    assert out.query("rule == 'host_bound'")["est_saving(us)"].sum() < \
        cases.ITER_START_NS / 1e3 / 2
    (row,) = out.query("rule == 'data_loading'").to_dict("records")
    assert "once in the window, a one-time cost, not counted" in row["evidence"]
    assert not row["advice"].startswith("Create the DataLoader")
    # a multi-process loader the loop still waits for: its workers are too slow
    assert row["advice"].startswith("The loader already runs worker processes")
    assert row["est_saving(us)"] <= 4 * cases.FETCH_NS / 1e3 * 1.01


def test_summary_json_and_report_say_one_iteration(tmp_path, capsys):
    import json

    from hta.cli import main
    from hta.report.builder import SECTIONS, _context
    from hta.report.context import Section
    from hta.trace_analysis import TraceAnalysis

    cases.single_call(tmp_path)
    assert main(["summary", str(tmp_path), "--no-cache"]) == 0
    assert f"Findings describe, rank 0: {ONE_ITERATION}" in capsys.readouterr().out
    assert main(["summary", str(tmp_path), "--no-cache", "--json"]) == 0
    (cov,) = json.loads(capsys.readouterr().out)["findings_coverage"]
    assert cov["window"].startswith(ONE_ITERATION)
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    section = Section("coverage", "What the findings explain")
    build = next(b for sid, _t, _i, b in SECTIONS if sid == "coverage")
    build(_context(a, None, None, None), section)
    (table,) = [t for t in section.tables if t.title.startswith("What the findings explain")]
    assert table.note.startswith(f"Findings describe: {ONE_ITERATION}")


def test_a_slow_first_call_outside_runtime_calls_is_named_so(tmp_path):
    """The note does not call the optimizer's slow first aten::mul_ a kernel launch: the
    time was not in a runtime call."""
    trace = cases.optimizer_only(tmp_path)
    (note,) = find(trace).query("rule == 'warmup'").to_dict("records")
    assert "not in a runtime call" in note["evidence"]
    assert "lazy module loading" not in note["evidence"]


def test_no_replayed_saving_from_a_replay_that_misses_the_steps():
    """A replay off by 40 % of the measured steps predicts nothing: the finding keeps the
    rule's GPU time and says why."""
    import pandas as pd

    from hta.analysis.whatif.findings import MAX_REPLAY_ERROR, findings_with_changes

    table = pd.DataFrame({"rank": 0, "step": [1, 2, 3], "measured(us)": 2_000.0,
                          "replayed(us)": 1_200.0, "predicted(us)": 1_000.0})
    assert MAX_REPLAY_ERROR < 0.4
    (row,) = findings_with_changes(_one_finding(), lambda change: table).to_dict("records")
    assert row["saving_source"] == "gpu-time"
    assert row["est_saving(us)"] == 1000.0
    assert "the replay does not reproduce these steps (off by 40%" in row["evidence"]


def test_a_new_shape_every_step_recurs(tmp_path):
    """A slow first call of a new shape in every step is no one-time cost; in step 1
    only, it is."""
    for every in (True, False):
        folder = tmp_path / str(every)
        folder.mkdir()
        ot = one_time_costs(cases.new_shapes(folder, every_step=every).rank(0))
        assert ot.rows.size == (0 if every else 1)


def test_a_site_of_pageable_uploads_is_the_pinned_copies_fix():
    """host_sync on a site of uploads from pageable memory replays pinned-copies (the
    pageable_copies fix, then counted once); a .item() download stays no-sync."""
    from hta.analysis.whatif.findings import change_for

    upload = ("rank 0: ...; 100% from aten::to: 3 time(s); copies: 3 × Memcpy HtoD "
              "(Pageable -> Device) of 4.0 MB each; the longest ...")
    item = "rank 0: ...; copies: 8 × Memcpy DtoH (Device -> Pageable) of 4 B each; ..."
    assert change_for("host_sync", [0], "aten::to", "", upload) == "pinned-copies"
    assert change_for("host_sync", [0], "aten::item", "", item) == "no-sync:aten::item"


def test_no_compile_advice_for_compiled_code(tmp_path):
    """A host-bound rank whose step runs compiled code: the dispatch advice does not say
    "fuse with torch.compile"."""
    from kineto_builder import TraceBuilder

    from hta.analysis.findings.gpu_cover import COMPILED_HOST_ADVICE, graph_aware
    from hta.analysis.findings.hostbound import ADVICE
    from hta.job.load import load_trace

    b = TraceBuilder(rank=0)
    b.cpu_op("Torch-Compiled Region: 0/0", ts=0, dur=10_000)
    b.launch_kernel("triton_poi_fused_0", cpu_ts=1_000, cpu_dur=5_000, gpu_ts=8_000,
                    gpu_dur=5_000)
    b.write(tmp_path / "rank-0.json")
    rt = load_trace(tmp_path, progress=False, cache=False).rank(0)
    assert graph_aware(rt, ADVICE["dispatch"]) == COMPILED_HOST_ADVICE
    assert graph_aware(rt, ADVICE["slow_op"]) == ADVICE["slow_op"]  # no compile advice


def test_a_guard_check_is_no_compilation(tmp_path):
    """'TorchDynamo Cache Lookup' runs before every compiled call: it is no compilation,
    and the compiled runs after it are no 'first run after a compilation'."""
    from kineto_builder import TraceBuilder

    from hta.analysis.findings.onetime import COMPILING
    from hta.job.load import load_trace

    assert not COMPILING.search("TorchDynamo Cache Lookup")
    assert COMPILING.search("TorchDynamo") and COMPILING.search("entire_frame_compile")
    b = TraceBuilder(rank=0)
    t = 0
    for _ in range(4):
        b.cpu_op("TorchDynamo Cache Lookup", ts=t, dur=1_500_000)
        b.cpu_op("Torch-Compiled Region: 0/0", ts=t + 1_600_000, dur=2_000_000)
        b.launch_kernel("triton_poi_fused_0", cpu_ts=t + 3_500_000, cpu_dur=5_000,
                        gpu_ts=t + 3_600_000, gpu_dur=200_000)
        t += 4_000_000
    b.write(tmp_path / "rank-0.json")
    assert one_time_costs(load_trace(tmp_path, progress=False, cache=False).rank(0)
                          ).rows.size == 0


def test_a_first_launch_while_nccl_waits_is_one_time(tmp_path):
    """A 12 ms first launch (lazy module loading) while a collective kernel waits for a
    peer: the waiting kernel is no GPU work, so the launch is one-time."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace

    b = TraceBuilder(rank=0)
    b.gpu("ncclDevKernel_AllGather_RING_LL", "kernel", 0, 20_000_000, stream=20)
    t = 100_000
    for k in range(10):
        dur = 12_000_000 if k == 0 else 5_000
        b.launch_kernel("silu_kernel", cpu_ts=t, cpu_dur=dur, gpu_ts=t + dur + 5_000,
                        gpu_dur=3_000)
        t += dur + 50_000
    b.write(tmp_path / "rank-0.json")
    ot = one_time_costs(load_trace(tmp_path, progress=False, cache=False).rank(0))
    assert list(ot.why) == ["first launch"]


def test_a_cold_call_nested_in_a_compiled_region_is_one_time(tmp_path):
    """One cold pass: the first collective's aten::empty, inside CompiledFunction, takes
    2.6 ms against 10 µs for the other allocations: one-time, though not top-level."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace

    b = TraceBuilder(rank=0)
    b.cpu_op("CompiledFunction", ts=0, dur=8_000_000)
    t = 10_000
    for k in range(8):
        dur = 2_600_000 if k == 2 else 10_000
        b.cpu_op("aten::empty", ts=t, dur=dur)
        b.cpu_op("aten::add", ts=t + dur + 1_000, dur=20_000)
        b.launch_kernel("add_kernel", cpu_ts=t + dur + 2_000, cpu_dur=5_000,
                        gpu_ts=t + dur + 10_000, gpu_dur=50_000)
        t += dur + 100_000
    b.write(tmp_path / "rank-0.json")
    rt = load_trace(tmp_path, progress=False, cache=False).rank(0)
    ot = one_time_costs(rt)
    assert [rt.symbols[int(n)] for n in rt.events["name"].to_numpy()[ot.rows]] == [
        "aten::empty"]
    assert int(ot.end[0] - ot.start[0]) == 2_600_000


def _lead_in(tmp_path, steps: bool):
    """Three calls of 1 ms of host work then a 200 µs kernel; the first call's host work
    runs 5 ms before the trace's first kernel. With ``steps`` each call is a
    ProfilerStep (a profile started mid-run); without, one pass of three different
    operators."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace

    b = TraceBuilder(rank=0)
    t = 0
    for k in range(3):
        host = 5_000_000 if k == 0 else 1_000_000
        if steps:
            b.annotation(f"ProfilerStep#{k + 1}", ts=t, dur=host + 300_000)
        name = "aten::unique" if steps else f"aten::op{k}"
        b.cpu_op(name, ts=t + 1_000, dur=host - 20_000)
        b.launch_kernel("k", cpu_ts=t + host - 10_000, cpu_dur=5_000, gpu_ts=t + host,
                        gpu_dur=200_000)
        t += host + 300_000
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_a_profile_of_steps_claims_no_idle_before_its_first_kernel(tmp_path):
    """Steps: the 5 ms before the trace's first kernel are not host-bound idle (the GPU
    may still run the unrecorded step before); one pass: they are its latency."""
    saving = {}
    for steps in (True, False):
        folder = tmp_path / str(steps)
        folder.mkdir()
        out = find(_lead_in(folder, steps))
        rows = out[out["rule"] == "host_bound"]
        saving[steps] = float(rows["est_saving(us)"].sum())
    assert saving[True] < 2_500  # the two later steps' gaps, about 1.1 ms each
    assert saving[False] > 5_000


def test_a_runtime_api_slow_on_first_use_is_one_time(tmp_path):
    """One pass: cuBLAS queries the device on its first use (3 ms), 10 µs later: the first
    query is one-time; the twin, 3 ms every time, recurs."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace

    for every in (False, True):
        folder = tmp_path / str(every)
        folder.mkdir()
        b = TraceBuilder(rank=0)
        t = 0
        for k in range(5):
            q = 3_000_000 if (k == 0 or every) else 10_000
            b.cpu_op(f"aten::op{k}", ts=t, dur=q + 30_000)
            b.runtime("cudaOccupancyMaxActiveBlocksPerMultiprocessor", ts=t + 1_000, dur=q,
                      cat="cuda_runtime")
            b.launch_kernel("gemm", cpu_ts=t + q + 5_000, cpu_dur=5_000,
                            gpu_ts=t + q + 15_000, gpu_dur=50_000)
            t += q + 100_000
        b.write(folder / "rank-0.json")
        ot = one_time_costs(load_trace(folder, progress=False, cache=False).rank(0))
        assert ot.rows.size == (0 if every else 1)


def test_steps_that_block_on_the_gpu_claim_their_lead_in_beyond_one_step(tmp_path):
    """The same profile of steps, each step ending in a synchronize: the host runs at
    most one step ahead, so at most one step's GPU work (200 µs) can be pending when
    the trace begins, and the first step's 5 ms lead-in beyond it is host-bound idle;
    the twin without the synchronizes keeps it out (above)."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace

    b = TraceBuilder(rank=0)
    t = 0
    for k in range(3):
        host = 5_000_000 if k == 0 else 1_000_000
        b.annotation(f"ProfilerStep#{k + 1}", ts=t, dur=host + 300_000)
        b.cpu_op("aten::unique", ts=t + 1_000, dur=host - 20_000)
        b.launch_kernel("k", cpu_ts=t + host - 10_000, cpu_dur=5_000, gpu_ts=t + host,
                        gpu_dur=200_000)
        b.runtime("cudaDeviceSynchronize", ts=t + host + 1_000, dur=199_000)
        t += host + 300_000
    b.write(tmp_path / "rank-0.json")
    out = find(load_trace(tmp_path, progress=False, cache=False))
    saving = float(out[out["rule"] == "host_bound"]["est_saving(us)"].sum())
    assert saving > 5_000 - 200 + 2 * 900  # the lead-in beyond 200 µs, and the later gaps
