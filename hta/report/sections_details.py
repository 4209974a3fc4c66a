"""Report sections on the host side and the details: kernel launches, launch queue,
memory bandwidth, operators, critical path, unclassified kernels. Each
``name(ctx, section)`` fills its :class:`~hta.report.context.Section` in place."""

from __future__ import annotations

from typing import Any

from hta.model.selection import Selection
from hta.report.context import (
    Context,
    Section,
    doc,
    line_limit,
    thin,
    thinned_note,
)
from hta.report.present import time_text
from hta.report.sections_breakdowns import rank_figures


def launch(ctx: Context, s: Section) -> None:
    from hta.analysis import launch
    from hta.model.runner import run
    from hta.plots.launch import launch_histogram_figure

    s.definitions, s.source = doc(launch), "hta.analysis.launch.cuda_kernel_launch_stats"
    # One visit of each rank; only the pairing counts and per-rank histograms of the
    # flagged launches travel back (the counts per rank are the histograms' sums).
    hist, pairing = run(ctx.trace, [
        launch.FLAGGED_HISTOGRAMS.work(launch.RUNTIME_CUTOFF_US, launch.LAUNCH_DELAY_CUTOFF_US),
        launch.LAUNCH_PAIRING.work()], ctx.selection, description="Kernel launches")
    paired = (sorted(int(r) for r in pairing.loc[pairing["paired_gpu_events"] > 0, "rank"])
              if len(pairing) else [])
    if paired:
        flags = launch.flag_counts(hist, paired)
        if len(hist):
            s.figures.append(ctx.figure(launch_histogram_figure(
                ctx.drawn_rows(hist), launch.RUNTIME_CUTOFF_US,
                launch.LAUNCH_DELAY_CUTOFF_US)))
            if note := ctx.drawn_note("get_cuda_kernel_launch_stats(ranks={ranks})",
                                      "the tables cover every rank"):
                s.notes.append(note)
        else:
            s.notes.append(
                f"No launch is flagged: no GPU work shorter than its launch call, no launch "
                f"call over {launch.RUNTIME_CUTOFF_US} µs, no launch delay over "
                f"{launch.LAUNCH_DELAY_CUTOFF_US} µs.")
        s.tables.append(ctx.table(flags, "Flagged launches per rank (counts)"))
    else:
        s.notes.append("No launch call was paired with GPU work in the selection.")
    s.tables.append(ctx.table(pairing, "Pairing of launch calls and GPU events"))


def queue(ctx: Context, s: Section) -> None:
    from hta.analysis import queue
    from hta.model.runner import run
    from hta.plots.queue import queue_length_figure

    s.definitions, s.source = doc(queue), "hta.analysis.queue.queue_length_summary"
    # The statistics in one visit of each rank (its series computed once there), then
    # the figure's rows thinned where the ranks are: no rank's whole series travels.
    summary, blocked = run(ctx.trace, [
        queue.QUEUE_SUMMARY.work(),
        queue.BLOCKED_ON_FULL_QUEUE.work(queue.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM)],
                           ctx.selection, description="Queue length")
    if summary.empty:
        s.notes.append("No launches paired with GPU work: no queue to show.")
        return
    # The figure's lines: the drawn ranks' streams only, thinned where the ranks are.
    limit = line_limit(int(summary["rank"].isin(ctx.drawn_ranks).sum()))
    shown, thinned = queue.thinned_queue_series(ctx.trace, ctx.drawn_selection,
                                                max_points_per_line=limit)
    if thinned:
        s.notes.append(thinned_note(limit))
    s.figures.append(ctx.figure(queue_length_figure(shown)))
    if note := ctx.drawn_note("get_queue_length_time_series(ranks={ranks}, visualize=True)",
                              "the tables cover every rank"):
        s.notes.append(note)
    s.tables.append(ctx.table(summary, "Queue length per rank and stream (time-weighted)"))
    s.tables.append(ctx.table(blocked, "Time with a full queue (>= "
                             f"{queue.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM} entries)"))


