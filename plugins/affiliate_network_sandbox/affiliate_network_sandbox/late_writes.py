"""Late and lost on-hold status updates, modelled on the real service's documentation.

The documentation says the on-hold status update (``PATCH /networks/reporting/onhold``) is
processed asynchronously: a read right after may not show it yet ("up to a few seconds"), and,
rarely, the call answers ``{"result": true}`` and the update then fails. It gives no numbers, so
the delay and the lost share are sandbox settings (off by default), not facts of the API
(:data:`~affiliate_network_sandbox.choices.LATE_WRITE_DELAY_S`,
:data:`~affiliate_network_sandbox.choices.LOST_WRITE_SHARE`).

With the mode on, an accepted update of one on-hold id is either lost (never lands) or lands
``delay_s`` real seconds (``time.monotonic``, not any data clock) after the PATCH was answered.
Until it lands, every read (conversion report, on-hold search, admin truth) shows the old status.
Whether it is lost is drawn from ``hash(seed, on-hold value, how many times that id was sent)``
against ``lost_share``: the same request sequence loses the same updates on every run, and a
re-send (a later run) is drawn again, so it can land.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.ids import GOLDEN, derive, mix


class LateWritesConfigError(ValueError):
    """A late-writes setting has the wrong type or range (the message names the field)."""


class _Lander(Protocol):
    """The world an update lands in (``World.land_onhold``)."""

    def land_onhold(self, ohid: str, value: int, status: str) -> bool: ...


@dataclass(frozen=True)
class LateWritesConfig:
    """The late-writes setting (``PUT /_sandbox/late-writes``, ``--write-delay-s``,
    ``--lost-write-share``).

    :param delay_s: real seconds between an accepted update and the moment reads show it (>= 0).
    :param lost_share: share of accepted updates that never land (0..1).
    :param seed: seed of the lost draw.
    """

    delay_s: float = choices.LATE_WRITE_DELAY_S
    lost_share: float = choices.LOST_WRITE_SHARE
    seed: int = 0

    def __post_init__(self) -> None:
        def number(x: Any) -> bool:
            return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)

        if not number(self.delay_s) or self.delay_s < 0:
            raise LateWritesConfigError(f"delay_s must be a number >= 0, got {self.delay_s!r}")
        if not number(self.lost_share) or not 0 <= self.lost_share <= 1:
            raise LateWritesConfigError(
                f"lost_share must be a number in 0..1, got {self.lost_share!r}"
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise LateWritesConfigError(f"seed must be an integer, got {self.seed!r}")

    @classmethod
    def from_json(cls, body: Any) -> LateWritesConfig:
        """The setting of a ``PUT`` body (omitted fields take their defaults).

        :raises LateWritesConfigError: not an object, an unknown field, or a value out of range.
        """
        if not isinstance(body, dict):
            raise LateWritesConfigError("late-writes setting must be a JSON object")
        unknown = set(body) - set(cls.__dataclass_fields__)
        if unknown:
            raise LateWritesConfigError(f"unknown late-writes settings: {sorted(unknown)}")
        return cls(**body)

    @property
    def active(self) -> bool:
        return self.delay_s > 0 or self.lost_share > 0

    def to_json(self) -> dict[str, Any]:
        return {"delay_s": self.delay_s, "lost_share": self.lost_share, "seed": self.seed}


class LateWrites:
    """Accepted on-hold updates waiting to land, and the per-id send counts of the lost draw.

    :param config: the setting after a reset (the CLI's, or the default: off).
    """

    def __init__(self, config: LateWritesConfig | None = None) -> None:
        self.base_config = config or LateWritesConfig()
        self.config = self.base_config
        self._key = derive(self.config.seed, "late-writes")
        #: (due monotonic time, sequence, world, on-hold id, value, status): a heap by due time.
        self._pending: list[tuple[float, int, _Lander, str, int, str]] = []
        self._seq = 0
        self.sent: Counter[int] = Counter()
        self.landed = 0
        self.lost = 0

    def reset(self) -> None:
        """Back to the startup setting; pending updates and send counts are dropped."""
        self.set(self.base_config)
        self._pending.clear()
        self.sent.clear()
        self.landed = 0
        self.lost = 0

    def set(self, config: LateWritesConfig) -> None:
        """A new setting. Updates already pending keep their due time; send counts carry on,
        so a re-send after the change is drawn as the n-th send, not the first."""
        self.config = config
        self._key = derive(config.seed, "late-writes")

    def is_lost(self, value: int, nth: int) -> bool:
        """Whether the ``nth`` accepted send (1-based) of on-hold ``value`` is lost."""
        h = mix(self._key ^ mix(value ^ (nth * GOLDEN)))
        return (h & 0xFFFFFFFF) < self.config.lost_share * 4294967296.0

    def defer(self, world: _Lander, ohid: str, value: int, status: str) -> bool:
        """Take an accepted update of one id: ``True`` when it is lost or pending (the caller
        applies nothing now), ``False`` when the mode is off or the update lands at once."""
        if not self.config.active:
            return False
        self.sent[value] += 1
        if self.is_lost(value, self.sent[value]):
            self.lost += 1
            return True
        if self.config.delay_s <= 0:
            return False
        self._seq += 1
        due = time.monotonic() + self.config.delay_s
        heapq.heappush(self._pending, (due, self._seq, world, ohid, value, status))
        return True

    def settle(self) -> None:
        """Land every pending update whose time has come, oldest first (called before reads)."""
        if not self._pending:
            return
        now = time.monotonic()
        while self._pending and self._pending[0][0] <= now:
            _, _, world, ohid, value, status = heapq.heappop(self._pending)
            world.land_onhold(ohid, value, status)
            self.landed += 1

    def to_json(self) -> dict[str, Any]:
        """The setting and what it did since the last reset (pending, landed, lost updates)."""
        return {
            **self.config.to_json(),
            "pending": len(self._pending),
            "landed": self.landed,
            "lost": self.lost,
        }
