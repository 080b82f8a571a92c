"""Atomic, streaming partition writer with a ``_manifest.json`` commit marker.

Layout (Hive style, readable by DuckDB/Spark/pyarrow.dataset)::

    <base>/<dataset>/date=YYYY-MM-DD/part-00000.parquet   (or part-00000.jsonl.gz)
    <base>/<dataset>/date=YYYY-MM-DD/part-00001.parquet   (Parquet: one file per 250,000 rows)
    <base>/<dataset>/date=YYYY-MM-DD/_manifest.json
    <base>/<dataset>/date=YYYY-MM-DD/_changes-<ns>-<token>.json  (what a re-pull changed)
    <base>/<dataset>/_staging/...                          (in-flight writes; ignored by readers)
    <base>/<dataset>/_trash/...                            (replaced partitions being removed)

Rules a reader relies on:

* **A partition is complete if and only if it holds ``_manifest.json``** and the files it lists
  exist with the listed sizes (:func:`is_complete`). Query engines skip ``_``-prefixed paths, so
  in-flight data under ``_staging`` is never picked up by a glob.
* Data is first written under ``_staging/<partition>.<token>/`` (a temporary name). Publishing
  then happens in one step: on a local filesystem the staged directory, manifest included, is
  renamed onto the partition path (``rename(2)`` is atomic); the previous partition is first
  renamed to ``_trash`` and removed afterwards; concurrent publishes of one partition take
  turns on a lock file (``.<partition>.lock``, hidden from query engines). On object stores,
  which have no directory rename and no lock, each attempt's files carry the attempt's token
  in their names (``part-00000-<token>.parquet``), so two writers never overwrite each other's
  files. The order is: copy the staged files in beside the previous ones (the previous manifest
  still names only its own files), write the manifest **last** (a single PUT, atomic: it names
  exactly this attempt's files), then remove the files the current manifest does not name,
  of attempts that are over (their ``_staging`` folder is gone, or older than
  :data:`STALE_AFTER_S`): a writer still in flight keeps its files until it has published.
  The manifest is read again just before removing, so a file it names is never removed.
  Either way a crash at any point leaves the previous complete partition (or none), never a
  half partition that looks complete; on an object store it may leave unnamed files behind,
  removed by the next publish.
* **Readers read exactly the files the manifest names** (:func:`read_partition`,
  :func:`partition_files`), never a ``part-*`` glob: on an object store a partition may hold
  files of another attempt until the next cleanup.
* A rerun replaces the partition exactly: the manifest names only the new files, and the
  previous files are removed (at once locally; on an object store once no writer needs them).
* Change-aware publishing (``commit(only_if_changed=True)``, the conversion landing's): a pull
  with the published content checksum publishes nothing, and the partition stays byte for
  byte; a changed one publishes a change record (:mod:`~affiliate_network.reports.changes`)
  with it. Change records are named by no manifest and are kept: carried into the new folder
  locally, never removed by the object-store cleanup.

The content checksum identifies the data, not the bytes or the moment: it is a multiset hash
(sum modulo 2**256 of the SHA-256 of each record's canonical bytes, see
:meth:`~affiliate_network.reports.schema.RecordSchema.prepare`, plus the row count), so it is
independent of page order, of the format and of the pull time. The pull time is in the manifest
(``pulled_at``) but not in the checksum. Duplicates by key inside one pull are dropped (first
occurrence kept) and counted. The seen keys are the only memory that grows with the day, 4
bytes per kept row (:mod:`~affiliate_network.seen_keys`); everything else is bounded
by one API page, the row group (:data:`DEFAULT_ROW_GROUP_ROWS`, one converting and one being
written) and, for Parquet, the footer of one file (:data:`DEFAULT_FILE_ROWS` rows per file).
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import itertools
import logging
import os
import shutil
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from airflow.sdk import ObjectStoragePath

from affiliate_network import __version__
from affiliate_network.exceptions import (
    ConfigValidationError,
    StorageError,
)
from affiliate_network.gcpause import paused_gc
from affiliate_network.report_columns import FORMATS
from affiliate_network.reports.changes import (
    CHANGES_PREFIX,
    PartitionChanges,
    RecordDiff,
    diff_partitions,
    find_run_changes,
)
from affiliate_network.reports.schema import (
    FORMAT_SUFFIX,
    RecordSchema,
    landing_memory_pool,
    read_conversions,
)
from affiliate_network.seen_keys import SeenKeys

log = logging.getLogger(__name__)

MANIFEST_NAME = "_manifest.json"
MANIFEST_VERSION = 1
STAGING_DIR = "_staging"
TRASH_DIR = "_trash"
#: Default Parquet row group size: bounds the Arrow memory held before a row group is flushed
#: (one API page: nothing waits for a second page; 4,000 held ~8 MB more peak RSS, 10,000
#: ~45 MB more, for no measurable speed).
DEFAULT_ROW_GROUP_ROWS = 2_000
#: Records converted to Arrow at a time (one API page is typically 2,000).
BATCH_ROWS = 2_000
#: Encoded batches waiting for the writer thread at most (bounds memory: each holds a page).
MAX_BATCHES_IN_FLIGHT = 1
#: Parquet rows per file: a Parquet writer holds every row group's metadata until its file
#: closes (~60 kB per row group for conversions), so a large day is split into files of this
#: many rows (a new file once a row group reaches it) and the writer's memory stays flat.
DEFAULT_FILE_ROWS = 250_000
#: C++ write buffer in front of the data file (Parquet). A 2,000-row group compresses to about
#: 0.3 MB, so this is about one Python write() per few row groups; 8 MiB held ~8 MB more RSS.
SINK_BUFFER_BYTES = 1 << 20
_LOCAL_PROTOCOLS = frozenset({"", "file", "local"})
_MOD = 1 << 256


def as_storage_path(base: str | os.PathLike[str] | ObjectStoragePath) -> ObjectStoragePath:
    """An :class:`ObjectStoragePath` for a local path or URL (``s3://bucket/x``, ``file:///x``)."""
    if isinstance(base, ObjectStoragePath):
        return base
    return ObjectStoragePath(os.fspath(base))


def partition_path(
    base: str | os.PathLike[str] | ObjectStoragePath, dataset: str, **keys: Any
) -> ObjectStoragePath:
    """``<base>/<dataset>/k1=v1/k2=v2`` (keys in the order given)."""
    path = as_storage_path(base) / dataset
    for key, value in keys.items():
        path = path / f"{key}={value}"
    return path


class ContentChecksum:
    """Order-independent checksum of a multiset of records (see the module docstring)."""

    def __init__(self) -> None:
        self._sum = 0
        self.rows = 0

    def add(self, canonical: bytes) -> None:
        """Add one record given as its canonical JSON bytes."""
        self._sum = (self._sum + int.from_bytes(hashlib.sha256(canonical).digest(), "big")) % _MOD
        self.rows += 1

    def add_many(self, canonicals: Sequence[bytes]) -> None:
        """Add records given as their canonical JSON bytes (same result as :meth:`add` each)."""
        sha256, from_bytes = hashlib.sha256, int.from_bytes
        total = sum(from_bytes(sha256(c).digest(), "big") for c in canonicals)
        self._sum = (self._sum + total) % _MOD
        self.rows += len(canonicals)

    def hexdigest(self) -> str:
        """``sha256:<hex>`` over the row count and the sum of record hashes."""
        final = hashlib.sha256(f"rows={self.rows};sum={self._sum:064x}".encode()).hexdigest()
        return f"sha256:{final}"


@dataclass
class FileEntry:
    """One data file of a partition."""

    name: str
    rows: int
    bytes: int
    sha256: str


@dataclass
class Manifest:
    """Contents of ``_manifest.json``: what a partition holds and how it was produced.

    :param dataset: dataset name (``conversions``, ``affiliate_reports``).
    :param partition: partition keys, e.g. ``{"date": "2026-01-31"}``.
    :param format: ``parquet`` or ``jsonl``.
    :param files: data files with row counts, sizes and byte SHA-256.
    :param row_count: rows landed (after dropping duplicates).
    :param content_checksum: order-independent checksum of the records (not of the bytes).
    :param duplicates_dropped: records dropped because their key was already seen in this pull.
    :param request: request parameters of the pull (never credentials).
    :param pulled_at: UTC time the pull finished, ISO 8601.
    :param package_version: version of this package that wrote the partition.
    :param schema: record schema name, version and fingerprint.
    :param stats: free-form pull statistics (pages, retries, seconds).
    """

    dataset: str
    partition: dict[str, str]
    format: str
    files: list[FileEntry]
    row_count: int
    content_checksum: str
    duplicates_dropped: int
    request: dict[str, Any]
    pulled_at: str
    package_version: str
    schema: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)
    manifest_version: int = MANIFEST_VERSION

    def to_json(self) -> bytes:
        """Manifest bytes (indented, keys sorted: easy to diff)."""
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    @classmethod
    def from_json(cls, data: bytes | str) -> Manifest:
        """Parse manifest bytes; raises :class:`StorageError` when malformed."""
        try:
            raw = orjson.loads(data)
            raw["files"] = [FileEntry(**f) for f in raw["files"]]
            return cls(**raw)
        except (orjson.JSONDecodeError, KeyError, TypeError) as err:
            raise StorageError(f"malformed {MANIFEST_NAME}: {err}") from err


