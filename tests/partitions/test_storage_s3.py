"""Outputs on S3: one day's conversions landed on ``s3://`` through ``ObjectStoragePath``.

The bucket is served by moto's server mode on 127.0.0.1 (a real HTTP S3 endpoint, no AWS: the
``s3`` fixture of tests/support/s3.py); the data comes from the real sandbox through the hook;
the writer is ``affiliate_network.partitions``, the same code the daily report operator
uses. The guarantees checked are the local ones: a complete partition has a manifest listing
exactly its files, a rerun replaces the partition exactly, and a failed write never leaves a
partition that looks complete.

The connection is given the way the runbook documents it: ``AIRFLOW_CONN_<ID>`` with the
endpoint in the extras, and the output base ``s3://<conn_id>@<bucket>/<prefix>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("s3fs", reason="the 'amazon' extra (s3fs) is not installed")
pytest.importorskip("airflow.providers.amazon", reason="the 'amazon' extra is not installed")
pytest.importorskip("boto3")

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.manifest import (
    MANIFEST_NAME,
    is_complete,
    list_partitions,
    read_manifest,
)
from affiliate_network.partitions.publish import STAGING_DIR
from affiliate_network.partitions.read import read_partition
from affiliate_network.partitions.write import PartitionWriter, write_partition
from affiliate_network.reports.schema import conversion_schema
from affiliate_network.reports.storage import as_storage_path
from tests.support.s3 import BUCKET, PREFIX, S3_BASE


def _base() -> Any:
    """The S3 base as an ObjectStoragePath (partitions/ has no Airflow to read a connection id);
    made in each test: Airflow caches the filesystem of a connection id when first made."""
    return as_storage_path(S3_BASE)


def _keys(client: Any, prefix: str = "") -> list[str]:
    out: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        out.extend(obj["Key"] for obj in page.get("Contents", []))
    return sorted(out)


def _partition_prefix(day: str) -> str:
    return f"{PREFIX}/conversions/date={day}/"


def _pull_day(conn_id: str, day: str) -> Iterator[dict[str, Any]]:
    hook = AffiliateNetworkHook(conn_id)
    return iter(
        hook.iter_conversions(from_date=day, to_date=day, timezone_id=67, currency_id="USD")
    )


def _land_day(conn_id: str, day: str, records: Any = None) -> Any:
    request = {"from_date": day, "to_date": day, "timezone_id": 67, "currency_id": "USD"}
    return write_partition(
        _base(),
        "conversions",
        {"date": day},
        _pull_day(conn_id, day) if records is None else records,
        conversion_schema(),
        request=request,
    )


@pytest.fixture
def day(sandbox: Any) -> str:
    """A full day inside the sandbox's data window (the one before the last)."""
    import pendulum

    return pendulum.parse(sandbox.catalog()["last_date"]).subtract(days=1).to_date_string()


def test_day_report_lands_on_s3_with_manifest(s3: Any, sandbox: Any, network_conn: str, day: str):
    result = _land_day(network_conn, day)

    truth = sandbox.truth(day, day, timezone_id=67)["conversions"]
    assert truth > 0
    partition = _base() / "conversions" / f"date={day}"
    assert result.path.startswith("s3://")
    assert is_complete(partition)
    manifest = read_manifest(partition)
    assert manifest is not None
    assert manifest.row_count == truth
    table = read_partition(partition)
    assert table.num_rows == truth
    assert len(set(table.column("conversion_id").to_pylist())) == truth
    # Exactly the listed data file plus the manifest; nothing left in staging.
    listed = sorted([f"{_partition_prefix(day)}{f.name}" for f in manifest.files])
    assert _keys(s3, _partition_prefix(day)) == sorted(
        [*listed, _partition_prefix(day) + MANIFEST_NAME]
    )
    assert _keys(s3, f"{PREFIX}/conversions/{STAGING_DIR}/") == []
    assert list(list_partitions(_base(), "conversions")) == [f"date={day}"]
    # The network key never lands in the manifest (request parameters only).
    body = s3.get_object(Bucket=BUCKET, Key=_partition_prefix(day) + MANIFEST_NAME)["Body"].read()
    assert sandbox.keys["network"].encode() not in body


