"""Token bucket per API key; ``X-RateLimit-Remaining`` on every /v1 response."""

from __future__ import annotations

import math
import time
from typing import Any

from affiliate_network.sandbox import choices


class RateLimiter:
    """One bucket per key (the raw header value, ``""`` when absent).

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

    def configure(self, capacity: int, refill_per_second: float) -> None:
        self.capacity = capacity
        self.refill = refill_per_second
        self._buckets.clear()

    def take(self, key: str) -> tuple[bool, int, float]:
        """Consume one token: ``(allowed, remaining, seconds until the next token)``."""
        now = time.monotonic()
        tokens, last = self._buckets.get(key, (float(self.capacity), now))
        tokens = min(float(self.capacity), tokens + (now - last) * self.refill)
        if tokens >= 1.0:
            tokens -= 1.0
            self._buckets[key] = (tokens, now)
            return True, int(tokens), 0.0
        self._buckets[key] = (tokens, now)
        wait = (1.0 - tokens) / self.refill if self.refill > 0 else 3600.0
        return False, 0, wait

    def to_json(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "refill_per_second": self.refill}


def retry_after(wait_s: float) -> str:
    return str(max(1, math.ceil(wait_s)))
