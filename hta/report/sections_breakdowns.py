"""Report sections on where the GPU time goes: the job at a glance, temporal breakdown,
idle time, kernels, overlap, user annotations. Each ``name(ctx, section)`` fills its
:class:`~hta.report.context.Section` in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from hta.model.runner import run
from hta.report.context import Context, Figure, Section, doc
from hta.report.present import slowest_rank_text

#: The overview's per-rank table, in three parts that fit the page (title, columns).
PER_RANK_TABLES = [
    ("Per rank: GPU time (µs)", [
        "rank", "events", "gpu_events", "steps", "step_time_mean(us)", "kernel_time(us)",
        "busy_time(us)", "compute_time(us)", "exposed_comm_time(us)",
        "exposed_memory_time(us)", "idle_time(us)", "memory_time(us)"]),
    ("Per rank: shares of the GPU span (%)", [
        "rank", "compute_time_pctg", "exposed_comm_time_pctg", "exposed_memory_time_pctg",
        "idle_time_pctg", "comp_comm_overlap_pctg", "overlap_note"]),
    ("Per rank: idle time by cause (µs), launch queue, copies", [
        "rank", "host_wait(us)", "kernel_wait(us)", "other_idle(us)", "queue_length_mean",
        "queue_length_max", "memcpy_count", "memcpy_bytes", "memset_count"]),
]


#: The temporal breakdown's shares drawn as distributions across ranks (column: label).
TEMPORAL_SHARES = {"compute_time_pctg": "compute", "exposed_comm_time_pctg":
                   "exposed communication", "exposed_memory_time_pctg": "exposed memory",
                   "idle_time_pctg": "idle"}


#: The overview's idle time by cause (µs, summed over a rank's streams) drawn as
#: distributions across ranks (column: label).
IDLE_CAUSES = {"host_wait(us)": "host wait", "kernel_wait(us)": "kernel wait",
               "other_idle(us)": "other"}


def distribution(ctx: Context, df: pd.DataFrame, labels: dict[str, str], title: str,
                 unit: str) -> Figure:
    """The distribution across every selected rank of ``df``'s columns ``labels`` (one
    row per rank), the ranks drawn elsewhere marked with why: a job of many ranks reads
    at a glance, and the figure weighs the same at any rank count."""
    from hta.analysis.rank_distribution import rank_distribution
    from hta.plots.distribution import rank_distribution_figure

    metrics = [m for m in labels if m in df]
    drawn = ctx.drawn_rows(df)
    marked = pd.DataFrame(
        [{"rank": int(r), "metric": m, "value": float(v), "why": ", ".join(ctx.drawn[r])}
         for m in metrics for r, v in zip(drawn["rank"], drawn[m], strict=True)
         if int(r) in ctx.drawn and pd.notna(v)],
        columns=["rank", "metric", "value", "why"])
    return ctx.figure(rank_distribution_figure(rank_distribution(df, metrics), marked,
                                               labels, title, unit))


def rank_figures(ctx: Context, s: Section, df: pd.DataFrame, by: str, value: str,
                 what: str, unit: str, figure: Callable[[pd.DataFrame], Any],
                 fill: float | None = 0.0, how: str = "sum") -> None:
    """A per-rank table's figures: when some ranks are not drawn, first the distribution
    of its ``value`` by ``by`` across every rank (:func:`distribution_by`, titled
    ``what`` across the ranks), then ``figure`` of the drawn ranks' rows."""
    if not ctx.all_drawn:
        s.figures.append(distribution_by(
            ctx, df, by, value, f"{what} across the {len(ctx.ranks)} ranks", unit, fill, how))
    s.figures.append(ctx.figure(figure(ctx.drawn_rows(df))))


