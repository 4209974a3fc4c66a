"""Report sections added for the first screen and issue 12: the job in one sentence, the
findings (what slows the job down and what to try), the GPU timeline, the memory timeline
and the stragglers. Each ``name(ctx, section)`` fills its
:class:`~hta.report.context.Section` in place.
"""

from __future__ import annotations

import pandas as pd

from hta.report.context import Context, FindingItem, Section, doc, thin
from hta.report.devices import device_name
from hta.report.present import (
    display_name,
    finding_saving_text,
    ranks_text,
    time_text,
    together_text,
)
from hta.report.standout import drawn_note

#: Ranks whose unexplained-idle note is written under the coverage table.
NOTES_SHOWN = 8
#: Segments in the report's timeline figure, shared by its ranks.
TIMELINE_SEGMENTS = 2_500
#: Ranks in the stragglers' upper panel (the wait each caused) when not every rank is
#: drawn: those that caused wait, at most this many (those that caused the most).
WAIT_BARS = 32
#: A merge resolution past any trace's span: each stream of a rank becomes one segment.
WHOLE_STREAM = 1 << 62



def job_sentence(ctx: Context) -> str:
    """The job in one sentence, from the overview (:mod:`hta.report.overview`): ranks,
    devices, steps and their mean time, and the GPU busy and idle shares (summed busy and
    idle time over the summed GPU span of the ranks)."""
    table = ctx.overview.ranks
    n = len(table)
    world = ctx.overview.job.get("world_size") if n else None
    parts = [f"{n} rank{'s' if n != 1 else ''}"
             + (f" of world size {world}" if world and world != n else "")]
    devices = _devices(ctx)
    if devices:
        parts[0] += f" on {devices}"
    steps = table["steps"].max() if n else 0
    mean = table["step_time_mean(us)"].astype(float).dropna()
    if steps and len(mean):
        parts.append(f"{int(steps)} step{'s' if steps != 1 else ''} of "
                     f"{time_text(float(mean.mean()))} on average")
    span = float(table["kernel_time(us)"].fillna(0).sum())
    if span > 0:
        busy = float(table["busy_time(us)"].fillna(0).sum())
        idle = float(table["idle_time(us)"].fillna(0).sum())
        parts.append(("the GPUs are" if n > 1 else "the GPU is")
                     + f" busy {100 * busy / span:.0f}% and idle {100 * idle / span:.0f}% of "
                     + ("their" if n > 1 else "its") + " span")
    else:
        parts.append("no GPU work")
    return ", ".join(parts) + "."


def _devices(ctx: Context) -> str:
    names: dict[str, int] = {}
    for r in ctx.ranks:
        name = device_name(ctx.trace.meta(r))
        if name:
            names[name] = names.get(name, 0) + 1
    return ", ".join(f"{count} × {name}" for name, count in names.items())


def findings(ctx: Context, s: Section) -> None:
    """One line per finding of :meth:`TraceAnalysis.get_findings`, each linking to the
    section holding its evidence (titled from ``ctx.section_titles``)."""
    from hta.analysis.findings import engine

    s.definitions = doc(engine)
    s.source = "TraceAnalysis.get_findings"
    df = ctx.answers.findings.findings
    if df.empty:
        s.notes.append("No rule found a problem worth "
                       f"{100 * engine.DEFAULT_MIN_SHARE:g}% of the analysed time or more.")
    else:
        _finding_items(ctx, s, df)
    together = ctx.answers.together
    if together is not None and len(together):
        s.notes.append(together_text(together.iloc[0].to_dict()))
    if ctx.answers.replay_note:
        s.notes.append(ctx.answers.replay_note)
    elif not df.empty and (df["saving_source"] == "replay").any():
        from hta.report.sections_whatif import uncertainty_note

        uncertain = uncertainty_note(ctx.analyzer)
        if uncertain:
            s.notes.append(uncertain)


def coverage(ctx: Context, s: Section) -> None:
    """What the findings explain per rank, and the longest unexplained stretches: the
    section after the findings (written packed, unlike the findings' list)."""
    from hta.analysis.findings import coverage as cov

    s.definitions = doc(cov)
    s.source = "TraceAnalysis.get_findings_coverage, get_unexplained_time"
    if ctx.answers.findings.coverage.empty:
        s.notes.append("No rank has a window the findings describe.")
        return
    coverage_tables(ctx, s)


def _finding_items(ctx: Context, s: Section, df: pd.DataFrame) -> None:
    """The findings list and table."""
    titles = ctx.section_titles
    seen: set[str] = set()
    for row in df.to_dict("records"):
        advice = str(row["advice"])
        shown_advice = "the same as above." if advice in seen else advice
        seen.add(advice)
        s.findings.append(FindingItem(
            severity=str(row["severity"]), title=str(row["title"]),
            saving=finding_saving_text(row),
            ranks=ranks_text(row["ranks"]), evidence=str(row["evidence"]),
            advice=shown_advice, section=str(row["section"]),
            section_title=titles.get(str(row["section"]), str(row["section"])),
            rule=str(row["rule"]), subject=display_name(str(row["subject"] or ""))))
    s.tables.append(ctx.table(df, "Findings table (TraceAnalysis.get_findings)",
                             columns=["rule", "severity", "ranks", "steps", "est_saving(us)",
                                      "saving_low(us)", "saving_high(us)", "saving_source",
                                      "change", "share_pctg", "subject", "section"]))


