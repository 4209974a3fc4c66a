"""Figure of the communication/computation overlap: one bar per rank."""

from __future__ import annotations

import pandas as pd

from hta.plots._figure_parts import rank_label
from hta.plots._plotly import go


def comm_comp_overlap_figure(df: pd.DataFrame) -> go.Figure:
    """Bar per rank: % of communication time overlapped by computation.

    ``df`` is :func:`hta.analysis.overlap.comm_comp_overlap`'s table; a rank whose
    ``note`` is not empty (no communication) gets its note written instead of a bar.
    """
    x = [rank_label(r) for r in df["rank"]]
    fig = go.Figure(go.Bar(
        x=x, y=df["comp_comm_overlap_pctg"], name="overlap", marker_color="#1f77b4",
        customdata=df[["comm_time(us)", "overlap_time(us)"]],
        hovertemplate="%{x}<br>%{y:.2f}% of communication overlapped"
                      "<br>communication %{customdata[0]:,.3f} µs"
                      "<br>overlapped %{customdata[1]:,.3f} µs<extra></extra>",
    ))
    for label, note in zip(x, df["note"]):
        if note:
            fig.add_annotation(x=label, y=0, text=note, showarrow=False, yanchor="bottom",
                               textangle=-90, font={"color": "#7f7f7f"})
    fig.update_layout(title_text="Communication overlapped by computation, per rank")
    fig.update_xaxes(title_text="rank", type="category", categoryorder="array",
                     categoryarray=x)
    fig.update_yaxes(title_text="comm. overlapped (%)",
                     range=[0, 100])
    return fig
