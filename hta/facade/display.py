"""Showing figures from the facade."""

from __future__ import annotations

from typing import Any


def show(figure: Any, **kwargs: Any) -> None:
    """Display a Plotly figure (inline in Jupyter, a browser tab elsewhere), with names
    escaped so that Plotly shows them as text (see ``plain_text_names``)."""
    from hta.plots._figure_parts import plain_text_names

    plain_text_names(figure).show(**kwargs)
