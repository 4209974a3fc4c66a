"""Per-group medians and counts over numpy arrays, without a pandas groupby.

The findings' rules take the median of small groups on every rank (the later calls of an
operator, the like calls of a collective); a pandas groupby costs a millisecond of fixed
cost each time, paid again on every rank of a large job. These give the same numbers: the
median of a group is its middle value, or the mean of its two middle values for an even
count (as pandas' groupby ``median``), missing values (NaN) left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def group_medians(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys (ascending) and the median of each one's values; NaN values are
    left out, and a key with only NaN values is not among the keys."""
    keys = np.asarray(keys)
    values = np.asarray(values, dtype=np.float64)
    known = ~np.isnan(values)
    if not known.all():
        keys, values = keys[known], values[known]
    if not len(keys):
        return keys[:0], np.zeros(0, dtype=np.float64)
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    counts = np.diff(np.r_[starts, len(k)])
    low, high = starts + (counts - 1) // 2, starts + counts // 2
    return k[starts], (v[low] + v[high]) / 2


def medians_at(keys: np.ndarray, medians: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``medians`` (of the ascending ``keys``, :func:`group_medians`) at each ``query``
    key; NaN where the key is not among them (a groupby result's ``reindex``)."""
    query = np.asarray(query)
    out = np.full(len(query), np.nan, dtype=np.float64)
    if not len(keys) or not len(query):
        return out
    pos = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    hit = keys[pos] == query
    out[hit] = medians[pos[hit]]
    return out


def row_medians(columns: Sequence[np.ndarray], values: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the median of the values of the rows with the same keys in every one of
    ``columns``, and how many rows that group has (a groupby's ``transform("median")``
    and ``transform("size")``). A row with a missing key is in no group: NaN and 0."""
    n = len(values)
    code = np.zeros(n, dtype=np.int64)
    missing = np.zeros(n, dtype=bool)
    for column in columns:
        c, uniq = pd.factorize(np.asarray(column), sort=False)
        missing |= c < 0
        code = pd.factorize(code * (len(uniq) + 1) + c)[0].astype(np.int64)
    code[missing] = -1
    keys, medians = group_medians(code[~missing], np.asarray(values)[~missing])
    median = medians_at(keys, medians, code)
    median[missing] = np.nan
    count = np.bincount(code[~missing], minlength=max(int(code.max(initial=-1)) + 1, 1))
    sizes = np.where(missing, 0, count[np.clip(code, 0, None)])
    return median, sizes.astype(np.int64)


__all__ = ["group_medians", "medians_at", "row_medians"]


def group_codes(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """Per row of ``frame``, the number of its group by ``keys``: 0, 1, ... in the order
    the groups first appear, a missing key value a value of its own. The groups and their
    order of ``frame.groupby(keys, sort=False, dropna=False)``, as one integer key: a
    groupby on it skips factorising each key column again for every aggregate (the key
    columns are the groups' first rows)."""
    code = np.zeros(len(frame), dtype=np.int64)
    for key in keys:
        part, uniques = pd.factorize(frame[key], sort=False, use_na_sentinel=False)
        code = pd.factorize(code * np.int64(len(uniques)) + part, sort=False)[0]
    return code.astype(np.int64, copy=False)
