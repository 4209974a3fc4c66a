"""Progress bars in a Jupyter kernel are one output, replaced as they move, so that a
notebook executed headless saves no bar at 0 % (the notebooks themselves are executed in
tests/test_notebooks.py)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from hta import progress


class _Shell:
    config = {"IPKernelApp": {}}


def fake_kernel(monkeypatch: pytest.MonkeyPatch, shown: list[str]) -> None:
    """A Jupyter kernel without ipywidgets whose displays land in ``shown``."""

    class Handle:
        def update(self, bundle: dict[str, str], raw: bool) -> None:
            assert raw
            shown.append(bundle["text/plain"])

    def display(bundle: dict[str, str], raw: bool, display_id: bool) -> Any:
        assert raw and display_id
        shown.append(bundle["text/plain"])
        return Handle()

    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: _Shell()  # type: ignore[attr-defined]
    ipython.__path__ = []  # a package, so that IPython.display imports
    shown_module = types.ModuleType("IPython.display")
    shown_module.display = display  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", shown_module)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # not installed


def test_a_text_bar_in_a_kernel_is_one_output_blank_when_done(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    shown: list[str] = []
    fake_kernel(monkeypatch, shown)
    with progress.progress_bar(3, "Loading traces") as bar:
        for _ in range(3):
            bar.update(1)
    assert shown[0].startswith("Loading traces:   0%|")
    assert shown[-1] == ""  # the bar does not stay, as in a terminal
    assert "\r" not in "".join(shown)
    assert capsys.readouterr().err == ""  # nothing piles up in the cell's stderr


def test_outside_a_kernel_the_bar_writes_to_stderr(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    with progress.progress_bar(2, "Loading traces") as bar:
        bar.update(2)
    assert "Loading traces" in capsys.readouterr().err
