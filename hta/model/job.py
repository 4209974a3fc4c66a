"""The interface every loaded job offers, wherever its ranks are.

Two classes implement :class:`Job`:

* :class:`hta.model.trace.Trace`: every rank in this process;
* :class:`hta.job.distributed.DistributedJob`: the ranks stay where they were loaded
  (Arrow entries read by local worker processes, or the memory of Dask workers).

Analyses reach the ranks through the runner, :func:`hta.model.runner.run`: a per-rank
work (:class:`hta.model.runner.RankWork`) runs next to the data and only its table
travels. :meth:`Job.map_ranks` is the runner's transport, internal to it (analyses never
call it). :meth:`Job.rank` reads one whole rank into this process; the facade uses it
only where a method is about one rank (critical path, a kernel-sequence overlay) and
says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from hta.model.trace import RankMapper, RankTrace, SymbolView, Trace
from hta.model.vocabulary import Ranks

#: A function changing one rank in place (e.g. dropping the last profiler step).
Transform = Callable[[RankTrace], None]


@runtime_checkable
class Job(RankMapper, Protocol):
    """A loaded job: its ranks, a way to run per-rank work where they are, its symbols.

    ``trace_dir``: where the traces came from; ``skipped``: file -> why it was left out
    (unreadable, or its rank lost during an analysis); ``symbols``: the shared symbol
    table (id -> text) of the events' ``name``/``cat`` ids seen through :meth:`rank`.
    """

    trace_dir: str
    skipped: dict[str, str]
    symbols: list[str]

    def get_ranks(self) -> list[int]:
        """The loaded ranks, ascending."""
        ...

    def selected_ranks(self, ranks: Ranks = None) -> list[int]:
        """``ranks`` as a sorted list of loaded ranks (all when ``None``); an unknown
        rank raises ``KeyError`` naming the loaded ones."""
        ...

    def map_ranks(self, fn: Callable[..., Any], ranks: Ranks = None,
                  args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
                  description: str = "") -> list[Any]:
        """The runner's transport (internal: call :func:`hta.model.runner.run`): run
        ``fn(trace, ranks, *args, **kwargs)`` where the ranks are: one call over the
        selected ranks in memory, or one call per rank on a one-rank trace; the results
        in a list."""
        ...

    def rank(self, rank: int) -> RankTrace:
        """One whole rank in this process (a distributed job reads it: use it only for
        methods about one rank)."""
        ...

    def meta(self, rank: int) -> dict[str, Any]:
        """One rank's metadata, without reading its events."""
        ...

    def rank_events(self, rank: int) -> int:
        """How many events one rank holds, without reading it (a distributed job counted
        them when it loaded the rank, before any transform)."""
        ...

    def get_trace(self, rank: int) -> pd.DataFrame:
        """One rank's events table (HTA's ``analyzer.t.get_trace``); reads the rank."""
        ...

    def get_all_traces(self) -> Mapping[int, pd.DataFrame]:
        """Every rank's events table (a distributed job reads each when looked up)."""
        ...

    @property
    def symbol_table(self) -> SymbolView:
        """HTA's view of the symbol table."""
        ...

    def add_transform(self, transform: Transform) -> None:
        """Apply ``transform`` to every rank (now, or wherever each rank is read)."""
        ...

    def to_memory(self) -> Trace:
        """Every rank in this process, as a :class:`~hta.model.trace.Trace`."""
        ...

    def close(self) -> None:
        """Free what the ranks hold outside this process."""
        ...

    def __iter__(self) -> Iterator[RankTrace]:
        """Every rank, one after the other (a distributed job reads each)."""
        ...

    def __len__(self) -> int:
        """Number of loaded ranks."""
        ...


def missing_ranks(job: Job, requested: Iterable[int] | None = None) -> list[int]:
    """Ranks of the job that have no loaded trace: every rank below the ``world_size``
    the loaded ranks' metadata gives (the largest, where they disagree) that was not
    loaded, among ``requested`` when the load asked for some ranks only. Empty when no
    rank says its world size. A skipped (unreadable) file's rank counts as missing."""
    present = set(job.get_ranks())
    sizes = [job.meta(r).get("world_size") for r in present]
    world = max((int(s) for s in sizes if isinstance(s, int) and s > 0), default=0)
    wanted = set(range(world)) if requested is None else \
        {int(r) for r in requested if 0 <= int(r) < world}
    return sorted(wanted - present)
