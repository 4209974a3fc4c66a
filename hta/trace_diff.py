"""``TraceDiff``: what changed between a control and a test trace (HTA's API, and more).

HTA's notebook lines run unchanged, with our loaded traces::

    from hta.trace_diff import TraceDiff
    df = TraceDiff.compare_traces(control.t, test.t, device_type="GPU", use_short_name=True)
    TraceDiff.ops_diff(control.t, test.t)            # added / deleted / increased ...
    TraceDiff.visualize_duration_diff(df)

and the job-level view::

    job = TraceDiff.compare_jobs(control, test)     # two TraceAnalysis objects
    print(job.verdict)                               # step time 12.3 ms -> 10.1 ms (-17.9%)

The definitions live in :mod:`hta.analysis.diff` (per-name tables, the job comparison) and
:mod:`hta.analysis.names` (short names); the figures in :mod:`hta.plots.diff`.
"""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from hta.analysis import diff
from hta.analysis.diff import DEFAULT_THRESHOLD_PCT, JobDiff
from hta.analysis.diff.scope import device_type_name
from hta.analysis.findings import find
from hta.analysis.findings.compare import DEFAULT_THRESHOLD_PCT as FINDINGS_THRESHOLD_PCT
from hta.analysis.findings.compare import compare_findings
from hta.analysis.names import short_name
from hta.facade.display import show
from hta.model.job import Job
from hta.model.rules import GPU_KINDS
from hta.model.selection import Selection
from hta.model.trace import Trace
from hta.model.vocabulary import whole_numbers
from hta.plots.diff import counts_diff_figure, duration_diff_figure, job_diff_figure

logger = logging.getLogger(__name__)

__all__ = ["DeviceType", "JobDiff", "LabeledTrace", "TraceDiff"]


class DeviceType(Enum):
    """HTA's device selector; plain strings ``"CPU"``, ``"GPU"``, ``"ALL"`` work too."""

    CPU = 1
    GPU = 2
    ALL = 3


def as_trace(value: Any) -> Job:
    """A loaded job (:class:`~hta.model.job.Job`: a Trace, or ranks kept out of memory or
    on Dask) from a job, a ``TraceAnalysis`` (its ``.t``) or a trace folder (loaded without
    cache writes nor progress bar)."""
    if isinstance(value, (Trace, Job)):
        return value
    inner = getattr(value, "t", None)
    if isinstance(inner, (Trace, Job)):
        return inner
    if isinstance(value, (str, Path)):
        from hta.trace_analysis import TraceAnalysis

        return TraceAnalysis(trace_dir=value, cache=False, progress=False).t
    raise TypeError(
        f"expected a loaded trace (TraceAnalysis, or its .t) or a trace folder, got "
        f"{type(value).__name__}; load it with TraceAnalysis(trace_dir=...)."
    )


