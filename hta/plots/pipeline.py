"""Figures of the pipeline analysis (:mod:`hta.analysis.pipeline`): stages x time, and the
bubble of each stage against the theory; and the straggler causes."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go, make_subplots

#: Colour of each kind of interval of the timeline.
KIND_COLORS = {"compute": "#2ca02c", "bubble": "#d62728", "wait": "#ff7f0e",
               "transfer": "#1f77b4"}
#: Colour of each straggler cause.
CAUSE_COLORS = {"slow_compute": "#2ca02c", "imbalance": "#bcbd22", "host": "#9467bd",
                "slow_link": "#1f77b4", "unexplained": "#7f7f7f"}
#: Most intervals drawn per kind (the longest are kept; said in the title).
MAX_BARS = 4_000
#: Steps drawn in the timeline (the first ones of the table).
MAX_STEPS = 2
#: The row under a stage's computation holding its send/recv kernels (they run on their
#: own streams, beside the computation).
P2P_ROW = " · send/recv"


def pipeline_figure(stages: pd.DataFrame, timeline: pd.DataFrame) -> go.Figure:
    """Top: stages x time over the first :data:`MAX_STEPS` steps, computation, bubbles,
    and the send/recv kernels cut into the wait for the peer and the transfer (times in
    ms from the first interval drawn). Bottom: per stage, the mean bubble per step beside
    the theory. ``stages``: :func:`hta.analysis.pipeline_bubbles.stage_means` of
    ``get_pipeline_bubbles(per="step")``; ``timeline``: ``per="timeline"``."""
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.18, row_heights=[0.62, 0.38],
                        subplot_titles=(_timeline_title(timeline),
                                        "Bubble per step, measured and theory (ms)"))
    if not len(timeline):
        fig.add_annotation(text="no pipeline: no send/recv kernel matched across ranks",
                           showarrow=False, xref="x domain", yref="y domain", x=0.5, y=0.5)
        fig.update_layout(title_text="Pipeline bubbles", height=640)
        return fig
    _add_timeline(fig, timeline)
    _add_bubble_bars(fig, stages)
    fig.update_layout(title_text="Pipeline: where each stage's computation idles",
                      height=max(640, 320 + 60 * int(timeline["stage"].nunique())),
                      barmode="overlay", legend_title_text="")
    return fig


def _drawn(timeline: pd.DataFrame) -> pd.DataFrame:
    """The intervals of the first :data:`MAX_STEPS` steps, at most :data:`MAX_BARS` per
    kind (the longest)."""
    first = sorted(timeline["step"].unique())[:MAX_STEPS]
    t = timeline[timeline["step"].isin(first)]
    t = t.assign(_len=t["end_ns"] - t["start_ns"])
    return (t.sort_values("_len", ascending=False, kind="stable").groupby("kind").head(MAX_BARS)
            .sort_values("start_ns", kind="stable"))


def _timeline_title(timeline: pd.DataFrame) -> str:
    if not len(timeline):
        return "Stages over time"
    steps = sorted(timeline["step"].unique())
    shown = steps[:MAX_STEPS]
    more = f" (first {len(shown)} of {len(steps)} steps)" if len(steps) > len(shown) else ""
    return f"Stages over time, step {', '.join(str(s) for s in shown)}{more}"


def _stage_label(pipeline: int, stage: int, rank: int, pipelines: int) -> str:
    head = f"pipeline {pipeline} " if pipelines > 1 else ""
    return f"{head}stage {stage} ({rank_label(rank)})"


def _add_timeline(fig: go.Figure, timeline: pd.DataFrame) -> None:
    t = _drawn(timeline)
    origin = int(t["start_ns"].min())
    pipelines = int(timeline["pipeline"].nunique())
    order = (t[["pipeline", "stage", "rank"]].drop_duplicates()
             .sort_values(["pipeline", "stage"], kind="stable"))
    labels = []
    for p, s, r in order.itertuples(index=False, name=None):
        label = _stage_label(int(p), int(s), int(r), pipelines)
        labels += [label, label + P2P_ROW]
    for kind, color in KIND_COLORS.items():
        part = t[t["kind"] == kind]
        if not len(part):
            continue
        row = P2P_ROW if kind in ("wait", "transfer") else ""
        y = [_stage_label(int(p), int(s), int(r), pipelines) + row for p, s, r in
             part[["pipeline", "stage", "rank"]].itertuples(index=False, name=None)]
        fig.add_trace(go.Bar(
            base=(part["start_ns"] - origin) / 1e6, x=(part["end_ns"] - part["start_ns"]) / 1e6,
            y=y, orientation="h", name=kind, marker_color=color,
            opacity=0.7 if row else 0.9, width=0.6 if row else 0.8,
            customdata=part[["step", "micro_batch", "phase"]],
            hovertemplate=f"{kind}<br>%{{y}}<br>step %{{customdata[0]}}, micro-batch "
                          "%{customdata[1]} %{customdata[2]}<br>from %{base:,.3f} ms, "
                          "%{x:,.3f} ms<extra></extra>"), row=1, col=1)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=labels[::-1],
                     row=1, col=1)
    fig.update_xaxes(title_text="time (ms)", row=1, col=1)


def _add_bubble_bars(fig: go.Figure, mean: pd.DataFrame) -> None:
    if not len(mean):
        return
    pipelines = int(mean["pipeline"].nunique())
    x = [_stage_label(int(p), int(s), int(r), pipelines) for p, s, r in
         mean[["pipeline", "stage", "rank"]].itertuples(index=False, name=None)]
    # side by side (the figure's bar mode overlays the timeline's bars)
    fig.add_trace(go.Bar(x=x, y=mean["bubble(us)"] / 1e3, name="bubble, measured",
                         marker_color=KIND_COLORS["bubble"], showlegend=False,
                         width=0.38, offset=-0.4,
                         hovertemplate="%{x}<br>bubble %{y:,.3f} ms per step<extra></extra>"),
                  row=2, col=1)
    fig.add_trace(go.Bar(x=x, y=mean["bubble_theory(us)"] / 1e3, name="bubble, theory",
                         marker_color="#7f7f7f", width=0.38, offset=0.02,
                         hovertemplate="%{x}<br>theory %{y:,.3f} ms per step<extra></extra>"),
                  row=2, col=1)
    fig.update_xaxes(type="category", row=2, col=1)
    fig.update_yaxes(title_text="ms per step (red: measured)", row=2, col=1)


def straggler_causes_figure(causes: pd.DataFrame) -> go.Figure:
    """Per late rank and cause: the time it held the others up (``held(us)``), and its
    evidence against the median rank on hover. ``causes``:
    ``get_straggler_causes()``."""
    fig = go.Figure()
    if not len(causes):
        fig.add_annotation(text="no rank held the others up above the job's noise",
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    for cause, part in causes.groupby("cause", sort=True):
        fig.add_trace(go.Bar(
            x=[rank_label(r) for r in part["rank"]], y=part["held(us)"] / 1e3, name=str(cause),
            marker_color=CAUSE_COLORS.get(str(cause), "#7f7f7f"), showlegend=True,
            customdata=part[["compute(us)", "median_compute(us)", "idle(us)",
                             "median_idle(us)", "transfer(us)", "median_transfer(us)"]] / 1e3,
            hovertemplate=f"%{{x}}: {cause}<br>held the others %{{y:,.3f}} ms<br>"
                          "compute %{customdata[0]:,.3f} ms (median %{customdata[1]:,.3f})<br>"
                          "GPU idle %{customdata[2]:,.3f} ms (median %{customdata[3]:,.3f})<br>"
                          "transfer %{customdata[4]:,.3f} ms (median %{customdata[5]:,.3f})"
                          "<extra></extra>"))
    fig.update_layout(title_text="Why ranks are late: time each held the others up, by cause",
                      barmode="stack", xaxis_title="rank", yaxis_title="held (ms)",
                      xaxis_type="category", height=420, legend_title_text="cause")
    return fig
