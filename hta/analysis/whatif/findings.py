"""Findings with the change that would fix them, and the replay's saving where it has one.

A post-processing step on the findings table (:func:`hta.analysis.findings.find`'s
columns), leaving the rules alone. Each finding whose rule names a problem a change of
:mod:`hta.analysis.whatif.changes` removes gets that change (:data:`RULE_CHANGES`) in the
``change`` column; the job is replayed with it, and ``est_saving(us)`` becomes

* for ``stragglers``: the sum over every rank and the finding's steps of ``measured -
  predicted`` (a straggler holds the other ranks up: their time is the saving);
* for every other rule: the same sum over the finding's ranks only.

The evidence then ends with a sentence saying so, ``saving_source`` is ``replay`` and
``share_pctg`` is scaled with the saving. Findings of other rules keep the rule's own
estimate (``saving_source`` ``rule``, ``change`` empty). ``measured - predicted`` can be
negative (the change would not help on that rank and step); it is summed as it is.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

#: Findings rule id -> the change that removes the problem it names.
RULE_CHANGES: dict[str, str] = {
    "stragglers": "no-stragglers",
    "host_sync": "no-host-sync",
    "data_loading": "no-data-loader",
    "launch_bound": "no-launch-overhead",
    "graph_capture": "no-launch-overhead",
    "comm_exposed": "overlap-comm",
}
#: Rules whose saving is every rank's (the problem holds the others up).
JOB_WIDE = frozenset({"stragglers"})


def change_for(rule: str, ranks: list[int]) -> str:
    """The change that fixes a finding of ``rule`` on ``ranks`` ("" when none)."""
    change = RULE_CHANGES.get(rule, "")
    if change == "no-stragglers" and len(ranks) == 1:
        return f"no-stragglers:{int(ranks[0])}"
    return change


def findings_with_changes(findings: pd.DataFrame,
                          predict_with: Callable[[str], pd.DataFrame]) -> pd.DataFrame:
    """``findings`` with ``change`` and ``saving_source`` columns and replayed savings
    (module docstring), largest saving first. ``predict_with(change)``: the what-if
    table with that change (:func:`hta.analysis.whatif.predict` on the job graph, or
    the coupled per-rank replays)."""
    out = findings.copy()
    changes = [change_for(r, list(k)) for r, k in zip(out["rule"], out["ranks"], strict=True)]
    out["change"] = changes
    out["saving_source"] = "rule"
    cache: dict[str, pd.DataFrame] = {}
    old_savings = out["est_saving(us)"].to_numpy(dtype=float, copy=True)
    for i, row in enumerate(out.itertuples(index=False)):
        change = changes[i]
        if not change or row.severity == "info":
            continue
        if change not in cache:
            cache[change] = predict_with(change)
        table = cache[change]
        steps = list(row.steps) if len(row.steps) else None
        mask = np.ones(len(table), dtype=bool)
        if steps is not None:
            mask &= table["step"].isin(steps).to_numpy()
        if row.rule not in JOB_WIDE:
            mask &= table["rank"].isin(list(row.ranks)).to_numpy()
        picked = table[mask]
        if not len(picked):
            continue
        saving = float((picked["measured(us)"] - picked["predicted(us)"]).sum())
        old = float(old_savings[i])
        out.iat[i, out.columns.get_loc("est_saving(us)")] = saving
        if "share_pctg" in out and old > 0:
            out.iat[i, out.columns.get_loc("share_pctg")] = row.share_pctg * saving / old
        out.iat[i, out.columns.get_loc("evidence")] = (
            f"{row.evidence} Saving from the replay: measured minus predicted step time "
            f"with {change}, summed over {'every rank' if row.rule in JOB_WIDE else 'its ranks'}"
            f" and its steps (the rule estimated {old:,.0f} µs).")
        out.iat[i, out.columns.get_loc("saving_source")] = "replay"
    return out.sort_values("est_saving(us)", ascending=False, kind="stable",
                           ignore_index=True)
