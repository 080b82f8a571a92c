"""Fabricated landed days, written straight through partitions/ with pyarrow (no network):
a 1,000,000-row day in about a second, for the network page's tests and bench.

The files are real conversion Parquet (the landed schema's columns the page reads, with
``status``, ``is_event``, ``currency_id`` and ``payout``), published with a manifest by the
partitions' own :func:`~affiliate_network.partitions.publish.publish`. The content checksum is
a stand-in (nothing here re-pulls them).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from affiliate_network.partitions.manifest import FileEntry, Manifest
from affiliate_network.partitions.publish import Attempt, publish
from affiliate_network.partitions.summary import StatusSummary

STATUSES = ("approved", "pending", "rejected")
CURRENCIES = ("USD", "EUR")
#: Payout of row i (in its currency): 1.25 + (i % 7); exact in decimal128(18, 6).
PAYOUT_STEP = Decimal("1.25")


def fabricated_table(rows: int, *, events_every: int = 5) -> pa.Table:
    """``rows`` conversions: status cycles over :data:`STATUSES`, currency over
    :data:`CURRENCIES` by ``i // 3``, every ``events_every``-th row an event."""
    import numpy as np

    idx = np.arange(rows, dtype=np.int64)
    status = pa.DictionaryArray.from_arrays(
        pa.array(idx % len(STATUSES), pa.int8()), pa.array(STATUSES)
    ).cast(pa.string())
    currency = pa.DictionaryArray.from_arrays(
        pa.array((idx // 3) % len(CURRENCIES), pa.int8()), pa.array(CURRENCIES)
    ).cast(pa.string())
    values = pa.array([PAYOUT_STEP + k for k in range(7)], pa.decimal128(18, 6))
    payout = values.take(pa.array(idx % 7))
    return pa.table(
        {
            "conversion_id": pa.array(idx),
            "status": status,
            "is_event": pa.array(idx % events_every == events_every - 1),
            "currency_id": currency,
            "payout": payout,
        }
    )


def expected_summary(table: pa.Table) -> dict[str, Any]:
    """What the page must show for ``table`` (computed the slow, obvious way on the side)."""
    out: dict[str, Any] = {}
    for row in table.select(["status", "is_event", "currency_id", "payout"]).to_pylist():
        empty = {
            "rows": 0,
            "conversions": 0,
            "events": 0,
            "conversions_money": {},
            "events_money": {},
        }
        entry = out.setdefault(row["status"], empty)
        part = "events" if row["is_event"] else "conversions"
        entry["rows"] += 1
        entry[part] += 1
        money = entry[f"{part}_money"]
        money[row["currency_id"]] = money.get(row["currency_id"], Decimal(0)) + row["payout"]
    return out


def publish_day(
    base: Path,
    day: dt.date,
    table: pa.Table,
    *,
    run_id: str | None = None,
    file_rows: int = 250_000,
    with_summary: bool = True,
    dataset: str = "conversions",
) -> Path:
    """Publish ``table`` as ``<base>/<dataset>/date=<day>`` (Parquet files of ``file_rows``)
    with its manifest (version 2 with the summary, or a version 1 one without)."""
    keys = {"date": day.isoformat()}
    attempt = Attempt.start(str(base), dataset, keys)
    staging = Path(attempt.staging.path)
    staging.mkdir(parents=True, exist_ok=True)
    files = []
    for n, start in enumerate(range(0, max(table.num_rows, 1), file_rows)):
        part = table.slice(start, file_rows)
        name = f"part-{n:05d}.parquet"
        pq.write_table(part, staging / name, compression="zstd")
        data = (staging / name).read_bytes()
        files.append(FileEntry(name, part.num_rows, len(data), hashlib.sha256(data).hexdigest()))
    summary = StatusSummary().add_tables([table]).to_json() if with_summary else None
    manifest = Manifest(
        dataset=dataset,
        partition=keys,
        format="parquet",
        files=files,
        row_count=table.num_rows,
        content_checksum=f"sha256:fabricated-{table.num_rows}",
        duplicates_dropped=0,
        request={"from": day.isoformat(), "to": day.isoformat(), "conn_id": "fabricated"},
        pulled_at=f"{day + dt.timedelta(days=1)}T02:00:00Z",
        package_version="fabricated",
        schema={"name": "conversion", "version": 0, "fingerprint": "fabricated"},
        summary=summary,
        run_id=run_id,
        manifest_version=2 if with_summary else 1,
    )
    publish(attempt, manifest, None)
    return Path(attempt.partition.path)
