"""Progress bars that work in a terminal and in Jupyter, and can be silenced.

In a Jupyter kernel with ipywidgets installed (``pip install -e ".[notebook]"``) the bar
is a widget; anywhere else, or without ipywidgets, a text bar, without the
``TqdmWarning: IProgress not found`` that ``tqdm.auto`` prints in that case.

In a kernel, a notebook executed headless (``jupyter nbconvert --execute``) saves what the
bar showed first: a widget's output keeps the plain-text copy made when it was displayed
(``0%``), and a text bar's carriage returns pile up in the cell's stderr, the first line
reading ``0%``. So there each bar is one output, shown through a display handle and
replaced as the bar moves; once closed it is blank when the work finished (the bar does
not stay, as in a terminal) and the bar's last state when the work stopped early.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _NoBar:
    def update(self, n: int = 1) -> None:
        """Do nothing."""


def in_jupyter_kernel() -> bool:
    """Whether this process is a Jupyter (IPython) kernel."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
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
    """A tqdm bar (:func:`bar_class` picks the widget or the text bar).

    In a Jupyter kernel either bar is one output replaced as the bar moves (see the module's
    docstring), so an executed notebook never saves the bar's first state.
    """
    if not enabled or total <= 0:
        yield _NoBar()
        return
    tqdm = bar_class()
    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked meanwhile
    if tqdm.__module__.startswith("tqdm.notebook"):
        from IPython.display import display

        bar = tqdm(total=total, desc=description, unit="rank", leave=False, display=False)
        handle = display(bar.container, display_id=True)
        try:
            yield bar
        finally:
            bar.close()
            if handle is not None:
                finished = not bar.total or bar.n >= bar.total
                handle.update({"text/plain": "" if finished else str(bar)}, raw=True)
        return
    out = _OutputLine.in_kernel() if in_jupyter_kernel() else None
    bar = tqdm(total=total, desc=description, unit="rank", leave=False, file=out)
    try:
        yield bar
    finally:
        bar.close()


class _OutputLine:
    """A file for tqdm's text bar in a Jupyter kernel: the line the bar draws (what follows
    its last carriage return) replaces one output, rather than piling up, carriage returns
    and all, in the cell's stderr, where an executed notebook saves every state."""

    def __init__(self, display: Any) -> None:
        self._display = display
        self._handle: Any = None
        self.encoding = "utf-8"  # tqdm draws the bar in block characters, not ASCII

    @classmethod
    def in_kernel(cls) -> _OutputLine | None:
        """One for this kernel; ``None`` (tqdm writes to stderr) without IPython's display."""
        try:
            from IPython.display import display
        except ImportError:
            return None
        return cls(display)

    def write(self, text: str) -> int:
        """Show the bar's current line (blank once a bar that does not stay is closed)."""
        line = text.rsplit("\r", 1)[-1].replace("\n", "").rstrip()
        bundle = {"text/plain": line}
        if self._handle is None:
            self._handle = self._display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: every write is shown."""
