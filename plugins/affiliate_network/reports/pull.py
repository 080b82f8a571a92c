"""One day's conversion pull as a typed value: what the landing asks the network for and what
its manifest records, so that a re-landing asks exactly the same (no Airflow here)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import ConfigValidationError

if TYPE_CHECKING:
    from affiliate_network.hooks._paging import PagedIterator
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

#: What every manifest's ``request.endpoint`` says.
ENDPOINT = "POST /networks/reporting/conversions"
Filters = Mapping[str, Any] | Sequence[Mapping[str, Any]]
_FLAGS = ("show_conversions", "show_events")


@dataclass(frozen=True)
class ConversionPull:
    """Every conversion (and event) of one day in the network's timezone, as landed.

    :param day: the day, in the timezone ``timezone_id`` names.
    :param timezone_id: the API's timezone id the day is read in.
    :param timezone: its IANA name, recorded for readers of the manifest.
    :param currency_id: the report currency (``None``: the network's own).
    :param show_conversions: ask for conversions.
    :param show_events: ask for events too.
    :param filters: the API's ``filters`` (``None``: the whole day).
    :param search_terms: the API's ``search_terms``.
    :param conn_id: the Airflow connection pulled through, recorded (never its key).
    """

    day: dt.date
    timezone_id: int
    timezone: str | None = None
    currency_id: str | None = None
    show_conversions: bool = True
    show_events: bool = False
    filters: Filters | None = None
    search_terms: Sequence[Mapping[str, Any]] | None = None
    conn_id: str | None = None

    def pages(self, hook: AffiliateNetworkHook, page_size: int | None) -> PagedIterator:
        """The day's sliced pull, answers unparsed (landed by Arrow, never as dicts)."""
        return hook.iter_conversions(
            from_date=self.day,
            to_date=self.day,
            timezone_id=self.timezone_id,
            currency_id=self.currency_id,
            show_conversions=self.show_conversions,
            show_events=self.show_events,
            filters=self.filters,
            search_terms=self.search_terms,
            page_size=page_size,
            raw_pages=True,
        )

    def record(self) -> dict[str, Any]:
        """The manifest's ``request``: JSON, with the day as ``from``/``to``."""
        return {
            "endpoint": ENDPOINT,
            "from": self.day.isoformat(),
            "to": self.day.isoformat(),
            "timezone_id": self.timezone_id,
            "timezone": self.timezone,
            "currency_id": self.currency_id,
            "show_conversions": self.show_conversions,
            "show_events": self.show_events,
            "filters": self.filters,
            "search_terms": self.search_terms,
            "conn_id": self.conn_id,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None, where: str) -> ConversionPull:
        """The pull a manifest's ``request`` recorded.

        :param record: the manifest's ``request``.
        :param where: the manifest, named in an error.
        :raises ConfigValidationError: a field is missing or of the wrong type (named with
            ``where``).
        """

        def bad(field: str, why: str) -> ConfigValidationError:
            return ConfigValidationError(f"{where}: request.{field} {why}")

        if not isinstance(record, Mapping):
            raise bad("", "is missing: the manifest records no request")
        day, to = record.get("from"), record.get("to", record.get("from"))
        try:
            parsed = dt.date.fromisoformat(str(day))
        except ValueError:
            raise bad("from", f"is {day!r}, not a day YYYY-MM-DD") from None
        if to != day:
            raise bad("to", f"is {to!r}, not the day of request.from ({day})")
        tz = record.get("timezone_id")
        if isinstance(tz, bool) or not isinstance(tz, int):
            raise bad("timezone_id", f"is {tz!r}, not a timezone id")
        flags = {k: record.get(k, k == "show_conversions") for k in _FLAGS}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise bad(name, f"is {value!r}, not true or false")
        text: dict[str, Any] = {k: record.get(k) for k in ("timezone", "currency_id", "conn_id")}
        for name, value in text.items():
            if value is not None and not isinstance(value, str):
                raise bad(name, f"is {value!r}, not text")
        return cls(
            day=parsed,
            timezone_id=tz,
            filters=record.get("filters") or None,
            search_terms=record.get("search_terms") or None,
            **flags,
            **text,
        )
