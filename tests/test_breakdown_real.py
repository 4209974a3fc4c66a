"""Breakdowns on real traces (../shared/traces/hta): checked against figures computed
independently from the JSON (tests/breakdown_reference.py), and against HTA 0.5.0.

HTA constants were produced once with HTA 0.5.0 from /work/venv-hta::

    cd /tmp && /work/venv-hta/bin/python -c "
    from hta.trace_analysis import TraceAnalysis
    a = TraceAnalysis(trace_dir=DIR, include_last_profiler_step=True)
    a.get_temporal_breakdown(visualize=False); a.get_comm_comp_overlap(visualize=False)
    a.get_idle_time_breakdown(ranks=a.t.get_ranks(), visualize=False)
    a.get_gpu_kernel_breakdown(visualize=False)"

(``include_last_profiler_step=True`` because we keep every event by default). HTA's
figures are integer µs. Each HTA figure is reproduced exactly by the plain-Python
reference run on :func:`breakdown_reference.hta_view` (HTA drops GPU work whose launch is
not in the trace and cuts times inward to whole µs) and, for idle time, with HTA's gap
rule (previous event's end, negative gaps summed): those are the differences we make on
purpose (docs/breakdowns.md).
"""

from __future__ import annotations

import functools
import math

import breakdown_reference as R
import numpy as np
import pytest
from conftest import SHARED_TRACES, shared_trace

from hta.analysis.annotations import user_annotation_breakdown
from hta.analysis.idle import idle_time_breakdown
from hta.analysis.kernels import kernel_breakdown
from hta.analysis.overlap import comm_comp_overlap
from hta.analysis.temporal import temporal_breakdown_detail
from hta.trace_analysis import TraceAnalysis

CASES = {
    "trace_filter": ("trace_filter", {0: "sampled_rank-0.json.gz", 1: "sampled_rank-1.json.gz"}),
    "trace_diff_control": ("trace_diff/control", {3: "control.json.gz"}),
    "trace_diff_test": ("trace_diff/test", {1: "test.json.gz"}),
    "nccl_parser_config": ("nccl_parser_config", {0: "nccl_data.json.gz"}),
    "amd_trace": ("amd_trace", {0: "mi250_minitoy_train_ROCm6_2_kineto.json.gz"}),
}
#: HTA get_temporal_breakdown: rank -> (idle, compute, non_compute, kernel_time) in µs.
HTA_TEMPORAL = {
    "trace_filter": {0: (675191, 210320, 337336, 1222847), 1: (651136, 271973, 308077, 1231186)},
    "trace_diff_control": {3: (76007, 281336, 107251, 464594)},
    "trace_diff_test": {1: (51692, 514576, 178246, 744514)},
    "nccl_parser_config": {0: (506512, 113012, 41026, 660550)},
    "amd_trace": {0: (8780, 96, 35, 8911)},
}
#: HTA get_comm_comp_overlap: rank -> comp_comm_overlap_pctg (NaN: HTA's silent answer
#: for a rank without communication).
HTA_OVERLAP = {
    "trace_filter": {0: 14.95, 1: 19.93}, "trace_diff_control": {3: 46.24},
    "trace_diff_test": {1: 69.07}, "nccl_parser_config": {0: 15.14},
    "amd_trace": {0: math.nan},
}
#: HTA get_idle_time_breakdown (default consecutive_kernel_delay=30, applied to µs gaps):
#: (rank, stream) -> idle_time in µs of host_wait, kernel_wait, other.
HTA_IDLE = {
    "trace_filter": {(0, 7): (397917, 3765, 598335), (1, 7): (407794, 3475, 524657)},
    "trace_diff_control": {(3, 7): (133311, 17152, 32751)},
    "trace_diff_test": {(1, 7): (2960, 51853, 48809)},
    "nccl_parser_config": {(0, 7): (542749, 3224, 0)},
    "amd_trace": {(0, 0): (8780, 0, 0)},
}
#: HTA get_gpu_kernel_breakdown, trace_filter rank 0, the cutlass GEMM kernel
#: (``void cutlass::Kernel<cutlass_80_tensorop_s1688gemm...``): sum, max, min, mean (µs).
HTA_CUTLASS_ROW = (6409, 6409, 6409, 6409)
CATEGORIES = ("host_wait", "kernel_wait", "other")


@functools.cache
def _analyzer(case: str) -> TraceAnalysis:
    folder, _ = CASES[case]
    return TraceAnalysis(trace_dir=SHARED_TRACES / folder, cache=False, progress=False)


@functools.cache
def _events(case: str, rank: int) -> list:
    folder, files = CASES[case]
    return R.complete_events(R.load_json(SHARED_TRACES / folder / files[rank]))


def _setup(case: str):
    shared_trace(CASES[case][0])
    return _analyzer(case)


