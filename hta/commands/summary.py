"""``hta summary DIR``: the job at a glance, findings first, then tables per rank.

Prints, for the selected ranks and steps: first the top :data:`FINDINGS_SHOWN` findings
(:meth:`hta.trace_analysis.TraceAnalysis.get_findings`: what slows the job down, one line
each with severity, estimated saving and ranks; every finding in ``--json``), what they
explain of each rank's idle and exposed time and the longest unexplained stretch
(:meth:`~hta.trace_analysis.TraceAnalysis.get_findings_coverage`; ``--json``:
``findings_coverage`` and ``unexplained_time``), the coverage notes, then GPU
time per rank (step time, GPU span, compute,
exposed communication and memory, idle, communication overlapped by computation), idle
time by cause, launch queue length and copies per rank, the top kernels with their spread
across ranks, the spread of the main figures across ranks and the slowest rank; on a job
of several ranks with steps, with ``--step-bound``, which rank and which work bound the
job's step and the step with that rank alone at the median, with the replay's error
(:mod:`hta.commands.summary_bound`; ``--json``: ``step_bound``, ``step_bound_note``); on a
job of several ranks, why ranks are late at the collectives and the pipeline's bubbles per
stage (:mod:`hta.commands.summary_distributed`; ``--json``: ``straggler_causes``,
``pipeline``). Every number is defined in :mod:`hta.report.overview`. Tables and colour on
a terminal, aligned plain text when piped, ``--json`` for machines.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hta.analysis.display_names import DISPLAY_WIDTH
from hta.commands.args_and_output import (
    EXIT_OK,
    Column,
    Printer,
    UsageError,
    add_load_options,
    dumps,
    finite,
    parse_ranks,
    records,
    report_skipped,
)
from hta.commands.cluster import add_cluster_options, load
from hta.commands.load_warnings import load_warnings, print_load_warnings
from hta.commands.missing_ranks import report_missing_ranks
from hta.commands.summary_bound import (
    add_step_bound_option,
    print_step_bound,
    step_bound,
)
from hta.commands.summary_distributed import (
    distributed_json,
    distributed_tables,
    print_distributed,
)
from hta.commands.summary_perf import add_device_option, device_arg, hardware, hardware_json
from hta.commands.summary_perf import print_hardware as print_hardware_efficiency
from hta.report.devices import device_name
from hta.report.present import (
    display_name,
    finding_range,
    finding_saving,
    finding_share,
    finding_what,
    full_text,
    metric_label,
    ms,
    number,
    printable,
    ranges_text,
    ranks_text,
    slowest_rank_text,
    time_text,
    together_text,
)

if TYPE_CHECKING:
    import pandas as pd

    from hta.report.analyzer import Analyzer
    from hta.report.overview import JobOverview

NAME_WIDTH = 70
#: Findings printed before the per-rank tables (``--json`` has them all).
FINDINGS_SHOWN = 5
HIGH_IDLE_PCTG = 25.0
HIGH_SPREAD_PCTG = 10.0
#: Ranks in the coverage table (the least explained first; ``--json`` has them all).
COVERAGE_SHOWN = 8


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "summary", help="per-rank overview of a job's traces",
        description="Load every rank in DIR and print, per rank: step time, GPU time "
                    "(compute, exposed communication and memory, idle), communication "
                    "overlapped by computation, idle time by cause, launch queue length and "
                    "copies; then the top kernels, the spread across ranks and the slowest "
                    "rank. Times in ms (µs in --json).",
    )
    p.add_argument("trace_dir", metavar="DIR", help="folder of trace files, or one file")
    p.add_argument("--iterations", metavar="LIST",
                   help="ProfilerStep numbers to analyse, e.g. 2-4 (default: the whole trace)")
    p.add_argument("--top", type=_count, default=10, metavar="N",
                   help="kernels to list (default 10; 0 for none)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_device_option(p)
    add_step_bound_option(p)
    replay = p.add_mutually_exclusive_group()
    replay.add_argument("--no-replay", action="store_true",
                        help="keep the findings rules' own savings (GPU time) instead of "
                             "replaying each finding's fix (faster on large jobs)")
    replay.add_argument("--replay", action="store_true",
                        help="replay each finding's fix even on a job of over 4M events "
                             "not on Dask (the default then keeps the rules' savings)")
    add_load_options(p, quiet_help="no progress bar, no load warnings and no missing-ranks "
                                   "warning")
    add_cluster_options(p)
    p.set_defaults(func=run)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def selected_iterations(analyzer: Analyzer, text: str | None) -> list[int] | None:
    """``--iterations`` as a list, checked against the steps of the loaded ranks."""
    from hta.model.selection import step_table

    wanted = parse_ranks(text, "--iterations")
    if wanted is None:
        return None
    steps = sorted(step_table(analyzer.t)["step"].unique().tolist())
    if not set(wanted) & set(steps):
        have = f"its steps are {ranges_text(steps)}" if steps else "it has no ProfilerStep"
        raise UsageError(f"--iterations {text}: no such ProfilerStep in {analyzer.trace_dir}; "
                         f"{have}")
    return wanted


def run(args: argparse.Namespace) -> int:
    """Load the job and print the overview."""
    from hta.model.selection import Selection, resolve
    from hta.report.answers import job_answers
    from hta.report.sections_whatif import replay_uncertainty_rows, uncertainty_note

    device = device_arg(args.device)
    analyzer = load(args)
    iterations = selected_iterations(analyzer, args.iterations)
    selection = resolve(Selection.of(None, iterations), analyzer.t)  # once, for every answer
    answers = job_answers(analyzer, selection, args.top, device,
                          replay=False if args.no_replay else True if args.replay else None)
    overview, found = answers.overview, answers.findings
    unclassified = answers.unclassified
    n_unclassified = int(unclassified["name"].nunique()) if len(unclassified) else 0
    findings, coverage, unexplained = found.findings, found.coverage, found.unexplained
    efficiency = hardware(answers.op_summary, answers.category_time, is_cpu_only(overview))
    bound, bound_note = step_bound(analyzer, iterations, args.step_bound,
                                   efficiency.cpu_only)
    distributed = distributed_tables(analyzer, iterations,
                                     replay=not (args.no_replay or answers.replay_note))
    if args.json:
        payload = {"trace_dir": args.trace_dir, "iterations": iterations}
        payload.update(finite(overview.to_dict()))
        payload["rank_summary"] = records(answers.rank_summary)
        payload["skipped"] = analyzer.skipped
        payload["cpu_only"] = efficiency.cpu_only
        payload["missing_ranks"] = analyzer.missing_ranks
        payload["unclassified_kernels"] = n_unclassified
        payload["findings"] = records(findings)
        payload["findings_together"] = records(answers.together)[0] \
            if answers.together is not None and len(answers.together) else None
        payload["hardware_efficiency"] = hardware_json(efficiency)
        payload["findings_coverage"] = records(coverage)
        payload["unexplained_time"] = records(unexplained)
        payload["load_warnings"] = load_warnings(analyzer)
        capture = capture_merge(analyzer)
        payload["capture_merge"] = records(capture) if capture is not None else None
        payload["step_bound"] = bound
        payload["step_bound_note"] = bound_note
        replayed = not (args.no_replay or answers.replay_note or efficiency.cpu_only)
        payload["replay_uncertainty"] = replay_uncertainty_rows(analyzer) if replayed \
            else None
        payload["replay_note"] = answers.replay_note
        payload.update(distributed_json(distributed))
        print(dumps(payload))
        report_missing_ranks(analyzer, quiet=args.quiet)
        return EXIT_OK
    out = Printer()
    note = answers.replay_note or (None if args.no_replay or efficiency.cpu_only
                                   else uncertainty_note(analyzer))
    print_overview(out, analyzer, overview, args.trace_dir, iterations, findings,
                   (coverage, unexplained, n_unclassified), replay_note=note,
                   together=answers.together)
    print_step_bound(out, bound, bound_note, len(overview.ranks))
    print_distributed(out, analyzer, iterations, distributed)
    print_hardware_efficiency(out, efficiency)
    print_capture_merge(out, capture_merge(analyzer))
    report_skipped(analyzer)
    report_missing_ranks(analyzer, quiet=args.quiet)
    if not args.quiet:
        print_load_warnings(analyzer, verbose=getattr(args, "verbose", False))
    return EXIT_OK


def print_findings(out: Printer, findings: pd.DataFrame | None, top: int = FINDINGS_SHOWN,
                   together: pd.DataFrame | None = None) -> None:
    """The ``top`` findings, one line each: severity, saving, share, ranks, title; then
    what the replayed fixes save at once (``together``, when it has a row)."""
    if findings is None:
        return
    if not len(findings):
        from hta.analysis.findings.engine import DEFAULT_MIN_SHARE

        out.line("Findings: none (no rule found a problem worth "
                 f"{100 * DEFAULT_MIN_SHARE:g}% of the analysed time).")
        out.line()
        return
    shown = findings.head(top).to_dict("records")
    more = f"top {len(shown)} of {len(findings)}" if len(findings) > len(shown) else \
        f"{len(shown)}"
    out.table(f"Findings ({more}, largest saving first: the time the steps would lose with "
              "the fix, replayed; GPU: GPU time, the fix cannot be replayed; details: hta "
              "report, TraceAnalysis.get_findings())", [
        Column("severity", lambda r: r["severity"], numeric=False, style=_severity_style),
        Column("saving (ms)", finding_saving),
        Column("range (ms)", finding_range),
        Column("% of time", finding_share),
        Column("ranks", lambda r: ranks_text(r["ranks"], labelled=False), numeric=False),
        Column("finding", lambda r: full_text(finding_what(r)), numeric=False, wrap=True),
    ], shown)
    if together is not None and len(together):
        out.line(full_text(together_text(together.iloc[0].to_dict()), 600))
    for r in findings[findings["rule"] == "warmup"].head(1).to_dict("records"):
        out.line(full_text(f"Warm-up (one-time, not a saving): {r['evidence']}", 1200),
                 style="yellow")


def _severity_style(row: dict[str, Any]) -> str | None:
    return {"high": "red", "medium": "yellow"}.get(row["severity"])


def _header(meta: dict[str, Any], ranks: pd.DataFrame, trace_dir: str,
            iterations: list[int] | None) -> str:
    """The job's one-line header: folder, ranks, device, events, steps."""
    head = f"Job: {trace_dir}  ranks: {len(ranks)}"
    if meta.get("world_size"):
        head += f" of world size {meta['world_size']}"
    device = device_name(meta)
    if device:
        head += f"  device: {printable(device, NAME_WIDTH)}"
    head += f"  events: {int(ranks['events'].sum()):,}"
    if iterations is not None:
        head += f"  steps: {ranges_text(iterations)}"
    return head


