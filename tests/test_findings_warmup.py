"""The ``warmup`` note: one-time costs found, held from every saving, host_sync leaving
them out; a twin without them and one where the cost recurs."""

from __future__ import annotations

import findings_cases as cases
import numpy as np
from conftest import shared_trace

from hta.analysis.findings import analyse, analysis_window, find
from hta.analysis.findings.onetime import FACTOR, MIN_NS, one_time_costs
from hta.analysis.findings.warmup import window_text
from hta.job.load import load_trace


def _rules(out) -> list[str]:
    return out["rule"].tolist()


def test_first_call_free_is_a_one_time_cost_not_host_sync(tmp_path):
    trace, expected = cases.warm_up(tmp_path)
    result = analyse(trace)
    out = result.findings
    assert "host_sync" not in _rules(out)
    note = out[out["rule"] == "warmup"].iloc[0]
    assert note["severity"] == "info" and note["est_saving(us)"] == 0
    assert "aten::linear" in note["evidence"] and "cudaFree" in note["evidence"]
    assert "allocator" in note["evidence"]
    assert "schedule" in note["advice"] and "CUDA_MODULE_LOADING" in note["advice"]
    ot = one_time_costs(trace.rank(0))
    assert ot.rows.size == 1 and int(ot.end[0] - ot.start[0]) == expected
    # no ProfilerStep: the findings describe the steady state after the cost
    rt = trace.rank(0)
    # from the next iteration on: the second call starts 4 µs after the first ends
    window = analysis_window(rt)
    assert window == (int(ot.end[0]) + 4_000, int(rt.events["end"].max()))
    assert "steady state" in note["evidence"] and "steady state" in window_text(rt)
    assert "left out" in window_text(rt)
    assert result.coverage.iloc[0]["window(us)"] * 1e3 == window[1] - window[0]


def test_recurring_free_is_host_sync_not_warm_up(tmp_path):
    trace, expected = cases.warm_up(tmp_path, every=True)
    out = find(trace)
    assert expected == 0
    assert "warmup" not in _rules(out)
    assert "host_sync" in _rules(out)


def test_twin_without_one_time_cost_has_no_note(tmp_path):
    trace, _ = cases.warm_up(tmp_path, free_ns=0)
    assert "warmup" not in _rules(find(trace))
    assert one_time_costs(trace.rank(0)).rows.size == 0


def test_short_first_call_is_not_one_time(tmp_path):
    # 10x its later calls but under MIN_NS: not judged
    trace, _ = cases.warm_up(tmp_path, free_ns=int(MIN_NS * 0.5))
    assert one_time_costs(trace.rank(0)).rows.size == 0
    assert FACTOR >= 10


def test_real_traces_one_time_costs_are_first_calls_or_setup():
    """On the shared traces every one-time cost is long, mostly GPU-idle, and never the
    recurring frees of a training step."""
    for name in ("df_index_resolver", "trace_diff/control", "critical_path/alexnet",
                 "nccl_parser_config"):
        trace = load_trace(shared_trace(*name.split("/")), progress=False, cache=False)
        for r in trace.get_ranks():
            ot = one_time_costs(trace.rank(r))
            dur = ot.end - ot.start
            assert (dur >= MIN_NS).all()
            assert (2 * ot.idle >= dur).all()
            assert np.isin(ot.why, ["first", "first launch", "autotune", "setup", "warm-up",
                                      "allocator"]).all()


def test_cost_in_the_window_is_held_from_every_saving(tmp_path):
    """With ProfilerSteps the window stays the steps: a one-time cost inside the first step
    is held by the note, so the coverage counts its idle time as explained (warm-up)."""
    trace, expected = cases.warm_up(tmp_path, steps=True)
    result = analyse(trace)
    assert "host_sync" not in _rules(result.findings)
    assert "warmup" in _rules(result.findings)
    (row,) = result.coverage.to_dict("records")
    assert row["idle_causes"].startswith("warmup ")
    assert "step" in window_text(trace.rank(0))
    assert expected > 0


