"""The one config loader (``affiliate_network.settings.loader``): every YAML file of the project
goes through it, and every error names the file, the line and the field.

One case per file kind (network.yaml, reports.yaml, a rules file, the desired state), then the
guarantees every kind shares: no PyYAML snippet and nothing chained, the alias-bomb guard, the
UTF-8 check, repeated keys, and locations that match the loaded data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.rules.loader import load_rules
from affiliate_network.settings import loader
from affiliate_network.settings.models import NetworkFile, ReportsFile
from affiliate_network.sync.loader import load_desired_state

INCLUDE = Path(__file__).resolve().parents[1] / "include"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _problems(call) -> tuple[str, list[loader.Problem]]:
    with pytest.raises(ConfigValidationError) as info:
        call()
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ or info.value.__context__ is None
    return str(info.value), list(info.value.errors)  # type: ignore[arg-type]


def test_the_shipped_files_load_through_it() -> None:
    network = loader.load(INCLUDE / "network.yaml", NetworkFile)
    assert (network.timezone, network.timezone_id, network.currency_id) == ("UTC", 67, "USD")
    reports = loader.load(INCLUDE / "reports.yaml", ReportsFile).affiliate_reports
    assert reports.format == "parquet"
    assert [a.affiliate_id for a in reports.affiliates] == [2001, 2002]
    assert reports.affiliates[1].columns == ["offer", "device_type", "date"]


def test_network_yaml_error_names_file_line_and_field(tmp_path) -> None:
    path = _write(tmp_path, "network.yaml", "timezone: UTC\ncurrency: USD\n")
    message, (problem,) = _problems(lambda: loader.load(path, NetworkFile))
    assert (problem.source, problem.line, problem.field) == (str(path), 2, "currency")
    assert message == (
        f"{path}:2: currency: unknown field (fields: timezone, timezone_id, currency_id); "
        "did you mean 'currency_id'?"
    )


def test_reports_yaml_error_names_file_line_and_nested_field(tmp_path) -> None:
    text = (
        (INCLUDE / "reports.yaml")
        .read_text()
        .replace(
            "      conn_id: affiliate_network_affiliate_2002\n",
            "      conn_id: affiliate_network_affiliate_2002\n      format: csv\n",
        )
    )
    path = _write(tmp_path, "reports.yaml", text)
    line = text.splitlines().index("      format: csv") + 1
    message, (problem,) = _problems(lambda: loader.load(path, ReportsFile))
    assert (problem.line, problem.field) == (line, "affiliate_reports.affiliates[1].format")
    assert message.startswith(f"{path}:{line}: affiliate_reports.affiliates[1].format: must be")


def test_every_problem_of_a_file_at_once_in_line_order(tmp_path) -> None:
    path = _write(
        tmp_path,
        "reports.yaml",
        "affiliate_reports:\n"
        "  format: xml\n"
        "  columns: [offer, date]\n"
        "  affiliates:\n"
        "    - {affiliate_id: 0, conn_id: a}\n"
        "    - {affiliate_id: 7, conn_id: ''}\n",
    )
    message, problems = _problems(lambda: loader.load(path, ReportsFile))
    assert [(p.line, p.field) for p in problems] == [
        (2, "affiliate_reports.format"),
        (5, "affiliate_reports.affiliates[0].affiliate_id"),
        (6, "affiliate_reports.affiliates[1].conn_id"),
    ]
    assert message.splitlines()[0] == f"{path}: 3 problems"


def test_a_cross_field_check_points_at_its_field(tmp_path) -> None:
    path = _write(
        tmp_path,
        "reports.yaml",
        "affiliate_reports:\n"
        "  columns: [offer, date]\n"
        "  affiliates:\n"
        "    - {affiliate_id: 5, conn_id: a}\n"
        "    - {affiliate_id: 5, conn_id: b}\n",
    )
    message, (problem,) = _problems(lambda: loader.load(path, ReportsFile))
    assert (problem.line, problem.field) == (5, "affiliate_reports.affiliates[1].affiliate_id")
    assert message.endswith("affiliates[1].affiliate_id: 5 repeated")


def test_a_missing_required_key_points_at_the_mapping_that_lacks_it(tmp_path) -> None:
    path = _write(tmp_path, "reports.yaml", "# nothing yet\n")
    message, (problem,) = _problems(lambda: loader.load(path, ReportsFile))
    assert message == f"{path}:1: affiliate_reports: required"
    path = _write(tmp_path, "reports.yaml", "affiliate_reports:\n  format: jsonl\n")
    _, (problem,) = _problems(lambda: loader.load(path, ReportsFile))
    assert (problem.line, problem.field) == (1, "affiliate_reports.affiliates")


def test_rules_file_error_names_file_line_rule_and_field(tmp_path) -> None:
    path = _write(
        tmp_path,
        "rules.yaml",
        "rules:\n  - id: a\n    description: d\n    action: reject\n"
        "    when: {field: sub1, eq: x}\n    when: {field: sub2, eq: y}\n",
    )
    message, (error,) = _problems(lambda: load_rules(path))
    assert (error.line, error.rule_id, error.field) == (6, "a", "when")
    assert f"{path}:6: rule 'a': when: key 'when' appears twice (first at line 5)" in message


def test_desired_state_error_names_file_line_and_field(tmp_path) -> None:
    path = _write(
        tmp_path,
        "offer_state.yaml",
        "version: 1\nchannels:\n  - network_channel_id: 1\n    name: A\n    status: on\n",
    )
    with pytest.raises(ConfigValidationError) as info:
        load_desired_state(path)
    assert f"{path}:5: channels[0] (network_channel_id 1): field 'status'" in str(info.value)


@pytest.mark.parametrize(
    "load",
    [
        lambda p: loader.load(p, NetworkFile),
        load_rules,
        load_desired_state,
    ],
    ids=["network", "rules", "desired-state"],
)
def test_a_syntax_error_gives_line_and_column_but_no_snippet(tmp_path, load) -> None:
    path = _write(tmp_path, "x.yaml", "timezone: UTC\nnote: [hunter2-token\n")
    message, (problem,) = _problems(lambda: load(path))
    assert problem.line == 3  # where the parser meets the end of the file, still in the list
    assert f"{path}:" in message
    assert "not valid YAML" in message
    assert "(column " in message
    assert "hunter2" not in message


def test_parse_reports_the_column_of_a_syntax_error() -> None:
    with pytest.raises(ConfigValidationError) as info:
        loader.parse("a: 1\nb: [x\n", "f.yaml")
    (problem,) = info.value.errors
    assert isinstance(problem, loader.Problem)
    assert problem.line is not None
    assert problem.column is not None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: &a {b: *a}\n", "f.yaml:1: an alias refers to a node that contains it"),
        ("a: " + "[" * 100 + "]" * 100 + "\n", "f.yaml:1: nested too deeply"),
        ("a: !!python/name:os.system\n", "f.yaml:1: not valid YAML"),
        ("a: !!int abc\n", "f.yaml: not valid YAML: a value does not read as the type"),
        ("a: !!bool maybe\n", "f.yaml: not valid YAML"),
    ],
)
def test_what_the_guard_refuses(text, words) -> None:
    with pytest.raises(ConfigValidationError) as info:
        loader.parse(text, "f.yaml")
    assert words in str(info.value)
    assert "abc" not in str(info.value)


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path) -> None:
    path = tmp_path / "network.yaml"
    path.write_bytes(b"timezone: Europe/Z\xfcrich\n")
    message, (problem,) = _problems(lambda: loader.load(path, NetworkFile))
    assert problem.line == 1
    assert message.startswith(f"{path}:1: not UTF-8 text: byte 18")


def test_a_missing_file_is_named(tmp_path) -> None:
    message, _ = _problems(lambda: loader.load(tmp_path / "absent.yaml", NetworkFile))
    assert message.startswith(f"{tmp_path / 'absent.yaml'}: cannot read the file")


def test_locations_match_the_loaded_data_and_merges_are_not_repeats() -> None:
    doc = loader.parse(
        "base: &b {x: 1, y: 2}\nmerged:\n  <<: *b\n  y: 3\n2: two\ntrue: yes\n",
        "f.yaml",
    )
    assert doc.duplicates == ()
    assert doc.data["merged"] == {"x": 1, "y": 3}
    assert doc.lines[(2,)] == 5
    assert doc.lines[(True,)] == 6
    assert doc.line_of(("merged", "nowhere", 3)) == 2


def test_values_can_be_kept_out_of_messages(tmp_path) -> None:
    path = _write(tmp_path, "reports.yaml", "affiliate_reports: hunter2-token\n")
    message, _ = _problems(lambda: loader.load(path, ReportsFile, show_values=False))
    assert f"{path}:1: affiliate_reports: " in message
    assert "hunter2" not in message
    message, _ = _problems(lambda: loader.load(path, ReportsFile))
    assert "(got 'hunter2-token')" in message


def test_the_loader_is_a_bottom_module() -> None:
    """The rules language, the settings and the sync all use it: it imports none of them."""
    import ast

    source = Path(loader.__file__).read_text(encoding="utf-8")
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
    ours = {name for name in imported if name.startswith("affiliate_network.")}
    others = {name.split(".")[0] for name in imported} - {"affiliate_network", "__future__"}
    bottom = tuple(
        f"affiliate_network.{m}." for m in ("settings.yamlguard", "settings.textfile", "exceptions")
    )
    assert [name for name in ours if not (name + ".").startswith(bottom)] == []
    assert others <= {"collections", "dataclasses", "difflib", "pathlib", "typing", "yaml",
                      "pydantic", "pydantic_core"}  # fmt: skip
