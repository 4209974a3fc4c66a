"""Patterns from the judgement of unseen public traces, each with its twin: TorchScript
compiling its fusion groups unrecorded (one-time), shares of the time that recurs in a
pass one-time costs fill, and a first "iteration" that holds the pass's embedding."""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

from hta.analysis.findings import find
from hta.analysis.findings.kernels import RULES as KERNEL_RULES
from hta.analysis.findings.loops import iterations_found
from hta.analysis.findings.onetime import one_time_costs
from hta.analysis.findings.warmup import RULES as WARMUP_RULES
from hta.job.load import load_trace
from hta.model.trace import Trace

SGEMM = "ampere_sgemm_128x64_tn"
FUSED = "fused__autocast_to_123"


def _gemms_after(b: TraceBuilder, t: int, tmp_path: Path) -> Trace:
    """Nine fp32 GEMMs of 1 ms from ``t``, then the trace written and loaded."""
    for _ in range(9):
        b.cpu_op("aten::mm", ts=t, dur=20_000)
        b.launch_kernel(SGEMM, cpu_ts=t + 1_000, cpu_dur=5_000, gpu_ts=t + 30_000,
                        gpu_dur=1_000_000)
        t += 1_050_000
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def _scripted_pass(tmp_path: Path, compile_ns: int) -> Trace:
    """A scripted function (``delta_r2``) that records nothing for ``compile_ns`` before
    its fusion group runs, then fp32 GEMMs of 10 ms in all."""
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::linear", ts=1_000, dur=20_000)
    b.launch_kernel(SGEMM, cpu_ts=2_000, cpu_dur=5_000, gpu_ts=30_000, gpu_dur=1_000_000)
    t = 1_100_000
    b.cpu_op("delta_r2", ts=t, dur=compile_ns + 300_000)
    b.cpu_op("fallback_function", ts=t + compile_ns, dur=200_000)
    b.cpu_op(FUSED, ts=t + compile_ns + 10_000, dur=150_000)
    b.launch_kernel(FUSED, cpu_ts=t + compile_ns + 20_000, cpu_dur=10_000,
                    gpu_ts=t + compile_ns + 40_000, gpu_dur=100_000)
    t += compile_ns + 400_000
    return _gemms_after(b, t, tmp_path)


def test_a_scripted_function_compiling_unrecorded_is_one_time(tmp_path):
    ot = one_time_costs(_scripted_pass(tmp_path, 200_000_000).rank(0))
    assert "script compile" in ot.why.tolist()


def test_twin_a_scripted_function_already_compiled_is_not(tmp_path):
    ot = one_time_costs(_scripted_pass(tmp_path, 100_000).rank(0))
    assert "script compile" not in ot.why.tolist()


def _gap_before_script(tmp_path: Path, gap_ns: int, fused: bool = True) -> Trace:
    """``delta_r2`` called after ``gap_ns`` in which its thread records nothing (the
    public particle-transformer trace: 303 ms before its first optimised run); with
    ``fused``, it runs a TorchScript fusion group (the executor optimised its graph for
    this run), else plain operators (Python code of that name, nothing compiled)."""
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::linear", ts=1_000, dur=20_000)
    b.launch_kernel(SGEMM, cpu_ts=2_000, cpu_dur=5_000, gpu_ts=30_000, gpu_dur=1_000_000)
    t = 1_100_000 + gap_ns
    b.cpu_op("delta_r2", ts=t, dur=600_000)
    b.cpu_op("fallback_function" if fused else "aten::sub", ts=t + 20_000, dur=200_000)
    b.launch_kernel(FUSED if fused else "vectorized_elementwise_kernel", cpu_ts=t + 30_000,
                    cpu_dur=10_000, gpu_ts=t + 50_000, gpu_dur=100_000)
    t += 700_000
    return _gemms_after(b, t, tmp_path)


def test_the_gap_before_a_scripted_functions_first_optimised_run_is_one_time(tmp_path):
    """300 ms recorded nowhere on the thread, then the first call holding a fusion group:
    one cost, "script compile", from the end of the thread's last record (1.021 ms) to
    the call's end, and the warm-up note says how much came before the call."""
    rt = _gap_before_script(tmp_path, 300_000_000).rank(0)
    ot = one_time_costs(rt)
    (i,) = [k for k, why in enumerate(ot.why.tolist()) if why == "script compile"]
    assert int(ot.start[i]) == 21_000 and int(ot.end[i]) == 1_100_000 + 300_000_000 + 600_000
    (note,) = [f for rule in WARMUP_RULES for f in rule.check(rt, None)]
    assert "before the call's record began, nothing recorded on its thread" in note.evidence


def test_twin_a_gap_before_plain_code_is_not_a_compile(tmp_path):
    """The same gap before a call of that name without a fusion group, and a fused call
    after a gap shorter than itself: no "script compile"."""
    ot = one_time_costs(_gap_before_script(tmp_path / "plain", 300_000_000, fused=False)
                        .rank(0))
    assert "script compile" not in ot.why.tolist()
    ot = one_time_costs(_gap_before_script(tmp_path / "short", 500_000).rank(0))
    assert "script compile" not in ot.why.tolist()


