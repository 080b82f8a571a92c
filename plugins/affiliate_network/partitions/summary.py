"""A partition's per-status summary: rows, conversions, events and money per currency.

Written into the manifest (``summary``, manifest version 2) by the
:class:`~affiliate_network.partitions.write.PartitionWriter` while it writes, so a reader that
wants the day's figures (the network page) reads one small JSON file, never the rows.
:func:`partition_summary` is the one way to get it: the manifest's, or for an older manifest
(version 1, or a JSON Lines partition) computed from exactly the files the manifest names.

Shape (JSON)::

    {"columns": {"status": "status", "event": "is_event", "currency": "currency_id",
                 "amount": "payout"},
     "by_status": {"approved": {"rows": 600, "conversions": 500, "events": 100,
                                "amount": {"conversions": {"USD": "1234.5"},
                                           "events": {"USD": "12"}}}}}

``rows == conversions + events`` for every status; money is exact decimal text per currency
(never added across currencies); a row without a status counts as ``unknown``, one without a
currency under ``?``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa

#: The conversions' columns (:mod:`affiliate_network.reports.schema`).
DEFAULT_COLUMNS: dict[str, str] = {
    "status": "status",
    "event": "is_event",
    "currency": "currency_id",
    "amount": "payout",
}
UNKNOWN_STATUS = "unknown"
UNKNOWN_CURRENCY = "?"


def _text(value: Decimal) -> str:
    text = format(value.normalize(), "f") if value else "0"
    return "0" if text in ("-0", "") else text


@dataclass
class StatusSummary:
    """Accumulates the summary of Arrow tables (one per row group), then :meth:`to_json`.

    :param columns: which column is the status, the event flag, the currency and the amount.
    """

    columns: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_COLUMNS))
    _cells: dict[tuple[str, bool, str], list[Any]] = field(default_factory=dict)

    def applies_to(self, schema: pa.Schema) -> bool:
        """Whether the records hold the status column (nothing to summarise otherwise)."""
        return self.columns["status"] in schema.names

    def add_table(self, table: pa.Table) -> None:
        """Add one table's rows: per distinct cell (a handful) one vector pass, never a Python
        step per row. Neither Arrow's ``group_by`` (it loads ``pyarrow.dataset``) nor a compute
        call given a Python value (``pa.scalar``): both import pandas when it is installed
        (``reports/arrow_values.py`` says why that matters); the cell codes are numpy's.
        """
        import numpy as np
        import pyarrow.compute as pc

        if table.num_rows == 0:
            return
        cols = self.columns
        names = table.schema.names
        n = table.num_rows

        def key(name: str, kind: pa.DataType) -> tuple[Any, pa.Array]:
            column = table.column(name) if name in names else pa.nulls(n, kind)
            encoded = pc.dictionary_encode(column, null_encoding="encode")
            if isinstance(encoded, pa.ChunkedArray):
                encoded = encoded.combine_chunks()
            indices = encoded.indices  # int32, no nulls (a null is a dictionary entry)
            codes = np.frombuffer(
                indices.buffers()[1], dtype=np.int32, count=len(indices), offset=indices.offset * 4
            ).astype(np.int64)
            return codes, encoded.dictionary

        s_codes, s_values = key(cols["status"], pa.string())
        e_codes, e_values = key(cols["event"], pa.bool_())
        c_codes, c_values = key(cols["currency"], pa.string())
        amount = _as_decimal(table.column(cols["amount"])) if cols["amount"] in names else None
        width_e, width_c = len(e_values), len(c_values)
        codes = (s_codes * width_e + e_codes) * width_c + c_codes
        cells, counts = np.unique(codes, return_counts=True)
        for code, count in zip(cells.tolist(), counts.tolist(), strict=True):
            status = s_values[code // (width_e * width_c)].as_py()
            is_event = e_values[(code // width_c) % width_e].as_py()
            currency = c_values[code % width_c].as_py()
            cell = self._cells.setdefault(
                (
                    UNKNOWN_STATUS if status is None else str(status),
                    bool(is_event),
                    UNKNOWN_CURRENCY if currency is None else str(currency),
                ),
                [0, Decimal(0)],
            )
            cell[0] += count
            if amount is not None:
                total = pc.sum(pc.filter(amount, _mask(codes == code))).as_py()
                if total is not None:
                    cell[1] += Decimal(str(total))

    def add_tables(self, tables: Iterable[pa.Table]) -> StatusSummary:
        for table in tables:
            self.add_table(table)
        return self

    def to_json(self) -> dict[str, Any]:
        by_status: dict[str, dict[str, Any]] = {}
        for (status, is_event, currency), (count, amount) in sorted(self._cells.items()):
            entry = by_status.setdefault(
                status,
                {"rows": 0, "conversions": 0, "events": 0,
                 "amount": {"conversions": {}, "events": {}}},
            )  # fmt: skip
            part = "events" if is_event else "conversions"
            entry["rows"] += count
            entry[part] += count
            money = entry["amount"][part]
            money[currency] = _text(Decimal(money.get(currency, "0")) + amount)
        return {"columns": dict(self.columns), "by_status": by_status}


def _mask(values: Any) -> pa.Array:
    """A ``bool`` array from a numpy mask, built from its buffer (no ``pa.array``)."""
    import numpy as np

    bits = np.packbits(values, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def _as_decimal(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Money as decimals (Parquet has them; JSON Lines records give text or numbers)."""
    import pyarrow.compute as pc

    if pa.types.is_decimal(column.type) or pa.types.is_null(column.type):
        return column
    if pa.types.is_floating(column.type) or pa.types.is_integer(column.type):
        column = pc.cast(column, pa.string())
    return pc.cast(column, pa.decimal128(38, 10))


def partition_summary(partition: Any) -> dict[str, Any] | None:
    """The summary of a complete partition: its manifest's (version 2+), else computed from
    the files the manifest names (older manifests, JSON Lines). ``None``: not complete.

    :raises StorageError: a named file cannot be read.
    """
    from affiliate_network.partitions.manifest import complete_manifest
    from affiliate_network.partitions.read import iter_partition_batches

    manifest = complete_manifest(partition)
    if manifest is None:
        return None
    if manifest.summary is not None:
        return manifest.summary
    summary = StatusSummary()
    summary.add_tables(
        pa.Table.from_batches([b])
        for b in iter_partition_batches(partition, columns=list(summary.columns.values()))
    )
    return summary.to_json()
