"""One self-contained HTML report of a job: every analysis's figures and tables.

``build_report(analyzer)`` returns the HTML text, ``write_report(analyzer, path)`` writes
it. The file works offline: plotly.js is embedded once (``plotly.offline.get_plotlyjs()``),
with the CSS and the little script that draws the figures and follows the table of
contents. Sections, in order: the job at a glance (:mod:`hta.report.overview`), temporal
breakdown, idle time, GPU kernels, communication/computation overlap, user annotations,
kernel launches, launch queue length, memory bandwidth, operators, critical path, and the
kernels no kind rule matched. Each section shows the figures of :mod:`hta.plots` drawn from
the DataFrames of :mod:`hta.analysis`, the tables themselves, and the analysis module's
docstring as its definitions. A section whose analysis fails on the trace says so, with
the reason, instead of sinking the report.

Safety: the page is rendered by Jinja2 with autoescape on, so every name from the trace
(kernels, operators, annotations, file names) is text; figures travel as one JSON document
in a ``<script type="application/json">`` block with ``<``, ``>``, ``&`` and the JS line
separators escaped as ``\\uXXXX``, so no name can close the block or open a tag.
"""

from __future__ import annotations

import datetime as _dt
import inspect
import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd
import plotly.io as pio
import plotly.offline

from hta import __version__
from hta.plots._common import plain_text_names

logger = logging.getLogger(__name__)

#: Rows shown per table (the rest is counted in a note under it).
MAX_TABLE_ROWS = 50
#: Points kept per time-series figure line before the report thins it (every k-th row).
MAX_SERIES_POINTS = 200_000
_TEMPLATES = Path(__file__).resolve().parent / "templates"
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                 0x2028: "\\u2028", 0x2029: "\\u2029"}


