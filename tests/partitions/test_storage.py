"""Storage: atomic partition publish, manifest, checksum, streaming, schema round trip.

These tests use spec-shaped records built here (no HTTP): the writer's contract does not
depend on where records come from. The operator tests exercise the same code against the sandbox.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import ObjectStoragePath
from airflow.sdk.io import attach
from fsspec.implementations.memory import MemoryFileSystem

from affiliate_network.api.report_columns import validate_report_columns
from affiliate_network.exceptions import ConfigValidationError, StorageError
from affiliate_network.helpers.seen_keys import SeenKeys
from affiliate_network.partitions.manifest import (
    MANIFEST_NAME,
    is_complete,
    list_partitions,
    read_manifest,
)
from affiliate_network.partitions.publish import STAGING_DIR, TRASH_DIR
from affiliate_network.partitions.read import iter_partition_records, read_partition
from affiliate_network.partitions.write import PartitionWriter, write_partition
from affiliate_network.reports.schema import (
    AffiliateReportSchema,
    SchemaMismatchError,
    conversion_schema,
)
from affiliate_network.reports.storage import partition_files

CONVERSION_SCHEMA = conversion_schema()
DAY = {"date": "2026-01-15"}
REQUEST = {"from": "2026-01-15", "to": "2026-01-15", "timezone_id": 67, "currency_id": "USD"}


def make_conversion(i: int, *, status: str = "approved", day: int = 15) -> dict[str, Any]:
    """A conversion record shaped like the spec's (a representative subset of fields)."""
    rec: dict[str, Any] = {
        "conversion_id": f"c{day:02d}{i:07d}",
        "transaction_id": f"t{i:08x}",
        "status": status,
        "currency_id": "USD",
        "country": ["US", "DE", "FR"][i % 3],
        "sub1": f"s{i % 97}",
        "sub2": "",
        "conversion_unix_timestamp": 1768435200 + i,
        "click_unix_timestamp": 1768435100 + i,
        "dma": i % 5,
        "error_code": 0,
        "payout": 1.5 + (i % 7),
        "revenue": 3,  # an integer in JSON: stored as decimal128(18, 6)
        "sale_amount": round(10.25 * (i % 11), 2),
        "is_event": False,
        "is_scrub": i % 13 == 0,
        "is_view_through": False,
        "relationship": {
            "offer": {"network_offer_id": 100 + i % 4, "name": "Offer", "network_id": 1},
            "affiliate": {"network_affiliate_id": 7 + i % 2, "name": "Aff", "network_id": 1},
            "advertiser": {"network_advertiser_id": 3, "name": "Adv", "network_id": 1},
            "usm_data": {"k": i},
        },
    }
    if i % 10 == 0:
        rec["relationship"]["on_hold_snapshots"] = [
            {"on_hold_conversion_id": f"oh{i}", "status": "on_hold", "unix_timestamp": 1},
            {"on_hold_conversion_id": f"oh{i}", "status": "approved", "unix_timestamp": 2},
        ]
    return rec


def records(n: int, **kw: Any) -> list[dict[str, Any]]:
    return [make_conversion(i, **kw) for i in range(n)]


def part(base: Path | ObjectStoragePath) -> ObjectStoragePath:
    return ObjectStoragePath(str(base)) / "conversions" / "date=2026-01-15"


def test_publish_writes_data_and_manifest(tmp_path: Path) -> None:
    recs = records(3000)
    result = write_partition(tmp_path, "conversions", DAY, recs, CONVERSION_SCHEMA, request=REQUEST)

    target = tmp_path / "conversions" / "date=2026-01-15"
    assert result.path == str(target)
    assert sorted(os.listdir(target)) == [MANIFEST_NAME, "part-00000.parquet"]
    manifest = read_manifest(target)
    assert manifest is not None
    assert manifest.row_count == 3000
    assert manifest.partition == DAY
    assert manifest.dataset == "conversions"
    assert manifest.request == REQUEST
    assert manifest.package_version
    assert manifest.pulled_at.endswith("Z")
    assert manifest.files[0].bytes == (target / "part-00000.parquet").stat().st_size
    assert manifest.content_checksum.startswith("sha256:")
    assert is_complete(target)
    table = read_partition(target)
    assert table.column("conversion_id").to_pylist() == [r["conversion_id"] for r in recs]
    # Nothing is left behind in the staging area after a publish.
    assert os.listdir(tmp_path / "conversions" / STAGING_DIR) == []


def test_checksum_same_for_same_records_in_any_order_and_time(tmp_path: Path) -> None:
    recs = records(2500)
    a = write_partition(tmp_path / "a", "conversions", DAY, recs, CONVERSION_SCHEMA, request={})
    time.sleep(1.1)  # a later pull time must not change the checksum
    b = write_partition(
        tmp_path / "b", "conversions", DAY, list(reversed(recs)), CONVERSION_SCHEMA, request={}
    )
    assert a.manifest.content_checksum == b.manifest.content_checksum
    assert a.manifest.pulled_at != b.manifest.pulled_at

    changed = records(2500)
    changed[1234]["status"] = "rejected"  # one late status change
    c = write_partition(tmp_path / "c", "conversions", DAY, changed, CONVERSION_SCHEMA, request={})
    assert c.manifest.content_checksum != a.manifest.content_checksum


