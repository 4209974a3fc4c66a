"""The interval coverage helper behind every breakdown: exact ns on small cases."""

from __future__ import annotations

import numpy as np
import pytest

from hta.analysis.intervals import coverage, mask_total


def _cov(intervals, n_sets, groups=None, n_groups=1):
    s = np.array([i[0] for i in intervals], dtype=np.int64)
    e = np.array([i[1] for i in intervals], dtype=np.int64)
    k = np.array([i[2] for i in intervals], dtype=np.int64)
    return coverage(s, e, k, n_sets, None if groups is None else np.array(groups), n_groups)


def test_two_sets_docstring_example():
    # set 0: [0,10); set 1: [5,20), [30,40) -> nothing 20..30, 0 alone 0..5,
    # 1 alone 10..20 + 30..40, both 5..10
    t = _cov([(0, 10, 0), (5, 20, 1), (30, 40, 1)], 2)
    assert t.tolist() == [[10, 5, 20, 5]]
    assert mask_total(t, all_of=0b10).tolist() == [25]
    assert mask_total(t, all_of=0b11).tolist() == [5]
    assert mask_total(t, any_of=0b11).tolist() == [30]
    assert mask_total(t, all_of=0b10, none_of=0b01).tolist() == [20]


def test_overlaps_within_a_set_count_once_and_touching_intervals_leave_no_gap():
    t = _cov([(0, 10, 0), (2, 8, 0), (10, 15, 0)], 1)
    assert t.tolist() == [[0, 15]]


def test_zero_length_intervals_cover_nothing_but_extend_the_span():
    t = _cov([(0, 10, 0), (20, 20, 0)], 1)
    assert t.tolist() == [[10, 10]]


def test_groups_are_independent_and_gaps_between_groups_count_nowhere():
    # group 0: [0,10) and [20,30); group 1: [1000,1005) of set 1
    t = _cov([(0, 10, 0), (20, 30, 0), (1000, 1005, 1)], 2, groups=[0, 0, 1], n_groups=2)
    assert t.tolist() == [[10, 20, 0, 0], [0, 0, 5, 0]]


def test_epoch_scale_timestamps_stay_exact():
    base = 1_712_195_495_519_689_047
    t = _cov([(base, base + 1, 0), (base + 3, base + 7, 1)], 2)
    assert t.tolist() == [[2, 1, 4, 0]]


def test_empty_input():
    assert coverage(np.array([]), np.array([]), np.array([]), 3).tolist() == [[0] * 8]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_a_brute_force_count_on_random_intervals(seed):
    rng = np.random.default_rng(seed)
    n = 200
    s = rng.integers(0, 1_000, n)
    e = s + rng.integers(0, 50, n)
    k = rng.integers(0, 3, n)
    t = coverage(s, e, k, 3)[0]
    expected = np.zeros(8, dtype=np.int64)
    for x in range(int(s.min()), int(e.max())):
        mask = 0
        for j in range(3):
            if ((s <= x) & (x < e) & (k == j)).any():
                mask |= 1 << j
        expected[mask] += 1
    assert t.tolist() == expected.tolist()
