"""Imports point one way: dags -> operators -> job libraries -> hooks -> exceptions.

Read from the source with ``ast`` (nothing is imported), every import statement counts: module
level, inside functions and under ``TYPE_CHECKING`` alike, since a lazy import is still a
dependency. The layers, and what each may import from the package:

* job libraries (``reports``, ``review``, ``sync``): no operator, no sandbox, no demo; from
  Airflow only :class:`airflow.sdk.ObjectStoragePath` (a storage path, usable from a plain
  script), never the task context (``Context``, ``get_current_context``, ``BaseOperator``,
  ``Variable``...). They are called from plain scripts with a hook.
* hooks: none of the layers above (operators, job libraries, settings and its data paths),
  no sandbox.
* exceptions: nothing of the package (the bottom layer).
* sandbox: only ``affiliate_network.sandbox.*`` and ``affiliate_network.timezones``, the API's
  documented timezone table (spec data the sandbox serves as ``GET /meta/timezones``; the
  module imports nothing of the package, so no client code comes with it).
* operators: anything below them, never the sandbox or the demo.
* notify (notifiers and deadline alerts, issue 28): settings and exceptions only; Airflow-aware
  like the operators, but nothing imports it except the DAG files (job libraries, hooks and
  operators never notify anyone themselves: failures reach it through Airflow's callbacks).
* DAG files: operators, settings, job libraries and ``notify`` (a ``@task`` in a DAG file is an
  inline operator, and the human-review form takes its vocabulary from ``review.requests``);
  never a hook, the sandbox or the demo.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "plugins" / "affiliate_network"
DAGS_DIR = ROOT / "dags"
PKG = "affiliate_network"
JOB_LIBRARIES = ("reports", "review", "sync")
#: Airflow names a job library may use: a storage path, not the task context.
JOB_LIBRARY_AIRFLOW_NAMES = frozenset({"airflow.sdk.ObjectStoragePath"})
#: Package areas outside the client that nothing of the client imports.
DEV_ONLY = ("sandbox", "demo", "demo_connections")


@dataclass(frozen=True)
class Import:
    """One imported name: ``affiliate_network.reports.storage`` or ``airflow.sdk.Asset``."""

    source: Path
    line: int
    target: str

    @property
    def area(self) -> str:
        """The package area imported (``reports``, ``hooks``, ``settings``...), or ``""``."""
        parts = self.target.split(".")
        return parts[1] if parts[0] == PKG and len(parts) > 1 else ""

    def __str__(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line} imports {self.target}"


def _module_of(path: Path) -> list[str]:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports_of(path: Path) -> list[Import]:
    """Every import in ``path``, relative ones resolved, ``from x import y`` as ``x.y``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(path, node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                package = _module_of(path)
                if path.name != "__init__.py":
                    package = package[:-1]
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            found += [Import(path, node.lineno, f"{module}.{a.name}") for a in node.names]
    return found


def _files(*areas: str) -> list[Path]:
    files: list[Path] = []
    for area in areas:
        folder = PACKAGE_DIR / area
        files += sorted(folder.rglob("*.py")) if folder.is_dir() else [folder.with_suffix(".py")]
    return files


def _package_imports(files: list[Path]) -> list[Import]:
    return [imp for f in files for imp in imports_of(f) if imp.target.startswith(PKG + ".")]


def test_the_scan_sees_the_imports_it_judges() -> None:
    """The checks below would pass on an empty scan: make sure the scan finds known edges."""
    operators = _package_imports(_files("operators"))
    assert {"reports", "hooks", "exceptions"} <= {imp.area for imp in operators}
    libraries = _package_imports(_files(*JOB_LIBRARIES))
    assert "hooks" in {imp.area for imp in libraries}
    sandbox = _package_imports(_files("sandbox"))
    assert len(sandbox) > 50
    assert _files("exceptions") == [PACKAGE_DIR / "exceptions.py"]


@pytest.mark.parametrize("area", JOB_LIBRARIES)
def test_job_libraries_import_no_operator_and_no_task_context(area: str) -> None:
    wrong = [
        str(imp) for imp in _package_imports(_files(area)) if imp.area in ("operators", *DEV_ONLY)
    ]
    wrong += [
        str(imp)
        for f in _files(area)
        for imp in imports_of(f)
        if imp.target.split(".")[0] == "airflow" and imp.target not in JOB_LIBRARY_AIRFLOW_NAMES
    ]
    assert wrong == []


def test_hooks_import_no_layer_above_them() -> None:
    above = ("operators", *JOB_LIBRARIES, "settings", "paths", *DEV_ONLY)
    wrong = [str(imp) for imp in _package_imports(_files("hooks")) if imp.area in above]
    assert wrong == []


def test_exceptions_import_nothing_of_the_package() -> None:
    assert [str(imp) for imp in _package_imports(_files("exceptions"))] == []


def test_nothing_below_the_operators_imports_them() -> None:
    below = [f for f in PACKAGE_DIR.rglob("*.py") if f.parent.name != "operators"]
    wrong = [str(imp) for imp in _package_imports(below) if imp.area == "operators"]
    assert wrong == []


def test_the_sandbox_imports_none_of_the_client() -> None:
    wrong = [
        str(imp)
        for imp in _package_imports(_files("sandbox"))
        if imp.area not in ("sandbox", "timezones")
    ]
    assert wrong == []
    # The one shared module is data only: it brings no client code along.
    assert [str(imp) for imp in _package_imports(_files("timezones"))] == []


def test_the_client_imports_no_sandbox_and_no_demo() -> None:
    client = [
        f
        for f in PACKAGE_DIR.rglob("*.py")
        if f.relative_to(PACKAGE_DIR).parts[0] not in ("sandbox", "demo.py", "demo_connections.py")
    ]
    wrong = [str(imp) for imp in _package_imports(client) if imp.area in DEV_ONLY]
    assert wrong == []


def test_notify_imports_settings_and_exceptions_only_and_only_dag_files_import_it() -> None:
    notify = _package_imports(_files("notify"))
    assert {imp.area for imp in notify} >= {"settings"}  # the scan sees it
    assert [
        str(imp) for imp in notify if imp.area not in ("notify", "settings", "exceptions")
    ] == []
    others = [
        f for f in PACKAGE_DIR.rglob("*.py") if f.relative_to(PACKAGE_DIR).parts[0] != "notify"
    ]
    assert [str(imp) for imp in _package_imports(others) if imp.area == "notify"] == []


def test_dag_files_import_operators_settings_and_job_libraries_only() -> None:
    allowed = ("operators", "settings", "notify", *JOB_LIBRARIES)
    dag_files = sorted(DAGS_DIR.glob("*.py"))
    assert dag_files
    wrong = [str(imp) for imp in _package_imports(dag_files) if imp.area not in allowed]
    assert wrong == []


def test_the_old_offer_sync_module_path_still_imports_the_operators() -> None:
    """``scrub_rate_sync`` moved to ``offer_state_sync``: user imports keep working."""
    from affiliate_network.operators import offer_state_sync, scrub_rate_sync

    for name in scrub_rate_sync.__all__:
        assert getattr(scrub_rate_sync, name) is getattr(offer_state_sync, name)
