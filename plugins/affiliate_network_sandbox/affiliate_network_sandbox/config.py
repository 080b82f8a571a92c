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
    :param world: the profile the shape fields came from (``small`` or ``large``, see
        :data:`WORLDS`); naming a world in overrides applies its values first.
    :param offer_currencies: currencies the generated offers pay in (offer k: the k-th modulo
        this list); codes of ``choices.CURRENCY_RATES``.
    :param late_share: share (0..1) of base conversions recorded after their timestamp: every
        ``round(1 / late_share)``-th conversion of a day (its events follow it).
    :param late_max_s: latest recording delay of a late conversion, seconds (delays are drawn
        from 3601 up to this).
    :param deletion_share: share (0..1) of base conversions that the network deletes later:
        every ``round(1 / deletion_share)``-th conversion of a day (and its event).
    :param deletion_max_s: latest deletion time after the conversion's timestamp, seconds
        (drawn from 3600 up to this).
    :param reversal_share: share (0..1) of base conversions planted as reversals and
        adjustments (negative payout, revenue and sale amount; ``choices.REVERSAL_NOTES``):
        every ``round(1 / reversal_share)``-th conversion of a day from a seeded offset, the
        planted fraud patterns excepted; they alternate, a reversal then an adjustment. They
        are held by the on-hold draw, and a quarter of the others are held too.
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
    world: str = "small"
    offer_currencies: tuple[str, ...] = ("USD",)
    late_share: float = 0.0
    late_max_s: int = 6 * 3600
    deletion_share: float = 0.0
    deletion_max_s: int = 48 * 3600
    reversal_share: float = 0.0

    @property
    def first_date(self) -> dt.date:
        return self.end_date - dt.timedelta(days=self.days - 1)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["end_date"] = self.end_date.isoformat()
        out["first_date"] = self.first_date.isoformat()
        out["offer_currencies"] = list(self.offer_currencies)
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
        if "world" in overrides:
            # A world's shape first; the other keys of the same overrides then refine it.
            world = overrides["world"]
            if not isinstance(world, str) or world not in WORLDS:
                raise ConfigError(f"world must be one of {sorted(WORLDS)}, got {world!r}")
            values.update(WORLDS[world])
            values["world"] = world
        for name, raw in overrides.items():
            if name != "world":
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
            "late_max_s": (3601, 30 * 86400),
            "deletion_max_s": (3601, 365 * 86400),
        }
        for name, (lo, hi) in ints.items():
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ConfigError(f"{name} must be between {lo} and {hi}")
        for name in _SHARES:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be between 0 and 1")
        from affiliate_network_sandbox.choices import CURRENCY_RATES

        if self.world not in WORLDS:
            raise ConfigError(f"world must be one of {sorted(WORLDS)}")
        if not self.offer_currencies:
            raise ConfigError("offer_currencies must name at least one currency")
        for code in self.offer_currencies:
            if code not in CURRENCY_RATES:
                raise ConfigError(
                    f"offer_currencies: unknown currency {code!r} (known: {sorted(CURRENCY_RATES)})"
                )
        from affiliate_network_sandbox.timezones import TIMEZONES

        if self.reporting_timezone_id not in TIMEZONES:
            raise ConfigError(
                f"reporting_timezone_id must be one of the API's timezone ids (1..{max(TIMEZONES)})"
            )
        if self.offers < self.advertisers:
            raise ConfigError("offers must be >= advertisers (every advertiser has an offer)")


#: Float settings in 0..1.
_SHARES = ("on_hold_share", "event_share", "late_share", "deletion_share", "reversal_share")

#: Named worlds: the values of the shape fields each one sets (sandbox choices). ``small`` is
#: the default (one currency, 8 affiliates x 12 offers, nothing late, deleted or reversed);
#: ``large`` is a real network's shape: six currencies (JPY without minor unit, KWD with three),
#: 300 affiliates x 60 offers (18,000 couples; a day of 30,000 conversions fills over 10,000 of
#: them), conversions recorded up to 6 hours late (2%), deletions within 48 hours (0.2%), and
#: reversals and adjustments (1%: negative payouts, some of them on hold, in every currency).
WORLDS: dict[str, dict[str, Any]] = {
    "small": {
        "offers": 12,
        "affiliates": 8,
        "advertisers": 4,
        "conversions_per_day": 500,
        "offer_currencies": ("USD",),
        "late_share": 0.0,
        "late_max_s": 6 * 3600,
        "deletion_share": 0.0,
        "deletion_max_s": 48 * 3600,
        "reversal_share": 0.0,
    },
    "large": {
        "offers": 60,
        "affiliates": 300,
        "advertisers": 15,
        "conversions_per_day": 30_000,
        "offer_currencies": ("USD", "EUR", "GBP", "JPY", "KWD", "IDR"),
        "late_share": 0.02,
        "late_max_s": 6 * 3600,
        "deletion_share": 0.002,
        "deletion_max_s": 48 * 3600,
        "reversal_share": 0.01,
    },
}


def _coerce(name: str, raw: Any) -> Any:
    try:
        if name == "offer_currencies":
            items = raw.split(",") if isinstance(raw, str) else raw
            if not isinstance(items, (list, tuple)) or not all(isinstance(c, str) for c in items):
                raise TypeError
            return tuple(c.strip() for c in items)
        if name == "end_date":
            if isinstance(raw, dt.date):
                return raw
            return dt.date.fromisoformat(str(raw))
        if name in _SHARES:
            if isinstance(raw, bool):
                raise TypeError
            value = float(raw)
            if value != value:  # NaN compares false with every bound
                raise ValueError
            return value
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise TypeError
        return int(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad value for {name}: {raw!r}") from exc
