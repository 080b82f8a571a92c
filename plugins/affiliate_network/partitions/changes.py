"""What a re-pull changed in a published partition: status transitions, new, removed, updated ids.

A re-pull whose content checksum equals the published manifest's changes nothing and is not
published again (:meth:`~affiliate_network.partitions.write.PartitionWriter.commit` with
``only_if_changed``). A changed one is compared with the partition it replaces, record by
record (by the schema's key field), and the result is written beside the manifest as
``_changes-<ns>-<token>.json`` (:data:`CHANGES_PREFIX`; ``_``-prefixed, so query engines and the
readers of :mod:`~affiliate_network.partitions.read`, which read only the files a manifest
names, never see it). It holds the counts (``transitions`` such as ``"pending->approved": 3``,
``new``, ``removed``, ``updated``: same status, another field changed, e.g. the sale amount)
and the ids of each. A first landing (no previous partition) records its row count only: every
id is new, and the partition itself lists them.

The comparison reads one column of each side at a time (Parquet), so its memory is a few
columns of the day, never the whole partition; JSON Lines partitions are compared by a hash per
record.
"""

from __future__ import annotations

import gzip
import hashlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from affiliate_network.exceptions import StorageError
from affiliate_network.partitions.manifest import StoragePath

#: Name prefix of a partition's change records (``_changes-<ns>-<token>.json``).
CHANGES_PREFIX = "_changes-"
CHANGES_VERSION = 1


@dataclass(frozen=True)
class RecordDiff:
    """What differs between two partitions, record by record (a :class:`PartitionChanges`'s
    counts and ids; the field names are the record's).

    :param transitions: records whose status changed, by ``"old->new"``.
    :param new: records not in the replaced partition.
    :param removed: records of the replaced partition no longer reported.
    :param updated: records whose status stayed but another field changed.
    :param ids: the ids of each (keys as in ``transitions``, plus ``new``, ``removed``,
        ``updated``).
    """

    transitions: dict[str, int] = field(default_factory=dict)
    new: int = 0
    removed: int = 0
    updated: int = 0
    ids: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class PartitionChanges:
    """One change record: what a pull changed in a partition (``_changes-<ns>-<token>.json``).

    :param partition: partition keys (``{"date": "2026-01-31"}``).
    :param from_checksum: content checksum of the replaced partition (``None``: first landing).
    :param to_checksum: content checksum of the partition published with this record.
    :param rows_before: rows of the replaced partition (``None``: first landing).
    :param rows: rows of the new partition.
    :param transitions: records whose status changed, by ``"old->new"``.
    :param new: records not in the replaced partition.
    :param removed: records of the replaced partition no longer reported.
    :param updated: records whose status stayed but another field changed.
    :param ids: the ids of each (keys as in ``transitions``, plus ``new``, ``removed``,
        ``updated``); empty for a first landing.
    :param token: the pull's attempt token (also in the file name).
    :param pulled_at: when the pull finished (the manifest's ``pulled_at``).
    :param run_id: the Airflow run that pulled it (``None`` outside Airflow): a rerun of that
        run finds the record and reports the change again (see
        :func:`find_run_changes`).
    :param written_ns: when the record was made (ns since the epoch): orders the records
        (the file name starts with it) where tokens of one second would not.
    :param layout_changed: the partition was rewritten in another format or schema version
        (e.g. money as exact decimals); fields whose type changed are not compared, so the
        counts may all be zero.
    """

    partition: dict[str, str]
    from_checksum: str | None
    to_checksum: str
    rows_before: int | None
    rows: int
    transitions: dict[str, int]
    new: int
    removed: int
    updated: int
    ids: dict[str, list[str]] = field(default_factory=dict)
    token: str = ""
    pulled_at: str = ""
    run_id: str | None = None
    written_ns: int = 0
    layout_changed: bool = False
    version: int = CHANGES_VERSION

    @property
    def file_name(self) -> str:
        """``_changes-<written_ns>-<token>.json`` (sorts by time)."""
        return f"{CHANGES_PREFIX}{self.written_ns:020d}-{self.token}.json"

    @property
    def first_landing(self) -> bool:
        """Whether the partition had not been landed before this pull."""
        return self.from_checksum is None

    def summary(self) -> dict[str, Any]:
        """The counts without the ids (small: for the asset event and the task's XCom)."""
        return {
            "first_landing": self.first_landing,
            "previous_checksum": self.from_checksum,
            "rows_before": self.rows_before,
            "transitions": dict(self.transitions),
            "new": self.new,
            "removed": self.removed,
            "updated": self.updated,
            "layout_changed": self.layout_changed,
            "changes_file": self.file_name,
        }

    def to_json(self) -> bytes:
        """Record bytes (indented, keys sorted)."""
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    @classmethod
    def from_json(cls, data: bytes | str) -> PartitionChanges:
        """Parse a change record; raises :class:`StorageError` when malformed."""
        try:
            return cls(**orjson.loads(data))
        except (orjson.JSONDecodeError, TypeError) as err:
            raise StorageError(f"malformed change record: {err}") from err