def test_checksum_same_across_formats(tmp_path: Path) -> None:
    recs = records(500)
    pq_res = write_partition(tmp_path, "conversions", DAY, recs, CONVERSION_SCHEMA, request={})
    js_res = write_partition(
        tmp_path, "conversions_jsonl", DAY, recs, CONVERSION_SCHEMA, request={}, format="jsonl"
    )
    assert pq_res.manifest.content_checksum == js_res.manifest.content_checksum


def test_rerun_replaces_partition_exactly(tmp_path: Path) -> None:
    write_partition(tmp_path, "conversions", DAY, records(1000), CONVERSION_SCHEMA, request={})
    second = records(400, status="rejected")
    result = write_partition(tmp_path, "conversions", DAY, second, CONVERSION_SCHEMA, request={})

    target = part(tmp_path)
    assert sorted(p.name for p in target.iterdir()) == [MANIFEST_NAME, "part-00000.parquet"]
    table = read_partition(target)
    assert table.num_rows == 400 == result.manifest.row_count
    assert set(table.column("status").to_pylist()) == {"rejected"}
    assert os.listdir(tmp_path / "conversions" / TRASH_DIR) == []
    # Same data again: same checksum, still exactly one copy of every row.
    again = write_partition(tmp_path, "conversions", DAY, second, CONVERSION_SCHEMA, request={})
    assert again.manifest.content_checksum == result.manifest.content_checksum
    assert read_partition(target).num_rows == 400


def _failing(recs: list[dict[str, Any]], after: int) -> Iterator[dict[str, Any]]:
    for i, rec in enumerate(recs):
        if i == after:
            raise ConnectionError("network went away mid-stream")
        yield rec


def test_error_mid_stream_publishes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConnectionError):
        write_partition(
            tmp_path, "conversions", DAY, _failing(records(9000), 7000), CONVERSION_SCHEMA,
            request={}, row_group_rows=2000,
        )  # fmt: skip
    assert not part(tmp_path).exists()
    assert list_partitions(tmp_path, "conversions") == {}
    assert os.listdir(tmp_path / "conversions" / STAGING_DIR) == []


def test_error_mid_stream_keeps_previous_partition(tmp_path: Path) -> None:
    first = write_partition(
        tmp_path, "conversions", DAY, records(800), CONVERSION_SCHEMA, request={}
    )
    with pytest.raises(ConnectionError):
        write_partition(
            tmp_path, "conversions", DAY, _failing(records(5000), 4500), CONVERSION_SCHEMA,
            request={},
        )  # fmt: skip
    manifest = read_manifest(part(tmp_path))
    assert manifest is not None
    assert manifest.content_checksum == first.manifest.content_checksum
    assert read_partition(part(tmp_path)).num_rows == 800


_KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_storage import make_conversion
    from affiliate_network.reports.schema import conversion_schema
    from affiliate_network.partitions import write as storage
    from affiliate_network.partitions.write import write_partition

    marker = Path({marker!r})
    storage.SINK_BUFFER_BYTES = 4096  # small rows: let the first row groups reach the disk

    def rows():
        for i in range(1_000_000):
            if i == 6000:
                marker.write_text("mid-write")  # row groups are being written by now
                time.sleep(120)
            yield make_conversion(i)

    write_partition({base!r}, "conversions", {{"date": "2026-01-15"}}, rows(),
                    conversion_schema(), request={{}}, row_group_rows=2000)
    """
)


def test_killed_process_keeps_previous_partition(tmp_path: Path) -> None:
    """SIGKILL mid-write: the previous complete partition survives untouched.

    (The no-previous-partition case is killed the same way in the operator tests.)
    """
    base = tmp_path / "data"
    previous = write_partition(
        base, "conversions", DAY, records(300), CONVERSION_SCHEMA, request={}
    ).manifest
    marker = tmp_path / "marker"
    script = _KILL_SCRIPT.format(
        tests=str(Path(__file__).parent), marker=str(marker), base=str(base)
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, "writer exited before reaching the middle of the write"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # Really killed mid-write: row groups are on disk (the writer thread may still be
        # writing them when the marker appears), not yet published.
        staged: list[Path] = []
        while not (staged and staged[0].stat().st_size > 0):
            assert time.monotonic() < deadline, "no staged data reached the disk"
            time.sleep(0.05)
            staged = list((base / "conversions" / STAGING_DIR).rglob("*.parquet"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()

    partitions = list_partitions(base, "conversions")
    assert list(partitions) == ["date=2026-01-15"]
    assert partitions["date=2026-01-15"].content_checksum == previous.content_checksum
    assert read_partition(part(base)).num_rows == 300
    # A rerun after the crash publishes normally.
    rerun = write_partition(base, "conversions", DAY, records(50), CONVERSION_SCHEMA, request={})
    assert read_partition(part(base)).num_rows == 50 == rerun.rows


def test_duplicates_dropped_and_counted(tmp_path: Path) -> None:
    recs = records(3000)
    # Page shift: the last 40 records of "page 1" come back again at the start of "page 2".
    shifted = recs[:2000] + recs[1960:2000] + recs[2000:]
    result = write_partition(tmp_path, "conversions", DAY, shifted, CONVERSION_SCHEMA, request={})
    assert result.manifest.row_count == 3000
    assert result.manifest.duplicates_dropped == 40
    ids = read_partition(part(tmp_path)).column("conversion_id").to_pylist()
    assert len(ids) == len(set(ids)) == 3000


def test_parquet_streams_row_group_by_row_group(tmp_path: Path) -> None:
    with PartitionWriter(
        tmp_path, "conversions", DAY, CONVERSION_SCHEMA, row_group_rows=4000
    ) as writer:
        groups_seen = []
        for start in range(0, 21_000, 3000):
            writer.write(make_conversion(i) for i in range(start, start + 3000))
            groups_seen.append(writer._thread.pending_rows)
        result = writer.commit(request={})
    # Arrow data held in memory never exceeds one row group (plus one batch).
    assert max(groups_seen) < 4000 + 2000
    meta = pq.ParquetFile(part(tmp_path).path + "/part-00000.parquet").metadata
    assert meta.num_row_groups >= 4
    assert sum(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) == 21_000
    assert result.rows == 21_000


def test_parquet_schema_round_trip(tmp_path: Path) -> None:
    recs = records(30)
    recs[3]["brand_new_field"] = {"x": 1}  # not in the spec: kept in extra_fields
    write_partition(tmp_path, "conversions", DAY, recs, CONVERSION_SCHEMA, request={})
    table = read_partition(part(tmp_path))
    assert table.schema.equals(CONVERSION_SCHEMA.arrow_schema, check_metadata=False)
    assert table.schema.field("payout").type == pa.decimal128(18, 6)
    assert table.schema.field("conversion_unix_timestamp").type == pa.timestamp("ms", tz="UTC")
    assert table.schema.field("is_scrub").type == "bool"
    rows = table.to_pylist()
    for rec, row in zip(recs, rows, strict=True):
        assert json.loads(row["relationship"]) == rec["relationship"]
        assert row["revenue"] == Decimal("3.000000")
        assert row["payout"] == Decimal(repr(rec["payout"]))
        assert row["conversion_unix_timestamp"].timestamp() == rec["conversion_unix_timestamp"]
        assert row["sub1"] == rec["sub1"]
        assert row["rel_network_offer_id"] == rec["relationship"]["offer"]["network_offer_id"]
    assert rows[10]["rel_on_hold_status"] == "approved"  # the LAST snapshot is current
    assert rows[11]["rel_on_hold_status"] is None
    assert json.loads(rows[3]["extra_fields"]) == {"brand_new_field": {"x": 1}}
    assert rows[4]["extra_fields"] is None


def test_jsonl_round_trip_is_lossless_and_deterministic(tmp_path: Path) -> None:
    recs = records(700)
    a = write_partition(
        tmp_path / "a", "c", DAY, recs, CONVERSION_SCHEMA, request={}, format="jsonl"
    )
    b = write_partition(
        tmp_path / "b", "c", DAY, recs, CONVERSION_SCHEMA, request={}, format="jsonl"
    )
    target = tmp_path / "a" / "c" / "date=2026-01-15"
    assert list(iter_partition_records(target)) == recs
    with gzip.open(target / "part-00000.jsonl.gz", "rb") as fh:
        assert len(fh.read().splitlines()) == 700
    # Same records, same bytes (gzip mtime pinned), so the file hash is reproducible too.
    assert a.manifest.files[0].sha256 == b.manifest.files[0].sha256


def test_type_coercion_and_mismatch(tmp_path: Path) -> None:
    recs = records(5)
    recs[0]["dma"] = "12"  # numeric string for an integer field: lossless, coerced
    recs[1]["is_event"] = 0
    write_partition(tmp_path, "conversions", DAY, recs, CONVERSION_SCHEMA, request={})
    rows = read_partition(part(tmp_path)).to_pylist()
    assert rows[0]["dma"] == 12
    assert rows[1]["is_event"] is False

    bad = records(5)
    bad[2]["dma"] = "north"
    with pytest.raises(SchemaMismatchError, match=r"'dma'.*conversion_id='c150000002'"):
        write_partition(tmp_path, "conversions", DAY, bad, CONVERSION_SCHEMA, request={})
    # The failed write did not touch the published partition.
    assert read_partition(part(tmp_path)).num_rows == 5


def _with(**changes: Any) -> dict[str, Any]:
    rec = make_conversion(20)  # has on_hold_snapshots
    for key, value in changes.items():
        if value is _DROP:
            rec.pop(key)
        else:
            rec[key] = value
    return rec


_DROP = object()

#: Records that push the Parquet fast path (JSON lines parsed by Arrow) to its edges.
_EDGE_RECORDS = {
    "plain": _with(),
    "number for a string column": _with(sub1=123),
    "numeric string for a float": _with(payout="5.5"),
    "numeric string for an int": _with(dma="12"),
    "integral float for an int": _with(dma=3.0),
    "0/1 and text for booleans": _with(is_scrub=1, is_event="true"),
    "null relationship": _with(relationship=None),
    "no relationship": _with(relationship=_DROP),
    "relationship a list": _with(relationship=[1, 2]),
    "unknown top-level field": _with(new_field={"a": [1, None]}),
    "unknown fields named like ours": _with(rel_network_offer_id=7, extra_fields="zz"),
    "null and unicode strings": _with(sub1=None, sub2='é\u2028"\\\n'),
    # Schema 3 types the timestamp: the last second a Python datetime holds (9999-12-31).
    # Schema 4: the largest amount with cents that decimal128(18, 6) holds.
    "extreme numbers": _with(
        conversion_unix_timestamp=253_402_300_799, payout=999_999_999_999.99, sale_amount=-0.0
    ),
    "string id in relationship": _with(
        relationship={"offer": {"network_offer_id": "12"}, "on_hold_snapshots": [{}]}
    ),
    "empty record": {},
}


def _page(recs: list[dict[str, Any]]) -> bytes:
    """A reporting page as the API sends it."""
    paging = {"page": 1, "page_size": 2000, "total_count": len(recs)}
    return orjson.dumps({"conversions": recs, "paging": paging})


@pytest.mark.parametrize("name", list(_EDGE_RECORDS))
def test_raw_page_path_equals_row_path(name: str) -> None:
    """A page landed without Python dicts lands exactly what the row path would."""
    batch = [_EDGE_RECORDS[name], *records(3)]
    rows = [CONVERSION_SCHEMA.prepare(r) for r in batch]
    expected = CONVERSION_SCHEMA.to_table([row for row, _, _ in rows])
    payload, canonicals, dropped = CONVERSION_SCHEMA.encode_page(
        _page(batch), "conversions", SeenKeys(), "parquet"
    )
    assert dropped == 0
    assert [bytes(c) for c in canonicals] == [c for _, c, _ in rows]  # same checksum input
    table = CONVERSION_SCHEMA.to_arrow(payload)
    assert table.equals(expected, check_metadata=True)
    assert table.to_pylist() == expected.to_pylist()


def test_raw_page_path_needs_no_fallback_for_spec_typed_records() -> None:
    """Well-typed pages go through Arrow's reader alone (the row path is only a fallback)."""
    batch = [*records(20), _with(relationship=None), _with(relationship=_DROP, conversion_id="x")]
    batch.append(dict(batch[5]))  # a duplicate id: masked out
    seen = SeenKeys()
    payload, _, dropped = CONVERSION_SCHEMA.encode_page(
        _page(batch), "conversions", seen, "parquet"
    )
    assert dropped == 1
    assert len(seen) == 22
    table = CONVERSION_SCHEMA.table_from_page(payload)  # raises instead of falling back
    expected = CONVERSION_SCHEMA.to_table([CONVERSION_SCHEMA.prepare(r)[0] for r in batch[:-1]])
    assert table.equals(expected, check_metadata=True)


