"""Landed or exported rows as the rules read them: back to the API's values.

``evaluate`` reads a file, a partition or a dataset folder of what the package lands, or rows
exported from it (JSON Lines or a JSON array, optionally gzipped); the backtest turns each
landed row into a record here (:func:`as_record`). Parquet is read with pyarrow, never Airflow.
"""

from __future__ import annotations

import datetime as dt
import gzip
import itertools
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from affiliate_network.exceptions import StorageError

__all__ = ["as_record", "load_records", "read_json_rows"]

#: Suffixes of the files the package lands (``partitions.write.FORMAT_SUFFIX``) and of
#: exported rows; anything else in a folder is skipped (manifests, locks).
_READERS = (".parquet", ".jsonl.gz", ".json.gz", ".jsonl", ".json", ".ndjson")


def _record_files(path: Path) -> list[Path]:
    """The data files under ``path`` (itself if a file), skipping ``_``/``.`` folders.

    Like the query engines, in-flight ``_staging`` and replaced ``_trash`` data is never read.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise StorageError(f"{path}: no such file or folder")
    files = [
        f
        for f in sorted(path.rglob("*"))
        if f.is_file()
        and f.name.endswith(_READERS)
        and not any(p.startswith(("_", ".")) for p in f.relative_to(path).parts)
    ]
    if not files:
        raise StorageError(f"{path}: no {', '.join(_READERS)} file in this folder")
    return files


def _read_parquet(path: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=10_000):
        yield from batch.to_pylist()


def read_json_rows(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        head = handle.read(1)
        while head.isspace():
            head = handle.read(1)
        if head == "[":  # a JSON array of rows (pandas ``orient="records"``, DuckDB ARRAY)
            yield from json.loads(head + handle.read())
            return
        for line in itertools.chain([head + handle.readline()], handle):
            if line.strip():
                yield json.loads(line)


def _as_api_value(value: Any) -> Any:
    """A typed storage value as the API sends it (Unix seconds, plain numbers)."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return int(aware.timestamp())
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def _spec_typed(record: dict[str, Any]) -> None:
    """Exported text back to the spec's JSON types: numbers, and timestamps as Unix seconds.

    An export writes a typed timestamp as ISO text and a decimal as text; the API sends
    numbers, and the rules (ages, ``sale_amount``) compare numbers.
    """
    from affiliate_network.api.record_fields import INTEGER_FIELDS, NUMBER_FIELDS

    for key in (*INTEGER_FIELDS, *NUMBER_FIELDS):
        value = record.get(key)
        if not isinstance(value, str) or not value.strip():
            continue
        try:
            number = float(value)
        except ValueError:
            try:
                stamp = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                continue  # left as is: the rules see what the file holds
            record[key] = _as_api_value(stamp)
            continue
        record[key] = int(number) if key in INTEGER_FIELDS and number.is_integer() else number


def _decode_json(value: Any, what: str, source: Path) -> Any:
    if not isinstance(value, str) or not value:
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise StorageError(f"{source}: {what} is not valid JSON ({err.msg})") from None


def as_record(row: dict[str, Any], source: Path) -> dict[str, Any]:
    """A landed or exported row as the API's conversion record, which the rules expect.

    ``relationship`` stored as a JSON string (the Parquet column, any export of it) is decoded;
    top-level fields the schema keeps in ``extra_fields`` come back; typed values (timestamps,
    decimals) and their exported text become what the API sends (Unix seconds, numbers). The
    flattened ``rel_*`` columns stay: no rule can name them (unknown fields are rejected), so
    they change no decision.

    :param row: one row of a landed file or an export.
    :param source: the file, for error messages.
    """
    record = {key: _as_api_value(value) for key, value in row.items()}
    _spec_typed(record)
    if "relationship" in record:
        record["relationship"] = _decode_json(record["relationship"], "relationship", source)
    extra = _decode_json(record.pop("extra_fields", None), "extra_fields", source)
    if isinstance(extra, dict):
        for key, value in extra.items():
            record.setdefault(key, value)
    return record


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Conversion records from what the package lands or exports (see the module docstring).

    :param path: a file or a folder of files.
    :raises StorageError: nothing readable there, a file that is not what its name says, or a
        row that is not a JSON object.
    """
    records: list[dict[str, Any]] = []
    for file in _record_files(Path(path)):
        rows = _read_parquet(file) if file.name.endswith(".parquet") else read_json_rows(file)
        try:
            for row in rows:
                if not isinstance(row, dict):
                    raise StorageError(f"{file}: a row is a {type(row).__name__}, not an object")
                records.append(as_record(row, file))
        except (ValueError, OSError) as err:  # bad JSON, not Parquet, not gzip, not UTF-8
            raise StorageError(f"{file}: cannot be read as {_kind(file)} ({err})") from None
    return records


def _kind(file: Path) -> str:
    return "Parquet" if file.name.endswith(".parquet") else "JSON rows"
