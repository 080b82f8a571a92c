"""ReconciliationOperator: every landed day compared, one verdict per partition in XCom and in
the asset event; the daily run's reconciliation and announcements across runs."""

from __future__ import annotations

import datetime as dt
import json
import traceback
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowSkipException

from affiliate_network.compat import AirflowFailException
from affiliate_network.exceptions import ConfigValidationError, ReconciliationError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.assets import dataset_asset
from affiliate_network.operators.publish import PublishChangesOperator
from affiliate_network.operators.reconciliation import ReconciliationOperator
from affiliate_network.partitions.manifest import read_manifest
from tests.support.daily_run import DailyRun, previous_day
from tests.support.report_ops import FAST_RETRIES, conversions_op, interval_context
from tests.support.sandbox_reads import network_requests


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


def _verdict(summary: dict) -> dict:
    """The one day's verdict of a single-day reconciliation summary."""
    [verdict] = summary["partitions"]
    return verdict


def test_a_clean_day_reconciles_and_its_event_says_so(sandbox, network_conn, tmp_path, day):
    landed = conversions_op(tmp_path, outlets=[]).execute(interval_context(day))
    ctx = interval_context(day)
    summary = reconcile_op(tmp_path).execute(ctx)
    verdict = _verdict(summary)
    assert (verdict["date"], verdict["verdict"], verdict["reconciled"]) == (day, "reconciled", True)
    assert verdict["differences"] == 0
    assert summary["days"] == {"reconciled": [day], "differs": [], "not_compared": []}
    assert len(json.dumps(summary)) < 2000  # small enough for XCom
    event = ctx["outlet_events"][dataset_asset("conversions")]
    assert "reconciled" not in event.extra  # per partition only, never one flag for all
    assert event.partition_keys == {f"date={day}"}
    [part] = event.extra["partitions"]
    assert part["checksum"] == landed["partitions"][0]["checksum"]
    assert part["reconciled"] is True
    assert Path(part["reconciliation"]["comparison"]).name == "_reconciliation.json"


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
    assert _verdict(reconcile_op(tmp_path).execute(interval_context(day)))["reconciled"] is True
    held = _decide_first_pending(network_conn, day, "approved")
    cell = (
        f"affiliate {held['relationship']['affiliate']['network_affiliate_id']} "
        f"offer {held['relationship']['offer']['network_offer_id']}"
    )
    with pytest.raises(ReconciliationError, match=cell) as info:
        reconcile_op(tmp_path, settle=False).execute(interval_context(day))
    assert isinstance(info.value, AirflowFailException)  # fails at once, no retries
    # The task log's last line: look at these cells, then clear the day's pull task.
    last = "".join(traceback.format_exception(info.value)).rstrip().splitlines()[-1]
    assert f"Next step: Look at the differing cells ({cell}" in last, last
    assert "_reconciliation.json)" in last
    assert last.endswith("Runbook: docs/runbook.md#a-day-does-not-reconcile")
    ctx = interval_context(day)
    summary = reconcile_op(tmp_path, on_mismatch="warn", settle=False).execute(ctx)
    assert _verdict(summary)["reconciled"] is False
    [part] = ctx["outlet_events"][dataset_asset("conversions")].extra["partitions"]
    assert (part["reconciled"], part["reconciliation"]["verdict"]) == (False, "differs")


def test_a_status_changed_by_another_run_settles_with_one_re_pull(
    sandbox, network_conn, tmp_path, day
):
    """The review approves a conversion between the landing and the comparison: the day is
    re-pulled once, compared again and reconciles; the new content is a change to announce."""
    run = DailyRun(tmp_path, day, "scheduled__settle", trailing_days=1)
    run.pull()
    before = _checksum(tmp_path, day)
    _decide_first_pending(network_conn, day, "approved")
    summary = run.reconcile()
    assert summary["days"]["reconciled"] == [previous_day(day), day]
    assert _checksum(tmp_path, day) != before  # re-landed with the approval
    doc = _comparison(tmp_path, day)
    assert doc is not None
    assert doc["reconciled"] is True
    assert doc["manifest_checksum"] == _checksum(tmp_path, day)
    extra = run.publish()
    assert day in [p["date"] for p in extra["partitions"]]


def test_explicit_date_and_bad_settings(sandbox, network_conn, tmp_path, day):
    conversions_op(tmp_path, outlets=[]).execute(interval_context(day))
    summary = reconcile_op(tmp_path, date=day).execute({})
    assert _verdict(summary)["date"] == day
    with pytest.raises(ConfigValidationError):
        reconcile_op(tmp_path, on_mismatch="ignore")
    with pytest.raises(ConfigValidationError):
        reconcile_op(tmp_path, date=day, money_tolerance="-0.01").execute({})


