"""Clock offsets on ``TraceAnalysis``: ``get_clock_offsets`` and the shift the cross-rank
views (stragglers, the timeline, the Perfetto export) apply.

The estimate is :func:`hta.analysis.clock.clock_offsets`, over every loaded rank (more
collectives, a steadier answer), computed once and kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from hta.model.job import Job


class ClockMixin:
    """``get_clock_offsets`` and the per-rank shifts the other mixins apply."""

    t: Job

    def get_clock_offsets(self) -> pd.DataFrame:
        """Each rank's clock offset from the reference host, estimated from the ends of
        its collectives: ``rank``, ``host``, ``offset(us)``, ``collectives``,
        ``agreement(us)``, ``worst(us)``, ``applied`` (see :mod:`hta.analysis.clock`).
        Stragglers, collective arrivals, the timeline and the Perfetto export subtract the
        applied offsets (``align_clocks=False`` on those methods keeps the raw clocks)."""
        cache = self.__dict__.setdefault("_clock_cache", {})
        if "offsets" not in cache:
            from hta.analysis.clock import clock_offsets

            cache["offsets"] = clock_offsets(self.t)
        return cache["offsets"].copy()

    def clock_shifts(self, align_clocks: bool = True) -> dict[int, int]:
        """Rank -> ns to subtract from its times to put them on the reference clock (only
        the ranks whose offset is applied); empty with ``align_clocks=False`` or a single
        rank."""
        if not align_clocks or len(self.t.get_ranks()) < 2:
            return {}
        from hta.analysis.clock import applied_offsets

        return applied_offsets(self.get_clock_offsets())
