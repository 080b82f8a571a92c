"""Imports point one way: dags -> operators -> job libraries -> rules language, hooks -> exceptions.

Read from the source with ``ast`` (nothing is imported), every import statement counts: module
level, inside functions and under ``TYPE_CHECKING`` alike, since a lazy import is still a
dependency. The layers, and what each may import from the package:

* job libraries (``reports``, ``review``, ``sync``): no operator; from
  Airflow only :class:`airflow.sdk.ObjectStoragePath` (a storage path, usable from a plain
  script), never the task context (``Context``, ``get_current_context``, ``BaseOperator``,
  ``Variable``...). They are called from plain scripts with a hook.
* the backtest (``backtest``: the rules on landed history): a job library with no Airflow at
  all, also through what it imports: the rules language, ``partitions`` and the bottom modules
  (:data:`BACKTEST_MAY_IMPORT`); no hook, no other job library.
* the rules language (``rules``: a rules file in, decisions out): below the review job and the
  backtest that run it, beside the hooks. Nothing of a layer above it (no job library, no
  settings, no ``partitions``), no hook, no Airflow at all, also through what it imports: only
  the bottom modules (data tables and dependency-free helpers) and ``settings.paths`` (see
  :data:`RULES_MAY_IMPORT`).
* the landed format (``partitions``): the bottom floor beside ``exceptions``. No Airflow at
  all, also through what it imports; of the package only itself, ``exceptions`` and the
  dependency-free helpers (:data:`PARTITIONS_MAY_IMPORT`).
* hooks: none of the layers above (operators, job libraries, the rules language, settings and
  its data paths).
* exceptions: nothing of the package (the bottom layer).
* operators: anything below them.
* notify (notifiers and deadline alerts): settings and exceptions only; Airflow-aware
  like the operators, but nothing imports it except the DAG files (job libraries, hooks and
  operators never notify anyone themselves: failures reach it through Airflow's callbacks).
* DAG files: operators, settings (``models``, and ``agreement``: the report DAG checks its timezone
  against ``network.yaml`` when parsed), job libraries, ``compat`` and ``notify`` (a ``@task`` in a
  DAG file is an inline operator, and the human-review form takes its vocabulary from
  ``review.human_requests``); never a hook.

The sandbox is a distribution of its own (``plugins/affiliate_network_sandbox``): nothing of the
provider or the DAGs imports it, and it imports nothing of the provider (it implements the spec,
so it catches the client's misreadings instead of sharing them; it serves its own copy of the
timezone table). The demo runner, which imports both, is in neither (``demo/``).
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
SANDBOX_PKG = "affiliate_network_sandbox"
SANDBOX_DIR = ROOT / "plugins" / SANDBOX_PKG / SANDBOX_PKG
#: Packages that group modules of different floors: each module is judged on its own
#: (``settings.loader`` is a bottom module, ``settings.models`` is not).
GROUPING_PACKAGES = frozenset({"api", "helpers", "settings"})
JOB_LIBRARIES = ("reports", "review", "sync")
#: The rules language: a library below the review job, with no hook and no Airflow.
RULES = "rules"
#: What the rules language may import of the package: itself, the bottom modules
#: (``settings.loader`` is the one YAML loader of every file, itself built on bottom modules only),
#: and ``settings.paths``: the loader asks it for the include folder (a file there is the
#: deployment's own and its values may be quoted in errors). Its one Airflow import, the DAGs folder
#: of an installed wheel, is inside a function, and the loader treats an ImportError as "not in the
#: folder".
RULES_MAY_IMPORT = frozenset(
    {
        RULES,
        "exceptions",
        "api.record_fields",
        "api.report_columns",
        "api.timezones",
        "settings.yamlguard",
        "settings.textfile",
    }
    | {"helpers.gcpause", "settings.paths", "settings.loader"}
)
#: The landed format: the bottom floor. ``__version__`` is the package's own (manifests name it).
PARTITIONS = "partitions"
PARTITIONS_MAY_IMPORT = frozenset(
    {
        PARTITIONS,
        "exceptions",
        "helpers.gcpause",
        "helpers.seen_keys",
        "api.report_columns",
        "__version__",
    }
)
#: The backtest job: the rules language on landed partitions, with no Airflow and no hook.
BACKTEST = "backtest"
BACKTEST_MAY_IMPORT = RULES_MAY_IMPORT | {BACKTEST, PARTITIONS}
#: Airflow names a job library may use: a storage path, not the task context.
JOB_LIBRARY_AIRFLOW_NAMES = frozenset({"airflow.sdk.ObjectStoragePath"})


@dataclass(frozen=True)
class Import:
    """One imported name: ``affiliate_network.reports.storage`` or ``airflow.sdk.Asset``."""

    source: Path
    line: int
    target: str

    @property
    def area(self) -> str:
        """The package area imported (``reports``, ``hooks``, ``settings.models``...), or ``""``."""
        parts = self.target.split(".")
        if parts[0] != PKG or len(parts) < 2:
            return ""
        # A module of a grouping package is a room of its own (``settings.loader``).
        return ".".join(parts[1:3]) if parts[1] in GROUPING_PACKAGES else parts[1]

    def __str__(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line} imports {self.target}"


def _module_of(path: Path) -> list[str]:
    base = SANDBOX_DIR.parent if path.is_relative_to(SANDBOX_DIR) else PACKAGE_DIR.parent
    rel = path.relative_to(base).with_suffix("")
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


def _package_imports(files: list[Path], package: str = PKG) -> list[Import]:
    return [imp for f in files for imp in imports_of(f) if imp.target.startswith(package + ".")]


def _sandbox_files() -> list[Path]:
    """The sandbox distribution's modules."""
    return sorted(SANDBOX_DIR.rglob("*.py"))


