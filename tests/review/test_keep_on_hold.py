"""A reviewer's "Keep on hold" is keyed to the conversion's own data, never to traffic
aggregates (issue 25, defect 5): kept at 12:00, still kept at 13:00 although an hour of new
traffic moved the offer's median, asked again once the conversion's own data changes.

Real HTTP to the sandbox, the shipped rules (``outlier-sale-amount`` tests ``sale_amount`` and
``ratio_to_median(sale_amount per offer)``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.onhold_review import (
    OnHoldReviewApplyOperator,
    OnHoldReviewOperator,
)
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.human_decisions import fingerprint
from affiliate_network.review.human_requests import OPTION_KEEP, build_review_requests
from tests.support.review_settings import set_review

RULE = "outlier-sale-amount"
RATIO = "ratio_to_median(sale_amount per relationship.offer.network_offer_id)"


def _review(base: Path, as_of: dt.datetime, run_id: str) -> dict[str, Any]:
    set_review(lookback_days=3, min_age_hours=0, max_reject_share=None, max_reject_count=None)
    op = OnHoldReviewOperator(
        task_id="review",
        rules_file="onhold_rules.yaml",
        as_of=as_of.isoformat(),
        timezone_id=67,
        dry_run=False,
        base_path=str(base),
    )
    return op.execute({"run_id": run_id})


def _rows(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Audit rows of the outlier rule by conversion id."""
    return {
        r["conversion_id"]: r for r in read_jsonl(summary["audit_path"]) if r["rule_id"] == RULE
    }


def test_keep_on_hold_survives_new_traffic_and_ends_with_the_conversions_own_change(
    sandbox, network_conn, tmp_path
) -> None:
    sandbox.reset(days=5)
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    noon = dt.datetime.combine(last - dt.timedelta(days=2), dt.time(12), dt.UTC)
    base = tmp_path / "data"

    first = _review(base, noon, "noon")
    requests = build_review_requests(first)
    keep = {"chosen_options": [OPTION_KEEP], "responded_by_user": {"id": "7", "name": "ana"}}
    OnHoldReviewApplyOperator(
        task_id="apply_human_decisions",
        summary=first,
        requests=requests,
        responses=[keep] * len(requests),
    ).execute({"run_id": "noon"})
    kept = _rows(first)
    assert kept
    assert {r["action"] for r in kept.values()} == {"review"}

    later = _review(base, noon + dt.timedelta(hours=1), "one-pm")
    rows = _rows(later)
    moved = [c for c in kept if rows[c]["matched"][RATIO] != kept[c]["matched"][RATIO]]
    assert moved  # an hour of traffic moved the offer's median: this test can fail
    assert {rows[c]["action"] for c in kept} == {"hold"}
    assert all("kept on hold by ana" in rows[c]["hold_reason"] for c in kept)

    # The conversion's own data changes: that one is asked again, the others stay kept.
    changed = sorted(kept)[0]
    hook = AffiliateNetworkHook()
    assert hook.set_sale_amount(changed, sale_amount=float(kept[changed]["sale_amount"]) + 1000)
    again = _rows(_review(base, noon + dt.timedelta(hours=1), "one-pm-again"))
    assert again[changed]["action"] == "review"
    assert {again[c]["action"] for c in kept if c != changed} == {"hold"}


def test_the_answer_is_about_the_conversion_not_the_traffic_or_the_clock() -> None:
    """The fingerprint a "Keep on hold" is stored with: the same after an aggregate or an age
    moved, another one after the conversion's payout, sale amount or tested field changed."""
    row = {
        "rule_id": RULE,
        "matched": {"sale_amount": 6400.0, RATIO: 36.47, "hold_age_hours": 30.0},
        "payout": 12.5,
        "sale_amount": 6400.0,
    }
    moved = {**row, "matched": {"sale_amount": 6400.0, RATIO: 37.29, "hold_age_hours": 31.0}}
    assert fingerprint(moved) == fingerprint(row)
    assert fingerprint({**row, "payout": 13.0}) != fingerprint(row)
    assert fingerprint({**row, "sale_amount": 6500.0}) != fingerprint(row)
    assert fingerprint({**row, "matched": {**row["matched"], "sale_amount": 1.0}}) != fingerprint(
        row
    )
    assert fingerprint({**row, "rule_id": "ip-mismatch"}) != fingerprint(row)


def test_an_answer_stored_with_float_amounts_still_matches_the_exact_amounts() -> None:
    """Amounts are Decimal now; a "Keep on hold" stored when they were JSON numbers still
    covers the same conversion (same fingerprint), and another amount still does not."""
    from decimal import Decimal

    row = {"rule_id": RULE, "matched": {"sale_amount": 6400.0}, "payout": 12.5, "sale_amount": 6400}
    exact = {**row, "payout": Decimal("12.5"), "sale_amount": Decimal("6400")}
    assert fingerprint(exact) == fingerprint(row)
    assert fingerprint({**exact, "payout": Decimal("12.51")}) != fingerprint(row)
    precise = {**exact, "payout": Decimal("0.1000000000000000055511151231257827")}
    assert fingerprint(precise) != fingerprint({**row, "payout": 0.1})
