"""The payout guardrail on plans in several currencies: each currency against its own ceiling,
never a sum of different currencies; exact Decimal money from the JSON text.

The guardrails take records, so these plans are records with ``currency_id`` values (raw
reports carry each offer's currency), decided by a real rules file: approve ``sub1 == ok``,
reject ``sub1 == bad``. The sandbox's default world is single-currency; the operator test at
the end runs on it.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affiliate_network.exceptions import ConfigValidationError, GuardrailError
from affiliate_network.review.audit import audit_rows
from affiliate_network.review.guardrails import Guardrails, send_negative_payouts_to_review
from affiliate_network.review.money import amount_of, payout_ceilings
from affiliate_network.rules.engine import Evaluation, RuleSet

RULES = """\
rules:
  - id: clean
    description: approve
    action: approve
    when: {field: sub1, eq: ok}
  - id: fraud
    description: reject
    action: reject
    when: {field: sub1, eq: bad}
"""


@pytest.fixture
def ruleset(tmp_path: Path) -> RuleSet:
    path = tmp_path / "onhold_rules_currencies.yaml"
    path.write_text(RULES)
    return RuleSet.from_file(path)


def _records(*items: tuple[str, Any, str | None]) -> list[dict[str, Any]]:
    """Records ``(sub1, payout, currency)``, their payout as the hook's JSON parser gives it."""
    records = []
    for n, (sub1, payout, currency) in enumerate(items):
        doc = b'{"conversion_id": "c%d", "sub1": "%s", "payout": %s%s}' % (
            n,
            sub1.encode(),
            str(payout).encode(),
            b"" if currency is None else b', "currency_id": "%s"' % currency.encode(),
        )
        records.append(orjson.loads(doc))
    return records


def _check(ruleset: RuleSet, records: list[dict[str, Any]], **ceilings: Any) -> Evaluation:
    evaluation = ruleset.evaluate(records)
    Guardrails(max_reject_share=None, max_reject_count=None, **ceilings).check(evaluation, records)
    return evaluation


def test_a_currency_without_a_ceiling_stops_the_plan_instead_of_adding_up(ruleset) -> None:
    # 900 USD + 900 KWD (about 3,830 USD) passed a ceiling of 2,000 as a sum of 1,800.
    records = _records(("ok", "900", "USD"), ("ok", "900.125", "KWD"))
    with pytest.raises(GuardrailError) as info:
        _check(ruleset, records, max_approved_payout={"USD": Decimal(2000)})
    message = str(info.value)
    assert "approved payout 900.125 KWD has no ceiling in max_approved_payout" in message
    assert "(ceilings: 2,000.00 USD)" in message
    assert "1,800" not in message  # never a cross-currency sum
    assert "1800" not in message
    assert info.value.approved_payout == {"KWD": Decimal("900.125"), "USD": Decimal(900)}
    assert info.value.currencies == ("KWD", "USD")
    # With a ceiling of its own, each currency passes.
    _check(ruleset, records, max_approved_payout="USD=2000,KWD=1000")


def test_small_amounts_of_a_weak_currency_do_not_trip_a_strong_currencys_ceiling(ruleset) -> None:
    # 10 USD + 100,000 IDR tripped a 2,000 ceiling as a sum of 100,010.
    records = _records(("ok", "10", "USD"), ("ok", "100000", "IDR"))
    _check(ruleset, records, max_approved_payout="USD=2000,IDR=2000000")
    with pytest.raises(GuardrailError, match=r"approved payout 100,000\.00 IDR > max_approved_pay"):
        _check(ruleset, records, max_approved_payout="USD=2000,IDR=99999.99")


def test_each_currency_is_held_to_its_own_ceiling(ruleset) -> None:
    records = _records(
        ("ok", "1500", "USD"), ("ok", "600", "usd"), ("ok", "1", "EUR"), ("bad", "7", "EUR")
    )
    with pytest.raises(GuardrailError) as info:
        _check(ruleset, records, max_approved_payout="USD=2000,EUR=1800")
    message = str(info.value)
    assert "approved payout 2,100.00 USD > max_approved_payout 2,000.00 USD" in message
    assert "EUR >" not in message
    assert info.value.rejected_payout == {"EUR": Decimal(7)}


def test_payouts_are_exact_decimals_from_the_json_text(ruleset) -> None:
    # As binary floats 0.1 + 0.2 is 0.30000000000000004: over a ceiling of 0.3.
    records = _records(("ok", "0.1", "USD"), ("ok", "0.2", "USD"))
    assert [amount_of(r["payout"], what="payout") for r in records] == [
        Decimal("0.1"),
        Decimal("0.2"),
    ]
    _check(ruleset, records, max_approved_payout="USD=0.3")
    with pytest.raises(GuardrailError) as info:
        _check(ruleset, records, max_approved_payout="USD=0.29")
    assert info.value.approved_payout == {"USD": Decimal("0.3")}
    assert all(type(v) is Decimal for v in info.value.approved_payout.values())


def test_approvals_without_a_currency_are_stopped_once_a_ceiling_is_set(ruleset) -> None:
    records = _records(("ok", "5", "USD"), ("ok", "5", None))
    with pytest.raises(GuardrailError, match=r"5\.00 \(no currency\) has no ceiling"):
        _check(ruleset, records, max_approved_payout="USD=2000")
    _check(ruleset, records)  # no ceiling at all: nothing to compare


