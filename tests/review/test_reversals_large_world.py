"""The on-hold review on the sandbox's large world, whose traffic holds reversals and
adjustments: conversions with negative payouts, some of them on hold, in six currencies.

The shipped rules approve a clean conversion held for 72 hours, a reversal as well as a sale;
the review sends each such approval of a negative payout to a person, and each currency's
``max_approved_payout`` is held against what the approvals pay out, never against that amount
netted with the reversals. Real HTTP to the session sandbox, reset to a small day of the large
world; the sandbox's truth says which on-hold ids are reversals and adjustments.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.review.guardrails import Guardrails
from affiliate_network.review.job import ReviewOptions, ReviewResult, ReviewRun, run_review
from affiliate_network.review.money import amount_of, currency_of, money_text
from affiliate_network.review.window import review_window
from affiliate_network.rules.engine import RuleSet
from affiliate_network.settings.paths import include_dir

#: The large world's shape and its reversal share, at a day small enough for a quick review.
WORLD = {"world": "large", "days": 3, "conversions_per_day": 2500}


@pytest.fixture
def large(sandbox: Any, make_connection: Any) -> tuple[Any, str, tuple[str, str]]:
    """The session sandbox as the large world; a connection to it; its first and last day."""
    sandbox.reset(**WORLD)
    conn = make_connection("afn_reversals", host=sandbox.base_url, key=sandbox.keys["network"])
    catalog = sandbox.catalog()
    return sandbox, conn, (catalog["first_date"], catalog["last_date"])


def _review(conn: str, last: str, base: Path, run_id: str, **guardrails: Any) -> ReviewResult:
    """A dry run of the shipped rules over the world's three days, as of four days after the
    last (every held conversion is 72 hours old)."""
    ruleset = RuleSet.from_file(include_dir() / "onhold_rules.yaml")
    as_of = dt.date.fromisoformat(last) + dt.timedelta(days=4)
    window = review_window(
        timezone_id=67,
        lookback_days=3,
        to_date=last,
        as_of=f"{as_of}T00:00:00+00:00",
        horizon_hours=ruleset.horizon_hours,
    )
    hook = AffiliateNetworkHook(conn)
    try:
        return run_review(
            hook,
            ruleset,
            window,
            options=ReviewOptions(guardrails=Guardrails(**guardrails)),
            run=ReviewRun(base=str(base), conn_id=conn, dag_id="script", run_id=run_id),
            dry_run=True,
        )
    finally:
        hook.close()


def _payout(row: dict[str, Any]) -> Decimal:
    amount = amount_of(row["payout"], what="payout")
    assert amount is not None, row
    return amount


def test_held_reversals_go_to_a_person_and_never_net_against_the_payout_ceiling(
    large: tuple[Any, str, tuple[str, str]], tmp_path: Path
) -> None:
    sandbox, conn, (first, last) = large
    held = sandbox.planted(first, last)["reversal_on_hold_conversion_ids"]
    negative_ids = {i for ids in held.values() for i in ids}
    result = _review(conn, last, tmp_path, "first")
    rows = {r["on_hold_conversion_id"]: r for r in result.rows}

    # Every held reversal and adjustment is in the run, with its negative payout.
    assert negative_ids <= set(rows)
    assert {i for i, r in rows.items() if _payout(r) < 0} == negative_ids
    # None is approved; each one the rules approve goes to a person, saying why.
    by_rule = [rows[i] for i in negative_ids if rows[i].get("rule_action") == "approve"]
    assert not [i for i in negative_ids if rows[i]["action"] == "approve"]
    assert {r["action"] for r in by_rule} == {"review"}
    assert all("negative payout" in r["review_reason"] for r in by_rule)
    per_currency = Counter(currency_of(r) for r in by_rule)
    assert len(per_currency) >= 3, per_currency  # several currencies, each kept apart

    # The ceilings: per currency, what the rules' approvals pay out (positive payouts) and the
    # same netted with the approved reversals. The netted ceiling must trip the guardrail in
    # every currency with both; the paid-out one must not trip it anywhere, and a currency
    # whose only approvals are reversals (JPY and IDR sales exceed the rules' 1000) needs none.
    approvals = [r for r in result.rows if "approve" in (r["action"], r.get("rule_action"))]
    paid: dict[str, Decimal] = {}
    netted: dict[str, Decimal] = {}
    for row in approvals:
        currency, amount = currency_of(row), _payout(row)
        netted[currency] = netted.get(currency, Decimal(0)) + amount
        if amount >= 0:
            paid[currency] = paid.get(currency, Decimal(0)) + amount
    mixed = [currency for currency in per_currency if currency in paid]
    assert len(mixed) >= 2, (per_currency, paid)
    tripped = _review(
        conn, last, tmp_path, "netted", max_approved_payout={c: netted[c] for c in paid}
    )
    assert tripped.guardrail is not None
    for currency in mixed:
        assert netted[currency] < paid[currency]
        assert (
            f"approved payout {money_text(paid[currency], currency)} > max_approved_payout "
            f"{money_text(netted[currency], currency)}"
        ) in tripped.guardrail
    passed = _review(conn, last, tmp_path, "paid", max_approved_payout=paid)
    assert passed.guardrail is None, passed.guardrail