def bandwidth(ctx: Context, s: Section) -> None:
    from hta.analysis import bandwidth
    from hta.plots.bandwidth import memory_bw_figure, memory_bw_summary_figure

    s.definitions, s.source = doc(bandwidth), "hta.analysis.bandwidth.memory_bw_summary"
    if ctx.all_drawn:  # one visit: every copy comes back, for the figures and the table
        copies = bandwidth.memory_copies(ctx.trace, ctx.selection)
        summary = bandwidth.bw_summary(copies)
    else:  # the statistics where each rank is; the copies of the drawn ranks only
        summary = bandwidth.MEMORY_BW_SUMMARY_OF_STEPS.run(ctx.trace, ctx.selection)
        copies = bandwidth.memory_copies(ctx.trace, ctx.drawn_selection) \
            if len(summary) else summary
    if summary.empty:
        s.notes.append("No memcpy or memset in the selection.")
        return
    # Over time: the drawn ranks' copies only.
    series = bandwidth.memory_bw_time_series(
        ctx.trace, ctx.drawn_selection.every_event(), copies=copies)
    shown, note = thin(series, ["rank", "pid", "name"], ["memory_bw_gbps"])
    if note:
        s.notes.append(note)
    rank_figures(ctx, s, summary, "name", "p50_bw_gbps", "Median per-copy bandwidth",
                 "bandwidth (GB/s)", memory_bw_summary_figure, fill=None, how="first")
    s.figures.append(ctx.figure(memory_bw_figure(shown)))
    if note := ctx.drawn_note("get_memory_bw_time_series(ranks={ranks}, visualize=True)",
                              "the distribution and the table cover every rank"):
        s.notes.append(note)
    s.tables.append(ctx.table(summary, "Per rank and direction"))


def operators(ctx: Context, s: Section) -> None:
    from hta.analysis import operators
    from hta.plots.operators import operator_breakdown_figure

    s.definitions, s.source = doc(operators), "hta.analysis.operators.operator_breakdown"
    df = operators.operator_breakdown(ctx.trace, ctx.selection)
    if df.empty:
        s.notes.append("No CPU operators in the selection.")
        return
    s.figures.append(ctx.figure(operator_breakdown_figure(
        ctx.drawn_rows(df), max_rows=20)))
    if note := ctx.drawn_note("get_operator_breakdown(ranks={ranks}, visualize=True)",
                              "the table holds every rank's operators (its first rows)"):
        s.notes.append(note)
    s.tables.append(ctx.table(df, "Operators, GPU time first", max_rows=100))


def critical_path(ctx: Context, s: Section) -> None:
    from hta.analysis import critical_path as cp
    from hta.plots.critical_path import critical_path_figure

    rank = ctx.critical_path_rank if ctx.critical_path_rank is not None else ctx.ranks[0]
    s.definitions, s.source = doc(cp), "hta.analysis.critical_path.critical_path_analysis"
    rt = ctx.trace.rank(rank)
    steps = ctx.iterations
    annotation: str | None = "ProfilerStep"
    instance: Any = None
    if not rt.events["iteration"].gt(0).any():
        annotation = None
    elif steps is not None:
        from hta.model.selection import step_table

        spans = step_table(ctx.trace, Selection.of(rank)).reset_index(drop=True)
        chosen = spans.index[spans["step"].isin(steps)]
        if len(chosen):
            instance = (int(chosen.min()), int(chosen.max()))
    graph, path = cp.critical_path_analysis(rt, annotation, instance)
    bounds, events = cp.critical_path_summary(path)
    where = graph.annotation or "whole trace"
    s.intro = (f"Rank {rank}, {where}: the path is "
               f"{time_text(graph.path_length_ns / 1e3, unit='µs')} long in a "
               f"{time_text(graph.span_ns / 1e3, unit='µs')} window.")
    s.figures.append(ctx.figure(critical_path_figure(
        bounds, events, 15, title=f"Critical path of rank {rank}, {where}")))
    s.tables.append(ctx.table(bounds, "Time on the critical path per bound type"))
    s.tables.append(ctx.table(events, "Events on the critical path", max_rows=30))


def unclassified(ctx: Context, s: Section) -> None:
    s.source = "TraceAnalysis.get_unclassified_kernels"
    df = ctx.answers.unclassified
    if df.empty:
        s.notes.append("Every GPU kernel matched a kind rule.")
        return
    s.intro = ("These kernels matched no rule of the event-kind table and count as "
               "computation. If one is communication, add a Rule(\"communication\", name=...) "
               "through TraceAnalysis(kind_rules=...).")
    s.tables.append(ctx.table(df, "Unclassified kernels"))


__all__ = ["launch", "queue", "bandwidth", "operators", "critical_path", "unclassified"]
