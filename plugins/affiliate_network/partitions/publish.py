"""Publishing a staged partition in one step: a local rename, or an object store's manifest PUT.

An attempt stages its files under ``<dataset>/_staging/<partition>.<token>/``. Locally the
staged folder, manifest included, is renamed onto the partition (``rename(2)`` is atomic; the
previous partition goes to ``_trash`` first; concurrent publishes take turns on a ``flock`` of
the dataset folder). On an object store (no rename, no lock) the attempt's files carry its token
in their names; they are copied in beside the previous ones, the manifest is written last (one
PUT naming exactly this attempt's files), then the files no manifest names, of attempts that are
over, are removed. A crash at any point leaves the previous complete partition (or none).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass

from affiliate_network.exceptions import StorageError
from affiliate_network.partitions.changes import CHANGES_PREFIX, PartitionChanges
from affiliate_network.partitions.manifest import (
    MANIFEST_NAME,
    Manifest,
    PathInput,
    StoragePath,
    as_path,
    is_local,
    read_manifest,
    write_bytes,
)

log = logging.getLogger(__name__)

STAGING_DIR = "_staging"
TRASH_DIR = "_trash"
#: Staging/trash entries older than this are leftovers of crashed runs and are removed.
STALE_AFTER_S = 6 * 3600


@dataclass(frozen=True)
class Attempt:
    """One attempt at publishing a partition: where it stages, and its token.

    :param partition: the partition folder.
    :param dataset_root: the dataset folder (holds ``_staging`` and ``_trash``).
    :param flat: the partition keys as one folder name (``date=2026-01-31``).
    :param token: ``<epoch>-<hex>``: names this attempt's staging folder and object-store files.
    """

    partition: StoragePath
    dataset_root: StoragePath
    flat: str
    token: str

    @classmethod
    def start(cls, base: PathInput, dataset: str, keys: dict[str, str]) -> Attempt:
        root = as_path(base) / dataset
        partition = root
        for key, value in keys.items():
            partition = partition / f"{key}={value}"
        flat = "__".join(f"{k}={v}" for k, v in keys.items())
        return cls(partition, root, flat, f"{int(time.time())}-{uuid.uuid4().hex[:12]}")

    @property
    def staging(self) -> StoragePath:
        result: StoragePath = self.dataset_root / STAGING_DIR / f"{self.flat}.{self.token}"
        return result

    @property
    def trash(self) -> StoragePath:
        result: StoragePath = self.dataset_root / TRASH_DIR / f"{self.flat}.{self.token}"
        return result


def publish(attempt: Attempt, manifest: Manifest, changes: PartitionChanges | None) -> None:
    """Publish the staged files with ``manifest`` (and the change record) in one step."""
    if is_local(attempt.partition):
        _publish_local(attempt, manifest, changes)
    else:
        _publish_object_store(attempt, manifest, changes)


def _publish_local(attempt: Attempt, manifest: Manifest, changes: PartitionChanges | None) -> None:
    # The manifest (and the change record) go into the staged directory, so the rename
    # publishes data, manifest and change record together.
    if changes is not None:
        write_bytes(attempt.staging / changes.file_name, changes.to_json())
    write_bytes(attempt.staging / MANIFEST_NAME, manifest.to_json())
    target = attempt.partition.path
    os.makedirs(os.path.dirname(target), exist_ok=True)
    # Two runs publishing one partition at once take turns: the move-aside-and-rename sequence
    # is atomic only for one writer. The lock is on the dataset folder itself (flock works on a
    # directory): a lock file would stay beside the partitions, and removing one after use
    # races with a writer waiting on it.
    fd = os.open(os.path.dirname(target), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _swap_in_local(attempt, target)
    finally:
        os.close(fd)  # releases the lock


def _swap_in_local(attempt: Attempt, target: str) -> None:
    staged = attempt.staging.path
    trash = attempt.trash.path
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
        raise StorageError(f"could not publish {attempt.partition}: {err}") from err
    finally:
        if moved_old:
            rmtree_quiet(attempt.trash)


def _carry_change_records(published: str, staged: str) -> None:
    """Copy the published partition's change records into the staged one (local): the swap
    replaces the folder, and the history of its changes stays with it."""
    for name in os.listdir(published):
        if name.startswith(CHANGES_PREFIX) and not os.path.exists(os.path.join(staged, name)):
            shutil.copy2(os.path.join(published, name), os.path.join(staged, name))


def _publish_object_store(
    attempt: Attempt, manifest: Manifest, changes: PartitionChanges | None
) -> None:
    target = attempt.partition
    target.mkdir(parents=True, exist_ok=True)
    # 0. The change record names the checksum it leads to: until the manifest below says
    # that checksum, a reader (find_run_changes) does not count it.
    if changes is not None:
        write_bytes(target / changes.file_name, changes.to_json())
    # 1. This attempt's files go in beside the previous ones under names of their own: the
    # previous manifest names only its files, so readers still see the previous partition.
    for entry in manifest.files:
        src = attempt.staging / entry.name
        src.fs.copy(src.path, (target / entry.name).path)
    # 2. The manifest last (one PUT): from here readers see exactly this attempt's files.
    write_bytes(target / MANIFEST_NAME, manifest.to_json())
    # 3. Files no longer named, of attempts that are over; 4. the staging folder last:
    # while it exists, other writers count this attempt as in flight and keep its files.
    remove_unnamed(attempt)
    rmtree_quiet(attempt.staging)


def rmtree_quiet(path: StoragePath) -> None:
    """Best-effort recursive delete (leftovers live under ``_``-prefixed, ignored folders)."""
    try:
        if path.exists():
            path.fs.rm(path.path, recursive=True)
    except (OSError, FileNotFoundError) as err:
        log.warning("Could not remove %s: %s", path, err)


def _token_started(token: str) -> int | None:
    """Epoch second an attempt started, from its token (``<epoch>-<hex>``), or ``None``."""
    try:
        return int(token.split("-", 1)[0])
    except ValueError:
        return None


def _attempt_token(name: str) -> str | None:
    """The attempt token in an object-store data file's name (``part-00000-<token>.<ext>``)."""
    parts = name.split(".", 1)[0].split("-", 2)
    if len(parts) == 3 and parts[0] == "part" and _token_started(parts[2]) is not None:
        return parts[2]
    return None