def test_raw_page_path_mismatch_names_field() -> None:
    page = _page([*records(2), _with(dma="north")])
    payload, _, _ = CONVERSION_SCHEMA.encode_page(page, "conversions", None, "parquet")
    with pytest.raises(SchemaMismatchError, match=r"'dma'.*conversion_id='c150000020'"):
        CONVERSION_SCHEMA.to_arrow(payload)


def test_raw_page_with_a_non_object_record_fails_and_the_next_page_lands() -> None:
    with pytest.raises(SchemaMismatchError, match="not an object") as failed:
        CONVERSION_SCHEMA.encode_page(_page([*records(2), 7]), "conversions", None, "parquet")
    # The failure's traceback still holds the first page's document: the next page must land.
    assert failed.value.__traceback__ is not None
    payload, canonicals, _ = CONVERSION_SCHEMA.encode_page(
        _page(records(3)), "conversions", None, "parquet"
    )
    assert CONVERSION_SCHEMA.to_arrow(payload).num_rows == len(canonicals) == 3


def test_raw_pages_and_records_land_the_same_partition(tmp_path: Path) -> None:
    from affiliate_network.hooks._paging import Page

    recs = records(2500)
    pages = [Page(1, _page(recs[:2000]), "conversions", 2000)]
    pages.append(Page(2, _page(recs[1990:]), "conversions", 510))  # 10 shifted duplicates
    for fmt in ("parquet", "jsonl"):
        with PartitionWriter(tmp_path / "raw", fmt, DAY, CONVERSION_SCHEMA, format=fmt) as w:
            assert w.write_pages(pages) == 2500
            raw = w.commit(request={}).manifest
        dicts = write_partition(
            tmp_path / "dicts", fmt, DAY, recs, CONVERSION_SCHEMA, request={}, format=fmt
        ).manifest
        assert raw.duplicates_dropped == 10
        assert (raw.row_count, raw.content_checksum) == (dicts.row_count, dicts.content_checksum)
        assert raw.files[0].sha256 == dicts.files[0].sha256  # byte-identical files


