"""MkDocs hooks: live figures and the CLI reference, generated at build time.

* ``<!-- hta-figure: NAME -->`` in a page becomes the Plotly figure ``NAME`` of
  :data:`FIGURES`, drawn by the project's figure builders from the analyses of the bundled
  sample job (``sample_traces/synthetic_4rank``); plotly.js is added to the site once, as
  ``assets/plotly.min.js``, and loaded by the pages with figures, so they work offline.
* ``<!-- hta-cli-help -->`` becomes ``hta --help`` and every ``hta COMMAND --help``, taken
  from the parser itself, so the CLI reference never drifts from the code.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

logger = logging.getLogger("mkdocs.hooks.hta")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "synthetic_4rank"
PLOTLY_JS = "assets/plotly.min.js"
_FIGURE = re.compile(r"<!-- hta-figure: ([a-z_]+) -->")
_CLI = "<!-- hta-cli-help -->"


@cache
def _analyzer() -> Any:
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_dir=SAMPLE, cache=False, progress=False)


def _temporal() -> Any:
    from hta.plots.temporal import temporal_breakdown_figure

    return temporal_breakdown_figure(_analyzer().get_temporal_breakdown_detail(
        visualize=False))


def _idle() -> Any:
    from hta.plots.idle import idle_time_breakdown_figure

    return idle_time_breakdown_figure(_analyzer().get_idle_time_breakdown(visualize=False)[0])


def _kernel_types() -> Any:
    from hta.analysis.kernels import kernel_type_breakdown
    from hta.plots.kernels import kernel_type_figure

    return kernel_type_figure(kernel_type_breakdown(_analyzer().t, by_rank=True))


def _kernel_durations() -> Any:
    from hta.plots.kernels import kernel_duration_figure

    table = _analyzer().get_gpu_kernel_breakdown(num_kernels=3, visualize=False)[1]
    return kernel_duration_figure(table, "COMPUTATION")


def _overlap() -> Any:
    from hta.plots.overlap import comm_comp_overlap_figure

    return comm_comp_overlap_figure(_analyzer().get_comm_comp_overlap(visualize=False))


def _annotations() -> Any:
    from hta.plots.annotations import user_annotation_figure

    return user_annotation_figure(_analyzer().get_gpu_user_annotation_breakdown(
        visualize=False))


def _launch() -> Any:
    from hta.plots.launch import launch_stats_figure

    df = _analyzer().get_cuda_kernel_launch_stats(visualize=False)
    return launch_stats_figure(df, 50, 100)


def _queue() -> Any:
    from hta.plots.queue import queue_length_figure

    series = _analyzer().get_queue_length_time_series(ranks=[0])
    return queue_length_figure(series)


def _bandwidth() -> Any:
    from hta.plots.bandwidth import memory_bw_summary_figure

    return memory_bw_summary_figure(_analyzer().get_memory_bw_summary())


def _operators() -> Any:
    from hta.plots.operators import operator_breakdown_figure

    return operator_breakdown_figure(_analyzer().get_operator_breakdown(ranks=[0],
                                                                       visualize=False),
                                     max_rows=10)


def _sequences() -> Any:
    import tempfile

    from hta.plots.operators import frequent_sequences_figure

    with tempfile.TemporaryDirectory() as tmp:
        df = _analyzer().get_frequent_cuda_kernel_sequences("ProfilerStep", tmp, rank=0)
    return frequent_sequences_figure(df.head(5), 0)


def _critical_path() -> Any:
    from hta.plots.critical_path import critical_path_figure

    analyzer = _analyzer()
    graph, _ = analyzer.critical_path_analysis(0)
    bounds, events = analyzer.get_critical_path_summary(0, critical_path_graph=graph,
                                                        visualize=False)
    return critical_path_figure(bounds, events, 10, title="Critical path of rank 0, step 1")


def _diff() -> Any:
    from hta.plots.diff import job_diff_figure
    from hta.trace_diff import TraceDiff

    analyzer = _analyzer()
    return job_diff_figure(TraceDiff.compare_jobs(analyzer, analyzer))


def _timeline() -> Any:
    return _analyzer().plot_timeline(iterations=[2], title="GPU timeline of step 2")


def _stragglers() -> Any:
    from hta.analysis.stragglers import straggler_summary
    from hta.plots.stragglers import straggler_figure

    arrivals = _analyzer().get_collective_arrivals()
    return straggler_figure(straggler_summary(arrivals), arrivals)


def _collectives() -> Any:
    from hta.plots.collectives import collective_bandwidth_figure
    return collective_bandwidth_figure(_analyzer().get_collective_performance())


def _memory() -> Any:
    from hta.plots.memory import memory_timeline_figure

    analyzer = _analyzer()
    return memory_timeline_figure(analyzer.get_memory_timeline(ranks=[0, 1]),
                                  analyzer.get_memory_summary(ranks=[0, 1]))


FIGURES: dict[str, Callable[[], Any]] = {
    "temporal": _temporal, "idle": _idle, "kernel_types": _kernel_types,
    "kernel_durations": _kernel_durations, "overlap": _overlap, "annotations": _annotations,
    "launch": _launch, "queue": _queue, "bandwidth": _bandwidth, "operators": _operators,
    "sequences": _sequences, "critical_path": _critical_path, "diff": _diff,
    "timeline": _timeline, "stragglers": _stragglers, "memory": _memory,
    "collectives": _collectives,
}


def _figure_html(name: str) -> str:
    if name not in FIGURES:
        raise KeyError(f"unknown figure {name!r} in a docs page; known: {sorted(FIGURES)}")
    fig = FIGURES[name]()
    fig.update_layout(height=min(fig.layout.height or 450, 700))
    return ('<div class="hta-figure">'
            + fig.to_html(full_html=False, include_plotlyjs=False,
                          config={"displaylogo": False, "responsive": True})
            + "</div>")


def _cli_help() -> str:
    from hta.cli import build_parser

    parser = build_parser()
    parts = [("hta", parser.format_help())]
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, subparser in sub.choices.items():
        parts.append((f"hta {name}", subparser.format_help()))
    out = []
    for title, text in parts:
        anchor = title.replace(" ", "-")
        out.append(f'<h2 id="{anchor}">{html.escape(title)}</h2>\n'
                   f"<pre><code>{html.escape(text)}</code></pre>")
    return "\n".join(out)


def on_files(files: Any, config: Any) -> Any:
    """Add plotly.js to the site."""
    import plotly.offline
    from mkdocs.structure.files import File

    files.append(File.generated(config, PLOTLY_JS, content=plotly.offline.get_plotlyjs()))
    return files


def on_page_content(content: str, page: Any, config: Any, files: Any) -> str:
    """Replace the figure and CLI placeholders of a rendered page; a page with figures
    loads plotly.js first (a relative URL: the site works from files too)."""
    if _FIGURE.search(content):
        up = "../" * page.url.count("/")
        content = (f'<script src="{up}{PLOTLY_JS}"></script>\n'
                   + _FIGURE.sub(lambda m: _figure_html(m.group(1)), content))
    if _CLI in content:
        content = content.replace(_CLI, _cli_help())
    return content