def _loader_tolerance(a: TraceAnalysis, case: str, rank: int) -> int:
    """0 when our loader read every timestamp exactly; otherwise a bound on the error of a
    union length: 2 x (largest endpoint error) x (GPU work events + 1).

    (Integer epoch-µs traces lost up to 128 ns per timestamp while ``decimal_us_to_ns``
    scaled them as floats; should such an error come back, these checks stay meaningful
    within the bound and the per-category idle check turns into an xfail naming it.)
    """
    ev = a.t.rank(rank).events
    ref = _events(case, rank)
    eps = 0
    for col, key in (("ts", "ts_ns"), ("end", "end_ns")):
        ours = np.sort(ev[col].to_numpy())
        exact = np.sort(np.array([e[key] for e in ref], dtype=np.int64))
        eps = max(eps, int(np.abs(ours - exact).max()))
    n = sum(1 for e in ref if R.work_class(e))
    return 0 if eps == 0 else 2 * eps * (n + 1)


def _ns(value_us: float) -> int:
    return round(value_us * 1000)


@pytest.mark.parametrize("case", list(CASES))
def test_temporal_matches_the_json(case):
    a = _setup(case)
    detail = temporal_breakdown_detail(a.t).set_index("rank")
    for rank in CASES[case][1]:
        ref = R.temporal(_events(case, rank))
        tol = _loader_tolerance(a, case, rank)
        row = detail.loc[rank]
        for col, key in [("kernel_time(us)", "span"), ("idle_time(us)", "idle"),
                         ("compute_time(us)", "compute"),
                         ("non_compute_time(us)", "non_compute"), ("comm_time(us)", "comm")]:
            assert abs(_ns(row[col]) - ref[key]) <= tol, (case, rank, col, tol)


@pytest.mark.parametrize("case", list(CASES))
def test_overlap_matches_the_json(case):
    a = _setup(case)
    df = comm_comp_overlap(a.t).set_index("rank")
    for rank in CASES[case][1]:
        ref = R.temporal(_events(case, rank))
        tol = _loader_tolerance(a, case, rank)
        assert abs(_ns(df.loc[rank, "comm_time(us)"]) - ref["comm"]) <= tol
        assert abs(_ns(df.loc[rank, "overlap_time(us)"]) - ref["overlap"]) <= tol
        if ref["comm"] == 0:  # amd_trace: no communication, and we say so
            assert math.isnan(df.loc[rank, "comp_comm_overlap_pctg"])
            assert df.loc[rank, "note"] == "no communication"
        elif tol == 0:
            assert df.loc[rank, "comp_comm_overlap_pctg"] == 100 * ref["overlap"] / ref["comm"]


@pytest.mark.parametrize("case", list(CASES))
def test_idle_matches_the_json(case):
    a = _setup(case)
    df = idle_time_breakdown(a.t, consecutive_kernel_delay_ns=30_000)
    inexact = []
    for rank in CASES[case][1]:
        ref = R.idle_gaps(_events(case, rank), 30_000)
        tol = _loader_tolerance(a, case, rank)
        ours = {(r.stream, r.idle_category): _ns(r.idle_time)
                for r in df[df["rank"] == rank].itertuples()}
        for stream in {s for s, _ in ours}:
            total = sum(ours[(stream, c)] for c in CATEGORIES)
            assert abs(total - sum(ref.get((stream, c), 0) for c in CATEGORIES)) <= tol
        if tol:
            inexact.append(rank)
            continue
        assert {k: v for k, v in ours.items() if v} == ref
    if inexact:
        # a gap's category flips when the loader moves a launch across the previous end
        pytest.xfail(f"{case} ranks {inexact}: the loader rounds integer-µs timestamps by up "
                     "to 128 ns; per-category idle time cannot be compared exactly")


@pytest.mark.parametrize("case", list(CASES))
def test_kernel_durations_match_the_json(case):
    a = _setup(case)
    df = kernel_breakdown(a.t, num_kernels=10**9)
    for rank in CASES[case][1]:
        ev = _events(case, rank)
        ref = {}
        for cat in R.GPU_WORK_CATS:
            ref.update(R.duration_sums(ev, cat))
        part = df[df["rank"] == rank]
        ours = {n: (_ns(s), c) for n, s, c in zip(part["name"], part["sum (us)"], part["count"])}
        assert ours == ref


@pytest.mark.parametrize("case", ["nccl_parser_config", "amd_trace", "trace_filter"])
@pytest.mark.parametrize("gpu", [True, False])
def test_annotation_durations_match_the_json(case, gpu):
    a = _setup(case)
    df = user_annotation_breakdown(a.t, use_gpu_annotation=gpu, num_kernels=10**9)
    for rank in CASES[case][1]:
        ref = R.duration_sums(_events(case, rank),
                              "gpu_user_annotation" if gpu else "user_annotation")
        part = df[df["rank"] == rank]
        ours = {n: (_ns(s), c) for n, s, c in zip(part["name"], part["sum (us)"], part["count"])}
        assert ours == ref


