"""Streaming records into one partition, then publishing it with its manifest.

Duplicates by key inside one pull are dropped (first occurrence kept) and counted. The seen
keys are the only memory that grows with the day, 4 bytes per kept row
(:mod:`~affiliate_network.helpers.seen_keys`); everything else is bounded by one API page, the row
group (:data:`DEFAULT_ROW_GROUP_ROWS`, one converting and one being written) and, for Parquet, the
footer of one file (:data:`DEFAULT_FILE_ROWS` rows per file).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from affiliate_network import __version__
from affiliate_network.api.report_columns import FORMATS
from affiliate_network.exceptions import ConfigValidationError, StorageError
from affiliate_network.helpers.gcpause import paused_gc
from affiliate_network.helpers.seen_keys import SeenKeys
from affiliate_network.partitions.changes import (
    PartitionChanges,
    RecordDiff,
    describe_changes,
    diff_partitions,
    find_run_changes,
)
from affiliate_network.partitions.manifest import (
    ContentChecksum,
    FileEntry,
    Manifest,
    PathInput,
    complete_manifest,
    is_local,
    open_file,
)
from affiliate_network.partitions.publish import Attempt, publish, remove_stale, rmtree_quiet
from affiliate_network.partitions.summary import StatusSummary

log = logging.getLogger(__name__)

#: File name suffix per format (:data:`~affiliate_network.api.report_columns.FORMATS`).
FORMAT_SUFFIX: dict[str, str] = {"parquet": ".parquet", "jsonl": ".jsonl.gz"}
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
#: Long free text and JSON: min/max statistics of these are kilobytes per row group, held in
#: the writer's footer until the file closes, and no query prunes on them.
_NO_STATISTICS = frozenset(
    {"relationship", "extra_fields", "http_user_agent", "url", "referer", "notes", "error_message"}
)


class RecordLayout(Protocol):
    """What the writer needs of a record schema
    (:class:`~affiliate_network.reports.schema.RecordSchema`)."""

    name: str
    key_field: str | None

    @property
    def arrow_schema(self) -> pa.Schema: ...
    def describe(self) -> dict[str, Any]: ...
    def encode(self, records: list[dict[str, Any]], format: str) -> tuple[Any, list[bytes]]: ...
    def to_arrow(self, payload: Any) -> pa.Table: ...


@dataclass
class PublishResult:
    """What :meth:`PartitionWriter.commit` returns.

    :param path: the partition.
    :param manifest: its manifest (the previous one, kept, when nothing changed).
    :param changed: whether the partition's content changed (or this run changed it before:
        see :func:`~affiliate_network.partitions.changes.find_run_changes`).
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