def _top_level_imports(files: list[Path], package: str) -> list[Import]:
    """Imports of ``package`` itself or anything in it (``import x`` as well as ``x.y``)."""
    return [imp for f in files for imp in imports_of(f) if imp.target.split(".")[0] == package]


def test_the_scan_sees_the_imports_it_judges() -> None:
    """The checks below would pass on an empty scan: make sure the scan finds known edges."""
    operators = _package_imports(_files("operators"))
    assert {"reports", "hooks", "exceptions"} <= {imp.area for imp in operators}
    libraries = _package_imports(_files(*JOB_LIBRARIES))
    assert "hooks" in {imp.area for imp in libraries}
    sandbox = _package_imports(_sandbox_files(), SANDBOX_PKG)
    assert len(sandbox) > 50
    rules = _package_imports(_files(RULES))
    assert {RULES, "exceptions", "api.record_fields"} <= {imp.area for imp in rules}
    review = _package_imports(_files("review"))
    assert RULES in {imp.area for imp in review}
    assert {PARTITIONS, "exceptions"} <= {imp.area for imp in _package_imports(_files(PARTITIONS))}
    assert {RULES, PARTITIONS} <= {imp.area for imp in _package_imports(_files(BACKTEST))}
    assert _files("exceptions") == [PACKAGE_DIR / "exceptions.py"]


@pytest.mark.parametrize("area", JOB_LIBRARIES)
def test_job_libraries_import_no_operator_and_no_task_context(area: str) -> None:
    wrong = [str(imp) for imp in _package_imports(_files(area)) if imp.area == "operators"]
    wrong += [
        str(imp)
        for f in _files(area)
        for imp in imports_of(f)
        if imp.target.split(".")[0] == "airflow" and imp.target not in JOB_LIBRARY_AIRFLOW_NAMES
    ]
    assert wrong == []


def _airflow_imports(files: list[Path]) -> list[Import]:
    return [imp for f in files for imp in imports_of(f) if imp.target.split(".")[0] == "airflow"]


def _module_file(target: str) -> Path | None:
    """The package file that defines ``target`` (a module, or a name imported from one)."""
    parts = target.split(".")[1:]
    while parts:
        path = PACKAGE_DIR.joinpath(*parts)
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
        parts = parts[:-1]
    return None


def _below(files: list[Path]) -> list[Path]:
    """The package modules ``files`` import, directly or through others (``settings.paths``
    excepted: see RULES_MAY_IMPORT)."""
    seen: set[Path] = set(files)
    todo = list(files)
    while todo:
        for imp in _package_imports([todo.pop()]):
            module = _module_file(imp.target)
            if module is not None and module not in seen and imp.area != "settings.paths":
                seen.add(module)
                todo.append(module)
    return sorted(seen - set(files))


@pytest.mark.parametrize(
    ("area", "may_import"),
    [
        (RULES, RULES_MAY_IMPORT),
        (BACKTEST, BACKTEST_MAY_IMPORT),
        (PARTITIONS, PARTITIONS_MAY_IMPORT),
    ],
)
def test_the_rules_backtest_and_partitions_import_no_hook_and_no_airflow(
    area: str, may_import: frozenset[str]
) -> None:
    """``rules`` (the language), ``backtest`` (its job on landed data) and ``partitions`` (the
    landed format) run without Airflow, also through what they import: the command checks a
    rules file and backtests a local copy of the data with nothing else installed. The review
    job imports the language, never the other way; the language reads no landed data."""
    files = _files(area)
    wrong = [str(imp) for imp in _package_imports(files) if imp.area not in may_import]
    wrong += [str(imp) for imp in _airflow_imports(files)]
    assert wrong == []
    below = _below(files)
    assert PACKAGE_DIR / "exceptions.py" in below
    assert [str(imp) for imp in _airflow_imports(below)] == []
    assert [str(imp) for imp in _package_imports(below) if imp.area not in may_import] == []


