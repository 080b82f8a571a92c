"""The review's ``rules_file`` is a choice among the include folder's rules files (issue 25,
defect 6): anything else is refused before the file is opened, and YAML errors name file, line
and key without echoing the file's values.

"Before the file is opened" is observed with a Python audit hook on ``open`` (the interpreter's
own event, no patching): the refused path is never opened.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.rules.loader import load_rules
from affiliate_network.settings.models import load_network_settings
from tests.support.dag_files import DAGS_DIR, load_dag

SECRET = "Zm9vYmFyYmF6cXV4c2VjcmV0a2V5MTIzNDU2Nzg5MA"
AIRFLOW_CFG = f"""[core]
dags_folder = /opt/airflow/dags
fernet_key = {SECRET}=
sql_alchemy_conn = postgresql://airflow:{SECRET}@db/airflow
"""

#: Paths opened while a test watches (the audit hook stays installed; it records only then).
_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is not None and event == "open" and args and isinstance(args[0], str | Path):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def include(rules_include: Path) -> Path:
    """The include folder: a copy of the project's (tests/review/conftest.py)."""
    return rules_include


@pytest.fixture
def secret(tmp_path) -> Path:
    outside = tmp_path / "worker"
    outside.mkdir()
    path = outside / "airflow.cfg"
    path.write_text(AIRFLOW_CFG)
    return path


def _refused(rules_file: str, secret: Path) -> str:
    global _OPENED
    op = OnHoldReviewOperator(task_id="review", rules_file=rules_file, dry_run=True)
    _OPENED = []
    try:
        with pytest.raises(ConfigValidationError) as caught:
            op.execute({"run_id": "form"})
        opened = list(_OPENED)
    finally:
        _OPENED = None
    message = str(caught.value)
    assert not [p for p in opened if Path(p).resolve() == secret.resolve()], opened
    assert SECRET[:6] not in message
    assert "onhold_rules.yaml" in message  # names the choices
    return message


def test_a_path_outside_the_include_folder_is_refused_before_it_is_opened(include, secret) -> None:
    assert "not a rules file of the include folder" in _refused(str(secret), secret)
    relative = f"../worker/{secret.name}"
    assert (include / relative).resolve() == secret.resolve()
    assert "not a rules file" in _refused(relative, secret)
    # A rules-file name that climbs out is still a path, not a name.
    (secret.parent / "onhold_rules.yaml").write_text(AIRFLOW_CFG)
    _refused("../worker/onhold_rules.yaml", secret.parent / "onhold_rules.yaml")


def test_a_symlink_out_of_the_include_folder_is_refused_before_it_is_opened(
    include, secret
) -> None:
    (include / "onhold_rules_evil.yaml").symlink_to(secret)
    message = _refused("onhold_rules_evil.yaml", secret)
    assert "is not a file in that folder" in message


def test_the_trigger_form_offers_the_rules_files_of_the_include_folder(include) -> None:
    (include / "onhold_rules_strict.yaml").write_text((include / "onhold_rules.yaml").read_text())
    dag = load_dag(DAGS_DIR / "affiliate_onhold_review.py", "affiliate_onhold_review")
    param = dag.params.get_param("rules_file")
    assert param.schema["enum"] == ["onhold_rules.yaml", "onhold_rules_strict.yaml"]
    assert param.value == "onhold_rules.yaml"


BAD_RULES = """\
rules:
  - id: outlier
    description: big sale
    action: review
    when: {field: sale_amount, ge: 5000}
  - id: broken
    description: hunter2-token
    action: reject
    when: {field: sub1, eq: "hunter2-token"
"""


def test_a_bad_yaml_names_file_and_line_without_its_values(include, secret) -> None:
    path = include / "onhold_rules_bad.yaml"
    path.write_text(BAD_RULES)
    with pytest.raises(ConfigValidationError) as caught:
        load_rules(path)
    message = str(caught.value)
    assert f"{path}:" in message
    assert "not valid YAML" in message
    assert "hunter2" not in message  # PyYAML's snippet of the file is not quoted
    assert caught.value.__suppress_context__ or caught.value.__context__ is None

    # A file outside the include folder (the library or CLI reading one): no value either.
    with pytest.raises(ConfigValidationError) as caught:
        load_rules(secret)
    assert SECRET[:6] not in str(caught.value)
    assert str(secret) in str(caught.value)
    odd = secret.parent / "values.yaml"
    odd.write_text(f"rules:\n  - id: x\n    description: d\n    action: {SECRET}\n    when: 3\n")
    with pytest.raises(ConfigValidationError) as caught:
        load_rules(odd)
    assert f"{odd}:4: rule 'x': action: unknown action; expected one of" in str(caught.value)
    assert SECRET[:6] not in str(caught.value)


def test_a_bad_network_yaml_names_file_and_line_without_its_snippet(include) -> None:
    path = include / "network.yaml"
    path.write_text("timezone: UTC\nsecret_note: [hunter2-token\n")
    with pytest.raises(ConfigValidationError) as caught:
        load_network_settings()
    message = str(caught.value)
    assert f"{path}:" in message
    assert "hunter2" not in message
    assert caught.value.__cause__ is None
