"""GPU kernel breakdown on hand-built traces: overlap classes and folded statistics."""

from __future__ import annotations

import math

import pytest
from breakdown_cases import FOLD_DURATIONS, kernels_rank, load, mixed

from hta.analysis.kernels import (
    KERNEL_COLUMNS,
    gpu_kernel_breakdown,
    kernel_breakdown,
    kernel_type_breakdown,
)


def _sums(df):
    return {k: round(v * 1000) for k, v in zip(df["kernel_type"], df["sum"])}


def test_overlap_classes_partition_busy_time(tmp_path):
    # mixed(): [10,15) C; [15,16) C+N; [16,18) C+N+M; [18,20) C+N; [20,28) N; [28,30) N+M;
    # [30,34) M; [40,42) C; [42,48) C+N; [48,55) C; [60,61) N; [70.5,70.9) C   (k ns)
    a = load(tmp_path, mixed(0))
    df = kernel_type_breakdown(a.t)
    assert _sums(df) == {
        "COMPUTATION": 14_400,
        "COMPUTATION overlapping COMMUNICATION": 9_000,
        "COMMUNICATION": 9_000,
        "MEMORY": 4_000,
        "COMPUTATION overlapping COMMUNICATION overlapping MEMORY": 2_000,
        "COMMUNICATION overlapping MEMORY": 2_000,
    }
    assert df["sum"].is_monotonic_decreasing
    assert df["percentage"].sum() == pytest.approx(100.0)
    assert df["percentage"].iloc[0] == pytest.approx(100 * 14_400 / 40_400)


def test_without_memory_kernels(tmp_path):
    a = load(tmp_path, mixed(0))
    df = kernel_type_breakdown(a.t, include_memory_kernels=False)
    assert _sums(df) == {"COMPUTATION": 14_400, "COMPUTATION overlapping COMMUNICATION":
                         11_000, "COMMUNICATION": 11_000}


def test_by_rank_and_summed_over_ranks(tmp_path):
    a = load(tmp_path, mixed(0), mixed(1))
    per = kernel_type_breakdown(a.t, by_rank=True)
    assert per["rank"].tolist() == [0] * 6 + [1] * 6
    assert per.groupby("rank")["percentage"].sum().tolist() == pytest.approx([100, 100])
    assert _sums(kernel_type_breakdown(a.t))["COMPUTATION"] == 2 * 14_400


def _row(df, rank, name):
    sel = df[(df["rank"] == rank) & (df["name"] == name)]
    assert len(sel) == 1, (rank, name, df)
    return sel.iloc[0]


def test_folding_num_kernels_wins_over_ratio(tmp_path):
    a = load(tmp_path, kernels_rank(0, FOLD_DURATIONS[0]), kernels_rank(1, FOLD_DURATIONS[1]))
    df = kernel_breakdown(a.t, num_kernels=2, duration_ratio=0.8)
    assert list(df.columns) == KERNEL_COLUMNS
    assert sorted(set(df["name"])) == ["gemm_A", "gemm_B", "others"]
    a0 = _row(df, 0, "gemm_A")  # 10_000, 10_000, 5_000
    assert (a0["sum (us)"], a0["count"], a0["min (us)"], a0["max (us)"]) == (25.0, 3, 5.0, 10.0)
    assert a0["mean (us)"] == pytest.approx(25 / 3)
    assert a0["stddev"] == pytest.approx(math.sqrt(25 / 3))  # sample std of 10, 10, 5 µs
    a1 = _row(df, 1, "gemm_A")  # a single 25_000 ns kernel: std shown as 0
    assert (a1["sum (us)"], a1["count"], a1["stddev"]) == (25.0, 1, 0.0)
    o0 = _row(df, 0, "others")  # C 5_000, 2_000 and D 2_000
    assert (o0["sum (us)"], o0["count"], o0["min (us)"], o0["max (us)"]) == (9.0, 3, 2.0, 5.0)
    assert o0["mean (us)"] == 3.0
    assert o0["stddev"] == pytest.approx(math.sqrt(3.0))
    o1 = _row(df, 1, "others")  # C 8_000, D 3_000
    assert (o1["sum (us)"], o1["count"], o1["mean (us)"]) == (11.0, 2, 5.5)
    assert o1["stddev"] == pytest.approx(math.sqrt(12.5))


