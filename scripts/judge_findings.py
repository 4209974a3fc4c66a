#!/usr/bin/env python
"""Print, per trace folder, what a reader judges the findings by: the top problems (rule,
severity, saving, title), the notes, the window the findings describe and the share of
the idle time they explain (``get_findings()`` and ``get_findings_coverage()``, first
rank). Used to judge the findings on real traces before and after a change
(``docs/analyses/findings_real_traces.md``)::

    python scripts/judge_findings.py sample_traces/cuda_h100/*/ > after.txt
    PYTHONPATH=OLD_TREE python scripts/judge_findings.py sample_traces/cuda_h100/*/ > before.txt
    diff before.txt after.txt

Traces are loaded without the cache (nothing is written next to them).
"""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path

from hta.trace_analysis import TraceAnalysis


def judge(folder: Path, top: int) -> list[str]:
    """The lines printed for one folder."""
    analysis = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)
    found = analysis.get_findings()
    coverage = analysis.get_findings_coverage()
    notes = ",".join(found[found["severity"] == "info"]["rule"])
    lines = [f"## {folder.name} notes: {notes}"]
    for _, row in found[found["severity"] != "info"].head(top).iterrows():
        lines.append(f"   {row['severity']:6s} {row['rule']:18s} "
                     f"{row['est_saving(us)'] / 1e3:10.2f} ms  {row['title'][:60]}")
    if len(coverage):
        first = coverage.iloc[0]
        lines.append(f"   window: {str(first.get('window', ''))[:230]}")
        lines.append(f"   idle explained: {first['idle_explained_pctg']:.1f}% "
                     f"(explained {first['explained_pctg']:.1f}% of "
                     f"{first['not_computing(us)'] / 1e3:,.3f} ms not computing)")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Judge each folder; a folder that fails to load prints its error and the rest go on."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--top", type=int, default=3, help="problems shown per folder")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    for folder in args.folders:
        try:
            lines = judge(folder, args.top)
        except Exception as exc:  # noqa: BLE001 - one bad folder must not stop the rest
            lines = [f"## {folder.name} ERROR {exc!r:.200}"]
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
