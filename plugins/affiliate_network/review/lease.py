"""A write lease per network: one on-hold writer at a time, whatever DAG or run it belongs to.

``max_active_runs=1`` and ``max_active_tis_per_dag=1`` keep one run of one DAG at a time; the
lease also covers a second DAG (another rules file) or a backfill writing to the same network.
It is a small JSON file beside the audit: ``<base>/onhold_review/_leases/<conn id>.json`` with
the owner (``dag_id/run_id``) and an expiry that the holder renews after every chunk.

* The same owner (a retry or a cleared rerun of the same run) takes its lease back at once.
* Another owner waits, polling, up to ``wait_s``; a lease past its expiry, or whose holder
  process is gone from this host (a killed task), is taken over. When the wait ends the task
  fails with :class:`LeaseBusyError`, and nothing was written by it.

On a local data base the file is created with ``O_EXCL`` (atomic). On object storage the
check is write-then-read-back (best effort): the Airflow-level limits above stay the first guard.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import LeaseBusyError
from affiliate_network.review.audit import conn_dir_name
from affiliate_network.tasklog import TaskLog

__all__ = ["LeaseBusyError", "WriteLease", "lease_path"]


def lease_path(base: str, conn_id: str) -> ObjectStoragePath:
    """Where the write lease of connection ``conn_id`` lives."""
    return ObjectStoragePath(base) / "onhold_review" / "_leases" / f"{conn_dir_name(conn_id)}.json"


class WriteLease:
    """The write lease of one network (see the module doc).

    :param path: lease file (:func:`lease_path`).
    :param owner: ``dag_id/run_id`` of the holder.
    :param ttl_s: seconds a lease stays valid without renewal.
    :param clock: wall clock (tests inject one).
    :param sleep: sleep function (tests inject one).
    """

    def __init__(
        self,
        path: ObjectStoragePath,
        owner: str,
        *,
        ttl_s: float = 600.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = path
        self.owner = owner
        self.ttl_s = ttl_s
        self._clock = clock
        self._sleep = sleep
        self._token = uuid.uuid4().hex
        self.held = False

    # -- file access ----------------------------------------------------------------------------

    def _local(self) -> str | None:
        return self.path.path if self.path.protocol in ("", "file", "local") else None

    def read(self) -> dict[str, Any] | None:
        """The current lease record, or None when there is none (or it is unreadable)."""
        try:
            with self.path.open("r", encoding="utf-8") as handle:
                doc = json.load(handle)
        except (FileNotFoundError, ValueError, OSError):
            return None
        return doc if isinstance(doc, dict) else None

    def _record(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "token": self._token,
            "expires": self._clock() + self.ttl_s,
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }

    def _abandoned(self, current: dict[str, Any]) -> bool:
        """Past its expiry, or held by a process of this host that no longer exists."""
        if float(current.get("expires") or 0) < self._clock():
            return True
        if current.get("host") != socket.gethostname() or not isinstance(current.get("pid"), int):
            return False
        try:
            os.kill(current["pid"], 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def _create(self) -> bool:
        """Create the lease file if absent; True when this call created it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self._record()).encode()
        local = self._local()
        if local is not None:
            try:
                fd = os.open(local, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return True
        if self.path.exists():
            return False
        self._write(data)
        return (self.read() or {}).get("token") == self._token

    def _write(self, data: bytes) -> None:
        tmp = self.path.parent / f".{self.path.name}.{uuid.uuid4().hex}.tmp"
        with tmp.open("wb") as handle:
            handle.write(data)
        tmp.rename(self.path)

    # -- protocol -------------------------------------------------------------------------------

    def acquire(self, *, wait_s: float, poll_s: float = 5.0, log: TaskLog | None = None) -> None:
        """Hold the lease, waiting up to ``wait_s`` for another holder to finish."""
        deadline = self._clock() + wait_s
        announced = False
        while True:
            if self._create():
                self.held = True
                return
            current = self.read() or {}
            if current.get("owner") == self.owner or self._abandoned(current):
                # Our own run again (retry / cleared rerun), or a crashed holder: take it over.
                self._write(json.dumps(self._record()).encode())
                if (self.read() or {}).get("token") == self._token:
                    self.held = True
                    if log is not None and current.get("owner") not in (None, self.owner):
                        log.warning("Took over the abandoned write lease of %s", current["owner"])
                    return
            if self._clock() >= deadline:
                raise LeaseBusyError(
                    f"another run ({current.get('owner', 'unknown')}) is writing on-hold "
                    f"statuses for this network (lease {self.path}); nothing was written by "
                    "this run. It is retried; if the other run died, its lease expires "
                    f"{self.ttl_s:.0f} s after its last renewal."
                )
            if log is not None and not announced:
                log.info(
                    "Waiting for %s to finish writing (lease %s)", current.get("owner"), self.path
                )
                announced = True
            self._sleep(min(poll_s, max(0.0, deadline - self._clock())))

    def renew(self) -> None:
        """Push the expiry forward (call after each chunk)."""
        if self.held:
            self._write(json.dumps(self._record()).encode())

    def release(self) -> None:
        """Give the lease up (only ours)."""
        if not self.held:
            return
        self.held = False
        if (self.read() or {}).get("token") == self._token:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def __enter__(self) -> WriteLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
