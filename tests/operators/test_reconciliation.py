"""ReconciliationOperator: one call into the job, a small XCom summary, the asset event."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from airflow.exceptions import AirflowFailException

from affiliate_network.exceptions import ConfigValidationError, ReconciliationError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.assets import dataset_asset
from affiliate_network.operators.reconciliation import ReconciliationOperator
from tests.operators.test_conversion_report import FAST_RETRIES, conversions_op, interval_context


@pytest.fixture
def day(sandbox) -> str:
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    return (last - dt.timedelta(days=1)).isoformat()


def reconcile_op(base: Path, **kwargs) -> ReconciliationOperator:
    return ReconciliationOperator(
        task_id="reconcile",
        base_path=str(base),
        outlets=[dataset_asset("conversions")],
        hook_kwargs=dict(FAST_RETRIES),
        **kwargs,
    )


def test_a_clean_day_reconciles_and_its_event_says_so(sandbox, network_conn, tmp_path, day):
    landed = conversions_op(tmp_path, outlets=[]).execute(interval_context(day))
    ctx = interval_context(day)
    summary = reconcile_op(tmp_path).execute(ctx)
    assert summary["reconciled"] is True
    assert summary["date"] == day
    assert summary["differences"] == 0
    assert len(json.dumps(summary)) < 2000  # small enough for XCom
    event = ctx["outlet_events"][dataset_asset("conversions")]
    assert event.extra["reconciled"] is True
    assert event.partition_keys == {f"date={day}"}
    [part] = event.extra["partitions"]
    assert part["checksum"] == landed["partitions"][0]["checksum"]
    assert part["rows"] == landed["rows"]
    assert Path(event.extra["comparison"]).name == "_reconciliation.json"


def _decide_first_pending(network_conn: str, day: str, status: str) -> dict:
    """Approve or reject the day's first pending conversion on the network; return it."""
    hook = AffiliateNetworkHook(network_conn)
    try:
        held = next(
            r
            for r in hook.iter_conversions(from_date=day, to_date=day, timezone_id=67)
            if r["status"] == "pending"
        )
        ohid = held["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]
        assert hook.set_on_hold_status([ohid], status) is True
    finally:
        hook.close()
    return held


def test_a_status_change_fails_without_retries_or_warns(sandbox, network_conn, tmp_path, day):
    conversions_op(tmp_path, outlets=[]).execute(interval_context(day))
    _decide_first_pending(network_conn, day, "rejected")
    # Pending -> rejected changes no counted metric: still reconciles.
    assert reconcile_op(tmp_path).execute(interval_context(day))["reconciled"] is True
    held = _decide_first_pending(network_conn, day, "approved")
    cell = (
        f"affiliate {held['relationship']['affiliate']['network_affiliate_id']} "
        f"offer {held['relationship']['offer']['network_offer_id']}"
    )
    with pytest.raises(ReconciliationError, match=cell) as info:
        reconcile_op(tmp_path).execute(interval_context(day))
    assert isinstance(info.value, AirflowFailException)  # fails at once, no retries
    ctx = interval_context(day)
    summary = reconcile_op(tmp_path, on_mismatch="warn").execute(ctx)
    assert summary["reconciled"] is False
    assert ctx["outlet_events"][dataset_asset("conversions")].extra["reconciled"] is False


def test_explicit_date_and_bad_settings(sandbox, network_conn, tmp_path, day):
    conversions_op(tmp_path, outlets=[]).execute(interval_context(day))
    summary = reconcile_op(tmp_path, date=day).execute({})
    assert summary["date"] == day
    with pytest.raises(ConfigValidationError):
        reconcile_op(tmp_path, on_mismatch="ignore")
    with pytest.raises(ConfigValidationError):
        reconcile_op(tmp_path, date=day, money_tolerance="-0.01").execute({})
