"""Mistaken desired-state files: fractional caps, misspelled fields, files that are not UTF-8."""

from __future__ import annotations

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.sync import spec_fields
from affiliate_network.sync.loader import load_desired_state


def _error(path) -> str:
    with pytest.raises(ConfigValidationError) as info:
        load_desired_state(path)
    return str(info.value)


@pytest.mark.parametrize("field", spec_fields.CAP_FIELDS)
def test_a_fractional_cap_is_refused(example_doc, write_state, field):
    example_doc["offer_groups"][0][field] = 250.5
    message = _error(write_state(example_doc))
    assert f"field '{field}'" in message
    assert "whole number" in message
    assert "(got 250.5)" in message


def test_a_fractional_offer_level_cap_is_refused(example_doc, write_state):
    example_doc["offers"][0]["daily_conversion_cap"] = 10.25
    message = _error(write_state(example_doc))
    assert "offers[0]" in message
    assert "field 'daily_conversion_cap'" in message
    assert "whole number" in message


def test_a_whole_cap_written_with_a_point_zero_is_read_as_an_integer(example_doc, write_state):
    example_doc["offer_groups"][0]["daily_conversion_cap"] = 250.0
    group = load_desired_state(write_state(example_doc)).section("offer_groups")[0]
    assert group.daily_conversion_cap == 250
    assert isinstance(group.body()["daily_conversion_cap"], int)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_and_infinity_are_refused_where_numbers_go(example_doc, write_state, value):
    example_doc["scrub_rates"][0]["scrub_rate_percentage"] = value
    example_doc["offers"][0]["payout_revenue"][0]["payout_amount"] = value
    example_doc["offer_groups"][0]["daily_payout_cap"] = value
    message = _error(write_state(example_doc))
    assert "field 'scrub_rate_percentage'" in message
    assert "field 'payout_revenue[0].payout_amount'" in message
    assert "field 'daily_payout_cap'" in message


def test_a_misspelled_field_gets_the_likely_one_and_the_fields_that_exist(example_doc, write_state):
    example_doc["offer_groups"][0]["daily_conversoin_cap"] = 5
    message = _error(write_state(example_doc))
    assert "field 'daily_conversoin_cap': unknown field" in message
    assert "did you mean 'daily_conversion_cap'?" in message
    assert "Fields here: " in message
    assert "offer_group_status" in message


def test_a_misspelled_nested_field_gets_the_entry_fields(example_doc, write_state):
    example_doc["offers"][0]["payout_revenue"][0]["payot_type"] = "cpa"
    message = _error(write_state(example_doc))
    assert "did you mean 'payout_type'?" in message
    assert "revenue_amount" in message
    assert "offer_group_status" not in message  # the entry's fields, not the offer group's


def test_a_misspelled_section_gets_the_likely_one(example_doc, write_state):
    example_doc["offer_group"] = []
    message = _error(write_state(example_doc))
    assert "section 'offer_group': unknown section; did you mean 'offer_groups'?" in message


def test_a_file_that_is_not_utf8_names_the_file_line_and_byte(example_doc, write_state):
    path = write_state(example_doc)
    data = path.read_bytes()
    at = data.index(b"name:")
    path.write_bytes(data[:at] + b"# caf\xe9\n" + data[at:])  # Latin-1 e-acute
    message = _error(path)
    line = data[:at].count(b"\n") + 1
    assert message.startswith(f"{path}:{line}: not UTF-8 text: byte {at + 5} (line {line})")
    assert "0xe9" in message


def test_a_utf16_file_is_named_as_such(example_doc, write_state):
    path = write_state(example_doc)
    path.write_bytes(path.read_text().encode("utf-16"))
    assert "looks like UTF-16" in _error(path)
