"""A write lease per network: one on-hold writer at a time, whatever DAG or run it belongs to.

``max_active_runs=1`` and ``max_active_tis_per_dag=1`` keep one run of one DAG at a time; the
lease also covers a second DAG (another rules file) or a backfill writing to the same network.
It lives beside the audit: ``<base>/onhold_review/_leases/<network>.json`` records the holder
(``dag_id/run_id``, host, pid, expiry) so a waiting run can say whom it waits for.

* **Local data base** (a disk, or NFS shared by the workers): the lease is an exclusive
  ``flock`` on ``<conn id>.json.lock``, held until the writer is done. The kernel hands it to
  exactly one holder, whatever threads or processes race for it, and drops it when its holder
  dies (a killed task), so a crashed holder never needs to be detected or taken over: that
  detection is exactly where two racing takers could both win. A retry or a cleared rerun of
  the same run waits for an earlier attempt that is still alive, like any other run.
* **Object storage**: no lock primitive, so the JSON record is the lease, checked by
  write-then-read-back after a short settle (best effort). The holder rewrites it after every
  chunk. Whoever else wants it (another run, or a retry of the same run: an earlier attempt
  may still be alive on another worker) takes it only once it has lapsed:

  - the taker has watched the record stay unchanged for ``ttl_s`` by its own clock (no clock
    of another host is read: the holder stops writing ``ttl_s`` after its last renewal by
    *its* clock, and the taker started watching after that renewal was written);
  - or the record's expiry is more than ``ttl_s`` in the past by the taker's wall clock (a
    holder long dead; this tolerates clocks up to ``ttl_s`` apart);
  - or the record names this host and a process that no longer runs (a killed attempt on the
    same worker: taken at once).

  The Airflow-level limits above stay the first guard.

A holder checks, before every chunk and on every renewal, that the record is still its own
(owner and token) and, on object storage, that its last renewal is less than ``ttl_s`` old by
its own clock (from then on another run may take it over at any moment). When it is not,
:class:`LeaseLostError` stops the holder before its next write; it never writes the record
again and never deletes a record that is not its own, so the run that took over keeps the lease
alone.

Another owner waits, polling, up to ``wait_s``; then the task fails with
:class:`LeaseBusyError`, and nothing was written by it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import LeaseBusyError, LeaseLostError
from affiliate_network.helpers.tasklog import TaskLog
from affiliate_network.review.audit import conn_dir_name

__all__ = ["LeaseBusyError", "LeaseLostError", "WriteLease", "lease_path"]


def lease_path(base: str, network: str) -> ObjectStoragePath:
    """Where the write lease of one network lives.

    :param base: the data base.
    :param network: the network's key (``hook.network.slug``): every connection that reaches
        one network, whatever its spelling, takes the same lease.
    """
    return ObjectStoragePath(base) / "onhold_review" / "_leases" / f"{conn_dir_name(network)}.json"


class WriteLease:
    """The write lease of one network (see the module doc).

    :param path: lease file (:func:`lease_path`).
    :param owner: ``dag_id/run_id`` of the holder.
    :param ttl_s: seconds a lease on object storage stays valid without renewal.
    :param clock: this host's clock for durations: how long a record stayed unchanged, how
        old the holder's last renewal is (monotonic; tests inject one).
    :param sleep: sleep function (tests inject one).
    :param wall_clock: this host's wall clock, for the record's ``expires`` (shown to those who
        wait, and the long-dead rule).
    :param settle_s: on object storage, how long to wait after writing the record before reading
        it back (a racing writer's record shows by then).
    """

    def __init__(
        self,
        path: ObjectStoragePath,
        owner: str,
        *,
        ttl_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        settle_s: float = 1.0,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.owner = owner
        self.ttl_s = ttl_s
        self.settle_s = settle_s
        self._clock = clock
        self._sleep = sleep
        self._wall_clock = wall_clock
        self._token = uuid.uuid4().hex
        self._fd: int | None = None
        self.held = False
        self._renewed_at = float("-inf")  # this clock, when the last write of our record began
        self._watched: tuple[str, float] | None = None  # another's record, first seen when

    # -- file access ----------------------------------------------------------------------------

    def _local(self) -> str | None:
        return self.path.path if self.path.protocol in ("", "file", "local") else None

    def read(self) -> dict[str, Any] | None:
        """The current lease record, or None when there is none (or it is unreadable)."""
        # An object store's client may answer from its listing cache (s3fs does): a record
        # read from it would look unchanged while its holder renews it.
        with contextlib.suppress(Exception):
            self.path.fs.invalidate_cache(self.path.path)
        try:
            # One whole-object GET: a file opened for reading takes the size from a HEAD and
            # then GETs that range, so a record renewed in between reads truncated (not JSON),
            # which looked like no lease at all and let a waiter take it from a live holder.
            doc = json.loads(self.path.fs.cat_file(self.path.path))
        except (FileNotFoundError, ValueError, OSError):
            return None
        return doc if isinstance(doc, dict) else None

    def _record(self) -> bytes:
        return json.dumps(
            {
                "owner": self.owner,
                "token": self._token,
                "expires": self._wall_clock() + self.ttl_s,
                "ttl_s": self.ttl_s,
                "host": socket.gethostname(),
                "pid": os.getpid(),
            }
        ).encode()

    def _write(self, data: bytes) -> None:
        tmp = self.path.parent / f".{self.path.name}.{uuid.uuid4().hex}.tmp"
        with tmp.open("wb") as handle:
            handle.write(data)
        tmp.rename(self.path)

    def _ours(self) -> bool:
        return (self.read() or {}).get("token") == self._token

    def _try_local(self, local: str) -> bool:
        """Take the kernel lock without blocking; True when this lease now holds it."""
        if self._fd is None:
            # Opened once and kept: the lock file is never deleted, so every contender locks
            # the same inode (deleting it would let a late opener lock a fresh file).
            self._fd = os.open(f"{local}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            self._write(self._record())  # who holds it, for the messages of those who wait
        except BaseException:
            self._close()  # a lease we cannot describe is not held
            raise
        return True

    def _lapsed(self, current: dict[str, Any]) -> bool:
        """Whether another holder's record may be taken over (see the module doc)."""
        now = self._clock()
        seen = json.dumps(current, sort_keys=True)
        if self._watched is None or self._watched[0] != seen:
            self._watched = (seen, now)  # renewed (or new): watch it afresh
        try:  # the holder's own ttl, when it is longer than ours
            ttl = max(self.ttl_s, float(current.get("ttl_s") or 0))
            expires = float(current.get("expires") or 0)
        except (TypeError, ValueError):
            ttl, expires = self.ttl_s, 0.0
        if now - self._watched[1] >= ttl:
            return True
        if expires + ttl < self._wall_clock():
            return True
        return current.get("host") == socket.gethostname() and not _alive(current.get("pid"))

    def _try_remote(self) -> bool:
        """Take the record on object storage when free or lapsed (best effort)."""
        current = self.read()
        if current is not None and not self._lapsed(current):
            return False
        started = self._clock()
        self._write(self._record())
        self._sleep(self.settle_s)
        if not self._ours():
            return False
        self._renewed_at = started
        self._watched = None
        return True

    # -- protocol -------------------------------------------------------------------------------

    def acquire(self, *, wait_s: float, poll_s: float = 5.0, log: TaskLog | None = None) -> None:
        """Hold the lease, waiting up to ``wait_s`` for another holder to finish."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        local = self._local()
        deadline = self._clock() + wait_s
        announced = False
        while True:
            if local is not None and self._try_local(local):
                self.held = True
                return
            before = self.read() or {}
            if local is None and self._try_remote():
                self.held = True
                if log is not None and before.get("owner") is not None:
                    log.warning("Took over the lapsed write lease of %s", _who(before, self.owner))
                return
            current = self.read() or before
            if self._clock() >= deadline:
                self._close()
                raise LeaseBusyError(
                    f"{_who(current, self.owner)} is writing on-hold statuses for this network "
                    f"(lease {self.path}); nothing was written by this run. It is retried; a "
                    "holder that died lets go at once on a local data base, or "
                    f"{self.ttl_s:.0f} s after its last renewal on object storage."
                )
            if log is not None and not announced:
                log.info(
                    "Waiting for %s to finish writing (lease %s)", current.get("owner"), self.path
                )
                announced = True
            self._sleep(min(poll_s, max(0.0, deadline - self._clock())))

    def check(self) -> None:
        """Make sure the lease is still this holder's (call right before each write).

        :raises LeaseLostError: it is not held, the record is another holder's (or gone), or,
            on object storage, it is past its expiry; the lease is then given up without
            touching the record.
        """
        if not self.held:
            raise LeaseLostError(f"the on-hold write lease {self.path} is not held by this run")
        current = self.read() or {}
        ours = current.get("token") == self._token and current.get("owner") == self.owner
        # A local lease is the kernel lock: its record's expiry only informs those who wait. On
        # object storage the holder times its own lease by its own clock.
        expired = ours and self._local() is None and self._clock() - self._renewed_at >= self.ttl_s
        if ours and not expired:
            return
        self.held = False  # nothing more is written under it, the record is left alone
        self._close()
        holder = "it expired" if expired else f"now held by {current.get('owner') or 'nobody'}"
        raise LeaseLostError(
            f"this run ({self.owner}) lost the on-hold write lease {self.path} ({holder}): it "
            "stopped before its next chunk and writes nothing more. The retry waits for the "
            "lease and sends only the ids still on hold."
        )

    def renew(self) -> None:
        """Push the expiry forward (call after each chunk), once :meth:`check` says it is ours.

        :raises LeaseLostError: see :meth:`check`.
        """
        self.check()
        started = self._clock()
        self._write(self._record())
        self._renewed_at = started

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the kernel lock
            self._fd = None

    def release(self) -> None:
        """Give the lease up: its record is deleted only while it is still ours."""
        held, self.held = self.held, False
        try:
            if held and self._ours():
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
        finally:
            self._close()

    def __enter__(self) -> WriteLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _who(record: dict[str, Any], owner: str) -> str:
    """The holder of ``record`` as a waiting ``owner`` names it."""
    holder = record.get("owner", "unknown")
    if holder == owner:
        where = f"pid {record.get('pid')} on {record.get('host')}"
        return f"an earlier attempt of this run ({holder}, {where})"
    return f"another run ({holder})"


def _alive(pid: object) -> bool:
    """Whether process ``pid`` of this host runs (unknown counts as running)."""
    if not isinstance(pid, int) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True
