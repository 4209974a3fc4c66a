"""Figure of the job's critical path across ranks (:mod:`hta.analysis.whatif.jobpath`)."""

from __future__ import annotations

import pandas as pd

from hta.plots._plotly import go

#: Colour per segment kind of the job's critical path.
KIND_COLOURS = {"cpu": "#4c78a8", "launch": "#f58518", "gpu": "#54a24b", "comm": "#e45756",
                "wait": "#bab0ac"}


def job_critical_path_figure(path: pd.DataFrame, step_label: str) -> go.Figure:
    """One row per rank, one bar per segment of ``path`` (the columns of
    :func:`~hta.analysis.whatif.jobpath.job_critical_path`) from its start to its end,
    coloured by kind; the hover names the work. ``step_label`` names the step in the
    title ("step 3", "the whole trace")."""
    fig = go.Figure()
    for kind, colour in KIND_COLOURS.items():
        part = path[path["kind"] == kind]
        if not len(part):
            continue
        fig.add_trace(go.Bar(
            y=[f"rank {r}" for r in part["rank"]], x=part["dur(us)"],
            base=part["start(us)"], orientation="h", name=kind,
            marker_color=colour, customdata=part["name"],
            hovertemplate="%{customdata}<br>%{base:,.1f} µs + %{x:,.1f} µs<extra>"
                          + kind + "</extra>"))
    fig.update_layout(
        title=f"The job's critical path, {step_label}: {path['dur(us)'].sum():,.1f} µs",
        barmode="overlay", xaxis_title="µs from the step's start (replay)",
        yaxis={"categoryorder": "category descending"}, height=160 + 40 *
        max(1, path["rank"].nunique()))
    return fig
