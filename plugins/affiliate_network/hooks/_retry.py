"""Retry policy of the hook, straight from the spec's "Errors" section.

Spec, retry guidance: retry only on 429 and 5xx, exponential backoff with jitter, base delay
doubling from 1 second, capped at 30 seconds, plus up to 1 second of random jitter, up to 5
attempts. Connection errors and timeouts are retried too, but only when the request is idempotent
or was provably never sent (see :func:`was_never_sent`).
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between attempts of one request.

    :param max_attempts: tries in all (the first one included); 1 disables retries.
    :param base_delay: wait after the first failed attempt, in seconds; doubles on each failure.
    :param max_delay: cap of the doubling wait, in seconds (jitter is added on top).
    :param jitter: up to this many random seconds added to each wait.
    """

    max_attempts: int = 5
    base_delay: float = 1.0
    max_delay: float = 30.0
    jitter: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.jitter < 0:
            raise ValueError("base_delay, max_delay and jitter must not be negative")

    def backoff(self, failed_attempts: int, random_fraction: float) -> float:
        """Seconds to wait after ``failed_attempts`` failures (1-based), jitter included.

        :param failed_attempts: how many attempts have failed so far (1 after the first).
        :param random_fraction: a number in ``[0, 1)`` scaling the jitter.
        """
        doubling = self.base_delay * (2.0 ** (failed_attempts - 1))
        return min(doubling, self.max_delay) + self.jitter * random_fraction


def is_retryable_status(status_code: int) -> bool:
    """429 and every 5xx, as the spec's status table says; never another 4xx."""
    return status_code == 429 or status_code >= 500


def parse_retry_after(value: str | None, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date).

    Returns ``None`` when the header is absent or unreadable (the backoff applies instead).
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now())


def was_never_sent(exc: requests.RequestException) -> bool:
    """Whether the request provably never reached the server (so even a POST may be re-sent).

    True for a connect timeout and a refused/unresolvable connection: no byte of the request
    left the client. A read timeout or a connection dropped mid-response is not: the server may
    have acted on it.
    """
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    if isinstance(exc, requests.exceptions.ConnectionError) and not isinstance(
        exc, requests.exceptions.ReadTimeout
    ):
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        return isinstance(reason, NewConnectionError | ConnectTimeoutError)
    return False
