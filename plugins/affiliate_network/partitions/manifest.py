"""A partition's manifest, the one completeness check, and where partitions live.

Paths are fsspec-style objects (:class:`StoragePath`): Airflow's ``ObjectStoragePath`` (a URL
naming an Airflow connection, made by :func:`affiliate_network.reports.storage.as_storage_path`)
or a ``UPath``; a plain string or :class:`os.PathLike` becomes a ``UPath`` here (a local path,
or a URL fsspec opens without Airflow).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import orjson
from upath import UPath

from affiliate_network.exceptions import StorageError

MANIFEST_NAME = "_manifest.json"
#: 2: ``summary`` (per-status counts and money per currency, :mod:`.summary`) and ``run_id``;
#: a version 1 manifest reads with both ``None`` (:func:`.summary.partition_summary` computes
#: the summary from its files).
MANIFEST_VERSION = 2
_LOCAL_PROTOCOLS = frozenset({"", "file", "local"})
_MOD = 1 << 256


class StoragePath(Protocol):
    """What the partitions read and write through: a pathlib-like object on an fsspec
    filesystem (``fs`` and ``path``), such as ``ObjectStoragePath`` or ``UPath``."""

    @property
    def fs(self) -> Any: ...
    @property
    def path(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def name(self) -> str: ...
    def __truediv__(self, other: str) -> Any: ...
    def exists(self) -> bool: ...
    def is_dir(self) -> bool: ...
    def iterdir(self) -> Iterator[Any]: ...
    def mkdir(self, mode: int = ..., parents: bool = ..., exist_ok: bool = ...) -> None: ...
    def unlink(self, missing_ok: bool = ...) -> None: ...


#: A partition or base given as a path object, a local path or a URL.
PathInput = StoragePath | str | os.PathLike[str]


def as_path(base: PathInput) -> StoragePath:
    """``base`` as a :class:`StoragePath` (a string or ``os.PathLike`` becomes a ``UPath``)."""
    if isinstance(base, str | os.PathLike):
        return UPath(os.fspath(base))
    return base


def partition_path(base: PathInput, dataset: str, **keys: Any) -> StoragePath:
    """``<base>/<dataset>/k1=v1/k2=v2`` (keys in the order given)."""
    path: StoragePath = as_path(base) / dataset
    for key, value in keys.items():
        path = path / f"{key}={value}"
    return path


def is_local(path: StoragePath) -> bool:
    """Whether ``path`` is on the local filesystem (atomic rename and ``flock`` there)."""
    return (path.protocol or "") in _LOCAL_PROTOCOLS


def open_file(path: StoragePath, mode: str) -> Any:
    """The filesystem's own file object: ``ObjectStoragePath.open()`` wraps it to report
    lineage on every ``write()`` call (a collector lookup per call, thousands per partition)."""
    return path.fs.open(path.path, mode)


def write_bytes(path: StoragePath, data: bytes) -> None:
    """Write ``data`` as one object (a single PUT on an object store)."""
    path.fs.pipe_file(path.path, data)


class ContentChecksum:
    """Order-independent checksum of a multiset of records: the sum modulo 2**256 of the
    SHA-256 of each record's canonical bytes, plus the row count (independent of page order,
    format and pull time)."""

    def __init__(self) -> None:
        self._sum = 0
        self.rows = 0

    def add(self, canonical: bytes) -> None:
        """Add one record given as its canonical JSON bytes."""
        self.add_many([canonical])

    def add_many(self, canonicals: Sequence[bytes]) -> None:
        """Add records given as their canonical JSON bytes."""
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
    :param summary: rows, conversions, events and money per currency by status
        (:mod:`.summary`; ``None`` in a version 1 manifest or when the records have no status).
    :param run_id: the Airflow run that wrote the partition (``None``: unknown, or a script).
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
    summary: dict[str, Any] | None = None
    run_id: str | None = None

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


def read_manifest(partition: PathInput) -> Manifest | None:
    """The partition's manifest, or ``None`` if it has none (absent or incomplete partition)."""
    path = as_path(partition) / MANIFEST_NAME
    try:
        data = path.fs.cat_file(path.path)
    except FileNotFoundError:
        return None
    return Manifest.from_json(data)


def complete_manifest(partition: PathInput) -> Manifest | None:
    """The manifest of a complete partition: one that names files which all exist with the
    listed sizes. ``None`` for no manifest, an unreadable one or a missing or short file."""
    part = as_path(partition)
    try:
        manifest = read_manifest(part)
    except StorageError:
        return None
    if manifest is None:
        return None
    for entry in manifest.files:
        f = part / entry.name
        try:
            if f.fs.size(f.path) != entry.bytes:
                return None
        except FileNotFoundError:
            return None
    return manifest


def is_complete(partition: PathInput) -> bool:
    """Whether the partition has a manifest and every listed file with the listed size."""
    return complete_manifest(partition) is not None


def require_complete(partition: PathInput, fmt: str | None = None) -> Manifest:
    """The manifest of a complete partition (of format ``fmt``, if given).

    :raises StorageError: not a complete partition, or another format.
    """
    manifest = complete_manifest(partition)
    if manifest is None:
        raise StorageError(f"{partition} is not a complete partition (no valid {MANIFEST_NAME})")
    if fmt is not None and manifest.format != fmt:
        other = "iter_partition_records" if fmt == "parquet" else "read_partition"
        raise StorageError(f"{partition} is {manifest.format}; use {other}")
    return manifest


def list_partitions(base: PathInput, dataset: str) -> dict[str, Manifest]:
    """Complete partitions of a dataset (relative path -> manifest); incomplete ones left out.

    Nested keys are walked (``affiliate=7/date=2026-01-31``); ``_``/``.`` folders are skipped.
    """
    root = as_path(base) / dataset
    out: dict[str, Manifest] = {}

    def walk(folder: StoragePath, rel: str) -> None:
        for child in sorted(folder.iterdir(), key=lambda p: p.name):
            if child.name.startswith(("_", ".")) or "=" not in child.name or not child.is_dir():
                continue
            name = f"{rel}/{child.name}" if rel else child.name
            manifest = complete_manifest(child)
            if manifest is not None:
                out[name] = manifest
            else:
                walk(child, name)

    if root.exists():
        walk(root, "")
    return out


def partition_files(base: PathInput, dataset: str) -> list[str]:
    """Every data file the complete partitions' manifests name, as paths or URLs for a query
    engine (``read_parquet(partition_files("data", "conversions"))`` in DuckDB): exactly what
    was published, never another attempt's leftover that a ``part-*`` glob would also count.

    :param base: output base (local path or URL, ``s3://<conn id>@<bucket>/...``).
    :param dataset: dataset folder under ``base``.
    :returns: local paths, or ``<protocol>://<bucket>/<key>`` URLs (no connection id).
    """
    base_path = as_path(base)
    root = base_path / dataset
    files: list[str] = []
    for rel, manifest in list_partitions(base_path, dataset).items():
        for entry in manifest.files:
            path = root / rel / entry.name
            # ``s3://bucket/key`` for an object store: a query engine knows no Airflow conn id.
            files.append(str(path) if is_local(path) else f"{path.protocol}://{path.path}")
    return files
