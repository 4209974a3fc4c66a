"""Every replayed fix at once: what the job would gain if all the findings' fixes were made.

Each finding's saving (:mod:`hta.analysis.whatif.findings`) is its own fix replayed alone.
Fixes overlap, so their savings do not add: a step whose host waits for the GPU and then
launches its kernels one by one gains from removing the wait, and from a CUDA graph, but
removing the wait leaves less launch time on the critical path, and the graph less wait.
The sum of the savings over-promises. Here the job is replayed once more with every
replayed finding's change together and, per analysed step ``k``,

    ``t_k = job_replayed_k - job_predicted_k(all changes)``

gives the same figures as a finding's saving: ``saving_per_step(us)`` = ``median_k
t_k``, ``est_saving(us)`` = ``N`` times it (at most ``sum_k t_k``),
``saving_step_pctg`` its share of the step (on the same basis as the findings' shares),
and a range (:func:`~hta.analysis.whatif.findings.saving_range`, its low end from the
changes' conservative variants together). Beside it, ``sum_of_savings(us)``: the sum of
the combined findings' own savings, which the combined saving is usually below, and
``versus_sum`` (:func:`versus_sum`): ``less``, ``more`` or ``about`` that sum, and
``gpu_time_findings``: how many findings keep a GPU-time saving, which is not in it.

Combined are the findings whose saving is replayed (``saving_source`` ``replay``) and
positive, one change each (:func:`combinable`). Left out, and said in ``left_out``: a
change whose replay is only an upper bound (``overlap-comm``,
:data:`~hta.analysis.whatif.findings.UPPER_BOUNDS`), since an upper bound added to others
bounds nothing, and a change that saves nothing alone. GPU-time savings (fixes the replay
cannot model) are never in it. With fewer than two changes to combine there is nothing to
add up: the table is empty.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from hta.analysis.whatif.findings import (
    UPPER_BOUNDS,
    Predict,
    conservative,
    recurring,
    recurring_total,
    saving_range,
    step_savings,
)

logger = logging.getLogger(__name__)

#: The columns of the one-row table.
TOGETHER_COLUMNS = ["changes", "findings", "est_saving(us)", "saving_low(us)",
                    "saving_high(us)", "saving_per_step(us)", "saving_step_pctg",
                    "sum_of_savings(us)", "versus_sum", "left_out", "gpu_time_findings"]


def empty_together() -> pd.DataFrame:
    """The table with nothing combined."""
    return pd.DataFrame({c: pd.Series([], dtype="object" if c in ("changes", "versus_sum",
                                                                  "left_out")
                                      else "int64" if c in ("findings", "gpu_time_findings")
                                      else "float64")
                         for c in TOGETHER_COLUMNS})


def combinable(findings: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The findings whose changes are combined (module docstring), in the table's order,
    and a sentence for each change left out."""
    if "saving_source" not in findings.columns or not len(findings):
        return findings.iloc[:0], []
    replayed = findings[(findings["saving_source"] == "replay")
                        & (findings["change"].astype(str) != "")]
    keep, left, seen = [], [], set()
    for i, (change, saving) in enumerate(zip(replayed["change"], replayed["est_saving(us)"],
                                             strict=True)):
        if change in seen:
            continue
        seen.add(change)
        if change in UPPER_BOUNDS:
            left.append(f"{change} (its replay is an upper bound)")
        elif not float(saving) > 0:
            left.append(f"{change} (it saves nothing alone)")
        else:
            keep.append(i)
    return replayed.iloc[keep], left


