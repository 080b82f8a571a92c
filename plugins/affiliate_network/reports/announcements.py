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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import StorageError
from affiliate_network.partitions.changes import CHANGES_PREFIX, PartitionChanges
from affiliate_network.partitions.manifest import read_manifest
from affiliate_network.reports.storage import as_storage_path
from affiliate_network.reports.verdicts import DayVerdict, stored_verdict

__all__ = [
    "ANNOUNCED_DIR",
    "PendingPartition",
    "announce_pending",
    "changed_partitions_extra",
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


#: What the event says of each changed partition (from the pull's partition summary).
_EVENT_FIELDS = ("date", "path", "rows", "checksum")


def changed_partitions_extra(
    dataset: str, partitions: Iterable[dict[str, Any]]
) -> tuple[dict[str, Any], list[str]]:
    """The asset event's ``extra`` and partition keys for the changed partitions only.

    :param dataset: the dataset folder (``conversions``).
    :param partitions: the pulls' partition summaries
        (:func:`~affiliate_network.reports.landing.land_conversion_day`); the last one of a
        day wins (a day pulled twice in one run).
    :returns: ``({"dataset", "partitions": [...]}, ["date=YYYY-MM-DD", ...])``; no partition
        when nothing changed.
    """
    by_day: dict[str, dict[str, Any]] = {}
    for part in partitions:
        if part.get("changed", True):  # a summary from before change tracking: changed
            entry = {k: part[k] for k in _EVENT_FIELDS if k in part}
            entry.update(part.get("changes") or {})
            by_day[part["date"]] = entry
    changed = [by_day[day] for day in sorted(by_day)]
    return {"dataset": dataset, "partitions": changed}, [f"date={p['date']}" for p in changed]


def announce_pending(
    run_id: str | None,
    base: str,
    dataset: str,
    verdicts: Mapping[str, DayVerdict] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Claim every partition whose change no run has announced yet; the event's extra and keys.

    Pending changes are read from the dataset itself
    (:func:`~affiliate_network.reports.announcements.pending_changes`), so a change recorded by
    a run that failed before announcing it is announced here, by the next run that gets this
    far; a change another run announced is not announced again, and what this run announced
    before (a retry, a cleared rerun) is announced again as a clean run would. Each partition
    carries its verdict: this run's reconciliation (``verdicts``) when it is about the
    partition's content, else the comparison file beside it when that was made for the same
    content, else ``not_compared`` with the reason.

    :param run_id: the announcing run (its own earlier marks count as pending again).
    :param base: the output base.
    :param dataset: the dataset folder.
    :param verdicts: this run's reconciliation, by date.
    :returns: ``({"dataset", "partitions": [...]}, ["date=YYYY-MM-DD", ...])``; no partition
        when nothing is pending (or another run claimed all of it).
    """
    entries: list[dict[str, Any]] = []
    keys: list[str] = []
    for pending in pending_changes(base, dataset, run_id=run_id):
        if not claim_announcement(base, dataset, pending, run_id=run_id):
            continue  # another run announces this content
        entry = pending.entry()
        verdict = _verdict(pending.keys.get("date"), pending.path, pending.checksum, verdicts)
        entry["reconciled"] = verdict.reconciled
        entry["reconciliation"] = verdict.to_dict()
        entries.append(entry)
        keys.append(pending.name)
    return {"dataset": dataset, "partitions": entries}, keys


def _verdict(
    date: str | None,
    partition: Any,
    checksum: str,
    verdicts: Mapping[str, DayVerdict] | None,
) -> DayVerdict:
    day = date or str(partition)
    ours = (verdicts or {}).get(day)
    if ours is not None and ours.checksum == checksum:
        return ours
    stored = stored_verdict(partition, checksum)
    if stored is not None:
        return stored
    why = "no comparison of this content with the network's report"
    if verdicts is None:
        why += " (no reconciliation step before this announcement)"
    return DayVerdict.not_compared(day, why, checksum)