class LabeledTrace:
    """A loaded trace with a label (HTA's form of a diff's input).

    Give either ``trace_dir`` (loaded here, every step kept, no cache written) or ``t``:
    a loaded trace, a ``TraceAnalysis`` or an :class:`hta.common.trace.Trace` (parsed here
    if it is not yet). ``TraceDiff``'s methods take it wherever they take a trace.
    """

    def __init__(self, label: str | None = None, t: Any = None,
                 trace_dir: str | Path | None = None) -> None:
        if t is not None:
            if getattr(t, "is_parsed", True) is False:
                t.parse_traces()
            self.t = as_trace(t)
        elif trace_dir is not None and Path(str(trace_dir)).expanduser().is_dir():
            self.t = as_trace(Path(str(trace_dir)).expanduser())
        else:
            raise ValueError("LabeledTrace needs a loaded trace (t=) or an existing trace "
                             f"folder (trace_dir=); got t={t!r}, trace_dir={trace_dir!r}")
        self.label = label or "trace"

    def ranks(self) -> list[int]:
        """The loaded ranks, ascending."""
        return self.t.get_ranks()

    def iterations(self) -> list[int]:
        """The ``ProfilerStep#N`` numbers named in the trace, ascending."""
        steps = set()
        for name in self.t.symbol_table.get_sym_table():
            head, _, number = name.partition("#")
            if head == "ProfilerStep" and number.isdigit():
                steps.add(int(number))
        return sorted(steps)

    def extract_ops(self, rank: int | list[int] | None = None,
                    iteration: int | list[int] | None = None,
                    device_type: DeviceType | str = DeviceType.ALL) -> pd.DataFrame:
        """The events of some ranks, steps and device type (HTA 0.5's method).

        ``rank``: a rank or a list (default: the first loaded rank); several ranks are
        concatenated with a ``rank`` column. ``iteration``: a ``ProfilerStep`` number or a
        list (default: the first step). ``device_type``: ``CPU`` (events not on the GPU),
        ``GPU`` (GPU work, annotations and sync records, by the rule table's kind) or
        ``ALL``. Names stay symbol ids, times integer ns, as in ``t.get_trace``. A rank or
        step the trace does not have raises ``ValueError``.
        """
        ranks = _as_ints(rank, "rank", self.ranks()[:1])
        if not ranks:
            raise ValueError(f"trace {self.label!r} has no rank")
        for r in ranks:
            if r not in self.ranks():
                raise ValueError(f"trace {self.label!r} has no rank {r}; its ranks: "
                                 f"{self.ranks()}")
        known = self.iterations()
        steps = _as_ints(iteration, "iteration", known[:1])
        if not steps:
            raise ValueError(f"trace {self.label!r} has no ProfilerStep; pass the events "
                             "with t.get_trace(rank) instead")
        for step in steps:
            if step not in known:
                raise ValueError(f"trace {self.label!r} has no step {step}; its steps: "
                                 f"{known}")
        frames = [self.t.get_trace(r) for r in ranks]
        events = frames[0] if len(ranks) == 1 else pd.concat(
            [f.assign(rank=r) for r, f in zip(ranks, frames)], ignore_index=True)
        keep = events["iteration"].isin(steps)
        device = device_type_name(device_type)
        if device != "ALL":
            on_gpu = events["kind"].isin(GPU_KINDS)
            keep &= on_gpu if device == "GPU" else ~on_gpu
        return events.loc[keep]

    def get_ops_summary(self, ops: pd.DataFrame) -> pd.DataFrame:
        """Counts and total duration per (category, name) of a set of events, such as
        :meth:`extract_ops` gives (HTA 0.5's method).

        Columns: ``cat``, ``name``, ``short_name`` (text), ``counts``, ``total_duration``
        (µs, as HTA's), ``cat_id``, ``name_id`` (the symbol ids; -1 when ``ops`` holds
        names as text). One row per (cat, name), in the order of their ids.
        """
        columns = ["cat", "name", "short_name", "counts", "total_duration", "cat_id",
                   "name_id"]
        missing = {"cat", "name", "dur"} - set(ops.columns)
        if missing:
            raise ValueError(f"get_ops_summary needs the columns cat, name and dur; missing: "
                             f"{sorted(missing)}")
        if ops.empty:
            dtypes = {"counts": "int64", "total_duration": "float64", "cat_id": "int64",
                      "name_id": "int64"}
            return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, object)) for c in columns})
        grouped = (ops.groupby(["cat", "name"], observed=True, sort=True)["dur"]
                   .agg(["count", "sum"]).reset_index())
        symbols = self.t.symbol_table.get_sym_table()

        def text(values: pd.Series) -> tuple[list[str], list[int]]:
            if pd.api.types.is_integer_dtype(values):
                ids = [int(i) for i in values]
                return [symbols[i] if 0 <= i < len(symbols) else "" for i in ids], ids
            return [str(v) for v in values], [-1] * len(values)

        cat, cat_id = text(grouped["cat"])
        name, name_id = text(grouped["name"])
        return pd.DataFrame({
            "cat": cat, "name": name, "short_name": [short_name(n) for n in name],
            "counts": grouped["count"].astype("int64").to_numpy(),
            "total_duration": grouped["sum"].to_numpy() / 1e3,
            "cat_id": cat_id, "name_id": name_id,
        }, columns=columns)


def _as_ints(value: int | list[int] | None, what: str, default: list[int]) -> list[int]:
    """``value`` as a list of ints (``default`` for None); ``ValueError``, as HTA 0.5's
    ``extract_ops`` raises, for anything else (:func:`hta.model.vocabulary.whole_numbers`)."""
    if value is None:
        return list(default)
    try:
        return whole_numbers(value, what)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


