"""The ops_below_roof finding: a positive case, its twins, and the saving's model."""

from __future__ import annotations

from pathlib import Path

import pytest
from kineto_builder import TraceBuilder

from hta.analysis.findings.roofline import ATTAINABLE, SHAPES_NOTE, check_ops_below_roof
from hta.trace_analysis import TraceAnalysis

H100 = {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85e9, "numSms": 132}
S = 4096
FLOPS = 2.0 * S ** 3


def _job(tmp_path: Path, gemm_ns: int, shapes: bool = True, overlap_ns: int = 0,
         blocks_per_sm: float | None = None, size: int = S) -> TraceAnalysis:
    """One step with three bf16 4096³ GEMMs of ``gemm_ns`` each; optionally a kernel on
    another stream overlapping the first ``overlap_ns`` of each GEMM."""
    b = TraceBuilder(rank=0)
    b.extra_top_level["deviceProperties"] = [H100]
    bf16 = "c10::BFloat16"
    args = {"Input Dims": [[size, size], [size, size]], "Input type": [bf16, bf16]
            } if shapes else {}
    kernel_args = {} if blocks_per_sm is None else {"blocks per SM": blocks_per_sm}
    t = 1_000_000
    with b.step(1, ts=0, dur=3 * gemm_ns + 3_000_000):
        for i in range(3):
            cpu = 10_000 + i * 10_000
            b.cpu_op("aten::mm", ts=cpu, dur=5_000, **args)
            b.launch_kernel("sm90_xmma_gemm_bf16bf16_bf16f32", cpu_ts=cpu + 1_000,
                            cpu_dur=1_000, gpu_ts=t, gpu_dur=gemm_ns, **kernel_args)
            if overlap_ns:
                b.kernel("void at::native::vectorized_elementwise_kernel<4, add>", t,
                         overlap_ns, stream=9)
            t += gemm_ns + 10_000
    b.write(tmp_path / "rank-0.json")
    return TraceAnalysis(tmp_path, cache=False, progress=False)


def _check(a: TraceAnalysis) -> list:
    return check_ops_below_roof(a.t.rank(0), None)


def test_slow_gemm_is_found_with_the_stated_saving(tmp_path: Path) -> None:
    gemm_ns = 10_000_000  # 13.7 TFLOP/s: 1.39% of the 989.5 TFLOP/s bf16 roof
    found = _check(_job(tmp_path, gemm_ns))
    assert len(found) == 1
    f = found[0]
    pct = 100 * FLOPS / (gemm_ns / 1e9) / 1e12 / 989.5
    expected = 3 * gemm_ns * (1 - pct / (100 * ATTAINABLE))
    assert f.est_saving_ns == pytest.approx(expected, abs=3)
    assert "aten::mm [[4096, 4096], [4096, 4096]]" in f.evidence
    assert "H100 SXM" in f.evidence and "step 1" in f.evidence
    assert f.subject.startswith("aten::mm")


def test_fast_gemm_no_shapes_and_claimed_kernels_are_silent(tmp_path: Path) -> None:
    assert _check(_job(tmp_path / "fast", 200_000)) == []  # 69% of the roof
    assert _check(_job(tmp_path / "noshapes", 10_000_000, shapes=False)) == []
    assert _check(_job(tmp_path / "grid", 10_000_000, blocks_per_sm=0.5)) == []
    assert "record_shapes=True" in SHAPES_NOTE


def test_saving_floor_of_five_us_per_kernel(tmp_path: Path) -> None:
    found = _check(_job(tmp_path, 100_000, size=64))  # 64³ GEMMs of 100 µs: far below
    assert len(found) == 1
    # the attainable time is under 5 µs, so the floor holds: 3 x (100 - 5) µs
    assert found[0].est_saving_ns == 3 * (100_000 - 5_000)


def test_saving_capped_at_exposed_time(tmp_path: Path) -> None:
    found = _check(_job(tmp_path, 10_000_000, overlap_ns=9_000_000))
    assert len(found) == 1 and found[0].est_saving_ns == 3 * 1_000_000


def test_unfused_attention_advice() -> None:
    from hta.analysis.findings.roofline import unfused_attention

    assert unfused_attention("[[16, 5185, 5185], [], []]")
    assert unfused_attention("[[16, 5185, 5185], [16, 5185, 64]]")
    assert unfused_attention("[[16, 5185, 64], [16, 64, 5185]]")  # Q @ K^T
    assert not unfused_attention("[[16, 5185, 64], [16, 64, 32]]")
    assert not unfused_attention("[[4096, 4096], [4096, 4096]]")  # a plain square GEMM
    assert not unfused_attention("")


