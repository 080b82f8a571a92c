"""Tests follow the rooms: each job library and the landed format have a test folder of their
own, and no test module or conftest is imported by another (shared helpers and fixtures live in
``tests/support/``). Importing a test module runs its module code a second time under another
name; importing ``tests/conftest.py`` did, and moved the session's metadata DB under the fixtures
that pointed at the first one."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "plugins" / "affiliate_network"
#: Rooms of the package whose tests are in a folder of the same name.
ROOMS = ("backtest", "hooks", "notify", "partitions", "reports", "review", "rules", "sync")


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append("." * node.level + node.module)  # a relative import keeps its dots
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def test_no_test_module_or_conftest_is_imported_by_another() -> None:
    found = [
        f"{path.relative_to(TESTS)}: {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in _imported_modules(path)
        if (name.startswith(".") or name.split(".")[0] in ("tests", "conftest"))
        and (name.rsplit(".", 1)[-1].startswith("test_") or name.endswith("conftest"))
    ]
    assert found == []


def test_each_room_has_its_test_folder() -> None:
    assert all((PACKAGE / room).is_dir() for room in ROOMS)  # the list names real rooms
    assert [room for room in ROOMS if not list((TESTS / room).glob("test_*.py"))] == []


def test_the_scan_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from tests.conftest import x\nimport tests.review.test_traffic\nfrom .conftest import y\n"
    )
    assert _imported_modules(probe) == ["tests.conftest", "tests.review.test_traffic", ".conftest"]
