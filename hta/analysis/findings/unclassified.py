"""Coverage note: kernels that match no kind rule (a gap of this tool, not of the job).

A kernel that matches no rule of the kind table (:mod:`hta.model.rules`) is counted as
``computation`` and listed by ``TraceAnalysis.get_unclassified_kernels()``. When such
kernels are in fact communication, every breakdown that separates compute from
communication is off, and so are the findings built on it. That is a limit of the kind
rules, not a problem of the job, so it is never a finding with a saving: the coverage of
the findings (:mod:`hta.analysis.findings.coverage`) reports it beside them.

*Unclassified time* is the union of the intervals of the unclassified kernels that belong
to the analysis (launched in the selected steps, or starting in the window:
:func:`hta.analysis.findings.kernels.in_steps`); *GPU busy time* is the union of all GPU
work (kernels, copies, memsets) of the rank selected the same way. The note is written
when the unclassified time is at least :data:`NOTE_SHARE` (1%) of the GPU busy time.
"""

from __future__ import annotations

from dataclasses import dataclass

from hta.analysis.findings.kernel_common import in_steps, top_names
from hta.analysis.intervals import merge
from hta.model.rules import GPU_WORK_KINDS, kind_mask
from hta.model.trace import RankTrace

#: Least share of the GPU busy time in unclassified kernels for a coverage note.
NOTE_SHARE = 0.01



@dataclass(frozen=True)
class Unclassified:
    """The unclassified kernels of one rank: ``kernels`` (count), ``time_ns`` (union),
    ``busy_ns`` (GPU busy time), ``top`` (the three short names with most time)."""

    kernels: int
    time_ns: int
    busy_ns: int
    top: str

    @property
    def share(self) -> float:
        """Unclassified time over GPU busy time (0 without GPU work)."""
        return self.time_ns / self.busy_ns if self.busy_ns > 0 else 0.0


def unclassified_time(rt: RankTrace, iterations: list[int] | None,
                      window: tuple[int, int]) -> Unclassified:
    """The unclassified kernels of one rank in the analysis (module docstring)."""
    ev = rt.events
    mask = rt.unclassified
    ts, end = rt.column("ts"), rt.column("end")
    gpu = kind_mask(rt.kind_codes(), GPU_WORK_KINDS)
    sel = gpu & in_steps(rt, rt.column("iteration"), ts, iterations, window)
    busy_s, busy_e = merge(ts[sel], end[sel])
    busy_ns = int((busy_e - busy_s).sum())
    if len(mask) != len(ev) or not mask.any():
        return Unclassified(0, 0, busy_ns, "")
    unknown = sel & mask
    if not unknown.any():
        return Unclassified(0, 0, busy_ns, "")
    us, ue = merge(ts[unknown], end[unknown])
    top = top_names(rt, rt.column("name")[unknown], (end - ts)[unknown])
    return Unclassified(int(unknown.sum()), int((ue - us).sum()), busy_ns, top)


def note(u: Unclassified) -> str:
    """The coverage note's sentence, or ``""`` under :data:`NOTE_SHARE`."""
    if u.time_ns <= 0 or u.share < NOTE_SHARE:
        return ""
    return (f"{100 * u.share:.1f}% of the GPU busy time ({u.time_ns / 1e3:,.1f} µs, "
            f"{u.kernels} kernels; most: {u.top}) is in kernels that match no kind rule: "
            "they count as computation, so the communication and idle figures may be off. "
            "A gap of the kind rules, not a problem of the job: check "
            "get_unclassified_kernels() and add kind_rules=[Rule(...)] for them.")


__all__ = ["NOTE_SHARE", "Unclassified", "note", "unclassified_time"]