def print_coverage(out: Printer, coverage: pd.DataFrame | None,
                   unexplained: pd.DataFrame | None,
                   n_unclassified: int = 0) -> None:
    """What the findings explain per rank (the least explained first, at most
    :data:`COVERAGE_SHOWN` ranks), each rank's note, and the unknown kernel kinds note."""
    if coverage is None or not len(coverage):
        return
    rows = coverage.sort_values(["explained_pctg", "rank"], na_position="first",
                                kind="stable").head(COVERAGE_SHOWN).to_dict("records")
    longest: dict[int, dict[str, Any]] = {}
    for p in (unexplained.to_dict("records") if unexplained is not None else []):
        longest.setdefault(int(p["rank"]), p)
    more = f", the {len(rows)} least explained of {len(coverage)}" \
        if len(coverage) > len(rows) else ""
    if rows[0].get("window"):
        others = " (each rank's: --json findings_coverage.window)" if len(coverage) > 1 else ""
        out.line(printable(f"Findings describe, rank {rows[0]['rank']}: {rows[0]['window']}"
                           f"{others}", 400))
        if rows[0].get("idle_causes"):
            out.line(printable(f"Idle time by cause, rank {rows[0]['rank']}: "
                               f"{rows[0]['idle_causes']}", 400))
    out.table(f"What the findings explain of the time the GPU does not compute (ms{more})", [
        Column("rank", lambda r: str(r["rank"])),
        Column("idle + exposed", lambda r: ms(r["not_computing(us)"])),
        Column("idle % of window", lambda r: number(r["idle_pctg"]), style=_flag_style),
        Column("explained %", lambda r: number(r["explained_pctg"])),
        Column("idle explained %", lambda r: number(r["idle_explained_pctg"])),
        Column("unexplained", lambda r: ms(r["unexplained(us)"])),
        Column("longest unexplained (CPU meanwhile)", lambda r: _longest(
            longest.get(int(r["rank"]))), numeric=False, wrap=True),
    ], [dict(r, _flag=bool(r["note"])) for r in rows])
    noted = [r for r in coverage.to_dict("records") if r["note"]]
    for r in noted[:COVERAGE_SHOWN]:
        out.line(printable(f"rank {r['rank']}: {r['note']}", 400), style="yellow")
    if len(noted) > COVERAGE_SHOWN:
        out.line(f"... and {len(noted) - COVERAGE_SHOWN} more rank(s) with unexplained idle "
                 "time (TraceAnalysis.get_findings_coverage(), --json).", style="yellow")
    # The analysis decides when unknown kinds matter (its NOTE_SHARE); a few unknown
    # names under that share are listed by --json and get_unclassified_kernels() only.
    worst = coverage.sort_values("unclassified_pctg", ascending=False).iloc[0]
    if worst["unclassified_note"]:
        out.line(f"Coverage note: {n_unclassified} kernel name(s) match no kind rule "
                 f"(up to {number(worst['unclassified_pctg'])}% of the GPU busy time, rank "
                 f"{int(worst['rank'])}) and count as computation: a gap of the kind rules, "
                 "not a problem of the job; list them with "
                 "TraceAnalysis.get_unclassified_kernels().", style="yellow")
    out.line()


