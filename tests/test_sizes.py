"""Size limits that keep the provider easy to read: no function over 80 lines (its docstring not
counted: the public ones must document every parameter), no operator module over 250 lines
(operators are thin adapters: arguments, one call into a job library, a summary). Read with
``ast``; the sandbox is a distribution of its own and not counted."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "plugins" / "affiliate_network"
SOURCES = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "dags").glob("*.py"))
MAX_FUNCTION_LINES = 80
MAX_OPERATOR_MODULE_LINES = 250
NOT_YET: frozenset[str] = frozenset()


def _counted(path: Path) -> bool:
    return not path.is_relative_to(PACKAGE) or str(path.relative_to(PACKAGE)) not in NOT_YET


def _lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's lines, from ``def`` to its end, without its docstring."""
    lines = (node.end_lineno or node.lineno) - node.lineno + 1
    first = node.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if docstring and isinstance(first.value.value, str):  # type: ignore[attr-defined]
        lines -= (first.end_lineno or first.lineno) - first.lineno + 1
    return lines


def test_no_function_is_longer_than_80_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {_lines(node)}"
        for path in filter(_counted, SOURCES)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and _lines(node) > MAX_FUNCTION_LINES
    ]
    assert long == []


def test_no_operator_module_is_longer_than_250_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)} {lines}"
        for path in filter(_counted, sorted((PACKAGE / "operators").glob("*.py")))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_OPERATOR_MODULE_LINES
    ]
    assert long == []
