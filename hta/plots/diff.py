"""Figures of the trace diff: HTA's count and duration bars, and the job-level overview.

Builders take the tables of :mod:`hta.analysis.diff` and compute nothing.
"""

from __future__ import annotations

import pandas as pd

from hta.analysis.diff import JobDiff, labels_of
from hta.analysis.diff.metrics import IDLE_SECTION
from hta.plots._figure_parts import distinct_short, rank_label
from hta.plots._plotly import go, make_subplots
from hta.plots.colors import COMMUNICATION, COMPUTATION, IDLE, MEMORY

CONTROL_COLOR = "#1f77b4"
TEST_COLOR = "#ff7f0e"
DIFF_COLOR = "#7f7f7f"
SLOWER_COLOR = "#d62728"
FASTER_COLOR = "#2ca02c"
#: Temporal parts of the GPU time per step, bottom to top: (label, summary metric, colour).
GPU_TIME_PARTS = [
    ("compute", "compute_time(us)", COMPUTATION),
    ("exposed communication", "exposed_comm_time(us)", COMMUNICATION),
    ("exposed memory", "exposed_memory_time(us)", MEMORY),
    ("idle", "idle_time(us)", IDLE),
]
IDLE_PARTS = ["host_wait", "kernel_wait", "other"]


def counts_diff_figure(df: pd.DataFrame) -> go.Figure:
    """Per name, bars of the control count, the test count and the difference, from
    :func:`hta.analysis.diff.compare_traces`'s table (rows in the table's order)."""
    return _grouped(df, "counts", "diff_counts", "Ops count comparison", "count")


def duration_diff_figure(df: pd.DataFrame) -> go.Figure:
    """Per name, bars of the control and test total durations and the difference (µs)."""
    return _grouped(df, "total_duration", "diff_duration", "Ops duration comparison",
                    "total duration (µs)")


def _grouped(df: pd.DataFrame, suffix: str, diff_col: str, title: str,
             y_title: str) -> go.Figure:
    control, test = labels_of(df)
    names = [str(n) for n in df.index]
    x = distinct_short(names, 60)  # equal categories would be one bar
    unit = " µs" if suffix == "total_duration" else ""
    fmt = ",.3f" if unit else ","
    fig = go.Figure()
    for label, col, color in ((control, f"{control}_{suffix}", CONTROL_COLOR),
                              (test, f"{test}_{suffix}", TEST_COLOR),
                              ("Difference", diff_col, DIFF_COLOR)):
        fig.add_trace(go.Bar(
            name=label, x=x, y=df[col], marker_color=color, customdata=names,
            hovertemplate=f"%{{customdata}}<br>{label}: %{{y:{fmt}}}{unit}<extra></extra>",
        ))
    fig.update_layout(barmode="group", title_text=f"{title}: {control} vs {test}",
                      legend_title_text="trace", height=max(500, 420 + 4 * len(names)))
    fig.update_xaxes(title_text="name", type="category", tickangle=-45)
    fig.update_yaxes(title_text=y_title)
    return fig


def job_diff_figure(job: JobDiff, top: int = 10) -> go.Figure:
    """The job comparison at a glance, from the tables of a :class:`JobDiff`:

    1. mean step time per rank, control vs test;
    2. GPU time per step: compute, exposed communication, exposed memory, idle (stacked);
    3. GPU busy time per step by kernel type;
    4. stream idle time per step by cause;
    5. the ``top`` kernels whose GPU time per step changed most (growth red, saving green).

    The title is the verdict.
    """
    fig = make_subplots(
        rows=2, cols=3, horizontal_spacing=0.08, vertical_spacing=0.16,
        specs=[[{}, {}, {}], [{}, {"colspan": 2}, None]],
        subplot_titles=["step time per rank (mean)", "GPU time per step",
                        "GPU busy time per step by kernel type", "stream idle time per step",
                        f"largest changes in GPU time per step (top {top} each way)"],
    )
    _step_panel(fig, job.steps)
    _gpu_time_panel(fig, job.summary)
    _section_bars(fig, job.summary, "kernel_types", 1, 3, drop_suffix="(us)")
    _idle_panel(fig, job.summary)
    _changes_panel(fig, job.regressions("kernel", top), job.improvements("kernel", top))
    fig.update_layout(title_text=job.verdict, barmode="group", height=900,
                      legend_title_text="")
    fig.update_yaxes(title_text="µs", row=1, col=1)
    fig.update_yaxes(title_text="µs per step", row=1, col=2)
    fig.update_yaxes(title_text="µs per step", row=1, col=3)
    fig.update_yaxes(title_text="µs per step", row=2, col=1)
    fig.update_xaxes(title_text="change in GPU time per step (µs)", row=2, col=2)
    return fig


