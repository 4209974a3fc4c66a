"""Progress bars that work in a terminal and in Jupyter, and can be silenced.

In a Jupyter kernel with ipywidgets installed (``pip install -e ".[notebook]"``) the bar
is a widget; anywhere else, or without ipywidgets, a text bar, without the
``TqdmWarning: IProgress not found`` that ``tqdm.auto`` prints in that case.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _NoBar:
    def update(self, n: int = 1) -> None:
        """Do nothing."""

    def set_postfix_str(self, text: str) -> None:
        """Do nothing."""


def in_jupyter_kernel() -> bool:
    """Whether this process is a Jupyter (IPython) kernel."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def bar_class() -> Any:
    """tqdm's widget bar in a Jupyter kernel that has ipywidgets, else its text bar."""
    from tqdm.std import tqdm as text_bar

    if not in_jupyter_kernel():
        return text_bar
    try:
        import ipywidgets  # noqa: F401 - only whether it is there
        from tqdm.notebook import tqdm as widget_bar
    except ImportError:
        return text_bar
    return widget_bar


@contextmanager
def progress_bar(total: int, description: str = "", *, enabled: bool = True) -> Iterator[Any]:
    """A tqdm bar (:func:`bar_class` picks the widget or the text bar)."""
    if not enabled or total <= 0:
        yield _NoBar()
        return
    tqdm = bar_class()
    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked meanwhile
    bar = tqdm(total=total, desc=description, unit="rank", leave=False)
    try:
        yield bar
    finally:
        bar.close()