def test_a_pretty_printed_page_lands_as_its_compacted_text(tmp_path: Path) -> None:
    """An answer that spans lines is compacted before its records are hashed and written: JSON
    Lines stay one record per line, and the checksum is that of the same text with only the
    whitespace between tokens removed (escapes and numbers as sent, never re-printed).
    """
    import msgspec

    from affiliate_network.hooks._paging import Page, page_decoder

    recs = [*records(20), _with(notes='caf\u00e9, "quoted"\n', payout=1.5)]
    pretty = json.dumps(orjson.loads(_page(recs)), indent=2).encode()  # escapes non-ASCII
    compacted = msgspec.json.format(pretty, indent=-1)
    assert b"\n" in pretty
    assert b"\n" not in compacted
    assert b"caf\\u00e9" in compacted
    checksums = {}
    for name, body in (("pretty", pretty), ("compacted", compacted)):
        spans = page_decoder("conversions").decode(body).conversions  # as the hook splits it
        page = Page(1, body, "conversions", len(recs), spans)
        for fmt in ("parquet", "jsonl"):
            with PartitionWriter(tmp_path / name, fmt, DAY, CONVERSION_SCHEMA, format=fmt) as w:
                w.write_pages([page])
                checksums[name, fmt] = w.commit(request={}).manifest.content_checksum
    assert len(set(checksums.values())) == 1, checksums
    part = tmp_path / "pretty" / "jsonl" / "date=2026-01-15"
    with gzip.open(next(iter(Path(part).glob("*.jsonl.gz"))), "rb") as fh:
        lines = fh.read().splitlines()
    assert len(lines) == len(recs)
    assert lines[-1].startswith(b'{"conversion_id":')
    assert b"caf\\u00e9" in lines[-1]
    assert [orjson.loads(line) for line in lines] == recs
    assert read_partition(tmp_path / "pretty" / "parquet" / "date=2026-01-15").num_rows == 21


def _token(result: Any) -> str:
    """The attempt token in an object-store file name (``part-00000-<token>.parquet``)."""
    return result.manifest.files[0].name.split(".")[0].split("-", 2)[2]


def test_object_store_publish_and_rerun() -> None:
    # An in-memory fsspec store: no directory rename, like S3/GCS (the manifest-last path).
    attach(protocol="memory", fs=MemoryFileSystem())
    base = ObjectStoragePath("memory://afn-test-bucket/data")
    try:
        first = write_partition(
            base, "conversions", DAY, records(900), CONVERSION_SCHEMA, request={}
        )
        second = write_partition(
            base, "conversions", DAY, records(200, status="rejected"), CONVERSION_SCHEMA,
            request={},
        )  # fmt: skip
        target = base / "conversions" / "date=2026-01-15"
        # Exactly the rerun's file (named by its attempt on an object store) and the manifest.
        assert [f.name for f in second.manifest.files] == [f"part-00000-{_token(second)}.parquet"]
        assert sorted(p.name for p in target.iterdir()) == sorted(
            [MANIFEST_NAME, second.manifest.files[0].name]
        )
        assert read_partition(target).num_rows == 200
        assert first.manifest.content_checksum != second.manifest.content_checksum
        with pytest.raises(ConnectionError):
            write_partition(
                base, "conversions", DAY, _failing(records(100), 50), CONVERSION_SCHEMA,
                request={},
            )  # fmt: skip
        manifest = read_manifest(target)
        assert manifest is not None
        assert manifest.content_checksum == second.manifest.content_checksum
    finally:
        base.fs.rm(base.path, recursive=True)


def test_incomplete_partition_is_not_listed(tmp_path: Path) -> None:
    write_partition(tmp_path, "conversions", DAY, records(10), CONVERSION_SCHEMA, request={})
    target = part(tmp_path)
    assert list(list_partitions(tmp_path, "conversions")) == ["date=2026-01-15"]
    # A truncated data file no longer matches the manifest: not complete.
    data = target / "part-00000.parquet"
    data.write_bytes(data.read_bytes()[:100])
    assert not is_complete(target)
    with pytest.raises(StorageError, match="not a complete partition"):
        read_partition(target)
    # No manifest at all: not complete either.
    (target / MANIFEST_NAME).unlink()
    assert list_partitions(tmp_path, "conversions") == {}


def test_nested_partition_keys(tmp_path: Path) -> None:
    schema = AffiliateReportSchema(["offer", "date"])
    rows = [
        {
            "columns": [
                {"column_type": "offer", "id": "101", "label": "Offer 101"},
                {"column_type": "date", "id": "2026-01-15", "label": "2026-01-15"},
            ],
            "reporting": {"imp": 0, "total_click": 10, "cv": 2, "revenue": 4.5, "new_metric": 1},
        }
    ]
    keys = {"affiliate": "7", "date": "2026-01-15"}
    write_partition(tmp_path, "affiliate_reports", keys, rows, schema, request={})
    listed = list_partitions(tmp_path, "affiliate_reports")
    assert list(listed) == ["affiliate=7/date=2026-01-15"]
    table = read_partition(tmp_path / "affiliate_reports" / "affiliate=7" / "date=2026-01-15")
    row = table.to_pylist()[0]
    assert (row["offer"], row["offer_label"]) == ("101", "Offer 101")
    assert (row["cv"], row["revenue"]) == (2, 4.5)
    assert orjson.loads(row["extra_reporting"]) == {"new_metric": 1}


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ([], "1 to 10"),
        (["offer", "country", "sub1", "sub2", "sub3", "sub4", "sub5", "platform",
          "device_type", "advertiser", "date"], "1 to 10"),
        (["offer", "date", "hour"], "at most one time column"),
        (["offer", "colour"], "unknown"),
        (["offer", "offer"], "duplicates"),
    ],
)  # fmt: skip
def test_report_column_validation(columns: list[str], message: str) -> None:
    with pytest.raises(ConfigValidationError, match=message):
        validate_report_columns(columns)


def test_report_column_validation_accepts_dicts() -> None:
    assert validate_report_columns([{"column": "offer"}, {"column": "date"}]) == ["offer", "date"]