def _step_panel(fig: go.Figure, steps: pd.DataFrame) -> None:
    for side, color in (("control", CONTROL_COLOR), ("test", TEST_COLOR)):
        part = steps[steps["side"] == side]
        means = part.groupby("rank")["step_time(us)"].agg(["mean", "count"]).reset_index()
        fig.add_trace(go.Bar(
            x=[rank_label(r) for r in means["rank"]], y=means["mean"], name=side,
            legendgroup=side, marker_color=color, customdata=means["count"],
            hovertemplate=f"{side} %{{x}}<br>mean step %{{y:,.1f}} µs"
                          "<br>%{customdata} steps<extra></extra>",
        ), row=1, col=1)
    fig.update_xaxes(type="category", row=1, col=1)


def _values(summary: pd.DataFrame, section: str) -> pd.DataFrame:
    return summary[summary["section"] == section]


def _gpu_time_panel(fig: go.Figure, summary: pd.DataFrame) -> None:
    part = _values(summary, "gpu_time").set_index("metric")
    for label, metric, color in GPU_TIME_PARTS:
        fig.add_trace(go.Bar(
            x=["control", "test"], y=[part.at[metric, "control"], part.at[metric, "test"]],
            name=label, marker_color=color, legendgroup="gpu_time", showlegend=True,
            hovertemplate=f"%{{x}}<br>{label}: %{{y:,.1f}} µs per step<extra></extra>",
        ), row=1, col=2)
    # stacked inside this panel only: offset the bars of one side at the same x
    fig.update_traces(selector={"legendgroup": "gpu_time"}, offsetgroup="gpu_time")
    _stack(fig, [t for t in fig.data if t.legendgroup == "gpu_time"])


def _stack(fig: go.Figure, traces: list) -> None:
    """Stack bars that share an offset group by setting each one's base."""
    base = [0.0, 0.0]
    for trace in traces:
        ys = [float(v) if v == v else 0.0 for v in trace.y]
        trace.base = list(base)
        base = [b + y for b, y in zip(base, ys)]


def _section_bars(fig: go.Figure, summary: pd.DataFrame, section: str, row: int, col: int,
                  drop_suffix: str) -> None:
    part = _values(summary, section)
    part = part[part["metric"].str.endswith(drop_suffix)]
    labels = [m[: -len(drop_suffix)] for m in part["metric"]]
    for side, color in (("control", CONTROL_COLOR), ("test", TEST_COLOR)):
        fig.add_trace(go.Bar(
            x=distinct_short(labels, 30), y=part[side], name=side, legendgroup=side,
            marker_color=color, showlegend=False, customdata=labels,
            hovertemplate=f"{side}<br>%{{customdata}}: %{{y:,.1f}} µs per step<extra></extra>",
        ), row=row, col=col)


def _idle_panel(fig: go.Figure, summary: pd.DataFrame) -> None:
    part = _values(summary, IDLE_SECTION).set_index("metric")
    for side, color in (("control", CONTROL_COLOR), ("test", TEST_COLOR)):
        fig.add_trace(go.Bar(
            x=IDLE_PARTS, y=[part.at[f"{k}(us)", side] for k in IDLE_PARTS], name=side,
            legendgroup=side, marker_color=color, showlegend=False,
            hovertemplate=f"{side}<br>%{{x}}: %{{y:,.1f}} µs per step<extra></extra>",
        ), row=2, col=1)


def _changes_panel(fig: go.Figure, regressions: pd.DataFrame,
                   improvements: pd.DataFrame) -> None:
    # bottom to top: largest saving ... largest growth
    rows = pd.concat([improvements, regressions.iloc[::-1]], ignore_index=True)
    if not len(rows):
        fig.add_annotation(text="no kernel changed", showarrow=False, row=2, col=2,
                           x=0, y=0)
        return
    names = [str(n) for n in rows["name"]]
    colors = [SLOWER_COLOR if d > 0 else FASTER_COLOR for d in rows["delta_time(us)"]]
    fig.add_trace(go.Bar(
        y=names, x=rows["delta_time(us)"], orientation="h", marker_color=colors,
        name="change", showlegend=False,
        customdata=rows[["control_time(us)", "test_time(us)", "status"]],
        hovertemplate="%{y}<br>%{customdata[0]:,.1f} -> %{customdata[1]:,.1f} "
                      "µs per step (%{x:+,.1f})<br>%{customdata[2]}<extra></extra>",
    ), row=2, col=2)
    fig.update_yaxes(type="category", automargin=True, tickvals=names,
                     ticktext=distinct_short(names, 50), row=2, col=2)