class _DataFiles:
    """The attempt's data files in its staging folder: one open at a time, the next opened
    once the open one holds ``file_rows`` (Parquet), each listed with its size and SHA-256."""

    def __init__(
        self, attempt: Attempt, layout: RecordLayout, fmt: str, compression: str, file_rows: int
    ) -> None:
        self._attempt = attempt
        self._schema = layout.arrow_schema
        self._format = fmt
        self._compression = compression
        self._file_rows = file_rows
        self.entries: list[FileEntry] = []  # closed data files, in order
        self.rows_in_file = 0
        self._out: _HashingWriter | None = None
        self._pq_writer: pq.ParquetWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._gz: gzip.GzipFile | None = None

    @property
    def file_name(self) -> str:
        """``part-00000.parquet`` on a local filesystem, ``part-00000-<token>.parquet`` on an
        object store (two writers of one partition never share a file name there)."""
        token = "" if is_local(self._attempt.partition) else f"-{self._attempt.token}"
        return f"part-{len(self.entries):05d}{token}{FORMAT_SUFFIX[self._format]}"

    def open_next(self) -> None:
        self._out = _HashingWriter(open_file(self._attempt.staging / self.file_name, "wb"))
        self.rows_in_file = 0
        if self._format == "parquet":
            # Arrow calls the sink's write() hundreds of times per row group: through a Python
            # file object each call is a GIL hand-off from the writer thread, stalled behind the
            # thread parsing pages. A C++ buffer in between makes that a few large writes.
            self._sink = pa.BufferedOutputStream(
                pa.PythonFile(self._out, mode="w"), buffer_size=SINK_BUFFER_BYTES
            )
            self._pq_writer = pq.ParquetWriter(
                self._sink,
                self._schema,
                # The system allocator: see reports.schema.landing_memory_pool.
                memory_pool=pa.system_memory_pool(),
                compression=self._compression,
                use_dictionary=True,
                write_statistics=[n for n in self._schema.names if n not in _NO_STATISTICS],
            )
        else:
            # mtime=0 and no file name: the same records give the same gzip bytes.
            self._gz = gzip.GzipFile(
                filename="", mode="wb", fileobj=self._out, mtime=0, compresslevel=6
            )

    def write_lines(self, lines: list[bytes]) -> None:
        """JSON Lines: compress ``lines`` into the one file."""
        assert self._gz is not None
        self.rows_in_file += len(lines)
        lines.append(b"")
        self._gz.write(b"\n".join(lines))

    def write_row_group(self, table: pa.Table) -> None:
        """Parquet: one row group; the file is closed once it holds ``file_rows``."""
        if self._pq_writer is None:
            self.open_next()
        assert self._pq_writer is not None
        self._pq_writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.rows_in_file += table.num_rows
        if self.rows_in_file >= self._file_rows:
            self.close_current()  # the next row group, if any, opens the next file

    def close_current(self) -> None:
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
        self.entries.append(
            FileEntry(self.file_name, self.rows_in_file, self._out.size, self._out.hexdigest())
        )
        self._out = None

    def finish(self) -> list[FileEntry]:
        """Close the open file; an empty day still lands one (empty) file with the schema."""
        if self._out is not None or not self.entries:
            if self._out is None:
                self.open_next()
            self.close_current()
        return list(self.entries)

    def discard(self) -> None:
        """Close whatever is open, quietly (the staging folder is removed next)."""
        for handle in (self._pq_writer, self._sink, self._gz, self._out):
            with contextlib.suppress(Exception):
                if handle is not None and not getattr(handle, "closed", False):
                    handle.close()


class _WriterThread:
    """One writer thread: Arrow conversion and file writes, in submission order.

    At most :data:`MAX_BATCHES_IN_FLIGHT` encoded batches wait and one row group is being
    written, so memory is bounded by two row groups; an error on the thread is raised on the
    caller's thread at the next submit or at :meth:`finish`, before anything is published.
    """

    def __init__(self, convert: Callable[[Any], pa.Table | None], files: _DataFiles, rows: int):
        self._convert = convert
        self._files = files
        self._row_group_rows = rows
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(
            1, thread_name_prefix="partition-writer"
        )
        self._jobs: deque[Future[pa.Table | None]] = deque()
        self._pending: list[pa.Table] = []
        self.pending_rows = 0
        self._write: Future[None] | None = None

    def submit(self, payload: Any) -> None:
        assert self._executor is not None
        self._jobs.append(self._executor.submit(self._convert, payload))
        while len(self._jobs) > MAX_BATCHES_IN_FLIGHT:
            self._collect_one()

    def _collect_one(self) -> None:
        """Take the oldest converted batch; flush a row group once enough rows are pending."""
        table = self._jobs.popleft().result()  # re-raises a writer-thread error here
        if table is not None and table.num_rows:
            self._pending.append(table)
            self.pending_rows += table.num_rows
            if self.pending_rows >= self._row_group_rows:
                self._flush_row_group()

    def _flush_row_group(self) -> None:
        # Parquet encoding and compression run in C++ without the GIL, so they overlap with
        # the next pages being parsed and encoded.
        if self._pending:
            table = pa.concat_tables(self._pending)
            self._pending, self.pending_rows = [], 0
            self._wait()
            assert self._executor is not None
            self._write = self._executor.submit(self._files.write_row_group, table)

    def _wait(self) -> None:
        if self._write is not None:
            future, self._write = self._write, None
            future.result()  # re-raises a write error here, on the caller's thread

    def finish(self) -> None:
        """Write everything submitted; the thread is done after this."""
        while self._jobs:
            self._collect_one()
        self._flush_row_group()
        self._wait()
        self.shutdown()

    def cancel(self) -> None:
        for job in self._jobs:
            job.cancel()
        self._jobs.clear()
        with contextlib.suppress(Exception):
            self._wait()
        self.shutdown()

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


