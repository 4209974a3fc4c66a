"""Thinning a long time series for a figure, so that a report's figures weigh the same at
any trace size; the tables keep every point.

A line of more rows than its budget is cut into equal time bins, and
  each bin keeps its first and last rows and the rows of its lowest and highest values.
  Peaks and troughs survive (a queue that fills for one microsecond still reaches its
  maximum in the figure), which every k-th row would miss. The rule of the report's step
  functions: queue length, memory bandwidth, memory allocated and reserved.

It applies where the rows are computed (per rank, next to the data) or to a gathered series
alike.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.model.arrays import distinct


def envelope_rows(ts: np.ndarray, values: list[np.ndarray], bins: int) -> np.ndarray:
    """Positions to keep of one time-sorted line: the first and last row of each of
    ``bins`` equal time bins, and in each bin the rows of each value column's minimum and
    maximum (every row when the line has no more than ``bins`` rows)."""
    n = ts.shape[0]
    if n <= max(int(bins), 1):
        return np.arange(n)
    lo, hi = int(ts[0]), int(ts[-1])
    width = max(1, -(-(hi - lo + 1) // max(int(bins), 1)))
    b = (ts.astype(np.int64) - lo) // width
    start = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    end = np.r_[start[1:], n] - 1
    keep = [start, end]
    for v in values:
        grouped = pd.Series(np.asarray(v)).groupby(b, sort=False)
        keep += [grouped.idxmin().to_numpy(), grouped.idxmax().to_numpy()]
    return distinct(np.concatenate(keep).astype(np.int64))


def envelope(series: pd.DataFrame, keys: list[str], time: str, values: list[str],
             limit: int) -> tuple[pd.DataFrame, bool]:
    """At most about ``limit`` rows per line (rows sharing ``keys``, sorted by ``time``
    within a line): a longer line keeps :func:`envelope_rows` of ``limit / (2 + 2 *
    len(values))`` time bins. Returns the rows kept and whether any line was thinned."""
    if series.empty:
        return series, False
    per_bin = 2 + 2 * len(values)
    bins = max(1, int(limit) // per_bin)
    keep = np.ones(len(series), dtype=bool)
    thinned = False
    positions = series.groupby(keys, sort=False).indices
    for rows in positions.values():
        if rows.size <= limit:
            continue
        order = rows[np.argsort(series[time].to_numpy()[rows], kind="stable")]
        kept = envelope_rows(series[time].to_numpy()[order],
                             [series[v].to_numpy()[order] for v in values], bins)
        keep[rows] = False
        keep[order[kept]] = True
        thinned = True
    if not thinned:
        return series, False
    return series[keep], True


__all__ = ["envelope", "envelope_rows"]
