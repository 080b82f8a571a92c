"""Rate limits of the sandbox: ``X-RateLimit-*`` on every /v1 answer, 429 past the quota.

Two models (``--rate-limit``, ``PUT /_sandbox/rate_limit``):

* :class:`RateLimiter` ("sandbox", the default): a generous token bucket per API key.
* :class:`DocumentedQuota` ("documented"): the public "Rate limiting" guide
  (docs/api-decisions.md): one 30-s window per network per user type shared by all its keys, at
  most 10 requests in flight on ``/networks/reporting/*`` per network, and the hourly quota of
  granular reporting queries. What the guide leaves open is marked in ``choices.py``.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.errors import ApiError, before, invalid

#: The path prefix (after ``/v1``) of the concurrency-capped reporting endpoints.
REPORTING_PREFIX = "/networks/reporting/"


class Limiter(Protocol):
    """What the application asks of a rate-limit model."""

    def take(self, key: str, region: str, user_type: str) -> tuple[bool, dict[str, str], float]:
        """Count one request: ``(allowed, headers for the answer, seconds until allowed)``."""

    def enter(self, region: str, user_type: str, api: str, body: Any) -> bool:
        """Admit a handled request (raise a 429 ApiError); true when :meth:`leave` is owed."""

    def leave(self, region: str) -> None:
        """A request admitted by :meth:`enter` with ``True`` has been answered."""

    def to_json(self) -> dict[str, Any]:
        """The settings, as ``GET /_sandbox/rate_limit`` shows them."""


class RateLimiter:
    """One token bucket per key (the raw header value, ``""`` for unknown keys).

    :param capacity: bucket size (burst).
    :param refill_per_second: tokens added per second.
    """

    def __init__(
        self,
        capacity: int = choices.RATE_LIMIT_CAPACITY,
        refill_per_second: float = choices.RATE_LIMIT_REFILL_PER_SECOND,
    ) -> None:
        self.capacity = capacity
        self.refill = refill_per_second
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(
        self, key: str, region: str = "", user_type: str = ""
    ) -> tuple[bool, dict[str, str], float]:
        now = time.monotonic()
        tokens, last = self._buckets.get(key, (float(self.capacity), now))
        tokens = min(float(self.capacity), tokens + (now - last) * self.refill)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets[key] = (tokens, now)
        wait = 0.0 if allowed else (1.0 - tokens) / self.refill if self.refill > 0 else 3600.0
        # X-RateLimit-Limit is "requests per 30 s" in the guide: what the refill allows there.
        limit = max(self.capacity, int(self.refill * choices.DOCUMENTED_WINDOW_S))
        headers = {"x-ratelimit-limit": str(limit), "x-ratelimit-remaining": str(int(tokens))}
        return allowed, headers, wait

    def enter(self, region: str, user_type: str, api: str, body: Any) -> bool:
        return False

    def leave(self, region: str) -> None:
        return None

    def to_json(self) -> dict[str, Any]:
        return {"mode": "per_key", "capacity": self.capacity, "refill_per_second": self.refill}


class DocumentedQuota:
    """The documented quota: shared windows, the reporting concurrency cap, granular queries.

    :param window_s: length of a rate window (documented: 30 s).
    :param limits: requests per window per user type (``network``, ``affiliate``, ``advertiser``,
        ``marketplace``, ``""`` for unknown keys).
    :param reporting_concurrency: requests in flight on ``/networks/reporting/*`` per network.
    :param granular_per_window: granular queries per rolling ``granular_window_s``.
    :param granular_window_s: the rolling window of the granular quota (documented: 3600 s).
    :param clock: monotonic clock (seconds).
    """

    def __init__(
        self,
        *,
        window_s: float,
        limits: dict[str, int],
        reporting_concurrency: int,
        granular_per_window: int,
        granular_window_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_s = window_s
        self.limits = dict(limits)
        self.reporting_concurrency = reporting_concurrency
        self.granular_per_window = granular_per_window
        self.granular_window_s = granular_window_s
        self._clock = clock
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}  # start, used
        self._in_flight: dict[str, int] = {}
        self._granular: dict[tuple[str, str], deque[float]] = {}
        #: Refusals so far, by quota (``rate``, ``concurrency``, ``granular``): for tests, bench.
        self.refused: dict[str, int] = {"rate": 0, "concurrency": 0, "granular": 0}
        #: Most requests seen in flight at once on the reporting endpoints of one network.
        self.peak_in_flight = 0

    def _limit(self, user_type: str) -> int:
        return self.limits.get(user_type, self.limits.get("", 1))

    def take(self, key: str, region: str, user_type: str) -> tuple[bool, dict[str, str], float]:
        now = self._clock()
        limit = self._limit(user_type)
        start, used = self._windows.get((region, user_type), (now, 0))
        if now - start >= self.window_s:
            start, used = now, 0
        allowed = used < limit
        if allowed:
            used += 1
        self._windows[(region, user_type)] = (start, used)
        headers = {"x-ratelimit-limit": str(limit), "x-ratelimit-remaining": str(limit - used)}
        if not allowed:
            self.refused["rate"] += 1
        return allowed, headers, 0.0 if allowed else start + self.window_s - now

    def enter(self, region: str, user_type: str, api: str, body: Any) -> bool:
        capped = api.startswith(REPORTING_PREFIX)
        if capped:
            n = self._in_flight.get(region, 0)
            if n >= self.reporting_concurrency:
                self.refused["concurrency"] += 1
                raise before(
                    429,
                    f"Too many concurrent requests to /networks/reporting/* "
                    f"(limit {self.reporting_concurrency})",
                    {"retry-after": "1"},
                )
            self._in_flight[region] = n + 1
            self.peak_in_flight = max(self.peak_in_flight, n + 1)
        try:
            self._count_granular(region, user_type, body)
        except ApiError:
            if capped:
                self.leave(region)
            raise
        return capped

    def _count_granular(self, region: str, user_type: str, body: Any) -> None:
        if not isinstance(body, dict) or not _names_granular_column(body.get("columns")):
            return
        now = self._clock()
        seen = self._granular.setdefault((region, user_type), deque())
        while seen and now - seen[0] >= self.granular_window_s:
            seen.popleft()
        if len(seen) >= self.granular_per_window:
            self.refused["granular"] += 1
            wait = seen[0] + self.granular_window_s - now
            raise before(
                429,
                f"Granular report quota exceeded: {self.granular_per_window} queries per "
                f"rolling {self.granular_window_s:g} s",
                {"retry-after": retry_after(wait)},
            )
        seen.append(now)

    def leave(self, region: str) -> None:
        self._in_flight[region] = max(0, self._in_flight.get(region, 0) - 1)

    def to_json(self) -> dict[str, Any]:
        network = self._limit("network")
        return {
            "mode": "documented",
            # The network's window in the per-key model's terms (what older callers read).
            "capacity": network,
            "refill_per_second": network / self.window_s,
            "window_s": self.window_s,
            "limits": dict(self.limits),
            "reporting_concurrency": self.reporting_concurrency,
            "granular_per_window": self.granular_per_window,
            "granular_window_s": self.granular_window_s,
            "refused": dict(self.refused),
            "peak_in_flight": self.peak_in_flight,
        }


def _number(body: dict[str, Any], name: str, low: float, whole: bool) -> Any:
    value = body.get(name)
    kind_ok = isinstance(value, int) if whole else isinstance(value, int | float)
    if not kind_ok or isinstance(value, bool) or not isinstance(value, int | float) or value < low:
        raise invalid(f"{name} must be {'an integer' if whole else 'a number'} >= {low:g}")
    return value


def build_limiter(settings: dict[str, Any]) -> Limiter:
    """A limiter from a profile of ``choices.RATE_LIMIT_PROFILES`` or a ``PUT`` body.

    A body without ``mode`` is the per-key bucket (``capacity``, ``refill_per_second``); with
    ``"mode": "documented"`` every omitted number takes its documented value, so a test can
    shrink just the ones it needs.

    :raises ApiError: 400 naming the field that is wrong.
    """
    if not isinstance(settings, dict):
        raise invalid("body must be an object")
    mode = settings.get("mode", "per_key")
    if mode == "per_key":
        cap = _number(settings, "capacity", 1, True)
        refill = _number(settings, "refill_per_second", 0, False)
        return RateLimiter(cap, float(refill))
    if mode != "documented":
        raise invalid("mode must be 'per_key' or 'documented'")
    full = {**choices.RATE_LIMIT_PROFILES["documented"], **settings}
    limits = {**choices.RATE_LIMIT_PROFILES["documented"]["limits"], **(full["limits"] or {})}
    for name, value in limits.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise invalid(f"limits.{name} must be an integer >= 1")
    return DocumentedQuota(
        window_s=float(_number(full, "window_s", 0.001, False)),
        limits=limits,
        reporting_concurrency=_number(full, "reporting_concurrency", 1, True),
        granular_per_window=_number(full, "granular_per_window", 0, True),
        granular_window_s=float(_number(full, "granular_window_s", 0.001, False)),
    )


def retry_after(wait_s: float) -> str:
    return str(max(1, math.ceil(wait_s)))


def _names_granular_column(columns: object) -> bool:
    """Whether a request body's ``columns`` (names or ``{"column": name}`` items) names a column
    of :data:`choices.GRANULAR_COLUMNS`."""
    if not isinstance(columns, list | tuple):
        return False
    names = (c.get("column") if isinstance(c, dict) else c for c in columns)
    return any(isinstance(n, str) and n in choices.GRANULAR_COLUMNS for n in names)
