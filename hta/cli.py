"""The ``hta`` command.

Each subcommand is a function ``run_<name>(args) -> int``; errors about the user's input
end as one line on stderr and a non-zero exit code, never a traceback (``--verbose``
shows details).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

import pandas as pd

from hta import __version__
from hta.loading.errors import TraceError

logger = logging.getLogger("hta")

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_TRACE_ERROR = 3
EXIT_INTERRUPTED = 130


def _parse_ranks(text: str | None) -> list[int] | None:
    if not text:
        return None
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="hta", description="Analyse PyTorch profiler (Kineto) traces."
    )
    parser.add_argument("--version", action="version", version=f"hta {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show details and tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    summary = sub.add_parser(
        "summary", help="per-rank overview of a job's traces",
        description="Load every rank in DIR and print, per rank: events, GPU work by kind, "
                    "GPU busy and idle time.",
    )
    summary.add_argument("trace_dir", metavar="DIR", help="folder of trace files, or one file")
    summary.add_argument("--ranks", help="ranks to load, e.g. 0,1 or 0-7")
    summary.add_argument("--json", action="store_true", help="print JSON instead of a table")
    summary.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    summary.add_argument("--strict", action="store_true",
                         help="fail on the first unreadable file instead of skipping it")
    summary.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    summary.set_defaults(func=run_summary)
    return parser


def run_summary(args: argparse.Namespace) -> int:
    """``hta summary DIR``."""
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(
        trace_dir=args.trace_dir, ranks=_parse_ranks(args.ranks), cache=not args.no_cache,
        strict=args.strict, progress=not args.quiet and sys.stderr.isatty(),
    )
    table = analyzer.get_rank_summary()
    unclassified = analyzer.get_unclassified_kernels()
    if args.json:
        payload = {
            "trace_dir": args.trace_dir,
            "ranks": table.to_dict(orient="records"),
            "skipped": analyzer.skipped,
            "unclassified_kernels": int(unclassified["name"].nunique()) if len(unclassified)
            else 0,
        }
        print(json.dumps(_finite(payload), indent=2, default=_json_default))
        return EXIT_OK
    meta = analyzer.metadata()
    print(f"Job: {args.trace_dir}  ranks: {len(analyzer.ranks)}"
          + (f" of world size {meta['world_size']}" if meta.get("world_size") else ""))
    print(format_ranks_table(table))
    if len(unclassified):
        print(f"\n{unclassified['name'].nunique()} kernel name(s) matched no kind rule and count "
              "as computation; list them with TraceAnalysis.get_unclassified_kernels().")
    for path, reason in analyzer.skipped.items():
        print(f"skipped {path}: {reason}", file=sys.stderr)
    return EXIT_OK


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


def _finite(value: object) -> object:
    """NaN and infinities become null so the output is valid JSON."""
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _json_default(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()  # numpy scalars
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hta`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except TraceError as exc:
        if args.verbose:
            raise
        print(f"hta: error: {exc}", file=sys.stderr)
        return EXIT_TRACE_ERROR
    except KeyboardInterrupt:
        print("hta: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI never ends in a bare traceback
        if args.verbose:
            raise
        print(f"hta: error: {type(exc).__name__}: {exc} (run with --verbose for details)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
