"""Operator performance summaries: per operator and shapes, and GPU time per category.

``op_performance_summary`` groups the rows of
:func:`~hta.analysis.perf.op_performance.op_performance` by rank, operator, shapes and
types (and ``captured``: graph-replayed calls found in the capture traces are their own
groups): ``calls``, ``kernel_time(us)`` (sum), ``tflops_per_s`` and ``tb_per_s`` (total
FLOPs or bytes over total time), and ``pct_of_peak`` weighted by time (which equals the
group's total rate over its roof, every call of a group doing the same work).

``category_time`` splits a rank's GPU work time (sum of the durations of kernels, copies
and memsets) by category: the category of the operator that launched the work where the
operator's name is in the tables, else the kernel's own category (graph replays, compiled
regions, work launched outside any operator); a graph-replayed kernel whose operator was
found in the capture traces (:mod:`hta.analysis.perf.replayed`) takes that operator's
category where its name has one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.grouped import group_codes
from hta.analysis.perf.calls import op_calls
from hta.analysis.perf.op_performance import DeviceArg, op_performance, rank_op_performance
from hta.analysis.perf.replayed import TABLE, calls_of
from hta.model.categories import CATEGORIES, op_category
from hta.model.declared import WHOLE, Analysis, Columns, check_whole_ranks
from hta.model.rules import RuleSet
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace, Trace

SUMMARY_COLUMNS = [
    "rank", "op", "category", "input_dims", "input_types", "calls", "kernel_time(us)",
    "flops", "bytes", "tflops_per_s", "tb_per_s", "flops_per_byte", "bound", "pct_of_peak",
    "device", "captured",
]
CATEGORY_COLUMNS = ["rank", "category", "kernel_time(us)", "share(%)"]
BY_CATEGORY_COLUMNS = ["rank", "category", "calls", "kernel_time(us)", "modelled(%)",
                       "tflops_per_s", "tb_per_s", "pct_of_peak"]
SUMMARY = Columns.typed(SUMMARY_COLUMNS, "float64")
CATEGORIES_TIME = Columns.typed(CATEGORY_COLUMNS, "float64")


def op_performance_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per rank, operator and shapes (:data:`SUMMARY_COLUMNS`), most time first."""
    if not len(rows):
        return SUMMARY.empty()
    keys = ["rank", "op", "category", "input_dims", "input_types", "device"]
    captured = "captured" in rows and bool(rows["captured"].any())
    if captured:  # a capture merge: replayed calls are groups of their own
        keys.append("captured")
    frame = rows.assign(
        _w=rows["pct_of_peak"] * rows["kernel_time(us)"],
        _wt=np.where(rows["pct_of_peak"].notna(), rows["kernel_time(us)"], 0.0))
    # grouped by one integer code: the groups of a groupby on the keys, in that order
    code = group_codes(rows, keys)
    g = frame.groupby(code, sort=False)
    sums = g[["kernel_time(us)", "flops", "bytes", "_w", "_wt"]].sum()
    first = np.unique(code, return_index=True)[1][sums.index.to_numpy()]
    # the key columns as a groupby's index gives them back (an index infers their dtype)
    out = pd.DataFrame({k: pd.Index(rows[k].to_numpy()[first]) for k in keys})
    out["calls"] = g.size().to_numpy()
    out["time"] = sums["kernel_time(us)"].to_numpy()
    for col in ("flops", "bytes"):
        out[col] = sums[col].to_numpy()
    out["bound"] = g["bound"].first().reset_index(drop=True)  # its own dtype
    out["w"], out["wt"] = sums["_w"].to_numpy(), sums["_wt"].to_numpy()
    out["modelled"] = g["flops"].count().to_numpy()
    secs = out["time"] / 1e6
    none = out["modelled"] == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out["tflops_per_s"] = np.where(none, np.nan, out["flops"] / secs / 1e12)
        out["tb_per_s"] = np.where(none, np.nan, out["bytes"] / secs / 1e12)
        out["flops_per_byte"] = np.where(none, np.nan, out["flops"] / out["bytes"])
        out["pct_of_peak"] = np.where(out["wt"] > 0, out["w"] / out["wt"], np.nan)
    out["flops"] = np.where(none, np.nan, out["flops"])
    out["bytes"] = np.where(none, np.nan, out["bytes"])
    out = out.rename(columns={"time": "kernel_time(us)"})
    if not captured:
        out["captured"] = False
    out = out.sort_values(["rank", "kernel_time(us)"], ascending=[True, False],
                          ignore_index=True)
    return out[SUMMARY_COLUMNS]


def rank_op_summary(trace: Trace, selection: Selection = EVERYTHING,
                    device: DeviceArg = None, rules: RuleSet | None = None) -> pd.DataFrame:
    """:func:`op_performance_summary` of the selected ranks, computed from their calls
    where the ranks are (per rank: only the summary travels, never the per-call rows)."""
    check_whole_ranks(selection, "rank_op_summary")
    return op_performance_summary(op_performance(trace, selection, device=device, rules=rules))


def op_summary_of_rank(rt: RankTrace, device: DeviceArg = None,
                       rules: RuleSet | None = None) -> pd.DataFrame:
    """One rank's rows of :func:`rank_op_summary` (the runner's per-rank function: the
    summary travels, never the per-call rows)."""
    return op_performance_summary(rank_op_performance(rt, device, rules))


