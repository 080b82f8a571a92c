"""Desired-state validation: values checked against the spec; errors name file/object/field/line."""

from __future__ import annotations

import re

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.sync import spec_fields
from affiliate_network.sync.loader import load_desired_state, parse_desired_state
from affiliate_network.sync.models import OfferGroup, ScrubRate


def _error(path) -> str:
    with pytest.raises(ConfigValidationError) as info:
        load_desired_state(path)
    return str(info.value)


def _line_of(path, needle: str, occurrence: int = 1) -> int:
    """1-based line of the n-th line containing ``needle`` in the written file."""
    hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    return hits[occurrence - 1]


def test_example_state_is_valid(example_doc, write_state):
    state = load_desired_state(write_state(example_doc))
    counts = state.counts()
    assert counts["offer_groups"] >= 1
    assert counts["offers"] >= 1
    assert counts["scrub_rates"] >= 1
    group = state.section("offer_groups")[0]
    assert isinstance(group, OfferGroup)
    # The PUT body is the whole object: every spec field, no key, no path id.
    assert set(group.body()) == set(spec_fields.OFFER_GROUP_WHOLE_FIELDS)


def test_scrub_rate_percentage_above_100_names_file_object_field_and_line(example_doc, write_state):
    example_doc["scrub_rates"][0]["scrub_rate_percentage"] = 120
    path = write_state(example_doc)
    message = _error(path)
    key = example_doc["scrub_rates"][0]["key"]
    line = _line_of(path, "scrub_rate_percentage:")
    assert f"{path}:{line}: scrub_rates[0] (key '{key}'): field 'scrub_rate_percentage'" in message
    assert "less than or equal to 100" in message
    assert "(got 120)" in message


@pytest.mark.parametrize("value", [-0.5, "15", True])
def test_scrub_rate_percentage_negative_or_not_a_number_is_refused(example_doc, write_state, value):
    example_doc["scrub_rates"][0]["scrub_rate_percentage"] = value
    message = _error(write_state(example_doc))
    assert "field 'scrub_rate_percentage'" in message


@pytest.mark.parametrize(
    ("section", "field", "value", "expected"),
    [
        ("scrub_rates", "scrub_rate_status", "approved", "'rejected' or 'pending'"),
        ("scrub_rates", "custom_setting_status", "enabled", "'active' or 'inactive'"),
        ("offer_groups", "offer_group_status", "archived", "'active', 'paused' or 'deleted'"),
        ("offers", "currency_id", "usd", "pattern"),
    ],
)
def test_enumeration_values_outside_the_spec_are_refused(
    example_doc, write_state, section, field, value, expected
):
    example_doc[section][0][field] = value
    path = write_state(example_doc)
    message = _error(path)
    line = _line_of(path, f"{field}: {value}")
    assert re.search(
        rf"{re.escape(str(path))}:{line}: {section}\[0\] \(.*\): field '{field}'", message
    )
    assert expected in message


def test_payout_type_outside_the_spec_enumeration_names_the_nested_field(example_doc, write_state):
    example_doc["offers"][0]["payout_revenue"][0]["payout_type"] = "cpz"
    path = write_state(example_doc)
    message = _error(path)
    assert "field 'payout_revenue[0].payout_type'" in message
    assert f":{_line_of(path, 'payout_type: cpz')}:" in message


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("daily_conversion_cap", "200", "should be a number"),
        ("daily_conversion_cap", -1, "greater than or equal to 0"),
        ("is_caps_enabled", "yes", "valid boolean"),
        ("network_advertiser_id", 1.5, "valid integer"),
        ("network_offer_ids", [1, 1], "more than once"),
        ("labels", "core", "valid list"),
    ],
)
def test_wrong_types_are_refused_not_coerced(example_doc, write_state, field, value, expected):
    example_doc["offer_groups"][0][field] = value
    message = _error(write_state(example_doc))
    assert f"field '{field}'" in message
    assert expected in message


