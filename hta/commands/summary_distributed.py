"""The distributed lines of ``hta summary``: why ranks are late at the collectives
(``TraceAnalysis.get_straggler_causes``, definitions in :mod:`hta.analysis.straggler_causes`)
and where each pipeline stage idles (``get_pipeline_bubbles(per="step")`` averaged per
stage by :func:`hta.analysis.pipeline_bubbles.stage_means`, definitions in
:mod:`hta.analysis.pipeline`). Jobs of two or more ranks only; ``--json``:
``straggler_causes`` and ``pipeline`` (``null`` for one rank).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from hta.commands.args_and_output import Column, Printer, records
from hta.report.present import ms, number, ranges_text

if TYPE_CHECKING:
    import pandas as pd

    from hta.report.analyzer import Analyzer

logger = logging.getLogger(__name__)

#: Rows of the causes table (the most held first; ``--json`` has them all).
CAUSES_SHOWN = 10
#: The line printed when a job of several ranks with collectives has no late rank.
NO_LATE_RANK = "No rank holds the others up above the job's noise."
#: How the table says each measure (:data:`hta.analysis.straggler_causes.CAUSE_MEASURE`).
SAID = {"compute": "GPU compute", "idle": "GPU idle", "transfer": "transfer"}

Tables = tuple["pd.DataFrame | None", "pd.DataFrame | None"]


def distributed_tables(analyzer: Analyzer, iterations: list[int] | None,
                       replay: bool) -> Tables:
    """The straggler causes (``replay``: their cost from the what-if replay) and the
    pipeline's per-stage means over the selected steps; ``(None, None)`` for a job of one
    rank. An analysis that fails logs a warning and gives ``None``: one analysis must
    not sink the summary."""
    if len(analyzer.t.get_ranks()) < 2:
        return None, None
    causes = stages = None
    try:
        causes = analyzer.get_straggler_causes(iterations=iterations, replay=replay)
    except Exception as exc:  # noqa: BLE001 - one analysis must not sink the summary
        logger.warning("straggler causes failed: %s", exc, exc_info=True)
    try:
        from hta.analysis.pipeline_bubbles import stage_means

        stages = stage_means(analyzer.get_pipeline_bubbles(iterations=iterations,
                                                           per="step"))
    except Exception as exc:  # noqa: BLE001 - one analysis must not sink the summary
        logger.warning("pipeline bubbles failed: %s", exc, exc_info=True)
    return causes, stages


def distributed_json(tables: Tables) -> dict[str, Any]:
    """``straggler_causes`` and ``pipeline`` of ``--json``: records, or ``None``."""
    causes, stages = tables
    return {"straggler_causes": records(causes) if causes is not None else None,
            "pipeline": records(stages) if stages is not None else None}


def has_collectives(analyzer: Analyzer, iterations: list[int] | None) -> bool:
    """Whether the selected steps hold a collective matched on two ranks or more
    (send/recv left out): the causes' analysis had something to judge."""
    try:
        arrivals = analyzer.get_collective_arrivals(None, iterations)
    except Exception as exc:  # noqa: BLE001 - then nothing is said about it
        logger.warning("collective arrivals failed: %s", exc, exc_info=True)
        return False
    from hta.analysis.stragglers import matched_collectives

    return bool(len(matched_collectives(arrivals)))


def print_distributed(out: Printer, analyzer: Analyzer, iterations: list[int] | None,
                      tables: Tables) -> None:
    """The causes table (or the line saying no rank is late, on a job of several ranks
    with collectives) and the pipeline table."""
    causes, stages = tables
    if causes is not None and not len(causes) and has_collectives(analyzer, iterations):
        out.line(NO_LATE_RANK)
        out.line()
    print_straggler_causes(out, causes)
    print_pipeline(out, stages)


def steps_text(steps: Any) -> str:
    """Steps compactly: ``0-3``, ``1, 4``."""
    return ranges_text(int(s) for s in steps).replace(",", ", ")


def evidence_text(row: dict[str, Any]) -> str:
    """``GPU compute 6.239 ms/step vs median 4.800`` (the measure the cause names); ``-``
    for an unexplained cause."""
    from hta.analysis.straggler_causes import CAUSE_MEASURE

    m = CAUSE_MEASURE.get(str(row["cause"]))
    if m is None:
        return "-"
    return f"{SAID[m]} {ms(row[f'{m}(us)'])} ms/step vs median {ms(row[f'median_{m}(us)'])}"


def _change(row: dict[str, Any]) -> str:
    """The replay's change of a row (``""``: none)."""
    change = row.get("change")
    return change if isinstance(change, str) else ""


def print_straggler_causes(out: Printer, causes: pd.DataFrame | None) -> None:
    """The table "Why ranks are late": per late rank and cause, its steps, whether it
    recurs, the time it held the others up, the cost (with the replay's change when
    there is one) and the evidence against the median rank; nothing when empty."""
    if causes is None or not len(causes):
        return
    rows = causes.head(CAUSES_SHOWN).to_dict("records")
    more = f"top {len(rows)} of {len(causes)}, " if len(causes) > len(rows) else ""
    changes = [Column("change", lambda r: _change(r) or "-", numeric=False)] \
        if any(_change(r) for r in rows) else []
    out.table(f"Why ranks are late ({more}the most held first; held: how long it started "
              "its collectives after every other rank, summed over its steps; cost: the "
              "steps' gain with the change, replayed, else held; details: hta report, "
              "TraceAnalysis.get_straggler_causes())", [
        Column("rank", lambda r: str(r["rank"])),
        Column("cause", lambda r: str(r["cause"]), numeric=False),
        Column("steps", lambda r: steps_text(r["steps"]), numeric=False),
        Column("recurring", lambda r: "yes" if r["recurring"] else "no", numeric=False),
        Column("held (ms)", lambda r: ms(r["held(us)"])),
        Column("cost (ms)", lambda r: ms(r["cost(us)"])),
        *changes,
        Column("evidence", evidence_text, numeric=False, wrap=True),
    ], rows)


def print_pipeline(out: Printer, stages: pd.DataFrame | None) -> None:
    """The table "Pipeline bubbles (per step, mean)": per stage, the schedule, the
    bubble, its share of the window, the theory, and the wait and transfer of its
    send/recv; nothing without a pipeline."""
    if stages is None or not len(stages):
        return
    several = int(stages["pipeline"].nunique()) > 1
    first = [Column("pipeline", lambda r: str(r["pipeline"]))] if several else []
    out.table("Pipeline bubbles (per step, mean; bubble: the step's window without "
              "computation on the stage; theory: (stages - 1) / chunks x its computation "
              "per micro-batch; wait: its send/recv waiting for the peer; details: hta "
              "report, TraceAnalysis.get_pipeline_bubbles())", [
        *first,
        Column("stage", lambda r: str(r["stage"])),
        Column("rank", lambda r: str(r["rank"])),
        Column("schedule", lambda r: str(r["schedule"]), numeric=False),
        Column("bubble (ms)", lambda r: ms(r["bubble(us)"])),
        Column("% of window", lambda r: number(r["bubble_pctg"])),
        Column("theory (ms)", lambda r: ms(r["bubble_theory(us)"])),
        Column("wait (ms)", lambda r: ms(r["wait(us)"])),
        Column("transfer (ms)", lambda r: ms(r["transfer(us)"])),
    ], stages.to_dict("records"))


__all__ = ["distributed_json", "distributed_tables", "has_collectives", "print_distributed",
           "print_pipeline", "print_straggler_causes"]
