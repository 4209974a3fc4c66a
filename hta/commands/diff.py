"""``hta diff CONTROL_DIR TEST_DIR``: what changed between two jobs, per step.

Prints the verdict (``step time 12.3 ms -> 10.1 ms (-17.9%)``), the findings that appeared,
disappeared or changed in saving between the two jobs
(:func:`hta.analysis.findings.compare.compare_findings`), the side-by-side summary and the
kernels and operators whose GPU time per step grew or shrank most. Definitions in
:func:`hta.analysis.diff.job_diff`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from hta.commands.args_and_output import (
    EXIT_OK,
    UsageError,
    dumps,
    finite,
    parse_ranks,
    records,
    report_skipped,
)
from hta.commands.missing_ranks import report_missing_ranks
from hta.report.present import demangled, finding_what, number, printable, time_text

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)

NAME_WIDTH = 90


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "diff", help="compare two jobs: step time, GPU time breakdowns, top changes",
        description="Load the traces in CONTROL_DIR and TEST_DIR and compare them per step: "
                    "step time, GPU time (compute, exposed communication and memory, idle), "
                    "kernel types, overlap, idle causes, the findings that appeared, "
                    "disappeared or changed in saving, and the kernels and operators whose "
                    "GPU time per step changed most.",
    )
    p.add_argument("control_dir", metavar="CONTROL_DIR", help="folder of the control traces")
    p.add_argument("test_dir", metavar="TEST_DIR", help="folder of the test traces")
    p.add_argument("--ranks", help="ranks to load and compare on both sides, e.g. 0,1 or 0-7")
    p.add_argument("--iterations", metavar="LIST",
                   help="ProfilerStep numbers to compare on both sides, e.g. 3-5 (default: "
                        "every step); compare the same steady-state steps, not warm-up")
    p.add_argument("--control-iterations", metavar="LIST",
                   help="steps of CONTROL_DIR only (instead of --iterations)")
    p.add_argument("--test-iterations", metavar="LIST", help="steps of TEST_DIR only")
    p.add_argument("--top", type=_positive, default=10, metavar="N",
                   help="regressions and improvements to list (default 10)")
    p.add_argument("--threshold", type=float, default=None, metavar="PCT",
                   help="relative change in GPU time per step below which a name counts as "
                        "unchanged (default 5)")
    p.add_argument("--short-names", action="store_true",
                   help="match kernels by short name (no template arguments, no parameters)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    p.add_argument("--strict", action="store_true",
                   help="fail on the first unreadable file instead of skipping it")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar and no missing-ranks warning")
    p.set_defaults(func=run)


def _side_iterations(args: argparse.Namespace) -> tuple[list[int] | None, list[int] | None]:
    """The steps compared on each side: ``--control-iterations``/``--test-iterations``,
    else ``--iterations`` for both, else every step (``None``)."""
    both = parse_ranks(args.iterations, "--iterations")
    control = parse_ranks(args.control_iterations, "--control-iterations")
    test = parse_ranks(args.test_iterations, "--test-iterations")
    return (control if control is not None else both, test if test is not None else both)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    """Load both jobs, compare them, print the result."""
    from hta.analysis.diff import DEFAULT_THRESHOLD_PCT, job_diff
    from hta.analysis.diff.causes import change_causes, still_there
    from hta.analysis.findings.compare import compare_findings
    from hta.trace_analysis import TraceAnalysis

    ranks = parse_ranks(args.ranks)
    loaded = [
        TraceAnalysis(trace_dir=d, ranks=ranks, cache=not args.no_cache, strict=args.strict,
                      progress=not args.quiet and sys.stderr.isatty())
        for d in (args.control_dir, args.test_dir)
    ]
    threshold = DEFAULT_THRESHOLD_PCT if args.threshold is None else args.threshold
    steps = _side_iterations(args)
    try:
        job = job_diff(loaded[0].t, loaded[1].t, use_short_name=args.short_names,
                       threshold_pct=threshold, control_iterations=steps[0],
                       test_iterations=steps[1])
    except ValueError as err:
        if steps == (None, None):
            raise
        raise UsageError(f"--iterations: {err}") from None
    control_findings = loaded[0].get_findings(iterations=steps[0])
    findings = compare_findings(control_findings, loaded[1].get_findings(iterations=steps[1]))
    causes = change_causes(loaded[0].t, loaded[1].t, steps[0], steps[1])
    findings["note"] = still_there(findings, causes)
    predictions = _predictions(loaded, control_findings, findings, steps)
    if args.json:
        payload = {"control_dir": args.control_dir, "test_dir": args.test_dir,
                   "control_ranks": loaded[0].ranks, "test_ranks": loaded[1].ranks,
                   "skipped": {"control": loaded[0].skipped, "test": loaded[1].skipped},
                   "missing_ranks": {"control": loaded[0].missing_ranks,
                                     "test": loaded[1].missing_ranks}}
        payload.update(finite(job.to_dict(top=args.top)))
        payload["findings"] = records(findings)
        payload["causes"] = records(causes)
        payload["predictions"] = records(predictions)
        print(dumps(payload))
        for analyzer in loaded:
            report_missing_ranks(analyzer, quiet=args.quiet)
        return EXIT_OK
    side = {"control": (args.control_dir, loaded[0]), "test": (args.test_dir, loaded[1])}
    for label, (path, analyzer) in side.items():
        steps = job.steps[job.steps["side"] == label]
        print(f"{label + ':':9}{path}  ranks: {len(analyzer.ranks)}  steps: "
              f"{steps['iteration'].nunique() if len(steps) else 'none'}")
    print(job.verdict)
    for note in job.notes:
        print(f"note: {note}")
    print()
    print(format_causes(causes))
    for line in format_predictions(predictions):
        print(line)
    print()
    print(format_findings(findings))
    print()
    print(format_summary(job.summary))
    for by in ("kernel", "operator"):
        for title, table in (("regressions", job.regressions(by, args.top)),
                             ("improvements", job.improvements(by, args.top))):
            print(f"\nTop {args.top} {title} by {by} (GPU time per step):")
            print(format_changes(table) if len(table) else "  none")
    for analyzer in loaded:
        report_skipped(analyzer)
        report_missing_ranks(analyzer, quiet=args.quiet)
    return EXIT_OK


#: The window each section of the diff's summary is measured over (its figures differ from
#: ``hta summary``'s, which are over each rank's whole trace).
SECTION_WINDOWS = {
    "steps": "ProfilerStep spans, mean over ranks",
    "gpu_time": "per step: each ProfilerStep its own window, mean over steps and ranks; "
                "hta summary's shares are of the whole trace's GPU span",
    "kernel_types": "the selected steps together, per step",
    "overlap": "the selected steps together",
    "stream_idle_summed_over_streams": "the selected steps, per step, summed over streams",
}


def format_summary(summary: pd.DataFrame) -> str:
    """The summary table: one metric per line under its section; times in µs per step."""
    width = max([len(printable(m)) for m in summary["metric"]] + [6]) + 2
    lines = [f"{'metric':<{width + 2}}{'control':>16}{'test':>16}{'delta':>16}{'change':>10}"]
    for section, part in summary.groupby("section", sort=False):
        window = SECTION_WINDOWS.get(str(section))
        lines.append(f"{section}" + (f"  ({window})" if window else ""))
        for row in part.to_dict("records"):
            pct = row["metric"].endswith("_pctg")
            lines.append(
                f"  {printable(row['metric']):<{width}}{number(row['control']):>16}"
                f"{number(row['test']):>16}{number(row['delta'], signed=True):>16}"
                f"{'' if pct else number(row['delta_pctg'], unit='%', signed=True):>10}")
    return "\n".join(lines)


def format_changes(table: pd.DataFrame) -> str:
    """One line per name: delta, relative change, control -> test, status, name."""
    lines = []
    for row in table.to_dict("records"):
        name = printable(demangled(row["name"]), NAME_WIDTH)
        lines.append(
            f"  {number(row['delta_time(us)'], signed=True):>14} µs "
            f"{number(row['delta_pctg'], unit='%', signed=True):>9}  "
            f"{number(row['control_time(us)']):>12} -> {number(row['test_time(us)']):<12} "
            f"{row['status']:<9} {name}")
    return "\n".join(lines)


def _predictions(loaded: list[Any], control_findings: pd.DataFrame,
                 comparison: pd.DataFrame, steps: tuple[Any, Any]) -> pd.DataFrame:
    """What the control's findings predicted against what the test job measured
    (:func:`hta.analysis.diff.causes.predicted_vs_measured`); empty when a side cannot be
    replayed (logged)."""
    from hta.analysis.diff.causes import (
        PREDICTION_COLUMNS,
        fixed_findings,
        predicted_vs_measured,
        step_times,
        with_together,
    )

    try:
        times = []
        for analyzer, chosen in zip(loaded, steps, strict=True):
            table = analyzer.what_if()
            if chosen is not None:
                table = table[table["step"].isin(chosen)]
            times.append(step_times(table))
        found = predicted_vs_measured(control_findings, comparison, times[0], times[1])
        if len(found) < 2:
            return found
        return with_together(found, loaded[0].replay().findings_together(
            fixed_findings(control_findings, found)))
    except Exception as exc:  # noqa: BLE001 - the diff goes on without the check
        import pandas

        logger.warning("the predictions could not be checked: %s", exc, exc_info=True)
        return pandas.DataFrame(columns=PREDICTION_COLUMNS)


def format_causes(causes: pd.DataFrame) -> str:
    """What changed in terms of causes, one line each (µs per step, control -> test)."""
    if causes.empty:
        return "What changed (causes): no host sync, copy or kernel changed beyond the noise."
    lines = ["What changed (causes; per step, control -> test):"]
    for r in causes.to_dict("records"):
        what = printable(r["what"], NAME_WIDTH)
        if r["cause"] == "sync":
            text = (f"host sync at {what}: {number(r['control'])} -> {number(r['test'])} "
                    f"calls, blocked {time_text(r['control(us)'])} -> "
                    f"{time_text(r['test(us)'])}")
        elif r["cause"] == "copy":
            text = (f"copies {what}: {time_text(r['control(us)'])} -> "
                    f"{time_text(r['test(us)'])}" + (f" ({r['note']})" if r["note"] else ""))
        else:
            text = (f"kernel {what}: {time_text(r['control(us)'])} -> "
                    f"{time_text(r['test(us)'])}")
        lines.append(f"  {r['verdict']:<19} {text}")
    return "\n".join(lines)


def format_predictions(predictions: pd.DataFrame) -> list[str]:
    """One line per fixed finding: predicted against measured, per step."""
    lines = []
    for r in predictions.to_dict("records"):
        measured = (f"measured {time_text(r['measured(us)'])} shorter" if
                    r["measured(us)"] >= 0 else
                    f"measured {time_text(-r['measured(us)'])} longer")
        noise = (f" (within the noise of the steps' mean, ±{time_text(2 * r['step_spread(us)'])})"
                 if r["status"] == "noise" else "")
        if r["status"] == "unchanged":
            measured = "measured no change of the step"
        lines.append(
            f"  {printable(finding_what(r), NAME_WIDTH)}: predicted "
            f"{time_text(r['predicted(us)'])} shorter a step ({time_text(r['predicted_low(us)'])}"
            f" to {time_text(r['predicted_high(us)'])}, {r['change']}), {measured}{noise}")
    if lines:
        lines.insert(0, "Predicted by the control's findings, against the test's steps:")
    return lines


def format_findings(table: pd.DataFrame) -> str:
    """The findings that appeared, disappeared or changed, one line each; the count of the
    unchanged ones."""
    if table.empty:
        return "Findings: none in either job."
    counts = table["status"].value_counts()
    head = ", ".join(f"{int(counts.get(s, 0))} {s}" for s in
                     ("appeared", "disappeared", "changed", "unchanged"))
    lines = [f"Findings ({head}; savings in µs, control -> test):"]
    for row in table[table["status"] != "unchanged"].to_dict("records"):
        what = printable(finding_what(row), NAME_WIDTH)
        severity = row["test_severity"] or row["control_severity"]
        lines.append(
            f"  {row['status']:<11} {severity:<6} "
            f"{number(row['control_saving(us)']):>12} -> {number(row['test_saving(us)']):<12}"
            f" {what}")
        if row.get("note"):
            lines.append(f"{'':14}but {row['note']}")
    if len(lines) == 1:
        lines.append("  no finding appeared, disappeared or changed")
    return "\n".join(lines)


__all__ = ["add_parser", "format_causes", "format_changes", "format_findings",
           "format_predictions", "format_summary", "run"]
