"""The "Hardware efficiency" report section: GPU time by category, the roofline, the
operators with the most time and their % of peak. ``hardware(ctx, section)`` fills its
:class:`~hta.report.context.Section` in place."""

from __future__ import annotations

import pandas as pd

from hta.model.runner import run_one
from hta.model.selection import Selection
from hta.report.context import Context, Section, doc
from hta.report.sections_breakdowns import rank_figures

OPS_SHOWN = 30
#: % of the roof above which a row is flagged: beyond rounding and timer jitter, a call
#: cannot beat its roof.
OVER_ROOF_PCT = 102.0
SUMMARY_COLUMNS = ["rank", "op", "category", "input_dims", "calls", "kernel_time(us)",
                   "tflops_per_s", "tb_per_s", "flops_per_byte", "bound", "pct_of_peak"]


def hardware(ctx: Context, s: Section) -> None:
    """Category split, roofline of the first selected rank, top operators."""
    from hta.analysis.perf import op_performance as perf
    from hta.analysis.perf.roofline import roof_curves, roofs_of
    from hta.model.devices import match_device
    from hta.plots.roofline import category_time_figure, roofline_figure

    s.definitions, s.source = doc(perf), "hta.analysis.perf.op_performance.op_performance"
    rules = ctx.analyzer.rules
    # Per rank where the ranks are, with the overview and the findings (one visit of
    # each rank); only the per-rank tables travel.
    cats = ctx.answers.category_time
    if cats.empty:
        s.notes.append("No GPU work in the selection.")
        return
    rank_figures(ctx, s, cats, "category", "share(%)", "GPU time by category",
                 "share of the rank's GPU time (%)", category_time_figure)
    if drawn := ctx.drawn_note("get_op_performance(ranks={ranks})",
                               "the distribution and the table cover every rank"):
        s.notes.append(drawn)
    s.tables.append(ctx.table(cats, "GPU time by category"))
    summary = ctx.answers.op_summary
    if not len(summary) or not (summary["input_dims"] != "").any():
        s.notes.append("No operator shapes were recorded, so no FLOPs, bytes or % of peak: "
                       "profile with torch.profiler.profile(record_shapes=True).")
        return
    first = ctx.ranks[0]
    device = next((d for d in map(match_device, ctx.trace.meta(first).get(
        "device_properties") or []) if d is not None), None)
    if device is None:
        s.notes.append("The device is not in the peak table (hta.model.devices): % of peak "
                       "is not computed; name one with get_op_performance(device=...).")
    else:
        mine = run_one(ctx.trace, perf.OP_PERFORMANCE.work(rules=rules),
                       Selection.of([first], ctx.iterations))
        modelled = summary[(summary["rank"] == first) & summary["flops"].notna()]
        s.figures.append(ctx.figure(roofline_figure(
            modelled, roof_curves(device, roofs_of(mine)), f"{device.name}, rank {first}")))
    columns = SUMMARY_COLUMNS
    if "captured" in summary and summary["captured"].any():  # a capture merge (issue 26)
        columns = [*SUMMARY_COLUMNS, "captured"]
        s.notes.append("Rows with captured true are graph-replayed operator calls found in "
                       "the capture traces (capture_traces/): their operator and shapes "
                       "are the capture's, their kernels and time the replay's.")
    note = over_roof_note(summary)
    if note:
        s.notes.append(note)
    s.tables.append(ctx.table(summary[columns].head(OPS_SHOWN),
                             "Operators and shapes with the most GPU time, and their % of "
                             "the roof", max_rows=OPS_SHOWN))
    # ---- Collective bandwidth (issue 20, item 5) --------------------------------------
    # The collectives' bus bandwidth against the link (get_collective_performance) is
    # added here by the collectives work: its figure and table append to this section.


def over_roof_note(summary: pd.DataFrame) -> str | None:
    """The warning for operator rows above :data:`OVER_ROOF_PCT` of their roof (None when
    there is none): a call cannot beat its roof, so what was guessed was wrong."""
    over = summary[summary["pct_of_peak"] > OVER_ROOF_PCT]
    if not len(over):
        return None
    worst = over.loc[over["pct_of_peak"].idxmax()]
    return (f"{len(over)} operator row(s) run above 100% of their roof (up to "
            f"{worst['pct_of_peak']:.0f}%: {worst['op']} {worst['input_dims']}): no call can "
            "beat its roof, so its dtype (e.g. TF32 or bf16 read as fp32), its FLOP count or "
            "the device's peak was guessed wrong; read its % of the roof as unknown.")
