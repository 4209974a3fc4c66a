"""Duration statistics per name, with the long tail folded into ``"others"``.

Shared by the kernel and the user-annotation breakdowns.

Folding (the *top* names), decided per ``group`` (e.g. kernel type) over all the selected
ranks together, so that every rank reports the same names and can be compared:

* names are ranked by their total duration over the selected ranks, longest first (ties:
  alphabetical);
* when a group has at most ``num_kernels`` names, every name is kept;
* otherwise a name is kept when its position is below ``num_kernels`` **and** the total of
  the names ranked before it is below ``duration_ratio`` x the group's total (the smallest
  prefix that reaches ``duration_ratio`` of the time is kept); names matching ``keep`` are
  always kept. The others are folded into one row named ``"others"``.

Example: totals 50, 30, 15, 5 (num_kernels=2, duration_ratio=0.8): 50 kept (0 before),
30 kept (50 before < 80), 15 and 5 folded (position >= 2) into ``others`` = 20.
With num_kernels=3: 15 is folded too (80 before, not < 80).

Statistics are over the individual durations of each (rank, group, name) row, ``others``
included: ``sum``, ``count``, ``mean``, ``min``, ``max`` and ``std`` (sample standard
deviation, ddof 1; 0 for a single event, as HTA shows it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

OTHERS = "others"
STATS = ["sum", "count", "mean", "min", "max", "std"]


def folded_stats(
    frame: pd.DataFrame, symbols: Sequence[str], num_kernels: int, duration_ratio: float,
    keep: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Statistics of ``dur`` (ns) per (``rank``, ``group``, name), the tail folded.

    ``frame`` has int columns ``rank``, ``group``, ``name`` (symbol id) and ``dur`` (ns).
    Returns columns ``rank``, ``group``, ``name`` (text, or ``"others"``) and :data:`STATS`
    (ns), one row per rank and kept name (and ``others`` where anything was folded).
    The same as :func:`kept_names` of :func:`name_totals`, then :func:`label_stats`: the
    two halves a distributed job runs per rank, with the choice made over all ranks.
    """
    check_folding(num_kernels, duration_ratio)
    kept = kept_names([name_totals(frame, symbols)], num_kernels, duration_ratio, keep)
    return label_stats(frame, symbols, kept)


def name_totals(frame: pd.DataFrame, symbols: Sequence[str]) -> pd.DataFrame:
    """Total ``dur`` per ``group`` and name of ``frame`` (as in :func:`folded_stats`):
    columns ``group``, ``text`` (the name) and ``dur``; no symbol ids, so the totals of
    ranks with different symbol tables add up."""
    if frame.empty:
        return pd.DataFrame({"group": pd.Series(dtype=np.int64),
                             "text": pd.Series(dtype=object),
                             "dur": pd.Series(dtype=np.int64)})
    totals = frame.groupby(["group", "name"], sort=False)["dur"].sum().reset_index()
    sym = np.asarray(symbols, dtype=object)
    return pd.DataFrame({"group": totals["group"].to_numpy(),
                         "text": sym[totals["name"].to_numpy()],
                         "dur": totals["dur"].to_numpy()})


def kept_names(totals: Sequence[pd.DataFrame], num_kernels: int, duration_ratio: float,
               keep: Sequence[str] | None = None) -> pd.DataFrame:
    """The (``group``, ``text``) pairs kept by the folding rule (module docstring), from
    the :func:`name_totals` of each rank (or of all ranks at once)."""
    check_folding(num_kernels, duration_ratio)
    filled = [t for t in totals if len(t)]
    if not filled:
        return pd.DataFrame({"group": [], "text": []})
    both = pd.concat(filled, ignore_index=True) if len(filled) > 1 else filled[0]
    both = both.groupby(["group", "text"], sort=False)["dur"].sum().reset_index()
    both = both.sort_values(["group", "dur", "text"], ascending=[True, False, True],
                            kind="stable", ignore_index=True)
    kept = _kept(both, num_kernels, duration_ratio, _matching(both["text"], keep))
    return both.loc[kept, ["group", "text"]].reset_index(drop=True)


def label_stats(frame: pd.DataFrame, symbols: Sequence[str], kept: pd.DataFrame
                ) -> pd.DataFrame:
    """:data:`STATS` of ``dur`` per (``rank``, ``group``, name) of ``frame``, the names not
    in ``kept`` (from :func:`kept_names`) folded into one ``"others"`` row per rank and
    group; columns ``rank``, ``group``, ``name`` (text) and :data:`STATS` (ns)."""
    if frame.empty:
        return pd.DataFrame({"rank": [], "group": [], "name": []} | {s: [] for s in STATS})
    sym = np.asarray(symbols, dtype=object)
    pairs = frame[["group", "name"]].drop_duplicates()
    wanted = set(zip(kept["group"].astype(np.int64).tolist(), kept["text"].tolist()))
    is_kept = np.array([(g, t) in wanted for g, t in zip(
        pairs["group"].astype(np.int64).tolist(), sym[pairs["name"].to_numpy()].tolist())],
        dtype=bool)
    label_of = pd.Series(np.where(is_kept, pairs["name"].to_numpy(), -1),
                         index=pd.MultiIndex.from_frame(pairs))
    labels = label_of.reindex(pd.MultiIndex.from_arrays([frame["group"], frame["name"]]))
    work = frame.assign(label=labels.to_numpy())
    stats = (work.groupby(["rank", "group", "label"], sort=True)["dur"]
             .agg(["sum", "count", "mean", "min", "max", "std"]).reset_index())
    stats["std"] = stats["std"].fillna(0.0)
    label = stats.pop("label").to_numpy()
    stats.insert(2, "name", np.where(label >= 0, sym[np.clip(label, 0, None)], OTHERS))
    return stats


def _kept(totals: pd.DataFrame, num_kernels: int, duration_ratio: float,
          always: np.ndarray) -> np.ndarray:
    by_group = totals.groupby("group", sort=False)["dur"]
    position = by_group.cumcount().to_numpy()
    before = (by_group.cumsum() - totals["dur"]).to_numpy()
    group_total = by_group.transform("sum").to_numpy()
    many = by_group.transform("size").to_numpy() > num_kernels
    top = (position < num_kernels) & (before < duration_ratio * group_total)
    return ~many | top | always


def _matching(texts: pd.Series, patterns: Sequence[str] | None) -> np.ndarray:
    if not patterns:
        return np.zeros(len(texts), dtype=bool)
    combined = re.compile("|".join(f"(?:{p})" for p in patterns))
    return np.array([combined.search(t) is not None for t in texts], dtype=bool)


def check_folding(num_kernels: int, duration_ratio: float) -> None:
    """``ValueError`` for a folding rule that means nothing (checked before any work)."""
    if not isinstance(num_kernels, (int, np.integer)) or num_kernels < 1:
        raise ValueError(f"num_kernels must be a positive integer, got {num_kernels!r}.")
    if not 0.0 <= float(duration_ratio) <= 1.0:
        raise ValueError(
            f"duration_ratio must be between 0 and 1 (a share of the time), "
            f"got {duration_ratio!r}; e.g. 0.8 keeps the kernels making 80% of it."
        )
