"""The findings on the real CUDA traces in ``sample_traces/cuda_h100`` (H100, torch 2.11)
name the cause each workload was built to show (see that folder's README)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from hta.analysis.findings import analysis_window
from hta.analysis.findings.loops import iterations_found
from hta.trace_analysis import TraceAnalysis

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces" / "cuda_h100"


@cache
def _analysis(workload: str) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=str(SAMPLES / workload), cache=False, progress=False)


@cache
def _findings(workload: str) -> pd.DataFrame:
    return _analysis(workload).get_findings()


def _problems(workload: str) -> pd.DataFrame:
    out = _findings(workload)
    return out[out["severity"] != "info"]


def _top(workload: str) -> str:
    return str(_problems(workload).iloc[0]["rule"])


@pytest.mark.parametrize(("workload", "rule"), [
    ("host_bound_steps", "host_bound"),
    ("dataloader_steps", "data_loading"),
    ("pageable_copy_steps", "pageable_copies"),
    ("sync_steps", "host_bound"),
])
def test_the_top_finding_is_the_cause_built_in(workload: str, rule: str) -> None:
    assert _top(workload) == rule


def test_python_between_layers_is_the_python_class() -> None:
    top = _problems("host_bound_steps").iloc[0]
    assert top["subject"] == "python"
    # recorded with_stack=True: the frames of the Python work between the layers
    assert "(with_stack frames): " in top["evidence"]
    assert "host_bound_steps" in top["evidence"] and "<built-in function sum>" in top["evidence"]


def test_a_step_that_reads_the_loss_syncs_and_runs_fp32_gemms() -> None:
    rules = _problems("sync_steps")["rule"].tolist()
    assert "host_sync" in rules and "fp32_gemm" in rules


def test_a_busy_gpu_has_no_problem() -> None:
    sev = _problems("gpu_bound_steps")["severity"].tolist()
    assert "high" not in sev and "medium" not in sev


@pytest.mark.parametrize(("workload", "warm_ms", "steady_ms"), [
    ("warmup_nosched", 600, 30),
    ("compile_nosched", 4_000, 3),
])
def test_the_first_iteration_is_warm_up_and_left_out(workload: str, warm_ms: int,
                                                     steady_ms: int) -> None:
    """No ProfilerStep: the first iteration (first calls, compilation) is warm-up, the
    findings describe the iterations after it, and no saving is larger than them."""
    a = _analysis(workload)
    rt = a.t.rank(0)
    it = iterations_found(rt)
    assert it is not None and it.warm_up == 1
    assert it.durations[0] > warm_ms * 1e6 and it.median_ns < steady_ms * 1e6
    window = analysis_window(rt)
    assert window[0] >= it.starts[1]
    out = _findings(workload)
    assert "warmup" in out["rule"].tolist()
    assert out["est_saving(us)"].max() * 1e3 <= window[1] - window[0]
    assert _top(workload) in ("host_bound", "launch_bound")


def test_compilation_is_named_as_such() -> None:
    out = _findings("compile_nosched")
    note = out[out["rule"] == "warmup"].iloc[0]["evidence"]
    assert "entire_frame_compile" in note and "entire_backward_compile" in note
    assert "(compilation)" in note


@pytest.mark.parametrize("workload", ["gpu_bound_steps", "host_bound_steps", "sync_steps",
                                      "dataloader_steps", "pageable_copy_steps",
                                      "cuda_graph_steps"])
def test_the_replay_reproduces_every_step(workload: str) -> None:
    df = _analysis(workload).what_if()
    assert len(df) == 4 and df["replay_error_pctg"].abs().max() <= 1.0
    # the stricter replay: within 5 % (the CUDA-graph steps, 130-300 µs, move most with
    # the usual launch delays)
    assert df["modelled_error_pctg"].abs().median() <= 5.0


def _total(workload: str, change: str) -> tuple[float, float]:
    df = _analysis(workload).what_if(change)
    return float(df["measured(us)"].sum()), float(df["predicted(us)"].sum())


def test_faster_gemms_shorten_a_gpu_bound_step_but_not_a_host_bound_one() -> None:
    measured, predicted = _total("gpu_bound_steps", "kernels:nvjet|gemm*0.5")
    assert predicted < 0.95 * measured
    measured, predicted = _total("host_bound_steps", "kernels:gemv|gemm*0.5")
    assert predicted == pytest.approx(measured, rel=0.01)


def test_removing_the_data_loader_leaves_the_gpu_work() -> None:
    measured, predicted = _total("dataloader_steps", "no-data-loader")
    assert predicted < 0.2 * measured


# -- the four traces kept apart until the end of the round -------------------------------


def test_eager_decoding_is_host_bound() -> None:
    # host_bound and launch_bound are one fix (CUDA graphs), counted once: the row with
    # the larger rule estimate leads and names the other
    top = _problems("gpt_decode_steps").iloc[0]
    assert top["rule"] in ("host_bound", "launch_bound") and top["severity"] == "high"
    assert top["change"] == "cuda-graphs"
    assert "counted once" in top["evidence"]


def test_a_batch_change_mid_profile_is_a_recompilation() -> None:
    out = _findings("recompile_steps")
    note = out[out["rule"] == "warmup"].iloc[0]
    assert "A recompilation" in note["evidence"] and "step 4" in note["evidence"]
    assert "TORCH_LOGS=recompiles" in note["advice"]
    # the compilations (about 0.9 s each) are no recurring saving: what a finding saves a
    # step is the steady steps' (the median), a fraction of a millisecond
    problems = _problems("recompile_steps")
    assert (problems["saving_per_step(us)"].fillna(0) < 1_000).all()


def test_empty_cache_each_step_is_named() -> None:
    out = _problems("side_stream_steps")
    sync = out[out["rule"] == "host_sync"].iloc[0]
    assert "cudaFree" in sync["evidence"] and "empty_cache" in sync["advice"]
    assert _top("side_stream_steps") == "fp32_gemm"


def test_a_conv_net_from_its_first_iteration_leaves_its_warm_up_out() -> None:
    out = _findings("resnet_amp_nosched")
    assert "warmup" in out["rule"].tolist()
    assert _top("resnet_amp_nosched") == "host_bound"
    rt = _analysis("resnet_amp_nosched").t.rank(0)
    window = analysis_window(rt)
    assert window[1] - window[0] < 0.1 * (int(rt.events["end"].max())
                                          - int(rt.events["ts"].min()))


@pytest.mark.parametrize("workload", ["gpu_bound_steps", "sync_steps"])
def test_the_job_critical_path_adds_up_to_the_step(workload: str) -> None:
    """The path (in the replay) runs to the step's completion, as what_if replays the
    step: on the GPU-bound loop whose host runs ahead, that is past the ProfilerStep
    span."""
    a = _analysis(workload)
    steps = a.what_if()
    for step, replayed in zip(steps["step"], steps["replayed(us)"], strict=True):
        path = a.get_job_critical_path(iteration=int(step))
        assert path["dur(us)"].sum() == pytest.approx(replayed, rel=1e-6, abs=1.0)
