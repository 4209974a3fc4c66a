"""The step-bound lines of ``hta summary``: which rank and which work bound the job's step,
the step with that rank alone at the median across ranks, and the replay's error
(:mod:`hta.report.sections_whatif`; figures of
:func:`hta.analysis.whatif.jobpath.job_step_bound`). Jobs of two or more ranks with
``ProfilerStep`` only, and only with ``--step-bound``: the replay adds a third to the
summary's time on a job of 8 ranks of 100k events (``docs/analyses/whatif.md``)."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from hta.commands.args_and_output import Printer
from hta.report.present import printable

if TYPE_CHECKING:
    from hta.report.analyzer import Analyzer

logger = logging.getLogger(__name__)
#: Reasons for no step bound that the text output does not print.
UNSAID = ("no GPU work",)


def add_step_bound_option(p: argparse.ArgumentParser) -> None:
    """``--step-bound``: replay the job and say what bounds its step."""
    p.add_argument("--step-bound", action="store_true",
                   help="replay a job of several ranks and say which rank and which work "
                        "bound its step, and the step with that rank alone at the median "
                        "across ranks (no-stragglers:RANK), with the replay's error "
                        "(adds 5-40%% to the time, the most on large jobs; hta report always "
                        "shows it)")


def step_bound(analyzer: Analyzer, iterations: list[int] | None, wanted: bool = True,
               cpu_only: bool = False) -> tuple[dict[str, Any] | None, str]:
    """The job's step bound over the selected steps (``TraceAnalysis.get_job_step_bound``)
    and ``""``, or None and why there is none."""
    from hta.report.sections_whatif import step_bound_note

    if cpu_only:
        return None, "no GPU work: the replay's GPU changes do not apply"
    note = step_bound_note(analyzer, len(analyzer.t.get_ranks()), iterations)
    if note:
        return None, note
    if not wanted:
        return None, ("not computed (pass --step-bound to replay the job and see which rank "
                      "and which work bound its step)")
    try:
        bound = analyzer.get_job_step_bound(iterations)
    except Exception as exc:  # noqa: BLE001 - one analysis must not sink the summary
        logger.warning("step bound failed: %s", exc, exc_info=True)
        return None, f"the replay failed: {type(exc).__name__}: {exc}"
    return (bound, "") if bound is not None else (None, "the replay found no step to bound")


def print_step_bound(out: Printer, bound: dict[str, Any] | None, note: str,
                     n_ranks: int) -> None:
    """The two lines (a job of several ranks with steps), else one line saying why not
    (several ranks: no steps, or how to ask for it), else nothing."""
    from hta.report.sections_whatif import bound_lines

    if bound is None:
        if n_ranks > 1 and note and not note.startswith(UNSAID):
            out.line(printable(f"What bounds the step: {note}."))
            out.line()
        return
    first, second = bound_lines(bound)
    out.line(printable(first), style="bold")
    out.line(printable(second))
    out.line()


__all__ = ["add_step_bound_option", "print_step_bound", "step_bound"]
