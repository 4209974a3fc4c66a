"""Errors raised while finding and reading trace files."""

from __future__ import annotations

from pathlib import Path


class TraceError(Exception):
    """Base class of every error this package raises about a user's traces."""

    exit_code = 2


class TraceLoadError(TraceError):
    """A trace file could not be read; the message names the file and what to do."""

    def __init__(self, path: str | Path, problem: str, hint: str = "") -> None:
        self.path = str(path)
        self.problem = problem
        self.hint = hint
        text = f"{self.path}: {problem}"
        if hint:
            text += f" ({hint})"
        super().__init__(text)

    def __reduce__(self) -> tuple[type[TraceLoadError], tuple[str, str, str]]:
        # Workers send errors back pickled; the default reduce would call __init__ with
        # the message alone and fail, breaking the whole process pool.
        return (type(self), (self.path, self.problem, self.hint))


class TraceDiscoveryError(TraceError):
    """The trace folder or file list is unusable (missing, empty, clashing ranks)."""
