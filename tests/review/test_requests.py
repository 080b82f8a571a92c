"""Review request subjects: short, the rule first, counted in words a person reads (issue 19)."""

from __future__ import annotations

import pytest

from affiliate_network.review.requests import review_subject, rule_of_subject


@pytest.mark.parametrize(
    ("count", "subject"),
    [
        (1, "ip-mismatch: 1 conversion to review"),
        (2, "ip-mismatch: 2 conversions to review"),
        (1200, "ip-mismatch: 1200 conversions to review"),
    ],
)
def test_subject_names_the_rule_first_with_the_right_plural(count: int, subject: str) -> None:
    assert review_subject("ip-mismatch", count) == subject
    assert rule_of_subject(subject) == "ip-mismatch"


@pytest.mark.parametrize("rule_id", ["outlier-sale-amount", "r_1.v2", "rule"])
def test_every_rule_id_reads_back_from_its_subject(rule_id: str) -> None:
    assert rule_of_subject(review_subject(rule_id, 3)) == rule_id


def test_a_request_from_before_the_short_subjects_still_names_its_rule() -> None:
    # A request waiting across an upgrade is answered with the new code.
    assert rule_of_subject("On-hold review: 7 conversions flagged by rule ip-mismatch") == (
        "ip-mismatch"
    )


def test_a_request_shows_names_money_with_currency_rounded_values_and_the_audit_file(
    tmp_path,
) -> None:
    import json

    from affiliate_network.review.requests import build_review_requests

    audit = tmp_path / "decisions-attempt-1.jsonl"
    row = {
        "action": "review",
        "rule_id": "outlier-sale-amount",
        "rule_description": "Sale far above the offer's median",
        "conversion_id": "c1",
        "affiliate_id": 2001,
        "affiliate_name": "Acme Media",
        "offer_id": 11,
        "offer_name": "Summer Sale",
        "payout": 12384.810000000001,
        "sale_amount": 99.5,
        "currency_id": "USD",
        "matched": {"ratio_to_median(sale_amount)": 70.58001095290253},
    }
    audit.write_text(json.dumps(row) + "\n" + json.dumps({**row, "action": "approve"}) + "\n")
    (req,) = build_review_requests({"audit_path": str(audit), "review_pending": 1})
    assert req["subject"] == "outlier-sale-amount: 1 conversion to review"
    body = req["body"]
    assert "Acme Media (2001)" in body
    assert "Summer Sale (11)" in body
    assert "12,384.81 USD" in body
    assert "=70.58" in body
    assert "70.5800" not in body
    assert f"Audit file: `{audit}`" in body
    assert (
        build_review_requests({"audit_path": str(audit), "review_pending": 1, "dry_run": True})
        == []
    )
