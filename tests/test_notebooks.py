"""The notebooks in ``notebooks/`` run top to bottom with a real Python kernel.

Each notebook is executed by nbclient (ipykernel's ``python3`` kernel) in a copy of the
notebooks folder beside a copy of ``sample_traces/``, so the caches and files the
notebooks write stay out of the repository. Any error in any cell fails the test.

An executed notebook must keep its figures in a form ``jupyter nbconvert --to html`` shows
(HTML beside the Plotly JSON), and must not save a progress bar's first state (``0%``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed "
                               "(pip install -e '.[notebook]')")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed "
                               "(pip install -e '.[notebook]')")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e '.[notebook]')")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: A tqdm bar at 0 % ("  0%|", not "100%|"), as an executed notebook would save it.
ZERO_BAR = re.compile(r"(?<!\d)0%\|")


def test_the_notebooks_are_there() -> None:
    assert [p.name for p in NOTEBOOKS] == ["distributed_job.ipynb", "hta_main_methods.ipynb",
                                           "quickstart.ipynb", "trace_diff.ipynb"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("notebooks")
    shutil.copytree(ROOT / "sample_traces", root / "sample_traces",
                    ignore=shutil.ignore_patterns(".hta_cache"))
    (root / "notebooks").mkdir()
    return root / "notebooks"


@pytest.fixture(scope="module")
def executed(workdir: Path) -> dict[Path, object]:
    """Notebooks executed so far in this module, by path (each runs once)."""
    return {}


def execute(path: Path, workdir: Path, executed: dict[Path, object]) -> object:
    """``path`` executed (once per module) with this checkout on the kernel's path."""
    if path not in executed:
        book = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") for c in book.cells if c.cell_type == "code"), (
            "commit notebooks without outputs")
        # the kernel's temporary folders (a notebook's own output folder) in the test's
        temp = workdir.parent / "tmp"
        temp.mkdir(exist_ok=True)
        env = {"PYTHONPATH": os.pathsep.join([str(ROOT)] + [
            p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
               "TMPDIR": str(temp)}
        before = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            client = nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                                             resources={"metadata": {"path": str(workdir)}})
            client.execute()  # raises CellExecutionError on the first failing cell
        finally:
            for key, value in before.items():
                if value is None:
                    del os.environ[key]
                else:
                    os.environ[key] = value
        executed[path] = book
    return executed[path]


def texts(book: object) -> list[str]:
    """Every piece of text a code cell's outputs hold: streams and plain-text copies."""
    outs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
    return [str(o.get("text", "")) for o in outs] + [
        str(o.get("data", {}).get("text/plain", "")) for o in outs]


def figures(book: object) -> list[dict]:
    """The Plotly figures the outputs hold, as their mime bundles."""
    return [o["data"] for c in book.cells if c.cell_type == "code" for o in c.outputs
            if "application/vnd.plotly.v1+json" in o.get("data", {})
            or "plotly-graph-div" in str(o.get("data", {}).get("text/html", ""))]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, workdir: Path, executed: dict[Path, object]) -> None:
    book = execute(path, workdir, executed)
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert errors == []
    code = [c for c in book.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)  # every cell ran
    displayed = [o for c in code for o in c.outputs
                 if o.output_type in ("display_data", "execute_result")]
    assert displayed, "the notebook shows nothing"
    printed = "".join(str(o.get("text", "")) for c in code for o in c.outputs
                      if o.output_type == "stream")
    assert "TqdmWarning" not in printed and "IProgress not found" not in printed
    assert not [t for t in texts(book) if ZERO_BAR.search(t)], "a progress bar saved at 0 %"
    for bundle in figures(book):  # every figure also as HTML, which nbconvert shows
        assert "Plotly.newPlot" in str(bundle.get("text/html", "")), sorted(bundle)


@pytest.mark.slow
def test_quickstart_html_has_its_figures(workdir: Path, executed: dict[Path, object]) -> None:
    """The README's headless command: the HTML of the executed quickstart draws figures."""
    exporters = pytest.importorskip("nbconvert.exporters", reason="nbconvert is not "
                                    "installed (pip install -e '.[notebook]')")
    book = execute(ROOT / "notebooks" / "quickstart.ipynb", workdir, executed)
    assert len(figures(book)) >= 2  # the temporal breakdown and the overlap
    html, _ = exporters.HTMLExporter().from_notebook_node(book)
    assert html.count("Plotly.newPlot(") >= 2
    assert not ZERO_BAR.search(re.sub(r"<script.*?</script>", "", html, flags=re.S))


def test_zero_bar_pattern() -> None:
    assert ZERO_BAR.search("Loading traces:   0%|          | 0/4")
    assert not ZERO_BAR.search("Loading traces: 100%|##########| 4/4")