def _longest(piece: dict[str, Any] | None) -> str:
    if piece is None:
        return "-"
    step = f"step {piece['step']}" if piece["step"] >= 0 else "no step"
    cpu = piece["cpu"].split(", ")[0] if piece["cpu"] else "no CPU event"
    return full_text(f"{time_text(piece['dur(us)'])} {piece['gpu']}, {step} ({cpu})")


def _flag_style(row: dict[str, Any]) -> str | None:
    return "yellow" if row.get("_flag") else None


def print_overview(out: Printer, analyzer: Analyzer, overview: JobOverview, trace_dir: str,
                   iterations: list[int] | None, findings: pd.DataFrame | None = None,
                   coverage: tuple[pd.DataFrame, pd.DataFrame, int] | None = None,
                   replay_note: str | None = None,
                   together: pd.DataFrame | None = None) -> None:
    """The header line, the top findings (with the sentence on their replay, when
    given, and on the replayed fixes at once, ``together``) and their coverage (when
    given) and the four tables."""
    ranks = overview.ranks
    out.line(_header(analyzer.metadata(), ranks, trace_dir, iterations), style="bold")
    out.line()
    print_findings(out, findings, together=together)
    if replay_note and findings is not None and len(findings):
        out.line(printable(replay_note, 600), style="yellow")
        out.line()
    rows = ranks.to_dict("records")
    if is_cpu_only(overview):
        print_cpu_only(out, rows)
        return
    if coverage is not None:
        print_coverage(out, *coverage)
    slowest = overview.job.get("slowest_rank")

    def mark(row: dict[str, Any]) -> str | None:
        return "bold" if row["rank"] == slowest and len(rows) > 1 else None

    def idle_style(row: dict[str, Any]) -> str | None:
        v = row["idle_time_pctg"]
        return "yellow" if isinstance(v, float) and v >= HIGH_IDLE_PCTG else None

    window = (f"the selected steps {ranges_text(iterations)}" if iterations else
              "each rank's whole trace, first GPU work to last; per step: hta diff")
    out.table(f"GPU time per rank (ms; % of the GPU span: {window})", [
        Column("rank", lambda r: str(r["rank"])),
        Column("steps", lambda r: str(r["steps"])),
        Column("step (ms)", lambda r: ms(r["step_time_mean(us)"])),
        Column("GPU span (ms)", lambda r: ms(r["kernel_time(us)"])),
        Column("compute %", lambda r: number(r["compute_time_pctg"])),
        Column("exposed comm %", lambda r: number(r["exposed_comm_time_pctg"])),
        Column("exposed memory %", lambda r: number(r["exposed_memory_time_pctg"])),
        Column("idle %", lambda r: number(r["idle_time_pctg"]), style=idle_style),
        Column("comm overlapped %", lambda r: number(r["comp_comm_overlap_pctg"])
               if r["overlap_note"] == "" else r["overlap_note"]),
    ], rows, mark)
    out.table("Why the GPU is idle (GPU idle: no stream busy, the idle % above; causes: "
              "shares of the streams' idle gaps, adding up to 100%), launch queue, copies", [
        Column("rank", lambda r: str(r["rank"])),
        Column("GPU idle (ms)", lambda r: ms(r["idle_time(us)"])),
        Column("host wait %", lambda r: number(idle_share(r, "host_wait(us)"))),
        Column("kernel wait %", lambda r: number(idle_share(r, "kernel_wait(us)"))),
        Column("other %", lambda r: number(idle_share(r, "other_idle(us)"))),
        Column("queue mean", lambda r: number(r["queue_length_mean"])),
        Column("queue max", lambda r: number(r["queue_length_max"], 0)),
        Column("copies", lambda r: f"{r['memcpy_count']:,}"),
        Column("copied (MB)", lambda r: number(r["memcpy_bytes"] / 1e6)),
        Column("memsets", lambda r: f"{r['memset_count']:,}"),
    ], rows, mark)
    print_top_kernels(out, overview, len(rows))
    print_spread(out, overview, len(rows))