class PartitionWriter:
    """Stream records into one partition, then publish it atomically with its manifest.

    Use as a context manager: an exception inside the block discards the staged data and
    leaves the published partition (if any) untouched::

        with PartitionWriter(base, "conversions", {"date": "2026-01-31"},
                             conversion_schema()) as writer:
            writer.write(records)                       # any iterable, consumed lazily
            result = writer.commit(request={...})

    :param base: output base (a local path, a URL or a path object: see
        :mod:`~affiliate_network.partitions.manifest`).
    :param dataset: dataset folder under ``base`` (``conversions``, ``affiliate_reports``).
    :param keys: partition keys in path order, e.g. ``{"date": "2026-01-31"}``.
    :param schema: record schema (Arrow layout, dedupe key).
    :param format: ``parquet`` (default) or ``jsonl`` (gzip JSON Lines).
    :param row_group_rows: Parquet rows per row group (bounds memory).
    :param compression: Parquet codec (``zstd`` by default).
    :param dedupe: drop records whose ``schema.key_field`` was already written by this writer.
    :param file_rows: Parquet rows per file (``part-00000``, ``part-00001``, ...); JSON Lines
        is always one file (a gzip stream holds nothing per row).
    :param summarize: count rows, conversions, events and money per currency by status while
        writing, for the manifest's ``summary`` (Parquet records with a ``status`` column;
        :mod:`~affiliate_network.partitions.summary`).
    """

    def __init__(
        self,
        base: PathInput,
        dataset: str,
        keys: dict[str, str],
        schema: RecordLayout,
        *,
        format: str = "parquet",
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        compression: str = "zstd",
        dedupe: bool = True,
        file_rows: int = DEFAULT_FILE_ROWS,
        summarize: bool = True,
    ) -> None:
        if format not in FORMATS:
            raise ConfigValidationError(f"format {format!r}: expected one of {list(FORMATS)}")
        if row_group_rows < 1 or file_rows < 1:
            name = "row_group_rows" if row_group_rows < 1 else "file_rows"
            raise ConfigValidationError(f"{name} must be positive")
        if not keys:
            raise ConfigValidationError("a partition needs at least one key (e.g. date)")
        self.dataset = dataset
        self.keys = {k: str(v) for k, v in keys.items()}
        self.attempt = Attempt.start(base, dataset, self.keys)
        self.partition = self.attempt.partition
        self.schema = schema
        self.format = format
        self.row_group_rows = row_group_rows
        self.dedupe = dedupe and schema.key_field is not None
        self.checksum = ContentChecksum()
        self.duplicates_dropped = 0
        self._files = _DataFiles(self.attempt, schema, format, compression, file_rows)
        self._thread: _WriterThread | None = None
        self._seen: SeenKeys | None = None  # opened with the files
        self._rows = 0
        self._closed = False
        self._committed = False
        summary = StatusSummary()
        self._summary: StatusSummary | None = (
            summary
            if summarize and format == "parquet" and summary.applies_to(schema.arrow_schema)
            else None
        )

    def __enter__(self) -> PartitionWriter:
        self._open()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._committed:
            self.abort()

    def _open(self) -> _WriterThread:
        if self._thread is None:
            remove_stale(self.attempt.dataset_root)
            self.attempt.staging.mkdir(parents=True, exist_ok=True)
            if self.dedupe:
                self._seen = SeenKeys()
            self._thread = _WriterThread(self._convert, self._files, self.row_group_rows)
            self._files.open_next()
        return self._thread

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
        # and again (measured: ~15 % of the landing's CPU). Paused for the stream.
        with paused_gc():
            # Never hold more than a row group in Python objects either.
            batch_rows = min(BATCH_ROWS, self.row_group_rows)
            iterator = iter(records)
            while batch := list(itertools.islice(iterator, batch_rows)):
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
                # Not held while the next page is fetched: the thread has the payload.
                del payload, canonicals
        return self.rows - before

    def write_batch(self, records: list[dict[str, Any]]) -> None:
        """Write one batch (typically one API page): drop duplicates, encode and hash here;
        build the Arrow table (or compress the lines) and write on the writer thread."""
        self._open()
        if self._closed:
            raise StorageError("writer already closed")
        key = self.schema.key_field
        if self._seen is not None and key is not None:  # dedupe implies a key field
            mask = self._seen.add_many([record.get(key) for record in records])
            kept = list(itertools.compress(records, mask))
            self.duplicates_dropped += len(records) - len(kept)
            records = kept
        if records:
            self._submit(*self.schema.encode(records, self.format))

    def _submit(self, payload: Any, canonicals: list[bytes]) -> None:
        if not canonicals:
            return
        # Hashed here, not on the writer thread: hashlib drops and retakes the GIL for every
        # record over 2 kB, and each retake there would wait out this thread's switch interval.
        self.checksum.add_many(canonicals)
        self._rows += len(canonicals)
        self._open().submit(payload)

    def _convert(self, payload: Any) -> pa.Table | None:
        """Writer thread: the Arrow table of a batch (Parquet), or its lines compressed (JSONL)."""
        if self.format == "parquet":
            table = self.schema.to_arrow(payload)
            if self._summary is not None:
                self._summary.add_table(table)  # the writer thread: one at a time
            return table
        self._files.write_lines(payload)
        return None

    def _close_files(self) -> list[FileEntry]:
        self._open().finish()
        entries = self._files.finish()
        self._closed = True
        if self.checksum.rows != self._rows or sum(f.rows for f in entries) != self._rows:
            raise StorageError(  # pragma: no cover - an invariant, not input
                f"checksummed {self.checksum.rows}, files {[f.rows for f in entries]}, "
                f"wrote {self._rows}"
            )
        return entries

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
        (:class:`~affiliate_network.partitions.changes.PartitionChanges`) is published with
        it as ``_changes-<ns>-<token>.json``, beside the manifest.

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
        manifest = Manifest(
            dataset=self.dataset,
            partition=dict(self.keys),
            format=self.format,
            files=self._close_files(),
            row_count=self.rows,
            content_checksum=self.checksum.hexdigest(),
            duplicates_dropped=self.duplicates_dropped,
            request=request,
            pulled_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            package_version=__version__,
            schema=self.schema.describe(),
            stats=stats or {},
            summary=None if self._summary is None else self._summary.to_json(),
            run_id=run_id,
        )
        changes: PartitionChanges | None = None
        if only_if_changed:
            previous = complete_manifest(self.partition)  # unreadable: absent, replaced
            if previous is not None and _same_content(previous, manifest):
                return self._keep(previous, run_id)
            changes = self._changes(previous, manifest, status_field, run_id)
        publish(self.attempt, manifest, changes)
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
            log.info("Changes in %s: %s", self.partition, describe_changes(changes))
        return PublishResult(path=str(self.partition), manifest=manifest, changes=changes)

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
                    [self.attempt.staging / e.name for e in manifest.files],
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
            token=self.attempt.token,
            pulled_at=manifest.pulled_at,
            run_id=run_id,
            written_ns=time.time_ns(),
            layout_changed=previous is not None and not _same_layout(previous, manifest),
        )

    def abort(self) -> None:
        """Discard staged data; the published partition (if any) is not touched."""
        if self._thread is not None:
            self._thread.cancel()
        self._files.discard()
        self._closed = True
        self._close_seen()
        rmtree_quiet(self.attempt.staging)

    def _close_seen(self) -> None:
        if self._seen is not None:
            self._seen.close()
            self._seen = None


def _same_layout(previous: Manifest, manifest: Manifest) -> bool:
    return previous.format == manifest.format and previous.schema.get(
        "fingerprint"
    ) == manifest.schema.get("fingerprint")


def _same_content(previous: Manifest, manifest: Manifest) -> bool:
    """Whether a pull holds exactly the published partition's records in the same layout."""
    return (
        previous.content_checksum == manifest.content_checksum
        and previous.row_count == manifest.row_count
        and _same_layout(previous, manifest)
    )


def write_partition(
    base: PathInput,
    dataset: str,
    keys: dict[str, str],
    records: Iterable[dict[str, Any]],
    schema: RecordLayout,
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
