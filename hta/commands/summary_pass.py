"""What ``hta summary`` computes, from one visit of each rank.

The overview, the findings (with their coverage), the unclassified kernels, the operator
summary and the GPU time by category are per-rank analyses; on a job whose ranks are
kept out of memory each would read every rank again. They run here as
:class:`~hta.model.visits.RankPlan` objects in a single visit of each rank
(:func:`~hta.model.visits.run_together`): a rank is read once, the analyses share what
they compute on it (the operator calls behind both the roofline finding and the
operator summary, the step table), and only their per-rank answers travel back. The
answers are the same as the ``TraceAnalysis`` methods'
(``tests/test_summary_pass.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from hta.analysis.findings import FindingsResult
from hta.analysis.findings.engine import findings_plan
from hta.analysis.perf.summary import category_time, rank_op_summary
from hta.model.selection import Selection
from hta.model.visits import RankPlan, run_together
from hta.report.overview import JobOverview, overview_plan
from hta.trace_analysis import UNCLASSIFIED_COLUMNS, TraceAnalysis, unclassified_kernels


@dataclass(frozen=True)
class SummaryAnswers:
    """The summary's inputs: ``unclassified`` as ``get_unclassified_kernels``,
    ``op_summary`` as ``get_op_performance_summary(device=...)``, ``category_time`` as
    ``get_category_time``."""

    overview: JobOverview
    findings: FindingsResult
    unclassified: pd.DataFrame
    op_summary: pd.DataFrame
    category_time: pd.DataFrame


def summary_answers(analyzer: TraceAnalysis, iterations: list[int] | None, top: int,
                    device: Any = None) -> SummaryAnswers:
    """Every per-rank answer of the summary, in one visit of each rank."""
    job = analyzer.t
    selection = Selection.of(None, iterations).resolve(job)
    ranks = list(selection.ranks)
    plans = [
        overview_plan(job, selection, top),
        findings_plan(job, ranks, iterations),
        RankPlan(unclassified_kernels, finish=sorted_unclassified),
        RankPlan(rank_op_summary, kwargs={"device": device, "rules": analyzer.rules}),
        RankPlan(category_time, kwargs={"rules": analyzer.rules}),
    ]
    overview, findings, unclassified, op_summary, categories = run_together(
        job, plans, ranks, description="Summary")
    return SummaryAnswers(overview, findings, unclassified, op_summary, categories)


def sorted_unclassified(frame: pd.DataFrame) -> pd.DataFrame:
    """``get_unclassified_kernels``'s order: by rank, longest first."""
    if not len(frame):
        return pd.DataFrame(columns=UNCLASSIFIED_COLUMNS)
    return frame.sort_values(["rank", "total_duration(us)"], ascending=[True, False],
                             ignore_index=True)


__all__ = ["SummaryAnswers", "sorted_unclassified", "summary_answers"]
