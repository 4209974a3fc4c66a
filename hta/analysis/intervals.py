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
    if s.size > 1 and (s[1:] < s[:-1]).any():  # most callers pass them in start order
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    running_end = np.maximum.accumulate(e)
    # a new merged interval starts where the start is beyond everything before it
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.greater(s[1:], running_end[:-1], out=new[1:])
    firsts = np.flatnonzero(new)
    lasts = np.empty_like(firsts)
    lasts[:-1] = firsts[1:] - 1
    lasts[-1] = s.size - 1
    return s[firsts], running_end[lasts]


def coverage(
    starts: np.ndarray,
    ends: np.ndarray,
    sets: np.ndarray,
    n_sets: int,
    groups: np.ndarray | None = None,
    n_groups: int = 1,
) -> np.ndarray:
    """Time covered by each combination of interval sets, per group (ns).

    Each interval ``[starts[i], ends[i])`` belongs to set ``sets[i]`` (``0 <= set < n_sets``)
    and group ``groups[i]`` (``0 <= group < n_groups``; all 0 when ``groups`` is None).
    Within a group, the time from the first start to the last end is cut at every start
    and end; each piece is credited to the bitmask of the sets that have at least one
    interval running over it (bit ``k`` = set ``k``).

    Returns an int64 array of shape ``(n_groups, 2 ** n_sets)``: entry ``[g, m]`` is the
    time of group ``g`` during which exactly the sets of mask ``m`` run. Column 0 is the
    time inside the group's span when no interval runs (its gaps), so a row sums to
    ``last end - first start`` of the group.

    Example: set 0 = ``[0, 10)``, set 1 = ``[5, 20)``, ``[30, 40)`` gives
    ``[[10, 5, 20, 5]]``: 10 ns with nothing (20..30), 5 ns of set 0 alone (0..5), 20 ns of
    set 1 alone (10..20 and 30..40), 5 ns of both (5..10).

    Zero-length intervals cover nothing but still extend the span. Sums are exact up to
    2**53 ns (104 days) per entry.
    """
    width = 1 << n_sets
    out = np.zeros((n_groups, width), dtype=np.int64)
    s = np.asarray(starts, dtype=np.int64)
    if s.size == 0:
        return out
    e = np.maximum(np.asarray(ends, dtype=np.int64), s)
    g = np.zeros(s.size, dtype=np.int64) if groups is None else np.asarray(groups, np.int64)
    times = np.concatenate([s, e])
    group = np.concatenate([g, g])
    which = np.concatenate([sets, sets]).astype(np.int64)
    delta = np.concatenate([np.ones(s.size, np.int64), -np.ones(s.size, np.int64)])
    order = np.lexsort((times, group))
    times, group, which, delta = times[order], group[order], which[order], delta[order]
    mask = np.zeros(times.size, dtype=np.int64)
    for k in range(n_sets):
        running = np.cumsum(np.where(which == k, delta, 0))
        mask |= (running > 0).astype(np.int64) << k
    piece = times[1:] - times[:-1]
    piece[group[1:] != group[:-1]] = 0
    key = group[:-1] * width + mask[:-1]
    sums = np.bincount(key, weights=piece, minlength=n_groups * width)
    out[:] = np.rint(sums).astype(np.int64).reshape(n_groups, width)
    return out


def mask_total(table: np.ndarray, *, all_of: int = 0, none_of: int = 0,
               any_of: int = 0) -> np.ndarray:
    """Sum the columns of a :func:`coverage` table selected by their bitmask, per group (ns).

    A column (mask ``m``) is summed when ``m`` has every bit of ``all_of``, no bit of
    ``none_of`` and, when ``any_of`` is not 0, at least one bit of ``any_of``. With sets
    0 = compute and 1 = communication: ``all_of=0b11`` is the time both run,
    ``all_of=0b10, none_of=0b01`` the communication not hidden under compute,
    ``any_of=0b11`` the time anything runs.
    """
    masks = np.arange(table.shape[1])
    cols = ((masks & all_of) == all_of) & ((masks & none_of) == 0)
    if any_of:
        cols &= (masks & any_of) != 0
    return table[:, cols].sum(axis=1)


class Cover:
    """A union of ``[start, end)`` intervals that measures its overlap with many others."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self.s, self.e = merge(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
        self.cum = np.zeros(self.s.size + 1, dtype=np.int64)
        np.cumsum(self.e - self.s, out=self.cum[1:])

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Covered length before each time ``t`` (ns)."""
        t = np.asarray(t, np.int64)
        if self.s.size == 0:
            return np.zeros(t.shape, np.int64)
        k = np.searchsorted(self.s, t, side="right") - 1
        kk = np.clip(k, 0, None)
        return np.where(k >= 0, self.cum[kk] + np.minimum(t, self.e[kk]) - self.s[kk], 0)

    def within(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Covered length inside each ``[start, end)`` (0 for empty ones)."""
        return np.maximum(self.upto(ends) - self.upto(starts), 0)
