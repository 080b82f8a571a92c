"""The shipped ``include/offer_state.yaml`` is a template: its placeholders are refused.

The sandbox's example desired state (its default world's ids) lives in
``demo/include/offer_state.yaml``; a copied ``include/`` must never write it, or anything, to
a real network's objects until a person has written their own ids (issue 47 item 2).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.settings.paths import PROJECT_ROOT
from affiliate_network.sync.loader import load_desired_state, parse_desired_state
from demo import SANDBOX_OFFER_STATE

TEMPLATE = PROJECT_ROOT / "include" / "offer_state.yaml"
PLACEHOLDER_LINE = re.compile(r'^\s*-?\s*(\w+): \[?"<FILL IN: ([^>]*)>"\]?\s*$')


def _placeholders() -> list[tuple[int, str, str]]:
    """(line, field, what to write) of every placeholder, read from the template's text."""
    found = []
    for number, line in enumerate(TEMPLATE.read_text().splitlines(), start=1):
        if match := PLACEHOLDER_LINE.match(line):
            found.append((number, match.group(1), match.group(2)))
    return found


def test_the_template_is_refused_naming_file_line_field_and_what_to_write() -> None:
    expected = _placeholders()
    assert len(expected) >= 10  # every network id of the template, at least
    with pytest.raises(ConfigValidationError) as info:
        load_desired_state(TEMPLATE, display_name="include/offer_state.yaml")
    lines = str(info.value).splitlines()
    assert lines[0] == f"include/offer_state.yaml: {len(expected)} problems in the desired state"
    for number, field, what in expected:
        hits = [
            line
            for line in lines
            if line.startswith(f"include/offer_state.yaml:{number}: ")
            and re.search(rf"field '{field}(\[0\])?': the template's placeholder", line)
        ]
        assert len(hits) == 1, (number, field, lines)
        assert f"never sent: write {what} (or delete this definition)" in hits[0]
    # Nothing else is wrong with it: only the placeholders stand between it and a sync.
    assert len(lines) == 1 + len(expected)


def test_the_template_filled_in_is_a_valid_desired_state(tmp_path: Path) -> None:
    ids = iter(range(900, 1000))

    def fill(match: re.Match[str]) -> str:
        what = match.group(1)
        if "URL" in what:
            return "https://advertiser.example/landing?tid={transaction_id}"
        return str(next(ids)) if " id" in what else "Filled in"

    text = re.sub(r'"<FILL IN: ([^>]*)>"', fill, TEMPLATE.read_text())
    state = parse_desired_state(text, source="filled.yaml")
    assert {"offer_groups", "offers", "scrub_rates"} <= set(state.objects)


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ('"<FILL IN: the id of the offer on your network>"', "the id of the offer on your network"),
        ('"<fill in>"', "your network's value"),
    ],
)
def test_a_placeholder_left_anywhere_is_refused(tmp_path: Path, value: str, what: str) -> None:
    # The sandbox's example with one id put back to a placeholder, in a list.
    text = SANDBOX_OFFER_STATE.read_text().replace(
        "network_offer_ids: [101, 109]", f"network_offer_ids: [101, {value}]"
    )
    path = tmp_path / "offer_state.yaml"
    path.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "network_offer_ids" in t)
    with pytest.raises(ConfigValidationError) as info:
        load_desired_state(path)
    assert (
        f"{path}:{line}: offer_groups[0] (key 'acme-core', network_offer_group_id 301): "
        f"field 'network_offer_ids[1]': the template's placeholder, never sent: write {what} "
        "(or delete this definition)"
    ) in str(info.value)
    # Reported once, as a placeholder (not also as "not a valid integer").
    assert "valid integer" not in str(info.value)


def test_the_sandbox_example_is_outside_the_shipped_include_folder() -> None:
    assert SANDBOX_OFFER_STATE.parent != TEMPLATE.parent
    assert load_desired_state(SANDBOX_OFFER_STATE).section("offer_groups")
    shipped = TEMPLATE.read_text()
    for sandbox_id in ("301", "101", "109", "5001", "2002"):
        assert not re.search(rf"\b{sandbox_id}\b", shipped), sandbox_id
