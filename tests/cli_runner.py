"""Run the ``hta`` command in this process: ``hta.cli.main(argv)`` with its output captured.

A subprocess costs a Python start and a pandas import (about half a second) and proves
nothing more about a subcommand's output, exit code or files than ``main`` does. What
only a real process shows (the console script, a closed pipe, imports at start-up) keeps
its subprocess tests. The result mimics ``subprocess.run(..., capture_output=True,
text=True)``: ``returncode`` (argparse's ``SystemExit`` code included), ``stdout`` and
``stderr``; an exception escaping ``main`` (``--verbose``) becomes its traceback on
stderr and exit code 1, as Python itself does.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from conftest import ROOT

#: Variables that change how the command prints; cleared unless a test sets them.
STYLE_VARIABLES = ("FORCE_COLOR", "NO_COLOR", "COLUMNS")


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        for key in STYLE_VARIABLES:
            os.environ.pop(key, None)
        os.environ.update(env or {})
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_cli(argv: Sequence[str], cwd: Path | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """``hta ARGV`` in this process, in ``cwd`` (default: the repository root)."""
    from hta.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    with _environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        os.chdir(cwd or ROOT)
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # noqa: BLE001 - what the interpreter would print
            err.write(traceback.format_exc())
            code = 1
        finally:
            os.chdir(here)
    return subprocess.CompletedProcess(["hta", *argv], code, out.getvalue(), err.getvalue())