def diff_partitions(
    old_files: Sequence[StoragePath],
    new_files: Sequence[StoragePath],
    *,
    format: str,
    key: str,
    status: str,
) -> RecordDiff:
    """Compare two partitions' files record by record.

    :param old_files: the published partition's data files (as its manifest names them).
    :param new_files: the new pull's data files.
    :param format: ``parquet`` or ``jsonl`` (both sides: a change of format is no diff).
    :param key: the record's id field (``conversion_id``).
    :param status: the status field (``status``).
    :returns: the counts and the ids.
    """
    if format == "parquet":
        return _diff_parquet(old_files, new_files, key, status)
    return _diff_jsonl(old_files, new_files, key, status)


def _tally(
    pairs: Iterator[tuple[str, str | None, str | None, bool]],
) -> RecordDiff:
    """Counts and ids from ``(id, old status, new status, other fields changed)`` of the
    records that differ (old status ``None``: new record; new status ``None``: removed).

    A record missing on one side has status ``""`` there when its status is null."""
    ids: dict[str, list[str]] = {}
    for ident, before, after, other in pairs:
        if before is None:
            label = "new"
        elif after is None:
            label = "removed"
        elif before != after:
            label = f"{before or 'null'}->{after or 'null'}"
        elif other:
            label = "updated"
        else:
            continue
        ids.setdefault(label, []).append(ident)
    for values in ids.values():
        values.sort()
    counts = Counter({label: len(values) for label, values in ids.items()})
    transitions = {k: v for k, v in sorted(counts.items()) if "->" in k}
    return RecordDiff(transitions, counts["new"], counts["removed"], counts["updated"], ids)


# -- Parquet: column by column ---------------------------------------------------------------


def _column(files: Sequence[StoragePath], name: str) -> pa.ChunkedArray | None:
    """Column ``name`` of every file, in file order (``None``: a file lacks it)."""
    chunks: list[pa.Array] = []
    typ: pa.DataType | None = None
    for path in files:
        with path.fs.open(path.path, "rb") as fh, pq.ParquetFile(fh) as pf:
            schema = pf.schema_arrow
            if name not in schema.names:
                return None
            typ = schema.field(name).type
            chunks.extend(pf.read(columns=[name]).column(0).chunks)
    if typ is None:
        return None
    return pa.chunked_array(chunks, type=typ)


def _file_columns(files: Sequence[StoragePath]) -> list[str]:
    if not files:
        return []
    path = files[0]
    with path.fs.open(path.path, "rb") as fh, pq.ParquetFile(fh) as pf:
        return list(pf.schema_arrow.names)


def _same(a: Any, b: Any) -> Any:
    """Element-wise equality where two nulls are equal."""
    equal = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return pc.or_(equal, both_null)


