"""The notebooks in ``notebooks/`` run top to bottom with a real Python kernel.

Each notebook is executed by nbclient (ipykernel's ``python3`` kernel) in a copy of the
notebooks folder beside a copy of ``sample_traces/``, so the caches and files the
notebooks write stay out of the repository. Any error in any cell fails the test.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed "
                               "(pip install -e '.[test]')")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed "
                               "(pip install -e '.[test]')")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e '.[test]')")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    book = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in book.cells if c.cell_type == "code"), (
        "commit notebooks without outputs")
    client = nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()  # raises CellExecutionError on the first failing cell
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
