"""Report sections of a distributed job: why ranks are late at the collectives
(``TraceAnalysis.get_straggler_causes``, :mod:`hta.analysis.straggler_causes`) and where
each pipeline stage idles (``TraceAnalysis.get_pipeline_bubbles``,
:mod:`hta.analysis.pipeline`). Each ``name(ctx, section)`` fills its
:class:`~hta.report.context.Section` in place; a job of one rank, or without a late rank
or a pipeline, gets a note saying so.
"""

from __future__ import annotations

import logging

import pandas as pd

from hta.report.context import Context, Section, doc
from hta.report.present import ranges_text, time_text

logger = logging.getLogger(__name__)

#: Columns of the causes table, in the order shown.
CAUSE_TABLE = ["rank", "cause", "steps", "recurring", "held(us)", "cost(us)", "change",
               "wait_caused(us)", "lag(us)", "compute(us)", "median_compute(us)", "idle(us)",
               "median_idle(us)", "transfer(us)", "median_transfer(us)"]
#: Columns of the per-stage table, in the order shown.
STAGE_TABLE = ["pipeline", "stage", "rank", "schedule", "steps", "micro_batches",
               "window(us)", "compute(us)", "bubble(us)", "bubble_pctg", "bubble_theory(us)",
               "wait(us)", "transfer(us)"]


def _replay(ctx: Context) -> bool:
    """Whether the causes' cost is replayed: the summary's rule (a job too big to replay
    in this process keeps the measured wait)."""
    from hta.report.answers import replay_fits

    try:
        return replay_fits(ctx.analyzer, ctx.overview)[0]
    except Exception as exc:  # noqa: BLE001 - the overview's own section reports it
        logger.warning("straggler causes: no replay (the overview failed: %s)", exc)
        return False


def _has_collectives(ctx: Context) -> bool:
    """Whether a collective (send/recv left out) was matched on two ranks or more."""
    from hta.analysis.stragglers import matched_collectives

    arrivals = ctx.analyzer.get_collective_arrivals(ctx.ranks, ctx.iterations)
    return bool(len(matched_collectives(arrivals)))


def straggler_causes(ctx: Context, s: Section) -> None:
    """Why ranks are late: the figure (time each late rank held the others up, by cause),
    the table of causes with their evidence, and the definitions."""
    from hta.analysis import straggler_causes as sc
    from hta.plots.pipeline import straggler_causes_figure

    s.definitions, s.source = doc(sc), "TraceAnalysis.get_straggler_causes"
    if len(ctx.ranks) < 2:
        s.notes.append("One rank selected: no other rank to be late against.")
        return
    replay = _replay(ctx)
    causes = ctx.analyzer.get_straggler_causes(ctx.ranks, ctx.iterations, replay=replay)
    if not len(causes):
        s.notes.append("No rank held the others up above the job's noise."
                       if _has_collectives(ctx) else
                       "No collective was matched on two or more ranks in the selection.")
        return
    top = causes.iloc[0]
    s.intro = (f"Rank {int(top['rank'])} held the others up the most: {top['cause']} on "
               f"step(s) {ranges_text(int(x) for x in top['steps'])}, "
               f"{time_text(float(top['held(us)']))} in all.")
    drawn = _drawn_causes(causes)
    s.figures.append(ctx.figure(straggler_causes_figure(drawn)))
    if len(drawn) < len(causes):
        from hta.report.standout import drawn_note

        ranks = sorted(int(r) for r in drawn["rank"].unique())
        s.notes.append(drawn_note({r: ["held the others up the most"] for r in ranks},
                                  len(ctx.ranks), "get_straggler_causes()",
                                  "the table covers every late rank", "gives them all"))
    if not replay:
        s.notes.append("Cost: the measured time held (the what-if replay was not run for "
                       "this job).")
    s.tables.append(ctx.table(causes, "Per late rank and cause (times in µs; compute, idle "
                             "and transfer: means per step)", columns=CAUSE_TABLE))


