"""The loader's warnings, grouped for the command line.

Each rank's loader writes warnings such as ``"3 complete event(s) had a negative 'dur';
clamped to 0"`` into its metadata (``RankTrace.meta["warnings"]``). A job of many ranks
repeats them, so they are grouped by kind (the message without its leading count): one
line per kind, with the events summed over ranks and the ranks it came from.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

_COUNT = re.compile(r"^(\d+) (.+)$", re.DOTALL)


def load_warnings(analyzer: Any) -> list[dict[str, Any]]:
    """One record per kind of loader warning: ``kind``, ``count`` (events summed over
    ranks, or ``None`` when the message gives none), ``ranks`` (sorted), ``message``
    (the line to show)."""
    kinds: dict[str, dict[str, Any]] = {}
    ranks = analyzer.t.get_ranks()
    for rank in ranks:
        for text in analyzer.t.meta(rank).get("warnings") or []:
            match = _COUNT.match(str(text))
            kind = match.group(2) if match else str(text)
            entry = kinds.setdefault(kind, {"kind": kind, "count": None, "ranks": []})
            if match:
                entry["count"] = (entry["count"] or 0) + int(match.group(1))
            if rank not in entry["ranks"]:
                entry["ranks"].append(rank)
    for entry in kinds.values():
        entry["ranks"].sort()
        on = _ranks_text(entry["ranks"], len(ranks))
        head = f"{entry['count']:,} " if entry["count"] is not None else ""
        entry["message"] = f"{head}{entry['kind']} ({on})"
    return list(kinds.values())


def print_load_warnings(analyzer: Any, stream: TextIO | None = None) -> None:
    """One ``hta: warning: ...`` line per kind of loader warning, on stderr."""
    for entry in load_warnings(analyzer):
        print(f"hta: warning: {entry['message']}", file=stream or sys.stderr)


def _ranks_text(ranks: list[int], of: int) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if len(ranks) == of:
        return f"all {of} ranks"
    return f"{len(ranks)} ranks: " + ",".join(str(r) for r in ranks)


__all__ = ["load_warnings", "print_load_warnings"]
