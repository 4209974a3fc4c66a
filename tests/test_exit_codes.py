"""One place decides the ``hta`` command's exit statuses (docs/cli.md, "Exit codes and
errors"), and the errors' ``exit_code`` is the status the command exits with for them."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run_cli

from hta.commands.args_and_output import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TRACE_ERROR,
    EXIT_USAGE,
    CommandError,
    UsageError,
)
from hta.errors import TraceDiscoveryError, TraceError, TraceLoadError


def test_the_documented_table() -> None:
    assert (EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TRACE_ERROR, EXIT_INTERRUPTED) == \
        (0, 1, 2, 3, 130)
    assert CommandError("x").exit_code == EXIT_ERROR
    assert UsageError("x").exit_code == EXIT_USAGE


@pytest.mark.parametrize("error", [TraceError(), TraceLoadError("f.json", "bad"),
                                   TraceDiscoveryError("none")])
def test_trace_errors_carry_the_clis_trace_error_status(error: TraceError) -> None:
    assert error.exit_code == EXIT_TRACE_ERROR == 3


def test_hta_exits_with_trace_error_exit_code(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    proc = run_cli(["summary", str(missing), "--no-cache"])
    assert proc.returncode == TraceError().exit_code, proc.stderr
    assert proc.stderr.startswith("hta: error: trace folder not found")