def test_definition_missing_put_fields_is_refused_listing_every_missing_field(
    example_doc, write_state
):
    group = example_doc["offer_groups"][0]
    for field in ("internal_notes", "weekly_click_cap", "labels"):
        del group[field]
    path = write_state(example_doc)
    message = _error(path)
    line = _line_of(path, "- key: " + group["key"])
    assert f"{path}:{line}: offer_groups[0]" in message
    assert "missing labels, internal_notes, weekly_click_cap" in message
    assert "PUT replaces the object" in message
    # Reported once, not once per field by the model as well.
    assert "Field required" not in message


def test_payout_entry_missing_request_fields_is_refused(example_doc, write_state):
    del example_doc["offers"][0]["payout_revenue"][0]["revenue_amount"]
    message = _error(write_state(example_doc))
    assert "field 'payout_revenue[0]': incomplete entry: missing revenue_amount" in message


def test_offer_needs_exactly_one_default_payout_entry(example_doc, write_state):
    entry = dict(example_doc["offers"][0]["payout_revenue"][0])
    example_doc["offers"][0]["payout_revenue"].append(entry)
    message = _error(write_state(example_doc))
    assert "exactly one entry with is_default: true, found 2" in message


def test_unknown_field_and_unknown_section_are_refused(example_doc, write_state):
    example_doc["offer_groups"][0]["daily_cap"] = 5
    example_doc["caps"] = []
    message = _error(write_state(example_doc))
    assert "field 'daily_cap': unknown field" in message
    assert "section 'caps': unknown section" in message


def test_all_problems_are_reported_together(example_doc, write_state):
    example_doc["scrub_rates"][0]["scrub_rate_percentage"] = 101
    example_doc["offer_groups"][0]["offer_group_status"] = "on"
    message = _error(write_state(example_doc))
    assert message.splitlines()[0].endswith("2 problems in the desired state")


def test_repeated_yaml_key_is_an_error_not_a_silent_override():
    text = (
        "version: 1\nchannels:\n  - network_channel_id: 1\n"
        "    name: A\n    name: B\n    status: active\n"
    )
    with pytest.raises(ConfigValidationError, match=r"<string>:5: .*key 'name' appears twice"):
        parse_desired_state(text)


def test_the_same_object_defined_twice_is_refused(example_doc, write_state):
    second = dict(example_doc["offer_groups"][0], key="other-key")
    example_doc["offer_groups"].append(second)
    message = _error(write_state(example_doc))
    assert (
        "field 'network_offer_group_id': the same object is defined by offer_groups[0]" in message
    )


def test_offer_of_another_advertiser_in_a_group_is_refused(example_doc, write_state):
    offer_id = example_doc["offers"][0]["network_offer_id"]
    example_doc["offer_groups"][0]["network_offer_ids"] = [offer_id]
    example_doc["offers"][0]["network_advertiser_id"] = (
        example_doc["offer_groups"][0]["network_advertiser_id"] + 1
    )
    message = _error(write_state(example_doc))
    assert f"offer {offer_id} belongs to advertiser" in message


def test_scrub_rate_needs_an_explicit_key(example_doc, write_state):
    del example_doc["scrub_rates"][0]["key"]
    message = _error(write_state(example_doc))
    assert "scrub_rates[0]" in message
    assert "field 'key'" in message


def test_invalid_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("offer_groups:\n  - name: [unclosed\n")
    with pytest.raises(ConfigValidationError, match=rf"{re.escape(str(path))}:\d+: not valid YAML"):
        load_desired_state(path)


def test_scrub_rate_body_is_the_create_request(example_doc, write_state):
    state = load_desired_state(write_state(example_doc))
    rate = state.section("scrub_rates")[0]
    assert isinstance(rate, ScrubRate)
    body = rate.body()
    assert "key" not in body
    assert set(spec_fields.SCRUB_RATE_WHOLE_FIELDS) <= set(body)
