"""Errors raised while finding and reading trace files."""

from __future__ import annotations


class TraceError(Exception):
    """Base class of every error this package raises about a user's traces.

    ``str(error)`` is what a Python caller reads (its hint may name a Python argument such
    as ``trace_files=``); :meth:`for_command_line` is what the ``hta`` command prints, with
    the hint that applies there."""

    #: The ``hta`` command's exit status for it (docs/cli.md: 3, the traces cannot be
    #: read); :data:`hta.commands.args_and_output.EXIT_TRACE_ERROR` is this number.
    exit_code = 3
    #: The message for the command line, when it differs from ``str(error)``.
    cli_message: str | None = None

    def for_command_line(self) -> str:
        """The message with the command line's hint (no Python argument in it)."""
        return self.cli_message or str(self)


class TraceLoadError(TraceError):
    """A trace file could not be read; the message names the file and what to do.

    ``hint`` says what to do in Python; ``cli_hint``, when given, what to do on the
    command line instead."""

    def __init__(self, path: object, problem: str, hint: str = "",
                 cli_hint: str = "") -> None:
        self.path = str(path)  # a str or Path, or a URL's RemotePath
        self.problem = problem
        self.hint = hint
        self.cli_hint = cli_hint
        text = f"{self.path}: {problem}"
        super().__init__(text + (f" ({hint})" if hint else ""))
        if cli_hint:
            self.cli_message = f"{text} ({cli_hint})"

    def __reduce__(self) -> tuple[type[TraceLoadError], tuple[str, str, str, str]]:
        # Workers send errors back pickled; the default reduce would call __init__ with
        # the message alone and fail, breaking the whole process pool.
        return (type(self), (self.path, self.problem, self.hint, self.cli_hint))


class TraceDiscoveryError(TraceError):
    """The trace folder or file list is unusable (missing, empty, clashing ranks).

    ``cli_message``: the message for the command line where the Python one names a
    Python argument."""

    def __init__(self, message: str, cli_message: str | None = None) -> None:
        super().__init__(message)
        self.cli_message = cli_message

    def __reduce__(self) -> tuple[type[TraceDiscoveryError], tuple[str, str | None]]:
        return (type(self), (str(self), self.cli_message))


class MissingRanksError(TraceDiscoveryError):
    """The ranks asked for (``ranks=``, ``--ranks``) are not among the traces: a usage
    error on the command line (exit 2, like a step the traces do not have), not a trace
    that cannot be read."""

    exit_code = 2


class ChangeMatchesNothingError(ValueError):
    """A what-if change aimed at some work (``kernels:PATTERN*F``, ``no-sync:SITE``,
    ``pinned-copies``, ``workers:N`` ...) finds none in the traces: its prediction would
    be a silent "no change". The message names the change and what it looked for."""