def _diff_parquet(
    old_files: Sequence[StoragePath],
    new_files: Sequence[StoragePath],
    key: str,
    status: str,
) -> RecordDiff:
    old_keys, new_keys = _column(old_files, key), _column(new_files, key)
    if old_keys is None or new_keys is None:
        raise StorageError(f"cannot compare partitions without their {key!r} column")
    left = pa.table({"k": old_keys, "i": pa.array(range(len(old_keys)), pa.int64())})
    right = pa.table({"k": new_keys, "j": pa.array(range(len(new_keys)), pa.int64())})
    joined = left.join(right, "k", join_type="full outer")
    i, j, k = joined["i"], joined["j"], joined["k"]
    added = k.filter(pc.is_null(i)).to_pylist()
    gone = k.filter(pc.is_null(j)).to_pylist()
    both = pc.and_(pc.is_valid(i), pc.is_valid(j))
    bi, bj, bk = i.filter(both), j.filter(both), k.filter(both)
    old_status, new_status = _column(old_files, status), _column(new_files, status)
    if old_status is None or new_status is None:
        raise StorageError(f"cannot compare partitions without their {status!r} column")
    before, after = old_status.take(bi), new_status.take(bj)
    differs = pc.invert(_same(before, after))
    # Other fields, one column at a time; a column whose type changed between layouts (an
    # older schema version) is not compared: the schema change alone rewrites the partition.
    for name in _file_columns(new_files):
        if name in (key, status):
            continue
        old_col, new_col = _column(old_files, name), _column(new_files, name)
        if old_col is None or new_col is None or old_col.type != new_col.type:
            continue
        differs = pc.or_(differs, pc.invert(_same(old_col.take(bi), new_col.take(bj))))
    mask = pc.fill_null(differs, True)
    changed = zip(
        bk.filter(mask).to_pylist(),
        before.filter(mask).to_pylist(),
        after.filter(mask).to_pylist(),
        strict=True,
    )
    pairs: list[tuple[str, str | None, str | None, bool]] = [
        (str(ident), old or "", new or "", True) for ident, old, new in changed
    ]
    pairs += [(str(ident), None, "", True) for ident in added]
    pairs += [(str(ident), "", None, True) for ident in gone]
    return _tally(iter(pairs))


# -- JSON Lines: one hash per record ---------------------------------------------------------


def _jsonl_records(files: Sequence[StoragePath]) -> Iterator[dict[str, Any]]:
    for path in files:
        with path.fs.open(path.path, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            for line in gz:
                if line.strip():
                    yield orjson.loads(line)


def _digest(record: dict[str, Any]) -> bytes:
    return hashlib.sha256(orjson.dumps(record, option=orjson.OPT_SORT_KEYS)).digest()[:16]


def _diff_jsonl(
    old_files: Sequence[StoragePath],
    new_files: Sequence[StoragePath],
    key: str,
    status: str,
) -> RecordDiff:
    old: dict[str, tuple[str, bytes]] = {
        str(r.get(key)): (str(r.get(status) or ""), _digest(r)) for r in _jsonl_records(old_files)
    }
    pairs: list[tuple[str, str | None, str | None, bool]] = []
    for record in _jsonl_records(new_files):
        ident = str(record.get(key))
        after = str(record.get(status) or "")
        previous = old.pop(ident, None)
        if previous is None:
            pairs.append((ident, None, after, True))
        elif previous[0] != after or previous[1] != _digest(record):
            pairs.append((ident, previous[0], after, previous[1] != _digest(record)))
    pairs += [(ident, before, None, True) for ident, (before, _) in old.items()]
    return _tally(iter(pairs))


# -- reading the records back ----------------------------------------------------------------


def list_changes(partition: StoragePath) -> list[PartitionChanges]:
    """The partition's change records, oldest first (an unreadable one is skipped)."""
    try:
        children = sorted(
            (c for c in partition.iterdir() if c.name.startswith(CHANGES_PREFIX)),
            key=lambda c: c.name,
        )
    except (FileNotFoundError, NotADirectoryError):
        return []
    out: list[PartitionChanges] = []
    for child in children:
        try:
            out.append(PartitionChanges.from_json(child.fs.cat_file(child.path)))
        except (StorageError, FileNotFoundError):
            continue
    out.sort(key=lambda record: (record.written_ns, record.file_name))
    return out


def find_run_changes(partition: StoragePath, run_id: str, checksum: str) -> PartitionChanges | None:
    """The change record ``run_id`` wrote that produced the published ``checksum``, if any.

    A retry of a task that published a change and then crashed (or a cleared run) finds the
    partition unchanged; this record says the run changed it, so its event still says so.
    """
    for record in reversed(list_changes(partition)):
        if record.run_id == run_id and record.to_checksum == checksum:
            return record
    return None


def describe_changes(changes: PartitionChanges) -> str:
    """A change record in words, for a log line (a person reads it; the record has the ids).

    :param changes: what a publish changed.
    """
    if changes.first_landing:
        return f"first landing, {changes.rows} rows; record {changes.file_name}"
    parts = [
        f"{changes.rows_before} -> {changes.rows} rows",
        f"{changes.new} new, {changes.removed} removed, {changes.updated} updated",
    ]
    if changes.transitions:
        moves = ", ".join(f"{k.replace('->', ' -> ')} {v}" for k, v in changes.transitions.items())
        parts.append(f"status {moves}")
    if changes.layout_changed:
        parts.append("format or columns changed")
    return "; ".join(parts) + f"; record {changes.file_name}"