def print_top_kernels(out: Printer, overview: JobOverview, n_ranks: int) -> None:
    """The top kernels with their spread across ranks (no spread columns on one rank)."""
    kernels = overview.top_kernels.to_dict("records")
    if kernels:
        across = [  # the spread across ranks: nothing to say on one rank
            Column("rank means (µs)", lambda r: f"{number(r['rank_mean_min(us)'])}"
                   f"–{number(r['rank_mean_max(us)'])}"),
            Column("slowest rank", lambda r: str(r["slowest_rank"])),
            Column("spread %", lambda r: number(r["spread_pctg"]), style=_spread_style),
        ] if n_ranks > 1 else []
        out.table(f"Top {len(kernels)} kernels (all selected ranks)", [
            Column("#", lambda r: str(r["_i"])),
            Column("total (ms)", lambda r: ms(r["total(us)"])),
            Column("share %", lambda r: number(r["share_pctg"])),
            Column("count", lambda r: f"{r['count']:,}"),
            Column("mean (µs)", lambda r: number(r["mean(us)"])),
            *across,
            Column("type", lambda r: _kernel_type(r["kernel_type"]), numeric=False),
            Column("name", lambda r: full_text(display_name(str(r["name"]), DISPLAY_WIDTH)),
                   numeric=False,
                   wrap=True),
        ], [dict(r, _i=i) for i, r in enumerate(kernels, start=1)])


