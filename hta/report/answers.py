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

from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, TypeVar

from hta.analysis.findings.engine import FindingsResult, findings_plan
from hta.analysis.perf.summary import CATEGORY_TIME, OP_SUMMARY
from hta.analysis.summary import RANK_SUMMARY
from hta.analysis.unclassified import UNCLASSIFIED_KERNELS
from hta.model.runner import run
from hta.model.selection import Selection
from hta.report.overview import JobOverview, overview_plan

if TYPE_CHECKING:
    import pandas as pd

    from hta.model.devices import Device
    from hta.report.analyzer import Analyzer

T = TypeVar("T")


def _answer(value: T | BaseException) -> T:
    """``value``, or its exception raised (an analysis that failed)."""
    if isinstance(value, BaseException):
        raise value
    return value


@dataclass(frozen=True)
class JobAnswers:
    """What ``hta summary`` and the report read, each attribute typed: ``overview``
    (:class:`~hta.report.overview.JobOverview`), ``findings`` (a
    :class:`~hta.analysis.findings.engine.FindingsResult`: the findings, their coverage and
    the unexplained time), ``category_time`` (``get_category_time``), ``op_summary``
    (``get_op_performance_summary``), ``unclassified`` (``get_unclassified_kernels``) and
    ``rank_summary`` (``get_rank_summary``: every event, whatever the steps).

    With ``errors="return"`` an analysis that failed does not sink the others: reading
    its attribute raises its exception (:attr:`failed` lists them)."""

    _overview: JobOverview | BaseException
    _findings: FindingsResult | BaseException
    _category_time: pd.DataFrame | BaseException
    _op_summary: pd.DataFrame | BaseException
    _unclassified: pd.DataFrame | BaseException
    _rank_summary: pd.DataFrame | BaseException
    #: Why the findings' savings were not replayed ("" when they were, or not asked).
    replay_note: str = ""
    #: The replayed fixes at once (:mod:`hta.analysis.whatif.together`; one row, empty
    #: when fewer than two are replayed; None when the savings were not replayed).
    together: pd.DataFrame | None = None

    @property
    def overview(self) -> JobOverview:
        """:func:`hta.report.overview.job_overview` of the selection."""
        return _answer(self._overview)

    @property
    def findings(self) -> FindingsResult:
        """``get_findings``, ``get_findings_coverage`` and ``get_unexplained_time``."""
        return _answer(self._findings)

    @property
    def category_time(self) -> pd.DataFrame:
        """GPU time by category per rank (``get_category_time``)."""
        return _answer(self._category_time)

    @property
    def op_summary(self) -> pd.DataFrame:
        """Per operator and shapes (``get_op_performance_summary``)."""
        return _answer(self._op_summary)

    @property
    def unclassified(self) -> pd.DataFrame:
        """The kernels no kind rule matched (``get_unclassified_kernels``)."""
        return _answer(self._unclassified)

    @property
    def rank_summary(self) -> pd.DataFrame:
        """Per rank, every event (``get_rank_summary``)."""
        return _answer(self._rank_summary)

    @property
    def failed(self) -> dict[str, BaseException]:
        """The answers whose analysis failed (``errors="return"``), by attribute name."""
        return {name.lstrip("_"): value for name, value in vars(self).items()
                if isinstance(value, BaseException)}


def job_answers(analyzer: Analyzer, selection: Selection, top: int = 10,
                device: Device | None = None,
                errors: Literal["raise", "return"] = "raise",
                replay: bool | None = None) -> JobAnswers:
    """Every answer of :class:`JobAnswers` for ``selection`` (resolved by the caller, once:
    :func:`hta.model.selection.resolve`), from one visit of each selected rank; ``device``
    for the operators' % of peak. The findings' savings are the replay's
    (``TraceAnalysis.get_findings``); ``replay=False``: the rules' GPU-time estimates;
    ``None``: replayed when it fits (:func:`replay_fits`, the reason in ``replay_note``
    when not)."""
    analyzer.merge_capture_traces()  # graph-replayed work with its captured operators
    job = analyzer.t
    iterations = selection.iteration_list
    rules = analyzer.rules
    # a graph the replay can build meanwhile, where a core would idle
    with analyzer.replay().building_ahead(None if replay else REPLAY_MAX_EVENTS) \
            if replay is not False else nullcontext():
        plans = [
            overview_plan(job, selection, top),
            findings_plan(job, selection),
            CATEGORY_TIME.work(rules).on_steps(iterations),
            OP_SUMMARY.work(device=device, rules=rules).on_steps(iterations),
            UNCLASSIFIED_KERNELS.work(),
            RANK_SUMMARY.work(),
        ]
        # each plan takes its steps itself: the visit reads the selected ranks whole
        answers = run(job, plans, selection.every_event(), description="Summary",
                      errors=errors)
    found, note, together = answers[1], "", None
    if replay is None:
        replay, note = replay_fits(analyzer, answers[0])
    if replay and isinstance(found, FindingsResult) and len(found.findings):
        # the savings users see are the replay's (hta.analysis.whatif.findings)
        replayed = analyzer.replay_findings(found.findings, together=True)
        answers[1] = replace(found, findings=replayed)
        together = analyzer.replay().findings_together(replayed)
    elif isinstance(found, FindingsResult):
        from hta.analysis.whatif.findings import findings_with_changes

        answers[1] = replace(found, findings=findings_with_changes(found.findings, None))
    overview, findings, category, ops, unclassified, summary = answers
    return JobAnswers(overview, findings, category, ops, unclassified, summary,
                      replay_note=note, together=together)


#: Above this many events, a job not on Dask is not replayed by default: the job graph of
#: every rank is built in this process (about 0.75 kB per event: 609 MiB for 800k events).
REPLAY_MAX_EVENTS = 4_000_000


def replay_fits(analyzer: Analyzer, overview: object) -> tuple[bool, str]:
    """Whether to replay the findings' fixes by default, and why not: a job on Dask
    replays where its ranks are; another replays in this process when it has at most
    :data:`REPLAY_MAX_EVENTS` events."""
    if getattr(analyzer.t, "keeps_remotely", False) or isinstance(overview, BaseException):
        return True, ""
    events = int(overview.ranks["events"].sum())  # type: ignore[attr-defined]
    if events <= REPLAY_MAX_EVENTS:
        return True, ""
    return False, (f"The findings' savings are the rules' GPU-time estimates, not replayed: "
                   f"the job has {events:,} events, and replaying it in this process would "
                   f"build the job graph of every rank here (about {events * 0.75e-6:,.1f} "
                   "GB); replay it on a Dask cluster (--scheduler), or ask with --replay.")


__all__ = ["REPLAY_MAX_EVENTS", "JobAnswers", "job_answers", "replay_fits"]