def distribution_by(ctx: Context, df: pd.DataFrame, by: str, value: str, title: str,
                    unit: str, fill: float | None = 0.0, how: str = "sum") -> Figure:
    """:func:`distribution` of a long table (rows per rank and ``by``): one box per value
    of ``by``, of each rank's ``value`` (its rows' ``how``: ``"sum"``, or ``"first"`` for
    one row each; ``fill`` for a rank without that ``by``, ``None``: the rank is left out
    of that box, as is a missing value)."""
    wide = df.pivot_table(index="rank", columns=by, values=value, aggfunc=how,
                          fill_value=fill).reset_index()
    return distribution(ctx, wide, {c: str(c) for c in wide.columns if c != "rank"}, title,
                        unit)


def overview(ctx: Context, s: Section) -> None:
    from hta.report import overview

    ov = ctx.overview
    s.definitions = doc(overview)
    s.source = "hta.report.overview.job_overview"
    slowest = slowest_rank_text(ov.job)
    if slowest is not None and len(ctx.ranks) > 1:
        s.notes.append(f"{slowest}.")
    for title, columns in PER_RANK_TABLES:
        s.tables.append(ctx.table(ov.ranks, title, columns=columns))
    if len(ov.spread):
        s.tables.append(ctx.table(ov.spread, "Spread across ranks (µs)"))
    if len(ov.top_kernels):
        s.tables.append(ctx.table(ov.top_kernels, "Top kernels over the selected ranks"))


def temporal(ctx: Context, s: Section) -> None:
    from hta.analysis import temporal
    from hta.plots.temporal import temporal_breakdown_figure

    s.definitions, s.source = doc(temporal), "hta.analysis.temporal.temporal_breakdown_detail"
    df = ctx.overview.details["temporal"]
    if not (df["kernel_time(us)"] > 0).any():
        s.notes.append("No GPU work (kernels, memcpy, memset) in the selection.")
        s.tables.append(ctx.table(df, "Per rank"))
        return
    if not ctx.all_drawn:
        s.figures.append(distribution(
            ctx, df, TEMPORAL_SHARES, f"GPU time shares across the {len(ctx.ranks)} ranks "
            "(% of each rank's GPU time span)", "share of GPU time span (%)"))
    s.figures.append(ctx.figure(temporal_breakdown_figure(ctx.drawn_rows(df))))
    s.tables.append(ctx.table(df, "Per rank"))
    work, drawn = temporal.TEMPORAL_BREAKDOWN_DETAIL.planned(ctx.drawn_selection,
                                                             per_iteration=True)
    per_step = run(ctx.trace, [work], drawn, description="Temporal breakdown per step")[0]
    if per_step["iteration"].nunique() > 1:
        s.figures.append(ctx.figure(temporal_breakdown_figure(per_step)))
        s.tables.append(ctx.table(per_step, "Per rank and step"))
    if note := ctx.drawn_note("get_temporal_breakdown(ranks={ranks})",
                              "the distribution and the per-rank table cover every rank, "
                              "the per-step table the ranks drawn"):
        s.notes.append(note)


def idle(ctx: Context, s: Section) -> None:
    from hta.analysis import idle
    from hta.plots.idle import idle_time_breakdown_figure

    s.definitions, s.source = doc(idle), "hta.analysis.idle.idle_time_breakdown"
    df = ctx.overview.details["idle"]
    if df.empty or df["idle_intervals"].sum() == 0:
        s.notes.append("No GPU stream in the selection has a gap between two GPU events.")
        if len(df):
            s.tables.append(ctx.table(df, "Idle time per rank, stream and cause"))
        return
    if not ctx.all_drawn:
        s.figures.append(distribution(
            ctx, ctx.overview.ranks, IDLE_CAUSES,
            f"GPU idle time by cause across the {len(ctx.ranks)} ranks (µs, all streams)",
            "idle time (µs)"))
    s.figures.append(ctx.figure(idle_time_breakdown_figure(ctx.drawn_rows(df), pctg=True)))
    s.figures.append(ctx.figure(idle_time_breakdown_figure(ctx.drawn_rows(df), pctg=False)))
    if note := ctx.drawn_note("get_idle_time_breakdown(ranks={ranks})",
                              "the distribution and the table cover every rank"):
        s.notes.append(note)
    s.tables.append(ctx.table(df, "Idle time per rank, stream and cause (idle_time in µs)"))
    # the gaps' statistics computed where each rank is: only they come back, not every gap
    stats = idle.idle_time_breakdown_and_stats(ctx.trace, ctx.selection,
                                               show_idle_interval_stats=True)[1]
    if stats is not None:
        s.tables.append(ctx.table(stats, "Idle interval statistics (µs)"))