def test_stale_staging_of_crashed_runs_is_removed(tmp_path: Path) -> None:
    staging = tmp_path / "conversions" / STAGING_DIR
    old = staging / f"date=2026-01-14.{int(time.time()) - 7 * 3600}-deadbeef0000"
    young = staging / f"date=2026-01-13.{int(time.time()) - 60}-cafebabe0000"
    for folder in (old, young):
        folder.mkdir(parents=True)
        (folder / "part-00000.parquet").write_bytes(b"half a file")
    write_partition(tmp_path, "conversions", DAY, records(5), CONVERSION_SCHEMA, request={})
    assert not old.exists()  # a crashed run's leftovers
    assert young.exists()  # may belong to a writer still running


def test_concurrent_publishes_of_one_partition_both_succeed(tmp_path) -> None:
    # Two runs landing the same day at the same moment (a manual run during the scheduled one):
    # each must end with the complete partition published, never a bare FileNotFoundError or a
    # partition without its manifest.
    import threading

    recs = records(300)
    write_partition(tmp_path, "conversions", DAY, recs, CONVERSION_SCHEMA, request={})
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def land() -> None:
        try:
            start.wait()
            for _ in range(15):
                write_partition(tmp_path, "conversions", DAY, recs, CONVERSION_SCHEMA, request={})
        except BaseException as err:  # collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=land) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    part = tmp_path / "conversions" / "date=2026-01-15"
    manifest = read_manifest(part)
    assert manifest is not None
    assert manifest.row_count == 300
    assert read_partition(part).num_rows == 300
    assert sorted(p.name for p in part.iterdir()) == sorted([MANIFEST_NAME, manifest.files[0].name])


def _write_rolled(base: Path | ObjectStoragePath, recs: list[dict[str, Any]]) -> Any:
    """Row groups of 100 rows, a new file once one holds 250 rows: files of 300 rows."""
    with PartitionWriter(
        base, "conversions", DAY, CONVERSION_SCHEMA, row_group_rows=100, file_rows=250
    ) as writer:
        writer.write(recs)
        return writer.commit(request={})


def test_a_large_parquet_partition_is_split_into_files(tmp_path: Path) -> None:
    # A Parquet writer holds each row group's metadata until its file closes: files are capped.
    recs = records(1000)
    result = _write_rolled(tmp_path / "rolled", recs)
    single = write_partition(
        tmp_path / "one", "conversions", DAY, recs, CONVERSION_SCHEMA, request={}
    )
    target = tmp_path / "rolled" / "conversions" / "date=2026-01-15"
    names = [f"part-0000{i}.parquet" for i in range(4)]
    assert [(f.name, f.rows) for f in result.manifest.files] == list(
        zip(names, [300, 300, 300, 100], strict=True)
    )
    assert sorted(os.listdir(target)) == [MANIFEST_NAME, *names]
    for entry in result.manifest.files:
        assert (target / entry.name).stat().st_size == entry.bytes
        assert pq.ParquetFile(target / entry.name).metadata.num_rows == entry.rows
    assert is_complete(target)
    table = read_partition(target)
    assert table.column("conversion_id").to_pylist() == [r["conversion_id"] for r in recs]
    # The content checksum identifies the records, not how they were split into files.
    assert result.manifest.content_checksum == single.manifest.content_checksum
    # Query engines read the partition's files as one table.
    duckdb = pytest.importorskip("duckdb")
    glob = str(tmp_path / "rolled" / "conversions" / "*" / "*.parquet")
    query = "select count(distinct conversion_id) from read_parquet($glob)"
    assert duckdb.execute(query, {"glob": glob}).fetchone() == (1000,)
    # A file missing or cut short makes the whole partition incomplete.
    (target / names[2]).write_bytes(b"PAR1")
    assert not is_complete(target)


def test_split_files_on_an_object_store() -> None:
    attach(protocol="memory", fs=MemoryFileSystem())
    base = ObjectStoragePath("memory://afn-test-bucket/rolled")
    try:
        _write_rolled(base, records(700))
        result = _write_rolled(base, records(400, status="rejected"))  # a rerun replaces all
        target = base / "conversions" / "date=2026-01-15"
        names = sorted(p.name for p in target.iterdir())
        token = _token(result)
        assert names == [
            MANIFEST_NAME,
            f"part-00000-{token}.parquet",
            f"part-00001-{token}.parquet",
        ]
        assert [f.rows for f in result.manifest.files] == [300, 100]
        assert read_partition(target).column("status").unique().to_pylist() == ["rejected"]
    finally:
        base.fs.rm(base.path, recursive=True)


def test_file_rows_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigValidationError, match="file_rows"):
        PartitionWriter(tmp_path, "conversions", DAY, CONVERSION_SCHEMA, file_rows=0)


