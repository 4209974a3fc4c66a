"""The loader's warnings, grouped for the command line.

Each rank's loader writes warnings such as ``"3 complete event(s) had a negative 'dur';
clamped to 0"`` into its metadata (``RankTrace.meta["warnings"]``). A job of many ranks
repeats them, so they are grouped by kind (the message without its leading count): one
line per kind, with the events summed over ranks and the ranks and files it came from
(the files by name; all of a job's files as "all N ranks").
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from hta.report.analyzer import Analyzer

_COUNT = re.compile(r"^(\d+) (.+)$", re.DOTALL)


def load_warnings(analyzer: Analyzer) -> list[dict[str, Any]]:
    """One record per kind of loader warning: ``kind``, ``count`` (events summed over
    ranks, or ``None`` when the message gives none), ``ranks`` (sorted), ``files`` (the
    ranks' trace files, in the same order), ``message`` (the line to show)."""
    kinds: dict[str, dict[str, Any]] = {}
    ranks = analyzer.t.get_ranks()
    files: dict[int, str] = {}
    for rank in ranks:
        meta = analyzer.t.meta(rank)
        files[rank] = str(meta.get("source") or "")
        for text in meta.get("warnings") or []:
            match = _COUNT.match(str(text))
            kind = match.group(2) if match else str(text)
            entry = kinds.setdefault(kind, {"kind": kind, "count": None, "ranks": []})
            if match:
                entry["count"] = (entry["count"] or 0) + int(match.group(1))
            if rank not in entry["ranks"]:
                entry["ranks"].append(rank)
    for entry in kinds.values():
        entry["ranks"].sort()
        entry["files"] = [files[r] for r in entry["ranks"]]
        on = _ranks_text(entry["ranks"], entry["files"], len(ranks))
        head = f"{entry['count']:,} " if entry["count"] is not None else ""
        entry["message"] = f"{head}{entry['kind']} ({on})"
    return list(kinds.values())


def needs_no_action(message: str) -> bool:
    """Whether a loader warning says there is nothing to do (a note on how an oddity of
    the file was read, which changes no figure the user acts on)."""
    return "nothing to do" in message.lower()


def print_load_warnings(analyzer: Analyzer, stream: TextIO | None = None,
                        verbose: bool = False) -> None:
    """One ``hta: warning: ...`` line per kind of loader warning, on stderr; those that
    say there is nothing to do (:func:`needs_no_action`) only with ``verbose``."""
    for entry in load_warnings(analyzer):
        if verbose or not needs_no_action(entry["message"]):
            print(f"hta: warning: {entry['message']}", file=stream or sys.stderr)


#: Files named in one warning line at most (the rest are counted).
_NAMED_FILES = 3


def _ranks_text(ranks: list[int], files: list[str], of: int) -> str:
    names = [_file_name(f) for f in files]
    if len(ranks) == 1:
        return f"rank {ranks[0]}: {names[0]}" if names[0] else f"rank {ranks[0]}"
    if len(ranks) == of:
        return f"all {of} ranks"
    shown = ", ".join(n for n in names[:_NAMED_FILES] if n)
    more = len(names) - _NAMED_FILES
    return (f"{len(ranks)} ranks: " + ",".join(str(r) for r in ranks)
            + (f"; {shown}" if shown else "") + (f" and {more} more" if more > 0 else ""))


def _file_name(source: str) -> str:
    """The last part of a path or URL (the folder is the job's, named elsewhere)."""
    return source.rstrip("/").replace("\\", "/").rsplit("/", 1)[-1]


__all__ = ["load_warnings", "needs_no_action", "print_load_warnings"]
