"""``TraceAnalysis``: the HTA-compatible entry point.

``TraceAnalysis(trace_dir=...)`` loads every rank of a job (see
:func:`hta.loading.loader.load_trace` for every option) and exposes the analyses as
methods. An HTA notebook's first lines run unchanged::

    from hta.trace_analysis import TraceAnalysis
    analyzer = TraceAnalysis(trace_dir="traces/")
    df = analyzer.t.get_trace(0)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.summary import rank_summary
from hta.export.counters_trace import TimeSeriesTypes  # noqa: F401 - HTA's import path
from hta.facade.breakdown import BreakdownMixin
from hta.facade.counters import CountersMixin
from hta.facade.critical_path import CriticalPathMixin
from hta.loading.loader import load_trace
from hta.model.rules import Rule, RuleSet
from hta.model.trace import RankTrace, Trace
from hta.parallel import Executor

logger = logging.getLogger(__name__)


class TraceAnalysis(BreakdownMixin, CountersMixin, CriticalPathMixin):
    """Load a job's traces and analyse them.

    Args:
        trace_dir: folder holding one Kineto trace (``.json``/``.json.gz``) per rank.
        trace_files: rank -> file mapping (HTA's form) or a list of files, instead of
            scanning ``trace_dir``.
        ranks: load only these ranks.
        include_last_profiler_step: keep the events of the last ``ProfilerStep#N``.
            True by default: every event is kept (HTA drops the last step silently).
        cache: reuse/write the Parquet cache (beside the traces, else the user cache).
        cache_dir: where the cache lives, instead of the default.
        strict: raise on the first bad file instead of skipping and reporting it.
        progress: show a progress bar (terminal or Jupyter).
        kind_rules: extra :class:`~hta.model.rules.Rule` objects, applied before the
            defaults, to classify kernels and runtime calls.
        executor: run per-rank work on this executor instead of local processes.
        max_workers: worker processes for the local executor (default: CPUs).
    """

    def __init__(
        self,
        trace_dir: str | Path | None = None,
        trace_files: Mapping[int, str | Path] | Iterable[str | Path] | None = None,
        ranks: Iterable[int] | None = None,
        include_last_profiler_step: bool = True,
        *,
        cache: bool = True,
        cache_dir: str | Path | None = None,
        strict: bool = False,
        progress: bool = True,
        kind_rules: Iterable[Rule] = (),
        executor: Executor | None = None,
        max_workers: int | None = None,
    ) -> None:
        self.trace_dir = str(trace_dir) if trace_dir is not None else None
        self.rules = RuleSet(kind_rules)
        self.t: Trace = load_trace(
            trace_dir, trace_files, ranks=ranks, rules=self.rules.user_rules, cache=cache,
            cache_dir=cache_dir, strict=strict, progress=progress, executor=executor,
            max_workers=max_workers,
        )
        if not include_last_profiler_step:
            for rt in self.t:
                _drop_last_step(rt)

    # -- the loaded job --------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        """Loaded ranks, ascending."""
        return self.t.get_ranks()

    @property
    def skipped(self) -> dict[str, str]:
        """Files that could not be loaded, with the reason."""
        return dict(self.t.skipped)

    def metadata(self, rank: int | None = None) -> dict[str, Any]:
        """Metadata of one rank (default: the first loaded)."""
        return self.t.rank(self.ranks[0] if rank is None else rank).meta

    def get_events(self, rank: int | None = None, *, decoded: bool = True) -> pd.DataFrame:
        """A rank's events table; ``decoded=True`` puts names and categories as text."""
        rt = self.t.rank(self.ranks[0] if rank is None else rank)
        return rt.decoded() if decoded else rt.events

    def get_unclassified_kernels(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """GPU kernels that matched no kind rule (counted as computation).

        One row per (rank, kernel name) with count and total duration, longest first.
        Check it for communication kernels the default rules do not know, then add a
        ``Rule("communication", name=...)`` through ``kind_rules``.
        """
        frames = []
        for rt in self._selected(ranks):
            mask = rt.unclassified if len(rt.unclassified) == len(rt.events) else None
            if mask is None or not mask.any():
                continue
            ev = rt.events[mask]
            grouped = ev.groupby("name", observed=True)["dur"].agg(["count", "sum"])
            grouped = grouped.reset_index()
            frames.append(pd.DataFrame({
                "rank": rt.rank,
                "name": np.asarray(rt.symbols, dtype=object)[grouped["name"].to_numpy()],
                "count": grouped["count"].to_numpy(),
                "total_duration(us)": grouped["sum"].to_numpy() / 1e3,
            }))
        if not frames:
            return pd.DataFrame(columns=["rank", "name", "count", "total_duration(us)"])
        out = pd.concat(frames, ignore_index=True)
        return out.sort_values(["rank", "total_duration(us)"], ascending=[True, False],
                               ignore_index=True)

    def get_rank_summary(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Per rank: events, GPU work by kind, GPU busy and idle time.

        See :mod:`hta.analysis.summary` for the definitions.
        """
        return rank_summary(self.t, ranks)

    def describe_kind_rules(self) -> pd.DataFrame:
        """The event-kind rule table in force, user rules first."""
        return pd.DataFrame(self.rules.describe())

    def _selected(self, ranks: Iterable[int] | None) -> list[RankTrace]:
        return [self.t.rank(r) for r in (self.ranks if ranks is None else ranks)]


def _drop_last_step(rt: RankTrace) -> None:
    """Remove the events of the rank's last ProfilerStep (HTA's default behaviour)."""
    steps = rt.events["iteration"]
    if not (steps > 0).any():
        return
    last = int(steps.max())
    keep = (steps != last).to_numpy()
    rt.filter_rows(keep)
    logger.info("rank %d: dropped %d events of ProfilerStep#%d", rt.rank, int((~keep).sum()),
                last)
