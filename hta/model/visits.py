"""Several per-rank analyses in one visit of each rank.

A per-rank analysis (:func:`hta.model.trace.map_ranks`) is a function run where the rank
is, whose per-rank answers are concatenated, then usually a step in the caller that
turns the concatenation into the answer (the findings shared out and merged, the
overview's spread across ranks). :class:`RankPlan` names both halves. :func:`run_plan`
runs one; :func:`run_together` runs several in a single visit of each rank: a rank kept
out of memory (an Arrow folder, a Dask worker) is read once, not once per analysis, and
the analyses run on it one after another, so what they share is computed once
(:func:`hta.model.derived.derived`). Only the per-rank answers travel back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hta.model.selection import OnSteps
from hta.model.trace import RankMapper, Trace, concat_frames, map_ranks


def _same(frame: pd.DataFrame) -> pd.DataFrame:
    return frame


@dataclass(frozen=True)
class RankPlan:
    """A per-rank analysis: ``fn(trace, ranks, *args, **kwargs) -> DataFrame`` (per rank,
    as :func:`~hta.model.trace.map_ranks` requires; module-level, so it can be sent to a
    worker), then ``finish(concatenated frame)`` in the caller."""

    fn: Callable[..., pd.DataFrame]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    finish: Callable[[pd.DataFrame], Any] = _same
    description: str = ""

    def empty(self) -> pd.DataFrame:
        """The analysis' answer for no rank (its columns)."""
        return self.fn(Trace({}), [], *self.args, **dict(self.kwargs))

    def on_steps(self, iterations: Iterable[int] | None) -> RankPlan:
        """The same analysis on each rank restricted to the ``ProfilerStep`` numbers
        ``iterations`` (:func:`hta.model.selection.restrict`, where the rank is), for an
        analysis without an ``iterations`` argument; ``None``: this plan."""
        if iterations is None:
            return self
        return RankPlan(OnSteps(self.fn, tuple(sorted({int(i) for i in iterations}))),
                        self.args, self.kwargs, finish=self.finish,
                        description=self.description)


def run_plan(trace: RankMapper, plan: RankPlan,
             ranks: Iterable[int] | int | None = None) -> Any:
    """One analysis: ``finish`` of the concatenated per-rank frames."""
    return plan.finish(map_ranks(trace, plan.fn, ranks, plan.args, dict(plan.kwargs),
                                 description=plan.description))


def run_together(trace: RankMapper, plans: Sequence[RankPlan],
                 ranks: Iterable[int] | int | None = None, *,
                 description: str = "", errors: str = "raise") -> list[Any]:
    """Every plan's answer, from one visit of each selected rank (the plans in order on
    it); the same answers as :func:`run_plan` one after another.

    An analysis that raises on a rank does not stop the others there: with
    ``errors="raise"`` its first exception is raised here, after the visit; with
    ``errors="return"`` the exception is that plan's answer (a report shows it in the
    analysis' own section)."""
    if errors not in ("raise", "return"):
        raise ValueError(f"errors: expected 'raise' or 'return', got {errors!r}")
    calls = tuple((p.fn, tuple(p.args), dict(p.kwargs)) for p in plans)
    per_rank = map_ranks(trace, each_on_its_own, ranks, (calls,), description=description)
    answers: list[Any] = []
    for i, plan in enumerate(plans):
        frames = list(per_rank[_column(i)]) if len(per_rank) else []
        failed = next((f.error for f in frames if isinstance(f, Failed)), None)
        if failed is not None:
            if errors == "raise":
                raise failed
            answers.append(failed)
            continue
        try:
            answers.append(plan.finish(concat_frames(frames) if frames else plan.empty()))
        except Exception as exc:
            if errors == "raise":
                raise
            answers.append(exc)
    return answers


@dataclass(frozen=True)
class Failed:
    """What a call of :func:`each_on_its_own` raised on a rank."""

    error: Exception


def each_on_its_own(trace: Trace, ranks: Iterable[int] | int | None,
                    calls: tuple[tuple[Callable[..., pd.DataFrame], tuple[Any, ...],
                                       dict[str, Any]], ...]) -> pd.DataFrame:
    """Per selected rank, one row: ``rank`` and, per call, its frame on that rank alone,
    or :class:`Failed` with what it raised (runs where the ranks are; a rank's calls run
    in a row)."""
    rows = []
    for r in trace.selected_ranks(ranks):
        row: dict[str, Any] = {"rank": r}
        for i, (fn, args, kwargs) in enumerate(calls):
            try:
                row[_column(i)] = fn(trace, [r], *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - handed to run_together
                row[_column(i)] = Failed(exc)
        rows.append(row)
    columns = ["rank", *(_column(i) for i in range(len(calls)))]
    if not rows:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})
    out = pd.DataFrame({"rank": [row["rank"] for row in rows]})
    for c in columns[1:]:
        out[c] = pd.Series([row[c] for row in rows], dtype=object)
    return out


def _column(i: int) -> str:
    return f"answer_{i}"


__all__ = ["Failed", "RankPlan", "each_on_its_own", "run_plan", "run_together"]
