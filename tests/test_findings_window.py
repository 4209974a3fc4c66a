"""The findings' window on a profile whose GPU runs behind its host: the steps' CPU spans
end long before the GPU finishes the work they launched, and the window covers that work
(a saving is never more than the window it is a share of)."""

from __future__ import annotations

from pathlib import Path

from kineto_builder import TraceBuilder

from hta.analysis.findings import find
from hta.analysis.findings.base import analysis_window
from hta.analysis.findings.kernels import RULES as KERNEL_RULES
from hta.analysis.findings.warmup import window_text
from hta.job.load import load_trace
from hta.model.trace import Trace

SGEMM = "ampere_sgemm_128x64_tn"
STEP_CPU_NS, GEMM_NS, STEPS = 1_000_000, 3_000_000, 3


def build(tmp_path: Path, behind: bool = True) -> Trace:
    """Three steps of 1 ms on the CPU, each launching an fp32 GEMM of 3 ms; with
    ``behind`` the GPU runs them one after the other after the host is done (it ends
    8 ms after the last step's CPU span), else each inside its own (longer) step."""
    b = TraceBuilder(rank=0)
    step_ns = STEP_CPU_NS if behind else GEMM_NS + 200_000
    for k in range(STEPS):
        t = k * step_ns
        with b.step(k + 1, ts=t, dur=step_ns - 1_000):
            b.cpu_op("aten::mm", ts=t + 1_000, dur=5_000)
            gpu = 10_000 + k * (GEMM_NS + 1_000) if behind else t + 20_000
            b.launch_kernel(SGEMM, cpu_ts=t + 2_000, cpu_dur=1_000, gpu_ts=gpu,
                            gpu_dur=GEMM_NS)
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def test_the_window_covers_the_gpu_work_its_steps_launched(tmp_path):
    trace = build(tmp_path)
    rt = trace.rank(0)
    lo, hi = analysis_window(rt)
    last_gemm_end = 10_000 + (STEPS - 1) * (GEMM_NS + 1_000) + GEMM_NS
    assert (lo, hi) == (0, last_gemm_end)
    assert "and the 6.013 ms the GPU ran on after them" in window_text(rt)
    row = find(trace, rules=KERNEL_RULES).query("rule == 'fp32_gemm'").iloc[0]
    assert row["share_pctg"] == round(100 * STEPS * GEMM_NS / 2 / last_gemm_end, 2) < 100


def test_twin_with_the_gpu_inside_its_steps_keeps_their_spans(tmp_path):
    rt = build(tmp_path, behind=False).rank(0)
    step_ns = GEMM_NS + 200_000
    assert analysis_window(rt) == (0, STEPS * step_ns - 1_000)
    assert "ran on after them" not in window_text(rt)
