"""The small operators that replaced the DAG files' ``@task`` functions (issue 14, parse time).

Each does what its ``@task`` did: same return value (XCom), same fail-fast on a bad file, and a
template field where the function took a templated argument. No network: files only.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from pathlib import Path

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.steps import (
    AffiliateReportTargetsOperator,
    OfferStateValidateOperator,
    ReviewRequestsOperator,
)
from affiliate_network.review.human_requests import build_review_requests
from affiliate_network.settings.models import load_affiliate_report_targets
from affiliate_network.settings.paths import INCLUDE_DIR_ENV
from demo import SANDBOX_OFFER_STATE, demo_include

INCLUDE = Path(__file__).resolve().parents[2] / "include"


def _audit_row(conversion_id: str, rule_id: str, action: str, payout: float) -> dict:
    return {
        "conversion_id": conversion_id,
        "on_hold_conversion_id": f"oh-{conversion_id}",
        "rule_id": rule_id,
        "rule_description": f"{rule_id} description",
        "action": action,
        "payout": payout,
        "sale_amount": payout * 10,
        "currency_id": "USD",
        "affiliate_id": 2001,
        "affiliate_name": "Aff",
        "offer_id": 11,
        "offer_name": "Offer",
        "matched": {"sale_amount": payout * 10},
    }


def test_review_requests_operator_returns_the_requests_of_the_summary(tmp_path) -> None:
    audit = tmp_path / "decisions-attempt-1.jsonl"
    rows = [
        _audit_row("c1", "outliers", "review", 12.5),
        _audit_row("c2", "outliers", "review", 40.0),
        _audit_row("c3", "ip-mismatch", "review", 3.0),
        _audit_row("c4", "blocked", "reject", 1.0),
    ]
    audit.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"dry_run": False, "review_pending": 3, "audit_path": str(audit)}
    summary["review_settings"] = {"review_minutes": 90}  # the rules file's review.review_minutes

    operator = ReviewRequestsOperator(task_id="review_requests", summary=summary)
    assert "summary" in operator.template_fields  # the review's XCom, resolved at run time
    requests = operator.execute({})

    wait = dt.timedelta(minutes=90)
    assert requests == [{**r, "response_timeout": wait} for r in build_review_requests(summary)]
    assert [r["subject"] for r in requests] == [
        "outliers: 2 conversions to review",
        "ip-mismatch: 1 conversion to review",
    ]
    dry = ReviewRequestsOperator(task_id="r", summary={**summary, "dry_run": True})
    assert dry.execute({}) == []


def test_offer_state_validate_operator_counts_and_fails_fast(tmp_path, monkeypatch) -> None:
    # The demo's include folder: its offer_state.yaml is the sandbox's example, not the template.
    monkeypatch.setenv(INCLUDE_DIR_ENV, str(demo_include(INCLUDE, tmp_path / "include")))
    operator = OfferStateValidateOperator(task_id="validate", state_file="offer_state.yaml")
    assert operator.template_fields == ("state_file",)
    counts = operator.execute({})  # relative: read from the include folder
    assert counts["offer_groups"] >= 1
    assert set(counts) == {
        "offer_groups",
        "offers",
        "scrub_rates",
        "channels",
        "categories",
        "offer_urls",
    }

    doc = copy.deepcopy(yaml.safe_load(SANDBOX_OFFER_STATE.read_text()))
    doc["offer_groups"][0]["daily_conversion_cap"] = "lots"
    bad = tmp_path / "offer_state.yaml"
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    broken = OfferStateValidateOperator(task_id="validate", state_file=str(bad))
    # An invalid file fails at once (no retries), naming the field.
    with pytest.raises(AirflowFailException) as caught:
        broken.execute({})
    assert isinstance(caught.value, ConfigValidationError)
    assert "daily_conversion_cap" in str(caught.value)


def test_the_shipped_template_fails_the_validate_task_saying_what_to_fill_in() -> None:
    # The suite's include folder is the project's: offer_state.yaml there is the template.
    operator = OfferStateValidateOperator(task_id="validate", state_file="offer_state.yaml")
    with pytest.raises(AirflowFailException) as caught:  # no retries: a person must edit it
        operator.execute({})
    message = str(caught.value)
    assert message.startswith("offer_state.yaml: ")  # the file, as the task names it
    assert re.search(
        r"offer_state\.yaml:\d+: offer_groups\[0\] \(key 'my-offer-group'\): field "
        r"'network_offer_group_id': the template's placeholder, never sent: write the id of "
        r"this offer group on your network",
        message,
    ), message


def test_affiliate_report_targets_operator_returns_the_mapped_kwargs(tmp_path, monkeypatch) -> None:
    operator = AffiliateReportTargetsOperator(task_id="affiliate_report_targets")
    assert operator.execute({}) == load_affiliate_report_targets()

    doc = yaml.safe_load((INCLUDE / "reports.yaml").read_text())
    doc["affiliate_reports"]["affiliates"][0]["columns"] = ["no_such_column"]
    (tmp_path / "reports.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("AFFILIATE_NETWORK_INCLUDE_DIR", str(tmp_path))
    with pytest.raises(AirflowFailException) as caught:
        operator.execute({})
    assert isinstance(caught.value, ConfigValidationError)
    assert "reports.yaml" in str(caught.value)