# -- HTA: where we agree, and the differences we make on purpose ------------------------------

@pytest.mark.parametrize("case", list(CASES))
def test_hta_temporal_is_our_definition_on_hta_view(case):
    a = _setup(case)
    ours = temporal_breakdown_detail(a.t).set_index("rank")
    for rank, hta in HTA_TEMPORAL[case].items():
        events = _events(case, rank)
        emulated = R.temporal(R.hta_view(events))
        assert (emulated["idle"], emulated["compute"], emulated["non_compute"],
                emulated["span"]) == tuple(1000 * x for x in hta)
        if R.hta_view(events) == [e for e in events]:  # HTA saw the trace as it is
            tol = _loader_tolerance(a, case, rank)
            assert abs(_ns(ours.loc[rank, "compute_time(us)"]) - 1000 * hta[1]) <= tol


def test_hta_drops_gpu_work_without_a_launch():
    # trace_diff/test: 614 kernels/copies have no launch call in the trace; HTA leaves
    # them out, so it reports 33.6 ms less compute and 24.4 ms more idle than the GPU had
    a = _setup("trace_diff_test")
    row = temporal_breakdown_detail(a.t).iloc[0]
    ref = R.temporal(_events("trace_diff_test", 1))
    tol = _loader_tolerance(a, "trace_diff_test", 1)
    assert abs(_ns(row["compute_time(us)"]) - ref["compute"]) <= tol
    assert ref["compute"] - 1000 * HTA_TEMPORAL["trace_diff_test"][1][1] == 33_572_000
    assert 1000 * HTA_TEMPORAL["trace_diff_test"][1][0] - ref["idle"] == 24_396_000


def test_hta_cuts_sub_microsecond_precision():
    # nccl_parser_config has ns timestamps: HTA cuts each event inward to whole µs and
    # loses 2.6 ms of compute; ours is exact (the loader reads these exactly)
    a = _setup("nccl_parser_config")
    assert _loader_tolerance(a, "nccl_parser_config", 0) == 0
    row = temporal_breakdown_detail(a.t).iloc[0]
    ref = R.temporal(_events("nccl_parser_config", 0))
    assert _ns(row["compute_time(us)"]) == ref["compute"] == 115_655_847
    assert HTA_TEMPORAL["nccl_parser_config"][0][1] == 113_012


@pytest.mark.parametrize("case", list(CASES))
def test_hta_overlap(case):
    a = _setup(case)
    ours = comm_comp_overlap(a.t).set_index("rank")
    for rank, hta in HTA_OVERLAP[case].items():
        emulated = R.temporal(R.hta_view(_events(case, rank)))
        if math.isnan(hta):
            assert emulated["comm"] == 0 and ours.loc[rank, "note"] == "no communication"
            continue
        assert round(100 * emulated["overlap"] / emulated["comm"], 2) == hta
        if case in ("trace_filter", "trace_diff_control"):  # nothing dropped or cut
            assert round(ours.loc[rank, "comp_comm_overlap_pctg"], 2) == hta


@pytest.mark.parametrize("case", list(CASES))
def test_hta_idle(case):
    _setup(case)
    for (rank, stream), hta in HTA_IDLE[case].items():
        events = _events(case, rank)
        emulated = R.idle_gaps(R.hta_view(events), 30_000, hta_semantics=True)
        assert tuple(emulated.get((stream, c), 0) for c in CATEGORIES) == tuple(
            1000 * x for x in hta)
        if case in ("trace_filter", "trace_diff_control"):
            # exact µs traces without overlapping kernels on a stream: our definition
            # gives HTA's figures
            ref = R.idle_gaps(events, 30_000)
            assert tuple(ref.get((stream, c), 0) for c in CATEGORIES) == tuple(
                1000 * x for x in hta)


def test_hta_kernel_stats_after_folding_are_the_sums():
    # HTA re-aggregates the kept kernels' *sums* after folding, so their max, min and mean
    # all equal the sum and stddev is 0; ours are those of the individual kernels
    a = _setup("trace_filter")
    df = kernel_breakdown(a.t)
    row = df[(df["rank"] == 0) & df["name"].str.startswith(
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm")].iloc[0]
    durs = [e["end_ns"] - e["ts_ns"] for e in _events("trace_filter", 0)
            if e["name"] == row["name"]]
    assert _ns(row["sum (us)"]) == sum(durs) == 1000 * HTA_CUTLASS_ROW[0]
    assert (_ns(row["max (us)"]), _ns(row["min (us)"]), row["count"]) == (
        max(durs), min(durs), len(durs))
    assert max(durs) < 1000 * HTA_CUTLASS_ROW[1]
