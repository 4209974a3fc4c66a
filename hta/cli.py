"""The ``hta`` command.

Each subcommand lives in :mod:`hta.commands` (``add_parser`` + ``run(args) -> int``).
Errors about the user's input end as one line on stderr and a non-zero exit code, never
a traceback (``--verbose`` adds the traceback, the exit code unchanged). Exit codes: 0
done, 1 any other error (an output that exists without ``--force`` ...), 2 usage (bad
options, ranks or steps the traces do not have), 3 a trace that cannot be read, 130
interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from hta._version import __version__
from hta.commands import counters, diff, export, report, summary, whatif
from hta.commands.args_and_output import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TRACE_ERROR,
    EXIT_USAGE,
    CommandError,
)
from hta.errors import TraceError

#: Subcommand modules, in the order ``hta --help`` lists them.
COMMANDS = (summary, report, diff, counters, export, whatif)

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_TRACE_ERROR", "EXIT_USAGE",
           "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="hta", description="Analyse PyTorch profiler (Kineto) traces."
    )
    parser.add_argument("--version", action="version", version=f"hta {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show details and tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    for subparser in sub.choices.values():
        # also accepted after the subcommand; SUPPRESS keeps the main option's value
        subparser.add_argument("-v", "--verbose", action="store_true",
                               default=argparse.SUPPRESS, help="show details and tracebacks")
    return parser


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
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe raises here, inside the try, not at exit
        return code
    except CommandError as exc:
        _traceback_if(args.verbose)
        print(f"hta: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except TraceError as exc:
        _traceback_if(args.verbose)
        print(f"hta: error: {exc.for_command_line()}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # the reader went away (``hta summary DIR | head``): what it read is what it
        # wanted, so stop quietly with 0, as ``head`` expects of its writer; stdout goes
        # to devnull so that the interpreter's final flush does not raise again
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        print("hta: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI never ends in a bare traceback
        if args.verbose:
            traceback.print_exc()
            print(f"hta: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        else:
            print(f"hta: error: {type(exc).__name__}: {exc} (run with --verbose for "
                  "details)", file=sys.stderr)
        return EXIT_ERROR


def _traceback_if(verbose: bool) -> None:
    """With ``--verbose``, the traceback of the error being handled, on stderr; the exit
    code stays the error's own (``-v`` changes what is shown, not the exit code)."""
    if verbose:
        traceback.print_exc()


def _silence_stdout() -> None:
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (captured, in-process)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