def test_registered_in_the_engine(tmp_path: Path) -> None:
    table = _job(tmp_path, 10_000_000).get_findings()
    row = table[table["rule"] == "ops_below_roof"]
    assert len(row) == 1 and row.iloc[0]["severity"] == "high"


MI300X = {"name": "AMD Instinct MI300X", "totalGlobalMem": 206e9, "numSms": 304}


def _op_job(tmp_path: Path, op: str, dims: list, kernel: str, gpu_ns: int,
            device: dict | None = None, concrete: list | None = None) -> list:
    """One step with three calls of ``op`` (bf16 inputs of ``dims``, ``Concrete Inputs``
    when given) whose kernel runs ``gpu_ns``; the ops_below_roof findings of the rank."""
    b = TraceBuilder(rank=0)
    b.extra_top_level["deviceProperties"] = [device or H100]
    types = ["c10::BFloat16" if d else "" for d in dims]
    t = 1_000_000
    with b.step(1, ts=0, dur=3 * gpu_ns + 3_000_000):
        for i in range(3):
            cpu = 10_000 + i * 10_000
            args = {"Input Dims": dims, "Input type": types}
            if concrete is not None:
                args["Concrete Inputs"] = concrete
            b.cpu_op(op, ts=cpu, dur=5_000, **args)
            b.launch_kernel(kernel, cpu_ts=cpu + 1_000, cpu_dur=1_000, gpu_ts=t,
                            gpu_dur=gpu_ns)
            t += gpu_ns + 10_000
    b.write(tmp_path / "rank-0.json")
    return _check(TraceAnalysis(tmp_path, cache=False, progress=False))


def test_square_feature_map_is_not_read_as_attention_scores(tmp_path: Path) -> None:
    """An elementwise add on a [1, 64, 512, 512] image feature map is not an L×L score
    matrix (before: SDPA advice, seen on an xDiT FLUX trace); a softmax over [16, L, L]
    still is (the twin)."""
    add = _op_job(tmp_path / "add", "aten::add_", [[1, 64, 512, 512], [1, 64, 512, 512], []],
                  "void at::native::vectorized_elementwise_kernel<4, add>", 2_000_000)
    assert len(add) == 1 and "attention score matrix" not in add[0].advice
    assert "fuse it with the operators around it" in add[0].advice
    soft = _op_job(tmp_path / "softmax", "aten::_softmax", [[16, 4096, 4096], [], []],
                   "void at::native::cunn_SoftMaxForward<8, float>", 20_000_000)
    assert len(soft) == 1 and "attention score matrix" in soft[0].advice


def test_fused_attention_advice_fits_large_shapes(tmp_path: Path) -> None:
    """A fused attention call far below the peak on large shapes is not told it "gets
    little work per tile" (before, on [8, 4096, 16, 128]); on an MI300X the advice names
    the ROCm kernels, on an H100 it does not (the twin)."""
    dims = [[8, 4096, 16, 128]] * 3 + [[]] * 12
    concrete = [""] * 5 + ["4096", "4096", "0.0", "False"] + [""] * 6  # not causal
    kernel = "attn_fwd"
    amd = _op_job(tmp_path / "amd", "aten::_flash_attention_forward", dims, kernel,
                  20_000_000, device=MI300X, concrete=concrete)
    assert len(amd) == 1
    assert "little work per tile" not in amd[0].advice
    assert "Composable Kernel or aiter" in amd[0].advice
    nv = _op_job(tmp_path / "nv", "aten::_flash_attention_forward", dims, kernel,
                 20_000_000, concrete=concrete)
    assert len(nv) == 1 and "sdpa_kernel" in nv[0].advice
    assert "aiter" not in nv[0].advice


def test_compute_bound_gemm_advice_names_the_peak_of_its_math() -> None:
    """A compute-bound product judged by its kernels' fp32 math (SIMT fp32 GEMMs, the
    fp32 vector roof) is not told it is below the tensor-core peak; a bf16 or TF32 one is."""
    from types import SimpleNamespace

    from hta.analysis.findings.roofline import _advice

    def group(key: str) -> SimpleNamespace:
        return SimpleNamespace(category="GEMM", bound="compute", input_dims="[[4096, 4096]]",
                               op="aten::mm", key=key, device="A100 40GB")

    assert "below the fp32 peak of its kernels" in _advice(group("fp32"))
    assert "tensor-core" not in _advice(group("fp32"))
    for key in ("tf32", "bf16"):
        assert "below the tensor-core peak" in _advice(group(key))