def test_rerun_replaces_s3_partition_exactly(s3: Any, sandbox: Any, network_conn: str, day: str):
    first = _land_day(network_conn, day)
    keys_after_first = _keys(s3, _partition_prefix(day))
    second = _land_day(network_conn, day)

    assert second.manifest.content_checksum == first.manifest.content_checksum
    assert second.manifest.row_count == first.manifest.row_count
    assert [f.sha256 for f in second.manifest.files] == [f.sha256 for f in first.manifest.files]
    # Exactly the rerun's files (named by its attempt) and the manifest: the first run's gone.
    assert len(keys_after_first) == len(first.manifest.files) + 1
    assert _keys(s3, _partition_prefix(day)) == sorted(
        [_partition_prefix(day) + f.name for f in second.manifest.files]
        + [_partition_prefix(day) + MANIFEST_NAME]
    )
    assert _keys(s3, f"{PREFIX}/conversions/{STAGING_DIR}/") == []


class _PullCrashedError(RuntimeError):
    """Raised by the record stream to stand for a worker dying in the middle of a pull."""


def _crash_after(records: Iterator[dict[str, Any]], n: int) -> Iterator[dict[str, Any]]:
    for i, record in enumerate(records):
        if i == n:
            raise _PullCrashedError(f"pull died after {n} records")
        yield record


def test_failed_rerun_leaves_previous_s3_partition_complete(
    s3: Any, sandbox: Any, network_conn: str, day: str
):
    published = _land_day(network_conn, day)
    manifest_key = _partition_prefix(day) + MANIFEST_NAME
    manifest_before = s3.get_object(Bucket=BUCKET, Key=manifest_key)["Body"].read()

    with pytest.raises(_PullCrashedError):
        _land_day(network_conn, day, records=_crash_after(_pull_day(network_conn, day), 100))

    partition = _base() / "conversions" / f"date={day}"
    assert is_complete(partition)
    assert s3.get_object(Bucket=BUCKET, Key=manifest_key)["Body"].read() == manifest_before
    assert read_partition(partition).num_rows == published.rows
    assert _keys(s3, f"{PREFIX}/conversions/{STAGING_DIR}/") == []


def test_crashed_first_write_leaves_no_complete_s3_partition(
    s3: Any, sandbox: Any, network_conn: str, day: str
):
    with pytest.raises(_PullCrashedError):
        _land_day(network_conn, day, records=_crash_after(_pull_day(network_conn, day), 100))

    assert not is_complete(_base() / "conversions" / f"date={day}")
    assert _keys(s3, _partition_prefix(day)) == []
    assert list_partitions(_base(), "conversions") == {}


def test_s3_partition_without_manifest_is_not_complete(
    s3: Any, sandbox: Any, network_conn: str, day: str
):
    """What a reader sees if a publish dies after moving data in, before the manifest PUT."""
    published = _land_day(network_conn, day)
    s3.delete_object(Bucket=BUCKET, Key=_partition_prefix(day) + MANIFEST_NAME)

    partition = _base() / "conversions" / f"date={day}"
    assert _keys(s3, _partition_prefix(day)) == [
        _partition_prefix(day) + f.name for f in published.manifest.files
    ]
    assert not is_complete(partition)
    assert list_partitions(_base(), "conversions") == {}