def test_a_script_that_reads_a_partition_exits_cleanly(tmp_path: Path) -> None:
    # With Arrow's thread pool, such a script ended in SIGABRT at exit most of the time.
    write_partition(tmp_path, "conversions", DAY, records(3000), CONVERSION_SCHEMA, request={})
    script = textwrap.dedent(
        """
        import sys
        from affiliate_network.partitions.read import read_partition
        print(read_partition(sys.argv[1]).num_rows)
        """
    )
    for _ in range(3):  # the abort was frequent, not certain: three fresh processes
        done = subprocess.run(
            [sys.executable, "-c", script, str(part(tmp_path))],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert (done.returncode, done.stdout.strip()) == (0, "3000"), done.stderr[-2000:]


class _PausingStore(MemoryFileSystem):
    """An in-memory object store (no rename, no lock, like S3) that holds one writer's thread
    once, at a chosen step of its publish: before it first puts a data file into the partition
    (``step="data"``), or before it puts the manifest (``step="manifest"``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import threading

        super().__init__(*args, **kwargs)
        self.hold: Any = None
        self.step = "data"
        self.reached = threading.Event()
        self.release = threading.Event()

    def _maybe_hold(self, dest: str) -> None:
        import threading

        if threading.current_thread() is not self.hold or "/_staging/" in dest:
            return
        if (self.step == "manifest") == dest.endswith(MANIFEST_NAME) and "/date=" in dest:
            self.hold = None
            self.reached.set()
            assert self.release.wait(30)

    def cp_file(self, path1: Any, path2: Any, **kwargs: Any) -> Any:
        self._maybe_hold(str(path2))
        return super().cp_file(path1, path2, **kwargs)

    def pipe_file(self, path: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        self._maybe_hold(str(path))
        return super().pipe_file(path, value, *args, **kwargs)


def interleave_two_writers(base: Any, store: Any, step: str) -> tuple[Any, Any]:
    """Writer B (a thread, 200 rejected rows in one file) is held at ``step`` of its publish
    while writer A (700 rows in three files) publishes the same partition; then B goes on.
    Returns both results (A's, B's)."""
    import threading

    results: dict[str, Any] = {}

    def writer_b() -> None:
        results["b"] = _write_rolled(base, records(200, status="rejected"))

    store.step = step
    store.reached, store.release = threading.Event(), threading.Event()  # fsspec reuses stores
    thread = threading.Thread(target=writer_b)
    store.hold = thread
    thread.start()
    assert store.reached.wait(30), "writer B never reached its publish"
    results["a"] = _write_rolled(base, records(700))
    store.release.set()
    thread.join(30)
    return results["a"], results["b"]


def assert_exactly_one_writer(target: Any, a: Any, b: Any) -> None:
    """The manifest names exactly one writer's files, the partition holds exactly those, and a
    reader following the manifest counts every record once (DuckDB over its file list too)."""
    manifest = read_manifest(target)
    assert manifest is not None
    assert is_complete(target)
    winner = next(r for r in (a, b) if r.manifest.files == manifest.files)
    assert manifest.content_checksum == winner.manifest.content_checksum
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [MANIFEST_NAME, *(f.name for f in manifest.files)]
    )
    table = read_partition(target)
    ids = table.column("conversion_id").to_pylist()
    assert len(ids) == len(set(ids)) == winner.manifest.row_count


@pytest.mark.parametrize("step", ["data", "manifest"])
def test_two_writers_of_one_object_store_partition(step: str) -> None:
    """Two runs publish one partition on an object store, interleaved: B held before its data
    goes in (or before its manifest) while A publishes. Before the fix, B's publish emptied the
    folder and wrote part-00000 over A's, leaving A's part-00001/2 beside B's manifest (a glob
    counted 800 rows for 200), or A's cleanup removed B's file and B's manifest named A's
    bytes (incomplete). Now each attempt names its own files, cleanup spares a writer in
    flight, and the last manifest names exactly its writer's files."""
    from airflow.sdk.io.store import _STORE_CACHE

    store = _PausingStore()
    previous = _STORE_CACHE.pop("memory", None)  # attach() keeps the first store of a protocol
    attach(protocol="memory", fs=store)
    base = ObjectStoragePath(f"memory://afn-two-writers-{step}/data")
    try:
        _write_rolled(base, records(50, status="pending"))  # a partition was there before
        a, b = interleave_two_writers(base, store, step)
        target = base / "conversions" / "date=2026-01-15"
        assert_exactly_one_writer(target, a, b)
        assert read_manifest(target).row_count == 200  # B published last
        assert partition_files(base, "conversions") == [
            f"memory://{(target / f.name).path}" for f in b.manifest.files
        ]
    finally:
        base.fs.rm(base.path, recursive=True)
        _STORE_CACHE.pop("memory", None)
        if previous is not None:
            _STORE_CACHE["memory"] = previous


