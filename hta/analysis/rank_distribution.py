"""How per-rank values spread across the ranks of a job: quartiles and whiskers per metric.

A figure with a bar per rank stops being readable (and grows with the job) past a few
dozen ranks. A distribution reads the same at 8 ranks and at 8,000, and its statistics
weigh the same: :func:`rank_distribution` turns a per-rank table (one row per rank, a
``rank`` column) into one row per metric:

* ``n``: the ranks with a value (NaN left out);
* ``min``, ``q1``, ``median``, ``q3``, ``max``: the quartiles by linear interpolation
  between the sorted values (NumPy's default: with values 0, 1, ..., 99, ``q1`` = 24.75);
* ``lower``, ``upper``: the whiskers (Tukey's): the most extreme values within 1.5 x the
  interquartile range of the quartiles;
* ``outliers``: the ranks beyond the whiskers;
* ``min_rank``, ``max_rank``: the ranks with the smallest and the largest value (the
  lowest rank on ties).

A metric without any value gets ``n`` 0 and NaN statistics (ranks -1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: Columns of :func:`rank_distribution`.
COLUMNS = ["metric", "n", "min", "q1", "median", "q3", "max", "lower", "upper", "outliers",
           "min_rank", "max_rank"]
#: Whiskers reach this many interquartile ranges beyond the quartiles (Tukey's fences).
WHISKER_IQR = 1.5


def rank_distribution(table: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per metric of ``table`` (one row per rank): :data:`COLUMNS` (the module
    docstring)."""
    rank_of = table["rank"].to_numpy(np.int64)
    return pd.DataFrame([_row(m, rank_of, table[m].to_numpy(np.float64)) for m in metrics],
                        columns=COLUMNS)


def _row(metric: str, rank_of: np.ndarray, values: np.ndarray) -> dict[str, object]:
    ok = ~np.isnan(values)
    if not ok.any():
        return {"metric": metric, "n": 0, **dict.fromkeys(COLUMNS[2:9], np.nan),
                "outliers": 0, "min_rank": -1, "max_rank": -1}
    v, r = values[ok], rank_of[ok]
    q1, median, q3 = (float(x) for x in np.quantile(v, [0.25, 0.5, 0.75]))
    reach = WHISKER_IQR * (q3 - q1)
    inside = (v >= q1 - reach) & (v <= q3 + reach)
    lo, hi = float(v.min()), float(v.max())
    return {"metric": metric, "n": int(v.size), "min": lo, "q1": q1, "median": median,
            "q3": q3, "max": hi, "lower": float(v[inside].min()),
            "upper": float(v[inside].max()), "outliers": int((~inside).sum()),
            "min_rank": int(r[v == lo].min()), "max_rank": int(r[v == hi].min())}


__all__ = ["COLUMNS", "WHISKER_IQR", "rank_distribution"]
