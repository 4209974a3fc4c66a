"""Ranks of the job with no trace: a warning on stderr, a field in ``--json``.

A job of world size 8 with seven trace files still loads and prints every table, but its
cross-rank figures (the spread, the slowest rank, stragglers, collectives matched across
ranks) then describe seven ranks; the user is told which rank is absent.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from hta.report.analyzer import Analyzer


def missing_ranks_message(analyzer: Analyzer) -> str | None:
    """The one line saying which ranks have no trace, or ``None`` when none is missing."""
    from hta.model.selection import format_ranges

    missing = list(analyzer.missing_ranks)
    if not missing:
        return None
    sizes = [analyzer.t.meta(r).get("world_size") for r in analyzer.ranks]
    world = max([s for s in sizes if isinstance(s, int)] + [max(missing) + 1])
    which, verb = ("rank", "has") if len(missing) == 1 else ("ranks", "have")
    return (f"{len(missing)} of the job's {world} ranks {verb} no trace in "
            f"{analyzer.trace_dir or 'the given files'} ({which} {format_ranges(missing, ',')}); "
            f"cross-rank figures cover the {len(analyzer.ranks)} loaded rank(s) only")


def report_missing_ranks(analyzer: Analyzer, stream: TextIO | None = None,
                         quiet: bool = False) -> None:
    """``hta: warning: ...`` on stderr when ranks of the job have no trace (not with
    ``quiet``: ``-q``; ``--json`` still lists them)."""
    message = missing_ranks_message(analyzer)
    if message and not quiet:
        print(f"hta: warning: {message}", file=stream or sys.stderr)


__all__ = ["missing_ranks_message", "report_missing_ranks"]
