"""Per-group medians over numpy arrays (hta.analysis.grouped) equal pandas' groupby
medians, counts and reindexing, on random tables with missing values and missing keys."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hta.analysis.grouped import group_medians, medians_at, row_medians


@pytest.mark.parametrize("seed", range(40))
def test_group_medians_equal_a_groupby_median(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 80))
    keys = rng.integers(0, 9, n)
    values = rng.integers(0, 10_000, n).astype(np.float64)
    if n and seed % 2:
        values[rng.integers(0, n, 4)] = np.nan
    expected = pd.Series(values).groupby(keys).median().dropna()
    got_keys, got = group_medians(keys, values)
    np.testing.assert_array_equal(got_keys, expected.index.to_numpy())
    np.testing.assert_array_equal(got, expected.to_numpy())
    query = rng.integers(-2, 12, 15)
    np.testing.assert_array_equal(medians_at(got_keys, got, query),
                                  expected.reindex(query).to_numpy())


def test_even_and_odd_groups_by_hand() -> None:
    keys, medians = group_medians(np.array([5, 1, 5, 1, 1, 5, 5]),
                                  np.array([10, 3, 40, 1, 2, 20, 30]))
    assert keys.tolist() == [1, 5]
    assert medians.tolist() == [2.0, 25.0]  # odd: the middle; even: mean of the two
    assert medians_at(keys, medians, np.array([5, 7])).tolist()[0] == 25.0
    assert np.isnan(medians_at(keys, medians, np.array([7]))[0])
    empty_keys, empty = group_medians(np.zeros(0, dtype=np.int64), np.zeros(0))
    assert empty_keys.size == 0 and empty.size == 0


@pytest.mark.parametrize("seed", range(40))
def test_row_medians_equal_a_groupby_transform(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    name = rng.choice(np.array(["all_reduce", "broadcast", None], dtype=object), n)
    size = rng.choice(np.array([1024.0, -1.0, 4096.0]), n)
    dur = rng.integers(1, 1_000, n)
    got_median, got_count = row_medians([name, size], dur)
    by = pd.DataFrame({"c": name, "b": size, "d": dur}).groupby(["c", "b"], sort=False)["d"]
    median = by.transform("median").to_numpy(np.float64)
    np.testing.assert_array_equal(got_median, median)
    grouped = ~np.isnan(median)
    np.testing.assert_array_equal(got_count[grouped], by.transform("size").to_numpy()[grouped])
    assert (got_count[~grouped] == 0).all()  # a missing key: in no group


def test_group_codes_are_a_groupby_s_groups_in_its_order() -> None:
    """By construction: missing key values are a group of their own (``dropna=False``),
    and groups are numbered in the order they first appear (``sort=False``)."""
    from hta.analysis.grouped import group_codes

    frame = pd.DataFrame({
        "op": ["mm", "add", "mm", None, "add", None, "mm"],
        "dims": ["[1]", "[2]", "[1]", "[3]", "[2]", "[3]", "[9]"],
        "rank": [0, 0, 0, 0, 1, 0, 0],
    })
    codes = group_codes(frame, ["op", "dims", "rank"])
    assert codes.tolist() == [0, 1, 0, 2, 3, 2, 4]
    expected = frame.groupby(["op", "dims", "rank"], sort=False, dropna=False).ngroup()
    assert codes.tolist() == expected.tolist()
    assert group_codes(frame.iloc[:0], ["op"]).tolist() == []
