"""Pending changes and their announcement marks (reports/announcements.py), on days landed from
the real sandbox with the real landing."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pytest

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.changes import PartitionChanges, list_changes
from affiliate_network.reports.announcements import (
    ANNOUNCED_DIR,
    claim_announcement,
    pending_changes,
    start_tracking,
)
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.storage import partition_path
from tests.support.landed_history import land_days
from tests.support.s3 import S3_BASE

LOG = logging.getLogger("test")


@pytest.fixture
def days(sandbox) -> tuple[dt.date, dt.date]:
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    return last - dt.timedelta(days=2), last - dt.timedelta(days=1)


def _reland(conn_id: str, base: Path | str, day: dt.date, run_id: str) -> dict:
    hook = AffiliateNetworkHook(conn_id)
    try:
        return land_conversion_day(
            hook, str(base), ConversionPull(day, 67), only_if_changed=True,
            run_id=run_id, consistency_wait_s=0.01, log=LOG,
        )  # fmt: skip
    finally:
        hook.close()


def _approve_one_pending(conn_id: str, day: dt.date) -> None:
    hook = AffiliateNetworkHook(conn_id)
    try:
        held = next(
            r
            for r in hook.iter_conversions(from_date=day, to_date=day, timezone_id=67)
            if r["status"] == "pending"
        )
        ohid = held["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]
        assert hook.set_on_hold_status([ohid], "approved") is True
    finally:
        hook.close()


def test_history_before_tracking_is_never_pending(network_conn, tmp_path, days) -> None:
    first, last = days
    for day in (first, last):
        _reland(network_conn, tmp_path, day, "old-release")  # change records, no tracking
    assert pending_changes(tmp_path, "conversions") == []
    start_tracking(tmp_path, "conversions")
    assert pending_changes(tmp_path, "conversions") == []  # an upgrade announces no history
    _approve_one_pending(network_conn, last)
    _reland(network_conn, tmp_path, last, "new-release")
    [pending] = pending_changes(tmp_path, "conversions")
    assert pending.keys == {"date": last.isoformat()}
    [record] = pending.records
    assert record.transitions == {"pending->approved": 1}
    assert pending.entry()["first_landing"] is False


def test_a_change_is_claimed_by_one_run_and_rerun_by_it_only(network_conn, tmp_path, days):
    first, _ = days
    start_tracking(tmp_path, "conversions")
    _reland(network_conn, tmp_path, first, "run-a")
    [pending] = pending_changes(tmp_path, "conversions", run_id="run-b")
    assert claim_announcement(tmp_path, "conversions", pending, run_id="run-b") is True
    # Another run: nothing pending, and a claim of the same content is refused.
    assert pending_changes(tmp_path, "conversions", run_id="run-c") == []
    assert claim_announcement(tmp_path, "conversions", pending, run_id="run-c") is False
    assert pending_changes(tmp_path, "conversions", run_id="run-c") == []
    # The run that announced it: its rerun sees it pending again, and may claim it again.
    [again] = pending_changes(tmp_path, "conversions", run_id="run-b")
    assert again == pending
    assert claim_announcement(tmp_path, "conversions", again, run_id="run-b") is True
    marks = sorted(p.name for p in (tmp_path / "conversions" / ANNOUNCED_DIR).rglob("_changes-*"))
    assert marks == [pending.records[0].file_name]


def test_changes_since_the_last_announcement_are_chained(network_conn, tmp_path, days) -> None:
    first, _ = days
    start_tracking(tmp_path, "conversions")
    _reland(network_conn, tmp_path, first, "run-a")
    [landing] = pending_changes(tmp_path, "conversions")
    assert claim_announcement(tmp_path, "conversions", landing, run_id="run-a")
    # Two changes no run announced (two failed runs), then an orphan record: one written for
    # a content that no manifest ever named (a crash between record and manifest).
    for run in ("run-b", "run-c"):
        _approve_one_pending(network_conn, first)
        _reland(network_conn, tmp_path, first, run)
    part = partition_path(tmp_path, "conversions", date=first.isoformat())
    newest = list_changes(part)[-1]
    orphan = PartitionChanges(
        partition=newest.partition, from_checksum=newest.to_checksum, to_checksum="sha256:x",
        rows_before=newest.rows, rows=1, transitions={}, new=0, removed=0, updated=1,
        token="0-orphan", written_ns=newest.written_ns + 1,
    )  # fmt: skip
    (Path(str(part)) / orphan.file_name).write_bytes(orphan.to_json())
    [pending] = pending_changes(tmp_path, "conversions", run_id="run-d")
    assert [r.run_id for r in pending.records] == ["run-b", "run-c"]
    entry = pending.entry()
    assert entry["previous_checksum"] == landing.checksum  # what downstream last heard of
    assert entry["first_landing"] is False
    assert entry["transitions"] == {"pending->approved": 2}
    assert entry["changes_files"] == [r.file_name for r in pending.records]
    assert entry["checksum"] == pending.records[-1].to_checksum


def test_days_landed_by_the_history_helper_are_not_pending(network_conn, tmp_path, days):
    # land_days lands without change records (only_if_changed is off): nothing to announce.
    start_tracking(tmp_path, "conversions")
    land_days(network_conn, tmp_path, *days)
    assert pending_changes(tmp_path, "conversions") == []


def test_pending_and_claims_on_object_storage(s3, network_conn, days) -> None:
    """The same on S3 (moto on loopback): one listing finds the records and the marks, and a
    mark is created once."""
    first, _ = days
    start_tracking(S3_BASE, "conversions")
    _reland(network_conn, S3_BASE, first, "run-a")
    [pending] = pending_changes(S3_BASE, "conversions", run_id="run-a")
    assert pending.keys == {"date": first.isoformat()}
    assert pending.entry()["first_landing"] is True
    assert claim_announcement(S3_BASE, "conversions", pending, run_id="run-a") is True
    assert claim_announcement(S3_BASE, "conversions", pending, run_id="run-b") is False
    assert pending_changes(S3_BASE, "conversions", run_id="run-b") == []
    assert [p.name for p in pending_changes(S3_BASE, "conversions", run_id="run-a")] == [
        pending.name
    ]
