"""``hta counters DIR -o OUT``: each rank's trace again, with counter tracks added.

Writes, per rank, a copy of its trace file with every original event and ``Queue Length``
(per stream) and ``Memcpy BW`` (per device and direction) counter tracks that Perfetto UI
and chrome://tracing draw under the timeline. Built by
:func:`hta.export.counters_trace.generate_trace_with_counters`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hta.commands.args_and_output import (
    EXIT_OK,
    CommandError,
    UsageError,
    add_load_options,
    check_output_place,
    check_writable,
    create_output_folder,
    load,
    report_skipped,
)
from hta.commands.missing_ranks import report_missing_ranks

SERIES = ("queue_length", "memcpy_bandwidth")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "counters", help="write the traces again with queue length and bandwidth counters",
        description="Write each rank's trace into OUT with every original event kept and "
                    "counter tracks added: 'Queue Length' per GPU stream and 'Memcpy BW' per "
                    "copy direction. Open the files in Perfetto UI or chrome://tracing.",
    )
    p.add_argument("trace_dir", metavar="DIR", help="folder of trace files, or one file")
    p.add_argument("-o", "--output", metavar="OUT", required=True,
                   help="folder for the augmented traces (created if missing)")
    p.add_argument("--series", default=",".join(SERIES), metavar="LIST",
                   help="counter tracks to add: queue_length, memcpy_bandwidth or both "
                        "(default: both)")
    p.add_argument("--suffix", default="_with_counters",
                   help="added to each file name before .json (default: _with_counters)")
    p.add_argument("-f", "--force", action="store_true", help="overwrite existing outputs")
    add_load_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the job and write one augmented trace per rank."""
    from hta.export.counters_trace import generate_trace_with_counters, parse_time_series
    from hta.export.rawtrace import output_path, source_of

    names = [s.strip() for s in args.series.split(",") if s.strip()]
    try:
        series = parse_time_series(names)
    except ValueError as exc:
        raise UsageError(f"--series {args.series}: {exc}") from None
    if not names:
        raise UsageError("--series is empty; choose queue_length, memcpy_bandwidth or both")
    out_dir = Path(args.output)
    if out_dir.exists() and not out_dir.is_dir():
        raise CommandError(f"{out_dir} is a file; -o takes a folder")
    create = check_output_place(out_dir, folder=True)
    analyzer = load(args)
    try:
        targets = [output_path(source_of(rt), suffix=args.suffix, output_dir=out_dir)
                   for rt in analyzer.t]
    except (FileNotFoundError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    check_writable(targets, args.force)
    if create:
        create_output_folder(out_dir)
    written = generate_trace_with_counters(analyzer.t, series, None, args.suffix, out_dir)
    report_skipped(analyzer)
    report_missing_ranks(analyzer, quiet=args.quiet)
    for rank, path in sorted(written.items()):
        print(f"Wrote {path} (rank {rank})")
    return EXIT_OK


__all__ = ["add_parser", "run"]
