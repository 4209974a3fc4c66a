"""Progress bars that work in a terminal and in Jupyter, and can be silenced."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _NoBar:
    def update(self, n: int = 1) -> None:
        """Do nothing."""

    def set_postfix_str(self, text: str) -> None:
        """Do nothing."""


@contextmanager
def progress_bar(total: int, description: str = "", *, enabled: bool = True) -> Iterator[Any]:
    """A tqdm bar (``tqdm.auto`` picks the Jupyter widget when available)."""
    if not enabled or total <= 0:
        yield _NoBar()
        return
    from tqdm.auto import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked meanwhile
    bar = tqdm(total=total, desc=description, unit="rank", leave=False)
    try:
        yield bar
    finally:
        bar.close()
