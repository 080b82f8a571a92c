"""docs/configuration.md lists every setting: a new one that the page does not name fails here.

Checked against the source, not a list kept by hand: the ``AFFILIATE_*``/``AFN_*`` environment
variables named in the DAG files and the package (read from the AST), the fields of the models
of every YAML file, the connection extras the hook reads, the Airflow Variable, and the params
of every DAG. The page names each as code (`` `name` ``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from affiliate_network.hooks._budget import QUOTA_EXTRAS
from affiliate_network.hooks._network_identity import NETWORK_EXTRAS
from affiliate_network.hooks._transport import TRANSPORT_EXTRAS
from affiliate_network.provider_info import PROVIDER_INFO
from affiliate_network.rules.model import RulesFile
from affiliate_network.settings.models import NetworkFile, ReportsFile
from affiliate_network.settings.paths import DATA_BASE_VARIABLE
from affiliate_network.sync.models import SECTIONS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"
SOURCES = sorted((ROOT / "dags").glob("*.py")) + sorted(
    (ROOT / "plugins" / "affiliate_network").rglob("*.py")
)
ENV_NAME = re.compile(r"(AFFILIATE|AFN)_[A-Z0-9_]+")


def _listed() -> set[str]:
    """Every name the page writes as code, and each key of a path such as ``a.b[].c``."""
    spans = re.findall(r"`([^`\n]+)`", PAGE.read_text(encoding="utf-8"))
    keys = {key for span in spans for key in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)}
    return set(spans) | keys


def _env_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and ENV_NAME.fullmatch(node.value)
    }


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    """Every pydantic model inside an annotation (unions, lists, ``Annotated``...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in get_args(annotation):
        yield from _models(arg)


def _fields(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> Iterator[str]:
    """The YAML keys of ``model`` and of every model nested in it."""
    seen = set() if seen is None else seen
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        yield field.alias or name
        for nested in _models(field.annotation):
            yield from _fields(nested, seen)


def _dag_params(path: Path) -> set[str]:
    """Keys of every ``params={...}`` given in a DAG file (DAG and task params)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.keyword) and node.arg == "params"):
            continue
        if isinstance(node.value, ast.Dict):
            for key in node.value.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found.add(key.value)
                elif isinstance(key, ast.Name):  # a named constant, e.g. KEEP_PARAM
                    found.add(key.id)
    return found


def test_the_scans_find_what_they_judge() -> None:
    names = set().union(*(_env_names(path) for path in SOURCES))
    assert {"AFFILIATE_NETWORK_INCLUDE_DIR", "AFFILIATE_ONHOLD_ARMED"} <= names
    assert {"lookback_days", "max_approved_payout"} <= set(_fields(RulesFile))  # review:
    assert "currency_id" in set(_fields(NetworkFile))
    assert "within_hours" in set(_fields(RulesFile))
    assert "not" in set(_fields(RulesFile))  # the alias, not the Python name
    assert "trailing_days" in _dag_params(ROOT / "dags" / "affiliate_daily_reports.py")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_environment_variable_is_listed(path: Path) -> None:
    assert sorted(_env_names(path) - _listed()) == []


@pytest.mark.parametrize(
    "model",
    [NetworkFile, ReportsFile, RulesFile, *SECTIONS.values()],
    ids=lambda m: m.__name__,
)
def test_every_field_of_the_yaml_models_is_listed(model: type[BaseModel]) -> None:
    assert sorted(set(_fields(model)) - _listed()) == []


def test_every_desired_state_section_is_listed() -> None:
    assert sorted({"version", *SECTIONS} - _listed()) == []


def test_every_connection_field_and_extra_is_listed() -> None:
    (conn_type,) = PROVIDER_INFO["connection-types"]
    extras = {*conn_type["conn-fields"], *QUOTA_EXTRAS, *NETWORK_EXTRAS, *TRANSPORT_EXTRAS}
    assert sorted(extras - _listed()) == []


def test_the_airflow_variable_is_listed() -> None:
    assert DATA_BASE_VARIABLE in _listed()


@pytest.mark.parametrize("path", sorted((ROOT / "dags").glob("*.py")), ids=lambda p: p.name)
def test_every_dag_param_is_listed(path: Path) -> None:
    from affiliate_network.review.human_requests import KEEP_PARAM

    names = {KEEP_PARAM if name == "KEEP_PARAM" else name for name in _dag_params(path)}
    assert sorted(names - _listed()) == []
