"""Money of a landed partition and of the sandbox's truth, per (currency, status or events),
read straight from the files (none of the reconciliation's code): the large-world tests compare
the two."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MINOR_DIGITS = {"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0, "KWD": 3, "IDR": 2}

Money = dict[tuple[str, str], tuple[int, Decimal, Decimal]]


def partition_files(part: Path) -> list[Path]:
    """The data files a partition's manifest names."""
    manifest = json.loads((part / "_manifest.json").read_text())
    return [part / entry["name"] for entry in manifest["files"]]


def landed_money(part: Path) -> Money:
    """Per (currency, status or ``events``): rows, payout and revenue of a landed partition,
    read straight from its Parquet files (none of the reconciliation's code)."""
    sums: dict[tuple[str, str], list[Any]] = defaultdict(lambda: [0, Decimal(0), Decimal(0)])
    columns = ["currency_id", "status", "is_event", "payout", "revenue"]
    for path in partition_files(part):
        table = pq.read_table(path, columns=columns)
        kind = pc.if_else(table["is_event"], pa.scalar("events"), table["status"])
        grouped = (
            table.append_column("kind", kind)
            .group_by(["currency_id", "kind"])
            .aggregate([("payout", "sum"), ("revenue", "sum"), ("payout", "count")])
        )
        for row in grouped.to_pylist():
            acc = sums[(row["currency_id"], row["kind"])]
            acc[0] += row["payout_count"]
            acc[1] += row["payout_sum"]
            acc[2] += row["revenue_sum"]
    return {k: (n, Decimal(p), Decimal(r)) for k, (n, p, r) in sums.items()}


def truth_money(truth: dict[str, Any]) -> Money:
    """The sandbox's money truth in the shape of :func:`landed_money`."""
    out = {}
    for currency, t in truth["currencies"].items():
        for kind, agg in [*t["conversions"].items(), ("events", t["events"])]:
            if agg["count"]:
                out[(currency, kind)] = (
                    agg["count"],
                    Decimal(agg["payout"]),
                    Decimal(agg["revenue"]),
                )
    return out
