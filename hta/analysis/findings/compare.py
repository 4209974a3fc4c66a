"""Which findings appeared, disappeared or changed between two jobs.

``compare_findings(control, test)`` takes two tables of :func:`hta.analysis.findings.find`
(or ``TraceAnalysis.get_findings()``) and matches their rows on ``(rule, subject)``: one
rule firing on the same kernel, process group or call in both jobs is the same finding (a
CUDA runtime call and its HIP twin, ``cudaDeviceSynchronize`` and ``hipDeviceSynchronize``,
count as one call: :mod:`hta.analysis.diff.vendors`).
One row per finding present on either side, columns :data:`COLUMNS`:

* ``status``: ``appeared`` (only in test), ``disappeared`` (only in control),
  ``changed`` (both, and the estimated saving moved by at least ``threshold_pct`` percent
  of the control's saving), else ``unchanged``;
* ``control_saving(us)``, ``test_saving(us)``: each side's ``est_saving(us)`` (NaN on the
  side without the finding); ``delta(us)`` = test - control, a missing side counting 0;
  ``delta_pctg`` = 100 x delta / control saving (NaN when the finding is new);
* ``control_severity``, ``test_severity`` (empty on the missing side), ``control_ranks``,
  ``test_ranks``; ``title``, ``section`` and ``evidence`` of the test side when it has the
  finding, else of the control side.

Rows are sorted: appeared (largest test saving first), disappeared (largest control
saving first), changed (largest ``|delta|`` first), unchanged (largest test saving first).
The savings are the rules' estimates on each job's own analysed window, so a change of
window (more steps) changes them too: compare jobs over the same steps.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hta.analysis.diff.vendors import pair_frames

COLUMNS = ["rule", "subject", "status", "title", "control_saving(us)", "test_saving(us)",
           "delta(us)", "delta_pctg", "control_severity", "test_severity", "control_ranks",
           "test_ranks", "section", "evidence"]
STATUSES = ("appeared", "disappeared", "changed", "unchanged")
#: Relative change of the saving (percent) from which a finding present in both is
#: ``changed``.
DEFAULT_THRESHOLD_PCT = 10.0


def compare_findings(control: pd.DataFrame, test: pd.DataFrame,
                     threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> pd.DataFrame:
    """Match two findings tables on ``(rule, subject)`` (see the module docstring)."""
    control, test = pair_frames(control, test, "subject")  # cudaX in one, hipX in the other
    c = _keyed(control)
    t = _keyed(test)
    rows = []
    for key in list(dict.fromkeys(list(t) + list(c))):
        a, b = c.get(key), t.get(key)
        saving_a = float(a["est_saving(us)"]) if a is not None else math.nan
        saving_b = float(b["est_saving(us)"]) if b is not None else math.nan
        delta = (0.0 if b is None else saving_b) - (0.0 if a is None else saving_a)
        pct = 100.0 * delta / saving_a if a is not None and saving_a > 0 else math.nan
        if a is None:
            status = "appeared"
        elif b is None:
            status = "disappeared"
        elif (math.isfinite(pct) and abs(pct) >= threshold_pct) or (
                not math.isfinite(pct) and delta != 0):
            status = "changed"
        else:
            status = "unchanged"
        shown = b if b is not None else a
        assert shown is not None  # a key comes from one side at least
        rows.append({
            "rule": key[0], "subject": key[1], "status": status,
            "title": str(shown.get("title", "")),
            "control_saving(us)": saving_a, "test_saving(us)": saving_b,
            "delta(us)": delta, "delta_pctg": pct,
            "control_severity": "" if a is None else str(a["severity"]),
            "test_severity": "" if b is None else str(b["severity"]),
            "control_ranks": [] if a is None else [int(r) for r in a["ranks"]],
            "test_ranks": [] if b is None else [int(r) for r in b["ranks"]],
            "section": str(shown.get("section", "")),
            "evidence": str(shown.get("evidence", "")),
        })
    out = pd.DataFrame(rows, columns=COLUMNS)
    if out.empty:
        return out
    order = out["status"].map({s: i for i, s in enumerate(STATUSES)}).to_numpy()
    size = np.where(out["status"] == "disappeared", out["control_saving(us)"],
                    np.where(out["status"] == "changed", out["delta(us)"].abs(),
                             out["test_saving(us)"]))
    out = out.assign(_o=order, _s=-size).sort_values(["_o", "_s", "rule", "subject"],
                                                     kind="stable")
    return out.drop(columns=["_o", "_s"]).reset_index(drop=True)


def _keyed(frame: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """Rows by (rule, subject); a repeated key keeps its largest saving."""
    out: dict[tuple[str, str], dict] = {}
    if frame is None or not len(frame):
        return out
    for row in frame.to_dict("records"):
        key = (str(row["rule"]), str(row.get("subject", "") or ""))
        if key not in out or float(row["est_saving(us)"]) > float(
                out[key]["est_saving(us)"]):
            out[key] = row
    return out


__all__ = ["COLUMNS", "DEFAULT_THRESHOLD_PCT", "STATUSES", "compare_findings"]
