"""What bounds the job's step, from the what-if replay: the report section and the lines
``hta summary`` prints.

The figures are :func:`hta.analysis.whatif.jobpath.job_step_bound`'s (through
``TraceAnalysis.get_job_step_bound`` and ``get_step_bounds``): the rank holding the most
time of the job's critical path in the replay, the work on that path by kind and its
largest piece, the job's step if that rank alone ran its GPU work between collectives at
the median across ranks (``no-stragglers:RANK``), and, beside every prediction, the
replay's error against the measured steps. Shown for jobs of two or more ranks with
``ProfilerStep``; every loaded rank is replayed (collectives couple them).
"""

from __future__ import annotations

import logging
from typing import Any

from hta.report.analyzer import Analyzer
from hta.report.context import Context, Section
from hta.report.present import display_name, time_text

#: Characters of the top work's name in the lines (the report's table keeps it whole).
NAME_WIDTH = 80


def bound_lines(bound: dict[str, Any], name_width: int = NAME_WIDTH) -> list[str]:
    """Two sentences: which rank and which work bound the step; the step with that rank
    at the median, with the replay's error."""
    steps = bound["steps"]
    n = len(steps)
    where = f"{n} step{'s' if n != 1 else ''}"
    rank = bound["rank"]
    often = "" if bound["rank_steps"] == n else \
        f" on {bound['rank_steps']} of {n} steps; also rank" \
        f"{'s' if len(bound['other_ranks']) > 1 else ''} " \
        f"{', '.join(str(r) for r in bound['other_ranks'])}"
    kind, _, name = str(bound["top_work"]).partition(": ")
    top = display_name(name, name_width)
    first = (f"What bounds the step (the job's critical path in the replay, {where}): rank "
             f"{rank}{often}: {bound['work_shares']}; top: {kind} {top} "
             f"({time_text(bound['top_work(us)'])} a step).")
    replayed, med = bound["replayed(us)"], bound["at_median(us)"]
    change = 100.0 * (med - replayed) / replayed if replayed > 0 else 0.0
    second = (f"With rank {rank} alone at the median across ranks ({bound['change']}): step "
              f"{time_text(med)} against {time_text(replayed)} replayed ({change:+.1f}%; measured "
              f"{time_text(bound['measured(us)'])}). Replay error per rank and step (replayed vs "
              f"measured): median {bound['replay_error_median_pctg']:.2f}%, worst "
              f"{bound['replay_error_worst_pctg']:.2f}%; modelled, without the trace's own "
              f"waits: median {bound['modelled_error_median_pctg']:.2f}%, worst "
              f"{bound['modelled_error_worst_pctg']:.2f}%.")
    return [first, second]


def step_bound_note(analyzer: Analyzer, n_ranks: int, iterations: list[int] | None) -> str:
    """Why there is no step bound to show (``""``: there is one)."""
    if n_ranks < 2:
        return "one rank: no other rank to bound the job's step"
    from hta.model.selection import step_table

    steps = step_table(analyzer.t)["step"].unique().tolist()
    if not steps:
        return ("no ProfilerStep in the traces: no step to bound (hta whatif replays the "
                "whole trace)")
    if iterations is not None and not set(steps) & set(iterations):
        return "no selected ProfilerStep"
    return ""


def step_bound(ctx: Context, s: Section) -> None:
    """The section: the two sentences, the per-step table and its definitions."""
    from hta.analysis.whatif import jobpath

    s.definitions = __doc__.strip() + "\n\n" + (jobpath.job_step_bound.__doc__ or "")
    s.source = "TraceAnalysis.get_job_step_bound, get_step_bounds"
    n_ranks = len(ctx.trace.get_ranks())
    note = step_bound_note(ctx.analyzer, n_ranks, ctx.iterations)
    if note:
        s.notes.append(note[0].upper() + note[1:] + ".")
        return
    from hta.report.answers import replay_fits

    fits, why = replay_fits(ctx.analyzer, ctx.overview)
    if not fits:  # the summary's rule: a job too big to replay in this process
        s.notes.append("Not computed: " + why.split(": ", 1)[-1].replace(
            "or ask with --replay", "or call TraceAnalysis.get_job_step_bound()"))
        return
    bound = ctx.analyzer.get_job_step_bound(ctx.iterations)
    if bound is None:
        s.notes.append("The replay found no step to bound.")
        return
    first, second = bound_lines(bound, name_width=120)
    s.intro = first
    s.notes.append(second)
    if len(ctx.ranks) < n_ranks:
        s.notes.append(f"Every loaded rank ({n_ranks}) is replayed, not only the selected "
                       "ones: collectives couple them.")
    table = ctx.analyzer.get_step_bounds(ctx.iterations).rename(
        columns={"top_work(us)": "top_work_time(us)"})
    s.tables.append(ctx.table(table, "Per step (times in µs)", columns=[
        "step", "rank", "measured(us)", "replayed(us)", "replay_error_pctg",
        "modelled_error_pctg", "work_shares", "top_work", "top_work_time(us)",
        "at_median(us)", "saving_at_median(us)"]))

__all__ = ["bound_lines", "step_bound", "step_bound_note"]


def replay_uncertainty_rows(analyzer: Analyzer) -> list[dict[str, Any]] | None:
    """Per rank, what the replay behind the findings' savings guesses
    (``TraceAnalysis.get_replay_uncertainty``); None when it fails (logged: the summary
    and the report go on without it)."""
    try:
        return analyzer.get_replay_uncertainty().to_dict("records")
    except Exception as exc:  # noqa: BLE001 - one analysis must not sink the others
        logging.getLogger(__name__).warning("replay uncertainty failed: %s", exc,
                                            exc_info=True)
        return None


def uncertainty_note(analyzer: Analyzer) -> str | None:
    """The sentence saying the replay behind the savings is uncertain, and why
    (:func:`hta.analysis.whatif.uncertainty.uncertainty_line`); None when it is not, or
    cannot be told."""
    import pandas as pd

    from hta.analysis.whatif.uncertainty import COLUMNS, uncertainty_line

    rows = replay_uncertainty_rows(analyzer)
    return None if rows is None else uncertainty_line(pd.DataFrame(rows, columns=COLUMNS))

