"""One network's quota shared by every process that draws on it (README "Sharing one network's
quota"; the public guide's numbers in docs/api-decisions.md).

The real service keeps one budget per network and user type, whatever the key, the worker or the
machine: requests per 30-s window (``X-RateLimit-Limit``), at most 10 requests in flight on
``/networks/reporting/*``, and granular reporting queries per rolling hour. A per-hook throttle
cannot see the other tasks, so the budget is kept in a store all of them reach:

* Redis (connection extra ``quota_redis_url``): for several machines (the Celery setup has one).
  Three small Lua scripts, each atomic on the server and timed by the server's clock: a GCRA
  pacer, a semaphore whose leases expire, and a sorted set of granular queries. No library:
  the ones on PyPI (``limits``, ``pyrate-limiter``) pace requests but keep neither a
  semaphore with expiry nor a rolling count that can say when N queries will be free.
* A directory of small JSON files under ``fcntl.flock`` (the default, ``quota_dir``): for the
  processes of one machine.
* ``quota: local``: nothing shared; only the hook's own throttle (what the hook did before).

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
import math
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from affiliate_network.exceptions import ConnectionConfigError, GranularQuotaError
from affiliate_network.hooks._network_identity import NetworkIdentity

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
#: Connection extras read here (validated by :meth:`QuotaSettings.from_extras`).
QUOTA_EXTRAS = (
    "quota",
    "quota_redis_url",
    "quota_dir",
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
    """

    mode: str = "shared"
    redis_url: str | None = None
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

        def number(name: str, kind: type[int] | type[float], low: float, default: Any) -> Any:
            raw = extras.get(name)
            if raw is None or raw == "":
                return default
            try:
                value = kind(raw) if not isinstance(raw, bool) else None
            except (TypeError, ValueError):
                value = None
            if value is None or not value >= low or (kind is int and float(raw) != value):
                raise ConnectionConfigError(
                    f"connection {conn_id!r}: {name} must be "
                    f"{'a whole number' if kind is int else 'a number'} >= {low:g}"
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
        return cls(
            mode=mode,
            redis_url=redis_url,
            directory=str(extras.get("quota_dir") or "").strip() or None,
            rate_limit=number("rate_limit", int, 1, None),
            window_s=number("rate_window_s", float, 0.001, DOCUMENTED_WINDOW_S),
            reporting_concurrency=number(
                "reporting_concurrency_cap", int, 1, DOCUMENTED_REPORTING_CONCURRENCY
            ),
            granular_per_hour=number("granular_per_hour", int, 0, DOCUMENTED_GRANULAR_PER_HOUR),
            granular_window_s=number("granular_window_s", float, 0.001, 3600.0),
        )


class QuotaStore(Protocol):
    """Where the shared budget lives; every method is atomic across processes."""

    def pace(self, interval_s: float, tolerance_s: float) -> float:
        """Take one request slot of the GCRA pacer: 0 when taken, else seconds to wait."""

    def enter(self, token: str, cap: int, ttl_s: float) -> bool:
        """Take one of ``cap`` in-flight leases (expiring after ``ttl_s``); false when full."""

    def leave(self, token: str) -> None:
        """Give a lease back."""

    def granular(self, needed: int, budget: int, window_s: float) -> tuple[bool, list[float]]:
        """Count ``needed`` granular queries if they fit (0: only look).

        :return: whether they were counted, and the ages (seconds) of the queries counted in
            the rolling window before this call, oldest first.
        """


# --- the file store (one machine) -----------------------------------------------------------------


class FileStore:
    """The budget in small JSON files under ``fcntl.flock`` (processes of one machine).

    :param directory: folder of the files (created, mode 0700).
    :param scope: hashed identity of the network and user type (the file names' stem).
    """

    def __init__(self, directory: str | os.PathLike[str], scope: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.scope = scope

    @contextlib.contextmanager
    def _locked(self, part: str) -> Iterator[dict[str, Any]]:
        path = self.directory / f"{self.scope}.{part}.json"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file is closed
            raw = fh.read()
            try:
                state = json.loads(raw) if raw else {}
            except ValueError:
                state = {}  # a torn write (a killed process): start that part afresh
            before = dict(state)
            yield state
            if state != before:
                fh.seek(0)
                fh.truncate()
                fh.write(json.dumps(state))
                fh.flush()

    def pace(self, interval_s: float, tolerance_s: float) -> float:
        with self._locked("rate") as state:
            now = time.time()
            tat = max(float(state.get("tat", 0.0)), now)
            wait = tat - tolerance_s - now
            if wait > 0:
                return wait
            state["tat"] = tat + interval_s
            return 0.0

    def enter(self, token: str, cap: int, ttl_s: float) -> bool:
        with self._locked("slots") as state:
            now = time.time()
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

    def granular(self, needed: int, budget: int, window_s: float) -> tuple[bool, list[float]]:
        with self._locked("granular") as state:
            now = time.time()
            times = sorted(t for t in state.get("times", []) if now - t < window_s)
            ages = [now - t for t in times]
            fits = needed > 0 and len(times) + needed <= budget
            if fits:
                times += [now] * needed
            state["times"] = times
            return fits, ages


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
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) * 1000) + 1000)
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