def coverage_tables(ctx: Context, s: Section) -> None:
    """Below the findings: what they explain per rank (its notes under the table, unknown
    kernel kinds included) and the longest unexplained stretches."""
    coverage = ctx.answers.findings.coverage
    if coverage.empty:
        return
    noted = [r for r in coverage.to_dict("records") if r["note"]]
    notes = [f"Rank {r['rank']}: {r['note']}" for r in noted[:NOTES_SHOWN]]
    notes.insert(0, "Findings describe{}: {window}; idle time by cause: {idle_causes}.".format(
        f" (rank {coverage['rank'].iloc[0]})" * (len(coverage) > 1), **coverage.iloc[0]))
    if len(noted) > NOTES_SHOWN:
        notes.append(f"{len(noted) - NOTES_SHOWN} more rank(s) have idle time the findings "
                     "do not explain: see the note column of get_findings_coverage().")
    kinds = coverage[coverage["unclassified_note"] != ""]
    if len(kinds):
        worst = kinds.sort_values("unclassified_pctg", ascending=False).iloc[0]
        notes.append(f"Coverage note (rank {int(worst['rank'])}"
                     + (f" and {len(kinds) - 1} more" if len(kinds) > 1 else "")
                     + f"): {worst['unclassified_note']}")
    table = ctx.table(coverage, "What the findings explain of the time the GPU does not "
                     "compute (TraceAnalysis.get_findings_coverage)", columns=[
                         "rank", "window(us)", "not_computing(us)", "idle(us)",
                         "exposed_comm(us)", "exposed_memory(us)", "explained(us)",
                         "unexplained(us)", "explained_pctg", "idle_pctg",
                         "idle_explained_pctg", "saving(us)", "unclassified_pctg"],
                     note=" ".join(notes))
    s.tables.append(table)
    pieces = ctx.answers.findings.unexplained
    if len(pieces):
        s.tables.append(ctx.table(pieces, "Longest unexplained stretches, with what the CPU "
                                 "did meanwhile (TraceAnalysis.get_unexplained_time)",
                                 columns=["rank", "step", "dur(us)", "gpu", "cpu",
                                          "annotations"]))


def timeline(ctx: Context, s: Section) -> None:
    """The GPU timeline of the drawn ranks (:attr:`Context.drawn`), and per rank and
    stream of every selected rank: its GPU events, busy time and span."""
    from hta.analysis import timeline as tl
    from hta.plots.timeline import timeline_figure

    s.definitions, s.source = doc(tl), "hta.analysis.timeline.timeline_segments"
    segments = ctx.analyzer.get_timeline_segments(ctx.drawn_ranks, ctx.iterations,
                                                  max_segments=TIMELINE_SEGMENTS)
    # Every selected rank's streams, each merged into one segment (exact events, busy
    # time and span, no search for a resolution): the table's rows.
    every = segments if ctx.all_drawn else ctx.analyzer.get_timeline_segments(
        ctx.ranks, ctx.iterations, max_segments=len(ctx.ranks), resolution_ns=WHOLE_STREAM)
    if every.empty:
        s.notes.append("No GPU work (kernels, memcpy, memset) in the selection.")
        return
    if len(segments):
        s.figures.append(ctx.figure(timeline_figure(segments)))
    if note := ctx.drawn_note("plot_timeline(ranks={ranks})"):
        s.notes.append(note)
    if tl.aggregated(segments):
        s.notes.append("Events closer than a pixel are merged into one bar (hover gives each "
                       "bar's event count); TraceAnalysis.plot_timeline(iterations=..., "
                       "streams=...) draws a part in full detail.")
    s.tables.append(ctx.table(_per_stream(every, segments), "GPU work per rank and stream",
                             columns=["rank", "stream", "events", "bars", "busy(us)",
                                      "span(us)"]))


def _per_stream(every: pd.DataFrame, drawn: pd.DataFrame) -> pd.DataFrame:
    """Per rank and stream of ``every`` (segments): events, busy time and span, and the
    bars the figure draws (from ``drawn``, the figure's segments; none for a rank not
    drawn)."""
    keys = ["rank", "stream"]
    per_stream = every.groupby(keys, sort=True).agg(
        events=("count", "sum"), busy_ns=("busy_ns", "sum"), start_ns=("start_ns", "min"),
        end_ns=("end_ns", "max")).reset_index()
    bars = drawn.groupby(keys, sort=True).size().rename("bars").reset_index()
    per_stream = per_stream.merge(bars, on=keys, how="left")
    per_stream["bars"] = per_stream["bars"].astype("Int64")
    per_stream["busy(us)"] = per_stream["busy_ns"] / 1e3
    per_stream["span(us)"] = (per_stream["end_ns"] - per_stream["start_ns"]) / 1e3
    return per_stream


