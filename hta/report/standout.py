"""The ranks that stand out: which ranks the report's per-rank figures draw on a big job.

A figure with a line or a row per rank (the GPU timeline, the launch queue length, the
memory timeline, the copy bandwidth over time, the collectives' scatter, the stragglers'
lags) grows with the number of ranks, and past a few ranks its lines hide each other. When
the selection has more than :data:`MAX_DRAWN_RANKS` ranks, these figures draw only the
ranks that stand out (:func:`standout_ranks`), each with its reason; the tables under them
keep covering every selected rank, and a note under each figure names the ranks drawn.

The reasons, from the job's overview (:mod:`hta.report.overview`), in this order of
priority (a rank may have several; when more than ``limit`` ranks stand out, the first
ones in this order are kept):

* ``slowest``, ``fastest``: ``job["slowest_rank"]`` and ``job["fastest_rank"]`` (the
  ranks whose GPU computes longest and shortest, see :mod:`hta.report.overview`);
* ``critical path``: the rank of the critical-path section, when one was given;
* ``longest mean step``: ``job["longest_step_rank"]``;
* ``most idle``: the largest ``idle_time(us)``;
* ``most exposed communication``, ``least exposed communication``: the largest and the
  smallest ``exposed_comm_time(us)``;
* ``median compute``: the rank at the median of ``compute_time(us)`` (the lower median of
  an even count).

Ties go to the lowest rank; a figure every rank shares (``idle_time(us)`` or
``exposed_comm_time(us)`` equal on all ranks, no communication say) names no rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from hta.report.overview import JobOverview

#: Ranks the per-rank figures draw in full; a selection of more ranks draws those that
#: stand out (:func:`standout_ranks`), at most this many.
MAX_DRAWN_RANKS = 8

#: (reason, column of the overview's per-rank table, largest?) picked from the table.
_FROM_TABLE: list[tuple[str, str, bool]] = [
    ("most idle", "idle_time(us)", True),
    ("most exposed communication", "exposed_comm_time(us)", True),
    ("least exposed communication", "exposed_comm_time(us)", False),
]


def standout_ranks(overview: JobOverview, critical_path_rank: int | None = None,
                   limit: int = MAX_DRAWN_RANKS) -> dict[int, list[str]]:
    """The ranks that stand out in ``overview`` (see the module docstring), each with its
    reasons, at most ``limit`` ranks, in rank order."""
    table = overview.ranks
    known = {int(r) for r in table["rank"]} if len(table) else set()
    picks: list[tuple[int, str]] = []

    def pick(rank: int | None, reason: str) -> None:
        if rank is not None and int(rank) in known:
            picks.append((int(rank), reason))

    job = overview.job
    pick(job.get("slowest_rank"), "slowest")
    pick(job.get("fastest_rank"), "fastest")
    pick(critical_path_rank, "critical path")
    pick(job.get("longest_step_rank"), "longest mean step")
    for reason, column, largest in _FROM_TABLE:
        pick(_extreme(table, column, largest), reason)
    pick(_median_rank(table, "compute_time(us)"), "median compute")
    chosen: dict[int, list[str]] = {}
    for rank, reason in picks:
        if rank not in chosen and len(chosen) >= limit:
            continue
        reasons = chosen.setdefault(rank, [])
        if reason not in reasons:
            reasons.append(reason)
    return dict(sorted(chosen.items()))


def _values(table: pd.DataFrame, column: str) -> pd.Series:
    """``column`` of the per-rank table by rank, ascending, without missing values."""
    if not len(table) or column not in table:
        return pd.Series(dtype=float)
    return table.set_index("rank")[column].astype(float).dropna().sort_index()


def _extreme(table: pd.DataFrame, column: str, largest: bool) -> int | None:
    """The rank with the largest (smallest) ``column``, lowest rank on ties; ``None``
    when no rank has it or every rank has the same."""
    values = _values(table, column)
    if values.empty or values.min() == values.max():
        return None
    return int(values.idxmax() if largest else values.idxmin())


def _median_rank(table: pd.DataFrame, column: str) -> int | None:
    """The rank at the (lower) median of ``column``: values sorted, ties by rank."""
    values = _values(table, column)
    if values.empty:
        return None
    ordered = sorted(values.items(), key=lambda item: (item[1], item[0]))
    return int(ordered[(len(ordered) - 1) // 2][0])


def drawn_note(drawn: dict[int, list[str]], selected: int, method: str,
               covers: str = "the table covers every rank",
               other: str = "draws any other") -> str:
    """The note under a figure that draws only the ``drawn`` ranks of ``selected``:
    which ranks and why, what else covers every rank (``covers``), and the ``method``
    call (a ``TraceAnalysis`` method, ``{ranks}`` where the ranks go) that ``other``
    (draws any other rank)."""
    which = ", ".join(f"{rank} ({', '.join(reasons)})" for rank, reasons in drawn.items())
    call = method.format(ranks="[...]")
    return (f"Drawn for {len(drawn)} of {selected:,} ranks, those that stand out: {which}"
            + (f"; {covers}" if covers else "") + f". TraceAnalysis.{call} {other}.")


__all__ = ["MAX_DRAWN_RANKS", "drawn_note", "standout_ranks"]