def test_two_writers_of_one_local_partition(tmp_path: Path) -> None:
    """Locally the swap is a rename under a lock: two writers staged at once and released
    together end with exactly one writer's files, and DuckDB reading the manifests' file list
    counts each record once."""
    import fcntl
    import threading

    base = tmp_path / "data"
    _write_rolled(base, records(50, status="pending"))
    results: dict[str, Any] = {}

    def writer(name: str, recs: list[dict[str, Any]]) -> None:
        results[name] = _write_rolled(base, recs)

    threads = [
        threading.Thread(target=writer, args=("a", records(700))),
        threading.Thread(target=writer, args=("b", records(200, status="rejected"))),
    ]
    # The publish lock is on the dataset folder: both stage, then wait inside publish.
    lock = os.open(base / "conversions", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # (no speed asserted: either order is a valid end)
        assert all(thread.is_alive() for thread in threads)  # the lock held both back
    finally:
        os.close(lock)
    for thread in threads:
        thread.join(30)
    # No lock file stays beside the partitions.
    assert [p.name for p in (base / "conversions").iterdir() if "lock" in p.name] == []
    target = ObjectStoragePath(str(base / "conversions" / "date=2026-01-15"))
    assert_exactly_one_writer(target, results["a"], results["b"])
    files = partition_files(base, "conversions")
    duckdb = pytest.importorskip("duckdb")
    query = "select count(*), count(distinct conversion_id) from read_parquet($files)"
    rows = read_manifest(target).row_count
    assert duckdb.execute(query, {"files": files}).fetchone() == (rows, rows)


# -- change-aware publishing ------------------------------------------------------------------


def _commit_if_changed(
    base: Path, recs: list[dict[str, Any]], fmt: str = "parquet", run_id: str | None = None
) -> Any:
    with PartitionWriter(base, "conversions", DAY, CONVERSION_SCHEMA, format=fmt) as writer:
        writer.write(recs)
        return writer.commit(
            request=REQUEST, only_if_changed=True, status_field="status", run_id=run_id
        )


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_changed_partition_records_transitions_new_removed_updated(
    tmp_path: Path, fmt: str
) -> None:
    recs = records(30, status="pending")
    first = _commit_if_changed(tmp_path, recs, fmt)
    assert first.changes.first_landing
    assert (first.changes.new, first.changes.ids) == (30, {})

    changed = [dict(r) for r in recs[:-1]]  # the last one is no longer reported
    changed[0]["status"] = "approved"
    changed[1]["status"] = "approved"
    changed[2]["status"] = "rejected"
    changed[3]["sale_amount"] = 99.5  # same status, another field
    changed.append(make_conversion(500))  # a new one
    result = _commit_if_changed(tmp_path, changed, fmt)
    c = result.changes
    assert (result.changed, result.rewritten, c.layout_changed) == (True, True, False)
    assert c.transitions == {"pending->approved": 2, "pending->rejected": 1}
    assert c.ids["pending->approved"] == sorted(
        [recs[0]["conversion_id"], recs[1]["conversion_id"]]
    )
    assert c.ids["pending->rejected"] == [recs[2]["conversion_id"]]
    assert (c.new, c.removed, c.updated) == (1, 1, 1)
    assert c.ids["new"] == [make_conversion(500)["conversion_id"]]
    assert c.ids["removed"] == [recs[-1]["conversion_id"]]
    assert c.ids["updated"] == [recs[3]["conversion_id"]]
    assert (c.from_checksum, c.to_checksum) == (
        first.manifest.content_checksum,
        result.manifest.content_checksum,
    )
    # Both change records are there, beside the manifest; readers see the data files only.
    names = sorted(p.name for p in part(tmp_path).iterdir() if p.name.startswith("_changes-"))
    assert names == sorted([first.changes.file_name, c.file_name])
    assert is_complete(part(tmp_path))
    assert all("_changes" not in f for f in partition_files(tmp_path, "conversions"))


def test_unchanged_partition_is_kept_byte_for_byte(tmp_path: Path) -> None:
    recs = records(20)
    _commit_if_changed(tmp_path, recs, run_id="run_1")
    folder = tmp_path / "conversions" / "date=2026-01-15"
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    again = _commit_if_changed(tmp_path, list(reversed(recs)), run_id="run_2")  # any order
    assert (again.changed, again.rewritten, again.changes) == (False, False, None)
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before
    assert not list((tmp_path / "conversions" / STAGING_DIR).iterdir())
    # The run that published it, retried, still reports its change (and writes nothing).
    retried = _commit_if_changed(tmp_path, recs, run_id="run_1")
    assert (retried.changed, retried.rewritten) == (True, False)
    assert retried.changes is not None
    assert retried.changes.first_landing


def test_new_layout_rewrites_an_identical_day_and_says_so(tmp_path: Path) -> None:
    recs = records(10)
    _commit_if_changed(tmp_path, recs, "jsonl")
    result = _commit_if_changed(tmp_path, recs, "parquet")
    assert result.rewritten
    assert result.changes.layout_changed
    assert result.changes.transitions == {}
    assert read_manifest(part(tmp_path)).format == "parquet"


# -- files a person reads: no lock files, the data files' permissions -------------------------


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_published_files_follow_the_umask_and_leave_no_lock(tmp_path: Path, umask: int) -> None:
    """Every file of a partition (data, manifest, change record) gets the permissions the
    process's umask gives a new file, every folder those of a new folder; no ``.lock`` file
    stays beside the partitions after a publish and a republish."""
    previous = os.umask(umask)
    try:
        base = tmp_path / "data"
        _write_rolled(base, records(50, status="pending"))
        _commit_if_changed(base, records(60))  # a change: a change record beside the manifest
    finally:
        os.umask(previous)
    dataset = base / "conversions"
    assert [p.name for p in dataset.rglob("*.lock")] == []
    assert [p.name for p in dataset.iterdir() if not p.name.startswith("_")] == ["date=2026-01-15"]
    partition = dataset / "date=2026-01-15"
    names = sorted(p.name for p in partition.iterdir())
    assert "_manifest.json" in names
    assert any(n.startswith("_changes-") for n in names)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in partition.iterdir()}
    assert modes == dict.fromkeys(names, 0o666 & ~umask)
    assert stat.S_IMODE(partition.stat().st_mode) == 0o777 & ~umask
