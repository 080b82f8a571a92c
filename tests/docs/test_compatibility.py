"""docs/compatibility.md's table is the matrix CI runs: pyproject, uv.lock, .ci/older-airflow."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compatibility.md"


def _rows() -> list[dict[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- compatibility-table -->")[1].split("<!-- /compatibility-table -->")[0]
    lines = [line for line in table.strip().splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        for line in lines[2:]
    ]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _locked_airflow() -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    return next(p["version"] for p in lock["package"] if p["name"] == "apache-airflow")


def _ci_older_releases() -> list[str]:
    script = (ROOT / ".ci" / "older-airflow").read_text(encoding="utf-8")
    match = re.search(r"^RELEASES=\(([^)]*)\)", script, re.MULTILINE)
    assert match, ".ci/older-airflow has no RELEASES=(...) line"
    return re.findall(r'"([^"]+)"', match.group(1))


def _ci_python() -> str:
    script = (ROOT / ".ci" / "older-airflow").read_text(encoding="utf-8")
    match = re.search(r"uv venv -q -p (\S+)", script)
    assert match
    return match.group(1)


def test_the_table_lists_exactly_the_airflow_releases_ci_runs() -> None:
    listed = [row["Airflow"] for row in _rows()]
    assert listed == [*_ci_older_releases(), _locked_airflow()]


def test_the_oldest_row_is_the_declared_floor() -> None:
    deps = _pyproject()["project"]["dependencies"]
    floor = next(d for d in deps if d.startswith("apache-airflow>="))
    assert floor == f"apache-airflow>={_rows()[0]['Airflow']}"


def test_provider_and_python_columns_match_pyproject_and_ci() -> None:
    project = _pyproject()["project"]
    assert project["requires-python"] == ">=3.11"
    for row in _rows():
        assert row["Provider"] == project["version"]
        assert row["Python"] == _ci_python()


def test_each_older_release_installs_with_the_constraint_file_the_table_names() -> None:
    python = _ci_python()
    for row in _rows()[:-1]:
        name = f"constraints-{row['Airflow']}-py{python}.txt"
        assert (ROOT / ".ci" / "constraints" / name).is_file(), name
        assert f"`.ci/constraints/{name}`" in row["Install"]
        assert ".ci/older-airflow" in row["Tested by"]
    assert "full suite" in _rows()[-1]["Tested by"]