def print_spread(out: Printer, overview: JobOverview, n_ranks: int) -> None:
    """The spread of the main figures across ranks and the slowest rank (several ranks)."""
    if n_ranks > 1 and len(overview.spread):
        out.table("Spread across ranks (ms)", [
            Column("metric", lambda r: metric_label(r["metric"]), numeric=False),
            Column("min", lambda r: ms(r["min"])),
            Column("rank", lambda r: str(r["min_rank"])),
            Column("max", lambda r: ms(r["max"])),
            Column("rank", lambda r: str(r["max_rank"])),
            Column("mean", lambda r: ms(r["mean"])),
            Column("spread %", lambda r: number(r["spread_pctg"]), style=_spread_style),
        ], overview.spread.to_dict("records"))
    job = overview.job
    line = slowest_rank_text(job)
    if line is not None and n_ranks > 1:
        out.line(line, style="bold")


def capture_merge(analyzer: Analyzer) -> pd.DataFrame | None:
    """Per rank, how much graph-replayed kernel time found its operator in the capture
    traces (``TraceAnalysis.get_capture_summary``), or ``None`` when the trace folder has
    no ``capture_traces/`` folder."""
    from pathlib import Path

    if not analyzer.trace_dir or not (Path(analyzer.trace_dir) / "capture_traces").is_dir():
        return None
    return analyzer.merge_capture_traces()  # done once already by the answers: kept


