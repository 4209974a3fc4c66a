"""The distribution of per-rank values across ranks (hta.analysis.rank_distribution) and
its figure: statistics known by construction, and a figure whose size does not grow with
the ranks."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from hta.analysis.rank_distribution import COLUMNS, rank_distribution
from hta.plots.distribution import rank_distribution_figure


def _table(values: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"rank": range(len(values)), "x": values})


def test_quartiles_whiskers_and_extreme_ranks() -> None:
    row = rank_distribution(_table([float(v) for v in range(100)]), ["x"]).iloc[0]
    assert list(rank_distribution(_table([1.0]), ["x"]).columns) == COLUMNS
    assert (row["n"], row["min"], row["max"]) == (100, 0.0, 99.0)
    assert (row["q1"], row["median"], row["q3"]) == (24.75, 49.5, 74.25)
    assert (row["lower"], row["upper"], row["outliers"]) == (0.0, 99.0, 0)
    assert (row["min_rank"], row["max_rank"]) == (0, 99)


def test_an_outlier_lies_beyond_the_whisker() -> None:
    """0..99 and one rank at 1000: quartiles 25 and 75, the upper fence 75 + 1.5 x 50 =
    150, so the whisker stops at 99 and rank 100 is the one outlier (and the max)."""
    row = rank_distribution(_table([float(v) for v in range(100)] + [1000.0]), ["x"]).iloc[0]
    assert (row["q1"], row["q3"], row["upper"], row["outliers"]) == (25.0, 75.0, 99.0, 1)
    assert (row["max"], row["max_rank"]) == (1000.0, 100)


def test_missing_values_are_left_out() -> None:
    table = _table([3.0, np.nan, 1.0, 2.0]).assign(y=np.nan)
    x, y = rank_distribution(table, ["x", "y"]).to_dict("records")
    assert (x["n"], x["median"], x["min_rank"], x["max_rank"]) == (3, 2.0, 2, 0)
    assert y["n"] == 0 and np.isnan(y["median"]) and y["min_rank"] == -1


def test_the_figure_weighs_the_same_at_any_rank_count() -> None:
    rng = np.random.default_rng(0)
    sizes = []
    for n in (10, 10_000):
        table = pd.DataFrame({"rank": range(n), "a": rng.uniform(0, 100, n),
                              "b": rng.uniform(0, 100, n)})
        marked = pd.DataFrame({"rank": [0, 1], "metric": ["a", "b"], "value": [5.0, 6.0],
                               "why": ["slowest", "most idle"]})
        fig = rank_distribution_figure(rank_distribution(table, ["a", "b"]), marked,
                                       {"a": "compute", "b": "idle"}, "t", "%")
        assert [t.type for t in fig.data] == ["box", "scatter"]
        assert list(fig.data[0].x) == ["compute", "idle"]
        assert list(fig.data[1].text) == ["rank 0", "rank 1"]
        sizes.append(len(fig.to_json()))
        assert len(json.dumps(fig.to_plotly_json()["data"], default=str)) < 2_000
    assert abs(sizes[0] - sizes[1]) < 200, sizes


def test_close_ranks_share_one_label() -> None:
    """Three ranks within 4 % of the value range on one metric read as one label at the
    lowest, the far one alone (on the other side); a lone rank on another metric keeps
    its own; every point keeps its rank in its hover."""
    table = pd.DataFrame({"rank": range(10), "a": np.arange(10) * 10.0,
                          "b": np.arange(10) * 10.0})
    marked = pd.DataFrame({"rank": [7, 3, 5, 9, 2], "metric": ["a", "a", "a", "a", "b"],
                           "value": [41.0, 40.0, 42.5, 90.0, 20.0],
                           "why": ["slowest", "fastest", "median", "most idle", "x"]})
    fig = rank_distribution_figure(rank_distribution(table, ["a", "b"]), marked)
    points = fig.data[1]
    assert list(points.text) == ["", "ranks 3, 5, 7", "", "rank 9", "rank 2"]
    # on "a" the groups alternate sides; "b", the rightmost box, leans inwards
    assert list(points.textposition) == ["middle right"] * 3 + ["middle left", "middle left"]
    assert [row[1] for row in points.customdata] == ["rank 7", "rank 3", "rank 5", "rank 9",
                                                     "rank 2"]
