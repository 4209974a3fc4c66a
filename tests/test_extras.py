"""The install extras: ``.[test]`` is what the tests need and no more, the heavy tools
(the docs site, Jupyter, Playwright, the linter) are extras of their own that the tests
needing them name when they skip, and CI installs all of them so that nothing skips there.
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml on Python 3.10 "
                                  "needs tomli")

EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"]


def names(extra: str) -> set[str]:
    """The distribution names an extra lists, without versions or their own extras."""
    return {re.split(r"[<>=\[ ;]", req, maxsplit=1)[0].lower() for req in EXTRAS[extra]}


def test_the_test_extra_is_only_what_the_tests_need() -> None:
    assert names("test") == {"pytest", "dask", "import-linter"}
    heavy = {"mkdocs", "mkdocstrings", "mkdocs-material", "playwright", "ruff", "jupyterlab",
             "ipykernel", "nbclient", "nbconvert"}
    assert not names("test") & heavy


def test_the_heavy_tools_have_their_own_extras() -> None:
    assert {"mkdocs", "mkdocstrings", "mkdocs-material"} <= names("docs")
    assert {"playwright", "ruff"} <= names("dev")
    assert {"jupyterlab", "ipywidgets", "nbconvert", "ipykernel"} <= names("notebook")


def test_ci_installs_every_extra_a_skipping_test_names() -> None:
    """A test that skips without a package says which extra brings it; CI installs those
    extras, so its coverage does not drop."""
    named = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        named |= set(re.findall(r"pip install -e '\.\[(\w+)\]'", path.read_text()))
    assert {"docs", "notebook", "dev"} <= named
    assert named <= set(EXTRAS)
    ci = (ROOT / ".ci" / "run").read_text()
    installed = re.search(r'pip install [^\n]*-e "\.\[([\w,]+)\]"', ci)
    assert installed, "CI installs the project with its extras"
    assert named | {"test"} <= set(installed.group(1).split(","))
    assert ci.rstrip().endswith("python3 -m pytest")  # the full suite, as the README says


def test_the_readme_keeps_its_two_commands_and_shows_the_light_install() -> None:
    readme = (ROOT / "README.md").read_text()
    assert ('python3 -m pip install -e ".[test]" && hta summary sample_traces/synthetic_4rank'
            in readme)
    assert "\npython3 -m pytest\n" in readme
    assert "python3 -m pip install -e .  " in readme  # the library alone, in a code line
    assert 'python3 -m pytest -m "not slow"' in readme


def test_slow_tests_are_marked_and_the_quick_subset_is_documented() -> None:
    """``-m "not slow"`` is the quick subset: the marker is registered, what the lists in
    conftest mark names modules and functions that exist, and the README says how."""
    import conftest

    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"]["markers"]
    assert any(m.startswith("slow:") for m in markers)
    tests = ROOT / "tests"
    for module in conftest.SLOW_MODULES:
        assert (tests / f"{module}.py").exists(), module
    defined: dict[str, set[str]] = {}
    for entry in sorted(conftest.SLOW_FUNCTIONS):
        module, function = entry.split("::")
        if module not in defined:
            text = (tests / f"{module}.py").read_text()
            defined[module] = set(re.findall(r"^def (test_\w+)\(", text, flags=re.M))
        assert function in defined[module], entry
    assert conftest.is_slow("test_notebooks", "test_notebook_runs", "quickstart")
    assert conftest.is_slow("test_cli", "test_x", "console-script")
    assert not conftest.is_slow("test_cli", "test_x", "in-process")
    readme = (ROOT / "README.md").read_text()
    assert 'python3 -m pytest -m "not slow"' in readme and "under a minute" in readme
