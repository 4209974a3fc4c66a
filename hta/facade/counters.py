"""Launch statistics, queue length, memory bandwidth, counters and operator views.

Each method calls one function of :mod:`hta.analysis` or :mod:`hta.export` (whose
docstring holds the exact definitions), shows the figures of :mod:`hta.plots` when
``visualize`` is true, and returns the result. ``ranks=None`` means every loaded rank (HTA:
rank 0). Results are single DataFrames with a ``rank`` column where HTA returns a dict or
list per rank. See ``docs/counters.md`` for the definitions side by side with HTA's.

Every analysis runs per rank through :func:`~hta.model.runner.run` (on a distributed
job, where the rank is; only its rows travel). Two methods also read ranks into this
process: :meth:`CountersMixin.get_frequent_cuda_kernel_sequences` reads its one rank to
write the overlaid trace, and :meth:`CountersMixin.generate_trace_with_counters` reads
each selected rank to write its file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hta.analysis import launch, queue
from hta.facade.display import show
from hta.facade.per_rank import per_rank_frame
from hta.facade.selecting import selected
from hta.model.selection import Ranks

if TYPE_CHECKING:
    from hta.export.counters_trace import TimeSeriesTypes
    from hta.model.job import Job

logger = logging.getLogger(__name__)


__all__ = ["CountersMixin", "TimeSeriesTypes"]


class CountersMixin:
    """Methods added by the launch/queue/bandwidth/operator analyses."""

    t: Job

    def get_cuda_kernel_launch_stats(
        self, ranks: Ranks = None, runtime_cutoff: float = launch.RUNTIME_CUTOFF_US,
        launch_delay_cutoff: float = launch.LAUNCH_DELAY_CUTOFF_US,
        include_memory_events: bool = True, visualize: bool = True,
    ) -> pd.DataFrame:
        """Launch call duration, GPU duration and launch delay of every launched GPU event.

        Cutoffs in µs. See :func:`hta.analysis.launch.cuda_kernel_launch_stats`; the
        pairing counts are in :meth:`get_launch_pairing_summary`.
        """
        from hta.plots.launch import launch_stats_figure

        df = launch.cuda_kernel_launch_stats(self.t, selected(self.t, ranks),
                                             runtime_cutoff=runtime_cutoff,
                                             launch_delay_cutoff=launch_delay_cutoff,
                                             include_memory_events=include_memory_events)
        if visualize:
            show(launch_stats_figure(df, runtime_cutoff, launch_delay_cutoff))
        return per_rank_frame(df)

    def get_launch_pairing_summary(self, ranks: Ranks = None) -> pd.DataFrame:
        """Per rank, launches and GPU events with and without a partner.

        See :func:`hta.analysis.launch.launch_pairing_summary`.
        """
        return launch.launch_pairing_summary(self.t, selected(self.t, ranks))

    def get_queue_length_time_series(self, ranks: Ranks = None,
                                     visualize: bool = False) -> pd.DataFrame:
        """Queue length per rank and stream, one row per change (a step function).

        See :func:`hta.analysis.queue.queue_length_time_series`.
        """
        from hta.plots.queue import queue_length_figure

        df = queue.queue_length_time_series(self.t, selected(self.t, ranks))
        if visualize:
            show(queue_length_figure(df))
        return df

    def get_queue_length_summary(self, ranks: Ranks = None) -> pd.DataFrame:
        """Time-weighted queue length statistics per rank and stream.

        See :func:`hta.analysis.queue.queue_length_summary`.
        """
        return queue.queue_length_summary(self.t, selected(self.t, ranks))

    def get_time_spent_blocked_on_full_queue(
        self, queue_length_threshold: int | pd.DataFrame = queue.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
        ranks: Ranks = None, *, max_queue_length: int | None = None,
    ) -> pd.DataFrame:
        """Time each stream's queue holds at least ``queue_length_threshold`` entries.

        HTA's call form ``(queue_length_series, max_queue_length=...)`` is accepted: pass
        the DataFrame of :meth:`get_queue_length_time_series` first. See
        :func:`hta.analysis.queue.time_spent_blocked_on_full_queue`.
        """
        series = None
        threshold = queue_length_threshold
        if isinstance(queue_length_threshold, pd.DataFrame):
            series = queue_length_threshold
            threshold = queue.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM
        elif isinstance(queue_length_threshold, dict):
            raise TypeError("pass the DataFrame of get_queue_length_time_series() (one frame "
                            "with a rank column), not a dict per rank")
        if max_queue_length is not None:
            threshold = max_queue_length
        return queue.time_spent_blocked_on_full_queue(self.t, int(threshold),
                                                      selected(self.t, ranks), series=series)

    def get_memory_bw_time_series(self, ranks: Ranks = None,
                                  visualize: bool = False) -> pd.DataFrame:
        """Concurrent copy bandwidth (GB/s) per rank, device and direction over time.

        See :func:`hta.analysis.bandwidth.memory_bw_time_series`.
        """
        from hta.analysis import bandwidth
        from hta.plots.bandwidth import memory_bw_figure

        df = bandwidth.memory_bw_time_series(self.t, selected(self.t, ranks))
        if visualize:
            show(memory_bw_figure(df))
        return df

    def get_memory_bw_summary(self, ranks: Ranks = None,
                              visualize: bool = False) -> pd.DataFrame:
        """Per rank and direction: copies, bytes, busy time and per-copy bandwidth stats.

        See :func:`hta.analysis.bandwidth.memory_bw_summary`.
        """
        from hta.analysis import bandwidth
        from hta.plots.bandwidth import memory_bw_summary_figure

        df = bandwidth.memory_bw_summary(self.t, selected(self.t, ranks))
        if visualize:
            show(memory_bw_summary_figure(df))
        return df

    def generate_trace_with_counters(
        self, time_series: TimeSeriesTypes | str | Iterable[str] | None = None,
        ranks: Ranks = None, output_suffix: str = "_with_counters",
        output_dir: str | Path | None = None,
    ) -> dict[int, Path]:
        """Write each rank's trace again with ``Queue Length`` and ``Memcpy BW`` counter
        tracks; returns rank -> written file.

        See :func:`hta.export.counters_trace.generate_trace_with_counters`.
        """
        from hta.export.counters_trace import generate_trace_with_counters

        return generate_trace_with_counters(self.t, time_series,
                                            selected(self.t, ranks).rank_list,
                                            output_suffix, output_dir)

    def get_frequent_cuda_kernel_sequences(
        self, operator_name: str, output_dir: str | Path, min_pattern_len: int = 3,
        rank: int = 0, top_k: int = 5, visualize: bool = False, **hta_options: Any,
    ) -> pd.DataFrame:
        """The GPU kernel sequences most often launched under operators named like
        ``operator_name``; writes ``overlaid_<trace>`` with the ``top_k`` marked into
        ``output_dir``.

        Parameters in HTA's order (``rank`` before ``top_k``). See
        :func:`hta.analysis.sequences.frequent_cuda_kernel_sequences` and
        :func:`hta.export.patterns_trace.write_overlaid_trace`. HTA's
        ``compress_other_kernels`` is accepted and ignored: other events are kept as they
        are. The patterns are found where the rank is; writing the overlay reads that one
        rank into this process (on a distributed job, explicitly, through ``t.rank``).
        """
        from hta.analysis import sequences
        from hta.export.patterns_trace import write_overlaid_trace
        from hta.plots.operators import frequent_sequences_figure

        unknown = set(hta_options) - {"compress_other_kernels"}
        if unknown:
            raise TypeError(f"unexpected argument(s): {', '.join(sorted(unknown))}")
        df = sequences.frequent_cuda_kernel_sequences(self.t, operator_name, rank,
                                                      min_pattern_len)
        top = df.head(max(int(top_k), 0))
        if len(top):
            write_overlaid_trace(self.t.rank(rank), top, output_dir)
        else:
            logger.warning("rank %d: no operator named like %r launched %d or more GPU events; "
                           "no overlaid trace written", rank, operator_name, min_pattern_len)
        if visualize:
            show(frequent_sequences_figure(top, rank))
        return df.drop(columns=["event_indices"])

    def get_operator_breakdown(self, ranks: Ranks = None, group_by_input_shape: bool = False,
                               visualize: bool = True) -> pd.DataFrame:
        """Per operator (and input shapes): calls, CPU total/self time, GPU time, kernels.

        See :func:`hta.analysis.operators.operator_breakdown`.
        """
        from hta.analysis import operators
        from hta.plots.operators import operator_breakdown_figure

        df = operators.operator_breakdown(self.t, selected(self.t, ranks),
                                          group_by_input_shape=group_by_input_shape)
        if visualize:
            show(operator_breakdown_figure(df))
        return df

    def get_cupti_counter_data_with_operators(self, ranks: Ranks = None) -> pd.DataFrame:
        """CUPTI range-profiler counters per kernel with the operator stack of its launch.

        See :func:`hta.analysis.cupti.cupti_counter_data_with_operators`.
        """
        from hta.analysis import cupti

        return per_rank_frame(cupti.cupti_counter_data_with_operators(
            self.t, selected(self.t, ranks)))