@dataclass
class Table:
    """A table shown as HTML: headers and rows of text (already formatted)."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    note: str = ""


@dataclass
class Figure:
    """A Plotly figure: the id of its ``div`` and its JSON (``plotly.io.to_json``)."""

    id: str
    title: str
    json: str


@dataclass
class Section:
    """One part of the report, listed in the table of contents."""

    id: str
    title: str
    intro: str = ""
    definitions: str = ""
    source: str = ""
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""


# -- formatting ------------------------------------------------------------------------------
def format_cell(value: Any) -> str:
    """A table cell: integers with separators, floats with 3 decimals, ``-`` when missing."""
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        return "-" if not math.isfinite(float(value)) else f"{float(value):,.3f}"
    if value is pd.NA or value is pd.NaT:
        return "-"
    return str(value)


def table_of(frame: pd.DataFrame, title: str, max_rows: int = MAX_TABLE_ROWS,
             columns: Sequence[str] | None = None, note: str = "") -> Table:
    """A :class:`Table` of the first ``max_rows`` rows of ``frame`` (headers = column names,
    which carry their units)."""
    if columns is not None:
        frame = frame[[c for c in columns if c in frame.columns]]
    shown = frame.head(max_rows)
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(
        frame[c]) for c in frame.columns]
    rows = [[format_cell(v) for v in row] for row in shown.itertuples(index=False, name=None)]
    if len(frame) > max_rows:
        more = f"first {max_rows} of {len(frame):,} rows"
        note = f"{note} ({more})" if note else more.capitalize() + "."
    return Table(title, [str(c) for c in frame.columns], rows, numeric, note)


def figure_json(fig: Any) -> str:
    """The figure as JSON text safe inside a ``<script>`` block (see the module docstring)."""
    return pio.to_json(fig, validate=False, pretty=False).translate(_JSON_ESCAPES)


def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__ or "")


def _thin(series: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, str]:
    """At most :data:`MAX_SERIES_POINTS` rows per line (every k-th row, last kept)."""
    if series.empty:
        return series, ""
    sizes = series.groupby(keys, sort=False)["ts"].transform("size")
    step = np.maximum(1, np.ceil(sizes / MAX_SERIES_POINTS)).astype(np.int64)
    pos = series.groupby(keys, sort=False).cumcount()
    keep = (pos % step == 0) | (pos == sizes - 1)
    if keep.all():
        return series, ""
    return series[keep.to_numpy()], (
        f"Lines with more than {MAX_SERIES_POINTS:,} points are drawn from every k-th point "
        "(the tables use every point).")


# -- sections --------------------------------------------------------------------------------
class _Context:
    def __init__(self, analyzer: Any, ranks: list[int], iterations: list[int] | None,
                 critical_path_rank: int | None) -> None:
        from hta.report.overview import restrict_to_iterations

        self.analyzer = analyzer
        self.trace = analyzer.t
        self.ranks = ranks
        self.iterations = iterations
        self.restricted = restrict_to_iterations(analyzer.t, iterations)
        self.critical_path_rank = critical_path_rank
        self._n = 0

    def figure(self, fig: Any) -> Figure:
        self._n += 1
        title = fig.layout.title.text or f"figure {self._n}"
        return Figure(f"fig-{self._n}", str(title), figure_json(plain_text_names(fig)))


def _overview(ctx: _Context, s: Section) -> None:
    from hta.report import overview

    ov = overview.job_overview(ctx.trace, ctx.ranks, ctx.iterations)
    s.definitions = _doc(overview)
    s.source = "hta.report.overview.job_overview"
    job = ov.job
    if job.get("slowest_rank") is not None and len(ctx.ranks) > 1:
        by = job["slowest_rank_by"]
        lo, hi = job["fastest_rank_value"], job["slowest_rank_value"]
        more = f" ({100.0 * (hi - lo) / lo:+.1f}%)" if lo > 0 else ""
        s.notes.append(f"Slowest rank: {job['slowest_rank']}, by {by}: {hi:,.3f} µs against "
                       f"{lo:,.3f} µs on rank {job['fastest_rank']}{more}.")
    s.tables.append(table_of(ov.ranks, "Per rank"))
    if len(ov.spread):
        s.tables.append(table_of(ov.spread, "Spread across ranks (µs)"))
    if len(ov.top_kernels):
        s.tables.append(table_of(ov.top_kernels, "Top kernels over the selected ranks"))


def _temporal(ctx: _Context, s: Section) -> None:
    from hta.analysis import temporal
    from hta.plots.temporal import temporal_breakdown_figure

    s.definitions, s.source = _doc(temporal), "hta.analysis.temporal.temporal_breakdown_detail"
    df = temporal.temporal_breakdown_detail(ctx.trace, ctx.ranks, ctx.iterations)
    if not (df["kernel_time(us)"] > 0).any():
        s.notes.append("No GPU work (kernels, memcpy, memset) in the selection.")
        s.tables.append(table_of(df, "Per rank"))
        return
    s.figures.append(ctx.figure(temporal_breakdown_figure(df)))
    s.tables.append(table_of(df, "Per rank"))
    per_step = temporal.temporal_breakdown_detail(ctx.trace, ctx.ranks, ctx.iterations,
                                                  per_iteration=True)
    if per_step["iteration"].nunique() > 1:
        s.figures.append(ctx.figure(temporal_breakdown_figure(per_step)))
        s.tables.append(table_of(per_step, "Per rank and step"))


def _idle(ctx: _Context, s: Section) -> None:
    from hta.analysis import idle
    from hta.plots.idle import idle_time_breakdown_figure

    s.definitions, s.source = _doc(idle), "hta.analysis.idle.idle_time_breakdown"
    df = idle.idle_time_breakdown(ctx.trace, ctx.ranks, None, ctx.iterations)
    if df.empty or df["idle_intervals"].sum() == 0:
        s.notes.append("No GPU stream in the selection has a gap between two GPU events.")
        if len(df):
            s.tables.append(table_of(df, "Idle time per rank, stream and cause"))
        return
    s.figures.append(ctx.figure(idle_time_breakdown_figure(df, pctg=True)))
    s.figures.append(ctx.figure(idle_time_breakdown_figure(df, pctg=False)))
    s.tables.append(table_of(df, "Idle time per rank, stream and cause (idle_time in µs)"))
    stats = idle.idle_interval_stats(idle.idle_intervals(ctx.trace, ctx.ranks, None,
                                                         ctx.iterations))
    s.tables.append(table_of(stats, "Idle interval statistics (µs)"))


def _kernels(ctx: _Context, s: Section) -> None:
    from hta.analysis import kernels
    from hta.plots.kernels import kernel_duration_figure, kernel_pies_figure, kernel_type_figure

    s.definitions, s.source = _doc(kernels), "hta.analysis.kernels.gpu_kernel_breakdown"
    types = kernels.kernel_type_breakdown(ctx.trace, ctx.ranks, ctx.iterations, by_rank=True)
    table = kernels.kernel_breakdown(ctx.trace, ctx.ranks, ctx.iterations)
    if types.empty:
        s.notes.append("No GPU kernels, copies or memsets in the selection.")
        return
    s.figures.append(ctx.figure(kernel_type_figure(types)))
    for kind in table["kernel_type"].unique():
        s.figures.append(ctx.figure(kernel_pies_figure(table, kind)))
        s.figures.append(ctx.figure(kernel_duration_figure(table, kind)))
    s.tables.append(table_of(types, "GPU busy time by kernel type, per rank (sum in µs)"))
    s.tables.append(table_of(table, "Top kernels per rank (durations in µs)",
                             max_rows=200))


def _overlap(ctx: _Context, s: Section) -> None:
    from hta.analysis import overlap
    from hta.plots.overlap import comm_comp_overlap_figure

    s.definitions, s.source = _doc(overlap), "hta.analysis.overlap.comm_comp_overlap"
    df = overlap.comm_comp_overlap(ctx.trace, ctx.ranks, ctx.iterations)
    if df["comm_time(us)"].gt(0).any():
        s.figures.append(ctx.figure(comm_comp_overlap_figure(df)))
    else:
        s.notes.append("No rank has communication in the selection: nothing to overlap.")
    s.tables.append(table_of(df, "Per rank"))


def _annotations(ctx: _Context, s: Section) -> None:
    from hta.analysis import annotations
    from hta.plots.annotations import user_annotation_duration_figure, user_annotation_figure

    s.definitions = _doc(annotations)
    s.source = "hta.analysis.annotations.user_annotation_breakdown"
    for gpu, label in ((True, "GPU annotations (gpu_user_annotation)"),
                       (False, "CPU annotations (user_annotation)")):
        df = annotations.user_annotation_breakdown(ctx.trace, ctx.ranks, ctx.iterations,
                                                   use_gpu_annotation=gpu)
        if len(df):
            s.intro = f"Time per annotation name, from the {label}."
            s.figures.append(ctx.figure(user_annotation_figure(df)))
            s.figures.append(ctx.figure(user_annotation_duration_figure(df)))
            s.tables.append(table_of(df, f"{label}: durations (µs)"))
            return
    s.notes.append("The selection has no user annotations (record_function ranges).")


def _launch(ctx: _Context, s: Section) -> None:
    from hta.analysis import launch
    from hta.plots.launch import launch_stats_figure

    s.definitions, s.source = _doc(launch), "hta.analysis.launch.cuda_kernel_launch_stats"
    df = launch.cuda_kernel_launch_stats(ctx.restricted, ctx.ranks)
    pairing = launch.launch_pairing_summary(ctx.restricted, ctx.ranks)
    if len(df):
        columns = ["short_kernel", "runtime_outlier", "launch_delay_outlier"]
        flags = df.groupby("rank")[columns].sum().reset_index()
        if flags[columns].to_numpy().any():
            s.figures.append(ctx.figure(launch_stats_figure(
                df, launch.RUNTIME_CUTOFF_US, launch.LAUNCH_DELAY_CUTOFF_US)))
        else:
            s.notes.append(
                f"No launch is flagged: no GPU work shorter than its launch call, no launch "
                f"call over {launch.RUNTIME_CUTOFF_US} µs, no launch delay over "
                f"{launch.LAUNCH_DELAY_CUTOFF_US} µs.")
        s.tables.append(table_of(flags, "Flagged launches per rank (counts)"))
    else:
        s.notes.append("No launch call was paired with GPU work in the selection.")
    s.tables.append(table_of(pairing, "Pairing of launch calls and GPU events"))


def _queue(ctx: _Context, s: Section) -> None:
    from hta.analysis import queue
    from hta.plots.queue import queue_length_figure

    s.definitions, s.source = _doc(queue), "hta.analysis.queue.queue_length_summary"
    series = queue.queue_length_time_series(ctx.restricted, ctx.ranks)
    if series.empty:
        s.notes.append("No launches paired with GPU work: no queue to show.")
        return
    summary = queue.queue_length_summary(ctx.restricted, ctx.ranks, series)
    blocked = queue.time_spent_blocked_on_full_queue(ctx.restricted, ranks=ctx.ranks,
                                                     series=series)
    shown, note = _thin(series, ["rank", "pid", "stream"])
    if note:
        s.notes.append(note)
    s.figures.append(ctx.figure(queue_length_figure(shown)))
    s.tables.append(table_of(summary, "Queue length per rank and stream (time-weighted)"))
    s.tables.append(table_of(blocked, "Time with a full queue (>= "
                             f"{queue.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM} entries)"))


def _bandwidth(ctx: _Context, s: Section) -> None:
    from hta.analysis import bandwidth
    from hta.plots.bandwidth import memory_bw_figure, memory_bw_summary_figure

    s.definitions, s.source = _doc(bandwidth), "hta.analysis.bandwidth.memory_bw_summary"
    copies = bandwidth.memory_copies(ctx.restricted, ctx.ranks)
    if copies.empty:
        s.notes.append("No memcpy or memset in the selection.")
        return
    summary = bandwidth.memory_bw_summary(ctx.restricted, ctx.ranks, copies)
    series = bandwidth.memory_bw_time_series(ctx.restricted, ctx.ranks)
    shown, note = _thin(series, ["rank", "pid", "name"])
    if note:
        s.notes.append(note)
    s.figures.append(ctx.figure(memory_bw_summary_figure(summary)))
    s.figures.append(ctx.figure(memory_bw_figure(shown)))
    s.tables.append(table_of(summary, "Per rank and direction"))


def _operators(ctx: _Context, s: Section) -> None:
    from hta.analysis import operators
    from hta.plots.operators import operator_breakdown_figure

    s.definitions, s.source = _doc(operators), "hta.analysis.operators.operator_breakdown"
    df = operators.operator_breakdown(ctx.restricted, ctx.ranks)
    if df.empty:
        s.notes.append("No CPU operators in the selection.")
        return
    s.figures.append(ctx.figure(operator_breakdown_figure(df, max_rows=20)))
    s.tables.append(table_of(df, "Operators, GPU time first", max_rows=100))


def _critical_path(ctx: _Context, s: Section) -> None:
    from hta.analysis import critical_path as cp
    from hta.plots.critical_path import critical_path_figure

    rank = ctx.critical_path_rank if ctx.critical_path_rank is not None else ctx.ranks[0]
    s.definitions, s.source = _doc(cp), "hta.analysis.critical_path.critical_path_analysis"
    rt = ctx.trace.rank(rank)
    steps = ctx.iterations
    annotation: str | None = "ProfilerStep"
    instance: Any = None
    if not rt.events["iteration"].gt(0).any():
        annotation = None
    elif steps is not None:
        from hta.analysis.diff import step_table

        spans = step_table(ctx.trace, rank).reset_index(drop=True)
        chosen = spans.index[spans["iteration"].isin(steps)]
        if len(chosen):
            instance = (int(chosen.min()), int(chosen.max()))
    graph, path = cp.critical_path_analysis(rt, annotation, instance)
    bounds, events = cp.critical_path_summary(path)
    where = graph.annotation or "whole trace"
    s.intro = (f"Rank {rank}, {where}: the path is {graph.path_length_ns / 1e3:,.3f} µs long in "
               f"a {graph.span_ns / 1e3:,.3f} µs window.")
    s.figures.append(ctx.figure(critical_path_figure(
        bounds, events, 15, title=f"Critical path of rank {rank}, {where}")))
    s.tables.append(table_of(bounds, "Time on the critical path per bound type"))
    s.tables.append(table_of(events, "Events on the critical path", max_rows=30))


def _unclassified(ctx: _Context, s: Section) -> None:
    s.source = "TraceAnalysis.get_unclassified_kernels"
    df = ctx.analyzer.get_unclassified_kernels(ctx.ranks)
    if df.empty:
        s.notes.append("Every GPU kernel matched a kind rule.")
        return
    s.intro = ("These kernels matched no rule of the event-kind table and count as "
               "computation. If one is communication, add a Rule(\"communication\", name=...) "
               "through TraceAnalysis(kind_rules=...).")
    s.tables.append(table_of(df, "Unclassified kernels"))


#: (id, title, intro, builder) of every section, in order.
SECTIONS: list[tuple[str, str, str, Callable[[_Context, Section], None]]] = [
    ("overview", "Job at a glance",
     "Per-rank figures side by side, the spread across ranks, and the top kernels.",
     _overview),
    ("temporal", "Temporal breakdown",
     "Is the GPU computing, communicating, copying memory, or idle?", _temporal),
    ("idle", "Idle time", "Why each GPU stream is idle: the CPU was late (host wait), "
     "back-to-back launch overhead (kernel wait), or something else.", _idle),
    ("kernels", "GPU kernels", "Which kinds of GPU work, and which kernels, take the time; "
     "a rank whose kernel runs longer stands out in the duration panels.", _kernels),
    ("overlap", "Communication overlapped by computation",
     "Share of the communication time hidden under computation.", _overlap),
    ("annotations", "User annotations", "", _annotations),
    ("launch", "Kernel launches", "How long launch calls take, and how long GPU work "
     "waits after its launch call returns.", _launch),
    ("queue", "Launch queue length", "How many launched operations wait on each stream.",
     _queue),
    ("bandwidth", "Memory bandwidth", "Copies and memsets per direction.", _bandwidth),
    ("operators", "Operators", "Per PyTorch operator: calls, CPU time, and GPU time of the "
     "work it launched.", _operators),
    ("critical-path", "Critical path", "", _critical_path),
    ("unclassified", "Unclassified kernels", "", _unclassified),
]


def build_sections(analyzer: Any, ranks: Iterable[int] | None = None,
                   iterations: Iterable[int] | None = None,
                   critical_path_rank: int | None = None) -> list[Section]:
    """Every section of the report (a failing analysis gives a section with ``error``)."""
    selected = analyzer.ranks if ranks is None else sorted({int(r) for r in ranks})
    for r in selected:
        analyzer.t.rank(r)  # unknown ranks fail here, with the loaded ranks named
    iters = None if iterations is None else sorted({int(i) for i in iterations})
    ctx = _Context(analyzer, selected, iters, critical_path_rank)
    sections = []
    for sid, title, intro, build in SECTIONS:
        section = Section(sid, title, intro)
        try:
            build(ctx, section)
        except Exception as exc:  # noqa: BLE001 - one analysis must not sink the report
            logger.warning("report section %r failed: %s", title, exc, exc_info=True)
            section.error = f"{type(exc).__name__}: {exc}"
        sections.append(section)
    return sections


# -- header ----------------------------------------------------------------------------------
def job_header(analyzer: Any, ranks: Sequence[int], iterations: Sequence[int] | None
               ) -> list[tuple[str, str]]:
    """(label, value) pairs describing the job, from the loaded ranks' metadata."""
    metas = [analyzer.t.rank(r).meta for r in ranks]
    first = metas[0] if metas else {}
    items: list[tuple[str, str]] = [("trace folder", str(analyzer.trace_dir or ""))]
    world = first.get("world_size")
    items.append(("ranks", f"{len(ranks)} ({_ranges(list(ranks))})"
                  + (f" of world size {world}" if world else "")))
    names = sorted({str(d.get("name")) for m in metas
                    for d in (m.get("device_properties") or []) if isinstance(d, dict)
                    and d.get("name")})
    if names:
        items.append(("devices", ", ".join(names)))
    backend = first.get("backend")
    if backend:
        version = first.get("nccl_version")
        items.append(("backend", f"{backend}" + (f" (NCCL {version})" if version else "")))
    hosts = sorted({str((m.get("settings") or {}).get("host_name")) for m in metas
                    if (m.get("settings") or {}).get("host_name")})
    if hosts:
        items.append(("hosts", ", ".join(hosts[:8]) + (" ..." if len(hosts) > 8 else "")))
    starts = [m.get("trace_start_ns") for m in metas if m.get("trace_start_ns")]
    ends = [m.get("trace_end_ns") for m in metas if m.get("trace_end_ns")]
    if starts and ends:
        start = _dt.datetime.fromtimestamp(min(starts) / 1e9, tz=_dt.timezone.utc)
        items.append(("trace window", f"{start:%Y-%m-%d %H:%M:%S} UTC, "
                      f"{(max(ends) - min(starts)) / 1e6:,.3f} ms"))
    events = sum(len(analyzer.t.rank(r).events) for r in ranks)
    items.append(("events", f"{events:,} complete events"))
    steps = sorted({int(i) for r in ranks
                    for i in np.unique(analyzer.t.rank(r).events["iteration"]) if i > 0})
    if steps:
        items.append(("steps", _ranges(steps)))
    if iterations is not None:
        items.append(("steps analysed", _ranges(list(iterations))))
    files = [Path(str(m.get("source"))).name for m in metas if m.get("source")]
    if files:
        items.append(("files", ", ".join(files[:8]) + (f" and {len(files) - 8} more"
                                                       if len(files) > 8 else "")))
    return items


