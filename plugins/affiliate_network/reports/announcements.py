"""Which recorded changes no run has announced yet, and the mark that says one run did.

A changed partition is published with a change record beside its manifest
(:mod:`affiliate_network.partitions.changes`). Announcing it (the dataset's asset event) is a later
step of the run, which may never come: the reconciliation or another pull fails, the run is
marked failed. So a change record stays **pending** until a run announces it, whichever run that
is:

* :func:`pending_changes` lists, per partition, the unannounced records that lead to the
  partition's current content: from the record that produced the manifest's checksum back
  through ``from_checksum`` to the last announced content. A record no manifest ever named (an
  attempt that crashed between record and manifest) is in no such chain and is never announced.
* :func:`claim_announcement` marks those records as announced by a run, one mark per record
  under ``<dataset>/_announced/<partition>/<changes file name>`` (``_``-prefixed: readers of
  the partitions never see it), created exclusively: of two overlapping runs one claims a
  partition and announces it, the other leaves it out. An empty ``_by-<run hash>-<changes file
  name>`` beside it names the run without being opened (one listing of the marks tells each
  run its own). A mark made by the same run counts as pending for that run again, so a retry
  or a cleared rerun of a run announces what the run announced, as a clean run does; a mark
  of another run is an announcement made.
* :func:`start_tracking` records when the dataset's announcements began
  (``_announced/_since.json``): records written before it were announced (or not) by the
  release before this one and are never pending, so the first run after an upgrade does not
  announce the dataset's whole history.

The marks live beside the partitions, not inside them: a republished partition keeps its
change records but is a new folder, and a mark must outlive it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import time
from dataclasses import dataclass
from typing import Any

import orjson
from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import StorageError
from affiliate_network.partitions.changes import CHANGES_PREFIX, PartitionChanges
from affiliate_network.partitions.manifest import read_manifest
from affiliate_network.reports.storage import as_storage_path

__all__ = [
    "ANNOUNCED_DIR",
    "PendingPartition",
    "claim_announcement",
    "pending_changes",
    "start_tracking",
]

#: Folder of the announcement marks under the dataset.
ANNOUNCED_DIR = "_announced"
#: When the dataset's announcements began (records before it are never pending).
SINCE_NAME = "_since.json"


@dataclass(frozen=True)
class PendingPartition:
    """A partition whose current content no run has announced.

    :param name: the partition's folder (``date=2026-01-31``).
    :param keys: its keys (``{"date": "2026-01-31"}``).
    :param path: the partition.
    :param checksum: the content checksum its manifest names now.
    :param rows: its rows now.
    :param records: the unannounced change records leading to ``checksum``, oldest first.
    """

    name: str
    keys: dict[str, str]
    path: ObjectStoragePath
    checksum: str
    rows: int
    records: tuple[PartitionChanges, ...]

    def entry(self) -> dict[str, Any]:
        """What the asset event says of the partition: keys, path, rows, checksum and what
        changed since the last announced content.

        ``previous_checksum``, ``rows_before`` and ``first_landing`` describe that announced
        content (the oldest record's side); ``transitions``, ``new``, ``removed`` and
        ``updated`` are summed over the records (each record's file holds its own counts and
        ids); ``changes_file`` is the newest record, ``changes_files`` all of them.
        """
        oldest, newest = self.records[0], self.records[-1]
        transitions: dict[str, int] = {}
        for record in self.records:
            for label, count in record.transitions.items():
                transitions[label] = transitions.get(label, 0) + count
        return {
            **self.keys,
            "path": str(self.path),
            "rows": self.rows,
            "checksum": self.checksum,
            "first_landing": oldest.first_landing,
            "previous_checksum": oldest.from_checksum,
            "rows_before": oldest.rows_before,
            "transitions": dict(sorted(transitions.items())),
            "new": sum(r.new for r in self.records),
            "removed": sum(r.removed for r in self.records),
            "updated": sum(r.updated for r in self.records),
            "layout_changed": any(r.layout_changed for r in self.records),
            "changes_file": newest.file_name,
            "changes_files": [r.file_name for r in self.records],
        }


def _dataset_root(base: str | ObjectStoragePath, dataset: str) -> ObjectStoragePath:
    return as_storage_path(base) / dataset


def _read_json(path: ObjectStoragePath) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(path.fs.cat_file(path.path))
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _create_exclusive(path: ObjectStoragePath, data: bytes) -> bool:
    """Create ``path`` unless it exists; ``False`` when it did.

    Exclusive where the filesystem has it (a local disk, object stores with conditional
    writes); elsewhere check-then-write, best effort (``max_active_runs=1`` is the first guard).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with path.fs.open(path.path, "xb") as fh:
            fh.write(data)
        return True
    except FileExistsError:
        return False
    except (ValueError, NotImplementedError):  # no exclusive mode on this filesystem
        if path.exists():
            return False
        path.fs.pipe_file(path.path, data)
        return True


def start_tracking(base: str | ObjectStoragePath, dataset: str) -> int:
    """Record when the dataset's announcements began, once; return that time (ns).

    Call it before the first landing that should be announced (the pulls do).

    :param base: the output base.
    :param dataset: the dataset folder.
    """
    since = _dataset_root(base, dataset) / ANNOUNCED_DIR / SINCE_NAME
    now = time.time_ns()
    if _create_exclusive(since, orjson.dumps({"since_ns": now})):
        return now
    recorded = _since_ns(_dataset_root(base, dataset))
    if recorded is None:
        raise StorageError(f"{since} is unreadable: remove it to start announcements again")
    return recorded


def _since_ns(root: ObjectStoragePath) -> int | None:
    doc = _read_json(root / ANNOUNCED_DIR / SINCE_NAME)
    value = doc.get("since_ns") if doc else None
    return value if isinstance(value, int) else None


def _record_ns(name: str) -> int | None:
    """``written_ns`` from a change record's name (``_changes-<ns>-<token>.json``)."""
    try:
        return int(name[len(CHANGES_PREFIX) :].split("-", 1)[0])
    except ValueError:
        return None


def _glob_names(root: ObjectStoragePath, pattern: str) -> dict[str, set[str]]:
    """``{folder name: {file names}}`` of ``<root>/<folder>/<pattern>``: one listing of the
    dataset (a prefix listing on object storage), not one per partition."""
    out: dict[str, set[str]] = {}
    for found in root.fs.glob(f"{root.path.rstrip('/')}/*/{pattern}"):
        folder, _, name = str(found).rstrip("/").rpartition("/")
        out.setdefault(folder.rpartition("/")[2], set()).add(name)
    return out


def pending_changes(
    base: str | ObjectStoragePath, dataset: str, *, run_id: str | None = None
) -> list[PendingPartition]:
    """The partitions of ``dataset`` whose current content no other run has announced.

    :param base: the output base.
    :param dataset: the dataset folder (one level of ``key=value`` partitions, as
        ``conversions``).
    :param run_id: the run asking: what it announced itself counts as pending again (its
        rerun announces the same).
    :returns: oldest partition first; empty before :func:`start_tracking`.
    """
    root = _dataset_root(base, dataset)
    since = _since_ns(root) if root.exists() else None
    if since is None:
        return []
    records = {
        folder: names
        for folder, names in _glob_names(root, f"{CHANGES_PREFIX}*").items()
        if "=" in folder and not folder.startswith(("_", "."))
    }
    marked = _glob_names(root / ANNOUNCED_DIR, "*")
    own_prefix = _by_prefix(run_id)
    out: list[PendingPartition] = []
    for folder in sorted(records):
        recent = {n for n in records[folder] if (_record_ns(n) or 0) >= since}
        names = marked.get(folder, set())
        candidates = {n for n in recent if n not in names or f"{own_prefix}{n}" in names}
        if candidates:
            pending = _pending_partition(root / folder, folder, candidates)
            if pending is not None:
                out.append(pending)
    return out


def _by_prefix(run_id: str | None) -> str:
    """Name prefix of the files that say which run made a mark (``_by-<hash>-``): read from the
    one listing, never opened. No run (outside Airflow) has no such file."""
    if run_id is None:
        return "\0"
    return f"_by-{hashlib.sha256(run_id.encode()).hexdigest()[:16]}-"


def _pending_partition(
    part: ObjectStoragePath, folder: str, candidates: set[str]
) -> PendingPartition | None:
    """The chain of ``candidates`` records ending at the partition's current checksum."""
    manifest = read_manifest(part)
    if manifest is None:
        return None
    by_target: dict[str, PartitionChanges] = {}
    for name in sorted(candidates):
        with contextlib.suppress(StorageError, FileNotFoundError):
            record = PartitionChanges.from_json((part / name).fs.cat_file((part / name).path))
            by_target[record.to_checksum] = record  # the newest record for a checksum wins
    chain: list[PartitionChanges] = []
    checksum: str | None = manifest.content_checksum
    while checksum is not None and checksum in by_target:
        record = by_target.pop(checksum)
        chain.append(record)
        checksum = record.from_checksum
    if not chain:
        return None
    chain.reverse()
    key, _, value = folder.partition("=")
    return PendingPartition(
        name=folder,
        keys={key: value},
        path=part,
        checksum=manifest.content_checksum,
        rows=manifest.row_count,
        records=tuple(chain),
    )


def claim_announcement(
    base: str | ObjectStoragePath,
    dataset: str,
    pending: PendingPartition,
    *,
    run_id: str | None,
) -> bool:
    """Mark ``pending``'s records as announced by ``run_id``; ``False`` when another run has.

    The newest record is claimed first and decides: of two runs announcing one partition at
    once, the one that creates its mark announces it. Call it right before the announcement.

    :param base: the output base.
    :param dataset: the dataset folder.
    :param pending: from :func:`pending_changes`.
    :param run_id: the announcing run (``None`` outside Airflow).
    """
    folder = _dataset_root(base, dataset) / ANNOUNCED_DIR / pending.name
    mark = orjson.dumps(
        {
            "run_id": run_id,
            "checksum": pending.checksum,
            "announced_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )
    by = _by_prefix(run_id)
    for n, record in enumerate(reversed(pending.records)):
        path = folder / record.file_name
        own = folder / f"{by}{record.file_name}"
        if run_id is not None:
            # Before the mark: a crash between the two leaves this run's claim to retry, never
            # a mark its rerun would not know as its own.
            folder.mkdir(parents=True, exist_ok=True)
            own.fs.pipe_file(own.path, b"")
        if _create_exclusive(path, mark):
            continue
        doc = _read_json(path)
        if run_id is not None and doc is not None and doc.get("run_id") == run_id:
            continue  # this run's own mark: its rerun announces again
        if run_id is not None:
            with contextlib.suppress(FileNotFoundError):
                own.fs.rm_file(own.path)  # not this run's: it must not look pending to it
        if n == 0:
            return False  # another run announces this content
    return True
