"""Helpers shared by the lazy-loading, remote-file and Dask tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd

from hta.synthetic import generate_job

#: Facade methods whose answers must not depend on where the ranks are.
TABLE_METHODS = ("get_rank_summary", "get_unclassified_kernels")
FIGURE_METHODS = ("get_temporal_breakdown", "get_temporal_breakdown_detail",
                  "get_comm_comp_overlap")


def make_job(folder: Path, ranks: int = 8, kernels_per_step: int = 30) -> list[Path]:
    """A small generated job (a few hundred events per rank)."""
    return generate_job(folder, ranks=ranks, steps=2, kernels_per_step=kernels_per_step)


def complete_events_in_json(path: Path) -> int:
    """Complete (``ph == "X"``) events of a trace file, counted with the json module."""
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return sum(1 for e in json.load(fh)["traceEvents"] if e.get("ph") == "X")


def assert_same_answers(expected: Any, got: Any, ranks: list[int] | None = None) -> None:
    """Every per-rank answer, events table, symbol table and metadata are equal (the
    ``source`` file name apart when the two were loaded from different locations)."""
    assert got.ranks == expected.ranks
    assert got.t.symbols == expected.t.symbols
    for name in TABLE_METHODS:
        pd.testing.assert_frame_equal(getattr(got, name)(), getattr(expected, name)(),
                                      obj=name)
    for name in FIGURE_METHODS:
        pd.testing.assert_frame_equal(getattr(got, name)(visualize=False),
                                      getattr(expected, name)(visualize=False), obj=name)
    pd.testing.assert_frame_equal(
        got.get_temporal_breakdown_detail(per_iteration=True, visualize=False),
        expected.get_temporal_breakdown_detail(per_iteration=True, visualize=False))
    pd.testing.assert_frame_equal(got.get_comm_comp_overlap(iterations=[1], visualize=False),
                                  expected.get_comm_comp_overlap(iterations=[1],
                                                                 visualize=False))
    for rank in ranks if ranks is not None else expected.ranks:
        pd.testing.assert_frame_equal(got.t.get_trace(rank), expected.t.get_trace(rank))
        got_meta, expected_meta = dict(got.metadata(rank)), dict(expected.metadata(rank))
        if got.trace_dir != expected.trace_dir:  # the same files seen through another URL
            got_meta.pop("source"), expected_meta.pop("source")
        assert got_meta == expected_meta
        for table, frame in expected.t.rank(rank).tables.items():
            pd.testing.assert_frame_equal(got.t.rank(rank).tables[table], frame, obj=table)
