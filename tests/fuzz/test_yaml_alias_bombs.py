"""YAML that refers to itself, expands exponentially or nests very deep: a clear error, fast."""

from __future__ import annotations

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.rules.loader import loads_rules
from affiliate_network.sync.loader import parse_desired_state

RECURSIVE_STATE = "offer_groups:\n  - &a {x: *a}\n"
RECURSIVE_RULES = "rules:\n  - &r {id: a, description: d, action: reject, when: *r}\n"


def _laughs(top: str) -> str:
    """Nine levels, each listing the previous one ten times: a billion strings once expanded."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for n in range(1, 10):
        refs = ", ".join([f"*l{n - 1}"] * 10)
        lines.append(f"l{n}: &l{n} [{refs}]")
    lines.append(f"{top}: *l9")
    return "\n".join(lines) + "\n"


def _deep(levels: int) -> str:
    return "offer_groups: " + "[" * levels + "]" * levels + "\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (RECURSIVE_STATE, "offer_state.yaml:2: an alias refers to a node that contains it"),
        (_laughs("offer_groups"), "the document expands to more than 200,000 values"),
        (_deep(100), "offer_state.yaml:1: nested too deeply"),
        (_deep(5000), "nested too deeply"),
    ],
)
def test_desired_state(text, message):
    with pytest.raises(ConfigValidationError) as info:
        parse_desired_state(text, source="offer_state.yaml")
    assert message in str(info.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (RECURSIVE_RULES, "rules.yaml:2: an alias refers to a node that contains it"),
        (_laughs("rules"), "the document expands to more than 200,000 values"),
        ("rules: " + "[" * 100 + "]" * 100, "rules.yaml:1: nested too deeply"),
        ("rules: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_rules(text, message):
    with pytest.raises(ConfigValidationError) as info:
        loads_rules(text, source="rules.yaml")
    assert message in str(info.value)
