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
