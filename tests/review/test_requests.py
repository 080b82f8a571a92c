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
