"""Queue length statistics from a queue length time series already computed.

:func:`queue_length_summary_from_time_series` accepts the DataFrame of
:func:`hta.analysis.queue.queue_length_time_series` (our
``get_queue_length_time_series()``), or HTA's form, a dict ``{rank: DataFrame}`` whose
frames have ``ts``, ``pid``, ``stream`` and ``queue_length`` (a ``rank`` column, if any, is
replaced by the key), and returns the time-weighted statistics of
:func:`hta.analysis.queue.queue_length_summary` for the ranks and streams in it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from hta.analysis.queue import SERIES_COLUMNS, SUMMARY_COLUMNS, queue_length_summary
from hta.model.trace import RankMapper

NEEDED = ("ts", "pid", "stream", "queue_length")


def as_series_frame(series: pd.DataFrame | Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """One frame with :data:`~hta.analysis.queue.SERIES_COLUMNS`, sorted by rank, pid,
    stream and ts (stable), from our DataFrame or HTA's ``{rank: DataFrame}``."""
    if isinstance(series, Mapping):
        frames = []
        for rank, frame in series.items():
            if frame is None or not len(frame):
                continue
            frame = frame.drop(columns=["rank"], errors="ignore")
            frames.append(frame.assign(rank=int(rank)))
        if not frames:
            return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in SERIES_COLUMNS})
        series = pd.concat(frames, ignore_index=True)
    if not isinstance(series, pd.DataFrame):
        raise TypeError("pass the DataFrame of get_queue_length_time_series(), or a dict "
                        f"{{rank: DataFrame}}; got {type(series).__name__}")
    missing = [c for c in ("rank", *NEEDED) if c not in series]
    if missing:
        raise ValueError(f"the queue length series lacks column(s) {', '.join(missing)}; "
                         "pass the output of get_queue_length_time_series()")
    out = series.copy()
    if "tid" not in out:
        out["tid"] = out["stream"]
    for col in ("rank", "pid", "tid", "stream", "ts", "queue_length"):
        out[col] = out[col].astype(np.int64)
    out = out.sort_values(["rank", "pid", "stream", "ts"], kind="stable", ignore_index=True)
    return out[SERIES_COLUMNS]


def queue_length_summary_from_time_series(
    trace: RankMapper, series: pd.DataFrame | Mapping[int, pd.DataFrame]
) -> pd.DataFrame:
    """Time-weighted queue length statistics (columns
    :data:`~hta.analysis.queue.SUMMARY_COLUMNS`) of the streams in ``series``; ``trace``
    gives each stream's paired/unpaired event counts, counted per rank where the rank is
    (only the counts travel)."""
    frame = as_series_frame(series)
    if not len(frame):
        return pd.DataFrame({c: [] for c in SUMMARY_COLUMNS})
    return queue_length_summary(trace, series=frame)
