"""The sandbox's clock: no record later than it is served.

The real service cannot serve a conversion that has not happened yet, so every read of the
sandbox stops at this clock: today's traffic grows as the clock moves. By default the clock is
the wall clock; ``--clock`` (CLI) or ``PUT /_sandbox/clock`` freeze it at an instant, which
``advance_s`` moves, so a test's hourly steps are real hours of traffic.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any


class ClockError(ValueError):
    """A clock value is not an ISO 8601 instant with an offset, or not a usable number."""


def parse_instant(raw: Any, field: str = "now") -> float:
    """Unix seconds of an ISO 8601 instant that carries its UTC offset (``Z`` or ``+hh:mm``).

    A naive time is refused: it would silently mean the sandbox host's zone.
    """
    if isinstance(raw, dt.datetime):
        moment = raw
    elif isinstance(raw, str):
        try:
            moment = dt.datetime.fromisoformat(raw.strip())
        except ValueError:
            raise ClockError(
                f"{field} must be an ISO 8601 instant with an offset, e.g. "
                f"2026-03-10T08:37:00+00:00; got {raw!r:.60}"
            ) from None
    else:
        raise ClockError(f"{field} must be an ISO 8601 string with an offset or null")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ClockError(f"{field} needs a UTC offset (Z or +hh:mm): {raw!s:.60}")
    return moment.timestamp()


def iso(unix: float) -> str:
    """The UTC ISO 8601 text of a unix instant (seconds precision kept as given)."""
    return dt.datetime.fromtimestamp(unix, dt.UTC).isoformat()


class SandboxClock:
    """Wall clock, or frozen at an instant.

    :param frozen: the startup instant (unix seconds) to freeze at; None follows the wall clock.
        ``POST /_sandbox/reset`` returns the clock to this startup setting.
    """

    def __init__(self, frozen: float | None = None) -> None:
        self.startup = frozen
        self.frozen = frozen

    def now(self) -> float:
        """The sandbox's current instant (unix seconds)."""
        return time.time() if self.frozen is None else self.frozen

    def visible_end(self) -> int:
        """Exclusive end of the records served: every record with a timestamp <= now."""
        return math.floor(self.now()) + 1

    def freeze(self, unix: float | None) -> None:
        """Freeze at ``unix``; None returns to the wall clock."""
        self.frozen = unix

    def advance(self, seconds: Any) -> None:
        """Move a frozen clock forward by ``seconds``."""
        if self.frozen is None:
            raise ClockError("advance_s moves a frozen clock: PUT {'now': ...} first")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ClockError("advance_s must be a number of seconds")
        if not math.isfinite(seconds) or seconds < 0:
            # The service's clock never runs back; a test that needs an earlier instant sets it.
            raise ClockError("advance_s must be a finite number >= 0")
        self.frozen += seconds

    def restore(self) -> None:
        """Back to the startup setting (a reset)."""
        self.frozen = self.startup

    def update(self, body: Any) -> None:
        """Apply a ``PUT /_sandbox/clock`` body: ``{"now": iso|null}`` or ``{"advance_s": n}``."""
        if not isinstance(body, dict) or len(body) != 1 or not {"now", "advance_s"} & set(body):
            raise ClockError(
                'body must be {"now": "ISO 8601 with offset" | null} or {"advance_s": N}'
            )
        if "advance_s" in body:
            self.advance(body["advance_s"])
        elif body["now"] is None:
            self.freeze(None)
        else:
            self.freeze(parse_instant(body["now"]))

    def to_json(self) -> dict[str, Any]:
        now = self.now()
        return {"now": iso(now), "unix": now, "frozen": self.frozen is not None}
