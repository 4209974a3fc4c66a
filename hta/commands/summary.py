"""``hta summary DIR``: per-rank overview of a job."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from hta.commands.common import dumps, parse_ranks, records

EXIT_OK = 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "summary", help="per-rank overview of a job's traces",
        description="Load every rank in DIR and print, per rank: events, GPU work by kind, "
                    "GPU busy and idle time.",
    )
    p.add_argument("trace_dir", metavar="DIR", help="folder of trace files, or one file")
    p.add_argument("--ranks", help="ranks to load, e.g. 0,1 or 0-7")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    p.add_argument("--strict", action="store_true",
                   help="fail on the first unreadable file instead of skipping it")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def format_ranks_table(table: pd.DataFrame) -> str:
    """Ranks as columns, one figure per line: integers plain, times with one decimal."""
    shown = table.set_index("rank")
    text = pd.DataFrame(index=shown.columns, columns=[f"rank {r}" for r in shown.index])
    for col in shown.columns:
        values = shown[col]
        if pd.api.types.is_integer_dtype(values):
            cells = [f"{int(v):,}" for v in values]
        else:
            cells = ["-" if pd.isna(v) else f"{float(v):,.1f}" for v in values]
        text.loc[col] = cells
    return text.to_string()


def run(args: argparse.Namespace) -> int:
    """Load the job and print the summary."""
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(
        trace_dir=args.trace_dir, ranks=parse_ranks(args.ranks), cache=not args.no_cache,
        strict=args.strict, progress=not args.quiet and sys.stderr.isatty(),
    )
    table = analyzer.get_rank_summary()
    unclassified = analyzer.get_unclassified_kernels()
    n_unclassified = int(unclassified["name"].nunique()) if len(unclassified) else 0
    if args.json:
        print(dumps({
            "trace_dir": args.trace_dir,
            "ranks": records(table),
            "skipped": analyzer.skipped,
            "unclassified_kernels": n_unclassified,
        }))
        return EXIT_OK
    meta = analyzer.metadata()
    print(f"Job: {args.trace_dir}  ranks: {len(analyzer.ranks)}"
          + (f" of world size {meta['world_size']}" if meta.get("world_size") else ""))
    print(format_ranks_table(table))
    if n_unclassified:
        print(f"\n{n_unclassified} kernel name(s) matched no kind rule and count as "
              "computation; list them with TraceAnalysis.get_unclassified_kernels().")
    for path, reason in analyzer.skipped.items():
        print(f"skipped {path}: {reason}", file=sys.stderr)
    return EXIT_OK