def _ranges(values: list[int]) -> str:
    values = sorted(set(values))
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(out)


# -- rendering -------------------------------------------------------------------------------
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True,
    )


def render(sections: Sequence[Section], header: Sequence[tuple[str, str]], title: str,
           warnings: Sequence[str] = ()) -> str:
    """The HTML text of a report."""
    data = {f.id: f.json for s in sections for f in s.figures}
    # each value is already escaped JSON text: join without re-encoding
    figures_json = "{" + ",".join(
        f"{json.dumps(k)}:{v}" for k, v in data.items()) + "}"
    env = _environment()
    return env.get_template("report.html.j2").render(
        title=title, header=header, sections=sections, warnings=list(warnings),
        figures_json=jinja2.utils.markupsafe.Markup(figures_json),
        plotly_js=jinja2.utils.markupsafe.Markup(_plotly_js()),
        style=jinja2.utils.markupsafe.Markup((_TEMPLATES / "report.css").read_text()),
        script=jinja2.utils.markupsafe.Markup((_TEMPLATES / "report.js").read_text()),
        version=__version__,
        generated=_dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )


def _plotly_js() -> str:
    js = plotly.offline.get_plotlyjs()
    if "</script" in js.lower():  # never seen; would end the script block early
        js = js.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")
    return js


