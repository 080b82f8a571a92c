"""The review's settings: the rules file's ``review:`` section, checked with the rules.

``nan``, infinities and out-of-range values are refused naming file, line and field (an
unchecked ``nan`` compares false with everything: it switched the reject-count and payout
guardrails and the minimum age off without a word); the operator's own tuning arguments are
refused naming the argument. A deployment that still sets one of the old environment variables
fails at run time, naming it and its key in the rules file.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.review.guardrails import Guardrails
from affiliate_network.review.options import (
    MOVED_VARIABLES,
    ReviewOptions,
    dry_run_choice,
    refuse_moved_variables,
)
from affiliate_network.rules.loader import loads_rules
from affiliate_network.rules.model import ReviewSettings

RULES = """\
rules:
  - id: a
    description: d
    action: hold
    when: {field: sub1, eq: x}
review:
"""
#: Values out of each setting's range, beyond .nan, .inf and -.inf (refused for every number).
OUT_OF_RANGE: dict[str, list[Any]] = {
    "lookback_days": [0, -1, 7.5, 100000, "seven", True],
    "min_age_hours": [-1, 1e9, "1"],
    "chunk_size": [0, 2001, 2.5],
    "max_reject_share": [-0.1, 1.5, "50%"],
    "max_reject_count": [-1, 1.5],
    "keep_decision_hours": [-1, 1e30],
    "review_minutes": [0, -5, 1e12],
    "late_arrival_hours": [-1, 169],
}
CASES = [
    (name, value)
    for name, values in OUT_OF_RANGE.items()
    for value in [".nan", ".inf", "-.inf", *values]
]


def _section(text: str) -> ReviewSettings:
    return loads_rules(RULES + text, "onhold_rules.yaml").review


@pytest.mark.parametrize(("name", "value"), CASES, ids=[f"{n}={v}" for n, v in CASES])
def test_a_bad_number_is_refused_naming_file_line_and_field(name, value) -> None:
    shown = value if isinstance(value, str) and value.startswith(("-.", ".")) else repr(value)
    with pytest.raises(ConfigValidationError, match=f"onhold_rules.yaml:7: review.{name}:"):
        _section(f"  {name}: {shown}\n")


@pytest.mark.parametrize(
    "ceilings", ["2000", "{USD: .nan}", "{USD: -5}", "{USD: .inf}", "{usd: 5}", "USD=2000"]
)
def test_a_bad_payout_ceiling_is_refused(ceilings) -> None:
    with pytest.raises(ConfigValidationError, match=r":7: review.max_approved_payout"):
        _section(f"  max_approved_payout: {ceilings}\n")


def test_a_rejection_writing_approved_and_an_unknown_key_are_refused() -> None:
    with pytest.raises(ConfigValidationError, match=r":7: review.reject_status: .*'approved'"):
        _section("  reject_status: approved\n")
    with pytest.raises(ConfigValidationError, match=r":7: review.max_reject_shar: unknown key"):
        _section("  max_reject_shar: 0.2\n")


def test_good_values_null_and_the_defaults_are_read() -> None:
    settings = _section(
        "  lookback_days: 14\n  min_age_hours: 0\n  chunk_size: 2000\n"
        "  max_reject_share: null\n  max_reject_count: 1000\n"
        "  max_approved_payout: {USD: 2000, EUR: 1800.50}\n  keep_decision_hours: 0.5\n"
        "  review_minutes: 90\n  late_arrival_hours: 0\n"
    )
    assert (settings.lookback_days, settings.min_age_hours, settings.chunk_size) == (14, 0, 2000)
    assert settings.max_reject_share is None
    assert settings.max_approved_payout == {"EUR": Decimal("1800.50"), "USD": Decimal(2000)}
    assert (settings.keep_decision_hours, settings.review_minutes) == (0.5, 90)
    assert settings.late_arrival_hours == 0
    options = ReviewOptions.of(settings)
    assert options.guardrails.max_approved_payout == settings.max_approved_payout
    assert (options.chunk_size, options.late_arrival_hours) == (2000, 0)
    defaults = loads_rules(RULES.removesuffix("review:\n")).review
    assert defaults == ReviewSettings()
    assert (defaults.lookback_days, defaults.min_age_hours, defaults.chunk_size) == (7, 1.0, 100)
    assert (defaults.max_reject_share, defaults.max_reject_count) == (0.5, 1000)
    assert defaults.max_approved_payout is None
    assert (defaults.keep_decision_hours, defaults.review_minutes) == (24.0, 50)
    assert (defaults.reject_status, defaults.late_arrival_hours) == ("rejected", 6.0)


@pytest.mark.parametrize("variable", sorted(MOVED_VARIABLES))
def test_an_old_variable_fails_naming_it_and_its_new_place(variable) -> None:
    with pytest.raises(ConfigValidationError) as info:
        refuse_moved_variables("include/onhold_rules.yaml", {variable: "5", "OTHER": "1"})
    message = str(info.value)
    assert f"{variable} is no longer read" in message
    assert f"review.{MOVED_VARIABLES[variable]} in the rules file include/onhold_rules.yaml" in (
        message
    )
    refuse_moved_variables("x.yaml", {variable: " "})  # set but empty: nothing to move


@pytest.mark.parametrize(
    ("conf", "params", "run_type", "expected"),
    [
        ({"dry_run": False}, {"mode": "dry_run"}, "manual", False),
        ({"dry_run": "true"}, None, "scheduled", "true"),
        ({"mode": "write"}, {"mode": "dry_run"}, "manual", False),
        ({"mode": "dry_run"}, None, "scheduled", True),
        (None, {"mode": "write"}, "manual", False),
        (None, {"mode": "dry_run"}, "manual", True),
        (None, {"mode": "dry_run"}, "scheduled", None),
        ({}, None, "backfill", None),
    ],
)
def test_the_run_decides_dry_run(conf, params, run_type, expected) -> None:
    assert dry_run_choice(conf, params, run_type) == expected


ARGUMENTS = ("lease_wait_minutes", "page_size", "readback_wait_s")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, True, "3"])
@pytest.mark.parametrize("name", ARGUMENTS)
def test_the_operator_refuses_a_bad_number_naming_the_argument(name, value) -> None:
    with pytest.raises(ConfigValidationError, match=f"^{name} must be"):
        OnHoldReviewOperator(task_id="review", **{name: value})


@pytest.mark.parametrize(
    ("options", "name"),
    [
        (lambda: ReviewOptions(min_age_hours=math.nan), "min_age_hours"),
        (lambda: ReviewOptions(keep_decision_hours=1e30), "keep_decision_hours"),
        (lambda: ReviewOptions(chunk_size=2.5), "chunk_size"),  # type: ignore[arg-type]
        (lambda: ReviewOptions(late_arrival_hours=math.inf), "late_arrival_hours"),
        (lambda: Guardrails(max_reject_count=math.nan), "max_reject_count"),  # type: ignore[arg-type]
        (lambda: Guardrails(max_reject_share=math.inf), "max_reject_share"),
    ],
)
def test_the_library_refuses_them_too(options, name) -> None:
    """A plain script builds the options without the operator."""
    with pytest.raises(ConfigValidationError, match=f"^{name} must be"):
        options()


def test_whole_numbers_given_as_floats_are_stored_as_integers() -> None:
    options = ReviewOptions(chunk_size=50.0, page_size=500.0)  # type: ignore[arg-type]
    assert (options.chunk_size, options.page_size) == (50, 500)
    assert type(options.chunk_size) is int
    assert type(options.page_size) is int
    assert Guardrails(max_reject_count=10.0).max_reject_count == 10  # type: ignore[arg-type]
