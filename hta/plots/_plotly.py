"""Plotly, imported when a figure is first built rather than when ``hta`` is imported.

Importing ``plotly.graph_objects`` costs about 40 ms and most sessions (the command
line's ``summary``, a script reading tables) draw nothing. The figure builders use
``go``, ``make_subplots`` and ``colors`` from here: each resolves to plotly's own on first
use.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any


def _graph_objects() -> ModuleType:
    import plotly.graph_objects

    return plotly.graph_objects


def _colors() -> ModuleType:
    import plotly.colors

    return plotly.colors


class _Lazy(ModuleType):
    """A module imported on first attribute access (by ``load``, a plain import)."""

    def __init__(self, name: str, load: Callable[[], ModuleType]) -> None:
        super().__init__(name)
        self._load = load
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._module is None:
            self._module = self._load()
        return getattr(self._module, attr)


go: Any = _Lazy("plotly.graph_objects", _graph_objects)
colors: Any = _Lazy("plotly.colors", _colors)


def make_subplots(*args: Any, **kwargs: Any) -> Any:
    """:func:`plotly.subplots.make_subplots`."""
    from plotly.subplots import make_subplots as real

    return real(*args, **kwargs)


__all__ = ["colors", "go", "make_subplots"]
