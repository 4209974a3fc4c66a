"""One self-contained HTML report of a job: every analysis's figures and tables.

``build_report(analyzer)`` returns the HTML text, ``write_report(analyzer, path)`` writes
it. The file works offline: plotly.js is embedded once (``plotly.offline.get_plotlyjs()``),
with the CSS and the little script that draws the figures and follows the table of
contents. The page opens with the job in one sentence and the **findings** (what slows
the job down, the estimated saving, the evidence and what to try, each linking to the
section holding its evidence), then the sections, in order: the job at a glance
(:mod:`hta.report.overview`), GPU timeline, temporal breakdown, idle time, GPU kernels,
communication/computation overlap, stragglers, why ranks are late and the pipeline's
bubbles (:mod:`hta.report.sections_distributed`), what bounds the step (the what-if
replay: :mod:`hta.report.sections_whatif`), user annotations, kernel launches, launch
queue length, memory bandwidth, memory timeline, operators, hardware efficiency
(:mod:`hta.report.sections_hardware`), critical path, and the
kernels no kind rule matched. Each section shows the figures of :mod:`hta.plots` drawn from
the DataFrames of :mod:`hta.analysis`, the tables themselves, and the analysis module's
docstring as its definitions. A section whose analysis fails on the trace says so, with
the reason, instead of sinking the report.

Modules: :mod:`hta.report.context` (records, cell formatting, the shared context),
:mod:`hta.report.sections_findings`, :mod:`hta.report.sections_breakdowns` and
:mod:`hta.report.sections_details` (the section builders), :mod:`hta.report.render` (the
header and the Jinja2 page); this module puts them in order.

Safety: the page is rendered by Jinja2 with autoescape on, so every name from the trace
(kernels, operators, annotations, file names) is text; figures travel as one JSON document
in a ``<script type="application/json">`` block with ``<``, ``>``, ``&`` and the JS line
separators escaped as ``\\uXXXX``, so no name can close the block or open a tag.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hta.model.selection import Selection, resolve
from hta.report import sections_breakdowns as breakdowns
from hta.report import sections_collectives as collectives
from hta.report import sections_details as details
from hta.report import sections_distributed as distributed
from hta.report import sections_findings, sections_whatif
from hta.report import sections_hardware as hardware
from hta.report.analyzer import Analyzer
from hta.report.context import (
    MAX_SERIES_POINTS,
    MAX_TABLE_ROWS,
    Context,
    Figure,
    FindingItem,
    Section,
    Table,
    figure_json,
    format_cell,
    table_of,
)
from hta.report.render import job_header, render

logger = logging.getLogger(__name__)

#: (id, title, intro, builder) of every section, in order.
SECTIONS: list[tuple[str, str, str, Callable[[Context, Section], None]]] = [
    ("findings", "Findings", "What slows this job down, largest estimated saving first: "
     "each line gives the evidence (check it in the linked section) and what to try.",
     sections_findings.findings),
    ("coverage", "What the findings explain", "Per rank, how much of the time the GPU does "
     "not compute the findings explain, and the longest stretches they leave unexplained, "
     "with what the CPU did meanwhile.", sections_findings.coverage),
    ("overview", "Job at a glance",
     "Per-rank figures side by side, the spread across ranks, and the top kernels.",
     breakdowns.overview),
    ("timeline", "GPU timeline", "What each rank's GPU streams ran, coloured by kind.",
     sections_findings.timeline),
    ("temporal", "Temporal breakdown",
     "Is the GPU computing, communicating, copying memory, or idle?", breakdowns.temporal),
    ("idle", "Idle time", "Why each GPU stream is idle: the CPU was late (host wait), "
     "back-to-back launch overhead (kernel wait), or something else.", breakdowns.idle),
    ("kernels", "GPU kernels", "Which kinds of GPU work, and which kernels, take the time; "
     "a rank whose kernel runs longer stands out in the duration panels.", breakdowns.kernels),
    ("overlap", "Communication overlapped by computation",
     "Share of the communication time hidden under computation.", breakdowns.overlap),
    ("stragglers", "Stragglers", "Which rank starts its collectives late, and how long the "
     "others wait for it.", sections_findings.stragglers),
    ("straggler-causes", "Why ranks are late", "Why each late rank is late (its GPU "
     "compute, its host, or its link, against the median rank), and whether it recurs.",
     distributed.straggler_causes),
    ("pipeline", "Pipeline", "Where each pipeline stage's computation idles: the bubble "
     "per step against the schedule's theory, and the wait in its send/recv.",
     distributed.pipeline),
    ("step-bound", "What bounds the step", "", sections_whatif.step_bound),
    ("collectives", "Collective bandwidth", "Bus bandwidth of every collective against its "
     "message size and the link between the GPUs.", collectives.collective_bandwidth),
    ("annotations", "User annotations", "", breakdowns.user_annotations),
    ("launch", "Kernel launches", "How long launch calls take, and how long GPU work "
     "waits after its launch call returns.", details.launch),
    ("queue", "Launch queue length", "How many launched operations wait on each stream.",
     details.queue),
    ("bandwidth", "Memory bandwidth", "Copies and memsets per direction.", details.bandwidth),
    ("memory", "Memory timeline", "Allocated and reserved bytes per rank and device, and "
     "what held memory at the peak.", sections_findings.memory),
    ("operators", "Operators", "Per PyTorch operator: calls, CPU time, and GPU time of the "
     "work it launched.", details.operators),
    ("hardware", "Hardware efficiency", "GPU time by category, and how close each operator "
     "comes to the device's roofline.", hardware.hardware),
    ("critical-path", "Critical path", "", details.critical_path),
    ("unclassified", "Unclassified kernels", "", details.unclassified),
]


def _context(analyzer: Analyzer, ranks: Iterable[int] | None, iterations: Iterable[int] | None,
             critical_path_rank: int | None) -> Context:
    # Resolved once: unknown ranks and steps fail here, naming what the job holds.
    selection = resolve(Selection.of(ranks, iterations), analyzer.t, strict=False)
    titles = {sid: title for sid, title, *_ in SECTIONS}
    return Context(analyzer, selection, critical_path_rank, titles)


#: Sections built before the others, in this order (the page keeps :data:`SECTIONS`'
#: order): those that replay the job (the findings, the step bound, why ranks are late),
#: as ``hta summary`` does, one after the other, before the other sections' tables are
#: held, so that the report's peak memory is the summary's.
BUILT_FIRST = ("findings", "step-bound", "straggler-causes")


def _sections(ctx: Context, keep_replay: bool = True) -> list[Section]:
    order = sorted(range(len(SECTIONS)), key=lambda i: (
        BUILT_FIRST.index(SECTIONS[i][0]) if SECTIONS[i][0] in BUILT_FIRST
        else len(BUILT_FIRST), i))
    sections: dict[int, Section] = {}
    for i in order:
        sid, title, intro, build = SECTIONS[i]
        section = Section(sid, title, intro)
        try:
            build(ctx, section)
        except Exception as exc:  # noqa: BLE001 - one analysis must not sink the report
            logger.warning("report section %r failed: %s", title, exc, exc_info=True)
            section.error = f"{type(exc).__name__}: {exc}"
        sections[i] = section
        if not keep_replay and sid == BUILT_FIRST[-1]:
            ctx.analyzer.replay().drop_graph()  # no later section replays
    return [sections[i] for i in range(len(SECTIONS))]


def build_sections(analyzer: Analyzer, ranks: Iterable[int] | None = None,
                   iterations: Iterable[int] | None = None,
                   critical_path_rank: int | None = None) -> list[Section]:
    """Every section of the report (a failing analysis gives a section with ``error``)."""
    return _sections(_context(analyzer, ranks, iterations, critical_path_rank))


def build_report(analyzer: Analyzer, ranks: Iterable[int] | None = None,
                 iterations: Iterable[int] | None = None, title: str | None = None,
                 critical_path_rank: int | None = None, plotlyjs: str = "embed",
                 keep_replay: bool = True) -> str:
    """The report of a loaded job (a ``TraceAnalysis``) as HTML text; ``plotlyjs``: how
    it carries plotly.js (:data:`hta.report.render.PLOTLYJS_MODES`). ``keep_replay=False``
    frees the replay's job graph once the sections that replay are built
    (:meth:`~hta.analysis.whatif.replayer.Replay.drop_graph`; a later what-if builds it
    again), so that the other sections are not built beside it: ``hta report`` does."""
    ctx = _context(analyzer, ranks, iterations, critical_path_rank)
    sections = _sections(ctx, keep_replay)
    try:
        summary = sections_findings.job_sentence(ctx)
    except Exception as exc:  # noqa: BLE001 - the sentence is a convenience
        logger.warning("job sentence failed: %s", exc, exc_info=True)
        summary = ""
    header = job_header(analyzer, ctx.ranks, ctx.iterations)
    warnings = [f"skipped {path}: {reason}" for path, reason in analyzer.skipped.items()]
    for r in ctx.ranks:
        warnings += [f"rank {r}: {w}" for w in analyzer.t.meta(r).get("warnings") or []]
    name = Path(str(analyzer.trace_dir or "trace")).name or "trace"
    return render(sections, header, title or f"hta report: {name}", warnings, summary,
                  plotlyjs=plotlyjs)


def write_report(analyzer: Analyzer, path: str | os.PathLike[str], *, force: bool = False,
                 **options: Any) -> Path:
    """Write :func:`build_report` to ``path``; refuses to overwrite unless ``force``."""
    out = Path(path)
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass force=True to overwrite it")
    html = build_report(analyzer, **options)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(out)
    except BaseException:  # a full disk, a size limit: leave no partial file behind
        tmp.unlink(missing_ok=True)
        raise
    return out


__all__ = ["MAX_SERIES_POINTS", "MAX_TABLE_ROWS", "SECTIONS", "Figure", "FindingItem",
           "Section", "Table", "build_report", "build_sections", "figure_json", "format_cell",
           "job_header", "render", "table_of", "write_report"]
