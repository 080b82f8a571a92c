"""Review request subjects: short, the rule first, counted in words a person reads (issue 19)."""

from __future__ import annotations

import pytest

from affiliate_network.review.human_requests import review_subject, rule_of_subject


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

    from affiliate_network.review.human_requests import build_review_requests

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


def test_money_at_stake_is_per_currency_never_one_sum(tmp_path) -> None:
    import json

    from affiliate_network.review.human_requests import build_review_requests

    audit = tmp_path / "decisions-attempt-1.jsonl"
    base = {"action": "review", "rule_id": "big", "affiliate_id": 1, "offer_id": 2}
    rows = [
        {
            **base,
            "conversion_id": "u1",
            "payout": "10",
            "sale_amount": "99.5",
            "currency_id": "USD",
        },
        {**base, "conversion_id": "k1", "payout": "900.125", "currency_id": "KWD"},
        {**base, "conversion_id": "k2", "payout": "0.001", "currency_id": "KWD"},
        {**base, "conversion_id": "i1", "payout": 100000, "currency_id": "IDR"},
    ]
    audit.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (req,) = build_review_requests({"audit_path": str(audit), "review_pending": 4})
    body = req["body"]
    assert "(payout 100,000.00 IDR + 900.126 KWD + 10.00 USD)" in body
    # Highest first within each currency, the currencies taking turns: IDR, KWD, USD, KWD.
    table = [line.split("`")[1] for line in body.splitlines() if line.startswith("| `")]
    assert table == ["i1", "k1", "u1", "k2"]
    assert "| 900.125 KWD |" in body
    assert "| 0.001 KWD |" in body
    assert "or on-hold ids" in body


def test_audit_amounts_are_decimal_text_in_the_file_and_decimal_when_read(tmp_path) -> None:
    import json
    from decimal import Decimal

    from airflow.sdk import ObjectStoragePath

    from affiliate_network.review.audit import read_jsonl, write_jsonl_atomic

    path = ObjectStoragePath(str(tmp_path / "decisions-attempt-1.jsonl"))
    write_jsonl_atomic(
        path, [{"conversion_id": "c", "payout": Decimal("0.30"), "sale_amount": None}]
    )
    assert json.loads((tmp_path / "decisions-attempt-1.jsonl").read_text())["payout"] == "0.30"
    [row] = read_jsonl(path)
    assert row["payout"] == Decimal("0.30")
    assert type(row["payout"]) is Decimal
    assert row["sale_amount"] is None
    # A file written with JSON numbers reads back by the numbers' text, not their binary value.
    (tmp_path / "old.jsonl").write_text('{"conversion_id": "c", "payout": 0.1}\n')
    assert read_jsonl(str(tmp_path / "old.jsonl"))[0]["payout"] == Decimal("0.1")