def test_the_rejections_sample_takes_turns_across_currencies(ruleset) -> None:
    # Highest first within each currency: 100,000 IDR does not outrank 900 KWD.
    records = _records(
        ("bad", "100000", "IDR"),
        ("bad", "90000", "IDR"),
        ("bad", "900", "KWD"),
        ("bad", "1", "KWD"),
    )
    with pytest.raises(GuardrailError) as info:
        Guardrails(max_reject_count=1).check(ruleset.evaluate(records), records)
    assert info.value.conversion_ids == ("c0", "c2", "c1", "c3")
    assert info.value.rejected_payout == {"IDR": Decimal(190000), "KWD": Decimal(901)}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (2000, "a plain number is no ceiling"),
        (2000.0, "a plain number is no ceiling"),
        ("2000", "a plain number is no ceiling"),
        ("USD=nan", "USD: 'nan' is not a finite amount"),
        ("USD=inf", "USD: 'inf' is not a finite amount"),
        ("USD=-1", "USD: '-1' is not a finite amount >= 0"),
        ("USD=1,usd=2", "USD is given twice"),
        ("dollars=5", "'dollars' is not a 3-letter currency code"),
        ({"USD": float("nan")}, "USD: nan is not a finite amount"),
    ],
)
def test_a_ceiling_without_a_currency_or_a_finite_amount_is_refused(value, words) -> None:
    with pytest.raises(ConfigValidationError) as info:
        Guardrails(max_approved_payout=value)
    message = str(info.value)
    assert message.startswith("max_approved_payout: ")
    assert words in message
    assert 'max_approved_payout="USD=2000,EUR=1800"' in message  # the form to use


def test_the_text_form_reads_codes_in_any_case_and_none_as_no_ceiling() -> None:
    assert payout_ceilings(" usd=2000, EUR=1800.50 ;jpy=300000", "x") == {
        "EUR": Decimal("1800.50"),
        "JPY": Decimal(300000),
        "USD": Decimal(2000),
    }
    assert payout_ceilings("none", "x") is None
    assert payout_ceilings("", "x") is None
    assert Guardrails(max_approved_payout={}).max_approved_payout is None


# --- negative payouts (issue 44, defect 2) -----------------------------------------------------


def test_a_reversal_does_not_let_approvals_pass_the_ceiling(ruleset) -> None:
    # One on-hold row of -29,500 USD netted 30 approvals of 1,000 USD down to 500 USD: under a
    # ceiling of 1,000 USD the run approved 30,000 USD.
    records = _records(("ok", "-29500", "USD"), *[("ok", "1000", "USD")] * 30)
    with pytest.raises(GuardrailError) as info:
        _check(ruleset, records, max_approved_payout="USD=1000")
    assert "approved payout 30,000.00 USD > max_approved_payout 1,000.00 USD" in str(info.value)
    assert info.value.approved_payout == {"USD": Decimal(30000)}


def test_a_negative_payout_alone_needs_no_ceiling_of_its_currency(ruleset) -> None:
    # It is not approved by a rule (a person decides it), so it pays nothing out.
    records = _records(("ok", "-40", "EUR"), ("ok", "900", "USD"))
    _check(ruleset, records, max_approved_payout="USD=1000")


def test_an_approval_of_a_negative_payout_goes_to_a_person(ruleset) -> None:
    records = _records(("ok", "-29500", "USD"), ("ok", "12.5", "USD"), ("bad", "-3", "EUR"))
    for record in records:
        record["relationship"] = {"on_hold_snapshots": [{"on_hold_conversion_id": "x"}]}
    rows = audit_rows(records, ruleset.evaluate(records), ruleset)
    assert send_negative_payouts_to_review(rows) == 1
    assert [r["action"] for r in rows] == ["review", "approve", "reject"]
    assert rows[0]["rule_action"] == "approve"
    assert "negative payout -29,500.00 USD" in rows[0]["review_reason"]


AMOUNT = st.decimals(min_value=Decimal(-50000), max_value=Decimal(50000), places=2)
CURRENCY = st.sampled_from(["USD", "EUR", "KWD"])


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    approvals=st.lists(st.tuples(AMOUNT, CURRENCY), min_size=1, max_size=12),
    ceilings=st.dictionaries(
        CURRENCY, st.decimals(min_value=Decimal(0), max_value=Decimal(60000), places=2), min_size=1
    ),
)
def test_each_ceiling_holds_against_what_the_approvals_pay_out(
    ruleset: RuleSet, approvals: list[tuple[Decimal, str]], ceilings: dict[str, Decimal]
) -> None:
    """Property over payout signs x currencies x ceilings: the run stops exactly when some
    currency's non-negative approved payouts exceed its ceiling, or a currency without a
    ceiling has any; negative payouts never count, and no rule approves one."""
    records = _records(*[("ok", str(amount), currency) for amount, currency in approvals])
    paid: dict[str, Decimal] = {}
    for amount, currency in approvals:
        if amount >= 0:
            paid[currency] = paid.get(currency, Decimal(0)) + amount
    over = {c for c, total in paid.items() if c not in ceilings or total > ceilings[c]}
    if over:
        with pytest.raises(GuardrailError) as info:
            _check(ruleset, records, max_approved_payout=ceilings)
        assert info.value.approved_payout == dict(sorted(paid.items()))
    else:
        _check(ruleset, records, max_approved_payout=ceilings)
    for record in records:
        record["relationship"] = {"on_hold_snapshots": [{"on_hold_conversion_id": "x"}]}
    rows = audit_rows(records, ruleset.evaluate(records), ruleset)
    send_negative_payouts_to_review(rows)
    assert all(r["payout"] >= 0 for r in rows if r["action"] == "approve")
    assert sum(r["action"] == "review" for r in rows) == sum(a < 0 for a, _ in approvals)
