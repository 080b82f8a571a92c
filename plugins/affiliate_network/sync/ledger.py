"""The ledger: what the sync last applied to the network, kept durably beside the reports.

Storage choice: a JSON document beside the reports, by default
``<data base>/sync/ledger-<network>.json`` (one per network, whatever connection reaches it:
``hooks/_network_identity.py``), not an Airflow Variable. A local path is a plain
file (:class:`pathlib.Path`); a URL (``s3://``, ``gs://``, ``file://``...) goes through Airflow's
``ObjectStoragePath``, imported only then, so ``affiliate-network-sync plan`` on a local ledger
does not pay seconds for importing Airflow. Why not a Variable:

- The plan must be readable outside a running task: ``affiliate-network-sync plan FILE
  --ledger PATH`` (a reviewer's laptop, CI on a pull request) diffs against the very file the DAG
  writes, with no metadata-DB access and no Airflow context.
- It lives beside the reports, so one backup / retention policy covers both, and the document is
  inspectable and fixable with ordinary tools (``jq``) during an incident; a Variable is edited in
  a UI text box and is easy to overwrite by accident.
- The document grows with every object (it keeps each applied definition for field-level
  diffs); Variables are meant for small settings and are cached/masked by the UI.
- Writes are atomic: on a local or mounted filesystem the document is written to a temporary
  sibling and renamed over the old one (``rename`` is atomic within a filesystem); on object
  stores (s3://, gs://...) a single-object PUT is atomic by itself (readers see the old or the new
  document, never half of one). A crash therefore loses at most the write in progress.

There is one writer at a time: the DAG runs with ``max_active_runs=1`` and its sync tasks run one
after another. The ledger is written after every successful network write, and for create-only
objects (custom scrub rates, categories) an *intent* is written BEFORE the POST, so a worker that
dies between the POST and the ledger update leaves evidence: the next run stops instead of
creating a duplicate.

Document shape::

    {"version": 1, "target": "<the network: url:<normalized base URL> or name:<name>>", "objects": {
        "<section>/<key>": {"state": "applied" | "intent", "network_id": 12 | null,
                            "hash": "sha256:...", "definition": {...request body...},
                            "applied_at": "2026-11-22T08:00:00+00:00", "intent_at": "...",
                            "note": "..."}}}
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit

from affiliate_network.exceptions import ConfigValidationError, SyncBlockedError
from affiliate_network.settings.paths import resolve_data_base

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

    #: Where a ledger lives: a local file, or an object in object storage.
    LedgerPath: TypeAlias = Path | ObjectStoragePath

LEDGER_VERSION = 1
STATE_APPLIED = "applied"
STATE_INTENT = "intent"
#: URL schemes of the local filesystem: such a ledger is a plain file, renamed atomically.
_LOCAL_SCHEMES = {"file", "local"}


def _same_network(stored: str, target: str) -> bool:
    """Whether a ledger's recorded target is the network ``target`` names.

    Targets are network identities (``url:...``/``name:...``). A ledger written before them
    records the base URL as typed: it matches the same URL normalized; a named network cannot
    be checked against it and takes it over.
    """
    if stored == target:
        return True
    kind, _, value = target.partition(":")
    if kind not in ("url", "name") or stored.startswith(("url:", "name:")):
        return False
    if kind == "name":
        return True
    from affiliate_network.hooks._network_identity import normalize_base_url

    try:
        return normalize_base_url(stored) == value
    except ValueError:
        return False


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _ledger_path(path: str | os.PathLike[str] | ObjectStoragePath) -> LedgerPath:
    """A local path (or ``file://`` URL) as :class:`~pathlib.Path`; an object-store URL as
    ``ObjectStoragePath`` (Airflow imported only then), kept as is when given as one (it may
    carry a conn_id).
    """
    text = str(path)
    if "://" not in text:
        return Path(text)
    parts = urlsplit(text)
    if parts.scheme in _LOCAL_SCHEMES and not parts.netloc:
        return Path(parts.path)
    from airflow.sdk import ObjectStoragePath

    return path if isinstance(path, ObjectStoragePath) else ObjectStoragePath(text)


def default_ledger_path(network: str, data_base: str | None = None) -> str:
    """``<data base>/sync/ledger-<network>.json``: one ledger per network.

    :param network: the network's key (``hook.network.slug``): every connection that reaches
        one network, whatever its spelling, reads and writes the same ledger.
    :param data_base: the data base (default: the deployment's).
    """
    base = (data_base or resolve_data_base()).rstrip("/")
    return f"{base}/sync/ledger-{network}.json"


def sync_run_folder(ledger_path: str | None, dag_id: str, run_id: str) -> Any:
    """Where a sync run's record goes: ``<base>/sync_runs/<dag>/<run>/``, beside ``sync/``
    (which holds ledgers only, so a dry run leaves it as it was). ``<base>`` is the explicit
    ledger's data base (``<base>/sync/<ledger>``; in another folder: that folder), else the
    deployment's.
    """
    from airflow.sdk import ObjectStoragePath

    from affiliate_network.helpers.run_records import safe_name

    if ledger_path:
        folder = ObjectStoragePath(str(ledger_path)).parent
        base = folder.parent if folder.name == "sync" else folder
    else:
        base = ObjectStoragePath(resolve_data_base())
    return base / "sync_runs" / safe_name(dag_id) / safe_name(run_id)


def adopt_connection_ledger(network_path: str, conn_id: str, data_base: str | None = None) -> str:
    """The network's ledger path, after moving a ledger kept under the connection's id there.

    Ledgers were once named by connection (``ledger-<conn id>.json``). When the network's ledger
    does not exist yet and the connection's does, it is renamed (with its ``.synced`` marker)
    so its create-once records keep guarding the network. When both exist, nothing is guessed.

    :param network_path: :func:`default_ledger_path` of the network.
    :param conn_id: the connection id.
    :param data_base: the data base (default: the deployment's).
    :raises SyncBlockedError: both exist (two connections synced one network apart).
    """
    base = (data_base or resolve_data_base()).rstrip("/")
    old = _ledger_path(f"{base}/sync/ledger-{conn_id}.json")
    new = _ledger_path(network_path)
    if str(old) == str(new) or not old.exists():
        return network_path
    if new.exists():
        raise SyncBlockedError(
            f"{old} (the ledger of connection {conn_id!r}) and {new} (the ledger of its "
            "network) both exist: two connections synced this network apart. Nothing was sent. "
            "Merge the objects of the first into the second (or check that it holds nothing "
            "the second lacks), then delete the first and its .synced marker, and rerun."
        )
    for source, target in ((old, new), (_marker(old), _marker(new))):
        if source.exists():
            target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    for source in (_marker(old), old):  # the ledger last: a crash leaves it to adopt again
        if source.exists():
            source.unlink()
    return network_path


def _marker(path: LedgerPath) -> LedgerPath:
    return path.parent / f"{path.name}.synced"


class Ledger:
    """The applied state of every synced object, saved after each change.

    :param path: where the JSON document lives (local path or object-storage URL).
    :param target: the network the ledger describes (``hook.network.canonical``, never a key).
        A ledger written for one network is refused for another, so a copied ledger cannot
        hide changes.
    """

    def __init__(
        self, path: str | os.PathLike[str] | ObjectStoragePath, *, target: str | None = None
    ) -> None:
        self.path: LedgerPath = _ledger_path(path)
        self.target = target
        self._objects: dict[str, dict[str, Any]] = {}

    # ----- reading -------------------------------------------------------------------------
    @classmethod
    def load(
        cls, path: str | os.PathLike[str] | ObjectStoragePath, *, target: str | None = None
    ) -> Ledger:
        """Read the ledger (an absent file is an empty ledger, unless it was saved before).

        :raises ConfigValidationError: unreadable document, or a ledger of another network.
        :raises SyncBlockedError: the ledger is gone but its marker says it was saved before.
        """
        ledger = cls(path, target=target)
        if not ledger.path.exists():
            marker = ledger.marker_path
            if marker.exists():
                # This network was synced into this ledger before: an empty ledger now would
                # create every create-once object again. A person decides (runbook).
                raise SyncBlockedError(
                    f"{ledger.path}: the sync ledger is missing, but {marker} records that "
                    "syncs were applied through it before. Nothing was sent: creating from an "
                    "empty ledger would duplicate scrub rates and categories. Restore the ledger "
                    "(backup, object versioning); only if you have checked on the network that "
                    f"none of the create-once objects exist, delete {marker} and rerun."
                )
            return ledger
        try:
            document = json.loads(ledger.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigValidationError(f"{ledger.path}: unreadable sync ledger: {exc}") from exc
        if not isinstance(document, dict) or document.get("version") != LEDGER_VERSION:
            raise ConfigValidationError(
                f"{ledger.path}: not a version-{LEDGER_VERSION} sync ledger document"
            )
        stored_target = document.get("target")
        if target and stored_target and not _same_network(stored_target, target):
            raise ConfigValidationError(
                f"{ledger.path}: this ledger records what was applied to {stored_target}, not to "
                f"{target}. Point the sync at the ledger of that network (one ledger per "
                "connection) instead of reusing this one."
            )
        ledger.target = target or stored_target
        ledger._objects = dict(document.get("objects") or {})
        return ledger

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry of a ledger key (``<section>/<key>``), or ``None``."""
        return self._objects.get(key)

    def entry_keys(self) -> Iterator[str]:
        """Every ledger key."""
        return iter(sorted(self._objects))

    def __len__(self) -> int:
        return len(self._objects)

    def to_dict(self) -> dict[str, Any]:
        """The whole document."""
        return {"version": LEDGER_VERSION, "target": self.target, "objects": self._objects}

    # ----- writing (each call is saved at once) -------------------------------------------
    def record_intent(self, key: str, *, definition: dict[str, Any], hash_: str) -> None:
        """Record, before a non-idempotent POST, that ``key`` is about to be created."""
        self._objects[key] = {
            "state": STATE_INTENT,
            "network_id": None,
            "hash": hash_,
            "definition": definition,
            "intent_at": _now(),
        }
        self.save()

    def record_applied(
        self,
        key: str,
        *,
        network_id: int | None,
        definition: dict[str, Any],
        hash_: str,
        note: str | None = None,
    ) -> None:
        """Record that ``definition`` is now what the network holds for ``key``."""
        entry: dict[str, Any] = {
            "state": STATE_APPLIED,
            "network_id": network_id,
            "hash": hash_,
            "definition": definition,
            "applied_at": _now(),
        }
        previous = self._objects.get(key) or {}
        if previous.get("intent_at"):
            entry["intent_at"] = previous["intent_at"]
        if note:
            entry["note"] = note
        self._objects[key] = entry
        self.save()

    def forget(self, key: str) -> None:
        """Drop an entry (an intent whose request was definitely refused, or confirmed absent)."""
        if self._objects.pop(key, None) is not None:
            self.save()

    @property
    def marker_path(self) -> LedgerPath:
        """``<ledger>.synced``: written beside the ledger on its first save, never removed by
        the sync, so a ledger that disappears later is noticed instead of read as empty."""
        return _marker(self.path)

    def save(self) -> None:
        """Write the document atomically (temporary sibling + rename, or one object PUT)."""
        payload = json.dumps(self.to_dict(), indent=1, sort_keys=True, ensure_ascii=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(self.path, Path):
            tmp = self.path.parent / f".{self.path.name}.{uuid.uuid4().hex}.tmp"
            tmp.write_text(payload, encoding="utf-8")
            tmp.rename(self.path)
        else:
            self.path.write_text(payload, encoding="utf-8")
        if not self.marker_path.exists():
            marker = {"ledger": str(self.path), "target": self.target, "first_saved_at": _now()}
            self.marker_path.write_text(json.dumps(marker, sort_keys=True), encoding="utf-8")