class TraceDiff:
    """Compare two traces: per name (HTA's methods) and job-wide (:meth:`compare_jobs`)."""

    @staticmethod
    def compare_traces(
        control: Any, test: Any, control_rank: int | list[int] | None = None,
        test_rank: int | list[int] | None = None,
        control_iteration: int | list[int] | str | None = None,
        test_iteration: int | list[int] | str | None = None,
        device_type: DeviceType | str = "ALL", use_short_name: bool = False, *,
        control_label: str = "Control", test_label: str = "Test",
    ) -> pd.DataFrame:
        """Counts and total durations (µs) per operator/kernel name in each trace, and their
        differences, with HTA's columns (``Control_counts``, ``Control_total_duration``,
        ``Test_counts``, ``Test_total_duration``, ``diff_counts``, ``diff_duration``,
        ``counts_change_categories``), indexed by ``name`` (``short_name`` with
        ``use_short_name``).

        Ranks default to the first loaded rank, iterations to the first ``ProfilerStep``
        (``"all"``: every event). See :func:`hta.analysis.diff.compare_traces`.
        """
        return diff.compare_traces(
            as_trace(control), as_trace(test), control_rank, test_rank, control_iteration,
            test_iteration, device_type, use_short_name, control_label, test_label)

    @staticmethod
    def ops_diff(
        control: Any, test: Any, control_rank: int | list[int] | None = None,
        test_rank: int | list[int] | None = None,
        control_iteration: int | list[int] | str | None = None,
        test_iteration: int | list[int] | str | None = None,
        device_type: DeviceType | str = "ALL", use_short_name: bool = False,
    ) -> dict[str, list[str]]:
        """Names sorted into ``added``, ``deleted``, ``increased``, ``decreased`` and
        ``unchanged`` by their counts (see :func:`hta.analysis.diff.ops_diff`)."""
        table = TraceDiff.compare_traces(control, test, control_rank, test_rank,
                                         control_iteration, test_iteration, device_type,
                                         use_short_name)
        return diff.ops_diff(table)

    @staticmethod
    def visualize_counts_diff(df: pd.DataFrame, show_image: bool = True,
                              export_image_path: str | None = None) -> go.Figure:
        """Grouped bars of control counts, test counts and their difference per name, from
        :meth:`compare_traces`'s table; returns the figure (HTA returned None)."""
        fig = counts_diff_figure(df)
        _output(fig, show_image, export_image_path)
        return fig

    @staticmethod
    def visualize_duration_diff(df: pd.DataFrame, show_image: bool = True,
                                export_image_path: str | None = None) -> go.Figure:
        """Grouped bars of control and test total durations (µs) and their difference per
        name, from :meth:`compare_traces`'s table; returns the figure."""
        fig = duration_diff_figure(df)
        _output(fig, show_image, export_image_path)
        return fig

    @staticmethod
    def compare_jobs(
        control_analyzer: Any, test_analyzer: Any, *,
        control_ranks: int | list[int] | None = None, test_ranks: int | list[int] | None = None,
        control_iterations: int | list[int] | str | None = None,
        test_iterations: int | list[int] | str | None = None,
        use_short_name: bool = False, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
        visualize: bool = False,
    ) -> JobDiff:
        """Job-level comparison: step time, GPU time breakdowns, kernel-type shares, overlap,
        idle causes and GPU time per kernel and operator, all per step, with a verdict.

        Ranks default to all loaded, iterations to every ``ProfilerStep``. Definitions in
        :func:`hta.analysis.diff.job_diff`; ``visualize`` shows
        :func:`hta.plots.diff.job_diff_figure`.
        """
        job = diff.job_diff(
            as_trace(control_analyzer), as_trace(test_analyzer), control_ranks=control_ranks,
            test_ranks=test_ranks, control_iterations=control_iterations,
            test_iterations=test_iterations, use_short_name=use_short_name,
            threshold_pct=threshold_pct)
        if visualize:
            show(job_diff_figure(job))
        return job

    @staticmethod
    def compare_findings(
        control_analyzer: Any, test_analyzer: Any, *,
        control_ranks: int | list[int] | None = None, test_ranks: int | list[int] | None = None,
        control_iterations: int | list[int] | None = None,
        test_iterations: int | list[int] | None = None,
        threshold_pct: float = FINDINGS_THRESHOLD_PCT,
    ) -> pd.DataFrame:
        """Which findings appeared, disappeared or changed from control to test.

        Runs the findings rules on each side (see ``TraceAnalysis.get_findings``) and
        matches them on (rule, subject); definitions in
        :func:`hta.analysis.findings.compare.compare_findings`.
        """
        control = find(as_trace(control_analyzer), Selection.of(control_ranks, control_iterations))
        test = find(as_trace(test_analyzer), Selection.of(test_ranks, test_iterations))
        return compare_findings(control, test, threshold_pct)


def _output(fig: go.Figure, show_image: bool, path: str | None) -> None:
    if show_image:
        show(fig)
    if path:
        if str(path).lower().endswith((".html", ".htm")):
            fig.write_html(path)
        else:
            fig.write_image(path)  # needs kaleido, as in HTA
        logger.info("wrote %s", path)