def _drawn_causes(causes: pd.DataFrame) -> pd.DataFrame:
    """The rows of the late ranks the figure draws: every one, or on more than
    :data:`hta.report.standout.MAX_DRAWN_RANKS` late ranks, those that held the others
    up the most."""
    from hta.report.standout import MAX_DRAWN_RANKS

    held = causes.groupby("rank")["held(us)"].sum().sort_values(ascending=False,
                                                                 kind="stable")
    if len(held) <= MAX_DRAWN_RANKS:
        return causes
    return causes[causes["rank"].isin(held.index[:MAX_DRAWN_RANKS])]


def pipeline(ctx: Context, s: Section) -> None:
    """Pipeline bubbles: the figure (stages over time, and the bubble per stage against
    the theory), the per-stage means and the per-step table, and the definitions."""
    from hta.analysis import pipeline as pp
    from hta.analysis.pipeline_bubbles import stage_means
    from hta.plots.pipeline import pipeline_figure

    s.definitions, s.source = doc(pp), "TraceAnalysis.get_pipeline_bubbles"
    if len(ctx.ranks) < 2:
        s.notes.append("One rank selected: no pipeline (its stages are ranks that exchange "
                       "send/recv).")
        return
    steps = ctx.analyzer.get_pipeline_bubbles(ctx.ranks, ctx.iterations, per="step")
    if not len(steps):
        s.notes.append("No pipeline: no send/recv kernel was matched between two ranks of "
                       "the selection.")
        return
    means = stage_means(steps)
    s.intro = _pipeline_intro(means)
    timeline = ctx.analyzer.get_pipeline_bubbles(ctx.ranks, ctx.iterations, per="timeline")
    shown = _drawn_pipelines(means)
    if len(shown) < len(means):
        s.notes.append(f"Drawn for pipeline {int(shown['pipeline'].iloc[0])} of "
                       f"{int(means['pipeline'].nunique())}, the one with the largest bubble; "
                       "the tables cover every pipeline. TraceAnalysis.get_pipeline_bubbles("
                       "per=\"timeline\") gives every stage's intervals.")
    picked = set(shown["pipeline"].tolist())
    s.figures.append(ctx.figure(pipeline_figure(
        shown, timeline[timeline["pipeline"].isin(picked)])))
    s.tables.append(ctx.table(means, "Per stage, mean per step (times in µs)",
                             columns=STAGE_TABLE))
    s.tables.append(ctx.table(steps, "Per stage and step (times in µs)"))


def _pipeline_intro(means: pd.DataFrame) -> str:
    """One sentence: the pipelines, their schedule and the bubble's share of the window."""
    pipes = int(means["pipeline"].nunique())
    stages = int(means.groupby("pipeline")["stage"].nunique().max())
    schedules = ", ".join(sorted(set(means["schedule"].astype(str))))
    share = means["bubble_pctg"].dropna()
    idle = (f"; each stage's computation idles {share.min():.1f}-{share.max():.1f}% of the "
            "step's window" if len(share) else "")
    head = f"{pipes} pipelines of up to" if pipes > 1 else "A pipeline of"
    return f"{head} {stages} stages, schedule {schedules}{idle}."


def _drawn_pipelines(means: pd.DataFrame) -> pd.DataFrame:
    """The stages the figure draws: every pipeline, or on more than
    :data:`hta.report.standout.MAX_DRAWN_RANKS` stages in several pipelines, the pipeline
    with the largest mean bubble share."""
    from hta.report.standout import MAX_DRAWN_RANKS

    if len(means) <= MAX_DRAWN_RANKS or means["pipeline"].nunique() < 2:
        return means
    worst = means.groupby("pipeline")["bubble_pctg"].mean().fillna(0).idxmax()
    return means[means["pipeline"] == worst]


__all__ = ["pipeline", "straggler_causes"]
