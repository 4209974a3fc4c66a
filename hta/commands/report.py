"""``hta report DIR -o report.html``: one self-contained HTML report of a job.

Every analysis's figures and tables, a header with the job's metadata and a table of
contents; plotly.js is embedded, so the file opens offline and can be attached or mailed.
Built by :func:`hta.report.builder.build_report`. With ``--scheduler``/``--scheduler-file``
the ranks are loaded on a Dask cluster and the per-rank work (the what-if replay too) runs
there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hta.commands.args_and_output import (
    EXIT_OK,
    add_load_options,
    check_output_place,
    check_writable,
    report_skipped,
)
from hta.commands.cluster import add_cluster_options, load
from hta.commands.missing_ranks import report_missing_ranks


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "report", help="write a self-contained HTML report of a job",
        description="Load every rank in DIR and write one HTML file with every analysis's "
                    "figures and tables (temporal breakdown, idle time, kernels, overlap, "
                    "annotations, launches, queue length, memory bandwidth, operators, "
                    "critical path). The file works offline.",
    )
    p.add_argument("trace_dir", metavar="DIR", help="folder of trace files, or one file")
    p.add_argument("-o", "--output", metavar="FILE", default="report.html",
                   help="the HTML file to write (default: report.html)")
    p.add_argument("-f", "--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--iterations", metavar="LIST",
                   help="ProfilerStep numbers to analyse, e.g. 2-4 (default: the whole trace)")
    p.add_argument("--plotlyjs", choices=("embed", "inline", "cdn"), default="embed",
                   help="plotly.js in the file compressed (embed, the default: about 2 MB, "
                        "offline), as is (inline: about 5 MB more) or linked from Plotly's "
                        "CDN (cdn: small, needs the network to show figures)")
    p.add_argument("--title", help="title of the report (default: hta report: <folder>)")
    p.add_argument("--critical-path-rank", type=int, metavar="RANK",
                   help="rank whose critical path is shown (default: the first loaded)")
    add_load_options(p)
    add_cluster_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the job, build the report, write it."""
    from hta.commands.summary import selected_iterations
    from hta.report.builder import write_report

    out = Path(args.output)
    check_output_place(out)
    check_writable([out], args.force)
    analyzer = load(args)
    iterations = selected_iterations(analyzer, args.iterations)
    if args.critical_path_rank is not None:
        analyzer.t.rank(args.critical_path_rank)  # a clear error for a rank not loaded
    write_report(analyzer, out, force=True, iterations=iterations, title=args.title,
                 critical_path_rank=args.critical_path_rank, plotlyjs=args.plotlyjs,
                 keep_replay=False)  # the process ends with the report
    report_skipped(analyzer)
    report_missing_ranks(analyzer, quiet=args.quiet)
    print(f"Wrote {out.resolve()} ({out.stat().st_size / 1e6:,.1f} MB)", file=sys.stdout)
    return EXIT_OK


__all__ = ["add_parser", "run"]
