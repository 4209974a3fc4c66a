"""The collective-bandwidth part of the report: bus bandwidth against message size, the
summary per collective and message size, and the calls farthest below the link.

:func:`collective_bandwidth` fills a :class:`~hta.report.context.Section` in place, like
every section builder; it can be a section of its own or part of another (it only
appends figures, tables and notes, and sets the definitions when none are set).
"""

from __future__ import annotations

import numpy as np

from hta.report.context import Context, Section, doc, table_of

#: Columns of the slowest-calls table.
CALL_COLUMNS = ["rank", "collective", "process_group", "group_size", "dtype", "msg_bytes",
                "time(us)", "busbw(GB/s)", "exposed(us)", "iteration", "launch_op", "kernel"]


def collective_bandwidth(ctx: Context, s: Section) -> None:
    """Collective performance of the selection: figure, summary and the slowest calls."""
    from hta.analysis import collectives
    from hta.analysis.findings.collective_bw import MIN_MSG_BYTES, RANK_LINK
    from hta.plots.collectives import collective_bandwidth_figure

    if not s.definitions:
        s.definitions = doc(collectives)
        s.source = "hta.analysis.collectives.collective_performance"
    perf = ctx.analyzer.get_collective_performance(ctx.ranks, ctx.iterations)
    if not len(perf):
        s.notes.append("No communication kernel in the selection.")
        return
    sized = np.isfinite(perf["msg_bytes"].to_numpy(float))
    summary = table_of(collectives.collective_summary(perf),
                       "Per collective, process group and message size")
    if not sized.any():
        s.notes.append("No communication kernel carries a message size (collective args), "
                       "so no bandwidth is shown, only the calls and their times; recent "
                       "PyTorch versions record the sizes on record_param_comms with the "
                       "NCCL process group (profile with record_shapes=True).")
        s.tables.append(summary)
        return
    links = RANK_LINK.run(ctx.trace, ctx.selection)
    known = links.dropna(subset=["link_gbps"])
    link_gbps = float(known["link_gbps"].iloc[0]) if len(known) else None
    link = str(known["link"].iloc[0]) if len(known) else ""
    s.figures.append(ctx.figure(collective_bandwidth_figure(
        ctx.drawn_rows(perf), link_gbps, link)))
    if note := ctx.drawn_note("get_collective_performance(ranks={ranks}, visualize=True)",
                              "the tables cover every rank"):
        s.notes.append(note)
    if link:
        s.notes.append(f"Dashed line: {link}, {link_gbps:,.0f} GB/s per direction, between "
                       "the GPUs of one node (hta.analysis.interconnect).")
    s.tables.append(summary)
    big = perf[perf["msg_bytes"] >= MIN_MSG_BYTES]
    if len(big):
        slow = big.nsmallest(20, "busbw(GB/s)")
        s.tables.append(ctx.table(slow, f"Lowest bus bandwidth among calls of "
                                 f"{MIN_MSG_BYTES >> 20} MiB or more", columns=CALL_COLUMNS))
