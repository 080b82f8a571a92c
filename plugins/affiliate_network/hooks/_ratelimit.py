"""Client-side throttling from ``X-RateLimit-Remaining`` (spec, "Limits": the header "can be read
to throttle before the limit").

The quota and window are not shown in the spec, so the throttle learns them: it keeps a model of
the server's token bucket, ``tokens ~= last remaining + refill rate x time since - requests in
flight``, and holds a request back while that estimate is at or below a small reserve. The refill
rate is estimated from successive observations (``remaining`` went from r1 to r2 while n requests
were served in dt seconds: ``rate = (r2 - r1 + n - 2) / dt``, the lower bound given that each
header is rounded down and concurrent answers may arrive out of order). An answer to a request
sent before the one the model last heard from may carry an older, higher level: it can lower the
model, never raise it. While the bucket is full the estimate is low (the header saturates), which
only errs on the slow side; once the bucket is being drained the estimate is accurate. A 429
empties the model and a ``Retry-After`` holds every worker back until it has passed. One
instance is shared by all the worker threads of a hook.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable


class RateLimitThrottle:
    """A shared gate every request passes before it is sent.

    :param reserve: tokens to keep in hand; a request waits while the estimate is at or below it.
    :param clock: monotonic clock in seconds.
    :param sleep: how to wait (injectable so tests can record or shorten waits).
    :param min_rate: lowest refill rate assumed (tokens/s), so a wait is never unbounded.
    :param max_wait_step: longest single sleep before the estimate is re-evaluated.
    :param enabled: when false, only a server ``Retry-After`` pause is observed.
    """

    #: Observations kept for the refill-rate estimate.
    WINDOW = 32
    #: Shortest time span of observations that yields a rate estimate (shorter spans are noise).
    MIN_SPAN_S = 0.05
    #: Tokens of doubt in a rate observation (rounding and reordering at both ends).
    DOUBT_TOKENS = 2

    def __init__(
        self,
        *,
        reserve: int = 2,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        min_rate: float = 1.0,
        max_wait_step: float = 0.5,
        enabled: bool = True,
    ) -> None:
        self.reserve = max(0, reserve)
        self.enabled = enabled
        self._clock = clock
        self._sleep = sleep
        self._min_rate = min_rate
        self._max_wait_step = max_wait_step
        self._lock = threading.Condition()
        self._remaining: int | None = None
        self._observed_at = 0.0
        self._observed_sent_at = float("-inf")  # send time of the request last heard from
        self._in_flight = 0
        self._answered = False  # any request finished yet (with or without the header)
        self._served = 0  # token-consuming responses seen so far
        self._history: deque[tuple[float, int, int]] = deque(maxlen=self.WINDOW)
        self._rate: float | None = None
        self._max_seen = 0  # highest remaining seen: about the bucket size
        self._not_before = 0.0
        #: How many times a request was held back, and for how long in all (seconds).
        self.waits = 0
        self.waited_s = 0.0

    @property
    def rate_estimate(self) -> float | None:
        """Current refill-rate estimate in tokens per second (``None`` before any)."""
        return self._rate

    def _wait_needed(self, now: float) -> float:
        if now < self._not_before:
            return self._not_before - now
        if not self.enabled or self._remaining is None:
            return 0.0
        rate = max(self._rate or 0.0, self._min_rate)
        tokens = self._remaining + rate * (now - self._observed_at) - self._in_flight
        # A reserve the bucket can never hold would stall every request: keep it below half the
        # largest remaining seen.
        reserve = min(self.reserve, self._max_seen // 2)
        if tokens > reserve:
            return 0.0
        return (reserve + 1 - tokens) / rate

    def acquire(self) -> float:
        """Block until a request may be sent; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                # Until a first response tells how full the bucket is, send one request at a
                # time: a burst of workers could otherwise empty a small bucket blind.
                while self.enabled and not self._answered and self._in_flight > 0:
                    self._lock.wait(0.5)
                wait = self._wait_needed(self._clock())
                if wait <= 0:
                    self._in_flight += 1
                    if waited:
                        self.waits += 1
                        self.waited_s += waited
                    return waited
            step = min(wait, self._max_wait_step)
            self._sleep(step)
            waited += step

    def release(
        self,
        *,
        remaining: int | None,
        status: int | None,
        retry_after: float | None = None,
        sent_at: float | None = None,
    ) -> None:
        """Record the outcome of a request that passed :meth:`acquire`.

        :param remaining: the response's ``X-RateLimit-Remaining`` (``None`` if absent or no
            response).
        :param status: the response status (``None`` when no response arrived).
        :param retry_after: seconds from a ``Retry-After`` header on a 429/503.
        :param sent_at: when the request was sent (the throttle's clock); a response to a
            request sent before the one the model last heard from may carry an older, higher
            level, and never raises the model above what it already expects.
        """
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
            self._answered = True
            self._lock.notify_all()
            now = self._clock()
            if status == 429:
                # A 429 consumed no token; without a header, assume the bucket is empty.
                if remaining is None:
                    remaining = 0
            elif status is not None:
                self._served += 1
            if retry_after is not None and status in (429, 503):
                self._not_before = max(self._not_before, now + retry_after)
            if remaining is None:
                return
            if (
                sent_at is not None
                and self._remaining is not None
                and sent_at < self._observed_sent_at
            ):
                # Possibly served before the answer we hold (measured: a late "3" after a "1"
                # let two requests through into a 429): believe it only if lower.
                rate = max(self._rate or 0.0, self._min_rate)
                remaining = min(remaining, int(self._remaining + rate * (now - self._observed_at)))
            elif sent_at is not None:
                self._observed_sent_at = sent_at
            self._remaining = remaining
            self._max_seen = max(self._max_seen, remaining)
            self._observed_at = now
            self._history.append((now, remaining, self._served))
            self._update_rate()

    def _update_rate(self) -> None:
        first_t, first_r, first_n = self._history[0]
        last_t, last_r, last_n = self._history[-1]
        span = last_t - first_t
        if span < self.MIN_SPAN_S:
            return
        # The lower bound of what the observations allow: a header is the bucket's level rounded
        # down (one token of doubt at each end), and responses of concurrent requests can arrive
        # in another order than the server served them (one more each end). Over a short span
        # the plain ratio overshoots badly (measured: 18.9/s for a 10/s bucket over 53 ms, then
        # a 429); the bound errs on the slow side and tightens as the span grows.
        rate = (last_r - first_r + (last_n - first_n) - self.DOUBT_TOKENS) / span
        if rate > 0:
            self._rate = rate
