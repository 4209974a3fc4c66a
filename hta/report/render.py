"""The report's page: the job header, and the Jinja2 rendering of the sections into one
self-contained HTML text (plotly.js, CSS and script inlined; see :mod:`hta.report.builder`
for the escaping rules)."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from pathlib import Path

import jinja2
import pandas as pd

from hta._version import __version__
from hta.model.arrays import distinct
from hta.model.declared import Analysis, Columns
from hta.model.selection import Selection
from hta.model.trace import RankTrace
from hta.report.analyzer import Analyzer
from hta.report.context import Figure, Section
from hta.report.devices import device_names
from hta.report.packing import pack, packed_plotly, plotly_cdn_url
from hta.report.present import ranges_text, time_text

_TEMPLATES = Path(__file__).resolve().parent / "templates"


def job_header(analyzer: Analyzer, ranks: Sequence[int], iterations: Sequence[int] | None
               ) -> list[tuple[str, str]]:
    """(label, value) pairs describing the job, from the loaded ranks' metadata."""
    job = analyzer.t
    metas = [job.meta(r) for r in ranks]
    first = metas[0] if metas else {}
    items: list[tuple[str, str]] = [("trace folder", str(analyzer.trace_dir or ""))]
    world = first.get("world_size")
    items.append(("ranks", f"{len(ranks)} ({ranges_text(ranks)})"
                  + (f" of world size {world}" if world else "")))
    missing = list(analyzer.missing_ranks)
    if missing:
        items.append(("missing ranks", f"{len(missing)} ({ranges_text(missing)}): no trace in the "
                      "folder or an unreadable file; cross-rank figures cover the loaded "
                      "ranks only"))
    names = sorted({name for m in metas for name in device_names(m)})
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
    starts: list[int] = [s for m in metas if (s := m.get("trace_start_ns"))]
    ends: list[int] = [e for m in metas if (e := m.get("trace_end_ns"))]
    if starts and ends:
        start = _dt.datetime.fromtimestamp(min(starts) / 1e9, tz=_dt.timezone.utc)
        items.append(("trace window", f"{start:%Y-%m-%d %H:%M:%S} UTC, "
                      f"{time_text((max(ends) - min(starts)) / 1e3)}"))
    counts = _HEADER_COUNTS.run(job, Selection.of(list(ranks)))
    events = int(counts["events"].sum()) if len(counts) else 0
    items.append(("events", f"{events:,} complete events"))
    steps = sorted({int(i) for held in counts.get("steps", []) for i in held})
    if steps:
        items.append(("steps", ranges_text(steps)))
    if iterations is not None:
        items.append(("steps analysed", ranges_text(iterations)))
    files = [Path(str(m.get("source"))).name for m in metas if m.get("source")]
    if files:
        items.append(("files", ", ".join(files[:8]) + (f" and {len(files) - 8} more"
                                                       if len(files) > 8 else "")))
    return items


def _events_and_steps(rt: RankTrace) -> pd.DataFrame:
    """One rank (next to the data): its complete events, and the steps they belong to."""
    ev = rt.events
    return pd.DataFrame([{"rank": rt.rank, "events": len(ev),
                          "steps": [int(i) for i in distinct(ev["iteration"]) if i > 0]}],
                        columns=_COUNT_COLUMNS)


_COUNT_COLUMNS = ["rank", "events", "steps"]
_HEADER_COUNTS = Analysis("Report header", _events_and_steps, Columns.typed(_COUNT_COLUMNS),
                          add_rank=True)


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True,
    )


#: How the report carries plotly.js: packed (compressed, offline; the default), inline
#: (as is, offline, about 5 MB) or a link to Plotly's CDN (small; needs the network).
PLOTLYJS_MODES = ("embed", "inline", "cdn")
#: Sections written as plain HTML (the findings) when the report packs its data: the
#: rest is deflated with the figures and opened by the page's script.
PLAIN_SECTIONS = 1


def render(sections: Sequence[Section], header: Sequence[tuple[str, str]], title: str,
           warnings: Sequence[str] = (), summary: str = "", plotlyjs: str = "embed") -> str:
    """The HTML text of a report; ``summary`` is the job in one sentence (may be empty);
    ``plotlyjs`` one of :data:`PLOTLYJS_MODES`."""
    if plotlyjs not in PLOTLYJS_MODES:
        raise ValueError(f"plotlyjs={plotlyjs!r}: choose one of {', '.join(PLOTLYJS_MODES)}")
    figures_json = figures_document([f for s in sections for f in s.figures])
    figures_size = 0
    if plotlyjs != "inline":
        figures_json, figures_size = pack(figures_json.encode())
    plotly_js, plotly_size = packed_plotly() if plotlyjs == "embed" else (
        _plotly_js() if plotlyjs == "inline" else "", 0)
    env = _environment()
    # The sections after the first screen (the findings) travel packed with the figures:
    # their tables are most of the page's text, and a tenth of it deflated.
    shown = PLAIN_SECTIONS if plotlyjs != "inline" else len(sections)
    packed_html, packed_size = "", 0
    if len(sections) > shown:
        packed_html, packed_size = pack(env.get_template("sections.html.j2").render(
            sections=sections[shown:]).encode())
    return env.get_template("report.html.j2").render(
        title=title, header=header, sections=sections, warnings=list(warnings),
        summary=summary, plain_sections=sections[:shown],
        sections_html=jinja2.utils.markupsafe.Markup(packed_html), sections_size=packed_size,
        figures_json=jinja2.utils.markupsafe.Markup(figures_json), figures_size=figures_size,
        plotly_js=jinja2.utils.markupsafe.Markup(plotly_js), plotly_size=plotly_size,
        plotly_mode=plotlyjs, plotly_src=plotly_cdn_url() if plotlyjs == "cdn" else "",
        style=jinja2.utils.markupsafe.Markup((_TEMPLATES / "report.css").read_text()),
        script=jinja2.utils.markupsafe.Markup((_TEMPLATES / "report.js").read_text()),
        version=__version__,
        generated=_dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )


def figures_document(figures: Sequence[Figure]) -> str:
    """The figures' JSON document of a page: ``{"figures": {id: figure}, "templates":
    [template], "template_of": {id: index}}``, each figure's style sheet
    (``layout.template``, 6 kB, the same in most figures) written once and named by its
    index (the page's script puts it back). Every part is already escaped JSON text (see
    :mod:`hta.report.builder`): joined, never parsed again."""
    templates: dict[str, int] = {}
    of = {f.id: templates.setdefault(f.template, len(templates)) for f in figures
          if f.template}
    return ('{"figures":{' + ",".join(f"{json.dumps(f.id)}:{f.json}" for f in figures)
            + '},"templates":[' + ",".join(templates) + '],"template_of":'
            + json.dumps(of) + "}")


def _plotly_js() -> str:
    import plotly.offline

    js = plotly.offline.get_plotlyjs()
    if "</script" in js.lower():  # never seen; would end the script block early
        js = js.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")
    return js


__all__ = ["PLAIN_SECTIONS", "PLOTLYJS_MODES", "figures_document", "job_header", "render"]