def test_hooks_import_no_layer_above_them() -> None:
    above = ("operators", *JOB_LIBRARIES, BACKTEST, RULES, "settings.models", "settings.paths")
    wrong = [str(imp) for imp in _package_imports(_files("hooks")) if imp.area in above]
    assert wrong == []


def test_exceptions_import_nothing_of_the_package() -> None:
    assert [str(imp) for imp in _package_imports(_files("exceptions"))] == []


def test_nothing_below_the_operators_imports_them() -> None:
    below = [f for f in PACKAGE_DIR.rglob("*.py") if f.parent.name != "operators"]
    wrong = [str(imp) for imp in _package_imports(below) if imp.area == "operators"]
    assert wrong == []


def test_the_sandbox_imports_nothing_of_the_provider() -> None:
    """The sandbox distribution runs with no provider installed."""
    files = _sandbox_files()
    wrong = [str(imp) for imp in _top_level_imports(files, PKG)]
    wrong += [str(imp) for imp in _top_level_imports(files, "airflow")]
    assert wrong == []


def test_the_provider_and_the_dags_import_nothing_of_the_sandbox() -> None:
    """The provider's wheel holds no sandbox and needs none at run time."""
    files = [*sorted(PACKAGE_DIR.rglob("*.py")), *sorted(DAGS_DIR.rglob("*.py"))]
    assert [str(imp) for imp in _top_level_imports(files, SANDBOX_PKG)] == []


def test_notify_imports_settings_compat_and_exceptions_only_and_only_dag_files_import_it() -> None:
    # compat: the deadline alert is built the way each Airflow release takes it.
    notify = _package_imports(_files("notify"))
    assert {imp.area for imp in notify} >= {"settings.models", "compat"}  # the scan sees them
    allowed = ("notify", "settings.models", "compat", "exceptions")
    assert [str(imp) for imp in notify if imp.area not in allowed] == []
    others = [
        f for f in PACKAGE_DIR.rglob("*.py") if f.relative_to(PACKAGE_DIR).parts[0] != "notify"
    ]
    assert [str(imp) for imp in _package_imports(others) if imp.area == "notify"] == []


def test_dag_files_import_operators_settings_and_job_libraries_only() -> None:
    # settings.agreement: the report DAG checks its timezone against network.yaml at parse.
    allowed = (
        "operators",
        "settings.models",
        "settings.agreement",
        "compat",
        "notify",
        *JOB_LIBRARIES,
    )
    dag_files = sorted(DAGS_DIR.glob("*.py"))
    assert dag_files
    wrong = [str(imp) for imp in _package_imports(dag_files) if imp.area not in allowed]
    assert wrong == []


#: Names whose home moved between the supported Airflow releases (see compat.py's table).
VERSION_DEPENDENT_NAMES = frozenset(
    {"AirflowFailException", "AirflowNotFoundException", "CronDataIntervalTimetable"}
)


def test_only_compat_imports_names_whose_home_moved_between_airflow_releases() -> None:
    """Supporting another Airflow release means editing compat.py only."""
    compat = PACKAGE_DIR / "compat.py"
    sources = [p for p in sorted(PACKAGE_DIR.rglob("*.py")) if p != compat]
    sources += sorted(DAGS_DIR.glob("*.py"))
    wrong = [
        str(imp)
        for path in sources
        for imp in imports_of(path)
        if imp.target.startswith("airflow.")
        and imp.target.rsplit(".", 1)[-1] in VERSION_DEPENDENT_NAMES
    ]
    assert wrong == []
    # The check sees the names: compat itself imports each of them from Airflow.
    seen = {imp.target.rsplit(".", 1)[-1] for imp in imports_of(compat)}
    assert seen >= VERSION_DEPENDENT_NAMES


@pytest.mark.parametrize("package", sorted(GROUPING_PACKAGES))
def test_grouping_packages_import_nothing_when_imported(package: str) -> None:
    """Importing ``settings.loader`` runs ``settings/__init__.py`` first: the rules above judge
    modules, so a grouping package's own file must import nothing."""
    tree = ast.parse((PACKAGE_DIR / package / "__init__.py").read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    future = "from __future__ import annotations"
    assert [ast.unparse(n) for n in imports if ast.unparse(n) != future] == []
