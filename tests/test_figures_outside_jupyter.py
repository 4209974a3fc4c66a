"""Outside a Jupyter kernel a facade method never blocks on a figure: it writes HTML.

Plotly's default renderer in a script is the browser one, which serves the figure until a
browser fetches it: on a headless host the call never returns. ``hta.facade.display.show``
writes the figure into ``HTA_FIGURES_DIR`` instead (see its module docstring).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hta.facade import display

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "synthetic_4rank"

SCRIPT = """
import json, time
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=%r, progress=False, cache=False)
t = time.perf_counter(); a.get_temporal_breakdown(visualize=False); quiet = time.perf_counter() - t
t = time.perf_counter(); a.get_temporal_breakdown(); shown = time.perf_counter() - t
print(json.dumps({"quiet": quiet, "shown": shown}))
"""


def test_a_script_with_the_default_visualize_returns_and_writes_html(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PLOTLY_RENDERER"}
    # a "browser" that never fetches the figure: Plotly's browser renderer would wait for it
    env.update(BROWSER="sleep 600", HTA_FIGURES_DIR=str(tmp_path / "figs"), DISPLAY="")
    done = subprocess.run([sys.executable, "-c", SCRIPT % str(SAMPLE)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    times = json.loads(done.stdout.strip().splitlines()[-1])
    # a blocked renderer would wait for the 600 s "browser" (or hit the timeout); writing
    # the HTML and plotly.js takes well under a second, more on a loaded machine
    assert times["shown"] < times["quiet"] + 30, times
    written = sorted((tmp_path / "figs").glob("*.html"))
    assert len(written) == 1 and written[0].name.startswith("gpu-time-breakdown")
    assert (tmp_path / "figs" / "plotly.min.js").is_file()  # the file opens offline
    assert "written as HTML files" in done.stderr and str(written[0]) in done.stderr


def test_show_writes_a_file_per_figure_and_logs_where(tmp_path, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    import plotly.graph_objects as go

    monkeypatch.delenv("PLOTLY_RENDERER", raising=False)
    monkeypatch.setenv(display.FIGURES_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(go.Figure, "show", lambda self, **kw: pytest.fail("must not open"))
    fig = go.Figure(go.Bar(x=["<b>k</b>"], y=[1]), layout={"title": "Idle <i>time</i>: rank 0"})
    with caplog.at_level(logging.INFO, logger="hta.facade.display"):
        first = display.write_figure_file(fig)
        display.show(fig)
    assert first.parent == tmp_path and first.name.startswith("idle-time-rank-0-")
    assert len(list(tmp_path.glob("idle-time-rank-0-*.html"))) == 2
    assert str(first) in caplog.text


def test_a_renderer_asked_for_is_used(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import plotly.graph_objects as go

    used: list[object] = []
    monkeypatch.setattr(go.Figure, "show", lambda self, **kw: used.append(kw.get("renderer")))
    monkeypatch.setenv(display.FIGURES_DIR_ENV, str(tmp_path))
    monkeypatch.delenv("PLOTLY_RENDERER", raising=False)
    display.show(go.Figure(), renderer="png")
    monkeypatch.setenv("PLOTLY_RENDERER", "json")
    display.show(go.Figure())
    assert used == ["png", None] and not list(tmp_path.iterdir())


def test_figures_dir_defaults_to_the_temporary_folder(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(display.FIGURES_DIR_ENV, raising=False)
    assert display.figures_dir().name == "hta-figures"