def test_whole_trace_without_cost_or_steps(tmp_path):
    trace, _ = cases.warm_up(tmp_path, free_ns=0)
    assert window_text(trace.rank(0)).startswith("the whole trace")


def test_summary_json_and_report_show_the_window_and_the_note(tmp_path, capsys):
    import json

    from hta.cli import main
    from hta.report.builder import SECTIONS, _context
    from hta.report.context import Section
    from hta.trace_analysis import TraceAnalysis

    cases.warm_up(tmp_path)
    assert main(["summary", str(tmp_path), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "Warm-up (one-time, not a saving): rank 0: 1 one-time cost(s)" in text
    assert "Findings describe, rank 0: the steady state" in text
    assert main(["summary", str(tmp_path), "--no-cache", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    (cov,) = payload["findings_coverage"]
    assert cov["window"].startswith("the steady state")
    assert "warmup" in [f["rule"] for f in payload["findings"]]
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    section = Section("coverage", "What the findings explain")
    build = next(b for sid, _t, _i, b in SECTIONS if sid == "coverage")
    build(_context(a, None, None, None), section)
    (table,) = [t for t in section.tables if t.title.startswith("What the findings explain")]
    assert table.note.startswith("Findings describe: the steady state")


def _conv_loop(tmp_path, tune: bool):
    """Five steps of one convolution (16 µs on the CPU, 200 µs kernel). With ``tune`` the
    first call times three trial kernels of 1 ms, each followed by a cudaEventSynchronize
    (cuDNN's benchmark find): 3.1 ms, the GPU busy most of it."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace as load

    b = TraceBuilder(rank=0)
    t = 0
    for k in range(5):
        first = tune and k == 0
        dur = 16_000 + (3 * 1_050_000 if first else 0)
        b.annotation(f"ProfilerStep#{k + 1}", ts=t, dur=dur + 250_000)
        b.cpu_op("aten::cudnn_convolution", ts=t, dur=dur)
        c = t + 1_000
        if first:
            for _ in range(3):
                b.launch_kernel("trial_conv", cpu_ts=c, cpu_dur=5_000, gpu_ts=c + 6_000,
                                gpu_dur=1_000_000)
                b.runtime("cudaEventSynchronize", ts=c + 6_000, dur=1_001_000)
                c += 1_050_000
        b.launch_kernel("implicit_convolve", cpu_ts=c, cpu_dur=5_000, gpu_ts=c + 10_000,
                        gpu_dur=200_000)
        t += dur + 250_000
    b.write(tmp_path / "rank-0.json")
    return load(tmp_path, progress=False, cache=False)


def test_autotuning_is_one_time_and_not_host_sync(tmp_path):
    trace = _conv_loop(tmp_path, tune=True)
    ot = one_time_costs(trace.rank(0))
    assert ot.why.tolist() == ["autotune"]
    out = find(trace)
    assert "host_sync" not in _rules(out)


def test_conv_without_tuning_is_not_one_time(tmp_path):
    trace = _conv_loop(tmp_path, tune=False)
    assert one_time_costs(trace.rank(0)).rows.size == 0


def test_the_repeating_iteration_is_found(tmp_path):
    """Ten calls of aten::linear, the first one-time: ten iterations of one top-level call,
    the first a warm-up one; the steady state holds nine, 20 µs apart (16 µs call +
    4 µs)."""
    from hta.analysis.findings.loops import iterations_found

    trace, _ = cases.warm_up(tmp_path)
    rt = trace.rank(0)
    it = iterations_found(rt)
    assert it is not None
    assert (it.calls, it.starts.size, it.warm_up) == (1, 10, 1)
    assert it.median_ns == cases.WARM_OP_NS + 4_000
    assert it.count_in(analysis_window(rt)) == 9
    assert "it repeats a sequence of 1 top-level calls 9 times (from one aten::linear to " \
        "the next), " \
        "20.0 µs each" in window_text(rt)


def test_no_repetition_no_iteration(tmp_path):
    from kineto_builder import TraceBuilder

    from hta.analysis.findings.loops import iterations_found
    from hta.job.load import load_trace as load

    b = TraceBuilder(rank=0)
    for k, name in enumerate(["aten::a", "aten::b", "aten::c", "aten::d", "aten::e"]):
        b.cpu_op(name, ts=k * 50_000, dur=20_000)
        b.launch_kernel(f"k{k}", cpu_ts=k * 50_000 + 1_000, cpu_dur=5_000,
                        gpu_ts=k * 50_000 + 10_000, gpu_dur=10_000)
    b.write(tmp_path / "rank-0.json")
    rt = load(tmp_path, progress=False, cache=False).rank(0)
    assert iterations_found(rt) is None
    assert "repeats" not in window_text(rt)


def _loop(tmp_path, first_ms: float, iterations: int = 8, extra_first: int = 0):
    """A loop of ``iterations`` iterations of randn, three linears and an optimizer step
    (each call 20 µs on the CPU, its kernel 10 µs), 200 µs apart. The first iteration's
    calls each take ``first_ms`` more in total (spread over its five calls: none alone
    10x its later calls when short), and it holds ``extra_first`` more calls (the
    optimizer creating its state)."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace as load

    b = TraceBuilder(rank=0)
    t = 0
    names = ["aten::randn", "aten::linear", "aten::linear", "aten::linear",
             "aten::_foreach_add_"]
    for k in range(iterations):
        calls = names + (["aten::zeros_like"] * extra_first if k == 0 else [])
        each = 20_000 + (int(first_ms * 1e6) // len(calls) if k == 0 else 0)
        for name in calls:
            b.cpu_op(name, ts=t, dur=each)
            b.launch_kernel(f"{name}_kernel", cpu_ts=t + 1_000, cpu_dur=5_000,
                            gpu_ts=t + 8_000, gpu_dur=10_000)
            t += each + 20_000
        t += 100_000
    b.write(tmp_path / "rank-0.json")
    return load(tmp_path, progress=False, cache=False)


def test_a_slow_first_iteration_is_warm_up_whatever_its_calls(tmp_path):
    from hta.analysis.findings.loops import WARM_ITERATION_FACTOR, iterations_found

    trace = _loop(tmp_path, first_ms=3.0, extra_first=3)
    rt = trace.rank(0)
    it = iterations_found(rt)
    assert it is not None and it.calls == 5 and it.warm_up == 1
    assert it.starts.size == 8
    steady = 5 * 40_000 + 100_000
    assert it.median_ns == steady
    assert it.durations[0] >= WARM_ITERATION_FACTOR * steady
    # the window starts with the second iteration, at its randn
    assert analysis_window(rt)[0] == int(it.starts[1])
    out = find(trace)
    note = out[out["rule"] == "warmup"].iloc[0]
    assert "its first 1 iteration(s)" in note["evidence"]
    assert "the 7 after" in note["evidence"]
    assert "it repeats a sequence of 5 top-level calls 7 times" in window_text(rt)


def test_even_iterations_are_not_warm_up(tmp_path):
    from hta.analysis.findings.loops import iterations_found

    trace = _loop(tmp_path, first_ms=0.0)
    rt = trace.rank(0)
    it = iterations_found(rt)
    assert it is not None and it.warm_up == 0 and it.starts.size == 8
    assert analysis_window(rt) == (int(rt.events["ts"].min()), int(rt.events["end"].max()))
    assert "warmup" not in _rules(find(trace))


def _python_launches(tmp_path, slow_first: bool):
    """Twenty launches of a kernel from Python (no operator around them), 5 µs each and
    50 µs apart; with ``slow_first`` the first takes 3 ms (module loading)."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace as load

    b = TraceBuilder(rank=0)
    t = 0
    for k in range(20):
        call = 3_000_000 if (slow_first and k == 0) else 5_000
        b.launch_kernel("triton_poi_fused_add_0", cpu_ts=t, cpu_dur=call,
                        gpu_ts=t + call + 2_000, gpu_dur=10_000)
        t += call + 50_000
    b.write(tmp_path / "rank-0.json")
    return load(tmp_path, progress=False, cache=False)


def test_first_launch_from_python_is_one_time(tmp_path):
    ot = one_time_costs(_python_launches(tmp_path, True).rank(0))
    assert ot.why.tolist() == ["first launch"]
    assert int(ot.end[0] - ot.start[0]) == 3_000_000


def test_even_launches_are_not_one_time(tmp_path):
    assert one_time_costs(_python_launches(tmp_path, False).rank(0)).rows.size == 0


def _compiled_loop(tmp_path, compile_step: int, new_frame: bool = False):
    """Four steps, each running ``Torch-Compiled Region: 0/0`` (a kernel of 200 µs); in
    step ``compile_step`` an ``entire_frame_compile`` of 50 ms (the GPU idle) runs first:
    a recompilation when compiled code ran in an earlier step, the first compilation
    when it is step 1. With ``new_frame`` the compilation is of another function, whose
    region (``1/0``) runs from that step on: no recompilation."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace as load

    b = TraceBuilder(rank=0)
    t = 0
    for k in range(1, 5):
        extra = 50_000_000 if k == compile_step else 0
        length = extra + 400_000
        with b.step(k, ts=t, dur=length):
            if extra:
                b.cpu_op("entire_frame_compile", ts=t + 1_000, dur=extra - 2_000)
            r = t + extra + 1_000
            region = "1/0" if new_frame and k >= compile_step else "0/0"
            b.cpu_op(f"Torch-Compiled Region: {region}", ts=r, dur=100_000)
            b.launch_kernel("triton_poi_fused_0", cpu_ts=r + 10_000, cpu_dur=5_000,
                            gpu_ts=r + 20_000, gpu_dur=200_000)
        t += length
    b.write(tmp_path / "rank-0.json")
    return load(tmp_path, progress=False, cache=False)


def test_a_compilation_after_compiled_code_ran_is_a_recompilation(tmp_path):
    out = find(_compiled_loop(tmp_path, compile_step=3))
    note = out[out["rule"] == "warmup"].iloc[0]
    assert "A recompilation: compiled code ran before it without compiling " \
        "(Torch-Compiled Region: 0/0 in step 2), then compiled again in step 3" \
        in note["evidence"]
    assert "TORCH_LOGS=recompiles" in note["advice"] and "dynamic=True" in note["advice"]


def test_a_compilation_of_another_frame_is_no_recompilation(tmp_path):
    """Frame 1 compiled once after frame 0 ran: two functions each compiled once."""
    out = find(_compiled_loop(tmp_path, compile_step=3, new_frame=True))
    note = out[out["rule"] == "warmup"].iloc[0]
    assert "recompilation" not in note["evidence"]


def test_the_first_compilation_is_no_recompilation(tmp_path):
    out = find(_compiled_loop(tmp_path, compile_step=1))
    note = out[out["rule"] == "warmup"].iloc[0]
    assert "recompilation" not in note["evidence"]
    assert "schedule" in note["advice"]


def test_the_first_run_after_a_compilation_is_one_time(tmp_path):
    """A compilation, then four runs of the compiled region, the first 3 ms on the CPU
    (its kernels loaded) and the others 100 µs: the first run is one-time, the later
    ones are not."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace as load

    b = TraceBuilder(rank=0)
    b.cpu_op("entire_frame_compile", ts=0, dur=50_000_000)
    t = 50_010_000
    for k in range(4):
        dur = 3_000_000 if k == 0 else 100_000
        b.cpu_op("Torch-Compiled Region: 0/0", ts=t, dur=dur)
        b.launch_kernel("triton_poi_fused_0", cpu_ts=t + dur - 10_000, cpu_dur=5_000,
                        gpu_ts=t + dur, gpu_dur=200_000)
        t += dur + 300_000
    b.write(tmp_path / "rank-0.json")
    rt = load(tmp_path, progress=False, cache=False).rank(0)
    ot = one_time_costs(rt)
    names = [rt.symbols[int(n)] for n in rt.events["name"].to_numpy()[ot.rows]]
    assert names == ["entire_frame_compile", "Torch-Compiled Region: 0/0"]
    assert int(ot.end[1] - ot.start[1]) == 3_000_000
