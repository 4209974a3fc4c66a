"""What a findings rule is made of, and the time it is judged against.

A rule (:class:`FindingRule`) checks one rank (or, for ``scope="job"``, several) and
returns :class:`Finding` objects; :func:`analysis_window` is the analysed time of a rank
(the span of its selected steps) that savings are a share of; :func:`step_table` its
``ProfilerStep`` spans. Rule modules import this module and :mod:`.rule_tools`, never
the engine that runs them (:mod:`.engine`), so the rules and the engine form no import
circle: the engine reaches the rules through the explicit list of :mod:`.catalog`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from hta.analysis.findings.claims import Claim
from hta.analysis.findings.events import link, step_table
from hta.analysis.findings.steady import steady_window, trace_extent
from hta.analysis.gpu_work import as_list, rank_gpu_work, read_only
from hta.model.derived import derived
from hta.model.rules import GPU_WORK_KINDS, kind_mask
from hta.model.selection import Selection, StepList
from hta.model.trace import RankTrace, Trace

if TYPE_CHECKING:
    from hta.model.runner import RankWork


@dataclass(frozen=True)
class Finding:
    """One problem seen on one rank (or, for job rules, on several).

    ``window_ns`` is the analysed time the saving is a share of (for severity);
    ``subject`` separates several findings of one rule (a kernel, a process group);
    ``advice`` replaces the rule's advice when set; ``claim`` is the time the saving comes
    from (:class:`~hta.analysis.findings.claims.Claim`; None: not said, the saving is then
    capped by the window time no claim holds); ``budget`` ``(what, ns)`` a resource of the
    rank the saving is bounded by and that other findings may share (``comm_exposed``:
    the computation time with no communication, which overlapping could hide collectives
    under): the savings naming one ``what`` add up to at most ``ns``; ``rank_claims``, for
    a job finding, the time its saving comes from on each rank (``stragglers``: the wait at
    each collective it held up, on each rank that waited), taken before any rank finding.
    """

    ranks: tuple[int, ...]
    steps: tuple[int, ...]
    evidence: str
    est_saving_ns: int
    window_ns: int
    subject: str = ""
    advice: str = ""
    claim: Claim | None = field(default=None, compare=False, repr=False)
    budget: tuple[str, int] | None = None
    rank_claims: Mapping[int, Claim] | None = field(default=None, compare=False, repr=False)


RankCheck = Callable[[RankTrace, "list[int] | None"], "list[Finding]"]
JobCheck = Callable[[Trace, "Selection"], "list[Finding]"]
#: A job rule's per-rank inputs for the selected ranks and steps: ``(key, work)`` pairs
#: (:func:`hta.model.runner.remember_together`), read for every job rule in one visit.
JobInputs = Callable[["list[int]", "list[int] | None"], "list[tuple[Hashable, RankWork]]"]


@dataclass(frozen=True)
class FindingRule:
    """A rule: what it detects, where the evidence is, what to try, and its check.

    ``info``: the rule states a fact, not a problem; its findings have severity ``info``
    and no saving, and ``min_share`` does not drop them. ``inputs``: see the field.
    """

    id: str
    title: str
    section: str
    advice: str
    saving: str
    check: RankCheck | JobCheck
    scope: Literal["rank", "job"] = "rank"
    tags: tuple[str, ...] = field(default=())
    info: bool = False
    #: A job rule's per-rank inputs (:data:`JobInputs`), read ahead with the other job
    #: rules' in one visit spread over the workers; None: it reads them itself.
    inputs: JobInputs | None = None
    #: The highest severity a finding of this subject may take (``"low"``, ``"medium"``;
    #: ``""``: no cap), for a cost the trace shows but cannot tell needed from not (a
    #: loop's own timing synchronize); None: no cap for any subject.
    max_severity: Callable[[str], str] | None = None


# -- the analysed window ---------------------------------------------------------------
#: The rank's GPU work, computed once per rank and steps, read-only
#: (:func:`hta.analysis.gpu_work.rank_gpu_work`, shared with the breakdowns).
rank_work = rank_gpu_work


def analysis_window(rt: RankTrace, iterations: StepList = None
                    ) -> tuple[int, int]:
    """(start, end) in ns of what is analysed on this rank.

    With ``iterations``: from the first selected step's start to the last one's end, or
    to the end of the last GPU work those steps launched when the GPU runs behind the host
    and finishes later. Without: the span of the steps (the same way) when the trace has
    ``ProfilerStep`` spans, else the steady state
    (:func:`hta.analysis.findings.steady.steady_window`: from the end of the latest
    one-time cost that a quarter of the GPU work or more follows, to the end of
    the trace), else the time the trace covers
    (:func:`hta.analysis.findings.steady.trace_extent`: every event, not past the end of
    the profiler's own span). ``(0, 0)`` for an empty rank. Computed
    once per rank and selection (:func:`hta.model.derived.derived`).
    """
    key = None if iterations is None else tuple(as_list(iterations))
    return derived(rt, ("findings.window", key), lambda: _analysis_window(rt, iterations))


def _analysis_window(rt: RankTrace, iterations: StepList
                     ) -> tuple[int, int]:
    steps = step_table(rt)
    if iterations is not None:
        steps = steps[steps["step"].isin(as_list(iterations))]
    if len(steps):
        start, end = int(steps["start_ns"].min()), int(steps["end_ns"].max())
        return start, max(end, _steps_gpu_end(rt, steps["step"].to_numpy()))
    ev = rt.events
    if not len(ev):
        return 0, 0
    if iterations is None and not len(step_table(rt)):
        steady = steady_window(rt)
        if steady is not None:
            return steady[0], steady[1]
        return trace_extent(rt)
    return int(ev["ts"].min()), int(ev["end"].max())


def _steps_gpu_end(rt: RankTrace, steps: np.ndarray) -> int:
    """The end of the last GPU work (kernel, copy, memset) launched in ``steps``: a GPU
    that runs behind its host finishes a step's work after the step's CPU span (0 when
    none)."""
    gpu = kind_mask(rt.kind_codes(), GPU_WORK_KINDS)
    mine = gpu & np.isin(rt.column("iteration"), steps)
    return int(rt.column("end")[mine].max()) if mine.any() else 0


__all__ = ["Finding", "FindingRule", "JobCheck", "RankCheck", "analysis_window", "link",
           "rank_work", "read_only", "step_table"]
