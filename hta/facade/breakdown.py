"""Breakdown analyses on ``TraceAnalysis`` (temporal, idle time, kernels, overlap).

Each method calls one function of :mod:`hta.analysis` (whose docstring holds the exact
definitions), shows the figures of :mod:`hta.plots` when ``visualize`` is true, and returns
the DataFrame(s). ``ranks=None`` means every loaded rank; ``iterations=None`` the whole
trace, a list of ``ProfilerStep`` numbers otherwise. Every analysis here runs per rank
through :func:`~hta.model.runner.run` (the kernel and annotation breakdowns in two
passes: per-rank totals, the top names chosen over all ranks, then per-rank statistics),
so on a distributed job (ranks kept out of memory or on Dask workers) it runs next to the
data and only its rows travel; no rank is read into this process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from hta.facade.display import show
from hta.facade.selecting import selected
from hta.model.selection import Iterations, Ranks

if TYPE_CHECKING:
    from hta.model.job import Job

logger = logging.getLogger(__name__)


class BreakdownMixin:
    """Methods added by the breakdown analyses."""

    t: Job

    def get_temporal_breakdown(self, ranks: Ranks = None, iterations: Iterations = None,
                               visualize: bool = True) -> pd.DataFrame:
        """Idle, compute and non-compute GPU time per rank (HTA's table).

        See :func:`hta.analysis.temporal.temporal_breakdown` for the definitions.
        """
        from hta.analysis import temporal
        from hta.plots.temporal import temporal_breakdown_figure

        df = temporal.TEMPORAL_BREAKDOWN.run(self.t, selected(self.t, ranks, iterations))
        _show(visualize, lambda: [temporal_breakdown_figure(df)])
        return df

    def get_temporal_breakdown_detail(self, ranks: Ranks = None, iterations: Iterations = None,
                                      per_iteration: bool = False,
                                      visualize: bool = True) -> pd.DataFrame:
        """The temporal breakdown with exposed communication and memory, per rank or per
        (rank, iteration). See :func:`hta.analysis.temporal.temporal_breakdown_detail`."""
        from hta.analysis import temporal
        from hta.plots.temporal import temporal_breakdown_figure

        df = temporal.TEMPORAL_BREAKDOWN_DETAIL.run(self.t, selected(self.t, ranks, iterations),
                                                    per_iteration)
        _show(visualize, lambda: [temporal_breakdown_figure(df)])
        return df

    def get_idle_time_breakdown(
        self, ranks: Ranks = None, streams: Iterable[int] | int | None = None,
        iterations: Iterations = None, consecutive_kernel_delay_ns: int | None = None,
        show_idle_interval_stats: bool = False, visualize: bool = True,
        visualize_pctg: bool = True, *, consecutive_kernel_delay: int | None = None,
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Idle time per rank and stream by cause: host wait, kernel wait, other.

        Returns HTA's pair: the totals (:func:`hta.analysis.idle.idle_time_breakdown`) and,
        when ``show_idle_interval_stats``, statistics of the gaps in µs
        (:func:`hta.analysis.idle.idle_interval_stats`), else None. The kernel-wait
        threshold ``consecutive_kernel_delay_ns`` is in nanoseconds (default 30 000 ns);
        HTA's keyword ``consecutive_kernel_delay`` is accepted and also read as ns, as HTA
        documents it (HTA itself compared it with µs gaps). ``ranks=None`` means all ranks
        (HTA: rank 0).
        """
        from hta.analysis import idle
        from hta.plots.idle import idle_time_breakdown_figure

        delay = _delay_ns(consecutive_kernel_delay_ns, consecutive_kernel_delay)
        df, stats = idle.idle_time_breakdown_and_stats(
            self.t, selected(self.t, ranks, iterations), streams=streams,
            consecutive_kernel_delay_ns=delay, show_idle_interval_stats=show_idle_interval_stats)
        _show(visualize, lambda: [idle_time_breakdown_figure(df, pctg=visualize_pctg)])
        return df, stats

    def get_gpu_kernel_breakdown(
        self, duration_ratio: float = 0.8, num_kernels: int = 10,
        include_memory_kernels: bool = True, image_renderer: str | None = None,
        ranks: Ranks = None, iterations: Iterations = None, visualize: bool = True,
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """HTA's pair: GPU time by kernel type (overlap classes included), and duration
        statistics of the top kernels per rank. See :mod:`hta.analysis.kernels`."""
        from hta.analysis import kernels
        from hta.plots.kernels import (
            kernel_duration_figure,
            kernel_pies_figure,
            kernel_type_figure,
        )

        _not_bool("duration_ratio", duration_ratio)
        types, table = kernels.gpu_kernel_breakdown(self.t, selected(self.t, ranks, iterations),
                                                    duration_ratio=duration_ratio,
                                                    num_kernels=num_kernels,
                                                    include_memory_kernels=include_memory_kernels)
        def figures() -> list[Any]:
            figs = [kernel_type_figure(types)]
            for kind in table["kernel_type"].unique():
                figs += [kernel_pies_figure(table, kind), kernel_duration_figure(table, kind)]
            return figs

        _show(visualize, figures, image_renderer)
        return types, table

    def get_comm_comp_overlap(self, ranks: Ranks = None, iterations: Iterations = None,
                              visualize: bool = True) -> pd.DataFrame:
        """Per rank, % of communication time overlapped by computation; a rank without
        communication says so in ``note``. See :mod:`hta.analysis.overlap`."""
        from hta.analysis import overlap
        from hta.plots.overlap import comm_comp_overlap_figure

        df = overlap.COMM_COMP_OVERLAP.run(self.t, selected(self.t, ranks, iterations))
        _show(visualize, lambda: [comm_comp_overlap_figure(df)])
        return df

    def get_gpu_user_annotation_breakdown(
        self, use_gpu_annotation: bool = True, visualize: bool = True,
        duration_ratio: float = 0.8, num_kernels: int = 1000,
        allowlist_patterns: Sequence[str] | None = None, image_renderer: str | None = None,
        ranks: Ranks = None, iterations: Iterations = None,
    ) -> pd.DataFrame:
        """Time per user annotation name and rank (GPU ranges by default, CPU ranges with
        ``use_gpu_annotation=False``). See :mod:`hta.analysis.annotations`."""
        from hta.analysis import annotations
        from hta.plots.annotations import (
            user_annotation_duration_figure,
            user_annotation_figure,
        )

        df = annotations.user_annotation_breakdown(self.t, selected(self.t, ranks, iterations),
                                                   use_gpu_annotation=use_gpu_annotation,
                                                   duration_ratio=duration_ratio,
                                                   num_kernels=num_kernels,
                                                   allowlist_patterns=allowlist_patterns)
        _show(visualize and len(df) > 0,
              lambda: [user_annotation_figure(df), user_annotation_duration_figure(df)],
              image_renderer)
        return df


def _show(visualize: bool, figures: Callable[[], list[Any]],
          renderer: str | None = None) -> None:
    """Build the figures (only when they are shown: building one costs more than many
    analyses) and show them."""
    if not visualize:
        return
    for fig in figures():
        if renderer:
            fig.show(renderer=renderer)
        else:
            show(fig)


def _not_bool(name: str, value: object) -> None:
    """Catch HTA's positional ``visualize`` landing in another parameter."""
    if isinstance(value, bool):
        raise TypeError(
            f"{name}={value!r} looks like HTA's positional `visualize`; here {name} comes "
            f"first, so pass visualize={value} by keyword."
        )


def _delay_ns(delay_ns: int | None, hta_delay: int | None) -> int:
    from hta.analysis import idle

    if delay_ns is not None and hta_delay is not None:
        raise ValueError(
            "pass either consecutive_kernel_delay_ns or HTA's consecutive_kernel_delay "
            "(both in ns), not both."
        )
    if hta_delay is not None:
        logger.warning(
            "consecutive_kernel_delay=%s is taken as %s ns, as HTA documents it; HTA "
            "compared it with µs gaps, so its default 30 acted as 30 µs. Pass "
            "consecutive_kernel_delay_ns=%s to keep HTA's effective threshold.",
            hta_delay, hta_delay, int(hta_delay) * 1000,
        )
        return hta_delay
    return idle.DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS if delay_ns is None else delay_ns
