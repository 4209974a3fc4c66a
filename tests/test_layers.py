"""The layers import only downwards: front ends -> plots -> analysis -> model -> loading.

Analyses never draw (no plotly), figures never load traces, the model never reaches up
into analyses. Checked on the source with ``ast``, so a new module cannot slip past.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hta"

#: package -> prefixes of modules it must not import
FORBIDDEN = {
    "hta.loading": ("hta.analysis", "hta.plots", "hta.facade", "hta.commands", "hta.report",
                    "hta.trace_analysis", "hta.trace_diff", "plotly"),
    "hta.model": ("hta.analysis", "hta.plots", "hta.facade", "hta.commands", "hta.report",
                  "hta.trace_analysis", "hta.trace_diff", "plotly"),
    "hta.analysis": ("hta.plots", "hta.facade", "hta.commands", "hta.report",
                     "hta.trace_analysis", "hta.trace_diff", "plotly"),
    "hta.plots": ("hta.loading", "hta.facade", "hta.commands", "hta.report",
                  "hta.trace_analysis", "hta.trace_diff"),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_module_imports_respect_the_layers(path: Path) -> None:
    name = _module_name(path)
    for package, banned in FORBIDDEN.items():
        if name == package or name.startswith(package + "."):
            bad = [m for m in _imports(path) if m.startswith(banned)]
            assert not bad, f"{name} (layer {package}) imports {bad}"


def test_the_check_sees_the_packages() -> None:
    names = {_module_name(p) for p in MODULES}
    for package in FORBIDDEN:
        assert any(n.startswith(package) for n in names), package
