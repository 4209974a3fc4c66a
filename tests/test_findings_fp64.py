"""The ``fp64_work`` finding: compute kernels running in double precision.

Traces built by construction (:mod:`kineto_builder`): per step, fp64 kernels of known
time (one by its name, one Triton kernel by its launching operator's double inputs) among
kernels that only look like fp64 (fused Adam's ``double`` hyper-parameters, a cast from
double to bf16, a ``CompiledFunction`` wrapper with a double input, a 0-d double tensor
next to a float matrix); its twin without double precision gives no finding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kineto_builder import TraceBuilder

from hta.analysis.findings import find
from hta.analysis.findings import fp64 as fp64_rules
from hta.analysis.findings.engine import default_rules
from hta.analysis.findings.fp64 import (
    COMPILED_NOTE,
    FP64_ADVICE,
    check_fp64_work,
    fp64_rate,
    inputs_double,
    name_precision,
    saving_fraction,
)
from hta.analysis.whatif.findings import NOT_MODELLED, change_for
from hta.job.load import load_trace
from hta.model.selection import Selection
from hta.model.trace import Trace

RULES = fp64_rules.RULES
STEP_NS = 4_000_000
STEPS = 2
#: Per step: (kernel, its time, the operator launching it or None, its inputs or None,
#: whether it is fp64). The fp64 ones take 64 + 128 = 192 µs of 640 µs (30.0%).
UPSAMPLE = ("void at::native::(anonymous namespace)::upsample_nearest2d_out_frame<{t}, "
            "&at::native::nearest_neighbor_compute_source_index>({t} const*, {t}*, "
            "unsigned long, unsigned long, unsigned long, float, float)")
ADAM = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
        "(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous "
        "namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float "
        "const*, double, double, double, double, double, bool, float const*, float const*>(x)")
CAST = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
        "TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() "
        "const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, 4>(int)")
BF16_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<"
            "c10::BFloat16>, std::array<char*, 3ul> >(int)")


def _kernels(double: bool) -> list[tuple[str, int, str | None, dict[str, Any] | None, bool]]:
    t = "double" if double else "c10::BFloat16"
    return [
        (UPSAMPLE.format(t="double" if double else "c10::BFloat16"), 64_000,
         "aten::upsample_nearest2d",
         {"Input Dims": [[8, 3, 64, 64], [2], [], []],
          "Input type": [t, "ScalarList", "Scalar", "Scalar"]}, double),
        ("triton_poi_fused_lt_0", 128_000, "triton_poi_fused_lt_0",
         {"Input Dims": [[8, 3, 128, 128], [8, 3, 128, 128]], "Input type": [t, "bool"]},
         double),
        (BF16_ADD, 232_000, "aten::add", None, False),
        (ADAM, 64_000, "aten::_fused_adam_", None, False),
        ("triton_poi_fused_add_1", 80_000, "CompiledFunction",
         {"Input Dims": [[8, 3, 64, 64], [8]], "Input type": ["c10::BFloat16", "double"]},
         False),
        (CAST, 32_000, "aten::copy_",
         {"Input Dims": [[64], [64], []], "Input type": ["c10::BFloat16", "double", "Scalar"]},
         False),
        ("triton_poi_fused_mul_2", 40_000, "triton_poi_fused_mul_2",
         {"Input Dims": [[64, 64], []], "Input type": ["float", "double"]}, False),
    ]


FP64_NS = 64_000 + 128_000  # per step
COMPUTE_NS = 640_000  # per step


def build(tmp_path: Path, double: bool = True, props: dict[str, Any] | None = None,
          shapes: bool = True) -> Trace:
    """Two steps of :func:`_kernels`, each launched inside its operator (with its inputs
    when ``shapes``), one after the other on the GPU."""
    b = TraceBuilder(rank=0)
    if props is not None:
        b.extra_top_level["deviceProperties"] = [{"id": 0, **props}]
    for k in range(1, STEPS + 1):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            g = t + 50_000
            for i, (name, dur, op, inputs, _) in enumerate(_kernels(double)):
                cpu = t + 1_000 + i * 5_000
                if op is not None:
                    b.cpu_op(op, ts=cpu, dur=3_000, **(inputs if inputs and shapes else {}))
                b.launch_kernel(name, cpu_ts=cpu + 1_000, cpu_dur=500, gpu_ts=g, gpu_dur=dur)
                g += dur + 1_000
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def _only(trace: Trace, **kw: Any):
    out = find(trace, rules=RULES, **kw)
    return out[out["rule"] == "fp64_work"]


WINDOW_NS = STEPS * STEP_NS - 1_000


# -- the finding -----------------------------------------------------------------------------
def test_fp64_kernels_half_their_time_on_an_unknown_device(tmp_path):
    rows = _only(build(tmp_path))
    assert len(rows) == 1
    row = rows.iloc[0]
    saving = STEPS * FP64_NS // 2
    assert round(row["est_saving(us)"] * 1e3) == saving == 192_000
    assert row["share_pctg"] == round(100 * saving / WINDOW_NS, 2)
    assert row["severity"] == "low"  # 2.4% of the window (medium from 3%)
    assert row["steps"] == [1, 2] and row["ranks"] == [0]
    evidence = row["evidence"]
    assert evidence.startswith("rank 0: 4 compute kernels ran in double precision (fp64) for "
                               "384.0 µs, 30.0% of the compute kernel time in steps 1-2")
    assert "2 found by their names, 2 by the double inputs of the operators" in evidence
    assert ("launched by triton_poi_fused_lt_0 ×2 (256.0 µs; inputs [[8, 3, 128, 128], "
            "[8, 3, 128, 128]] of double, bool), aten::upsample_nearest2d ×2 (128.0 µs; "
            "inputs [[8, 3, 64, 64], [2], [], []] of double, ScalarList, Scalar, Scalar)") \
        in evidence
    assert "the device's fp64 rate is not known: the saving is half their time" in evidence
    assert "CompiledFunction" not in evidence and "_fused_adam_" not in evidence
    assert row["advice"] == FP64_ADVICE + " " + COMPILED_NOTE


def test_twin_without_double_precision_gives_nothing(tmp_path):
    assert _only(build(tmp_path, double=False)).empty


def test_consumer_gpu_claims_all_but_its_fp64_rate(tmp_path):
    """An L4 (compute capability 8.9, not in the peak table's fp64 column): fp64 at 1/64
    of fp32, so 63/64 of the fp64 time."""
    props = {"name": "NVIDIA L4", "computeMajor": 8, "computeMinor": 9, "numSms": 58}
    row = _only(build(tmp_path, props=props)).iloc[0]
    saving = STEPS * FP64_NS * 63 // 64
    assert round(row["est_saving(us)"] * 1e3) == saving == 378_000
    assert row["share_pctg"] == round(100 * saving / WINDOW_NS, 2)
    assert row["severity"] == "medium"
    assert ("NVIDIA L4, compute capability 8.9: fp64 at 1/64 of the fp32 rate: the saving "
            "is 98.4% of their time") in row["evidence"]


def test_h100_keeps_the_floor_of_half(tmp_path):
    """H100: the peak table's fp64 (tensor) rate equals fp32; half still goes (bytes)."""
    props = {"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}
    row = _only(build(tmp_path, props=props)).iloc[0]
    assert round(row["est_saving(us)"] * 1e3) == STEPS * FP64_NS // 2
    assert "H100 SXM: 67 fp64 and 67 fp32 TFLOP/s peaks: the saving is 50.0%" \
        in row["evidence"]


def test_h800_takes_the_peak_table_rate(tmp_path):
    props = {"name": "NVIDIA H800", "computeMajor": 9, "computeMinor": 0}
    row = _only(build(tmp_path, props=props)).iloc[0]
    assert abs(round(row["est_saving(us)"] * 1e3) - STEPS * FP64_NS * 66 / 67) <= 1


def test_without_recorded_shapes_only_the_names_tell(tmp_path):
    """Without ``record_shapes`` the Triton kernel's type is unknown: only the upsample
    kernel, whose name says double, counts."""
    row = _only(build(tmp_path, shapes=False)).iloc[0]
    assert round(row["est_saving(us)"] * 1e3) == STEPS * 64_000 // 2
    assert "2 compute kernels ran in double precision (fp64) for 128.0 µs, 10.0% of the " \
        "compute kernel time" in row["evidence"]
    assert "all found by their names" in row["evidence"]


def test_iteration_selection(tmp_path):
    rows = _only(build(tmp_path), selection=Selection.of(iterations=[2]))
    assert round(rows.iloc[0]["est_saving(us)"] * 1e3) == FP64_NS // 2
    assert rows.iloc[0]["steps"] == [2]


def test_claim_is_the_saving_share_of_each_kernel(tmp_path):
    trace = build(tmp_path)
    (finding,) = check_fp64_work(trace.rank(0), None)
    claim = finding.claim
    assert claim is not None and claim.amount is not None
    assert sorted((claim.end - claim.start).tolist()) == [64_000, 64_000, 128_000, 128_000]
    assert claim.amount.tolist() == [0.5 * (e - s) for s, e in
                                     zip(claim.start.tolist(), claim.end.tolist())]
    assert finding.est_saving_ns == 192_000 and finding.window_ns == WINDOW_NS


def test_rank_without_gpu_work(tmp_path):
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.cpu_op("aten::mul", ts=1_000, dur=2_000,
                 **{"Input Dims": [[4], [4]], "Input type": ["double", "double"]})
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    assert check_fp64_work(trace.rank(0), None) == []


def test_noise_floor(tmp_path):
    """A few µs of fp64 (a GradScaler's reciprocal of its scale) in a 4 ms step: under
    the engine's 0.5% floor, no finding."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=STEP_NS):
        b.launch_kernel(UPSAMPLE.format(t="double"), cpu_ts=1_000, cpu_dur=500,
                        gpu_ts=10_000, gpu_dur=20_000)
        b.launch_kernel(BF16_ADD, cpu_ts=2_000, cpu_dur=500, gpu_ts=40_000, gpu_dur=2_000_000)
    b.write(tmp_path / "rank-0.json")
    trace = load_trace(tmp_path, progress=False, cache=False)
    assert check_fp64_work(trace.rank(0), None)[0].est_saving_ns == 10_000
    assert _only(trace).empty


# -- kernel names ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", [
    "volta_dgemm_64x64_nn",
    "ampere_dgemm_128x64_nt",
    "magma_dgemmEx_kernel<double, double, double, false, false, 6, 3, 5, 3, 4>(int)",
    "void cutlass::Kernel<cutlass_80_tensorop_d884gemm_64x32_16x4_nn_align1>(Params)",
    "sm80_xmma_gemm_f64f64_f64f64_f64_nt_n_tilesize32x32x16_stage3_warpsize2x2x1_tensor8x8x4",
    "Cijk_Ailk_Bljk_DB_MT64x64x16_SN_1LDSB0",
    "Cijk_Ailk_Bljk_ZB_MT32x32x8_SN",
    "my_reduction_fp64_kernel",
    UPSAMPLE.format(t="double"),
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<double>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<double>, "
    "at::detail::Array<char*, 3>)",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::"
    "native::BinaryFunctor<double, double, bool, at::native::(anonymous namespace)::"
    "CompareLTFunctor<double> > >(at::TensorIteratorBase&, x)::{lambda(int)#1}>(int, x)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<double, at::native::"
    "func_wrapper_t<double, at::native::sum_functor<double, double, double>::operator()(at::"
    "TensorIterator&)::{lambda(double, double)#1}>, unsigned int, double, 4> >(x)",
    "void at::native::vectorized_elementwise_kernel<2, at::native::reciprocal_kernel_cuda(at::"
    "TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#1}::operator()() const"
    "::{lambda(double)#1}, std::array<char*, 2ul> >(int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::complex"
    "<double>, c10::complex<double>, c10::complex<double>, MulFunctor<c10::complex<double> > "
    ">, std::array<char*, 3ul> >(int)",
    "gemv2T_kernel_val<int, int, double, double, double, double, 128, 16, 4, 4, false, false>"
    "(x)",
])
def test_names_that_say_double(name):
    assert name_precision(name) == 1


@pytest.mark.parametrize(("name", "verdict"), [
    (ADAM, -1),  # fused Adam: double hyper-parameters, float maths
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
     "(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::"
     "FusedSgdMathFunctor<float, 3>, double, double*, double, double, bool, bool, bool, "
     "float*, float const*>(x)", -1),
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<"
     "float, 4, at::native::templates::cuda::normal_and_transform<float, float, at::"
     "CUDAGeneratorImpl*, at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl*>"
     "(at::TensorBase const&, double, double, at::CUDAGeneratorImpl*)::{lambda()#1}::"
     "operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}>(x)", -1),
    (CAST, -1),  # a cast from double to bf16 writes bf16
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::"
     "complex<float> >, at::detail::Array<char*, 3> >(int)", -1),
    ("sm80_xmma_dgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize64x32x64",
     -1),  # dgrad: the data gradient, not double
    ("cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int)", -1),
    ("ampere_sgemm_128x64_nn", -1),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", -1),
    ("at::native::amp_update_scale_cuda_kernel(float*, int*, float const*, double, double, "
     "int)", 0),  # double only in the parameter list: the parameters are not the type
    ("triton_poi_fused_upsample_nearest2d_0", 0),
    ("void double_buffer_copy<int>(int*)", 0),
    ("void doubled_kernel<long>(long*)", 0),
    ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::"
     "native::index_kernel_impl<at::native::OpaqueType<8> >(x)::{lambda(int)#1}>(long)", 0),
    ("void fill_uint64_kernel<int>(int*)", 0),
    ("Float64Histogram", 0),
    ("kernel_0f64a", 0),
])
def test_near_miss_names(name, verdict):
    assert name_precision(name) == verdict


# -- operator inputs -------------------------------------------------------------------------
@pytest.mark.parametrize(("types", "dims", "expected"), [
    ('["double", "double"]', "[[4, 4], [4, 4]]", True),
    ('["float", "double"]', "[[4, 4], [4, 4]]", True),  # promotes to double
    ('["float", "double"]', "[[4, 4], []]", False),  # a 0-d double: stays float
    ('["double", "Scalar"]', "[[4], []]", True),
    ('["long int", "double"]', "[[4], []]", True),  # int tensor, 0-d double: double
    ('["c10::complex<double>"]', "[[4]]", True),
    ('["c10::BFloat16", "bool"]', "[[4], [4]]", False),
    ('["double"]', "", True),  # no dims: taken as a tensor with dimensions
    ("", "", False),
    ("not json", "", False),
])
def test_inputs_double(types, dims, expected):
    assert inputs_double(types, dims) is expected


# -- device rates ----------------------------------------------------------------------------
@pytest.mark.parametrize(("props", "ratio"), [
    ({"name": "NVIDIA L4", "computeMajor": 8, "computeMinor": 9}, 1 / 64),
    ({"name": "NVIDIA L40S", "computeMajor": 8, "computeMinor": 9}, 1 / 64),
    ({"name": "NVIDIA A10G", "computeMajor": 8, "computeMinor": 6}, 1 / 64),
    ({"name": "NVIDIA GeForce RTX 4090", "computeMajor": 8, "computeMinor": 9}, 1 / 64),
    ({"name": "Tesla T4", "computeMajor": 7, "computeMinor": 5}, 1 / 32),
    ({"name": "NVIDIA H800", "computeMajor": 9, "computeMinor": 0}, 1 / 67),
    ({"name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
      "totalGlobalMem": 85_000_000_000}, 1.0),
    ({"name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4}, 1.0),
    ({"name": "AMD Radeon Graphics", "computeMajor": 12, "computeMinor": 0}, None),
    ({"name": "NVIDIA Unknown", "computeMajor": 9, "computeMinor": 0}, None),
    ({}, None),
])
def test_fp64_rate(props, ratio):
    got, source = fp64_rate(props)
    assert got == pytest.approx(ratio) if ratio is not None else got is None
    assert bool(source) == (ratio is not None)


def test_saving_fraction():
    assert saving_fraction(None) == 0.5
    assert saving_fraction(1.0) == 0.5
    assert saving_fraction(1 / 64) == 63 / 64


# -- registration ----------------------------------------------------------------------------
def test_registered_and_not_replayed():
    assert "fp64_work" in {r.id for r in default_rules()}
    assert "fp64_work" in NOT_MODELLED
    assert change_for("fp64_work", [0]) == ""