@pytest.mark.parametrize("step", ["CopyObject", "PutObject"])
def test_two_interleaved_writers_of_one_s3_partition(s3: Any, step: str) -> None:
    """Writer B is held on S3 itself (a botocore hook on the request) before its first data
    file goes into the partition (CopyObject) or before its manifest (PutObject), while writer
    A publishes the same day; then B goes on. The manifest names exactly B's files, the prefix
    holds exactly those, and a reader following the manifest counts no duplicates. Before the
    fix B's part-00000 overwrote A's and A's part-00001/2 stayed beside B's manifest, or B's
    manifest named bytes A had put there (incomplete)."""
    import asyncio
    import threading

    from affiliate_network.partitions.write import PartitionWriter
    from affiliate_network.reports.storage import partition_files

    base = _base()
    schema = conversion_schema()
    day = "2026-01-15"

    def recs(n: int, status: str) -> list[dict[str, Any]]:
        return [
            {"conversion_id": f"{status}-{i}", "status": status, "payout": 1.0} for i in range(n)
        ]

    def land(records: list[dict[str, Any]]) -> Any:
        with PartitionWriter(
            base, "conversions", {"date": day}, schema, row_group_rows=100, file_rows=250
        ) as writer:
            writer.write(records)
            return writer.commit(request={})

    land(recs(50, "pending"))  # a partition was there before
    fs = as_storage_path(base).fs
    if getattr(fs, "s3", None) is None:
        fs.connect()
    held, release = threading.Event(), threading.Event()
    prefix = _partition_prefix(day)

    async def hold(params: dict[str, Any], **_: Any) -> None:
        key = params.get("Key", "")
        if held.is_set() or not key.startswith(prefix):
            return
        if (step == "PutObject") != key.endswith(MANIFEST_NAME):
            return
        held.set()
        while not release.is_set():
            await asyncio.sleep(0.02)

    fs.s3.meta.events.register(f"before-parameter-build.s3.{step}", hold)
    results: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: results.update(b=land(recs(200, "rejected"))))
    try:
        thread.start()
        assert held.wait(60), "writer B never reached its publish"
        results["a"] = land(recs(700, "approved"))
    finally:
        release.set()
        thread.join(60)
        fs.s3.meta.events.unregister(f"before-parameter-build.s3.{step}", hold)
    partition = _base() / "conversions" / f"date={day}"
    manifest = read_manifest(partition)
    assert manifest is not None
    assert is_complete(partition)
    assert manifest.files == results["b"].manifest.files  # B published last
    assert _keys(s3, prefix) == sorted(
        [prefix + f.name for f in manifest.files] + [prefix + MANIFEST_NAME]
    )
    ids = read_partition(partition).column("conversion_id").to_pylist()
    assert len(ids) == len(set(ids)) == 200
    assert partition_files(S3_BASE, "conversions") == [
        f"s3://{BUCKET}/{prefix}{f.name}" for f in manifest.files
    ]


def _land_if_changed(day: str, records: list[dict[str, Any]]) -> Any:
    request = {"from_date": day, "to_date": day, "timezone_id": 67, "currency_id": "USD"}
    with PartitionWriter(_base(), "conversions", {"date": day}, conversion_schema()) as writer:
        writer.write(records)
        return writer.commit(request=request, only_if_changed=True, status_field="status")


def test_change_aware_publish_on_s3_keeps_unchanged_and_records_changes(
    s3: Any, sandbox: Any, network_conn: str, day: str
):
    records = list(_pull_day(network_conn, day))
    first = _land_if_changed(day, records)
    assert first.changes is not None
    assert first.changes.first_landing
    keys = _keys(s3, _partition_prefix(day))
    manifest_key = _partition_prefix(day) + MANIFEST_NAME
    manifest_before = s3.get_object(Bucket=BUCKET, Key=manifest_key)["Body"].read()

    # The same records again: nothing written, not even the manifest.
    again = _land_if_changed(day, records)
    assert (again.changed, again.rewritten) == (False, False)
    assert _keys(s3, _partition_prefix(day)) == keys
    assert s3.get_object(Bucket=BUCKET, Key=manifest_key)["Body"].read() == manifest_before

    # One status changed: published with its change record; the first record stays too (the
    # cleanup of unnamed files leaves change records alone).
    changed = [dict(r) for r in records]
    old_status = changed[0]["status"]
    changed[0]["status"] = "rejected" if old_status != "rejected" else "approved"
    third = _land_if_changed(day, changed)
    assert third.rewritten
    assert third.changes is not None
    label = f"{old_status}->{changed[0]['status']}"
    assert third.changes.transitions == {label: 1}
    assert third.changes.ids[label] == [changed[0]["conversion_id"]]
    names = [k.rsplit("/", 1)[1] for k in _keys(s3, _partition_prefix(day))]
    assert sorted(n for n in names if n.startswith("_changes-")) == sorted(
        [first.changes.file_name, third.changes.file_name]
    )
    partition = _base() / "conversions" / f"date={day}"
    assert is_complete(partition)
    assert read_partition(partition).num_rows == len(records)
    assert _keys(s3, f"{PREFIX}/conversions/{STAGING_DIR}/") == []
