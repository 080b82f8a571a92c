"""Fault injection: off by default, deterministic by seed.

The n-th matching /v1 request (n counted since the faults were set) fails when
``hash(seed, n) < error_rate``; the status is drawn from ``statuses`` by the same hash. The same
sequence of requests therefore meets the same faults on every run.

Page shifts (``insert_after_page``): ``insert_count`` conversions of the window "arrive" while a
conversion report is paged. Pages 1..N of a pull are answered as before their arrival (the
same records, a ``total_count`` that many lower), later pages as after it, where the new records
sort right behind page N: every later page is shifted, and a client that trusts page 1's count
loses the window's last records while its counts still add up. A request for page 1 starts a
pull; the first ``insert_pulls`` pulls meet the shift (``None``: every pull, so re-pulling never
helps). The window's truth (``/_sandbox/truth``) is the window after the arrival. A test
facility, like the other faults, not a behaviour of the API.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from affiliate_network_sandbox.ids import derive, mix

ALLOWED_STATUSES = (429, 500, 502, 503, 504)


class FaultConfigError(ValueError):
    """A fault setting has the wrong type or range."""


@dataclass
class FaultConfig:
    """Fault settings (``PUT /_sandbox/faults``)."""

    seed: int = 0
    error_rate: float = 0.0
    statuses: list[int] = field(default_factory=lambda: [500, 503, 504, 429])
    latency_ms: int = 0
    retry_after_s: int | None = None
    paths: list[str] = field(default_factory=list)
    fail_hard: int | None = None
    onhold_ignore_ids: list[str] = field(default_factory=list)
    apply_then_delay_paths: list[str] = field(default_factory=list)
    apply_then_delay_s: float = 0.0
    insert_after_page: int | None = None
    insert_count: int = 1
    insert_pulls: int | None = None

    @classmethod
    def from_json(cls, body: Any) -> FaultConfig:
        if not isinstance(body, dict):
            raise FaultConfigError("faults must be a JSON object")
        names = set(cls.__dataclass_fields__)
        unknown = set(body) - names
        if unknown:
            raise FaultConfigError(f"unknown fault settings: {sorted(unknown)}")
        cfg = cls(**body)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        def num(x: Any) -> bool:
            return isinstance(x, int | float) and not isinstance(x, bool)

        if not num(self.error_rate) or not 0 <= self.error_rate <= 1:
            raise FaultConfigError("error_rate must be a number in 0..1")
        if not isinstance(self.statuses, list) or not self.statuses:
            raise FaultConfigError("statuses must be a non-empty list")
        for s in self.statuses:
            if s not in ALLOWED_STATUSES:
                raise FaultConfigError(f"statuses must be among {ALLOWED_STATUSES}")
        if not isinstance(self.latency_ms, int) or self.latency_ms < 0:
            raise FaultConfigError("latency_ms must be an integer >= 0")
        if self.retry_after_s is not None and (
            not isinstance(self.retry_after_s, int) or self.retry_after_s < 0
        ):
            raise FaultConfigError("retry_after_s must be an integer >= 0")
        if self.fail_hard is not None and not (
            isinstance(self.fail_hard, int) and 400 <= self.fail_hard <= 599
        ):
            raise FaultConfigError("fail_hard must be an HTTP error status")
        for name in ("paths", "onhold_ignore_ids", "apply_then_delay_paths"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise FaultConfigError(f"{name} must be a list of strings")
        if not num(self.apply_then_delay_s) or self.apply_then_delay_s < 0:
            raise FaultConfigError("apply_then_delay_s must be a number >= 0")
        if self.insert_after_page is not None and not (
            type(self.insert_after_page) is int and self.insert_after_page >= 1
        ):
            raise FaultConfigError("insert_after_page must be an integer >= 1")
        if type(self.insert_count) is not int or self.insert_count < 1:
            raise FaultConfigError("insert_count must be an integer >= 1")
        if self.insert_pulls is not None and not (
            type(self.insert_pulls) is int and self.insert_pulls >= 0
        ):
            raise FaultConfigError("insert_pulls must be an integer >= 0")
        if not isinstance(self.seed, int):
            raise FaultConfigError("seed must be an integer")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Faults:
    """The active fault configuration and its request counter."""

    def __init__(self) -> None:
        self.config = FaultConfig()
        self.counter = 0
        self.injected = 0
        self.pulls = 0
        self._key = derive(0, "faults")

    def set(self, config: FaultConfig) -> None:
        self.config = config
        self.counter = 0
        self.injected = 0
        self.pulls = 0
        self._key = derive(config.seed, "faults")

    def clear(self) -> None:
        self.set(FaultConfig())

    @staticmethod
    def _matches(prefixes: list[str], api_path: str) -> bool:
        return any(api_path.startswith(p) for p in prefixes)

    def applies(self, api_path: str) -> bool:
        paths = self.config.paths
        return not paths or self._matches(paths, api_path)

    def decide(self, api_path: str) -> int | None:
        """The status to inject for this request, or ``None``."""
        cfg = self.config
        if cfg.fail_hard is None and cfg.error_rate <= 0:
            return None
        if not self.applies(api_path):
            return None
        if cfg.fail_hard is not None:
            self.injected += 1
            return cfg.fail_hard
        n = self.counter
        self.counter += 1
        h = mix(self._key ^ (n * 0x9E3779B97F4A7C15))
        if (h & 0xFFFFFFFF) < cfg.error_rate * 4294967296.0:
            self.injected += 1
            return cfg.statuses[(h >> 32) % len(cfg.statuses)]
        return None

    def delay_after_apply(self, api_path: str) -> float:
        cfg = self.config
        if cfg.apply_then_delay_s and self._matches(cfg.apply_then_delay_paths, api_path):
            return float(cfg.apply_then_delay_s)
        return 0.0

    def held_back(self, page: int) -> int:
        """Conversions not yet arrived when this conversion-report page is answered (see the
        module docstring): ``insert_count`` for pages 1..``insert_after_page`` of a pull that
        meets the shift, else 0. A page-1 request starts a new pull."""
        cfg = self.config
        if cfg.insert_after_page is None:
            return 0
        if page == 1:
            self.pulls += 1
        shifting = cfg.insert_pulls is None or self.pulls <= cfg.insert_pulls
        if not shifting or page > cfg.insert_after_page:
            return 0
        self.injected += 1
        return cfg.insert_count
