#!/usr/bin/env python
"""How well the replay predicts the trace after a fix, on real before/after pairs.

A pair is a folder holding ``before/``, ``after/`` (the same workload with one fix) and
optionally ``again/`` (the workload as it is, a second run: the run-to-run noise), each a
trace folder, and ``pair.json`` with ``change`` (the what-if change modelling the fix; ""
when the replay has none), ``fix`` (what was changed) and ``holdout`` (set apart: judged
last). ``scripts/collect_cuda_workloads.py --pairs`` and ``scripts/collect_cpu_pairs.py``
write them.

Per pair it prints the change, the predicted after-step (the mean over the before-trace's
steps of the job's predicted step) and its range (the means of ``job_predicted_low`` and
``job_predicted_high``), the measured after-step (the mean of the after-trace's job
steps, to their completion as the what-if measures them) and the error ``100 * (predicted
- measured) / measured``. Each ``again`` run is a no-change pair: the prediction is the
before-trace's replay without change. Then, for the tuned pairs and the holdout pairs
apart: the median and worst absolute error and the coverage (pairs whose measured step
lies in the range).

    python benchmarks/bench_predict.py sample_traces/pairs_cpu [/tmp/pairs_h100 ...]
    python benchmarks/bench_predict.py PAIRS... --json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _analyzer(folder: Path) -> Any:
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)


def _mean_job(table: Any, column: str) -> float:
    return float(table.groupby("step")[column].first().mean())


def judge(before: Path, after: Path, change: str) -> dict[str, Any]:
    """One row: the prediction on ``before`` with ``change`` against ``after``."""
    a = _analyzer(before)
    pred = a.what_if(change or None)
    measured_after = _mean_job(_analyzer(after).what_if(), "job_measured(us)")
    predicted = _mean_job(pred, "job_predicted(us)")
    low = _mean_job(pred, "job_predicted_low(us)")
    high = _mean_job(pred, "job_predicted_high(us)")
    return {"before(us)": _mean_job(pred, "job_measured(us)"), "predicted(us)": predicted,
            "low(us)": low, "high(us)": high, "after(us)": measured_after,
            "error_pctg": 100.0 * (predicted - measured_after) / measured_after,
            "inside": bool(low <= measured_after <= high)}


def pairs_in(roots: list[Path]) -> list[Path]:
    """Every folder holding a ``pair.json`` under ``roots``."""
    found: list[Path] = []
    for root in roots:
        found += sorted(p.parent for p in root.rglob("pair.json"))
    return found


def rows_of(pair: Path) -> list[dict[str, Any]]:
    """The pair's rows: the fix (when it has a change) and the no-change run."""
    manifest = json.loads((pair / "pair.json").read_text())
    base = {"pair": pair.name, "fix": manifest.get("fix", ""),
            "holdout": bool(manifest.get("holdout"))}
    rows = []
    if manifest.get("change") and (pair / "after").is_dir():
        rows.append({**base, "change": manifest["change"],
                     **judge(pair / "before", pair / "after", manifest["change"])})
    elif (pair / "after").is_dir():
        after = _mean_job(_analyzer(pair / "after").what_if(), "job_measured(us)")
        rows.append({**base, "change": "(not modelled)", "after(us)": after})
    if (pair / "again").is_dir():
        rows.append({**base, "change": "(no change)",
                     **judge(pair / "before", pair / "again", "")})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and worst absolute error, coverage, for rows with a prediction."""
    judged = [r for r in rows if "error_pctg" in r]
    if not judged:
        return {"pairs": 0}
    err = np.abs([r["error_pctg"] for r in judged])
    return {"pairs": len(judged), "median_error_pctg": float(np.median(err)),
            "worst_error_pctg": float(err.max()),
            "coverage_pctg": 100.0 * sum(r["inside"] for r in judged) / len(judged)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("roots", nargs="+", type=Path, help="folders holding pairs")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)
    rows = [r for pair in pairs_in(args.roots) for r in rows_of(pair)]
    if not rows:
        print("no pair (a folder with pair.json) under " + ", ".join(map(str, args.roots)),
              file=sys.stderr)
        return 2
    halves = {"tuned": summary([r for r in rows if not r["holdout"]]),
              "holdout": summary([r for r in rows if r["holdout"]])}
    if args.json:
        print(json.dumps({"rows": rows, **halves}, indent=1))
        return 0
    print(f"{'pair':<18} {'change':<20} {'before':>9} {'predicted':>9} {'range':>19} "
          f"{'after':>9} {'error':>7}  in")
    for r in rows:
        if "error_pctg" not in r:
            print(f"{r['pair']:<18} {r['change']:<20} {'':>9} {'':>9} {'':>19} "
                  f"{r['after(us)'] / 1e3:>9.3f}")
            continue
        rng = f"{r['low(us)'] / 1e3:.3f}-{r['high(us)'] / 1e3:.3f}"
        print(f"{r['pair']:<18} {r['change']:<20} {r['before(us)'] / 1e3:>9.3f} "
              f"{r['predicted(us)'] / 1e3:>9.3f} {rng:>19} {r['after(us)'] / 1e3:>9.3f} "
              f"{r['error_pctg']:>+6.1f}%  {'yes' if r['inside'] else 'NO'}"
              f"{'  (holdout)' if r['holdout'] else ''}")
    print("(ms per step, the job's step to its completion, mean over the steps)")
    for name, s in halves.items():
        if s["pairs"]:
            print(f"{name}: {s['pairs']} predictions, median error "
                  f"{s['median_error_pctg']:.1f}%, worst {s['worst_error_pctg']:.1f}%, "
                  f"measured inside the range {s['coverage_pctg']:.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
