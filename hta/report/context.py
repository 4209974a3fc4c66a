"""What every report section is built from: the table, figure and section records, the
cell formatting, and the context (the job, the selection, the shared overview).

Long names (kernels, operators) are shown shortened in tables
(:func:`hta.report.present.display_name`), never
two different names the same way, with the full name kept for the hover title; headers are
the column names in words (:func:`column_label`), each unit said once; the template escapes
all of it (Jinja2 autoescape).
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.io as pio

from hta.analysis.thinning import envelope
from hta.model.job import Job
from hta.model.selection import Selection
from hta.plots._figure_parts import distinct_short, plain_text_names
from hta.report.present import LONG_NAME, display_name, number, ranges_text

if TYPE_CHECKING:
    from hta.report.analyzer import Analyzer
    from hta.report.answers import JobAnswers
    from hta.report.overview import JobOverview

logger = logging.getLogger(__name__)

#: Rows shown per table (the rest is counted in a note under it).
MAX_TABLE_ROWS = 50
#: Points kept per time-series figure line before the report thins it (its envelope).
MAX_SERIES_POINTS = 6_000
#: Points of a whole time-series figure, shared between its lines (a job of many ranks
#: and streams, or a trace of millions of events, would otherwise make a report of tens
#: of MB)...
MAX_FIGURE_POINTS = 8_000
#: ... but never fewer than this many per line.
MIN_LINE_POINTS = 400
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                 0x2028: "\\u2028", 0x2029: "\\u2029"}


@dataclass
class Table:
    """A table shown as HTML: headers and rows of text (already formatted).

    ``headers`` are the column names of the data (the keys of a row); ``labels`` what the
    page shows for them (``[]``: the headers), each header in its label's hover title.
    ``hover`` has one text per cell (``""``: none): the full name of a shortened cell."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    note: str = ""
    hover: list[list[str]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)


@dataclass
class Figure:
    """A Plotly figure: the id of its ``div``, its JSON (``plotly.io.to_json``) without
    its style sheet (``layout.template``), and that style sheet's JSON (``""``: none),
    which most figures share and a page writes once (:func:`hta.report.render.render`)."""

    id: str
    title: str
    json: str
    template: str = ""


@dataclass
class FindingItem:
    """One line of the Findings section (texts already formatted)."""

    severity: str
    title: str
    saving: str
    ranks: str
    evidence: str
    advice: str
    section: str
    section_title: str
    rule: str
    subject: str = ""


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
    findings: list[FindingItem] = field(default_factory=list)
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
        return number(float(value), 3)
    if value is pd.NA or value is pd.NaT:
        return "-"
    if isinstance(value, (list, tuple, np.ndarray)):
        return ranges_text(value) if all(
            isinstance(v, (int, np.integer)) for v in value) else ", ".join(map(str, value))
    return str(value)


#: Units a column name ends with, as ``name(unit)`` or a suffix, and how a header says them.
_UNIT_WORDS = {"us": "µs", "pctg": "%", "gbps": "GB/s"}
_UNIT_SUFFIX = re.compile(r"_(pctg|gbps)$")
_UNIT_PARENS = re.compile(r"^(.*?\S)\s*\(([^()]+)\)$")


def column_label(column: object) -> tuple[str, str]:
    """A column name as words and its unit: ``not_computing(us)`` -> ``("not computing",
    "µs")``, ``idle_time_pctg`` -> ``("idle time", "%")``, ``mean_bw_gbps`` ->
    ``("mean bw", "GB/s")``, ``count`` -> ``("count", "")``."""
    text, unit = str(column).strip(), ""
    found = _UNIT_PARENS.match(text) or _UNIT_SUFFIX.search(text)
    if found is not None and found.re is _UNIT_PARENS:
        text, unit = found.group(1), found.group(2).strip()
    elif found is not None:
        text, unit = text[:found.start()], found.group(1)
    return text.replace("_", " ").strip() or text, _UNIT_WORDS.get(unit, unit)


def table_labels(columns: Sequence[object], title: str) -> tuple[list[str], str]:
    """Headers for ``columns`` and the table's title, each unit said once: a unit the title
    gives (``(µs)``, ``in µs``) is left out of the headers; when every column with a unit
    has the same one and the title has no parenthesis, the title gives it (``Per rank
    (µs)``) and the headers do not; else each header ends with its own unit: ``not
    computing (µs)``."""
    parts = [column_label(c) for c in columns]
    units = {u for _, u in parts if u}

    def said(unit: str) -> bool:
        return f"({unit})" in title or f" in {unit}" in title

    if len(units) == 1 and "(" not in title:
        title = f"{title} ({next(iter(units))})"
    return [w if not u or said(u) else f"{w} ({u})" for w, u in parts], title


