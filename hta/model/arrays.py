"""Array helpers the whole toolkit shares.

:func:`distinct` stands in for a bare ``np.unique(values)``. From numpy 2.3 on, a bare
``np.unique`` (no ``return_index``, ``return_inverse`` or ``return_counts``) finds the
values through a hash set, and on this project's arrays that set is slow: about a
microsecond per value once the values number tens of thousands, and more per value as they
grow (measured with numpy 2.4 on int64 event rows and node ids: 1M distinct values take
1.3 s, against 26-170 ms by sorting). Node ids and event rows are mostly distinct, so the
sort is what fits them. ``np.union1d``, ``np.intersect1d`` and ``np.setdiff1d`` (unless
told ``assume_unique``) take the same path: :func:`union` stands in for the first.
``tests/test_arrays.py`` keeps these calls out of ``hta``.

Three sorts the hot paths share: :func:`stable_argsort` (``np.argsort(kind="stable")``'s
order of a large integer array, by NumPy's vectorised sort of plain values),
:func:`lexsort` (``np.lexsort``'s order, faster when the primary key is mostly distinct,
as times are) and :func:`last_row_of` (the rows of a table holding given key tuples, what
a ``dict`` of tuples answers, by one sort).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def distinct(values: ArrayLike) -> np.ndarray:
    """The distinct values of ``values`` (flattened), ascending: what ``np.unique(values)``
    gives, found by a sort. Integers and booleans sort in place of a copy; other dtypes
    go through numpy's sort-based path (``return_index``), NaNs collapsed to one as
    ``np.unique`` does."""
    a = np.asarray(values).ravel()
    if a.dtype.kind not in "biu":
        return np.unique(a, return_index=True)[0]
    if a.size < 2:
        return a.copy()
    s = np.sort(a)
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def union(*arrays: ArrayLike) -> np.ndarray:
    """The distinct values of all of ``arrays`` (flattened), ascending: what
    ``np.union1d`` gives for two (the same dtype promotion), by :func:`distinct`."""
    return distinct(np.concatenate([np.ravel(a) for a in arrays]))


def last_row_of(keys: tuple[np.ndarray, ...], queries: tuple[np.ndarray, ...]
                ) -> np.ndarray:
    """Per query (the i-th values of the ``queries`` columns), the last row of ``keys``
    (columns of equal length, compared column by column) holding the same values; -1
    where none does. What a ``dict`` from ``zip(*keys)`` to the row numbers answers,
    by one sort of keys and queries together instead of a Python tuple per row."""
    n = len(keys[0]) if keys else 0
    m = len(queries[0]) if queries else 0
    out = np.full(m, -1, dtype=np.int64)
    if not n or not m:
        return out
    cols = [np.concatenate([np.asarray(k), np.asarray(q)]) for k, q in zip(keys, queries,
                                                                           strict=True)]
    is_query = np.r_[np.zeros(n, dtype=bool), np.ones(m, dtype=bool)]
    # equal values: the key rows first, in row order, then the queries
    order = np.lexsort((is_query, *reversed(cols)))
    at_key = np.where(is_query[order], -1, np.arange(order.size))
    last = np.maximum.accumulate(at_key)  # per position, the last key row's at or before
    q = np.flatnonzero(is_query[order])
    ok = last[q] >= 0
    found = np.where(ok, order[np.maximum(last[q], 0)], -1)
    same = np.ones(q.size, dtype=bool)
    for c in cols:
        same[ok] &= c[found[ok]] == c[order[q[ok]]]
    hit = ok & same
    out[order[q[hit]] - n] = found[hit]
    return out


#: Least size at which :func:`stable_argsort` packs or checks (below it NumPy's stable
#: sort is as fast).
PACKED_SORT_MIN = 1 << 16
#: Positions written into the packed keys this many at a time.
_CHUNK = 1 << 20


def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``: the same order (equal keys in position order),
    faster on a large array of integers. NumPy's stable sort of int64 is a timsort of the
    indices (a job graph's 6M timestamps: 0.35 s); its default sort of plain int64 values
    is vectorised (x86-simd-sort: 0.05 s). So each key, less the smallest, is shifted
    left past the bits of the largest position and that position written in the low
    bits: the packed values are distinct, sorting them sorts by key then position, and
    their low bits are the order. Where the keys' range leaves no room for the positions'
    bits, the unstable sort of the indices is taken when it finds the keys distinct (the
    order is then the only one), else NumPy's stable sort."""
    return _stable_order(np.asarray(keys), False)[0]


def sorted_with_order(keys: np.ndarray, consume: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`stable_argsort` of ``keys``, ``keys`` in that order): where the packed sort
    is taken, the sorted keys are read off the packed values (a pass in order), not
    gathered by the order (a random read of every key). ``consume``: ``keys`` (int64)
    is the caller's to lose, and may become the order (no copy of the job's size)."""
    keys = np.asarray(keys)
    order, values = _stable_order(keys, True, consume)
    return order, keys[order] if values is None else values


def _stable_order(keys: np.ndarray, values: bool, consume: bool = False
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`stable_argsort`'s order, and with ``values`` the sorted keys when the packed
    sort gives them (else None); ``consume``: see :func:`sorted_with_order`."""
    n = keys.size
    if n < PACKED_SORT_MIN or keys.dtype.kind != "i":
        return np.argsort(keys, kind="stable"), None
    lo, hi = int(keys.min()), int(keys.max())
    bits = (n - 1).bit_length()
    if hi - lo < 1 << (63 - bits):
        in_place = consume and keys.dtype == np.int64 and keys.flags.c_contiguous and \
            keys.flags.writeable
        # changed in place from here: the keys themselves when the caller gave them up
        packed = keys if in_place else keys.astype(np.int64)
        packed -= lo
        packed <<= bits
        for at in range(0, n, _CHUNK):  # the positions a chunk at a time: no second array
            packed[at:at + _CHUNK] |= np.arange(at, min(at + _CHUNK, n), dtype=np.int64)
        packed.sort()
        ranked = None
        if values:  # the high bits: each key less the smallest
            ranked = packed >> bits
            ranked += lo
            ranked = ranked.astype(keys.dtype, copy=False)
        packed &= (1 << bits) - 1
        return packed, ranked
    order = np.argsort(keys)
    ranked = keys[order]
    if (ranked[1:] != ranked[:-1]).all():
        return order, ranked if values else None
    return np.argsort(keys, kind="stable"), None


def lexsort(keys: tuple[np.ndarray, ...] | list[np.ndarray]) -> np.ndarray:
    """``np.lexsort(keys)`` (the last key primary, stable), faster when the primary key
    is mostly distinct (timestamps): one stable sort by it, then the full comparison only
    among the rows that tie on it (np.lexsort sorts once per key, over every row)."""
    primary = np.asarray(keys[-1])
    if len(keys) < 2 or primary.size < 2:
        return np.lexsort(keys)
    order = stable_argsort(primary)
    sorted_primary = primary[order]
    equal = sorted_primary[1:] == sorted_primary[:-1]
    tied = np.r_[equal, False] | np.r_[False, equal]
    if tied.any():
        # tied rows lie in runs of one primary value: sorting them together by every key
        # keeps each run in its place, and keeps the first sort's order of full ties
        at = np.flatnonzero(tied)
        sub = order[at]
        order[at] = sub[np.lexsort([np.asarray(k)[sub] for k in keys])]
    return order