# -- the daily run: every landed day reconciled, changes announced once -----------------------


def _comparison(base: Path, day: str) -> dict | None:
    path = base / "conversions" / f"date={day}" / "_reconciliation.json"
    return json.loads(path.read_text()) if path.exists() else None


def _checksum(base: Path, day: str) -> str:
    manifest = read_manifest(base / "conversions" / f"date={day}")
    assert manifest is not None
    return manifest.content_checksum


def _entity_table_calls(sandbox) -> int:
    return sum("/reporting/entity/table" in e["path"] for e in network_requests(sandbox))


def test_a_first_run_reconciles_every_landed_day(sandbox, network_conn, tmp_path, day):
    run = DailyRun(tmp_path, day, "scheduled__first")
    run.pull()
    landed = [previous_day(day, n) for n in range(7, -1, -1)]
    summary = run.reconcile()
    assert [v["date"] for v in summary["partitions"]] == landed
    assert summary["days"]["reconciled"] == landed
    for d in landed:
        doc = _comparison(tmp_path, d)
        assert doc is not None, f"{d} landed without a comparison"
        assert doc["reconciled"] is True
        assert doc["manifest_checksum"] == _checksum(tmp_path, d)
    extra = run.publish()
    # Every landed day is announced, each with its own verdict; no flag for the whole event.
    assert "reconciled" not in extra
    assert [p["date"] for p in extra["partitions"]] == landed
    for part in extra["partitions"]:
        assert part["first_landing"] is True
        assert part["reconciled"] is True
        assert part["reconciliation"]["verdict"] == "reconciled"
        assert part["reconciliation"]["checksum"] == part["checksum"]
    assert run.event_extra() == extra


def test_a_rewritten_trailing_day_is_compared_again_and_unchanged_days_keep_theirs(
    sandbox, network_conn, tmp_path, day
):
    first = DailyRun(tmp_path, previous_day(day), "scheduled__1")
    first.all()
    trailing = previous_day(day, 3)
    before = _comparison(tmp_path, trailing)
    assert before is not None
    kept_day = previous_day(day, 4)
    kept = _comparison(tmp_path, kept_day)
    # A late decision on the network: the next run's trailing re-pull rewrites that day.
    _decide_first_pending(network_conn, trailing, "approved")
    asked_before = _entity_table_calls(sandbox)
    second = DailyRun(tmp_path, day, "scheduled__2")
    pulled = second.pull()
    assert pulled["repull_trailing_window"]["changed"] == [trailing]
    summary = second.reconcile()
    verdicts = {v["date"]: v for v in summary["partitions"]}
    assert sorted(verdicts) == [previous_day(day, n) for n in range(7, -1, -1)]
    assert set(summary["days"]["reconciled"]) == set(verdicts)
    # The rewritten day: compared again, its verdict names its new content.
    after = _comparison(tmp_path, trailing)
    assert after is not None
    assert (
        after["manifest_checksum"] == _checksum(tmp_path, trailing) != before["manifest_checksum"]
    )
    assert after["reconciled"] is True
    assert verdicts[trailing]["kept"] is False
    # An unchanged day keeps the verdict of its unchanged content (not compared again); the
    # run's new day is compared: two days' reports asked (each its requests), not eight days'.
    assert verdicts[kept_day]["kept"] is True
    assert _comparison(tmp_path, kept_day) == kept
    new_day = _comparison(tmp_path, day)
    assert new_day is not None
    asked = after["request"]["requests"] + new_day["request"]["requests"]
    assert _entity_table_calls(sandbox) - asked_before == asked
    assert asked < 8 * after["request"]["requests"]
    extra = second.publish()
    assert [p["date"] for p in extra["partitions"]] == [trailing, day]
    by_day = {p["date"]: p for p in extra["partitions"]}
    assert by_day[trailing]["transitions"] == {"pending->approved": 1}
    assert by_day[trailing]["reconciled"] is True
    assert by_day[day]["first_landing"] is True


