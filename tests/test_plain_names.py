"""Untrusted names reach figures as text, never as Plotly's pseudo-HTML."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hta.analysis.idle import idle_interval_stats
from hta.plots._figure_parts import plain_text_names


def test_names_are_escaped_everywhere_they_show() -> None:
    fig = go.Figure(go.Bar(
        x=["<b>bold</b>", "void f<int>()"], y=[1, 2],
        customdata=[["<a href='javascript:alert(1)'>x</a>", 1], ["plain", 2]],
        name="<i>trace</i>", hovertemplate="%{x}<br>%{y}<extra></extra>",
    ))
    plain_text_names(fig)
    bar = fig.data[0]
    assert list(bar.x) == ["&lt;b&gt;bold&lt;/b&gt;", "void f&lt;int&gt;()"]
    assert bar.customdata[0][0] == "&lt;a href='javascript:alert(1)'&gt;x&lt;/a&gt;"
    assert bar.customdata[0][1] == 1
    assert bar.name == "&lt;i&gt;trace&lt;/i&gt;"
    assert bar.hovertemplate == "%{x}<br>%{y}<extra></extra>"  # our markup is kept
    assert list(bar.y) == [1, 2]


def test_interval_stats_of_no_gaps_is_an_empty_table() -> None:
    empty = pd.DataFrame({"rank": [], "stream": [], "idle_category": [], "idle_time(ns)": []})
    stats = idle_interval_stats(empty)
    assert len(stats) == 0
    assert {"rank", "stream", "idle_category", "count", "mean", "max"} <= set(stats.columns)
