"""The ``low_occupancy`` rule: grid-bound kernels, SMs held by other streams, persistent
kernels sized to share the GPU, and kernel labels that tell templates apart.

Every trace is built here with its answer known by construction: one rank, two steps of
4 ms on a GPU of :data:`SMS` SMs (``deviceProperties``), times in ns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kineto_builder import TraceBuilder

from hta.analysis.findings import find
from hta.analysis.findings import kernels as kernel_rules
from hta.analysis.findings.kernel_common import kernel_labels
from hta.analysis.findings.occupancy import sm_table
from hta.job.load import load_trace
from hta.model.selection import Selection
from hta.model.trace import Trace

SMS = 132
STEP_NS = 4_000_000
COMM_STREAM = 20
SIDE_STREAM = 8
GEMM = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
        "GroupProblemShape<cute::tuple<int, int, int> >, cutlass::gemm::collective::"
        "CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized{v}<4>, cute::tuple<"
        "cute::C<{m}>, cute::C<{n}>, cute::C<64> >, cutlass::bfloat16_t> > >(Params)")
GEMM_A = GEMM.format(v="Cooperative", m=128, n=256)
GEMM_B = GEMM.format(v="Pingpong", m=64, n=128)
DISPATCH = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)"
SMALL_GRID = "void small_grid_kernel<float>(float*)"
MID_GRID = "void mid_grid_kernel<float>(float*)"
FULL_GRID = "void at::native::reduce_kernel<512, 1>(float*)"


def args(blocks: int, occupancy: float = 12.0) -> dict[str, Any]:
    """Kernel args as Kineto writes them for ``blocks`` blocks of 256 threads."""
    return {"grid": [blocks, 1, 1], "block": [256, 1, 1], "registers per thread": 168,
            "shared memory": 200_000, "blocks per SM": blocks / SMS,
            "warps per SM": 8 * blocks / SMS, "est. achieved occupancy %": occupancy}


def _builder() -> TraceBuilder:
    b = TraceBuilder(rank=0)
    b.extra_top_level["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                              "numSms": SMS}]
    return b


def _kernel(b: TraceBuilder, name: str, t: int, gpu_ts: int, dur: int, blocks: int,
            stream: int = 7) -> None:
    b.launch_kernel(name, cpu_ts=t + 1_000, cpu_dur=500, gpu_ts=gpu_ts, gpu_dur=dur,
                    stream=stream, **args(blocks))


def _load(b: TraceBuilder, tmp_path: Path) -> Trace:
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def moe_persistent(tmp_path: Path, lone_run: bool = True) -> Trace:
    """Each step: two dispatch kernels of 1 ms on the comm stream, 20 blocks each; during
    each, the grouped GEMMs ``GEMM_A`` and ``GEMM_B`` (400 µs, 112 blocks: the 132 SMs
    less the 20 the dispatch holds) run on the compute stream. With ``lone_run`` one more
    ``GEMM_A`` of 400 µs runs after the communication, alone on the GPU. Nothing is
    grid-bound: the GEMMs are persistent kernels sized to share the GPU."""
    b = _builder()
    for k in (1, 2):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            for start in (t + 100_000, t + 1_200_000):
                _kernel(b, DISPATCH, t, start, 1_000_000, 20, stream=COMM_STREAM)
                _kernel(b, GEMM_A, t, start + 50_000, 400_000, 112)
                _kernel(b, GEMM_B, t, start + 500_000, 400_000, 112)
            if lone_run:
                _kernel(b, GEMM_A, t, t + 2_500_000, 400_000, 112)
    return _load(b, tmp_path)


def low_grid(tmp_path: Path, with_persistent: bool = False) -> tuple[Trace, int]:
    """Each step, one after the other on one stream, alone on the GPU: 5 kernels of
    200 µs with 33 blocks (a quarter of the SMs: 75% idle, the claim capped at half,
    100 µs each), 5 with 99 blocks (25% idle: 50 µs each) and 5 with 264 blocks (two
    waves: none). Expected saving 750 µs a step. ``with_persistent`` adds the trace of
    :func:`moe_persistent` after them (shifted by 2.5 ms), which adds nothing."""
    b = _builder()
    for k in (1, 2):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            g = t + 50_000
            for name, blocks in ((SMALL_GRID, 33), (MID_GRID, 99), (FULL_GRID, 264)):
                for _ in range(5):
                    _kernel(b, name, t, g, 200_000, blocks)
                    g += 201_000
            if with_persistent:
                for start in (t + 3_200_000,):
                    _kernel(b, DISPATCH, t, start, 500_000, 20, stream=COMM_STREAM)
                    _kernel(b, GEMM_A, t, start + 50_000, 400_000, 112)
    return _load(b, tmp_path), 2 * (5 * 100_000 + 5 * 50_000)


def shared_gpu(tmp_path: Path, comm: bool = True) -> tuple[Trace, int]:
    """Each step: a kernel of 200 µs with 88 blocks on the compute stream; with ``comm``,
    a communication kernel of 44 blocks covers its second half on another stream. The
    SMs held by other streams average 22 over the kernel: 110 available, 88 / 110 = 0.8,
    saving 20% (40 µs); without the comm kernel 88 / 132: a third (66.667 µs)."""
    b = _builder()
    for k in (1, 2):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            _kernel(b, MID_GRID, t, t + 50_000, 200_000, 88)
            if comm:
                _kernel(b, DISPATCH, t, t + 150_000, 100_000, 44, stream=COMM_STREAM)
    saving = 40_000 if comm else 66_667
    return _load(b, tmp_path), 2 * saving


def side_by_side(tmp_path: Path) -> tuple[Trace, int]:
    """Each step: a kernel of 200 µs with 66 blocks and, on another stream over the same
    200 µs, one with 33 blocks. The first has 132 - 33 = 99 SMs available (a third idle:
    66.667 µs), the second 66 (half idle: 100 µs, the cap); together they are bounded by
    half of the 200 µs they cover: 100 µs a step."""
    b = _builder()
    for k in (1, 2):
        t = (k - 1) * STEP_NS
        with b.step(k, ts=t, dur=STEP_NS - 1_000):
            _kernel(b, MID_GRID, t, t + 50_000, 200_000, 66)
            _kernel(b, SMALL_GRID, t, t + 50_000, 200_000, 33, stream=SIDE_STREAM)
    return _load(b, tmp_path), 2 * 100_000


def _rows(trace: Trace, **kw: Any):
    out = find(trace, rules=kernel_rules.RULES, **kw)
    return out[out["rule"] == "low_occupancy"]


def _saving_ns(rows) -> int:
    assert len(rows) == 1, rows
    return round(float(rows.iloc[0]["est_saving(us)"]) * 1e3)


# -- the twins -------------------------------------------------------------------------------
@pytest.mark.parametrize("lone_run", [True, False])
def test_persistent_kernels_beside_communication_are_not_low_occupancy(tmp_path, lone_run):
    """The MoE expert-parallel pattern: 112 of 132 SMs by design, no finding (the rule
    before this fix claimed 15% of the GEMM time from ``blocks per SM`` = 0.85)."""
    trace = moe_persistent(tmp_path, lone_run=lone_run)
    t = sm_table(trace.rank(0), None, (0, 2 * STEP_NS))
    assert t is not None and set(t.sms.tolist()) == {SMS}
    beside = t.held > 0
    assert t.held[beside].round(6).tolist() == [20.0] * int(beside.sum())
    assert _rows(trace).empty


def test_genuinely_grid_bound_kernels_give_the_stated_saving(tmp_path):
    trace, expected = low_grid(tmp_path)
    rows = _rows(trace)
    assert _saving_ns(rows) == expected
    row = rows.iloc[0]
    assert row["steps"] == [1, 2]
    evidence = row["evidence"]
    assert "20 compute kernels in steps 1-2 had fewer blocks than the SMs available" in evidence
    assert "132 SMs" in evidence and "66.7% of the 6.000 ms" in evidence
    assert "small_grid_kernel ×10 (2.000 ms; 33 blocks, 132 SMs available)" in evidence
    assert "mid_grid_kernel ×10 (2.000 ms; 99 blocks, 132 SMs available)" in evidence
    assert "cudnn.benchmark" not in row["advice"]


def test_persistent_kernels_are_named_as_left_out(tmp_path):
    trace, expected = low_grid(tmp_path, with_persistent=True)
    rows = _rows(trace)
    assert _saving_ns(rows) == expected
    evidence = rows.iloc[0]["evidence"]
    assert ("Not counted: 2 kernels with fewer blocks than SMs (800.0 µs) that fill the SMs "
            "other streams leave free") in evidence
    assert "cutlass::device_kernel ×2 (112 blocks while other streams held 20 of 132 SMs)" \
        in evidence


@pytest.mark.parametrize("comm", [True, False])
def test_sms_held_by_other_streams_are_weighted_by_time(tmp_path, comm):
    trace, expected = shared_gpu(tmp_path, comm=comm)
    got = _saving_ns(_rows(trace))
    assert abs(got - expected) <= 2, (got, expected)


def test_kernels_side_by_side_never_claim_more_than_half_the_time_they_cover(tmp_path):
    trace, expected = side_by_side(tmp_path)
    assert _saving_ns(_rows(trace)) == expected


def test_iteration_selection(tmp_path):
    trace, expected = low_grid(tmp_path)
    rows = _rows(trace, selection=Selection.of(iterations=[2]))
    assert _saving_ns(rows) == expected // 2 and rows.iloc[0]["steps"] == [2]


def test_short_kernels_and_missing_args_give_nothing(tmp_path):
    b = _builder()
    with b.step(1, ts=0, dur=STEP_NS):
        for i in range(200):  # 1-block kernels of 8 µs: fixed costs, not the grid
            _kernel(b, SMALL_GRID, 0, 10_000 + i * 10_000, 8_000, 1)
        b.launch_kernel(MID_GRID, cpu_ts=1_000, cpu_dur=500, gpu_ts=2_100_000,
                        gpu_dur=500_000, grid=[4, 1, 1], block=[256, 1, 1])  # ROCm-like
    assert _rows(_load(b, tmp_path)).empty


def test_fp32_gemms_are_left_to_fp32_gemm(tmp_path):
    """An fp32 SIMT GEMM with a quarter of the SMs: fp32_gemm claims half its time, so
    low_occupancy does not claim the same time again."""
    b = _builder()
    with b.step(1, ts=0, dur=STEP_NS):
        for i in range(5):
            _kernel(b, "ampere_sgemm_128x64_nn", 0, 10_000 + i * 300_000, 200_000, 33)
    out = find(_load(b, tmp_path), rules=kernel_rules.RULES)
    assert out["rule"].tolist() == ["fp32_gemm"]


def test_sm_count_from_blocks_per_sm_without_device_properties(tmp_path):
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=STEP_NS):
        _kernel(b, SMALL_GRID, 0, 10_000, 200_000, 33)
    t = sm_table(_load(b, tmp_path).rank(0), None, (0, STEP_NS))
    assert t is not None and t.sms.tolist() == [SMS]


# -- labels ----------------------------------------------------------------------------------
def test_labels_tell_template_instances_apart():
    add = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<"
           "c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<"
           "c10::BFloat16>, at::detail::Array<char*, 3>)")
    fill = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,"
            " at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1>)")
    labels = kernel_labels([GEMM_A, GEMM_B, add, fill, GEMM_A, "sm90_xmma_gemm_bf16bf16"])
    assert labels == [
        "cutlass::device_kernel<…Cooperative, 128, 256…>",
        "cutlass::device_kernel<…Pingpong, 64, 128…>",
        "at::native::vectorized_elementwise_kernel<…CUDAFunctor_add, BFloat16, 3…>",
        "at::native::vectorized_elementwise_kernel<…FillFunctor, float, 1…>",
        "cutlass::device_kernel<…Cooperative, 128, 256…>",
        "sm90_xmma_gemm_bf16bf16",
    ]


def test_labels_of_long_names_are_cut():
    name = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_" + "X" * 100
    (label,) = kernel_labels([name])
    assert len(label) == 100 and label.endswith("…")


def test_library_convolutions_get_convolution_advice_not_your_own_kernels(tmp_path):
    """cuDNN convolution kernels on small maps: the advice is the batch, cudnn.benchmark
    and tensor-core layouts, never "launch more blocks in your own kernels". (bf16
    kernels: fp32 ones, ``*scudnn*``, are ``fp32_gemm``'s.)"""
    from hta.analysis.findings.occupancy import DEFAULT_ADVICE

    b = _builder()
    with b.step(1, ts=0, dur=STEP_NS - 1_000):
        g = 50_000
        for _ in range(5):
            _kernel(b, "sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_"
                    "tilesize128x128x32", 0, g, 200_000, 16)
            g += 201_000
    row = _rows(_load(b, tmp_path)).iloc[0]
    assert "cudnn.benchmark" in row["advice"] and "library kernels" in row["advice"]
    assert DEFAULT_ADVICE not in row["advice"]


def _bound_time(rt: Any) -> tuple[int, int]:
    """The rule's grid-bound time and the kept kernels' time, from the whole table (with
    the SMs held by others), as :func:`check_low_occupancy` computes them before its
    threshold."""
    from hta.analysis.findings.kernel_common import fp32_claimed
    from hta.analysis.findings.occupancy import (
        FILL,
        MIN_KERNEL_NS,
        _library_gemm,
        sized_to_share,
    )

    t = sm_table(rt, None, (0, 10 * STEP_NS))
    if t is None:
        return 0, 0
    bound = (t.blocks < FILL * t.available) & ~sized_to_share(t) & (t.dur >= MIN_KERNEL_NS) \
        & ~_library_gemm(rt, t.pos) & ~fp32_claimed(rt, t.pos)
    return int(t.dur[bound].sum()), int(t.dur.sum())


@pytest.mark.parametrize("make,early", [("low_grid", False), ("moe_persistent", True),
                                        ("shared_gpu", False), ("under_share", True)])
def test_the_early_exit_never_drops_a_finding(tmp_path, make, early):
    """Without the SMs held by others, ``blocks < FILL x S``, the kernels' length and
    names (library and fp32 GEMMs are left to others) bound the grid-bound time from
    above (held SMs only lower what is available): the rule stops early exactly when
    even that bound is under :data:`MIN_LOW_SHARE` of the time, and then its full
    computation finds nothing either. ``moe_persistent``: its GEMMs are CUTLASS's;
    ``under_share``: 5 kernels of 33 blocks beside 60 full ones, 7.7% of the time."""
    from hta.analysis.findings.occupancy import MIN_LOW_SHARE, _grid_rows

    if make == "under_share":
        b = _builder()
        with b.step(1, ts=0, dur=STEP_NS - 1_000):
            g = 50_000
            for k in range(65):
                _kernel(b, SMALL_GRID if k < 5 else FULL_GRID, 0, g, 50_000, 33 if k < 5
                        else 264)
                g += 51_000
        trace = _load(b, tmp_path)
    else:
        made = globals()[make](tmp_path)
        trace = made[0] if isinstance(made, tuple) else made
    rt = trace.rank(0)
    bound, total = _bound_time(rt)
    grid = _grid_rows(rt, None, (0, 10 * STEP_NS))
    assert grid is not None
    assert (not grid.may_be_grid_bound(rt)) == early
    if early:
        assert bound < MIN_LOW_SHARE * total
        assert not len(_rows(trace))
    else:
        assert len(_rows(trace)) == (bound >= MIN_LOW_SHARE * total)
