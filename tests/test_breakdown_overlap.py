"""Communication/computation overlap on hand-built ranks: hidden, partly hidden, exposed."""

from __future__ import annotations

import math

from breakdown_cases import DEEPEP, FUSED, load, mixed, overlap_rank

from hta.analysis.overlap import COLUMNS, NO_COMMUNICATION, comm_comp_overlap
from hta.model.selection import Selection


def _ranks(tmp_path):
    return load(
        tmp_path,
        overlap_rank(0, comm=[(1_000, 2_000)], compute=[(0, 5_000)]),  # fully hidden
        # comm [0,10k) + [20k,30k) = 20_000; compute [5k,25k): 5_000 + 5_000 hidden
        overlap_rank(1, comm=[(0, 10_000), (20_000, 10_000)], compute=[(5_000, 20_000)]),
        overlap_rank(2, comm=[(0, 1_000)], compute=[(2_000, 1_000)]),  # exposed
        overlap_rank(3, comm=[], compute=[(0, 1_000)]),  # no communication
        # an unknown kernel name that carries collective args is communication
        overlap_rank(4, comm=[(0, 4_000)], compute=[(1_000, 1_000)], comm_name=FUSED,
                     **{"Collective name": "allreduce", "Group size": 4}),
        # DeepEP dispatch, two kernels overlapping each other: their union counts once
        overlap_rank(5, comm=[(0, 4_000), (2_000, 4_000)], compute=[(5_000, 3_000)],
                     comm_name=DEEPEP),
        overlap_rank(6, comm=[(100, 0)], compute=[(0, 1_000)]),  # zero-duration comm
    )


def test_overlap_percentages(tmp_path):
    df = comm_comp_overlap(_ranks(tmp_path).t).set_index("rank")
    assert list(df.reset_index().columns) == COLUMNS
    assert df.loc[0, "comp_comm_overlap_pctg"] == 100.0
    assert df.loc[1, "comp_comm_overlap_pctg"] == 50.0
    assert df.loc[2, "comp_comm_overlap_pctg"] == 0.0
    assert df.loc[4, "comp_comm_overlap_pctg"] == 25.0
    assert df.loc[5, "comp_comm_overlap_pctg"] == 100.0 * 1_000 / 6_000
    assert [round(x * 1000) for x in df["comm_time(us)"]] == [
        2_000, 20_000, 1_000, 0, 4_000, 6_000, 0]
    assert [round(x * 1000) for x in df["overlap_time(us)"]] == [
        2_000, 10_000, 0, 0, 1_000, 1_000, 0]
    assert df.loc[[0, 1, 2, 4, 5], "note"].tolist() == [""] * 5


def test_rank_without_communication_says_so(tmp_path):
    df = comm_comp_overlap(_ranks(tmp_path).t).set_index("rank")
    assert math.isnan(df.loc[3, "comp_comm_overlap_pctg"])
    assert df.loc[3, "note"] == NO_COMMUNICATION
    assert math.isnan(df.loc[6, "comp_comm_overlap_pctg"])
    assert df.loc[6, "note"] == "communication kernels of zero duration only"


def test_mixed_trace_and_iterations(tmp_path):
    a = load(tmp_path, mixed(0))
    row = comm_comp_overlap(a.t).iloc[0]
    assert row["comp_comm_overlap_pctg"] == 50.0
    only1 = comm_comp_overlap(a.t, Selection.of(iterations=[1]))
    assert only1["comp_comm_overlap_pctg"].tolist() == [50.0]
    empty = comm_comp_overlap(a.t, Selection.of(iterations=[9])).iloc[0]
    assert empty["note"] == NO_COMMUNICATION
