"""The layer contract and the absence of import circles.

The contract lives in ``pyproject.toml`` (``[tool.importlinter]``): errors < kineto <
model < {analysis, job} < {plots, export} < facade < {report, TraceAnalysis} < TraceDiff
< commands < cli, and analyses import only the model. import-linter reads every import
statement, function-level ones included. Import circles are found on the same graph
(grimp), so a circle through a function-level import fails too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hta"

grimp = pytest.importorskip("grimp", reason="import-linter (and grimp) not installed")


def test_the_layer_contract_is_kept() -> None:
    code = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"
    proc = subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout and "KEPT" in proc.stdout


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def _module_graph() -> dict[str, set[str]]:
    g = grimp.build_graph("hta", cache_dir=None)
    modules = set(g.modules)
    graph: dict[str, set[str]] = {}
    for m in modules:
        # A package's __init__ importing its own submodules is not a circle of meaning.
        graph[m] = {d for d in g.find_modules_directly_imported_by(m)
                    if d in modules and not m.startswith(d + ".")}
    return graph


def test_no_import_circles() -> None:
    circles = _cycles(_module_graph())
    assert not circles, f"import circles: {circles}"


def test_the_cycle_finder_sees_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_module_calls_hide_dependencies() -> None:
    """``importlib.import_module`` hides an import from the contract: nothing uses it."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders


def test_analyses_never_import_plotly() -> None:
    for path in sorted((PACKAGE / "analysis").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.startswith("plotly") for n in names), path
