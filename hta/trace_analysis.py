"""``TraceAnalysis``: the HTA-compatible entry point.

``TraceAnalysis(trace_dir=...)`` loads every rank of a job (see
:func:`hta.job.load.load_trace` for every option) and exposes the analyses as
methods. An HTA notebook's first lines run unchanged::

    from hta.trace_analysis import TraceAnalysis
    analyzer = TraceAnalysis(trace_dir="traces/")
    df = analyzer.t.get_trace(0)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pandas as pd

from hta.facade.breakdown import BreakdownMixin
from hta.facade.collectives import CollectivesMixin
from hta.facade.counters import CountersMixin
from hta.facade.critical_path import CriticalPathMixin
from hta.facade.findings import FindingsMixin
from hta.facade.memory import MemoryMixin
from hta.facade.performance import PerformanceMixin
from hta.facade.pipeline import PipelineMixin
from hta.facade.selecting import selected
from hta.facade.steps_and_ops import StepsAndOpsMixin
from hta.facade.timeline import TimelineMixin
from hta.facade.whatif import WhatIfMixin
from hta.model.rules import Rule, RuleSet
from hta.model.vocabulary import rank_list

if TYPE_CHECKING:
    from hta.job.executors import Executor
    from hta.model.job import Job

logger = logging.getLogger(__name__)


class TraceAnalysis(BreakdownMixin, CountersMixin, CriticalPathMixin, FindingsMixin,
                    TimelineMixin, PipelineMixin, StepsAndOpsMixin, MemoryMixin,
                    CollectivesMixin, PerformanceMixin, WhatIfMixin):
    """Load a job's traces and analyse them.

    Args:
        trace_dir: folder holding one Kineto trace (``.json``/``.json.gz``) per rank.
        trace_files: rank -> file mapping (HTA's form) or a list of files, instead of
            scanning ``trace_dir``.
        ranks: load only these ranks.
        include_last_profiler_step: keep the events of the last ``ProfilerStep#N``.
            True by default: every event is kept (HTA drops the last step silently).
        cache: reuse/write the Arrow IPC cache (beside the traces, else the user cache).
        cache_dir: where the cache lives, instead of the default.
        strict: raise on the first bad file instead of skipping and reporting it.
        progress: show a progress bar (terminal or Jupyter).
        kind_rules: extra :class:`~hta.model.rules.Rule` objects, applied before the
            defaults, to classify kernels and runtime calls.
        executor: run per-rank work on this executor instead of local processes.
        max_workers: worker processes for the local executor, and for the findings of
            an in-memory job of many ranks (:mod:`hta.model.spread`; default: CPUs).
        client: a ``distributed.Client``: the Dask cluster's workers load the ranks, keep
            them, and run the per-rank analyses next to them (``pip install 'hta[dask]'``).
        in_memory: ``True`` reads every rank into this process; ``False`` keeps them
            where they were loaded (Arrow IPC entries, or Dask workers) and reads one rank
            at a time; ``None`` decides (see :func:`hta.job.load.load_trace`).
        storage_options: options for fsspec when ``trace_dir`` is a URL (``s3://``...).
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
        client: Any = None,
        in_memory: bool | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        from hta.job.load import drop_last_step, load_trace

        self.trace_dir = str(trace_dir) if trace_dir is not None else None
        self.storage_options = storage_options  # the exporters read the files again
        self.rules = RuleSet(kind_rules)
        self._requested_ranks = rank_list(ranks)
        self.t: Job = load_trace(
            trace_dir, trace_files, ranks=ranks, rules=self.rules.user_rules, cache=cache,
            cache_dir=cache_dir, strict=strict, progress=progress, executor=executor,
            max_workers=max_workers, client=client, in_memory=in_memory,
            storage_options=storage_options,
        )
        if not include_last_profiler_step:
            self.t.add_transform(drop_last_step)

    def close(self) -> None:
        """Free what the loaded ranks hold outside this process (temporary Arrow
        entries, Dask workers' memory, the what-if replay graphs kept there); nothing to
        do for an in-memory trace."""
        replay = self.__dict__.pop("_replay", None)
        if replay is not None:
            replay.release()
        self.t.close()

    # -- the loaded job --------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        """Loaded ranks, ascending."""
        return self.t.get_ranks()

    @property
    def missing_ranks(self) -> list[int]:
        """Ranks below the job's world size (from the traces' ``distributedInfo``) with no
        loaded trace: no file for them in the folder, or their file was skipped. Ranks left
        out on purpose (``ranks=``) are not missing. Cross-rank figures (spread, stragglers,
        collectives) cover the loaded ranks only."""
        from hta.model.job import missing_ranks

        return missing_ranks(self.t, self._requested_ranks)

    @property
    def skipped(self) -> dict[str, str]:
        """Files that could not be loaded, with the reason."""
        return dict(self.t.skipped)

    def metadata(self, rank: int | None = None) -> dict[str, Any]:
        """Metadata of one rank (default: the first loaded); the rank is not read."""
        return self.t.meta(self.ranks[0] if rank is None else rank)

    def get_events(self, rank: int | None = None, *, decoded: bool = True) -> pd.DataFrame:
        """A rank's events table; ``decoded=True`` puts names and categories as text.
        Reads that one rank into this process (a distributed job keeps it in its LRU)."""
        rt = self.t.rank(self.ranks[0] if rank is None else rank)
        return rt.decoded() if decoded else rt.events

    def get_unclassified_kernels(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """GPU kernels that matched no kind rule (counted as computation).

        One row per (rank, kernel name) with count and total duration, longest first.
        Check it for communication kernels the default rules do not know, then add a
        ``Rule("communication", name=...)`` through ``kind_rules``.
        """
        from hta.analysis.unclassified import UNCLASSIFIED_KERNELS

        return UNCLASSIFIED_KERNELS.run(self.t, selected(self.t, ranks))

    def get_rank_summary(self, ranks: Iterable[int] | None = None) -> pd.DataFrame:
        """Per rank: events, GPU work by kind, GPU busy and idle time.

        See :mod:`hta.analysis.summary` for the definitions. On a lazy trace (Dask
        workers, or ranks kept on disk) each rank's row is computed where the rank is.
        """
        from hta.analysis.summary import RANK_SUMMARY

        return RANK_SUMMARY.run(self.t, selected(self.t, ranks))

    def describe_kind_rules(self) -> pd.DataFrame:
        """The event-kind rule table in force, user rules first."""
        return pd.DataFrame(self.rules.describe())


def __getattr__(name: str) -> Any:
    # Names importable from here as in HTA and earlier versions, imported on first use
    # (PEP 562) so that ``import hta.trace_analysis`` stays light.
    module: ModuleType
    if name in ("UNCLASSIFIED_COLUMNS", "sorted_unclassified", "unclassified_kernels"):
        from hta.analysis import unclassified
        module = unclassified
    elif name == "TimeSeriesTypes":
        from hta.export import counters_trace
        module = counters_trace
    elif name == "Executor":
        from hta.job import executors
        module = executors
    elif name == "Job":
        from hta.model import job
        module = job
    elif name == "RankTrace":
        from hta.model import trace
        module = trace
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value
