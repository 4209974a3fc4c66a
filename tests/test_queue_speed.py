"""The vectorised pieces of the queue length summary give what the plain definitions give."""

from __future__ import annotations

import numpy as np
import pytest

from hta.analysis.queue import _dense_pairs, _quantiles_by_histogram, _weighted_quantiles


@pytest.mark.parametrize(("seed", "scale"), [(0, 1_000_003), (1, 1), (2, 1), (3, 97)])
def test_dense_pairs_is_numpy_unique_over_rows(seed: int, scale: int) -> None:
    """Both ways (a table for small id ranges, a sort for wide ones)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, 5000) * scale
    b = rng.integers(-50, 50, 5000)
    ua, ub, key = _dense_pairs(a, b)
    uniq, inverse = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    assert np.array_equal(ua, uniq[:, 0]) and np.array_equal(ub, uniq[:, 1])
    assert np.array_equal(key, inverse.reshape(-1))
    assert [len(x) for x in _dense_pairs(a[:0], b[:0])] == [0, 0, 0]


def _reference(values: list[int], holds: list[float], q: float) -> float:
    """Smallest value held at or below for at least fraction q of the total time."""
    total = sum(holds)
    pairs = sorted(zip(values, holds))
    held = 0.0
    for v, w in pairs:
        if w <= 0:
            continue
        held += w
        if held / total >= q - 1e-12:
            return float(v)
    return float("nan")


@pytest.mark.parametrize(("scale", "way"), [(1, "histogram"), (1, "auto"),
                                           (10_000_000, "auto")])
def test_weighted_quantiles_match_the_definition(scale: int, way: str) -> None:
    """The histogram (small values) and the sort (large values) give the definition."""
    rng = np.random.default_rng(7)
    key = np.sort(rng.integers(0, 6, 400))
    value = rng.integers(0, 9, 400) * scale
    hold = rng.integers(0, 5, 400).astype(np.float64) * 1000
    hold[key == 5] = 0.0  # a stream whose rows all hold nothing: NaN
    quantiles = (0.0, 0.25, 0.5, 0.9)
    got = (_quantiles_by_histogram if way == "histogram" else _weighted_quantiles)(
        key, value, hold, 6, quantiles)
    for k in range(5):
        v, w = value[key == k].tolist(), hold[key == k].tolist()
        assert got[0.0][k] == min(x for x, h in zip(v, w) if h > 0)
        for q in (0.25, 0.5, 0.9):
            assert got[q][k] == _reference(v, w, q), (k, q)
    assert all(np.isnan(got[q][5]) for q in got)


@pytest.mark.parametrize(("groups", "sorted_ts"), [(6, True), (70_000, True), (6, False)])
def test_idle_sort_by_group_then_start_is_the_lexsort(groups: int, sorted_ts: bool) -> None:
    """The idle breakdown's row order: a stable sort by stream when rows come by start."""
    from hta.analysis.idle import _by_group_then_start

    rng = np.random.default_rng(groups)
    ts = rng.integers(0, 1000, 5000)  # ties included
    ts = np.sort(ts) if sorted_ts else ts
    group = rng.integers(0, groups, 5000)
    assert np.array_equal(_by_group_then_start(group, ts), np.lexsort((ts, group)))


def test_stream_time_step_order_is_the_lexsort() -> None:
    """The queue series' order (one sort of a packed key) sorts the rows as the lexsort
    by stream, time and increments first does."""
    from hta.analysis.queue import _by_stream_time_step

    rng = np.random.default_rng(11)
    key = rng.integers(0, 5, 20000)
    ts = 1_700_000_000_000_000_000 + rng.integers(0, 500, 20000)  # many ties
    step = np.where(rng.random(20000) < 0.5, 1, -1)
    a, b = np.lexsort((-step, ts, key)), _by_stream_time_step(key, ts, step)
    assert np.array_equal(a, b)
    assert _by_stream_time_step(key[:0], ts[:0], step[:0]).size == 0
