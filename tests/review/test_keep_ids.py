"""How a ``keep_on_hold`` answer is read (the sandbox path: tests/operators/test_onhold_keep_ids.py;
every combination: tests/fuzz/test_dag_params.py)."""

from __future__ import annotations

import logging

import pytest

from affiliate_network.review.human_apply import STOPPED, keep_ids, match_keep_ids, plan_choices
from affiliate_network.review.human_requests import OPTION_APPROVE, OPTION_KEEP, UNANSWERED

ROWS = [
    {"rule_id": "r", "conversion_id": "a1b2", "on_hold_conversion_id": "f00d"},
    {"rule_id": "r", "conversion_id": "c3d4", "on_hold_conversion_id": "beef"},
]


def test_ids_are_split_on_commas_semicolons_spaces_and_copied_quotes() -> None:
    assert keep_ids(" `A1B2`,'x' ;\n\"beef\" a1b2 ") == ["A1B2", "x", "beef", "a1b2"]
    assert keep_ids(None) == []
    assert keep_ids("") == []


def test_conversion_and_on_hold_ids_match_without_regard_to_case() -> None:
    assert match_keep_ids(["A1B2", "BEEF", "a1b3"], ROWS) == ({"f00d", "beef"}, ["a1b3"])


@pytest.mark.parametrize(("choice", "expected"), [(OPTION_KEEP, OPTION_KEEP), (None, UNANSWERED)])
def test_an_unmatched_id_beside_an_answer_that_writes_nothing_only_warns(
    choice, expected, caplog
) -> None:
    response = {
        "chosen_options": [choice] if choice else [],
        "params_input": {"keep_on_hold": "zz"},
    }
    with caplog.at_level(logging.WARNING):
        choices = plan_choices(
            [{"subject": "r: 2 conversions to review"}], [response], ROWS, "rejected"
        )
    assert choices.stopped == {}
    assert {c for c, _ in choices.decided.values()} == {expected}
    assert "keep_on_hold ids 'zz' match none of its conversions" in caplog.text


def test_an_unmatched_id_beside_approve_all_stops_the_request(caplog) -> None:
    response = {"chosen_options": [OPTION_APPROVE], "params_input": {"keep_on_hold": "a1b2 zz"}}
    with caplog.at_level(logging.INFO):
        choices = plan_choices(
            [{"subject": "r: 2 conversions to review"}], [response], ROWS, "rejected"
        )
    assert choices.plan == {"approved": [], "rejected": []}
    assert choices.stopped == {"r": ["zz"]}
    assert {c for c, _ in choices.decided.values()} == {STOPPED}
    assert "2 conversions, 0 kept on hold (keep_on_hold listed 2)" in caplog.text