def table_of(frame: pd.DataFrame, title: str, max_rows: int = MAX_TABLE_ROWS,
             columns: Sequence[str] | None = None, note: str = "",
             keep_ranks: Sequence[int] = ()) -> Table:
    """A :class:`Table` of the first ``max_rows`` rows of ``frame``: headers are the column
    names, labels those names in words with their units said once (:func:`table_labels`).
    Text cells over :data:`LONG_NAME` characters are shortened (:func:`display_name`), so
    that two different texts of a column never read the same (:func:`distinct_short`), and
    their full text is kept in ``hover``. ``keep_ranks``: ranks whose rows (a ``rank``
    column) follow the first rows when those leave them out, in the frame's order, at most
    ``max_rows`` (and :data:`MAX_TABLE_ROWS`) more (the ranks a report draws: their detail
    is in every table)."""
    if columns is not None:
        frame = frame[[c for c in columns if c in frame.columns]]
    shown = frame.head(max_rows)
    extra = 0
    if len(keep_ranks) and "rank" in frame.columns and len(frame) > max_rows:
        rest = frame.iloc[max_rows:]
        kept = rest[rest["rank"].isin(list(keep_ranks))].head(min(max_rows, MAX_TABLE_ROWS))
        extra = len(kept)
        if extra:
            shown = pd.concat([shown, kept])
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(
        frame[c]) for c in frame.columns]
    cells = [[format_cell(v) for v in row] for row in shown.itertuples(index=False, name=None)]
    texts = [[row[j] for row in cells] for j in range(len(numeric))]
    short_texts = [col if num else distinct_short(col, LONG_NAME, display_name)
                   for col, num in zip(texts, numeric)]
    rows = [[short_texts[j][i] for j in range(len(numeric))] for i in range(len(cells))]
    hover = [["" if rows[i][j] == cells[i][j] else cells[i][j] for j in range(len(numeric))]
             for i in range(len(cells))]
    if len(frame) > max_rows:
        more = f"first {max_rows} of {len(frame):,} rows"
        if extra:
            ranks = sorted({int(r) for r in shown["rank"].iloc[max_rows:]})
            more += (f", then {extra} more of the ranks that stand out "
                     f"({', '.join(map(str, ranks))})")
        note = f"{note} ({more})" if note else more[0].upper() + more[1:] + "."
    labels, title = table_labels(list(frame.columns), title)
    return Table(title, [str(c) for c in frame.columns], rows, numeric, note, hover, labels)


def figure_json(fig: Any) -> str:
    """The figure as JSON text safe inside a ``<script>`` block (see :mod:`hta.report.builder`)."""
    return pio.to_json(fig, validate=False, pretty=False).translate(_JSON_ESCAPES)


def doc(obj: Any) -> str:
    """The cleaned docstring of ``obj`` (a section's definitions)."""
    return inspect.cleandoc(obj.__doc__ or "")


def thin(series: pd.DataFrame, keys: list[str], values: list[str]) -> tuple[pd.DataFrame, str]:
    """At most :data:`MAX_SERIES_POINTS` rows per line, and about
    :data:`MAX_FIGURE_POINTS` in all, shared between the figure's lines (one per value
    column and group of ``keys``), at least :data:`MIN_LINE_POINTS` each: a longer line
    is drawn as its envelope in time bins of ``ts``, each bin keeping its first and last
    rows and those of its lowest and highest ``values``
    (:func:`hta.analysis.thinning.envelope`)."""
    if series.empty:
        return series, ""
    # each value column is a line of its own in the figure
    limit = line_limit(series.groupby(keys, sort=False).ngroups * len(values))
    shown, thinned = envelope(series, keys, "ts", values, limit)
    return shown, thinned_note(limit) if thinned else ""