def build_report(analyzer: Any, ranks: Iterable[int] | None = None,
                 iterations: Iterable[int] | None = None, title: str | None = None,
                 critical_path_rank: int | None = None) -> str:
    """The report of a loaded job (a ``TraceAnalysis``) as HTML text."""
    selected = analyzer.ranks if ranks is None else sorted({int(r) for r in ranks})
    iters = None if iterations is None else sorted({int(i) for i in iterations})
    sections = build_sections(analyzer, selected, iters, critical_path_rank)
    header = job_header(analyzer, selected, iters)
    warnings = [f"skipped {path}: {reason}" for path, reason in analyzer.skipped.items()]
    for r in selected:
        warnings += [f"rank {r}: {w}" for w in analyzer.t.rank(r).meta.get("warnings") or []]
    name = Path(str(analyzer.trace_dir or "trace")).name or "trace"
    return render(sections, header, title or f"hta report: {name}", warnings)


def write_report(analyzer: Any, path: str | os.PathLike[str], *, force: bool = False,
                 **options: Any) -> Path:
    """Write :func:`build_report` to ``path``; refuses to overwrite unless ``force``."""
    out = Path(path)
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass force=True to overwrite it")
    html = build_report(analyzer, **options)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out


__all__ = ["SECTIONS", "Figure", "Section", "Table", "build_report", "build_sections",
           "figure_json", "format_cell", "job_header", "render", "table_of", "write_report"]