#: :func:`rank_op_summary`, declared: only each rank's summary travels.
OP_SUMMARY = Analysis("Operator performance", op_summary_of_rank, SUMMARY, steps=WHOLE,
                      add_rank=True)


def op_performance_by_category(rows: pd.DataFrame) -> pd.DataFrame:
    """Per rank and operator category (:data:`BY_CATEGORY_COLUMNS`): ``calls``, summed
    ``kernel_time(us)``, ``modelled(%)`` the part of that time with a model, the modelled
    calls' total FLOPs and bytes over their total time, and ``pct_of_peak`` weighted by
    time over the modelled calls."""
    if not len(rows):
        return pd.DataFrame({c: [] for c in BY_CATEGORY_COLUMNS})
    has = rows["pct_of_peak"].notna()
    t = rows["kernel_time(us)"]
    frame = rows.assign(_mt=np.where(has, t, 0.0), _mf=np.where(has, rows["flops"], 0.0),
                        _mb=np.where(has, rows["bytes"], 0.0),
                        _w=np.where(has, rows["pct_of_peak"] * t, 0.0))
    g = frame.groupby(["rank", "category"], sort=True).agg(
        calls=("op", "size"), time=("kernel_time(us)", "sum"), mt=("_mt", "sum"),
        mf=("_mf", "sum"), mb=("_mb", "sum"), w=("_w", "sum")).reset_index()
    secs = g["mt"] / 1e6
    with np.errstate(divide="ignore", invalid="ignore"):
        out = pd.DataFrame({
            "rank": g["rank"], "category": g["category"], "calls": g["calls"],
            "kernel_time(us)": g["time"], "modelled(%)": 100 * g["mt"] / g["time"],
            "tflops_per_s": np.where(g["mt"] > 0, g["mf"] / secs / 1e12, np.nan),
            "tb_per_s": np.where(g["mt"] > 0, g["mb"] / secs / 1e12, np.nan),
            "pct_of_peak": np.where(g["mt"] > 0, g["w"] / g["mt"], np.nan)})
    return out.sort_values(["rank", "kernel_time(us)"], ascending=[True, False],
                           ignore_index=True)


def category_time(trace: Trace, selection: Selection = EVERYTHING,
                  rules: RuleSet | None = None) -> pd.DataFrame:
    """GPU work time per rank and category (:data:`CATEGORY_COLUMNS`; module docstring),
    in the order of :data:`~hta.model.categories.CATEGORIES`."""
    return CATEGORY_TIME.run(trace, selection, rules)


def category_time_of_rank(rt: RankTrace, rules: RuleSet | None = None) -> pd.DataFrame:
    """One rank's rows of :func:`category_time` (the runner's per-rank function)."""
    _, work = op_calls(rt, rules or RuleSet())
    if not len(work):
        return CATEGORIES_TIME.empty()
    owner = work["owner"].to_numpy()
    owner_name = np.where(owner >= 0, rt.column("name")[np.clip(owner, 0, None)], -1)
    uniq, inverse = np.unique(owner_name, return_inverse=True)
    labels = np.array([op_category(rt.symbols[i]) or "" if i >= 0 else ""
                       for i in uniq.tolist()], dtype=object)
    named = labels[inverse.reshape(-1)]
    cat = np.where(named != "", named, work["kernel_category"].to_numpy())
    if "replayed" in work:  # a capture merge: the captured operator's category
        cat = _replayed_categories(rt, work["replayed"].to_numpy(), cat)
    per = pd.Series(work["dur"].to_numpy(), index=cat).groupby(level=0).sum()
    per = per.reindex([c for c in CATEGORIES if c in per.index])
    total = float(per.sum())
    return pd.DataFrame({
        "rank": np.int64(rt.rank), "category": per.index.to_numpy(dtype=object),
        "kernel_time(us)": per.to_numpy() / 1e3,
        "share(%)": 100 * per.to_numpy() / total if total else np.nan})[CATEGORY_COLUMNS]


#: :func:`category_time`, declared.
CATEGORY_TIME = Analysis("Time by category", category_time_of_rank, CATEGORIES_TIME,
                         steps=WHOLE, add_rank=True)


def _replayed_categories(rt: RankTrace, slots: np.ndarray, cat: np.ndarray) -> np.ndarray:
    """``cat`` with the category of the captured operator (:mod:`hta.analysis.perf.replayed`)
    for the replayed events that have one (``slots``: their calls, -1 none)."""
    named = calls_of(rt.tables[TABLE])["category"].to_numpy(dtype=object)
    hit = slots >= 0
    mine = np.full(len(slots), "", dtype=object)
    mine[hit] = named[slots[hit]]
    return np.where(mine != "", mine, cat)


def below_roof(summary: pd.DataFrame, fraction: float = 0.5, top: int = 5) -> pd.DataFrame:
    """The ``top`` groups of :func:`op_performance_summary` with the most time among
    those whose ``pct_of_peak`` is below ``fraction`` of their roof (all ranks)."""
    low = summary[summary["pct_of_peak"] < 100 * fraction]
    return low.sort_values("kernel_time(us)", ascending=False, kind="stable").head(top)
