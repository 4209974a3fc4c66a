"""The rows of the job diff summary: step time, temporal breakdown, kernel types, overlap, idle."""


from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.diff.sides import _rank_mean_steps, _Side
from hta.analysis.idle import CATEGORIES as IDLE_CATEGORIES
from hta.analysis.idle import idle_time_breakdown
from hta.analysis.kernels import kernel_type_breakdown
from hta.analysis.overlap import comm_comp_overlap
from hta.analysis.temporal import temporal_breakdown_detail


def _step_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    mc, mt = _rank_mean_steps(c), _rank_mean_steps(t)

    def agg(values: np.ndarray, fn: Any) -> float:
        return float(fn(values)) if values.size else math.nan

    return [
        ("steps", "ranks", float(len(c.ranks)), float(len(t.ranks))),
        ("steps", "steps_per_rank", float(np.mean(list(c.n_steps.values()))) if c.has_steps
         else math.nan, float(np.mean(list(t.n_steps.values()))) if t.has_steps else math.nan),
        ("steps", "step_time_mean(us)", agg(mc, np.mean), agg(mt, np.mean)),
        ("steps", "step_time_median(us)", agg(mc, np.median), agg(mt, np.median)),
        ("steps", "step_time_max(us)", agg(mc, np.max), agg(mt, np.max)),
    ]


_TEMPORAL_TIMES = ("kernel_time", "busy_time", "compute_time", "exposed_comm_time",
                   "exposed_memory_time", "idle_time", "comm_time", "memory_time")
_TEMPORAL_PCTG = ("compute_time", "exposed_comm_time", "exposed_memory_time", "idle_time")


def _temporal_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    values = []
    for side in (c, t):
        df = temporal_breakdown_detail(side.trace, side.selection).copy()
        df["busy_time(us)"] = df["kernel_time(us)"] - df["idle_time(us)"]
        values.append({k: side.per_step(df, f"{k}(us)") for k in _TEMPORAL_TIMES})
    rows = [("gpu_time", f"{k}(us)", values[0][k], values[1][k]) for k in _TEMPORAL_TIMES]
    rows += [("gpu_time", f"{k}_pctg", _pct(values[0][k], values[0]["kernel_time"]),
              _pct(values[1][k], values[1]["kernel_time"])) for k in _TEMPORAL_PCTG]
    return rows


def _kernel_type_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    per_type: list[dict[str, float]] = []
    for side in (c, t):
        df = kernel_type_breakdown(side.trace, side.selection,
                                   include_memory_kernels=True, by_rank=True)
        per_type.append({k: side.per_step(df[df["kernel_type"] == k], "sum")
                         for k in df["kernel_type"].unique().tolist()} if len(df) else {})
    kinds = sorted(set(per_type[0]) | set(per_type[1]),
                   key=lambda k: -(per_type[0].get(k, 0.0) + per_type[1].get(k, 0.0)))
    totals = [sum(p.values()) for p in per_type]
    rows = [("kernel_types", f"{k}(us)", per_type[0].get(k, 0.0), per_type[1].get(k, 0.0))
            for k in kinds]
    rows += [("kernel_types", f"{k}_pctg", _pct(per_type[0].get(k, 0.0), totals[0]),
              _pct(per_type[1].get(k, 0.0), totals[1])) for k in kinds]
    return rows


def _overlap_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    vals = []
    for side in (c, t):
        df = comm_comp_overlap(side.trace, side.selection)
        vals.append((side.per_step(df, "comm_time(us)"), side.per_step(df, "overlap_time(us)")))
    return [
        ("overlap", "comm_time(us)", vals[0][0], vals[1][0]),
        ("overlap", "overlap_time(us)", vals[0][1], vals[1][1]),
        ("overlap", "comp_comm_overlap_pctg", _pct(vals[0][1], vals[0][0]),
         _pct(vals[1][1], vals[1][0])),
    ]


#: The section of the stream idle rows: gaps summed over streams, unlike ``gpu_time``'s
#: ``idle_time(us)`` (no stream busy), so the two cannot be read as one number.
IDLE_SECTION = "stream_idle_summed_over_streams"


def _idle_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    vals = []
    for side in (c, t):
        df = idle_time_breakdown(side.trace, side.selection)
        vals.append({k: side.per_step(df[df["idle_category"] == k], "idle_time")
                     for k in IDLE_CATEGORIES})
    rows = [(IDLE_SECTION, f"{k}(us)", vals[0][k], vals[1][k]) for k in IDLE_CATEGORIES]
    totals = [sum(v.values()) for v in vals]
    rows.append((IDLE_SECTION, "total(us)", totals[0], totals[1]))
    rows += [(IDLE_SECTION, f"{k}_pctg", _pct(vals[0][k], totals[0]), _pct(vals[1][k], totals[1]))
             for k in IDLE_CATEGORIES]
    return rows


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole and math.isfinite(whole) else math.nan


def _summary_frame(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["section", "metric", "control", "test"])
    frame["delta"] = frame["test"] - frame["control"]
    control = frame["control"].to_numpy(dtype=float)
    relative = ~frame["metric"].str.endswith("_pctg").to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = 100.0 * frame["delta"].to_numpy(dtype=float) / control
    frame["delta_pctg"] = np.where(relative & (control != 0) & np.isfinite(control), pct,
                                   np.nan)
    return frame
