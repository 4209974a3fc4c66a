"""Figure of the collective performance: bus bandwidth against message size."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.plots._plotly import go
from hta.plots.colors import OTHER

#: Most points drawn per collective operation (the longest calls are kept).
MAX_POINTS = 20_000


def collective_bandwidth_figure(perf: pd.DataFrame, link_gbps: float | None = None,
                                link_name: str = "") -> go.Figure:
    """Bus bandwidth (GB/s) of every call against its message size (bytes), both axes
    logarithmic, one colour per collective operation; ``link_gbps`` draws the link's
    bandwidth as a horizontal line.

    ``perf`` is :func:`hta.analysis.collectives.collective_performance`'s table; calls
    without a message size or bus bandwidth are left out (said in the title). An
    operation with more than :data:`MAX_POINTS` calls shows its longest ones.
    """
    p = perf[np.isfinite(perf["busbw(GB/s)"].to_numpy(float))
             & (perf["busbw(GB/s)"].to_numpy(float) > 0)] if len(perf) else perf
    fig = go.Figure()
    for op in sorted(p["collective"].unique()) if len(p) else []:
        part = p[p["collective"] == op]
        if len(part) > MAX_POINTS:
            part = part.nlargest(MAX_POINTS, "time(us)")
        fig.add_trace(go.Scattergl(
            x=part["msg_bytes"], y=part["busbw(GB/s)"], mode="markers", name=str(op),
            marker={"size": 6, "opacity": 0.7},
            customdata=part[["rank", "process_group", "time(us)", "iteration"]],
            hovertemplate=f"{op}<br>%{{x:,.0f}} bytes, %{{y:,.2f}} GB/s"
                          "<br>rank %{customdata[0]}, group %{customdata[1]}"
                          "<br>%{customdata[2]:,.1f} µs, step %{customdata[3]}<extra></extra>",
        ))
    if link_gbps:
        fig.add_hline(y=float(link_gbps), line_dash="dash", line_color=OTHER,
                      annotation_text=f"{link_name or 'link'}: {float(link_gbps):,.0f} GB/s")
    left_out = len(perf) - len(p)
    title = "Collectives: bus bandwidth against message size"
    if left_out:
        title += f" ({left_out} calls without a message size left out)"
    if not len(p):
        fig.add_annotation(text="no call with a message size (collective args)",
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(title_text="message size (bytes)", type="log")
    fig.update_yaxes(title_text="bus bandwidth (GB/s)", type="log")
    fig.update_layout(title_text=title, height=520, legend_title_text="collective")
    return fig
