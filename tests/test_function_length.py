"""No function in ``hta/`` longer than :data:`LIMIT` lines of code without a reason.

Lines are counted from ``def`` to the function's last line, less its docstring (long
docstrings define the numbers a function returns; they are welcome). A function may
be longer when its docstring says why, in a sentence containing :data:`REASON`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

LIMIT = 80
REASON = "long because"


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    total = node.end_lineno - node.lineno + 1
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        total -= body[0].end_lineno - body[0].lineno + 1
    return total


def long_functions(root: Path) -> list[str]:
    """``path:line name (n lines)`` of each function over the limit without a reason."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            n = _code_lines(node)
            doc = ast.get_docstring(node) or ""
            if n > LIMIT and REASON not in doc.lower():
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} "
                             f"({n} lines)")
    return found


def test_no_function_over_the_limit_without_a_reason() -> None:
    assert long_functions(ROOT / "hta") == []


def test_the_check_finds_a_long_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT + 1))
    (pkg / "m.py").write_text(
        f'def long():\n    """Doc."""\n{body}\n\n'
        f'def excused():\n    """Long because it is a table."""\n{body}\n\n'
        f'def documented():\n    """{"line" + chr(10) * (LIMIT + 5)}"""\n    return 1\n')
    assert long_functions(pkg) == [f"pkg/m.py:1 long ({LIMIT + 2} lines)"]
