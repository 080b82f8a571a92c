"""One network's quota shared by every process that draws on it (README "Sharing one network's
quota"; the public guide's numbers in docs/api-decisions.md).

The real service keeps one budget per network and user type, whatever the key, the worker or the
machine: requests per 30-s window (``X-RateLimit-Limit``), at most 10 requests in flight on
``/networks/reporting/*``, and granular reporting queries per rolling hour. A per-hook throttle
cannot see the other tasks, so the budget is kept in a store all of them reach:

* Redis (connection extra ``quota_redis_url``): for several machines (the Celery setup has one).
  Small Lua scripts, each atomic on the server and timed by the server's clock (``TIME``), so
  no host's clock is ever compared with another's: a GCRA pacer, a semaphore whose leases
  expire, and a sorted set of granular queries. No library: the ones on PyPI (``limits``,
  ``pyrate-limiter``) pace requests but keep neither a semaphore with expiry nor a rolling
  count that can say when N queries will be free. When Redis does not answer, the extra
  ``quota_redis_unavailable`` chooses: ``fail`` (default) raises :class:`QuotaStoreError`
  naming Redis, ``local`` goes on with a conservative budget of this machine
  (:data:`FALLBACK_SHARE` of the network's) after one warning, and tries Redis again every
  :data:`FALLBACK_RETRY_S`.
* A directory of small JSON files under ``fcntl.flock`` (the default, ``quota_dir``): for the
  processes of **one** machine. Its times are that machine's monotonic clock (the same for
  every process of one boot, unmoved by wall-clock steps), stamped with the boot id; a
  directory on a network filesystem (NFS, SMB, sshfs, Ceph, ...) is refused, since another
  host's monotonic clock means nothing here.
* ``quota: local``: nothing shared; only the hook's own throttle (what the hook did before).

A reporting lease is renewed every :data:`HEARTBEAT_S` while its request is in flight, however
long the answer trickles (the read timeout bounds each socket read, not the answer); its expiry
only frees the lease of a process that died. A Redis that restarted without its data has
forgotten the leases in flight: for :data:`RESTART_GRACE_S` after the server starts it hands out
no new lease, while every live holder re-asserts its own on its next heartbeat, so the cap holds.

The store key is a hash of the network's identity (``_network_identity``: the normalized base
URL, or the ``network`` extra) and the user type (portal): never the API key, so the affiliate
keys of one network share the affiliate budget (as the service counts them), whatever the
spelling of its URL. The pacer admits at most ``0.95 x limit`` in any
window (``0.9 x limit`` spread out plus a burst of ``0.05 x limit``) so answers reordered on the
way still fit; the hook's throttle keeps reading ``X-RateLimit-Remaining`` on top, to yield to
consumers no store sees (the network's own scripts).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import math
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from affiliate_network.exceptions import (
    ConnectionConfigError,
    GranularQuotaError,
    QuotaStoreError,
)
from affiliate_network.hooks._network_identity import NetworkIdentity

log = logging.getLogger(__name__)

#: Documented requests per second per user type (older guide page; the window is 30 s).
DOCUMENTED_RATE_PER_S: dict[str, float] = {
    "network": 20.0,
    "affiliate": 5.0,
    "advertiser": 5.0,
    "marketplace": 5.0,
}
DOCUMENTED_WINDOW_S = 30.0
DOCUMENTED_REPORTING_CONCURRENCY = 10
DOCUMENTED_GRANULAR_PER_HOUR = 1000
#: Path prefix (after ``/v1``) of the concurrency-capped endpoints.
REPORTING_PREFIX = "/networks/reporting/"
#: Share of the window's limit paced out evenly, and share allowed as a burst.
PACE_SHARE = 0.9
BURST_SHARE = 0.05
#: Longest single sleep while waiting for the store (re-asked after it).
MAX_WAIT_STEP_S = 0.25
#: How often a reporting lease is renewed while its request is in flight (at most).
HEARTBEAT_S = 2.0
#: After Redis (re)starts, how long no new reporting lease is handed out: every live holder
#: re-asserts its lease on a heartbeat well within it (a few heartbeats, whatever a connect
#: attempt during the outage cost).
RESTART_GRACE_S = 10.0
#: Share of the network's rate and reporting cap a process keeps while Redis is down and
#: ``quota_redis_unavailable: local`` (each machine then counts only its own processes).
FALLBACK_SHARE = 0.25
#: While on the local fallback, how often Redis is tried again.
FALLBACK_RETRY_S = 30.0
#: Filesystem types of network filesystems, on which the file store is refused (``/proc/mounts``
#: names; ``fuse.*`` network mounts are listed by their subtype).
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb", "smb2", "smb3", "smbfs", "ncpfs", "afs", "coda",
        "ceph", "glusterfs", "gfs2", "ocfs2", "lustre", "gpfs", "beegfs", "9p", "davfs",
        "fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "fuse.cephfs", "fuse.s3fs",
        "fuse.gcsfuse", "fuse.rclone", "fuse.juicefs", "fuse.davfs2", "fuse.mountpoint-s3",
        "fuse.goofys", "fuse.blobfuse", "fuse.blobfuse2", "fuse.smbnetfs", "fuse.curlftpfs",
        "fuse.nfs", "fuse.lizardfs", "fuse.moosefs", "fuse.seaweedfs", "fuse.sshfs-fuse",
    }
)  # fmt: skip
#: Connection extras read here (validated by :meth:`QuotaSettings.from_extras`).
QUOTA_EXTRAS = (
    "quota",
    "quota_redis_url",
    "quota_dir",
    "quota_redis_unavailable",
    "rate_limit",
    "rate_window_s",
    "reporting_concurrency_cap",
    "granular_per_hour",
    "granular_window_s",
)


@dataclass(frozen=True)
class QuotaSettings:
    """How a hook shares its network's quota.

    :param mode: ``shared`` (default) or ``local`` (nothing shared across processes).
    :param redis_url: Redis URL of the store (``None``: the file store).
    :param directory: folder of the file store.
    :param rate_limit: requests per window (``None``: the answers' ``X-RateLimit-Limit``, the
        documented value for the portal until the first answer).
    :param window_s: the rate window (documented: 30 s).
    :param reporting_concurrency: requests in flight on ``/networks/reporting/*``.
    :param granular_per_hour: granular queries per rolling window (0: not counted).
    :param granular_window_s: that rolling window (documented: one hour).
    :param redis_unavailable: with Redis not answering, ``fail`` (raise
        :class:`QuotaStoreError`) or ``local`` (a conservative budget of this machine).
    """

    mode: str = "shared"
    redis_url: str | None = None
    redis_unavailable: str = "fail"
    directory: str | None = None
    rate_limit: int | None = None
    window_s: float = DOCUMENTED_WINDOW_S
    reporting_concurrency: int = DOCUMENTED_REPORTING_CONCURRENCY
    granular_per_hour: int = DOCUMENTED_GRANULAR_PER_HOUR
    granular_window_s: float = 3600.0

    @classmethod
    def from_extras(cls, extras: Mapping[str, Any], conn_id: str) -> QuotaSettings:
        """The settings from connection extras (URI-form strings accepted).

        :raises ConnectionConfigError: a value out of range (names the extra, never the value).
        """

        def number(
            name: str,
            kind: type[int] | type[float],
            default: Any,
            low: float,
            high: float | None = None,
        ) -> Any:
            raw = extras.get(name)
            if raw is None or raw == "":
                return default
            try:
                value = kind(raw) if not isinstance(raw, bool) else None
            except (TypeError, ValueError, OverflowError):
                value = None
            if (
                value is None
                or not value >= low
                or (high is not None and not value <= high)
                or (kind is int and float(raw) != value)
            ):
                what = "a whole number" if kind is int else "a number"
                bounds = f">= {low:g}" if high is None else f"from {low:g} to {high:g}"
                raise ConnectionConfigError(
                    f"connection {conn_id!r}: {name} must be {what} {bounds}"
                )
            return value

        mode = str(extras.get("quota") or "shared").strip().lower()
        if mode not in ("shared", "local"):
            raise ConnectionConfigError(
                f"connection {conn_id!r}: quota must be 'shared' or 'local'"
            )
        redis_url = str(extras.get("quota_redis_url") or "").strip() or None
        if redis_url is not None and not redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConnectionConfigError(
                f"connection {conn_id!r}: quota_redis_url must be a redis://, rediss:// or "
                "unix:// URL"
            )
        unavailable = str(extras.get("quota_redis_unavailable") or "fail").strip().lower()
        if unavailable not in ("fail", "local"):
            raise ConnectionConfigError(
                f"connection {conn_id!r}: quota_redis_unavailable must be 'fail' or 'local'"
            )
        return cls(
            mode=mode,
            redis_url=redis_url,
            redis_unavailable=unavailable,
            directory=str(extras.get("quota_dir") or "").strip() or None,
            rate_limit=number("rate_limit", int, None, 1),
            # The service's windows reset every 30 s: a longer window would let the pacer's
            # burst exceed one of them. Shorter ones (tests, a stricter share) are fine.
            window_s=number(
                "rate_window_s", float, DOCUMENTED_WINDOW_S, 0.001, DOCUMENTED_WINDOW_S
            ),
            # The service refuses an 11th request in flight on /networks/reporting/*.
            reporting_concurrency=number(
                "reporting_concurrency_cap",
                int,
                DOCUMENTED_REPORTING_CONCURRENCY,
                1,
                DOCUMENTED_REPORTING_CONCURRENCY,
            ),
            granular_per_hour=number("granular_per_hour", int, DOCUMENTED_GRANULAR_PER_HOUR, 0),
            granular_window_s=number("granular_window_s", float, 3600.0, 0.001),
        )


class QuotaStore(Protocol):
    """Where the shared budget lives; every method is atomic across processes."""

    def pace(self, interval_s: float, tolerance_s: float) -> float:
        """Take one request slot of the GCRA pacer: 0 when taken, else seconds to wait."""

    def enter(self, token: str, cap: int, ttl_s: float) -> bool:
        """Take one of ``cap`` in-flight leases (expiring after ``ttl_s``); false when full."""

    def leave(self, token: str) -> None:
        """Give a lease back."""

    def renew(self, tokens: Sequence[str], ttl_s: float) -> None:
        """Push the expiry of leases still in flight ``ttl_s`` ahead, re-asserting any the
        store lost (a Redis restarted without its data)."""

    def granular(self, needed: int, budget: int, window_s: float) -> tuple[bool, list[float]]:
        """Count ``needed`` granular queries if they fit (0: only look).

        :return: whether they were counted, and the ages (seconds) of the queries counted in
            the rolling window before this call, oldest first.
        """


# --- the file store (one machine) -----------------------------------------------------------------


def _unescape_mount(field: str) -> str:
    # /proc/mounts escapes blanks, tabs, newlines and backslashes as octal.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def filesystem_type(path: str | os.PathLike[str], mounts: str = "/proc/mounts") -> str | None:
    """The type of the filesystem ``path`` lives on, from the mount table (``None``: no table,
    as on macOS).

    :param path: an existing file or folder.
    :param mounts: the mount table to read (the kernel's by default).
    """
    try:
        with open(mounts, encoding="utf-8", errors="replace") as fh:
            table = [line.split() for line in fh]
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for fields in table:
        if len(fields) < 3:
            continue
        point = _unescape_mount(fields[1])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        # The longest mount point holding the path; a later mount on the same point wins.
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def is_network_filesystem(fstype: str | None) -> bool:
    """Whether a filesystem type (as ``/proc/mounts`` names it) is a network filesystem."""
    if not fstype:
        return False
    kind = fstype.lower()
    return kind in NETWORK_FILESYSTEMS or kind.split(".")[0] in NETWORK_FILESYSTEMS


def _boot_id() -> str:
    """This boot of this machine: the monotonic clock's origin."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:  # not Linux: the boot time, to the second it is stable at
        return f"boot@{round(time.time() - time.monotonic(), -1):.0f}"


class FileStore:
    """The budget in small JSON files under ``fcntl.flock`` (the processes of one machine).

    Every time in the files is this machine's monotonic clock, stamped with the boot id: no
    process compares a wall clock with another's, and a file of an earlier boot starts afresh.

    :param directory: folder of the files (created, mode 0700); not on a network filesystem.
    :param scope: hashed identity of the network and user type (the file names' stem).
    :param clock: this machine's clock (monotonic, shared by its processes).
    :param mounts: the mount table the folder's filesystem is looked up in.
    :raises ConnectionConfigError: the folder is on a network filesystem (several hosts would
        share it, each with its own clock).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        scope: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        mounts: str = "/proc/mounts",
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fstype = filesystem_type(self.directory, mounts)
        if is_network_filesystem(fstype):
            raise ConnectionConfigError(
                f"quota_dir {str(self.directory)!r} is on a network filesystem ({fstype}): the "
                "file store keeps one machine's budget by that machine's clock. Give each "
                "machine a local quota_dir, or share the budget across machines with "
                "quota_redis_url"
            )
        self.scope = scope
        self._clock = clock
        self._boot = _boot_id()

    @contextlib.contextmanager
    def _locked(self, part: str) -> Iterator[dict[str, Any]]:
        path = self.directory / f"{self.scope}.{part}.json"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file is closed
            raw = fh.read()
            try:
                doc = json.loads(raw) if raw else {}
            except ValueError:
                doc = {}  # a torn write (a killed process): start that part afresh
            if not isinstance(doc, dict) or doc.get("boot") != self._boot:
                doc = {}  # another boot's clock (or the old wall-clock format): nothing carries
            state = dict(doc.get("state") or {})
            before = json.dumps(state, sort_keys=True)
            yield state
            if json.dumps(state, sort_keys=True) != before or not doc:
                fh.seek(0)
                fh.truncate()
                fh.write(json.dumps({"boot": self._boot, "state": state}))
                fh.flush()

    def pace(self, interval_s: float, tolerance_s: float) -> float:
        with self._locked("rate") as state:
            now = self._clock()
            tat = max(float(state.get("tat", 0.0)), now)
            wait = tat - tolerance_s - now
            if wait > 0:
                return wait
            state["tat"] = tat + interval_s
            return 0.0

    def enter(self, token: str, cap: int, ttl_s: float) -> bool:
        with self._locked("slots") as state:
            now = self._clock()
            live = {k: v for k, v in state.items() if v > now}
            state.clear()
            state.update(live)
            if len(live) >= cap:
                return False
            state[token] = now + ttl_s
            return True

    def leave(self, token: str) -> None:
        with self._locked("slots") as state:
            state.pop(token, None)

    def renew(self, tokens: Sequence[str], ttl_s: float) -> None:
        with self._locked("slots") as state:
            expires = self._clock() + ttl_s
            for token in tokens:
                state[token] = expires

    def granular(self, needed: int, budget: int, window_s: float) -> tuple[bool, list[float]]:
        with self._locked("granular") as state:
            now = self._clock()
            times = sorted(t for t in state.get("times", []) if now - t < window_s)
            ages = [now - t for t in times]
            fits = needed > 0 and len(times) + needed <= budget
            if fits:
                times += [now] * needed
            state["times"] = times
            return fits, ages


def granular_ages(directory: str | Path, scope: str, window_s: float) -> list[float] | None:
    """Ages (seconds) of the granular queries a file store counts in its rolling window, read
    without its lock and without writing: for a page that shows headroom, never for a decision.

    :param directory: the store's folder (``quota_dir``).
    :param scope: the store's name (:func:`scope_of`).
    :param window_s: the rolling window.
    :returns: ``[]`` when nothing was counted in this boot; ``None`` when the file is torn.
    """
    path = Path(directory) / f"{scope}.granular.json"
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        doc = json.loads(raw) if raw else {}
        if not isinstance(doc, dict) or doc.get("boot") != _boot_id():
            return []  # another boot's clock: nothing of it counts any more
        now = time.monotonic()
        times = [float(t) for t in (doc.get("state") or {}).get("times", [])]
    except (ValueError, TypeError, AttributeError):
        return None
    return sorted(now - t for t in times if now - t < window_s)


# --- the Redis store (several machines) -----------------------------------------------------------

_PACE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - tonumber(ARGV[2]) - now
if wait > 0 then return tostring(wait) end
local new = tat + tonumber(ARGV[1])
redis.call('SET', KEYS[1], tostring(new), 'PX', math.ceil((new - now) * 1000) + 1000)
return '0'
"""
_ENTER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local info = redis.call('INFO', 'server')
local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) or 0
if up < tonumber(ARGV[4]) then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) * 1000) + 1000)
return 1
"""
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
return 1
"""
_GRANULAR = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local window = tonumber(ARGV[1])
local needed = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local seen = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local out = {'0', tostring(now)}
for i = 2, #seen, 2 do out[#out + 1] = seen[i] end
if needed > 0 and #seen / 2 + needed <= tonumber(ARGV[2]) then
  for i = 1, needed do redis.call('ZADD', KEYS[1], now, ARGV[4] .. ':' .. i) end
  redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000) + 1000)
  out[1] = '1'
end
return out
"""
_REDIS_CLIENTS: dict[str, Any] = {}
_REDIS_LOCK = threading.Lock()
#: Seconds a Redis command may take before the store counts Redis as not answering.
REDIS_TIMEOUT_S = 5.0


def shown_url(url: str) -> str:
    """``url`` without its credentials (a Redis URL may carry a password)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class RedisStore:
    """The budget in Redis: atomic Lua scripts timed by the Redis server's clock.

    :param url: Redis URL (one client, and so one connection pool, per URL and process).
    :param scope: hashed identity of the network and user type (the keys' middle part).
    :param restart_grace_s: how long after the server starts no new reporting lease is handed
        out (the holders re-assert theirs meanwhile).
    :raises QuotaStoreError: from every method, when Redis does not answer (names Redis, never
        the URL's password).
    """

    def __init__(self, url: str, scope: str, *, restart_grace_s: float = RESTART_GRACE_S) -> None:
        try:
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ImportError:  # pragma: no cover - the celery extra brings it
            raise ConnectionConfigError(
                "quota_redis_url is set but the 'redis' package is not installed "
                "(pip install redis, or the provider's celery extra)"
            ) from None
        with _REDIS_LOCK:
            client = _REDIS_CLIENTS.get(url)
            if client is None:
                # One quick retry: a Redis that is down answers every call of every hook, so
                # the caller (fail or fall back) decides, not a long backoff in each call.
                client = redis.Redis.from_url(
                    url,
                    socket_timeout=REDIS_TIMEOUT_S,
                    socket_connect_timeout=REDIS_TIMEOUT_S,
                    retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1),
                    decode_responses=True,
                )
                _REDIS_CLIENTS[url] = client
        self.url = shown_url(url)
        self._errors: tuple[type[BaseException], ...] = (redis.exceptions.RedisError,)
        self._keys = {p: f"affiliate_network:quota:{scope}:{p}" for p in ("rate", "slots", "gq")}
        self._client = client
        self._grace = restart_grace_s
        self._pace = client.register_script(_PACE)
        self._enter = client.register_script(_ENTER)
        self._renew = client.register_script(_RENEW)
        self._granular = client.register_script(_GRANULAR)

    @contextlib.contextmanager
    def _answering(self) -> Iterator[None]:
        try:
            yield
        except self._errors as exc:
            # The client's message names host and port, never the password.
            raise QuotaStoreError(
                f"the shared quota store, Redis at {self.url}, did not answer "
                f"({type(exc).__name__}: {exc}); nothing was sent. The task is retried; to go "
                "on with a conservative budget of each machine while Redis is down, set the "
                "connection extra quota_redis_unavailable to 'local'"
            ) from None

    def pace(self, interval_s: float, tolerance_s: float) -> float:
        with self._answering():
            return float(self._pace(keys=[self._keys["rate"]], args=[interval_s, tolerance_s]))

    def enter(self, token: str, cap: int, ttl_s: float) -> bool:
        with self._answering():
            taken = self._enter(keys=[self._keys["slots"]], args=[token, cap, ttl_s, self._grace])
        return bool(int(taken))

    def leave(self, token: str) -> None:
        with self._answering():
            self._client.zrem(self._keys["slots"], token)

    def renew(self, tokens: Sequence[str], ttl_s: float) -> None:
        if tokens:
            with self._answering():
                self._renew(keys=[self._keys["slots"]], args=[ttl_s, *tokens])

    def granular(self, needed: int, budget: int, window_s: float) -> tuple[bool, list[float]]:
        with self._answering():
            out = self._granular(
                keys=[self._keys["gq"]], args=[window_s, budget, needed, uuid.uuid4().hex]
            )
        now = float(out[1])
        return out[0] == "1", [now - float(t) for t in out[2:]]


class FallbackStore:
    """Redis, and while it does not answer, a conservative budget of this machine.

    One warning when Redis stops answering (and one line when it is back); meanwhile this
    machine's processes share a file store at :data:`FALLBACK_SHARE` of the network's rate,
    reporting cap and granular budget, and Redis is tried again every :data:`FALLBACK_RETRY_S`.

    :param primary: the Redis store.
    :param local: the file store of this machine.
    :param clock: monotonic clock (when to try Redis again).
    """

    def __init__(
        self,
        primary: RedisStore,
        local: FileStore,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.primary = primary
        self.local = local
        self._clock = clock
        self._lock = threading.Lock()
        self._down_until: float | None = None  # while set and ahead: use the local budget
        self._warned = False
        self._where: dict[str, QuotaStore] = {}  # lease -> the store that handed it out

    def _store(self) -> QuotaStore:
        with self._lock:
            if self._down_until is not None and self._clock() < self._down_until:
                return self.local
            return self.primary

    def _call(self, call: Callable[[QuotaStore], Any]) -> tuple[Any, QuotaStore]:
        store = self._store()
        if store is self.local:
            return call(self.local), self.local
        try:
            result = call(self.primary)
        except QuotaStoreError as exc:
            with self._lock:
                self._down_until = self._clock() + FALLBACK_RETRY_S
                first, self._warned = not self._warned, True
            if first:
                log.warning(
                    "Redis at %s does not answer: this machine goes on with %.0f%% of the "
                    "network's quota (its own processes only) and tries Redis again every "
                    "%.0f s (%s)",
                    self.primary.url,
                    FALLBACK_SHARE * 100,
                    FALLBACK_RETRY_S,
                    exc,
                )
            return call(self.local), self.local
        with self._lock:
            back, self._down_until = self._down_until is not None, None
        if back:
            log.info(
                "Redis at %s answers again: the network's shared quota is back", self.primary.url
            )
        return result, self.primary

    def pace(self, interval_s: float, tolerance_s: float) -> float:
        def pace(store: QuotaStore) -> float:
            if store is self.local:
                return store.pace(interval_s / FALLBACK_SHARE, 0.0)
            return store.pace(interval_s, tolerance_s)

        return float(self._call(pace)[0])

    def enter(self, token: str, cap: int, ttl_s: float) -> bool:
        def enter(store: QuotaStore) -> bool:
            share = max(1, int(cap * FALLBACK_SHARE)) if store is self.local else cap
            return store.enter(token, share, ttl_s)

        taken, store = self._call(enter)
        if taken:
            with self._lock:
                self._where[token] = store
        return bool(taken)

    def leave(self, token: str) -> None:
        with self._lock:
            store = self._where.pop(token, self.primary)
        store.leave(token)

    def renew(self, tokens: Sequence[str], ttl_s: float) -> None:
        with self._lock:
            by_store: dict[int, tuple[QuotaStore, list[str]]] = {}
            for token in tokens:
                store = self._where.get(token, self.primary)
                by_store.setdefault(id(store), (store, []))[1].append(token)
        for store, held in by_store.values():
            with contextlib.suppress(QuotaStoreError):
                store.renew(held, ttl_s)

    def granular(self, needed: int, budget: int, window_s: float) -> tuple[bool, list[float]]:
        def granular(store: QuotaStore) -> tuple[bool, list[float]]:
            share = int(budget * FALLBACK_SHARE) if store is self.local else budget
            return store.granular(needed, share, window_s)

        fits, ages = self._call(granular)[0]
        return bool(fits), list(ages)


def scope_of(network: NetworkIdentity, portal: str) -> str:
    """The store's name for one network's budget of one user type: a hash, never a key."""
    return hashlib.sha256(f"{network.canonical}|{portal}".encode()).hexdigest()[:32]


def open_store(settings: QuotaSettings, network: NetworkIdentity, portal: str) -> QuotaStore | None:
    """The store the settings name (``None`` for ``quota: local``)."""
    if settings.mode == "local":
        return None
    scope = scope_of(network, portal)
    directory = settings.directory or os.path.join(
        tempfile.gettempdir(), f"affiliate-network-quota-{os.getuid()}"
    )
    if settings.redis_url:
        redis_store = RedisStore(settings.redis_url, scope)
        if settings.redis_unavailable == "local":
            return FallbackStore(redis_store, FileStore(directory, f"{scope}.fallback"))
        return redis_store
    return FileStore(directory, scope)


# --- what the hook uses ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GranularBudget:
    """The rolling-hour granular quota as the store sees it now.

    :param budget: queries allowed per rolling window.
    :param window_s: the rolling window.
    :param ages: ages (seconds) of the queries counted in it, oldest first.
    """

    budget: int
    window_s: float
    ages: tuple[float, ...]

    @property
    def used(self) -> int:
        """Queries counted in the rolling window."""
        return len(self.ages)

    @property
    def left(self) -> int:
        """Queries that may be sent now."""
        return max(0, self.budget - self.used)

    def wait_for(self, needed: int) -> float | None:
        """Seconds until ``needed`` queries fit (``None``: more than the whole budget)."""
        if needed > self.budget:
            return None
        over = self.used + needed - self.budget
        if over <= 0:
            return 0.0
        # The ``over`` oldest must leave the window first.
        return max(0.0, self.window_s - self.ages[over - 1])


def refusal(needed: int, status: GranularBudget, what: str) -> GranularQuotaError:
    """The error of ``needed`` granular queries that do not fit (nothing was sent)."""
    wait = status.wait_for(needed)
    if wait is None:
        hours = math.ceil(needed / status.budget) if status.budget else 0
        when = (
            f"more than the whole budget: split it into at least {hours} runs of at most "
            f"{status.budget:,} queries, one per {_duration(status.window_s)}"
        )
    else:
        when = f"enough frees in {_duration(wait)}"
    return GranularQuotaError(
        f"{what}: needs {needed:,} granular queries, the network's budget is {status.budget:,} "
        f"per rolling {_duration(status.window_s)} and {status.used:,} were used in the last "
        f"{_duration(status.window_s)} ({status.left:,} left); {when}. Nothing was sent."
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return "hour" if hours == 1 else f"{hours} hours"
    return str(dt.timedelta(seconds=math.ceil(seconds)))


class SharedBudget:
    """The hook's side of the shared quota: paces requests, caps reporting concurrency, counts
    granular queries.

    :param store: the shared store (``None``: nothing shared, every call returns at once).
    :param settings: the numbers.
    :param portal: the connection's user type (its documented rate is the default limit).
    :param slot_ttl_s: how long a reporting lease lives once its holder stops renewing it (a
        process that died); while its request is in flight a heartbeat thread renews it every
        :data:`HEARTBEAT_S` (or a quarter of the ttl, if shorter).
    :param sleep: how to wait.
    """

    def __init__(
        self,
        store: QuotaStore | None,
        settings: QuotaSettings,
        portal: str,
        *,
        slot_ttl_s: float,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.settings = settings
        self._slot_ttl_s = slot_ttl_s
        self._sleep = sleep
        documented = DOCUMENTED_RATE_PER_S.get(portal, 5.0) * DOCUMENTED_WINDOW_S
        self._limit = settings.rate_limit or int(documented)
        self._limit_fixed = settings.rate_limit is not None
        #: Seconds spent waiting for the pacer and for reporting slots (this process).
        self.waited_s = 0.0
        self._held: set[str] = set()  # reporting leases in flight, renewed by the heartbeat
        self._held_lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self.heartbeat_s = min(HEARTBEAT_S, slot_ttl_s / 4)

    @property
    def limit(self) -> int:
        """Requests per window the pacer works to."""
        return self._limit

    def observe_limit(self, header: str | None) -> None:
        """Follow the server's ``X-RateLimit-Limit`` (unless the ``rate_limit`` extra fixes it)."""
        if self._limit_fixed or not header or not header.isdigit() or int(header) < 1:
            return
        self._limit = int(header)

    def acquire(self, *, reporting: bool) -> str | None:
        """Wait for a pacer slot, and for a reporting lease when ``reporting``.

        :param reporting: the request is one of the concurrency-capped reporting calls
            (``/networks/reporting/*``, see :data:`REPORTING_PREFIX`).
        :return: the lease to give back with :meth:`release` (``None``: none taken).
        """
        if self.store is None:
            return None
        token = None
        if reporting:
            token = uuid.uuid4().hex
            while not self.store.enter(
                token, self.settings.reporting_concurrency, self._slot_ttl_s
            ):
                self._wait(0.02)
            self._hold(token)
        try:
            limit = max(1, self._limit)
            interval = self.settings.window_s / (limit * PACE_SHARE)
            tolerance = interval * max(0, int(limit * BURST_SHARE) - 1)
            while (wait := self.store.pace(interval, tolerance)) > 0:
                self._wait(min(wait, MAX_WAIT_STEP_S))
        except BaseException:
            self.release(token)
            raise
        return token

    def release(self, token: str | None) -> None:
        """Give back the lease :meth:`acquire` returned.

        A store that does not answer is not an error here: the request is over, and the lease,
        no longer renewed, expires after the slot ttl.
        """
        if token is None or self.store is None:
            return
        with self._held_lock:
            self._held.discard(token)
        try:
            self.store.leave(token)
        except QuotaStoreError as exc:
            log.debug("reporting lease not given back (%s); it expires unrenewed", exc)

    def _hold(self, token: str) -> None:
        """Count ``token`` in flight; start the heartbeat that renews it if none runs."""
        with self._held_lock:
            self._held.add(token)
            if self._heartbeat is None:
                self._heartbeat = threading.Thread(
                    target=self._beat, name="affiliate-network-quota-heartbeat", daemon=True
                )
                self._heartbeat.start()

    def _beat(self) -> None:
        """Renew the leases in flight every :attr:`heartbeat_s`; end when none is left."""
        assert self.store is not None
        while True:
            time.sleep(self.heartbeat_s)  # real time: the leases expire in real time
            with self._held_lock:
                tokens = sorted(self._held)
                if not tokens:
                    self._heartbeat = None
                    return
            try:
                self.store.renew(tokens, self._slot_ttl_s)
            except QuotaStoreError as exc:  # Redis down: the next beat re-asserts them
                log.debug("reporting leases not renewed (%s)", exc)

    def _wait(self, seconds: float) -> None:
        self._sleep(seconds)
        self.waited_s += seconds

    def granular_status(self) -> GranularBudget:
        """What is used and left of the granular quota (nothing counted when not shared)."""
        s = self.settings
        if self.store is None or s.granular_per_hour == 0:
            return GranularBudget(s.granular_per_hour, s.granular_window_s, ())
        _, ages = self.store.granular(0, s.granular_per_hour, s.granular_window_s)
        return GranularBudget(s.granular_per_hour, s.granular_window_s, tuple(ages))

    def take_granular(self, needed: int, what: str) -> None:
        """Count ``needed`` granular queries before they are sent, or refuse them all.

        :raises GranularQuotaError: they do not fit in what is left of the rolling hour.
        """
        s = self.settings
        if self.store is None or s.granular_per_hour == 0 or needed <= 0:
            return
        fits, ages = self.store.granular(needed, s.granular_per_hour, s.granular_window_s)
        if not fits:
            status = GranularBudget(s.granular_per_hour, s.granular_window_s, tuple(ages))
            raise refusal(needed, status, what)

    def check_granular(self, needed: int, what: str) -> GranularBudget:
        """Refuse ``needed`` granular queries up front when they do not fit now (none counted).

        :raises GranularQuotaError: naming needed, budget, used and when enough frees.
        """
        status = self.granular_status()
        if self.store is not None and status.budget and needed > status.left:
            raise refusal(needed, status, what)
        return status