def test_a_failed_runs_changes_are_announced_by_the_next_run_exactly_once(
    sandbox, network_conn, tmp_path, day
):
    # Run A lands its days and records their changes, then a late decision makes one of them
    # differ from the network's report: the reconciliation fails, the publish step never runs.
    failed = DailyRun(tmp_path, day, "scheduled__a", trailing_days=2, settle=False)
    failed.pull()
    late = previous_day(day)
    _decide_first_pending(network_conn, late, "approved")
    with pytest.raises(ReconciliationError, match=late):
        failed.reconcile()
    assert _comparison(tmp_path, late)["reconciled"] is False  # type: ignore[index]

    # Run B (a manual run over the same days) re-pulls: one day changed again, the others are
    # as run A landed them. It announces all of them: run A's changes were never announced.
    landed = [previous_day(day, n) for n in (2, 1, 0)]
    retry = DailyRun(tmp_path, day, "manual__b", trailing_days=2)
    extra = retry.all()
    assert [p["date"] for p in extra["partitions"]] == landed
    by_day = {p["date"]: p for p in extra["partitions"]}
    for d in landed:
        assert by_day[d]["first_landing"] is True, d  # downstream never heard of any of them
        assert by_day[d]["reconciled"] is True, d
    # The day changed twice since: both records, counts since the (never announced) start.
    assert len(by_day[late]["changes_files"]) == 2
    assert by_day[late]["transitions"] == {"pending->approved": 1}
    assert by_day[late]["reconciliation"]["checksum"] == _checksum(tmp_path, late)

    # Announced once: the next run finds nothing left to announce.
    with pytest.raises(AirflowSkipException, match="left to announce"):
        DailyRun(tmp_path, day, "scheduled__c", trailing_days=2).all()
    # A rerun of run B (cleared) ends as run B ended: the same announcement (its verdicts now
    # kept from run B's comparisons, the same content reconciled).
    rerun = DailyRun(tmp_path, day, "manual__b", trailing_days=2).all()
    assert _announced(rerun) == _announced(extra)


def _announced(extra: dict) -> list[tuple]:
    """What an announcement says of each partition, less when its verdict was made."""
    return [
        (p["date"], p["checksum"], p["changes_files"], p["transitions"], p["reconciled"])
        for p in extra["partitions"]
    ]


def test_overlapping_runs_announce_a_change_once(sandbox, network_conn, tmp_path, day):
    one = DailyRun(tmp_path, day, "scheduled__one", trailing_days=1)
    two = DailyRun(tmp_path, day, "manual__two", trailing_days=1)
    one.pull()
    two.pull()  # both runs landed (the second found the days as the first left them)
    one.reconcile()
    two.reconcile()
    announced = one.publish()
    assert [p["date"] for p in announced["partitions"]] == [previous_day(day), day]
    with pytest.raises(AirflowSkipException):
        two.publish()


def test_a_pending_day_without_a_comparison_says_why(sandbox, network_conn, tmp_path, day):
    # A pull outside the daily DAG (no reconciliation after it), then a daily run over another
    # day: the earlier day is announced as not compared, with the reason.
    other = previous_day(day, 5)
    conversions_op(tmp_path, outlets=[]).execute({**interval_context(other), "run_id": "manual"})
    run = DailyRun(tmp_path, day, "scheduled__x", trailing_days=0)
    run.pull()
    summary = run.reconcile()
    # The reconciliation step compares the pending day too: it has no verdict yet.
    assert summary["days"]["reconciled"] == [other, day]
    extra = run.publish()
    assert [p["reconciled"] for p in extra["partitions"]] == [True, True]
    # Without a reconciliation step, a day nobody compared is announced as such.
    fresh = tmp_path / "fresh"
    conversions_op(fresh, outlets=[]).execute({**interval_context(day), "run_id": "manual"})
    publish = PublishChangesOperator(task_id="publish", base_path=str(fresh))
    extra = publish.publish({**interval_context(day), "run_id": "manual"})
    [part] = extra["partitions"]
    assert part["reconciled"] is None
    assert part["reconciliation"]["verdict"] == "not_compared"
    assert "no comparison" in part["reconciliation"]["reason"]


def test_a_pending_day_outside_the_window_that_differs_warns_and_is_announced_as_such(
    sandbox, network_conn, tmp_path, day
):
    # A day an earlier run landed and never announced, now outdated on the network: nothing
    # re-pulls it, so its difference must not fail this run (nor every later one).
    other = previous_day(day, 5)
    conversions_op(tmp_path, outlets=[]).execute({**interval_context(other), "run_id": "old"})
    _decide_first_pending(network_conn, other, "approved")
    run = DailyRun(tmp_path, day, "scheduled__y", trailing_days=0)
    run.pull()
    summary = run.reconcile()
    assert summary["days"] == {"reconciled": [day], "differs": [other], "not_compared": []}
    extra = run.publish()
    by_day = {p["date"]: p for p in extra["partitions"]}
    assert by_day[other]["reconciled"] is False
    assert "differ" in by_day[other]["reconciliation"]["reason"]
    assert by_day[day]["reconciled"] is True
