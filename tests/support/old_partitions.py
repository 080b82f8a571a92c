"""Landed partitions as older versions of the landing wrote them (for upgrade-reading tests)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from affiliate_network.reports.schema import MONEY_FIELDS


def as_version_3(part: Path, payouts: list[float]) -> None:
    """Rewrite a landed partition as schema version 3 wrote it: ``float64`` money."""
    (name,) = [p.name for p in part.glob("*.parquet")]
    table = pq.read_table(part / name)
    columns = []
    for field in table.schema:
        column = table.column(field.name)
        if field.name == "payout":
            column = pa.chunked_array([pa.array(payouts, pa.float64())])
        elif field.name in MONEY_FIELDS:
            column = column.cast(pa.float64())
        columns.append(column)
    fields = [
        pa.field(f.name, pa.float64(), metadata=f.metadata) if f.name in MONEY_FIELDS else f
        for f in table.schema
    ]
    metadata = {**table.schema.metadata, b"schema_version": b"3"}
    pq.write_table(pa.table(columns, schema=pa.schema(fields, metadata=metadata)), part / name)
    data = (part / name).read_bytes()
    manifest = json.loads((part / "_manifest.json").read_text())
    manifest["files"][0].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    manifest["schema"]["version"] = 3
    (part / "_manifest.json").write_text(json.dumps(manifest))