def test_shares_are_of_the_time_that_recurs(tmp_path):
    """A 200 ms compile in a pass of about 11 ms of work: the fp32 GEMMs' 5 ms saving is
    a high share of the recurring time, not 2 % of a window the compile fills."""
    trace = _scripted_pass(tmp_path, 200_000_000)
    out = find(trace, rules=WARMUP_RULES + KERNEL_RULES, min_share=0.0)
    row = out[out["rule"] == "fp32_gemm"].iloc[0]
    assert row["est_saving(us)"] == 5_000
    assert row["severity"] == "high" and row["share_pctg"] > 10


# -- a first "iteration" that holds the embedding -------------------------------------------
def _blocks(tmp_path: Path, head: bool) -> Trace:
    """Top-level calls: ``squeeze``, a slow embedding (two calls of shapes no block
    has), then eight blocks of ``squeeze``, ``linear``, ``softmax``; with ``head`` a
    classifier after them (shapes no block has)."""
    b = TraceBuilder(rank=0)
    t, gpu = 1_000, 100_000

    def call(name: str, dur: int, dims: list, kernel_ns: int = 20_000) -> None:
        nonlocal t, gpu
        b.cpu_op(name, ts=t, dur=dur, **{"Input Dims": dims})
        b.launch_kernel(SGEMM, cpu_ts=t + 1_000, cpu_dur=2_000, gpu_ts=max(gpu, t + 5_000),
                        gpu_dur=kernel_ns)
        gpu = max(gpu, t + 5_000) + kernel_ns + 1_000
        t += dur + 2_000

    call("aten::squeeze", 10_000, [[128, 1, 17]])
    call("aten::batch_norm", 3_000_000, [[128, 128, 17]])
    call("aten::linear", 2_000_000, [[128, 128, 17], [128, 17]])
    for _ in range(8):
        call("aten::squeeze", 10_000, [[128, 1, 128]])
        call("aten::linear", 100_000, [[128, 128, 128], [128, 128]])
        call("aten::softmax", 100_000, [[1024, 128, 128], [], []])
    if head:
        call("aten::layer_norm", 100_000, [[1, 128, 128], [128]])
        call("aten::linear", 100_000, [[128, 128], [10, 128]])
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_a_first_period_holding_the_embedding_is_one_pass(tmp_path):
    assert iterations_found(_blocks(tmp_path, head=True).rank(0)) is None


def test_twin_without_a_head_the_blocks_stay_a_loop(tmp_path):
    found = iterations_found(_blocks(tmp_path, head=False).rank(0))
    assert found is not None and found.warm_up == 1


# -- ROCm: links by External id, kernels built on first use ---------------------------------
def _rocm_conv(tmp_path: Path, build_ns: int) -> Trace:
    """A ROCm trace whose runtime calls and kernels carry no correlation, only an
    ``External id`` of their own (shared by a launch and its kernel) and ``ac2g`` flows:
    ``aten::miopen_convolution`` loads kernel code, records nothing for ``build_ns``,
    then launches its kernel."""
    b = TraceBuilder(rank=0)
    b.cpu_op("aten::miopen_convolution", ts=1_000, dur=build_ns + 600_000)
    b.runtime("hipModuleLoadData", ts=2_000, dur=500_000, **{"External id": 7})
    t = 2_000 + 500_000 + build_ns
    b.runtime("hipExtModuleLaunchKernel", ts=t, dur=20_000, **{"External id": 8})
    b.gpu("igemm_fwd_gtcx3_nhwc_fp32", "kernel", ts=t + 30_000, dur=10_000,
          **{"External id": 8})
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_launches_and_kernels_linked_by_their_own_external_id(tmp_path):
    rt = _rocm_conv(tmp_path, 8_000_000).rank(0)
    ev = rt.events
    names = [rt.symbols[n] for n in ev["name"].to_numpy()]
    kernel = names.index("igemm_fwd_gtcx3_nhwc_fp32")
    launch = names.index("hipExtModuleLaunchKernel")
    assert ev["index_correlation"].to_numpy()[kernel] == launch


def test_an_operator_building_its_kernels_is_one_time(tmp_path):
    ot = one_time_costs(_rocm_conv(tmp_path, 8_000_000).rank(0))
    assert "kernel build" in ot.why.tolist()


def test_twin_an_operator_with_its_kernels_built_is_not(tmp_path):
    assert "kernel build" not in one_time_costs(_rocm_conv(tmp_path, 0).rank(0)).why.tolist()


def test_a_replayed_share_in_one_pass_is_of_the_time_that_recurs(tmp_path):
    """The same pass through the facade: a replayed saving is a share of the pass
    without its one-time costs, said so in the evidence."""
    from hta.trace_analysis import TraceAnalysis

    _scripted_pass(tmp_path, 200_000_000)
    out = TraceAnalysis(trace_dir=str(tmp_path), progress=False, cache=False).get_findings()
    replayed = out[out["saving_source"] == "replay"]
    assert len(replayed)
    row = replayed.iloc[0]
    assert "of the pass without its one-time costs" in row["evidence"]
    assert row["share_pctg"] == round(row["saving_step_pctg"], 2)
    # of about 11 ms that recur, not of the 210 ms pass the compile fills
    assert row["share_pctg"] > 10 * 100 * row["est_saving(us)"] / 210_000