def test_folding_by_cumulative_ratio(tmp_path):
    a = load(tmp_path, kernels_rank(0, FOLD_DURATIONS[0]), kernels_rank(1, FOLD_DURATIONS[1]))
    # num_kernels 3: A (0 before), B (50k before < 80k) kept; C has 80k before: folded
    assert sorted(set(kernel_breakdown(a.t, num_kernels=3)["name"])) == [
        "gemm_A", "gemm_B", "others"]
    # ratio 0.5: B has 50k before, not < 50k
    assert sorted(set(kernel_breakdown(a.t, num_kernels=3, duration_ratio=0.5)["name"])) == [
        "gemm_A", "others"]
    # at most num_kernels names: nothing folded, whatever the ratio
    assert sorted(set(kernel_breakdown(a.t, num_kernels=4, duration_ratio=0.1)["name"])) == [
        "gemm_A", "gemm_B", "gemm_C", "gemm_D"]


def test_top_kernels_are_chosen_over_all_ranks(tmp_path):
    # job totals A 60_000, B 45_000, C 21_000: A and B are the top 2 on every rank, although
    # rank 1 alone would rank C (20_000) and A first (HTA folds per rank: B would vanish
    # from rank 1 and could not be compared across ranks)
    a = load(tmp_path, kernels_rank(0, {"gemm_A": [50_000], "gemm_B": [40_000],
                                        "gemm_C": [1_000]}),
             kernels_rank(1, {"gemm_A": [10_000], "gemm_C": [20_000], "gemm_B": [5_000]}))
    df = kernel_breakdown(a.t, num_kernels=2)
    assert df.groupby("rank")["name"].apply(sorted).tolist() == [
        ["gemm_A", "gemm_B", "others"]] * 2
    assert _row(df, 1, "gemm_B")["sum (us)"] == 5.0
    assert _row(df, 1, "others")["sum (us)"] == 20.0


def test_kernel_types_and_memory_flag(tmp_path):
    a = load(tmp_path, mixed(0))
    types, table = gpu_kernel_breakdown(a.t)
    assert set(table["kernel_type"]) == {"COMPUTATION", "COMMUNICATION", "MEMORY"}
    comm = table[table["kernel_type"] == "COMMUNICATION"]
    assert round(comm["sum (us)"].sum() * 1000) == 15_000 + 6_000 + 1_000
    sub_us = _row(table, 0, "triton_poi_fused_add_0")  # K3 10_000 and S 400
    assert (sub_us["count"], sub_us["min (us)"]) == (2, 0.4)
    zero = _row(table, 0, "void at::native::vectorized_elementwise_kernel<4, "
                "at::native::FillFunctor<float>>")
    assert (zero["count"], zero["sum (us)"]) == (1, 0.0)
    _, no_mem = gpu_kernel_breakdown(a.t, include_memory_kernels=False)
    assert "MEMORY" not in set(no_mem["kernel_type"])
    assert len(types) == 6


def test_bad_arguments(tmp_path):
    a = load(tmp_path, mixed(0))
    with pytest.raises(ValueError, match="duration_ratio"):
        kernel_breakdown(a.t, duration_ratio=80)
    with pytest.raises(ValueError, match="num_kernels"):
        kernel_breakdown(a.t, num_kernels=0)


def test_docs_example(tmp_path):
    # docs/breakdowns.md: compute [0,10) µs and NCCL [6,12): 6 / 4 / 2 µs
    from breakdown_cases import overlap_rank

    a = load(tmp_path, overlap_rank(0, comm=[(6_000, 6_000)], compute=[(0, 10_000)]))
    df = kernel_type_breakdown(a.t)
    assert _sums(df) == {"COMPUTATION": 6_000, "COMPUTATION overlapping COMMUNICATION": 4_000,
                         "COMMUNICATION": 2_000}
    assert df["percentage"].round(1).tolist() == [50.0, 33.3, 16.7]