class RedisStore:
    """The budget in Redis: atomic Lua scripts timed by the Redis server's clock.

    :param url: Redis URL (one client, and so one connection pool, per URL and process).
    :param scope: hashed identity of the network and user type (the keys' middle part).
    """

    def __init__(self, url: str, scope: str) -> None:
        try:
            import redis
        except ImportError:  # pragma: no cover - the celery extra brings it
            raise ConnectionConfigError(
                "quota_redis_url is set but the 'redis' package is not installed "
                "(pip install redis, or the provider's celery extra)"
            ) from None
        with _REDIS_LOCK:
            client = _REDIS_CLIENTS.get(url)
            if client is None:
                client = redis.Redis.from_url(url, socket_timeout=10, decode_responses=True)
                _REDIS_CLIENTS[url] = client
        self._keys = {p: f"affiliate_network:quota:{scope}:{p}" for p in ("rate", "slots", "gq")}
        self._client = client
        self._pace = client.register_script(_PACE)
        self._enter = client.register_script(_ENTER)
        self._granular = client.register_script(_GRANULAR)

    def pace(self, interval_s: float, tolerance_s: float) -> float:
        return float(self._pace(keys=[self._keys["rate"]], args=[interval_s, tolerance_s]))

    def enter(self, token: str, cap: int, ttl_s: float) -> bool:
        return bool(int(self._enter(keys=[self._keys["slots"]], args=[token, cap, ttl_s])))

    def leave(self, token: str) -> None:
        self._client.zrem(self._keys["slots"], token)

    def granular(self, needed: int, budget: int, window_s: float) -> tuple[bool, list[float]]:
        out = self._granular(
            keys=[self._keys["gq"]], args=[window_s, budget, needed, uuid.uuid4().hex]
        )
        now = float(out[1])
        return out[0] == "1", [now - float(t) for t in out[2:]]


def scope_of(network: NetworkIdentity, portal: str) -> str:
    """The store's name for one network's budget of one user type: a hash, never a key."""
    return hashlib.sha256(f"{network.canonical}|{portal}".encode()).hexdigest()[:32]


def open_store(settings: QuotaSettings, network: NetworkIdentity, portal: str) -> QuotaStore | None:
    """The store the settings name (``None`` for ``quota: local``)."""
    if settings.mode == "local":
        return None
    scope = scope_of(network, portal)
    if settings.redis_url:
        return RedisStore(settings.redis_url, scope)
    directory = settings.directory or os.path.join(
        tempfile.gettempdir(), f"affiliate-network-quota-{os.getuid()}"
    )
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
    :param slot_ttl_s: how long an in-flight lease lives if its holder dies (longer than any
        request: the read timeout plus a margin).
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
        """Give back the lease :meth:`acquire` returned."""
        if token is not None and self.store is not None:
            self.store.leave(token)

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