def _named_files(partition: StoragePath) -> set[str] | None:
    """Names the partition's current manifest lists (``None``: no readable manifest)."""
    try:
        manifest = read_manifest(partition)
    except StorageError:
        return None
    return None if manifest is None else {entry.name for entry in manifest.files}


def _is_over(attempt: Attempt, name: str, now: float) -> bool:
    """Whether the object-store file ``name`` belongs to an attempt that is over: this one,
    one without a token, one whose staging folder is gone (published or aborted) or older than
    :data:`STALE_AFTER_S` (crashed). A writer in flight may be about to name its files."""
    token = _attempt_token(name)
    if token is None or token == attempt.token:
        return True
    started = _token_started(token)
    if started is not None and now - started > STALE_AFTER_S:
        return True
    in_staging = attempt.dataset_root / STAGING_DIR / f"{attempt.flat}.{token}"
    in_staging.fs.invalidate_cache(in_staging.path)
    return not in_staging.exists()


def remove_unnamed(attempt: Attempt, now: float | None = None) -> None:
    """Remove an object-store partition's files its current manifest does not name, of
    attempts that are over (:func:`_is_over`).

    The manifest is read again after the in-flight check: an attempt that is over never
    writes a manifest again, so a file the re-read manifest does not name stays unnamed.
    """
    now = time.time() if now is None else now
    partition = attempt.partition
    fs = partition.fs
    fs.invalidate_cache(partition.path)  # listings are cached by s3fs: another writer moved on
    fs.invalidate_cache((attempt.dataset_root / STAGING_DIR).path)
    named = _named_files(partition)
    if named is None:  # no manifest to judge by: leave everything (nothing to be exact about)
        return
    over = [
        child
        for child in list(partition.iterdir())
        # Change records are history, named by no manifest: kept.
        if child.name not in named
        and not child.name.startswith((MANIFEST_NAME, CHANGES_PREFIX))
        and _is_over(attempt, child.name, now)
    ]
    named = _named_files(partition) if over else None
    for child in over:
        if named is None or child.name in named:
            continue
        try:
            if child.is_dir():
                rmtree_quiet(child)
            else:
                child.unlink()
        except FileNotFoundError:
            pass  # another writer's cleanup got there first


def remove_stale(dataset_root: StoragePath, now: float | None = None) -> None:
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
            started = _token_started(child.name.rpartition(".")[2])
            if started is not None and now - started > STALE_AFTER_S:
                rmtree_quiet(child)
