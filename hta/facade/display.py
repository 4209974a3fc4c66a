"""Showing figures from the facade."""

from __future__ import annotations

from typing import Any


def show(figure: Any) -> None:
    """Display a Plotly figure (inline in Jupyter, a browser tab elsewhere)."""
    figure.show()
