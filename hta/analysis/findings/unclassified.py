"""Finding: kernels that match no kind rule take a large share of the GPU time.

A kernel that matches no rule of the kind table (:mod:`hta.model.rules`) is counted as
``computation`` and listed by ``TraceAnalysis.get_unclassified_kernels()``. When such
kernels are in fact communication (a collective library the default rules do not know),
every breakdown that separates compute from communication is wrong, and so are the
findings built on it (exposed communication, overlap).

``unclassified_kernels``
    *Unclassified time* is the union of the intervals of the unclassified kernels that
    belong to the analysis (launched in the selected steps, or starting in the window:
    :func:`hta.analysis.findings.kernels.in_steps`); *GPU busy time* is the union of all
    GPU work (kernels, copies, memsets) on the rank selected the same way. The rule fires
    when the unclassified time is at least :data:`MIN_SHARE` (20%) of the GPU busy time.

    The estimated saving is the *exposed* part of the unclassified time: the time when
    unclassified kernels run and no classified kernel, copy or memset runs on any stream.
    It is what the step would lose if those kernels were communication that could be
    fully overlapped with compute, the best case of classifying them and acting on the
    overlap findings; if they are genuine compute it is time whose kind is merely unknown,
    which the evidence says. It is capped at the window's length.
"""

from __future__ import annotations

import numpy as np

from hta.analysis.findings.engine import Finding, FindingRule, analysis_window
from hta.analysis.findings.host import fmt_steps, fmt_time, step_tuple
from hta.analysis.findings.kernels import in_steps, top_names
from hta.analysis.intervals import Cover, merge
from hta.model.rules import GPU_WORK_KINDS, kind_codes
from hta.model.trace import RankTrace

#: Least share of the GPU busy time in unclassified kernels for a finding.
MIN_SHARE = 0.20

_GPU_CODES = kind_codes(GPU_WORK_KINDS)


def check_unclassified(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``unclassified_kernels`` finding of one rank (module docstring)."""
    ev = rt.events
    mask = rt.unclassified
    if len(mask) != len(ev) or not mask.any():
        return []
    window = analysis_window(rt, iterations)
    ts, end = ev["ts"].to_numpy(), ev["end"].to_numpy()
    gpu = np.isin(ev["kind"].cat.codes.to_numpy(), _GPU_CODES)
    sel = gpu & in_steps(rt, ev["iteration"].to_numpy(), ts, iterations, window)
    unknown = sel & mask
    if not unknown.any():
        return []
    us, ue = merge(ts[unknown], end[unknown])
    busy_s, busy_e = merge(ts[sel], end[sel])
    unknown_ns = int((ue - us).sum())
    busy_ns = int((busy_e - busy_s).sum())
    if busy_ns <= 0 or unknown_ns < MIN_SHARE * busy_ns:
        return []
    classified = Cover(ts[gpu & ~mask], end[gpu & ~mask])
    exposed = int(((ue - us) - classified.within(us, ue)).sum())
    exposed = min(exposed, window[1] - window[0])
    if exposed <= 0:
        return []
    listed = top_names(rt, ev["name"].to_numpy()[unknown], (end - ts)[unknown])
    evidence = (
        f"{int(unknown.sum())} kernels that match no kind rule ran {fmt_time(unknown_ns)} in "
        f"{fmt_steps(ev['iteration'].to_numpy()[unknown])}, {100 * unknown_ns / busy_ns:.1f}% "
        f"of the {fmt_time(busy_ns)} the GPU was busy, {fmt_time(exposed)} of it with no "
        f"classified work running (most: {listed}; unclassified kernels table)."
    )
    return [Finding((rt.rank,), step_tuple(ev["iteration"].to_numpy()[unknown]), evidence,
                    exposed, window[1] - window[0])]


RULES: list[FindingRule] = [
    FindingRule(
        id="unclassified_kernels",
        title="Kernels of unknown kind take a large share of the GPU time",
        section="unclassified",
        advice=("Check TraceAnalysis.get_unclassified_kernels(): if some are communication "
                "(a collective library the default rules do not know), load with "
                "kind_rules=[Rule('communication', name=r'...')] (hta.model.rules.Rule) so "
                "the overlap and communication analyses see them; known compute kernels can "
                "get a Rule('computation', name=...) to silence this finding."),
        saving=("The time unclassified kernels run while no classified GPU work runs (what "
                "the step would lose if they were communication overlapped with compute); "
                "only when unclassified kernels take 20% or more of the GPU busy time."),
        check=check_unclassified,
    ),
]
