"""Temporal breakdown on hand-built traces: exact ns figures (derivations in breakdown_cases)."""

from __future__ import annotations

import math

import pytest
from breakdown_cases import idle_case, load, mixed

from hta.analysis.temporal import HTA_COLUMNS, temporal_breakdown, temporal_breakdown_detail
from hta.model.selection import Selection


def _ns(row, col):
    return round(row[col] * 1000)


def test_mixed_trace_hta_columns(tmp_path):
    a = load(tmp_path, mixed(0))
    df = temporal_breakdown(a.t)
    assert list(df.columns) == HTA_COLUMNS
    row = df.iloc[0]
    assert row["rank"] == 0
    assert _ns(row, "kernel_time(us)") == 62_000
    assert _ns(row, "idle_time(us)") == 21_600
    assert _ns(row, "compute_time(us)") == 25_400
    assert _ns(row, "non_compute_time(us)") == 15_000
    assert row["idle_time_pctg"] == round(100 * 21_600 / 62_000, 2)
    assert row["compute_time_pctg"] == round(100 * 25_400 / 62_000, 2)
    assert row["non_compute_time_pctg"] == round(100 * 15_000 / 62_000, 2)


def test_mixed_trace_exposed_communication_and_memory(tmp_path):
    a = load(tmp_path, mixed(0))
    row = temporal_breakdown_detail(a.t).iloc[0]
    assert _ns(row, "exposed_comm_time(us)") == 11_000
    assert _ns(row, "exposed_memory_time(us)") == 4_000
    assert _ns(row, "comm_time(us)") == 22_000
    assert _ns(row, "memory_time(us)") == 8_000
    assert row["non_compute_time(us)"] == row["exposed_comm_time(us)"] + row[
        "exposed_memory_time(us)"]
    assert row["note"] == ""


def test_non_nccl_communication_is_not_compute(tmp_path):
    # symmetric-memory all-reduce and DeepEP dispatch are communication by the kind rules:
    # counted as compute they would raise compute_time by C2's and C3's exposed parts
    a = load(tmp_path, mixed(0))
    ev = a.t.rank(0).decoded()
    kinds = dict(zip(ev["name"], ev["kind"]))
    assert kinds["multimem_all_reduce_kernel"] == "communication"
    assert kinds["void deep_ep::intranode::dispatch<8, 768>(int4*, float*)"] == "communication"
    assert _ns(temporal_breakdown(a.t).iloc[0], "compute_time(us)") == 25_400


def test_per_iteration_windows_and_selection(tmp_path):
    # idle_case, step 1: A B C D on 7, P Q on 9, memcpys on 24: span [1_000, 31_000) = 30_000;
    #   busy [1_000, 10_000) 9_000 + [10_400, 12_000) 1_600 + 4_000 + 1_000 = 15_600
    # step 2: E..K: span [55_500, 71_900) = 16_400; busy 5_000 + 300 + 1_000 + 300 = 6_600
    a = load(tmp_path, idle_case())
    per = temporal_breakdown_detail(a.t, per_iteration=True).set_index("iteration")
    assert _ns(per.loc[1], "kernel_time(us)") == 30_000
    assert _ns(per.loc[1], "idle_time(us)") == 30_000 - 15_600
    assert _ns(per.loc[2], "kernel_time(us)") == 16_400
    assert _ns(per.loc[2], "idle_time(us)") == 16_400 - 6_600
    both = temporal_breakdown(a.t, Selection.of(iterations=[1, 2])).iloc[0]
    assert _ns(both, "kernel_time(us)") == 30_000 + 16_400
    assert _ns(both, "idle_time(us)") == 14_400 + 9_800
    whole = temporal_breakdown(a.t).iloc[0]  # one window: the time between steps is idle
    assert _ns(whole, "kernel_time(us)") == 71_900 - 1_000
    assert _ns(whole, "idle_time(us)") == 70_900 - 15_600 - 6_600
    only2 = temporal_breakdown(a.t, Selection.of(iterations=2)).iloc[0]
    assert _ns(only2, "compute_time(us)") == 6_600


def test_gpu_work_without_launch_in_the_trace_counts(tmp_path):
    # kernel I [70_000, 71_000) has no launch call: the GPU was busy, so it is compute
    a = load(tmp_path, idle_case())
    row = temporal_breakdown(a.t, Selection.of(iterations=2)).iloc[0]
    assert _ns(row, "compute_time(us)") == 6_600  # 1_000 of it is kernel I


def test_rank_without_gpu_work_says_so(tmp_path, caplog):
    from kineto_builder import TraceBuilder

    cpu_only = TraceBuilder(rank=1)
    cpu_only.cpu_op("aten::add", 0, 1_000)
    a = load(tmp_path, mixed(0), cpu_only)
    detail = temporal_breakdown_detail(a.t).set_index("rank")
    assert detail.loc[1, "kernel_time(us)"] == 0
    assert math.isnan(detail.loc[1, "idle_time_pctg"])
    assert "no GPU work" in detail.loc[1, "note"]
    assert detail.loc[0, "note"] == ""
    assert "rank 1" in caplog.text


def test_selected_iteration_without_gpu_work_gets_a_row_with_a_note(tmp_path):
    a = load(tmp_path, idle_case())
    per = temporal_breakdown_detail(a.t, Selection.of(iterations=[2, 7]), per_iteration=True)
    assert per["iteration"].tolist() == [2, 7]
    assert per["note"].tolist()[0] == ""
    assert "no GPU work" in per["note"].tolist()[1]


def test_ranks_selection_and_unknown_rank(tmp_path):
    a = load(tmp_path, mixed(0), mixed(1))
    assert temporal_breakdown(a.t, Selection.of([1]))["rank"].tolist() == [1]
    assert temporal_breakdown(a.t)["rank"].tolist() == [0, 1]
    with pytest.raises(KeyError, match="rank 5 is not loaded"):
        temporal_breakdown(a.t, Selection.of([5]))


def test_docs_example(tmp_path):
    # docs/breakdowns.md: compute [0,10) and [30,40) µs, NCCL [5,20), memcpy [18,25)
    from breakdown_cases import NCCL, overlap_rank

    b = overlap_rank(0, comm=[(5_000, 15_000)], compute=[(0, 10_000), (30_000, 10_000)],
                     comm_name=NCCL)
    b.memcpy("HtoD (Pinned -> Device)", cpu_ts=0, cpu_dur=10, gpu_ts=18_000, gpu_dur=7_000,
             stream=24)
    row = temporal_breakdown_detail(load(tmp_path, b).t).iloc[0]
    got = [row[c] for c in ("kernel_time(us)", "idle_time(us)", "compute_time(us)",
                            "non_compute_time(us)", "exposed_comm_time(us)",
                            "exposed_memory_time(us)", "comm_time(us)", "memory_time(us)")]
    assert got == [40.0, 5.0, 20.0, 15.0, 10.0, 5.0, 15.0, 7.0]
