"""Methods of HTA's main branch that HTA 0.5 lacked (steps, ATen op delays, kernels with
their annotation, queue summary from a series).

Each calls one function of :mod:`hta.analysis` (whose docstring holds the definitions);
the per-rank ones go through :func:`~hta.model.runner.run` (on a distributed job,
where the rank is). :meth:`StepsAndOpsMixin.get_gpu_kernels_with_user_annotations` returns
one rank's events and reads that rank. Names, arguments and
return types are HTA main's; ``docs/analyses/hta_main.md`` says where the answers differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from hta.facade.selecting import selected
from hta.model.selection import Iterations, Ranks, step_table

if TYPE_CHECKING:
    from hta.model.job import Job


class StepsAndOpsMixin:
    """``get_profiler_steps``, ``get_event_counts``, ``get_aten_op_kernels_and_delay``,
    ``get_gpu_kernels_with_user_annotations``,
    ``get_queue_length_summary_from_time_series``."""

    t: Job

    def get_profiler_steps(self) -> list[int]:
        """The ``ProfilerStep`` numbers found on any loaded rank, ascending.

        See :mod:`hta.analysis.steps` (per-rank spans: :meth:`get_profiler_step_spans`).
        """
        from hta.analysis import steps

        return steps.step_numbers(self.get_profiler_step_spans())

    def get_event_counts(self, ranks: Ranks = None,
                         iterations: Iterations = None) -> pd.DataFrame:
        """Per rank and event kind: how many events, and their summed duration in µs
        (definitions: :mod:`hta.analysis.event_counts`); with ``iterations``, only the
        events of those steps."""
        from hta.analysis import event_counts

        return event_counts.EVENT_COUNTS.run(self.t, selected(self.t, ranks, iterations))

    def get_profiler_step_spans(self, ranks: Ranks = None
                                ) -> pd.DataFrame:
        """Per rank and step: start, end and duration in ns: the model's step table
        (:func:`hta.model.selection.step_table`)."""
        return step_table(self.t, selected(self.t, ranks))

    def get_aten_op_kernels_and_delay(
        self, ranks: Ranks = None,
        sort_by: Sequence[str] | str | None = None,
    ) -> dict[int, pd.DataFrame]:
        """Per rank (HTA's dict), per ATen op and kernel sequence: occurrences, mean delay
        from the op's start to its first launch and from that launch to its first kernel
        (µs). ``ranks=None`` means every loaded rank (HTA: rank 0); a rank whose ops
        launch no kernel maps to an empty frame. See :mod:`hta.analysis.aten_ops`."""
        from hta.analysis import aten_ops

        selection = selected(self.t, ranks)
        df = aten_ops.ATEN_OP_KERNELS.run(self.t, selection, aten_ops.sort_columns(sort_by))
        wanted = selection.rank_list
        cols = [c for c in aten_ops.COLUMNS if c != "rank"]
        return {int(r): df.loc[df["rank"] == r, cols].reset_index(drop=True)
                for r in (self.t.get_ranks() if wanted is None else wanted)}

    def get_gpu_kernels_with_user_annotations(
        self, rank: int, expand_names: bool = True, shorten_names: bool = True,
    ) -> pd.DataFrame | None:
        """The rank's GPU kernels with the GPU user annotation each ran under (column
        ``user_annotation``, and ``s_user_annotation`` as text); None when the rank has no
        GPU annotations. See :mod:`hta.analysis.kernel_annotations`. A table of one rank's
        events (its symbol ids in the job's table): on a distributed job that one rank is
        read into this process."""
        from hta.analysis import kernel_annotations

        return kernel_annotations.gpu_kernels_with_user_annotations(
            self.t, rank, expand_names, shorten_names)

    def get_queue_length_summary_from_time_series(
        self, queue_length_dict: pd.DataFrame | Mapping[int, pd.DataFrame],
    ) -> pd.DataFrame:
        """Queue length statistics per rank and stream of a series from
        :meth:`get_queue_length_time_series` (or HTA's ``{rank: DataFrame}``), the same
        table as :meth:`get_queue_length_summary`. See :mod:`hta.analysis.queue_summary`."""
        from hta.analysis import queue_summary

        return queue_summary.queue_length_summary_from_time_series(self.t, queue_length_dict)
