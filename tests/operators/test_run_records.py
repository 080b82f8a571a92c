"""The review operator records what each run was beside its audit (read by the network page)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from affiliate_network.exceptions import GuardrailError
from affiliate_network.ui.network_data import read_page
from tests.support.onhold_support import context, review_op


def _records(tmp_path: Path, run_id: str) -> list[dict]:
    folder = tmp_path / "data" / "onhold_review" / "adhoc_airflow" / run_id
    return [json.loads(p.read_text()) for p in sorted(folder.glob("outcome-*.json"))]


def test_a_guardrail_stop_a_dry_run_and_a_failure_are_recorded_as_such(
    sandbox, network_conn, rules_file, window, tmp_path, monkeypatch
) -> None:
    with pytest.raises(GuardrailError):
        review_op(rules_file, window, tmp_path, max_reject_count=1).execute(context("stopped"))
    review_op(rules_file, window, tmp_path, dry_run=True, max_reject_count=1).execute(
        context("planned")
    )
    import affiliate_network.review.job as job

    def fail(*args: object, **kwargs: object) -> None:
        raise ValueError("the network answered nonsense\nsecond line")

    monkeypatch.setattr(job, "run_review", fail)
    with pytest.raises(ValueError, match="nonsense"):
        review_op(rules_file, window, tmp_path, dry_run=True).execute(context("broken"))
    (stopped,) = _records(tmp_path, "stopped")
    assert stopped["outcome"] == "stopped"
    assert "max_reject_count 1" in stopped["detail"]
    (planned,) = _records(tmp_path, "planned")
    assert planned["outcome"] == "dry_run"
    assert planned["detail"].startswith("a real run stops: ")
    assert planned["summary"]["dry_run"] is True
    (broken,) = _records(tmp_path, "broken")
    assert broken["outcome"] == "failed"
    assert broken["detail"] == "ValueError: the network answered nonsense"
    runs = {
        r["run_id"]: r["outcome"]
        for r in read_page(tmp_path / "data", today=dt.datetime.now(dt.UTC).date()).review["runs"]
    }
    assert runs == {"stopped": "stopped", "planned": "dry_run", "broken": "failed"}


def test_a_sync_dry_run_records_its_plan_beside_sync_and_the_page_shows_it(
    sandbox, network_conn, tmp_path
) -> None:
    from affiliate_network.operators.offer_state_sync import OfferStateSyncOperator
    from demo import SANDBOX_OFFER_STATE

    ledger = tmp_path / "data" / "sync" / "ledger.json"
    summary = OfferStateSyncOperator(
        task_id="plan",
        state_file=str(SANDBOX_OFFER_STATE),
        sections=["offer_groups", "offers", "scrub_rates"],
        ledger_path=str(ledger),
        affiliate_network_conn_id=network_conn,
        dry_run=True,
    ).execute(context={"run_id": "manual__plan"})
    assert not (tmp_path / "data" / "sync").exists()  # a dry run leaves sync/ as it was
    sync = read_page(tmp_path / "data", today=dt.datetime.now(dt.UTC).date()).sync
    (run,) = sync["runs"]
    assert (run["run_id"], run["outcome"], run["conn_id"]) == (
        "manual__plan",
        "dry_run",
        network_conn,
    )
    assert run["plan"]["counts"] == summary["counts"]
