"""The type check: ``python3 -m mypy`` passes on ``hta/`` with the settings of
``[tool.mypy]`` in pyproject.toml. mypy comes with the ``dev`` extra, which CI (``.ci/run``)
installs, so the check runs there with the rest of the suite."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys

import pytest
from conftest import ROOT


def test_mypy_passes_on_the_package() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed; install the dev extra: pip install -e '.[dev]'")
    try:
        importlib.metadata.distribution("pandas-stubs")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        pytest.skip("pandas-stubs is installed: mypy reads it whatever the settings, and the "
                    "check is defined without it (pyproject.toml [tool.mypy]); uninstall it")
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, f"mypy found type errors:\n{run.stdout}{run.stderr}"
