"""``hta whatif DIR CHANGE ...``: the predicted step time after a change.

Replays the job from its traces (:meth:`hta.trace_analysis.TraceAnalysis.what_if`) and
prints, per step, the measured job step (slowest rank), the replay of the unchanged trace
and its error (the model's honesty figure), and the prediction with the changes applied in
order; what bounds each step (the rank and the work with the most time on the job's
critical path, and the job's step were that rank at the median across ranks); then the
per-rank table. Changes: ``kernels:PATTERN*F``, ``category:NAME*F``,
``no-stragglers[:RANK]``, ``no-launch-overhead``, ``overlap-comm``, ``no-host-sync``,
``no-data-loader`` (definitions in ``docs/analyses/whatif.md``). ``--json`` prints the
table as records. With ``--scheduler``/``--scheduler-file`` the ranks are loaded on a Dask
cluster and each replays where it lives (only the collectives' times travel).
"""

from __future__ import annotations

import argparse
from typing import Any

from hta.commands.args_and_output import (
    EXIT_OK,
    Column,
    Printer,
    UsageError,
    add_load_options,
    dumps,
    records,
    report_skipped,
)
from hta.commands.cluster import add_cluster_options, load
from hta.report.present import ms, number, printable, time_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "whatif", help="predict the step time after a change by replaying the trace",
        description="Replay the job's dependency graph from its traces and predict each "
                    "step after the changes, e.g. 'kernels:gemm*0.5' (GEMM kernels twice "
                    "as fast), 'category:attention*0.8', 'no-stragglers' (every rank's GPU "
                    "work between collectives at the median across ranks), "
                    "'no-stragglers:RANK' (that rank alone), 'no-launch-overhead', "
                    "'overlap-comm', 'no-host-sync', 'no-data-loader', 'no-sync:SITE' (one "
                    "site of blocking calls, e.g. no-sync:aten::item), 'pinned-copies', "
                    "'workers:N' (the data loader in N workers), 'cuda-graphs', "
                    "'fused-optimizer', "
                    "'dtype:bf16|fp16|tf32' (definitions: docs/analyses/whatif.md). A "
                    "change that finds no work to change is an error (exit 2). Times in "
                    "ms (µs in --json).",
    )
    p.add_argument("trace_dir", metavar="DIR", help="folder of trace files, or one file")
    p.add_argument("changes", metavar="CHANGE", nargs="*",
                   help="changes applied in order (none: replay the trace as it is)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_load_options(p, quiet_help="no progress bar")
    add_cluster_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the job, replay it with the changes and print the prediction."""
    from hta.analysis.whatif import Change
    from hta.analysis.whatif.uncertainty import uncertainty_line
    from hta.errors import ChangeMatchesNothingError

    try:
        changes = [Change.parse(c) for c in args.changes]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    analyzer = load(args)
    _refuse_patterns_matching_nothing(analyzer, changes)
    try:
        table = analyzer.what_if(changes)
    except ChangeMatchesNothingError as exc:
        raise UsageError(str(exc)) from None
    bounds = analyzer.get_step_bounds()
    if args.json:
        print(dumps({"trace_dir": args.trace_dir, "changes": [str(c) for c in changes],
                     "rows": records(table), "step_bounds": records(bounds),
                     "replay_uncertainty": records(analyzer.get_replay_uncertainty())}))
        return EXIT_OK
    out = Printer()
    what = ", ".join(str(c) for c in changes) or "no change"
    job = table.groupby("step", as_index=False).agg(
        measured=("job_measured(us)", "first"), predicted=("job_predicted(us)", "first"),
        low=("job_predicted_low(us)", "first"), high=("job_predicted_high(us)", "first"),
        replayed=("replayed(us)", "max"))
    rows = job.to_dict("records")
    out.table(f"Job step (slowest rank), {what}", [
        Column("step", lambda r: "whole trace" if r["step"] < 0 else str(r["step"])),
        Column("measured (ms)", lambda r: ms(r["measured"])),
        Column("replayed (ms)", lambda r: ms(r["replayed"])),
        Column("predicted (ms)", lambda r: ms(r["predicted"])),
        Column("range (ms)", lambda r: f"{ms(r['low'])}-{ms(r['high'])}"),
        Column("change", lambda r: _pct(r["predicted"], r["replayed"])),
    ], rows)
    for note in _prediction_notes(analyzer, changes, table, rows):
        out.line(note, style="yellow")
    uncertain = uncertainty_line(analyzer.get_replay_uncertainty())
    if uncertain:
        out.line(printable(uncertain, 600), style="yellow")
    out.line(f"Replay error (replayed vs measured, per rank and step): median "
             f"{table['replay_error_pctg'].abs().median():.2f}%, worst "
             f"{table['replay_error_pctg'].abs().max():.2f}%; without the trace's own "
             f"waits: median {table['modelled_error_pctg'].abs().median():.2f}%, worst "
             f"{table['modelled_error_pctg'].abs().max():.2f}%.")
    out.line()
    out.table("What bounds each step (the job's critical path in the replay)", [
        Column("step", lambda r: "whole trace" if r["step"] < 0 else str(r["step"])),
        Column("rank", lambda r: str(r["rank"])),
        Column("bound by", lambda r: f"{r['bound_by']} {r['bound_share_pctg']:.0f}%",
               numeric=False),
        Column("rank at median (ms)", lambda r: ms(r["at_median(us)"])),
        Column("top work", lambda r: f"{r['top_work']} ({time_text(r['top_work(us)'])})",
               numeric=False, wrap=True),
    ], bounds.to_dict("records"))
    out.line()
    out.table("Per rank", [
        Column("rank", lambda r: str(r["rank"])),
        Column("step", lambda r: "whole trace" if r["step"] < 0 else str(r["step"])),
        Column("measured (ms)", lambda r: ms(r["measured(us)"])),
        Column("predicted (ms)", lambda r: ms(r["predicted(us)"])),
        Column("replay error (%)", lambda r: number(r["replay_error_pctg"], 2)),
    ], table.to_dict("records"))
    report_skipped(analyzer)
    return EXIT_OK


def _refuse_patterns_matching_nothing(analyzer: Any, changes: list[Any]) -> None:
    """A usage error (exit 2) for a ``kernels:PATTERN*F`` whose pattern matches no name in
    the traces: its prediction would be a silent +0.0%."""
    import re

    names = analyzer.t.symbols
    for change in changes:
        if change.kind == "kernels":
            pattern = re.compile(change.pattern)
            if not any(pattern.search(n) for n in names):
                raise UsageError(f"{change}: no name in these traces matches "
                                 f"{change.pattern!r} (a regular expression, searched); see "
                                 "the kernel names with 'hta summary'")


#: Changes that act on GPU work only.
_GPU_CHANGES = ("kernels", "category", "no-stragglers", "overlap-comm", "no-launch-overhead")
#: Under this (µs) a predicted step equals its replay.
_SAME_US = 0.5


def _prediction_notes(analyzer: Any, changes: list[Any], table: Any,
                      job_rows: list[dict[str, Any]]) -> list[str]:
    """Words for what the numbers alone do not say: a change that altered no step (and
    why), the steps together when a step got longer while the job got shorter."""
    if not changes or not len(table):
        return []
    diff = (table["predicted(us)"] - table["replayed(us)"]).abs()
    what = ", ".join(str(c) for c in changes)
    if bool((diff < _SAME_US).all()):
        summary = analyzer.get_rank_summary()
        if int(summary["gpu_events"].sum()) == 0 and all(c.kind in _GPU_CHANGES
                                                         for c in changes):
            return [f"No step changes: these traces hold no GPU work (a CPU-only profile), "
                    f"and {what} changes GPU work only."]
        return [f"No step changes: what {what} changes is on no step's critical path (or "
                "matches no work in these traces); see what bounds each step below."]
    replayed = sum(r["replayed"] for r in job_rows)
    predicted = sum(r["predicted"] for r in job_rows)
    longer = [r for r in job_rows if r["predicted"] > r["replayed"] + _SAME_US]
    notes = [f"All steps together: {ms(replayed)} ms replayed, {ms(predicted)} ms predicted "
             f"({_pct(predicted, replayed)})."]
    if longer and predicted < replayed:
        steps = ", ".join(str(r["step"]) for r in longer)
        notes.append(f"Step(s) {steps} get longer while the steps together get shorter: a "
                     "step starts earlier when the one before it ends earlier, and still "
                     "ends when what bounds it (below) ends.")
    elif longer:
        notes.append(f"The job gets slower: {what} lengthens work on the critical path "
                     "(a factor above 1, or work moved onto the path); see what bounds "
                     "each step below.")
    return notes


def _pct(new: float, old: float) -> str:
    """``new`` against ``old`` in percent, signed."""
    if old <= 0:
        return ""
    return number(100 * (new - old) / old, unit="%", signed=True)