def memory(ctx: Context, s: Section) -> None:
    """Allocated and reserved bytes over time of the drawn ranks (:attr:`Context.drawn`),
    and the peak of every selected rank."""
    from hta.analysis import memory as mem
    from hta.plots.memory import memory_timeline_figure

    s.definitions, s.source = doc(mem), "hta.analysis.memory.memory_summary"
    timeline_df = ctx.analyzer.get_memory_timeline(ctx.drawn_ranks)
    summary = ctx.analyzer.get_memory_summary(ctx.ranks)
    if timeline_df.empty and summary.empty:
        s.notes.append("The trace has no [memory] events: record it with "
                       "torch.profiler.profile(profile_memory=True) to see allocations.")
        return
    if len(timeline_df):
        shown, thinned = thin(timeline_df, ["rank", "device"],
                              ["total_allocated", "total_reserved"])
        s.figures.append(ctx.figure(memory_timeline_figure(shown, ctx.drawn_rows(summary))))
        if thinned:
            s.notes.append(thinned)
        if note := ctx.drawn_note("get_memory_timeline(ranks={ranks}, visualize=True)"):
            s.notes.append(note)
    if summary.empty:
        return
    shown = summary.copy()
    shown.insert(shown.columns.get_loc("peak_ts"), "peak_time (UTC)", pd.to_datetime(
        shown["peak_ts"], unit="ns", utc=True).dt.strftime("%H:%M:%S.%f"))
    s.tables.append(ctx.table(shown.drop(columns=["peak_ts"]),
                             "Peak allocation per rank and device (bytes)"))


def stragglers(ctx: Context, s: Section) -> None:
    from hta.analysis import stragglers as st
    from hta.plots.stragglers import straggler_figure

    s.definitions, s.source = doc(st), "hta.analysis.stragglers.straggler_summary"
    if len(ctx.ranks) < 2:
        s.notes.append("One rank selected: no other rank to be late against.")
        return
    arrivals = ctx.analyzer.get_collective_arrivals(ctx.ranks, ctx.iterations)
    summary = st.straggler_summary(arrivals)
    if summary.empty:
        s.notes.append("No collective was matched on two or more ranks in the selection.")
        return
    top = summary.iloc[0]
    drawn = {rank: list(reasons) for rank, reasons in ctx.drawn.items()}
    if not ctx.all_drawn and float(top["score"]) > 0:
        drawn.setdefault(int(top["rank"]), []).append("caused the most wait")
        drawn = dict(sorted(drawn.items()))
    bars = summary
    if not ctx.all_drawn:  # the ranks that caused wait, the most first
        waited = summary[summary["total_wait_caused(us)"] > 0]
        bars = waited.nlargest(WAIT_BARS, "total_wait_caused(us)") if len(waited) else \
            summary[summary["rank"].isin(list(drawn))]
    s.figures.append(ctx.figure(straggler_figure(
        bars, arrivals[arrivals["rank"].isin(list(drawn))])))
    if not ctx.all_drawn:
        waiting = int((summary["total_wait_caused(us)"] > 0).sum())
        covers = (f"the upper panel the {len(bars)} ranks that caused wait"
                  + (f" (the {WAIT_BARS} that caused the most, of {waiting})"
                     if waiting > WAIT_BARS else "")
                  + ", the tables every rank" if waiting else
                  "no rank caused wait; the tables cover every rank")
        s.notes.append(drawn_note(drawn, len(ctx.ranks), "get_collective_arrivals()",
                                  covers, "gives every rank's lags"))
    if float(top["score"]) > 0:
        s.intro = (f"Rank {int(top['rank'])} caused the most wait: "
                   f"{time_text(float(top['total_wait_caused(us)']), 1, 'µs')} over "
                   f"{int(top['late_count'])} collective(s) where it arrived last "
                   f"(score {float(top['score']):.2f}).")
    s.tables.append(ctx.table(summary, "Per rank (times in µs)"))
    worst = arrivals[arrivals["wait_caused_ns"] > 0].nlargest(20, "wait_caused_ns") \
        if len(arrivals) else pd.DataFrame()
    if len(worst):
        worst = worst.assign(**{"arrival_lag(us)": worst["arrival_lag_ns"] / 1e3,
                                "wait_caused(us)": worst["wait_caused_ns"] / 1e3})
        s.tables.append(ctx.table(worst, "Collectives that caused the most wait", columns=[
            "collective", "process_group", "name", "rank", "iteration", "arrival_lag(us)",
            "wait_caused(us)", "participants", "matched_by"]))


__all__ = ["coverage", "coverage_tables", "findings", "job_sentence", "memory", "stragglers",
           "timeline"]
