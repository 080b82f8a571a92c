"""The landed conversions as a person's own tools see them: DuckDB and pandas (issue 19)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pandas as pd
import pytest

from affiliate_network.hooks._paging import Page
from affiliate_network.partitions.manifest import read_manifest
from affiliate_network.partitions.read import read_partition
from affiliate_network.partitions.write import PartitionWriter
from affiliate_network.reports.schema import (
    CONVERSION_SCHEMA_VERSION,
    conversion_schema,
)

SCHEMA = conversion_schema()
#: Days landed by the fixture: one through raw pages, one through dicts with columns missing.
FULL_DAY, SPARSE_DAY = "2026-01-15", "2026-01-16"
#: The types DuckDB must report for the columns people filter and sum on.
DUCKDB_TYPES = {
    "conversion_id": "VARCHAR",
    "sub1": "VARCHAR",
    "coupon_code": "VARCHAR",
    "conversion_unix_timestamp": "TIMESTAMP WITH TIME ZONE",
    "click_unix_timestamp": "TIMESTAMP WITH TIME ZONE",
    "dma": "BIGINT",
    "payout": "DECIMAL(18,6)",
    "revenue": "DECIMAL(18,6)",
    "is_scrub": "BOOLEAN",
    "rel_network_offer_id": "BIGINT",
}


def _conversion(i: int) -> dict[str, Any]:
    return {
        "conversion_id": f"c{i:07d}",
        "status": "approved",
        "sub1": f"s{i}",
        "sub2": "",  # the API's "no value"
        "coupon_code": "SAVE" if i % 2 else "",
        "conversion_unix_timestamp": 1768435200 + i,
        "click_unix_timestamp": 1768435100 + i,
        "dma": i % 5,
        "payout": 1.5,
        "revenue": 3,
        "is_scrub": False,
        "relationship": {"offer": {"network_offer_id": 100}},
    }


def _land(base: Path, day: str, records: list[dict[str, Any]], *, pages: bool) -> str:
    with PartitionWriter(base, "conversions", {"date": day}, SCHEMA) as writer:
        if pages:
            body = orjson.dumps({"conversions": records, "paging": {"total_count": len(records)}})
            writer.write_pages([Page(1, body, "conversions", len(records))])
        else:
            writer.write(records)
        return writer.commit(request={}).path


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("landed")
    _land(base, FULL_DAY, [_conversion(i) for i in range(50)], pages=True)
    sparse = [_conversion(i) for i in range(50, 80)]
    for record in sparse:  # two columns absent from every record of the day
        del record["coupon_code"], record["click_unix_timestamp"]
    _land(base, SPARSE_DAY, sparse, pages=False)
    return base


def _files(base: Path, day: str) -> str:
    return str(base / "conversions" / f"date={day}" / "*.parquet")


def _duckdb_types(glob: str) -> dict[str, str]:
    query = "DESCRIBE SELECT * FROM read_parquet($glob)"
    rows = duckdb.execute(query, {"glob": glob}).fetchall()
    return {name: typ for name, typ, *_ in rows}


def test_duckdb_sees_the_same_types_in_every_partition(landed: Path) -> None:
    full, sparse = (
        _duckdb_types(_files(landed, FULL_DAY)),
        _duckdb_types(_files(landed, SPARSE_DAY)),
    )
    assert full == sparse  # the day without coupon_code / click timestamps is typed the same
    assert {name: full[name] for name in DUCKDB_TYPES} == DUCKDB_TYPES


def test_duckdb_reads_timestamps_and_nulls_across_days(landed: Path) -> None:
    glob = str(landed / "conversions" / "*" / "*.parquet")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    first, empty_sub2, null_sub2, null_coupons, days = con.execute(
        """SELECT min(conversion_unix_timestamp)::VARCHAR,
                   count(*) FILTER (WHERE sub2 = ''),
                   count(*) FILTER (WHERE sub2 IS NULL),
                   count(*) FILTER (WHERE coupon_code IS NULL),
                   count(DISTINCT date)
            FROM read_parquet($glob, hive_partitioning = true)""",
        {"glob": glob},
    ).fetchone()
    assert first == "2026-01-15 00:00:00+00"
    assert (empty_sub2, null_sub2) == (0, 80)  # "" landed as a real null
    assert null_coupons == 25 + 30  # the "" of the full day, and the whole sparse day
    assert days == 2


def test_pandas_gets_utc_datetimes_decimals_and_nulls(landed: Path) -> None:
    frame = pd.read_parquet(landed / "conversions" / f"date={FULL_DAY}")
    assert str(frame["conversion_unix_timestamp"].dtype) == "datetime64[ms, UTC]"
    assert frame["conversion_unix_timestamp"].iloc[0] == pd.Timestamp("2026-01-15", tz="UTC")
    assert str(frame["payout"].dtype) == "object"  # Python Decimals: exact amounts
    assert set(frame["payout"]) == {Decimal("1.500000")}
    assert frame["sub2"].isna().all()
    sparse = pd.read_parquet(landed / "conversions" / f"date={SPARSE_DAY}")
    assert sparse.dtypes.equals(frame.dtypes)
    assert sparse["click_unix_timestamp"].isna().all()


def test_the_schema_version_is_in_the_file_and_the_manifest(landed: Path) -> None:
    part = landed / "conversions" / f"date={FULL_DAY}"
    manifest = read_manifest(part)
    assert manifest is not None
    assert manifest.schema["version"] == CONVERSION_SCHEMA_VERSION
    metadata = read_partition(part).schema.metadata
    assert metadata[b"schema_version"] == str(CONVERSION_SCHEMA_VERSION).encode()