def kernels(ctx: Context, s: Section) -> None:
    from hta.analysis import kernels
    from hta.plots.kernels import kernel_duration_figure, kernel_pies_figure, kernel_type_figure

    s.definitions, s.source = doc(kernels), "hta.analysis.kernels.gpu_kernel_breakdown"
    types = kernels.kernel_type_breakdown(ctx.trace, ctx.selection, by_rank=True)
    table = kernels.kernel_breakdown(ctx.trace, ctx.selection)
    if types.empty:
        s.notes.append("No GPU kernels, copies or memsets in the selection.")
        return
    rank_figures(ctx, s, types, "kernel_type", "percentage", "GPU busy time by kernel type",
                 "share of the rank's GPU busy time (%)", kernel_type_figure)
    drawn = ctx.drawn_rows(table)
    for kind in table["kernel_type"].unique():
        s.figures.append(ctx.figure(kernel_pies_figure(drawn, kind)))
        s.figures.append(ctx.figure(kernel_duration_figure(drawn, kind)))
    if note := ctx.drawn_note("get_gpu_kernel_breakdown(ranks={ranks})",
                              "the distribution and the tables cover every rank"):
        s.notes.append(note)
    s.tables.append(ctx.table(types, "GPU busy time by kernel type, per rank (sum in µs)"))
    s.tables.append(ctx.table(table, "Top kernels per rank (durations in µs)",
                             max_rows=200))


def overlap(ctx: Context, s: Section) -> None:
    from hta.analysis import overlap
    from hta.plots.overlap import comm_comp_overlap_figure

    s.definitions, s.source = doc(overlap), "hta.analysis.overlap.comm_comp_overlap"
    df = ctx.overview.details["overlap"]
    if df["comm_time(us)"].gt(0).any():
        if not ctx.all_drawn:
            s.figures.append(distribution(
                ctx, df[df["comm_time(us)"] > 0],
                {"comp_comm_overlap_pctg": "communication overlapped"},
                f"Communication overlapped by computation across the {len(ctx.ranks)} ranks",
                "share of communication time (%)"))
        s.figures.append(ctx.figure(comm_comp_overlap_figure(ctx.drawn_rows(df))))
        if note := ctx.drawn_note("get_comm_comp_overlap(ranks={ranks})",
                                  "the distribution and the table cover every rank"):
            s.notes.append(note)
    else:
        s.notes.append("No rank has communication in the selection: nothing to overlap.")
    s.tables.append(ctx.table(df, "Per rank"))


def user_annotations(ctx: Context, s: Section) -> None:
    from hta.analysis import annotations
    from hta.plots.annotations import user_annotation_duration_figure, user_annotation_figure

    s.definitions = doc(annotations)
    s.source = "hta.analysis.annotations.user_annotation_breakdown"
    for gpu, label in ((True, "GPU annotations (gpu_user_annotation)"),
                       (False, "CPU annotations (user_annotation)")):
        df = annotations.user_annotation_breakdown(ctx.trace, ctx.selection,
                                                   use_gpu_annotation=gpu)
        if len(df):
            s.intro = f"Time per annotation name, from the {label}."
            s.figures.append(ctx.figure(user_annotation_figure(ctx.drawn_rows(df))))
            s.figures.append(ctx.figure(user_annotation_duration_figure(ctx.drawn_rows(df))))
            if note := ctx.drawn_note("get_gpu_user_annotation_breakdown(ranks={ranks})"):
                s.notes.append(note)
            s.tables.append(ctx.table(df, f"{label}: durations (µs)"))
            return
    s.notes.append("The selection has no user annotations (record_function ranges).")


__all__ = ["overview", "temporal", "idle", "kernels", "overlap", "user_annotations"]
