"""Interval arithmetic on integer-nanosecond ``[start, end)`` intervals."""

from __future__ import annotations

import numpy as np


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length covered by the union of intervals (ns)."""
    merged_starts, merged_ends = merge(starts, ends)
    return int((merged_ends - merged_starts).sum())


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as disjoint, sorted ``[start, end)`` intervals.

    Touching intervals (one ends where the next starts) are merged. Zero-length intervals
    add nothing.
    """
    keep = ends > starts
    s = np.asarray(starts, dtype=np.int64)[keep]
    e = np.asarray(ends, dtype=np.int64)[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    running_end = np.maximum.accumulate(e)
    # a new merged interval starts where the start is beyond everything before it
    new = np.r_[True, s[1:] > running_end[:-1]]
    firsts = np.flatnonzero(new)
    lasts = np.r_[firsts[1:] - 1, s.size - 1]
    return s[firsts], running_end[lasts]
