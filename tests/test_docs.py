"""The documentation site builds with warnings as errors (``mkdocs build --strict``).

Skips, with the reason, when MkDocs or its plugins are not installed. The build runs the
hooks in ``docs/hooks.py``, so the figures of the analysis pages are drawn from the sample
job and the CLI reference is taken from the parser: a broken builder or a renamed option
fails here too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed "
                    "(pip install -e '.[docs]')")
pytest.importorskip("material", reason="mkdocs-material is not installed "
                    "(pip install -e '.[docs]')")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_every_page_is_built(site: Path) -> None:
    pages = sorted(p.relative_to(ROOT / "docs").with_suffix("").as_posix()
                   for p in (ROOT / "docs").rglob("*.md"))
    for page in pages:
        built = site / ("index.html" if page == "index" else f"{page}/index.html")
        assert built.is_file(), page


def test_analysis_pages_have_live_figures(site: Path) -> None:
    assert (site / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    for page in ("temporal", "idle", "kernels", "overlap", "annotations", "launch", "queue",
                 "bandwidth", "operators", "sequences", "critical_path", "diff"):
        html = (site / "analyses" / page / "index.html").read_text()
        assert 'src="../../assets/plotly.min.js"' in html, page
        assert html.count("Plotly.newPlot(") >= 1, page
        assert "hta-figure:" not in html, page


def test_cli_reference_comes_from_the_parser(site: Path) -> None:
    html = (site / "cli" / "index.html").read_text()
    for sub in ("summary", "report", "diff", "counters", "export"):
        assert f'<h2 id="hta-{sub}">hta {sub}</h2>' in html
        assert f"usage: hta {sub}" in html
    assert "hta-cli-help" not in html


def test_api_reference_renders_docstrings(site: Path) -> None:
    html = (site / "api" / "analysis" / "index.html").read_text()
    assert "temporal_breakdown_detail" in html
    assert "the span minus the union of all GPU work intervals" in html
    facade = (site / "api" / "facade" / "index.html").read_text()
    assert "get_temporal_breakdown" in facade and "compare_jobs" in facade
