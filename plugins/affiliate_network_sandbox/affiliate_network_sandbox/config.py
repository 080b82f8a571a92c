"""Data configuration of a sandbox world (CLI flags and ``POST /_sandbox/reset`` bodies)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from affiliate_network_sandbox.ids import MAX_PER_DAY


class ConfigError(ValueError):
    """A data-config value is missing, unknown or out of range."""


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """What the generator builds. Records of a date are a pure function of this config.

    :param seed: world seed.
    :param end_date: last day with data (UTC); default today.
    :param days: number of days with data, ending at ``end_date``.
    :param offers: number of offers.
    :param affiliates: number of affiliates.
    :param advertisers: number of advertisers.
    :param conversions_per_day: base conversions per UTC day.
    :param on_hold_share: share of conversions held for review (0..1).
    :param event_share: events per conversion (0..1), attached to conversions.
    :param reporting_timezone_id: the network's default reporting timezone (an id of the API's
        timezone table), used when a report request omits ``timezone_id``. Default 67 (UTC): a
        sandbox choice; a real network has its own (``GET /networks``).
    """

    seed: int = 42
    end_date: dt.date = dataclasses.field(default_factory=lambda: dt.datetime.now(dt.UTC).date())
    days: int = 14
    offers: int = 12
    affiliates: int = 8
    advertisers: int = 4
    conversions_per_day: int = 500
    on_hold_share: float = 0.1
    event_share: float = 0.2
    reporting_timezone_id: int = 67

    @property
    def first_date(self) -> dt.date:
        return self.end_date - dt.timedelta(days=self.days - 1)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["end_date"] = self.end_date.isoformat()
        out["first_date"] = self.first_date.isoformat()
        return out

    def with_overrides(self, overrides: dict[str, Any]) -> DataConfig:
        """A new config: this one with ``overrides`` applied and validated."""
        if not isinstance(overrides, dict):
            raise ConfigError("data config must be a JSON object")
        fields = {f.name for f in dataclasses.fields(self)}
        unknown = set(overrides) - fields
        if unknown:
            raise ConfigError(f"unknown data config keys: {sorted(unknown)}")
        values = dataclasses.asdict(self)
        for name, raw in overrides.items():
            values[name] = _coerce(name, raw)
        cfg = DataConfig(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        ints = {
            "days": (1, 3660),
            "offers": (1, 10_000),
            "affiliates": (1, 10_000),
            "advertisers": (1, 1_000),
            "conversions_per_day": (0, MAX_PER_DAY),
        }
        for name, (lo, hi) in ints.items():
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ConfigError(f"{name} must be between {lo} and {hi}")
        for name in ("on_hold_share", "event_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be between 0 and 1")
        from affiliate_network_sandbox.timezones import TIMEZONES

        if self.reporting_timezone_id not in TIMEZONES:
            raise ConfigError(
                f"reporting_timezone_id must be one of the API's timezone ids (1..{max(TIMEZONES)})"
            )
        if self.offers < self.advertisers:
            raise ConfigError("offers must be >= advertisers (every advertiser has an offer)")


def _coerce(name: str, raw: Any) -> Any:
    try:
        if name == "end_date":
            if isinstance(raw, dt.date):
                return raw
            return dt.date.fromisoformat(str(raw))
        if name in ("on_hold_share", "event_share"):
            if isinstance(raw, bool):
                raise TypeError
            return float(raw)
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise TypeError
        return int(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad value for {name}: {raw!r}") from exc
