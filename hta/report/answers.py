"""What ``hta summary`` and ``hta report`` start from, computed in one visit of each rank.

The overview, the findings (with their coverage and unexplained time), the GPU time by
category, the operator summary, the unclassified kernels and the rank summary are
per-rank analyses; on a job whose ranks are kept out of memory each would read every
rank again. They run here
as :class:`~hta.model.runner.RankWork` objects in a single visit of each rank
(:func:`~hta.model.runner.run`): a rank is read once, the analyses share what
they compute on it (:mod:`hta.model.derived`: the operator calls behind both the roofline
finding and the operator summary, the step table), and only their per-rank answers
travel back. Each answer equals its ``TraceAnalysis`` method's on the same selection
(``tests/test_visits.py``); the categories and the operator summary, which have no
``iterations`` argument, see each rank restricted to the selected steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hta.analysis.findings.engine import findings_plan
from hta.analysis.perf.summary import category_time, rank_op_summary
from hta.analysis.summary import rank_summary
from hta.analysis.unclassified import sorted_unclassified, unclassified_kernels
from hta.model.runner import RankWork, run
from hta.model.selection import Selection
from hta.report.overview import overview_plan


@dataclass(frozen=True)
class JobAnswers:
    """``overview`` (:class:`~hta.report.overview.JobOverview`), ``findings`` (a
    ``FindingsResult``), ``category_time`` (``get_category_time``), ``op_summary``
    (``get_op_performance_summary``), ``unclassified`` (``get_unclassified_kernels``),
    ``rank_summary`` (``get_rank_summary``: every event, whatever the steps).
    With ``errors="return"`` an answer whose analysis failed is that exception."""

    overview: Any
    findings: Any
    category_time: Any
    op_summary: Any
    unclassified: Any
    rank_summary: Any


def job_answers(analyzer: Any, selection: Selection, top: int = 10, device: Any = None,
                errors: str = "raise") -> JobAnswers:
    """Every answer of :class:`JobAnswers` for ``selection`` (resolved here if it is not),
    from one visit of each selected rank; ``device`` for the operators' % of peak."""
    merge = getattr(analyzer, "merge_capture_traces", None)
    if merge is not None:  # graph-replayed work with its captured operators (issue 26)
        merge()
    job = analyzer.t
    selection = selection.resolve(job)
    ranks, iterations = list(selection.ranks), selection.iteration_list
    rules = getattr(analyzer, "rules", None)
    plans = [
        overview_plan(job, selection, top),
        findings_plan(job, ranks, iterations),
        RankWork.of_trace(category_time, (rules,)).on_steps(iterations),
        RankWork.of_trace(rank_op_summary, kwargs={"device": device, "rules": rules}
                          ).on_steps(iterations),
        RankWork.of_trace(unclassified_kernels, finish=sorted_unclassified),
        RankWork.of_trace(rank_summary),
    ]
    return JobAnswers(*run(job, plans, ranks, description="Summary", errors=errors))


__all__ = ["JobAnswers", "job_answers"]