def together(findings: pd.DataFrame, predict_with: Predict | None,
             inferred_share: float = 0.0) -> pd.DataFrame:
    """One row: the replayed findings' fixes at once (module docstring); ``findings``: the
    table with replayed savings (:func:`~hta.analysis.whatif.findings.
    findings_with_changes`), ``predict_with(changes)``: the what-if table with a list of
    changes, ``inferred_share``: the range's share of inferred edges. Empty with fewer
    than two changes to combine, or without a replay."""
    rows, left = combinable(findings)
    if predict_with is None or len(rows) < 2:
        return empty_together()
    changes = [str(c) for c in rows["change"]]
    asked = sorted(changes)  # one order whatever the savings' (predicted ahead so)
    steps = _common_steps(rows)
    try:
        per = step_savings(predict_with(asked), steps)
        variants = _variants(asked)
        low_per = step_savings(predict_with(variants[0]), steps) if variants else None
    except ValueError as exc:  # a change that replayed alone and fails with others
        logger.warning("the findings' fixes could not be replayed together (%s)", exc)
        return empty_together()
    if not len(per):
        return empty_together()
    saved = per["saving"].to_numpy(dtype=float)
    each = recurring(saved)
    total = recurring_total(saved)
    low, high = saving_range(per, inferred_share, low_per)
    basis = _step_basis(rows, per)
    parts = float(rows["est_saving(us)"].astype(float).sum())
    return pd.DataFrame([{
        "changes": " + ".join(changes),
        "findings": len(rows),
        "est_saving(us)": total,
        "saving_low(us)": low,
        "saving_high(us)": high,
        "saving_per_step(us)": each,
        "saving_step_pctg": 100.0 * each / basis if basis > 0 else 0.0,
        "sum_of_savings(us)": parts,
        "versus_sum": versus_sum(total, parts),
        "left_out": "; ".join(left),
        "gpu_time_findings": int((findings["saving_source"] == "gpu-time").sum()),
    }], columns=TOGETHER_COLUMNS)


def likely_together(findings: pd.DataFrame) -> list[list[object]]:
    """The change lists :func:`together` will most likely replay for ``findings`` (the
    rules' table, before the replay): every finding's change but the upper bounds,
    sorted, then their conservative variants; none with fewer than two. A caller
    predicting ahead (on forked workers) predicts these with the findings' own changes;
    the replayed savings decide the list :func:`together` asks for in the end (a change
    that saves nothing alone is left out)."""
    from hta.analysis.whatif.findings import row_change

    changes = {row_change(findings.iloc[i]) for i in range(len(findings))}
    asked = sorted(c for c in changes if c and c not in UPPER_BOUNDS)
    if len(asked) < 2:
        return []
    return [list[object](asked), *_variants(asked)]


def _variants(changes: list[str]) -> list[list[object]]:
    """The changes' conservative variants together (:func:`~hta.analysis.whatif.findings.
    conservative`), as a list of one list; none when no change has one."""
    variants: list[object] = [conservative(c) or c for c in changes]
    return [variants] if any(v is not c for v, c in zip(variants, changes, strict=True)) \
        else []


#: How far from the sum of the savings the saving together may be and still be "about"
#: it (a share of the sum).
ABOUT_SUM = 0.02


def versus_sum(total: float, parts: float) -> str:
    """``less`` (the fixes overlap), ``more`` (each makes room for the others) or
    ``about`` the sum of the savings (within :data:`ABOUT_SUM` of it)."""
    if total < (1 - ABOUT_SUM) * parts:
        return "less"
    return "more" if total > (1 + ABOUT_SUM) * parts else "about"


def _common_steps(rows: pd.DataFrame) -> list[int] | None:
    """The analysed steps the combined findings share (None, every step of the replay,
    when they differ or name none)."""
    found = {tuple(int(s) for s in steps) for steps in rows["steps"]}
    if len(found) != 1:
        return None
    steps = list(next(iter(found)))
    return steps or None


def _step_basis(rows: pd.DataFrame, per: pd.DataFrame) -> float:
    """The time a share of the step is taken of: the combined findings' own (their saving a
    step over their share), else the replayed step's median."""
    for each, pct in zip(rows["saving_per_step(us)"], rows["saving_step_pctg"], strict=True):
        if np.isfinite(each) and np.isfinite(pct) and pct > 0 and each > 0:
            return 100.0 * float(each) / float(pct)
    return float(np.median(per["replayed"].to_numpy(dtype=float)))


__all__ = ["TOGETHER_COLUMNS", "combinable", "empty_together", "likely_together", "together",
           "versus_sum"]
