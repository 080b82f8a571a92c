"""Rules files are validated before anything is pulled: one clear error per problem.

Each bad file below pins the exact location (line, rule id, field) and the key words of the
message, so a regression in either the structure checks (pydantic) or the semantic checks
(paths, value types, regexes, lists, duplicate ids) shows up here.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.rules.loader import load_rules, loads_rules
from affiliate_network.settings.paths import include_dir

GOOD_RULE = """\
  - id: ok
    description: fine
    action: approve
    when: {field: sale_amount, lt: 10}
"""


def _errors(tmp_path: Path, text: str) -> tuple[ConfigValidationError, list]:
    path = tmp_path / "rules.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigValidationError) as info:
        load_rules(path, show_values=True)  # a file outside include/ hides values by default
    return info.value, info.value.errors  # type: ignore[attr-defined]


# (name, file text, expected line, rule id, field, words in the message)
BAD_FILES = [
    (
        "unknown_operator",
        """\
        rules:
          - id: big-sale
            description: x
            action: review
            when:
              field: sale_amount
              greater: 5000
        """,
        7,
        "big-sale",
        "when.greater",
        "unknown operator 'greater'",
    ),
    (
        "unknown_field_with_suggestion",
        """\
        rules:
          - id: ip
            description: x
            action: reject
            when: {field: conversion_ip, eq: 1.2.3.4}
        """,
        5,
        "ip",
        "when.field",
        "unknown field 'conversion_ip' (did you mean conversion_id, conversion_user_ip",
    ),
    (
        "wrong_value_type_for_number",
        """\
        rules:
          - id: sale
            description: x
            action: review
            when:
              all:
                - {field: sale_amount, gt: "abc"}
        """,
        7,
        "sale",
        "when.all[0].gt",
        "gt takes a number, got str 'abc'",
    ),
    (
        "bad_regex",
        """\
        rules:
          - id: ua
            description: x
            action: reject
            when: {field: http_user_agent, regex: "([a-z"}
        """,
        5,
        "ua",
        "when.regex",
        "invalid regular expression '([a-z'",
    ),
    (
        "duplicate_rule_id",
        """\
        rules:
          - id: same
            description: x
            action: reject
            when: {field: sub1, eq: a}
          - id: same
            description: y
            action: approve
            when: {field: sub1, eq: b}
        """,
        6,
        "same",
        "id",
        "duplicate rule id 'same' (first used by rule #1)",
    ),
    (
        "unknown_action",
        """\
        rules:
          - id: del
            description: x
            action: delete
            when: {field: sub1, eq: a}
        """,
        4,
        "del",
        "action",
        "unknown action 'delete'; expected one of approve, reject, review, hold",
    ),
    (
        "unknown_rule_key",
        """\
        rules:
          - id: extra
            description: x
            action: hold
            when: {field: sub1, eq: a}
            priority: 3
        """,
        6,
        "extra",
        "priority",
        "unknown key 'priority' in a rule",
    ),
    (
        "missing_description",
        """\
        rules:
          - id: nodesc
            action: hold
            when: {field: sub1, eq: a}
        """,
        2,
        "nodesc",
        "description",
        "required key 'description' is missing",
    ),
    (
        "between_reversed",
        """\
        rules:
          - id: range
            description: x
            action: review
            when: {field: payout, between: [50, 10]}
        """,
        5,
        "range",
        "when.between",
        "between needs low <= high",
    ),
    (
        "unknown_list_reference",
        """\
        lists:
          good_subs: [a, b]
        rules:
          - id: subs
            description: x
            action: reject
            when: {field: sub1, in: $bad_subs}
        """,
        7,
        "subs",
        "when.in",
        "unknown list '$bad_subs' (lists: good_subs)",
    ),
    (
        "window_on_share",
        """\
        rules:
          - id: share
            description: x
            action: review
            when:
              agg: {share_same: sub1, within_hours: 24}
              gt: 0.5
        """,
        6,
        "share",
        "when.agg",
        "within_hours only applies to count_same",
    ),
    (
        "all_and_any_in_one_condition",
        """\
        rules:
          - id: both
            description: x
            action: review
            when:
              all: [{field: sub1, eq: a}]
              any: [{field: sub2, eq: b}]
        """,
        5,
        "both",
        "when",
        "a condition is a mapping with exactly one of: all (list), any (list), not",
    ),
    (
        "numeric_operator_on_text",
        """\
        rules:
          - id: subnum
            description: x
            action: review
            when: {field: sub1, gt: 3}
        """,
        5,
        "subnum",
        "when.gt",
        "gt compares numbers but 'sub1' (string) is not numeric",
    ),
    (
        "boolean_field_with_text",
        """\
        rules:
          - id: scrub
            description: x
            action: reject
            when: {field: is_scrub, eq: "yes"}
        """,
        5,
        "scrub",
        "when.eq",
        "eq value 'yes' (str) does not match 'is_scrub' (boolean)",
    ),
    (
        "index_on_scalar",
        """\
        rules:
          - id: idx
            description: x
            action: hold
            when: {field: "sub1[0]", eq: a}
        """,
        5,
        "idx",
        "when.field",
        "'sub1' is not a list and cannot be indexed",
    ),
    (
        "unknown_relationship_member",
        """\
        rules:
          - id: rel
            description: x
            action: hold
            when: {field: relationship.afiliate.name, eq: a}
        """,
        5,
        "rel",
        "when.field",
        "unknown relationship member 'afiliate' (did you mean affiliate",
    ),
    (
        "duplicate_yaml_key",
        """\
        rules:
          - id: twice
            description: x
            action: approve
            action: reject
            when: {field: sub1, eq: a}
        """,
        5,
        "twice",
        "action",
        "key 'action' appears twice (first at line 4)",
    ),
    (
        "invalid_rule_id",
        """\
        rules:
          - id: "has spaces"
            description: x
            action: hold
            when: {field: sub1, eq: a}
        """,
        2,
        "has spaces",
        "id",
        "rule id 'has spaces' must be 1-64 letters, digits",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "rule_id", "field", "words"),
    [case[1:] for case in BAD_FILES],
    ids=[case[0] for case in BAD_FILES],
)
def test_bad_rules_file_names_file_line_rule_and_field(
    tmp_path, text, line, rule_id, field, words
) -> None:
    exc, errors = _errors(tmp_path, text)
    assert len(errors) == 1, str(exc)
    error = errors[0]
    assert (error.line, error.rule_id, error.field) == (line, rule_id, field), str(exc)
    assert words in error.message
    # The exception text carries the same facts, prefixed by the file path.
    path = str(tmp_path / "rules.yaml")
    assert f"{path}:{line}: rule {rule_id!r}: {field}: " in str(exc)


def test_every_problem_of_a_file_is_reported_at_once_in_line_order(tmp_path) -> None:
    exc, errors = _errors(
        tmp_path,
        """\
        rules:
          - id: a
            description: x
            action: explode
            when: {field: sub1, eq: a}
          - id: b
            description: y
            action: reject
            when:
              any:
                - {field: no_such_field, eq: 1}
                - {field: email, regex: "("}
        """,
    )
    assert [(e.line, e.rule_id, e.field) for e in errors] == [
        (4, "a", "action"),
        (11, "b", "when.any[0].field"),
        (12, "b", "when.any[1].regex"),
    ]
    assert str(exc).startswith(f"Invalid rules file {tmp_path / 'rules.yaml'} (3 problems):")


def test_yaml_syntax_error_reports_its_line(tmp_path) -> None:
    _, errors = _errors(tmp_path, "rules:\n  - id: a\n    description: [unclosed\n")
    assert errors[0].line == 4
    assert "not valid YAML" in errors[0].message


def test_empty_file_and_missing_file_are_clear(tmp_path) -> None:
    _, errors = _errors(tmp_path, "# nothing here\n")
    assert "the file is empty" in errors[0].message
    with pytest.raises(ConfigValidationError, match="cannot read the file"):
        load_rules(tmp_path / "absent.yaml")


def test_shorthand_and_explicit_forms_validate_the_same() -> None:
    short = loads_rules("rules:\n" + GOOD_RULE)
    explicit = loads_rules(
        "rules:\n  - id: ok\n    description: fine\n    action: approve\n"
        "    when: {field: sale_amount, op: lt, value: 10}\n"
    )
    assert short.rules[0].when == explicit.rules[0].when


@pytest.mark.parametrize(
    "path", sorted(include_dir().glob("onhold_rules*.yaml")), ids=lambda p: p.name
)
def test_include_rules_files_validate(path: Path) -> None:
    rules_file = load_rules(path)
    assert rules_file.rules, path


def test_include_has_the_default_rules_file() -> None:
    assert (include_dir() / "onhold_rules.yaml").is_file()


def test_cli_validate_exit_codes_and_messages(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "rules:\n  - id: x\n    description: d\n    action: nope\n    when: {field: sub1, eq: a}\n"
    )
    good = include_dir() / "onhold_rules.yaml"
    ok = subprocess.run(
        [sys.executable, "-m", "affiliate_network.rules", "validate", str(good)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0
    assert "OK (" in ok.stdout
    failed = subprocess.run(
        [
            Path(sys.executable).with_name("affiliate-network-rules"),
            "validate",
            str(good),
            str(bad),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert failed.returncode == 1
    assert f"{bad}:4: rule 'x': action: unknown action 'nope'" in failed.stderr
    assert "1 of 2 file(s) invalid" in failed.stderr


def test_the_documented_example_validates() -> None:
    """The language's one reference (docs/onhold-review.md, "The rules file") shows a file that
    validates."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "onhold-review.md").read_text()
    section = doc.split("## The rules file", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    rules_file = loads_rules(block, "docs/onhold-review.md")
    assert [r.id for r in rules_file.rules] == [
        "blocked-sub1",
        "duplicate-ip-24h",
        "risky-big-sale",
    ]