def print_capture_merge(out: Printer, summary: pd.DataFrame | None) -> None:
    """One line: graph replays, how many matched a capture, and the share of their kernel
    time that found its operator (and so its FLOPs)."""
    if summary is None:
        return
    if not len(summary):
        out.line("Graph capture traces: capture_traces/ is there, but no kernel of these "
                 "traces was replayed from a CUDA/HIP graph.", style="yellow")
        return
    total = float(summary["replay_time(us)"].sum())
    found = float(summary["with_op_time(us)"].sum())
    share = 100.0 * found / total if total else 0.0
    out.line(f"Graph replays: {int(summary['matched_replays'].sum()):,} of "
             f"{int(summary['replays'].sum()):,} matched a capture in capture_traces/; "
             f"{share:.1f}% of the replayed kernel time ({time_text(total)}) found its "
             f"operator (GEMM {float(summary['gemm_gflop'].sum()):,.3f} GFLOP), and counts "
             "with it in the operator tables and findings above (get_op_performance: "
             "captured)",
             style=None if share >= 90 else "yellow")


#: Short labels of the kernel types in the top-kernels table (the column stays narrow so
#: the kernel names fit beside it on an 80-column terminal).
KERNEL_TYPE_LABELS = {"communication": "comm", "computation": "compute", "memory": "memory"}


def _kernel_type(kernel_type: str) -> str:
    label = str(kernel_type).lower()
    return KERNEL_TYPE_LABELS.get(label, label)


def is_cpu_only(overview: JobOverview) -> bool:
    """True when no selected rank has GPU work (kernels, copies, memsets): a CPU-only
    profile, where GPU time, idle time and kernels do not apply."""
    ranks = overview.ranks
    return bool(len(ranks)) and int(ranks["gpu_events"].sum()) == 0


def print_cpu_only(out: Printer, rows: list[dict[str, Any]]) -> None:
    """A CPU-only job: what the GPU tables would say does not apply; steps and events."""
    out.line("No GPU work in these traces (a CPU-only profile): GPU time, idle time, "
             "launches and kernels do not apply; step times are the host's.", style="yellow")
    out.line()
    out.table("Steps per rank", [
        Column("rank", lambda r: str(r["rank"])),
        Column("events", lambda r: f"{r['events']:,}"),
        Column("steps", lambda r: str(r["steps"])),
        Column("step (ms)", lambda r: ms(r["step_time_mean(us)"])),
    ], rows)


IDLE_CAUSES = ("host_wait(us)", "kernel_wait(us)", "other_idle(us)")


def idle_share(row: dict[str, Any], cause: str) -> float:
    """One cause's share (%) of a rank's stream idle gaps (summed over streams); the three
    causes add up to 100. NaN without idle gaps."""
    total = sum(float(row[c]) for c in IDLE_CAUSES)
    return 100.0 * float(row[cause]) / total if total > 0 else float("nan")


def _spread_style(row: dict[str, Any]) -> str | None:
    v = row["spread_pctg"]
    return "red" if isinstance(v, float) and v >= HIGH_SPREAD_PCTG else None


__all__ = ["add_parser", "print_coverage", "print_findings", "print_overview", "run",
           "selected_iterations"]