@dataclass
class PublishResult:
    """What :meth:`PartitionWriter.commit` returns.

    :param path: the partition.
    :param manifest: its manifest (the previous one, kept, when nothing changed).
    :param changed: whether the partition's content changed (or this run changed it before:
        see :func:`~affiliate_network.reports.changes.find_run_changes`).
    :param rewritten: whether this commit published files (``False``: the partition was
        left byte for byte as it was).
    :param changes: what changed (``None`` when nothing did, or changes were not tracked).
    """

    path: str
    manifest: Manifest
    changed: bool = True
    rewritten: bool = True
    changes: PartitionChanges | None = None

    @property
    def rows(self) -> int:
        return self.manifest.row_count


class _HashingWriter:
    """Write-only file wrapper counting bytes and hashing them on the way to storage."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._sha = hashlib.sha256()
        self.size = 0
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._sha.update(data)
        self.size += len(data)
        self._raw.write(bytes(data) if isinstance(data, memoryview) else data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._raw.flush()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._raw.close()

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def _open(path: ObjectStoragePath, mode: str) -> Any:
    # The filesystem's own file object: ObjectStoragePath.open() wraps it to report lineage on
    # every write() call (a collector lookup per call, thousands per partition).
    return path.fs.open(path.path, mode)


def _write_bytes(path: ObjectStoragePath, data: bytes) -> None:
    path.fs.pipe_file(path.path, data)


def _is_local(path: ObjectStoragePath) -> bool:
    return (path.protocol or "") in _LOCAL_PROTOCOLS


class PartitionWriter:
    """Stream records into one partition, then publish it atomically with its manifest.

    Use as a context manager: an exception inside the block discards the staged data and
    leaves the published partition (if any) untouched::

        with PartitionWriter(base, "conversions", {"date": "2026-01-31"},
                             conversion_schema()) as writer:
            writer.write(records)                       # any iterable, consumed lazily
            result = writer.commit(request={...})

    :param base: output base (local path, URL or :class:`ObjectStoragePath`).
    :param dataset: dataset folder under ``base`` (``conversions``, ``affiliate_reports``).
    :param keys: partition keys in path order, e.g. ``{"date": "2026-01-31"}``.
    :param schema: record schema (Arrow layout, dedupe key).
    :param format: ``parquet`` (default) or ``jsonl`` (gzip JSON Lines).
    :param row_group_rows: Parquet rows per row group (bounds memory).
    :param compression: Parquet codec (``zstd`` by default).
    :param dedupe: drop records whose ``schema.key_field`` was already written by this writer.
    :param file_rows: Parquet rows per file (``part-00000``, ``part-00001``, ...); JSON Lines
        is always one file (a gzip stream holds nothing per row).
    """

    def __init__(
        self,
        base: ObjectStoragePath | str | os.PathLike[str],
        dataset: str,
        keys: dict[str, str],
        schema: RecordSchema,
        *,
        format: str = "parquet",
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        compression: str = "zstd",
        dedupe: bool = True,
        file_rows: int = DEFAULT_FILE_ROWS,
    ) -> None:
        if format not in FORMATS:
            raise ConfigValidationError(f"format {format!r}: expected one of {list(FORMATS)}")
        if row_group_rows < 1:
            raise ConfigValidationError("row_group_rows must be positive")
        if file_rows < 1:
            raise ConfigValidationError("file_rows must be positive")
        if not keys:
            raise ConfigValidationError("a partition needs at least one key (e.g. date)")
        self.dataset = dataset
        self.keys = {k: str(v) for k, v in keys.items()}
        self.partition = partition_path(base, dataset, **self.keys)
        self.dataset_root = as_storage_path(base) / dataset
        flat = "__".join(f"{k}={v}" for k, v in self.keys.items())
        self._flat = flat
        self.schema = schema
        self.format = format
        self.row_group_rows = row_group_rows
        self.compression = compression
        self.dedupe = dedupe and schema.key_field is not None
        self.token = f"{int(time.time())}-{uuid.uuid4().hex[:12]}"
        self.staging = self.dataset_root / STAGING_DIR / f"{flat}.{self.token}"
        self._trash = self.dataset_root / TRASH_DIR / f"{flat}.{self.token}"
        self.file_rows = file_rows
        self._files: list[FileEntry] = []  # closed data files, in order
        self._file_rows_written = 0  # rows in the open data file (writer thread)
        self.checksum = ContentChecksum()
        self.duplicates_dropped = 0
        self._seen: SeenKeys | None = None  # opened with the files
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._out: _HashingWriter | None = None
        self._pq_writer: pq.ParquetWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._gz: gzip.GzipFile | None = None
        self._closed = False
        self._opened = False
        self._rows = 0
        self._jobs: deque[Future[pa.Table | None]] = deque()
        self._executor: ThreadPoolExecutor | None = None
        self._write_future: Future[None] | None = None
        self._committed = False

    # -- context management ------------------------------------------------------------------

    def __enter__(self) -> PartitionWriter:
        self._open()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._committed:
            self.abort()

    def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        _remove_stale(self.dataset_root)
        self.staging.mkdir(parents=True, exist_ok=True)
        if self.dedupe:
            self._seen = SeenKeys()
        # One writer thread: checksum, Arrow conversion and file writes, in submission order.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="partition-writer")
        self._open_file()

    @property
    def file_name(self) -> str:
        """Name of the data file being written: ``part-00000.parquet`` first on a local
        filesystem, ``part-00000-<token>.parquet`` on an object store (see the module
        docstring: two writers of one partition never share a file name there)."""
        attempt = "" if _is_local(self.partition) else f"-{self.token}"
        return f"part-{len(self._files):05d}{attempt}{FORMAT_SUFFIX[self.format]}"

    def _open_file(self) -> None:
        """Open the next data file (on the writer thread once writing has started)."""
        self._out = _HashingWriter(_open(self.staging / self.file_name, "wb"))
        self._file_rows_written = 0
        if self.format == "parquet":
            # Arrow calls the sink's write() hundreds of times per row group: through a Python
            # file object each call is a GIL hand-off from the writer thread, stalled behind the
            # thread parsing pages. A C++ buffer in between makes that a few large writes.
            self._sink = pa.BufferedOutputStream(
                pa.PythonFile(self._out, mode="w"), buffer_size=SINK_BUFFER_BYTES
            )
            self._pq_writer = pq.ParquetWriter(
                self._sink,
                self.schema.arrow_schema,
                memory_pool=landing_memory_pool(),
                compression=self.compression,
                use_dictionary=True,
                write_statistics=_statistics_columns(self.schema.arrow_schema),
            )
        else:
            # mtime=0 and no file name: the same records give the same gzip bytes.
            self._gz = gzip.GzipFile(
                filename="", mode="wb", fileobj=self._out, mtime=0, compresslevel=6
            )

    # -- writing -----------------------------------------------------------------------------

    @property
    def rows(self) -> int:
        """Records written so far (after dropping duplicates)."""
        return self._rows

    def write(self, records: Iterable[dict[str, Any]]) -> int:
        """Consume ``records`` lazily, in batches; return how many were written (not dropped)."""
        self._open()
        before = self.rows
        # Pulled pages are hundreds of thousands of fresh containers each, freed a page later,
        # with no reference cycles: generational GC would traverse every page's objects again
        # and again (measured: ~15 % of the landing's CPU). Paused for the stream, as
        # ``loads_without_gc`` does for one page; whatever cycles appear meanwhile (a retried
        # request's traceback) are collected once it is back on.
        with paused_gc():
            # Never hold more than a row group in Python objects either.
            batch_rows = min(BATCH_ROWS, self.row_group_rows)
            batch: list[dict[str, Any]] = []
            for record in records:
                batch.append(record)
                if len(batch) >= batch_rows:
                    self.write_batch(batch)
                    batch = []
            if batch:
                self.write_batch(batch)
        return self.rows - before

    def write_pages(self, pages: Iterable[Any]) -> int:
        """Consume unparsed pages (:class:`~affiliate_network.hooks._paging.Page`, from a pull
        with ``raw_pages=True``); return how many records were written (not dropped).

        Needs a schema with ``encode_page`` (conversions): records never become Python dicts.
        """
        self._open()
        encode_page = getattr(self.schema, "encode_page", None)
        if encode_page is None:
            raise StorageError(f"{self.schema.name} records cannot be written from raw pages")
        before = self.rows
        with paused_gc():  # as in write()
            for page in pages:
                if self._closed:
                    raise StorageError("writer already closed")
                payload, canonicals, dropped = encode_page(
                    page.content, page.key, self._seen, self.format, page.records
                )
                self.duplicates_dropped += dropped
                del page  # the page's body is in the payload now (Parquet) or not needed
                self._submit(payload, canonicals)
                # Not held while the next page is fetched and indexed: the writer thread has
                # the payload, and the canonicals are hashed.
                del payload, canonicals
        return self.rows - before

    def write_batch(self, records: list[dict[str, Any]]) -> None:
        """Write one batch (typically one API page).

        On this thread: drop duplicates, encode (:meth:`RecordSchema.encode`) and hash for
        the content checksum. On the writer thread, in submission order: build the Arrow table
        (or compress the JSON Lines) and write row groups. At most
        :data:`MAX_BATCHES_IN_FLIGHT` encoded batches wait, so memory stays bounded; an error
        on the writer thread is raised here (or at :meth:`commit`), before anything is published.
        """
        self._open()
        if self._closed:
            raise StorageError("writer already closed")
        key = self.schema.key_field
        if self._seen is not None and key is not None:  # dedupe implies a key field
            mask = self._seen.add_many([record.get(key) for record in records])
            kept = list(itertools.compress(records, mask))
            self.duplicates_dropped += len(records) - len(kept)
            records = kept
        if not records:
            return
        self._submit(*self.schema.encode(records, self.format))

    def _submit(self, payload: Any, canonicals: list[bytes]) -> None:
        if not canonicals:
            return
        # Hashed here, not on the writer thread: hashlib drops and retakes the GIL for every
        # record over 2 kB, and each retake there would wait out this thread's switch interval.
        self.checksum.add_many(canonicals)
        self._rows += len(canonicals)
        assert self._executor is not None
        self._jobs.append(self._executor.submit(self._convert, payload))
        while len(self._jobs) > MAX_BATCHES_IN_FLIGHT:
            self._collect_one()

    def _convert(self, payload: Any) -> pa.Table | None:
        """Writer thread: the Arrow table of a batch (Parquet), or its lines compressed (JSONL)."""
        if self.format == "parquet":
            return self.schema.to_arrow(payload)
        assert self._gz is not None
        self._file_rows_written += len(payload)
        payload.append(b"")
        self._gz.write(b"\n".join(payload))
        return None

    def _collect_one(self) -> None:
        """Take the oldest converted batch; flush a row group once enough rows are pending."""
        table = self._jobs.popleft().result()  # re-raises a writer-thread error here
        if table is not None and table.num_rows:
            self._pending.append(table)
            self._pending_rows += table.num_rows
            if self._pending_rows >= self.row_group_rows:
                self._flush_row_group()

    def _flush_row_group(self) -> None:
        """Hand the pending batches to the writer thread as one row group.

        Parquet encoding and compression run in C++ without the GIL, so they overlap with the
        next pages being parsed and encoded. At most one row group is in flight: memory is
        bounded by two row groups.
        """
        if self._pending and self.format == "parquet":
            table = pa.concat_tables(self._pending)
            self._pending = []
            self._pending_rows = 0
            self._wait_for_write()
            assert self._executor is not None
            self._write_future = self._executor.submit(self._write_row_group, table)

    def _write_row_group(self, table: pa.Table) -> None:
        """Writer thread: one row group; the file is closed once it holds ``file_rows``."""
        if self._pq_writer is None:
            self._open_file()
        assert self._pq_writer is not None
        self._pq_writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self._file_rows_written += table.num_rows
        if self._file_rows_written >= self.file_rows:
            self._close_file()  # the next row group, if any, opens the next file

    def _close_file(self) -> None:
        """Close the open data file and list it (its size and SHA-256 are final now)."""
        if self._pq_writer is not None:
            self._pq_writer.close()
            self._pq_writer = None
            assert self._sink is not None
            if not self._sink.closed:
                self._sink.close()  # flushes the buffer into the file
        if self._gz is not None:
            self._gz.close()
            self._gz = None
        assert self._out is not None
        self._out.close()
        self._files.append(
            FileEntry(
                name=self.file_name,
                rows=self._file_rows_written,
                bytes=self._out.size,
                sha256=self._out.hexdigest(),
            )
        )
        self._out = None

    def _wait_for_write(self) -> None:
        if self._write_future is not None:
            future, self._write_future = self._write_future, None
            future.result()  # re-raises a write error here, on the caller's thread

    def _shutdown_executor(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _close_files(self) -> list[FileEntry]:
        self._open()
        while self._jobs:
            self._collect_one()
        self._flush_row_group()
        self._wait_for_write()
        self._shutdown_executor()  # the writer thread is done: the rest happens here
        if self._out is not None or not self._files:
            if self._out is None:  # an empty day still lands one (empty) file with the schema
                self._open_file()
            self._close_file()
        self._closed = True
        if self.checksum.rows != self._rows:  # pragma: no cover - an invariant, not input
            raise StorageError(f"checksummed {self.checksum.rows} rows, wrote {self._rows}")
        if sum(f.rows for f in self._files) != self._rows:  # pragma: no cover - invariant
            raise StorageError(f"files hold {[f.rows for f in self._files]}, wrote {self._rows}")
        return list(self._files)

    # -- publishing ----------------------------------------------------------------------------

    def commit(
        self,
        *,
        request: dict[str, Any],
        stats: dict[str, Any] | None = None,
        only_if_changed: bool = False,
        status_field: str | None = None,
        run_id: str | None = None,
    ) -> PublishResult:
        """Close the data file, write the manifest, and publish the partition in one step.

        With ``only_if_changed``, a pull whose content equals the published partition's (same
        content checksum, row count, format and schema) publishes nothing: the staged files are
        discarded and the partition, manifest included, stays byte for byte as it was. A
        changed one is compared with the partition it replaces and the change record
        (:class:`~affiliate_network.reports.changes.PartitionChanges`) is published with it as
        ``_changes-<ns>-<token>.json``, beside the manifest.

        :param request: request parameters to record (must not contain credentials).
        :param stats: extra pull statistics (pages, retries, seconds) for the manifest.
        :param only_if_changed: keep an identical partition and record what changed.
        :param status_field: the records' status field, counted by transition (needs the
            schema's key field); ``None``: no record-level comparison, counts only.
        :param run_id: the Airflow run pulling (in the change record: a rerun of the run
            reports its change again).
        """
        if self._committed:
            raise StorageError("partition already committed")
        entries = self._close_files()
        manifest = Manifest(
            dataset=self.dataset,
            partition=dict(self.keys),
            format=self.format,
            files=entries,
            row_count=self.rows,
            content_checksum=self.checksum.hexdigest(),
            duplicates_dropped=self.duplicates_dropped,
            request=request,
            pulled_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            package_version=__version__,
            schema=self.schema.describe(),
            stats=stats or {},
        )
        changes: PartitionChanges | None = None
        if only_if_changed:
            previous = self._published_manifest()
            if previous is not None and _same_content(previous, manifest):
                return self._keep(previous, run_id)
            changes = self._changes(previous, manifest, status_field, run_id)
        if _is_local(self.partition):
            self._publish_local(manifest, changes)
        else:
            self._publish_object_store(manifest, changes)
        self._committed = True
        self._close_seen()
        log.info(
            "Published %s: %d rows, %d duplicates dropped, checksum %s",
            self.partition,
            manifest.row_count,
            manifest.duplicates_dropped,
            manifest.content_checksum,
        )
        if changes is not None:
            log.info("Changes in %s: %s", self.partition, changes.summary())
        return PublishResult(path=str(self.partition), manifest=manifest, changes=changes)

    def _published_manifest(self) -> Manifest | None:
        """The manifest of the complete partition published now, if any."""
        try:
            return read_manifest(self.partition) if is_complete(self.partition) else None
        except StorageError:
            return None  # unreadable: treated as absent, the pull replaces it

    def _keep(self, previous: Manifest, run_id: str | None) -> PublishResult:
        """Discard this pull (its content is the published one's); the partition stays."""
        self.abort()
        self._committed = True
        recorded = None
        if run_id is not None:
            recorded = find_run_changes(self.partition, run_id, previous.content_checksum)
        log.info(
            "Unchanged %s (checksum %s): kept as published%s",
            self.partition,
            previous.content_checksum,
            "; this run changed it before" if recorded else "",
        )
        return PublishResult(
            path=str(self.partition),
            manifest=previous,
            changed=recorded is not None,
            rewritten=False,
            changes=recorded,
        )

    def _changes(
        self,
        previous: Manifest | None,
        manifest: Manifest,
        status_field: str | None,
        run_id: str | None,
    ) -> PartitionChanges:
        """Compare this pull with the published partition (record by record when it can)."""
        # A first landing: every record is new (the partition lists them, no ids here).
        diff = RecordDiff(new=manifest.row_count)
        key = self.schema.key_field
        if previous is not None:
            diff = RecordDiff()
            if status_field and key and previous.format == manifest.format:
                diff = diff_partitions(
                    [self.partition / e.name for e in previous.files],
                    [self.staging / e.name for e in manifest.files],
                    format=manifest.format,
                    key=key,
                    status=status_field,
                )
        return PartitionChanges(
            **vars(diff),
            partition=dict(self.keys),
            from_checksum=None if previous is None else previous.content_checksum,
            to_checksum=manifest.content_checksum,
            rows_before=None if previous is None else previous.row_count,
            rows=manifest.row_count,
            token=self.token,
            pulled_at=manifest.pulled_at,
            run_id=run_id,
            written_ns=time.time_ns(),
            layout_changed=previous is not None
            and (
                previous.format != manifest.format
                or previous.schema.get("fingerprint") != manifest.schema.get("fingerprint")
            ),
        )

    def _publish_local(self, manifest: Manifest, changes: PartitionChanges | None) -> None:
        # The manifest (and the change record) go into the staged directory, so the rename
        # publishes data, manifest and change record together.
        if changes is not None:
            _write_bytes(self.staging / changes.file_name, changes.to_json())
        _write_bytes(self.staging / MANIFEST_NAME, manifest.to_json())
        target = self.partition.path
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # Two runs publishing one partition at once (a manual run during the scheduled one)
        # take turns: the move-aside-and-rename sequence is atomic only for one writer.
        lock_path = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.lock")
        with open(lock_path, "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                self._swap_in_local(target)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _swap_in_local(self, target: str) -> None:
        staged = self.staging.path
        trash = self._trash.path
        moved_old = False
        if os.path.exists(target):
            _carry_change_records(target, staged)
            os.makedirs(os.path.dirname(trash), exist_ok=True)
            os.rename(target, trash)
            moved_old = True
        try:
            # os.rename (not shutil.move): it never nests the source inside an existing target.
            os.rename(staged, target)
        except OSError as err:
            if moved_old and not os.path.exists(target):
                os.rename(trash, target)  # put the previous complete partition back
                moved_old = False
            raise StorageError(f"could not publish {self.partition}: {err}") from err
        finally:
            if moved_old:
                _rmtree_quiet(ObjectStoragePath(trash))

    def _publish_object_store(self, manifest: Manifest, changes: PartitionChanges | None) -> None:
        target = self.partition
        target.mkdir(parents=True, exist_ok=True)
        # 0. The change record names the checksum it leads to: until the manifest below says
        # that checksum, a reader (find_run_changes) does not count it.
        if changes is not None:
            _write_bytes(target / changes.file_name, changes.to_json())
        # 1. This attempt's files go in beside the previous ones under names of their own: the
        # previous manifest names only its files, so readers still see the previous partition.
        for entry in manifest.files:
            src = self.staging / entry.name
            src.fs.copy(src.path, (target / entry.name).path)
        # 2. The manifest last (one PUT): from here readers see exactly this attempt's files.
        _write_bytes(target / MANIFEST_NAME, manifest.to_json())
        # 3. Files no longer named, of attempts that are over; 4. the staging folder last:
        # while it exists, other writers count this attempt as in flight and keep its files.
        _remove_unnamed(target, self.dataset_root / STAGING_DIR, self._flat, self.token)
        _rmtree_quiet(self.staging)

    def abort(self) -> None:
        """Discard staged data; the published partition (if any) is not touched."""
        for job in self._jobs:
            job.cancel()
        self._jobs.clear()
        with contextlib.suppress(Exception):
            self._wait_for_write()
        self._shutdown_executor()
        with contextlib.suppress(Exception):
            if self._pq_writer is not None and not self._closed:
                self._pq_writer.close()
        with contextlib.suppress(Exception):
            if self._sink is not None and not self._sink.closed:
                self._sink.close()
        with contextlib.suppress(Exception):
            if self._gz is not None and not self._closed:
                self._gz.close()
        with contextlib.suppress(Exception):
            if self._out is not None:
                self._out.close()
        self._closed = True
        self._close_seen()
        _rmtree_quiet(self.staging)

    def _close_seen(self) -> None:
        if self._seen is not None:
            self._seen.close()
            self._seen = None


#: Long free text and JSON: min/max statistics of these are kilobytes per row group, held in
#: the writer's footer until the file closes (a 5,000,000-row day has 1,250 row groups), and
#: no query prunes on them.
_NO_STATISTICS = frozenset(
    {"relationship", "extra_fields", "http_user_agent", "url", "referer", "notes", "error_message"}
)


def _statistics_columns(schema: pa.Schema) -> list[str]:
    """Columns that get Parquet min/max statistics: all but :data:`_NO_STATISTICS`."""
    return [name for name in schema.names if name not in _NO_STATISTICS]


def _same_content(previous: Manifest, manifest: Manifest) -> bool:
    """Whether a pull holds exactly the published partition's records in the same layout."""
    return (
        previous.content_checksum == manifest.content_checksum
        and previous.row_count == manifest.row_count
        and previous.format == manifest.format
        and previous.schema.get("fingerprint") == manifest.schema.get("fingerprint")
    )


def _carry_change_records(published: str, staged: str) -> None:
    """Copy the published partition's change records into the staged one (local): the swap
    replaces the folder, and the history of its changes stays with it."""
    for name in os.listdir(published):
        if name.startswith(CHANGES_PREFIX) and not os.path.exists(os.path.join(staged, name)):
            shutil.copy2(os.path.join(published, name), os.path.join(staged, name))


def _rmtree_quiet(path: ObjectStoragePath) -> None:
    """Best-effort recursive delete (leftovers live under ``_``-prefixed, ignored folders)."""
    try:
        if path.exists():
            path.fs.rm(path.path, recursive=True)
    except (OSError, FileNotFoundError) as err:
        log.warning("Could not remove %s: %s", path, err)


#: Staging/trash entries older than this are leftovers of crashed runs and are removed.
STALE_AFTER_S = 6 * 3600


def _token_started(token: str) -> int | None:
    """Epoch second an attempt started, from its token (``<epoch>-<hex>``), or ``None``."""
    try:
        return int(token.split("-", 1)[0])
    except ValueError:
        return None


def _attempt_token(name: str) -> str | None:
    """The attempt token in an object-store data file's name (``part-00000-<token>.<ext>``);
    ``None`` for a name without one (a local partition's, or an older version's)."""
    stem = name.split(".", 1)[0]
    parts = stem.split("-", 2)
    if len(parts) == 3 and parts[0] == "part" and _token_started(parts[2]) is not None:
        return parts[2]
    return None


def _named_files(partition: ObjectStoragePath) -> set[str] | None:
    """Names the partition's current manifest lists (``None``: no readable manifest)."""
    try:
        manifest = read_manifest(partition)
    except StorageError:
        return None
    return None if manifest is None else {entry.name for entry in manifest.files}


def _remove_unnamed(
    partition: ObjectStoragePath,
    staging_root: ObjectStoragePath,
    flat: str,
    own_token: str,
    now: float | None = None,
) -> None:
    """Remove an object-store partition's files its current manifest does not name, of
    attempts that are over: this one, an older version's (no token), one whose staging folder
    is gone (published or aborted) or older than :data:`STALE_AFTER_S` (crashed). A writer in
    flight (its staging folder still there) may be about to name its files: they stay.

    The manifest is read again after the in-flight check: an attempt that is over never
    writes a manifest again, so a file the re-read manifest does not name stays unnamed.
    """
    now = time.time() if now is None else now
    fs = partition.fs
    fs.invalidate_cache(partition.path)  # listings are cached by s3fs: another writer moved on
    fs.invalidate_cache(staging_root.path)
    named = _named_files(partition)
    if named is None:  # no manifest to judge by: leave everything (nothing to be exact about)
        return
    over: list[ObjectStoragePath] = []
    for child in list(partition.iterdir()):
        # Change records are history, named by no manifest: kept.
        if child.name in named or child.name.startswith((MANIFEST_NAME, CHANGES_PREFIX)):
            continue
        token = _attempt_token(child.name)
        started = None if token is None else _token_started(token)
        in_staging = staging_root / f"{flat}.{token}"
        fs.invalidate_cache(in_staging.path)
        if (
            token is None
            or token == own_token
            or (started is not None and now - started > STALE_AFTER_S)
            or not in_staging.exists()
        ):
            over.append(child)
    if not over:
        return
    named = _named_files(partition)
    if named is None:
        return
    for child in over:
        if child.name in named:
            continue
        try:
            if child.is_dir():
                _rmtree_quiet(child)
            else:
                child.unlink()
        except FileNotFoundError:
            pass  # another writer's cleanup got there first


def _remove_stale(dataset_root: ObjectStoragePath, now: float | None = None) -> None:
    """Remove ``_staging``/``_trash`` entries of crashed runs (their token starts with epoch).

    Entries younger than :data:`STALE_AFTER_S` may belong to a concurrent writer; kept.
    """
    now = time.time() if now is None else now
    for folder in (STAGING_DIR, TRASH_DIR):
        root = dataset_root / folder
        try:
            children = list(root.iterdir()) if root.exists() else []
        except (OSError, FileNotFoundError):
            continue
        for child in children:
            token = child.name.rpartition(".")[2]
            try:
                started = int(token.split("-", 1)[0])
            except ValueError:
                continue
            if now - started > STALE_AFTER_S:
                _rmtree_quiet(child)


def write_partition(
    base: ObjectStoragePath | str | os.PathLike[str],
    dataset: str,
    keys: dict[str, str],
    records: Iterable[dict[str, Any]],
    schema: RecordSchema,
    *,
    request: dict[str, Any],
    format: str = "parquet",
    stats: dict[str, Any] | None = None,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
) -> PublishResult:
    """Stream ``records`` into a partition and publish it atomically (see :class:`PartitionWriter`).

    If iterating ``records`` raises, nothing is published and the exception propagates.
    """
    with PartitionWriter(
        base, dataset, keys, schema, format=format, row_group_rows=row_group_rows
    ) as writer:
        writer.write(records)
        return writer.commit(request=request, stats=stats)


# -- reading -----------------------------------------------------------------------------------


def read_manifest(
    partition: ObjectStoragePath | str | os.PathLike[str],
) -> Manifest | None:
    """The partition's manifest, or ``None`` if it has none (absent or incomplete partition)."""
    path = as_storage_path(partition) / MANIFEST_NAME
    try:
        data = path.fs.cat_file(path.path)
    except FileNotFoundError:
        return None
    return Manifest.from_json(data)


def is_complete(partition: ObjectStoragePath | str | os.PathLike[str]) -> bool:
    """Whether the partition has a manifest and every listed file with the listed size."""
    part = as_storage_path(partition)
    try:
        manifest = read_manifest(part)
    except StorageError:
        return False
    if manifest is None:
        return False
    for entry in manifest.files:
        f = part / entry.name
        try:
            if f.size() != entry.bytes:
                return False
        except FileNotFoundError:
            return False
    return True


def read_partition(partition: ObjectStoragePath | str | os.PathLike[str]) -> pa.Table:
    """Read a complete Parquet partition's files listed by its manifest (raises otherwise).

    Conversions landed by an older schema version come back in the current layout
    (:func:`~affiliate_network.reports.schema.read_conversions`).
    """
    part = as_storage_path(partition)
    manifest = _complete_manifest(part)
    if manifest.format != "parquet":
        raise StorageError(f"{part} is {manifest.format}; use iter_partition_records")
    tables = []
    for entry in manifest.files:
        # ParquetFile, not pq.read_table: read_table's dataset scanner drops its last
        # reference to this Python file on a pool thread after returning; when that falls in
        # interpreter shutdown the thread is unwound inside a noexcept destructor and the
        # process aborts ("terminate called without an active exception": a script reading a
        # partition ended in SIGABRT). tests/reports/test_storage.py.
        with _open(part / entry.name, "rb") as fh, pq.ParquetFile(fh) as pf:
            tables.append(read_conversions(pf.read()))
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


#: Rows per batch of :func:`iter_partition_columns`: a few MB of a handful of columns.
COLUMN_BATCH_ROWS = 65_536


def iter_partition_columns(
    partition: ObjectStoragePath | str | os.PathLike[str],
    columns: Sequence[str],
    *,
    batch_rows: int = COLUMN_BATCH_ROWS,
) -> Iterator[pa.Table]:
    """Yield a complete Parquet partition's ``columns`` in batches, file by file and row group
    by row group, in the current layout: memory holds one batch of these columns, whatever the
    day's size (:func:`read_partition` holds every column of every row).

    Older schema versions are converted batch by batch as :func:`read_partition` converts them
    (:func:`~affiliate_network.reports.schema.read_conversions`); a column those versions did not
    have comes back as nulls.

    :param partition: the partition folder.
    :param columns: the columns to read, in the order wanted.
    :param batch_rows: rows per batch at most.
    :raises StorageError: not a complete Parquet partition, or a file of the current layout
        without one of ``columns`` (names the file and the columns).
    """
    part = as_storage_path(partition)
    manifest = _complete_manifest(part)
    if manifest.format != "parquet":
        raise StorageError(f"{part} is {manifest.format}; use iter_partition_records")
    wanted = list(columns)
    for entry in manifest.files:
        # ParquetFile, not a dataset scanner: see read_partition.
        with _open(part / entry.name, "rb") as fh, pq.ParquetFile(fh) as pf:
            schema = pf.schema_arrow
            present = [c for c in wanted if c in schema.names]
            current = read_conversions(schema.empty_table()).schema.names
            missing = [c for c in wanted if c not in current]
            if missing:
                raise StorageError(f"{part / entry.name} has no column(s) {missing}")
            for batch in pf.iter_batches(batch_size=batch_rows, columns=present):
                table = pa.Table.from_batches([batch]).replace_schema_metadata(schema.metadata)
                yield read_conversions(table).select(wanted)


def iter_partition_records(
    partition: ObjectStoragePath | str | os.PathLike[str],
) -> Iterator[dict[str, Any]]:
    """Yield the API records of a complete JSON Lines partition, as they were received."""
    part = as_storage_path(partition)
    manifest = _complete_manifest(part)
    if manifest.format != "jsonl":
        raise StorageError(f"{part} is {manifest.format}; use read_partition")
    for entry in manifest.files:
        with _open(part / entry.name, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            for line in gz:
                if line.strip():
                    yield orjson.loads(line)


def _complete_manifest(part: ObjectStoragePath) -> Manifest:
    if not is_complete(part):
        raise StorageError(f"{part} is not a complete partition (no valid {MANIFEST_NAME})")
    manifest = read_manifest(part)
    assert manifest is not None
    return manifest


def list_partitions(
    base: str | os.PathLike[str] | ObjectStoragePath, dataset: str
) -> dict[str, Manifest]:
    """Complete partitions of a dataset (relative path → manifest); incomplete ones left out.

    Nested keys are walked (``affiliate=7/date=2026-01-31``); ``_``/``.`` folders are skipped.
    """
    root = as_storage_path(base) / dataset
    out: dict[str, Manifest] = {}

    def walk(folder: ObjectStoragePath, rel: str) -> None:
        for child in sorted(folder.iterdir(), key=lambda p: p.name):
            if child.name.startswith(("_", ".")) or "=" not in child.name or not child.is_dir():
                continue
            name = f"{rel}/{child.name}" if rel else child.name
            if is_complete(child):
                manifest = read_manifest(child)
                assert manifest is not None
                out[name] = manifest
            else:
                walk(child, name)

    if root.exists():
        walk(root, "")
    return out


def partition_files(base: str | os.PathLike[str] | ObjectStoragePath, dataset: str) -> list[str]:
    """Every data file the complete partitions' manifests name, as paths or URLs for a query
    engine (``read_parquet(partition_files("data", "conversions"))`` in DuckDB): exactly what
    was published, never another attempt's leftover that a ``part-*`` glob would also count.

    :param base: output base (local path or URL, ``s3://<conn id>@<bucket>/...``).
    :param dataset: dataset folder under ``base``.
    :returns: local paths, or ``<protocol>://<bucket>/<key>`` URLs (no connection id).
    """
    root = as_storage_path(base) / dataset
    files: list[str] = []
    for rel, manifest in list_partitions(base, dataset).items():
        for entry in manifest.files:
            path = root / rel / entry.name
            # ``s3://bucket/key`` for an object store: a query engine knows no Airflow conn id.
            files.append(str(path) if _is_local(path) else f"{path.protocol}://{path.path}")
    return files
