"""The run's identity is one object (issue 27): the review writes it once, into its summary, and
the human step reads it back whole, never rebuilding it from the audit file's folder or looking
for the timezone in several places. Old summaries (a run that waited for a person across the
upgrade) are still read.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.onhold_review import (
    OnHoldReviewApplyOperator,
    OnHoldReviewOperator,
)
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.human_requests import OPTION_KEEP, build_review_requests
from affiliate_network.review.identity import ReviewRun, RunIdentity
from affiliate_network.review.window import review_window
from tests.support.review_settings import set_review


def _identity(base: str) -> RunIdentity:
    # as_of in the second 01:30 of 2026-11-01 in New York (EST): the offset must survive.
    window = review_window(
        timezone_id=80,
        lookback_days=2,
        to_date=None,
        as_of="2026-11-01T06:30:00Z",
        horizon_hours=24,
    )
    run = ReviewRun(base, "network-a", "affiliate_onhold_review", "scheduled__2026-11-01", 2)
    return RunIdentity.of(run, window, "/opt/airflow/include/onhold_rules.yaml")


def test_the_identity_round_trips_whole(tmp_path: Path) -> None:
    identity = _identity(str(tmp_path))
    again = RunIdentity.from_json(identity.to_json())
    assert again == identity
    assert RunIdentity.from_dict(identity.to_dict()) == identity
    assert again.as_of.timestamp() == identity.as_of.timestamp()
    assert again.as_of.utcoffset() == dt.timedelta(hours=-5)
    assert (again.decide_from, again.to_date) == (dt.date(2026, 10, 31), dt.date(2026, 11, 1))
    assert again.timezone_id == 80
    assert again.rules_file == "/opt/airflow/include/onhold_rules.yaml"
    assert str(again.audit_path) == str(identity.audit_path)
    assert str(again.audit_path).endswith(
        "onhold_review/affiliate_onhold_review/scheduled__2026-11-01/decisions-attempt-2.jsonl"
    )
    assert again.owner == "affiliate_onhold_review/scheduled__2026-11-01"
    with pytest.raises(ConfigValidationError, match="identity"):
        RunIdentity.from_json(identity.to_json().replace('"version": 1', '"version": 2'))


def test_the_human_step_needs_nothing_but_the_identity(sandbox, network_conn, tmp_path) -> None:
    """The review's summary carries its identity; the human step given only that finds the
    audit rows, writes its own audit beside them and remembers the answers in the network's
    state folder."""
    sandbox.reset(days=5)
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    noon = dt.datetime.combine(last - dt.timedelta(days=2), dt.time(12), dt.UTC)
    set_review(lookback_days=3, min_age_hours=0, max_reject_share=None, max_reject_count=None)
    summary = OnHoldReviewOperator(
        task_id="review",
        rules_file="onhold_rules.yaml",
        as_of=noon.isoformat(),
        timezone_id=67,
        dry_run=False,
        base_path=str(tmp_path / "data"),
    ).execute({"run_id": "noon"})
    identity = RunIdentity.from_dict(summary["run"])
    assert str(identity.audit_path) == summary["audit_path"]
    assert str(identity.rules_file).endswith("onhold_rules.yaml")
    assert identity.as_of.timestamp() == noon.timestamp()
    requests = build_review_requests(summary)
    assert requests
    keep = {"chosen_options": [OPTION_KEEP], "responded_by_user": {"id": "7", "name": "ana"}}
    result = OnHoldReviewApplyOperator(
        task_id="apply_human_decisions",
        summary={"run": summary["run"]},
        requests=requests,
        responses=[keep] * len(requests),
    ).execute({"run_id": "noon"})
    audit = ObjectStoragePath(result["audit_path"])
    assert audit.parent == identity.audit_path.parent
    rows = read_jsonl(audit)
    assert rows
    assert {r["human_choice"] for r in rows} == {OPTION_KEEP}
    assert {r["run_id"] for r in rows} == {"noon"}
    assert (identity.state_dir / "human_decisions.jsonl").exists()
