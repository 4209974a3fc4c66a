"""Thinning a long time series for a figure: every k-th row of a line, its last row kept.

Figures of step functions (queue length, bandwidth) cannot draw millions of points per
line; the tables keep every point. :func:`every_kth` is the one rule, applied where the
rows are computed (per rank, next to the data) or to a gathered series alike.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def every_kth(series: pd.DataFrame, keys: list[str], limit: int) -> tuple[pd.DataFrame, bool]:
    """At most about ``limit`` rows per line (rows sharing ``keys``, in order): a line of
    ``n > limit`` rows keeps rows ``0, k, 2k, ...`` with ``k = ceil(n / limit)``, and its
    last row. Returns the rows kept and whether any line was thinned."""
    if series.empty:
        return series, False
    groups = series.groupby(keys, sort=False)
    sizes = groups[keys[0]].transform("size")
    step = np.maximum(1, np.ceil(sizes / max(int(limit), 1))).astype(np.int64)
    pos = groups.cumcount()
    keep = ((pos % step == 0) | (pos == sizes - 1)).to_numpy()
    if keep.all():
        return series, False
    return series[keep], True


__all__ = ["every_kth"]