def line_limit(lines: int) -> int:
    """Points per line of a figure of ``lines`` lines (see :func:`thin`)."""
    return min(MAX_SERIES_POINTS, max(MIN_LINE_POINTS, MAX_FIGURE_POINTS // max(lines, 1)))


def thinned_note(limit: int) -> str:
    """The note under a thinned figure."""
    return (f"Lines with more than {limit:,} points are drawn as their envelope: in each "
            "time bin the first, last, lowest and highest points (the tables use every "
            "point).")


# -- the context -----------------------------------------------------------------------------
class Context:
    """The job and selection a report is built for; numbers several sections share
    (the overview) are computed once, on first use."""

    def __init__(self, analyzer: Analyzer, selection: Selection,
                 critical_path_rank: int | None,
                 section_titles: dict[str, str] | None = None) -> None:
        self.analyzer = analyzer
        #: the loaded job (in memory or distributed)
        self.trace: Job = analyzer.t
        #: the resolved selection every section analyses
        self.selection = selection
        self.ranks: list[int] = list(selection.rank_list or self.trace.get_ranks())
        #: the selected steps (``None``: every event); analyses without an ``iterations``
        #: argument of their own get them through the runner (:func:`hta.model.runner.run`),
        #: which restricts each rank next to the data
        self.iterations: list[int] | None = selection.iteration_list
        self.critical_path_rank = critical_path_rank
        #: section id -> title, for the links between sections
        self.section_titles = section_titles or {}
        self._n = 0
        self._shared: JobAnswers | None = None
        self._drawn: dict[int, list[str]] | None = None

    @property
    def answers(self) -> JobAnswers:
        """The overview, findings, categories, operator summary and unclassified kernels
        of the selection, computed together in one visit of each rank on first use
        (:func:`hta.report.answers.job_answers`); reading the answer of an analysis that
        failed raises its exception, in the section that reads it."""
        if self._shared is None:
            from hta.report.answers import job_answers

            self._shared = job_answers(self.analyzer, self.selection, errors="return")
        return self._shared

    @property
    def overview(self) -> JobOverview:
        """:func:`hta.report.overview.job_overview` of the selection."""
        return self.answers.overview

    @property
    def drawn(self) -> dict[int, list[str]]:
        """The selected ranks the per-rank figures draw, each with why, in rank order:
        every rank (no reason) when the selection has at most
        :data:`hta.report.standout.MAX_DRAWN_RANKS` ranks, else those that stand out
        (:func:`hta.report.standout.standout_ranks`; the first ranks, when the overview
        failed or named none)."""
        if self._drawn is None:
            self._drawn = self._standout()
        return self._drawn

    def _standout(self) -> dict[int, list[str]]:
        from hta.report import standout

        limit = standout.MAX_DRAWN_RANKS
        if len(self.ranks) <= limit:
            return {r: [] for r in self.ranks}
        try:
            chosen = standout.standout_ranks(self.overview, self.critical_path_rank, limit)
        except Exception as exc:  # noqa: BLE001 - the overview's own section reports it
            logger.warning("no ranks stand out (the overview failed: %s)", exc)
            chosen = {}
        return chosen or {r: ["first selected"] for r in self.ranks[:limit]}

    @property
    def drawn_ranks(self) -> list[int]:
        """The ranks of :attr:`drawn`, ascending."""
        return list(self.drawn)

    @property
    def all_drawn(self) -> bool:
        """Whether the per-rank figures draw every selected rank."""
        return len(self.drawn) == len(self.ranks)

    @property
    def drawn_selection(self) -> Selection:
        """The selection restricted to :attr:`drawn_ranks` (the same steps)."""
        if self.all_drawn:
            return self.selection
        return Selection(tuple(self.drawn_ranks), self.selection.iterations)

    def drawn_rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of a per-rank table (a ``rank`` column) that a figure draws: those of
        :attr:`drawn_ranks` (every row when every rank is drawn)."""
        if self.all_drawn or "rank" not in frame:
            return frame
        return frame[frame["rank"].isin(self.drawn_ranks)]

    def drawn_note(self, method: str, covers: str = "the table covers every rank") -> str:
        """The note under a per-rank figure that draws :attr:`drawn` only (``""`` when it
        draws every rank): see :func:`hta.report.standout.drawn_note`; ``method`` is the
        ``TraceAnalysis`` call that draws any rank, ``{ranks}`` where the ranks go."""
        from hta.report.standout import drawn_note

        if self.all_drawn:
            return ""
        return drawn_note(self.drawn, len(self.ranks), method, covers)

    def table(self, frame: pd.DataFrame, title: str, **options: Any) -> Table:
        """:func:`table_of`, the rows of the ranks the figures draw (:attr:`drawn_ranks`,
        when not every rank is drawn) kept after the first rows: a rank named as standing
        out can be read in every per-rank table."""
        keep = () if self.all_drawn else self.drawn_ranks
        return table_of(frame, title, keep_ranks=keep, **options)

    def figure(self, fig: Any) -> Figure:
        """A :class:`Figure` with the next id; names in it are made plain text."""
        self._n += 1
        title = fig.layout.title.text or f"figure {self._n}"
        fig = plain_text_names(fig)
        template = fig.layout.template.to_plotly_json() if fig.layout.template else {}
        fig.layout.template = None
        return Figure(f"fig-{self._n}", str(title), figure_json(fig), json.dumps(
            template, separators=(",", ":")).translate(_JSON_ESCAPES) if template else "")


__all__ = ["Context", "FindingItem", "Figure", "LONG_NAME", "MAX_SERIES_POINTS",
           "MAX_TABLE_ROWS", "Section", "Table", "column_label", "display_name", "doc",
           "figure_json", "format_cell", "table_labels", "table_of", "thin"]
