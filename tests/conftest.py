"""Shared fixtures: where the real traces are, and loading helpers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces" / "hta"
SAMPLE_TRACES = ROOT / "sample_traces"

sys.path.insert(0, str(Path(__file__).resolve().parent))


def absent_reason(path: Path) -> str:
    """The one skip reason of a test whose real traces are absent."""
    return f"real traces not available: {path} is absent"


def shared_trace(*parts: str) -> Path:
    """Path under ../shared/traces/hta, skipping the test when it is absent."""
    path = SHARED_TRACES.joinpath(*parts)
    if not path.exists():
        pytest.skip(absent_reason(path))
    return path


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """A mark skipping the test, with :func:`absent_reason`, when the path under
    ../shared/traces/hta is absent."""
    path = SHARED_TRACES.joinpath(*parts)
    return pytest.mark.skipif(not path.exists(), reason=absent_reason(path))


def params_or_absent(values: list, ids: Any = None, where: Path = SHARED_TRACES) -> list:
    """``values`` as parameters (``ids``: a function naming each), or, when there are none
    because ``where`` is absent, one parameter that skips saying so (pytest's own "got
    empty parameter set" explains nothing)."""
    if values:
        return [pytest.param(v, id=ids(v) if ids else None) for v in values]
    return [pytest.param(None, id="absent", marks=pytest.mark.skip(
        reason=absent_reason(where) if not where.exists() else f"nothing to test in {where}"))]


@pytest.fixture
def shared_traces() -> Path:
    """The folder of real Kineto traces (skips when absent)."""
    return shared_trace()


# -- the quick subset ----------------------------------------------------------------------
# `python3 -m pytest -m "not slow"` leaves out the tests marked `slow`: a test takes that
# mark from `@pytest.mark.slow`, or from the lists below (measured with `--durations` on a
# 2-core machine: 0.3 s or more each), so that marking a test does not touch its file.
#: Modules whose every test is slow: notebooks and a browser, Dask clusters, the docs
#: build, the real traces decoded in full.
SLOW_MODULES = frozenset({
    "test_notebooks", "test_report_browser", "test_docs", "test_dask",
    "test_distributed_job", "test_load_real", "test_breakdown_real", "test_critical_path_real",
    "test_trace_diff_real",
})
#: Single tests (every parameter of them), as ``module::function``: tests/slow_tests.txt.
SLOW_FUNCTIONS = frozenset(
    line.strip() for line in (Path(__file__).parent / "slow_tests.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#"))
#: Parameters that are slow in any test: the `hta` console script run as a process.
SLOW_PARAMS = frozenset({"console-script"})


def is_slow(module: str, function: str, params: str) -> bool:
    """Whether the lists above mark ``module::function[params]`` slow."""
    return (module in SLOW_MODULES or f"{module}::{function}" in SLOW_FUNCTIONS
            or any(slow in params for slow in SLOW_PARAMS))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests :func:`is_slow` names ``slow``."""
    for item in items:
        function = getattr(item, "originalname", None) or item.name.split("[")[0]
        params = item.name[len(function) + 1:-1] if "[" in item.name else ""
        if is_slow(item.module.__name__.rsplit(".", 1)[-1], function, params):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _figures_in_a_session_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Figures that facade methods show outside Jupyter go to one temporary folder of the
    test session, not to the system's ``hta-figures`` (see ``hta.facade.display``)."""
    import os

    if "HTA_FIGURES_DIR" not in os.environ:
        os.environ["HTA_FIGURES_DIR"] = str(tmp_path_factory.mktemp("figures"))
