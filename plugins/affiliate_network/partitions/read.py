"""Reading complete partitions: exactly the files the manifest names, never a ``part-*`` glob
(on an object store a partition may hold files of another attempt until the next cleanup).

Memory: :func:`iter_partition_columns` and :func:`iter_partition_batches` hold one batch of the
columns asked for, whatever the day's size; :func:`read_partition` holds every column of every row.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from affiliate_network.exceptions import StorageError
from affiliate_network.partitions.manifest import PathInput, as_path, open_file, require_complete

#: Rows per batch of :func:`iter_partition_columns`: a few MB of a handful of columns.
COLUMN_BATCH_ROWS = 65_536
#: Rows per batch of :func:`iter_partition_batches` (bounded by the file's row groups too).
BATCH_ROWS = 10_000


def read_partition(partition: PathInput) -> pa.Table:
    """Read a complete Parquet partition's files listed by its manifest (raises otherwise)."""
    part = as_path(partition)
    tables = []
    for entry in require_complete(part, "parquet").files:
        # ParquetFile, not pq.read_table: read_table's dataset scanner drops its last
        # reference to this Python file on a pool thread after returning; when that falls in
        # interpreter shutdown the thread is unwound inside a noexcept destructor and the
        # process aborts (SIGABRT in a script reading a partition).
        with open_file(part / entry.name, "rb") as fh, pq.ParquetFile(fh) as pf:
            tables.append(pf.read())
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def iter_partition_columns(
    partition: PathInput, columns: Sequence[str], *, batch_rows: int = COLUMN_BATCH_ROWS
) -> Iterator[pa.Table]:
    """Yield a complete Parquet partition's ``columns`` in batches, file by file and row group
    by row group.

    :param partition: the partition folder.
    :param columns: the columns to read, in the order wanted.
    :param batch_rows: rows per batch at most.
    :raises StorageError: not a complete Parquet partition, or a file without one of
        ``columns`` (names the file and the columns).
    """
    part = as_path(partition)
    wanted = list(columns)
    for entry in require_complete(part, "parquet").files:
        # ParquetFile, not a dataset scanner: see read_partition.
        with open_file(part / entry.name, "rb") as fh, pq.ParquetFile(fh) as pf:
            missing = [c for c in wanted if c not in pf.schema_arrow.names]
            if missing:
                raise StorageError(f"{part / entry.name} has no column(s) {missing}")
            for batch in pf.iter_batches(batch_size=batch_rows, columns=wanted):
                yield pa.Table.from_batches([batch]).select(wanted)


def iter_partition_records(partition: PathInput) -> Iterator[dict[str, Any]]:
    """Yield the API records of a complete JSON Lines partition, as they were received."""
    part = as_path(partition)
    for entry in require_complete(part, "jsonl").files:
        with open_file(part / entry.name, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            for line in gz:
                if line.strip():
                    yield orjson.loads(line)


def iter_partition_batches(
    partition: PathInput, columns: Iterable[str] | None = None, *, batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """A complete partition's rows as record batches, whichever its format (only ``columns``
    that exist, if given; JSON Lines records as received).

    :raises StorageError: not a complete partition, or a file that is not what the manifest says.
    """
    part = as_path(partition)
    manifest = require_complete(part)
    wanted = None if columns is None else list(dict.fromkeys(columns))
    for entry in manifest.files:
        file = part / entry.name
        try:
            if manifest.format == "parquet":
                with open_file(file, "rb") as fh, pq.ParquetFile(fh) as pf:
                    names = set(pf.schema_arrow.names)
                    cols = None if wanted is None else [c for c in wanted if c in names]
                    yield from pf.iter_batches(batch_size=batch_rows, columns=cols)
            else:
                yield from _jsonl_batches(file, batch_rows)
        except (OSError, ValueError, pa.ArrowException) as err:
            raise StorageError(f"{file}: cannot be read as {manifest.format} ({err})") from None


def _jsonl_batches(file: Any, batch_rows: int) -> Iterator[pa.RecordBatch]:
    rows: list[dict[str, Any]] = []
    with open_file(file, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
        for line in gz:
            if line.strip():
                rows.append(orjson.loads(line))
            if len(rows) == batch_rows:
                yield pa.RecordBatch.from_pylist(rows)
                rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows)
