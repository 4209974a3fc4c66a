"""How close to the hardware, on ``TraceAnalysis``: operator FLOPs, bytes and % of the
roofline, their summary, GPU time per category and the roofline figure.

Each method calls one function of :mod:`hta.analysis.perf` (whose docstrings hold the
definitions) through :func:`~hta.model.runner.run`. ``device`` overrides the
device matched from the trace's ``deviceProperties``: a name of the table
(:data:`hta.model.devices.DEVICES`, e.g. ``"H100 SXM"``) or a
:class:`~hta.model.devices.Device` (:func:`hta.model.devices.custom_device`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from hta.facade.display import show
from hta.facade.selecting import RanksOrSelection, selected
from hta.facade.serving import ServingMixin
from hta.model.selection import Ranks

if TYPE_CHECKING:
    from hta.analysis.perf.op_performance import DeviceArg
    from hta.model.job import Job
    from hta.model.rules import RuleSet


class PerformanceMixin(ServingMixin):
    """``get_op_performance``, ``get_op_performance_summary``, ``get_category_time``,
    ``plot_roofline`` (and the graph-capture merge of :class:`ServingMixin`)."""

    t: Job
    rules: RuleSet

    def get_op_performance(self, ranks: RanksOrSelection = None, device: DeviceArg = None
                           ) -> pd.DataFrame:
        """One row per operator call that launched GPU work, at the innermost operator:
        ``rank, op, category, input_dims, input_types, kernel_time(us), flops, bytes,
        tflops_per_s, tb_per_s, flops_per_byte, bound, pct_of_peak`` (NaN where no model
        applies or shapes were not recorded: profile with ``record_shapes=True``).
        Graph-replayed operator calls found in ``capture_traces/`` are rows with
        ``captured`` true (:meth:`merge_capture_traces`).
        See :func:`hta.analysis.perf.op_performance.op_performance`."""
        from hta.analysis.perf.op_performance import OP_PERFORMANCE

        self.merge_capture_traces()
        return OP_PERFORMANCE.run(self.t, selected(self.t, ranks), device=device,
                                  rules=self.rules)

    def get_op_performance_summary(self, ranks: Ranks = None, device: DeviceArg = None,
                                   by: str = "shape") -> pd.DataFrame:
        """``by="shape"``: per rank, operator and shapes: calls, time, mean TFLOP/s and
        TB/s, % of peak (:func:`hta.analysis.perf.summary.op_performance_summary`).
        ``by="category"``: per rank and category
        (:func:`hta.analysis.perf.summary.op_performance_by_category`). All GPU time by
        category, work outside operators included, is :meth:`get_category_time`."""
        from hta.analysis.perf.summary import OP_SUMMARY, op_performance_by_category

        if by not in ("shape", "category"):
            raise ValueError(f"by: expected 'shape' or 'category', got {by!r}")
        selection = selected(self.t, ranks)
        self.merge_capture_traces()
        if by == "shape":  # per rank where the ranks are: the per-call rows stay there
            return OP_SUMMARY.run(self.t, selection, device=device, rules=self.rules)
        return op_performance_by_category(self.get_op_performance(selection, device))

    def get_category_time(self, ranks: Ranks = None) -> pd.DataFrame:
        """GPU time per rank and category (GEMM, attention, ..., copy/memset, other).
        See :func:`hta.analysis.perf.summary.category_time`."""
        from hta.analysis.perf.summary import CATEGORY_TIME

        self.merge_capture_traces()
        return CATEGORY_TIME.run(self.t, selected(self.t, ranks), rules=self.rules)

    def plot_roofline(self, rank: int | None = None, device: DeviceArg = None,
                      visualize: bool = True) -> Any:
        """The roofline of one rank (default: the first): a point per operator and shape,
        sized by time, on the device's roofs. Returns the Plotly figure (None when the
        device is unknown: pass ``device=``)."""
        from hta.analysis.perf.op_performance import rank_device
        from hta.analysis.perf.roofline import roof_curves, roofs_of
        from hta.analysis.perf.summary import op_performance_summary
        from hta.plots.roofline import roofline_figure

        rank = self.t.get_ranks()[0] if rank is None else rank
        dev = rank_device(self.t.rank(rank), device)
        if dev is None:
            return None
        rows = self.get_op_performance(rank, dev)
        summary = op_performance_summary(rows)
        modelled = summary[summary["flops"].notna()]
        fig = roofline_figure(modelled, roof_curves(dev, roofs_of(rows)), dev.name)
        if visualize:
            show(fig)
        return fig

