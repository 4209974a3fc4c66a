"""The step-bound lines of ``hta summary``: which rank and which work bound the job's step,
the step with that rank alone at the median across ranks, and the replay's error
(:mod:`hta.report.sections_whatif`; figures of
:func:`hta.analysis.whatif.jobpath.job_step_bound`). Jobs of two or more ranks with
``ProfilerStep`` only, and only with ``--step-bound``: the replay adds a third to the
summary's time on a job of 8 ranks of 100k events (``docs/analyses/whatif.md``). With it,
the findings whose fix the replay says would save (almost) nothing are named
(:func:`contradicted_line`)."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from hta.commands.args_and_output import Printer
from hta.report.present import finding_what, printable

if TYPE_CHECKING:
    import pandas as pd

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
                        "shows it); also replays each finding's fix and names the findings "
                        "whose fix would save (almost) no step time")


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


#: A finding's replayed saving under this share of the rule's own is called contradicted.
CONTRADICTED = 0.1


def replayed_findings(analyzer: Analyzer, iterations: list[int] | None
                      ) -> pd.DataFrame | None:
    """The findings with each fix's replayed saving (``TraceAnalysis.
    get_findings_what_if``), or None when the replay fails (the summary goes on)."""
    try:
        return analyzer.get_findings_what_if(iterations=iterations)
    except Exception as exc:  # noqa: BLE001 - one analysis must not sink the summary
        logger.warning("replayed findings failed: %s", exc, exc_info=True)
        return None


def contradicted_line(findings: pd.DataFrame, replayed: pd.DataFrame | None,
                      shown: int) -> str | None:
    """One line naming the ``shown`` first findings whose fix, replayed, saves under
    :data:`CONTRADICTED` of what the rule estimates; None when there is none."""
    if replayed is None or not len(findings):
        return None
    by_key = {(r["rule"], r["subject"]): r for r in replayed.to_dict("records")
              if r["saving_source"] == "replay"}
    named = []
    for row in findings.head(shown).to_dict("records"):
        twin = by_key.get((row["rule"], row["subject"]))
        rule_us = float(row["est_saving(us)"])
        if twin is None or rule_us <= 0:
            continue
        replay_us = max(float(twin["est_saving(us)"]), 0.0)
        if replay_us < CONTRADICTED * rule_us:
            named.append(f"'{finding_what(row)}' ({twin['change']}: {replay_us / 1e3:,.3f} ms "
                         f"replayed against {rule_us / 1e3:,.3f} ms)")
    if not named:
        return None
    return ("Replayed, the fixes of " + "; ".join(named) + " save (almost) no "
            "step time: something else bounds the steps ('hta whatif DIR CHANGE' shows "
            "what), so those savings are the rules' own estimates, not time the steps "
            "would lose.")


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


__all__ = ["add_step_bound_option", "contradicted_line", "print_step_bound",
           "replayed_findings", "step_bound"]
