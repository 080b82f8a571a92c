"""Request and response examples written from the shapes on the public reference pages.

Our own fixtures (not copied text): each names the reference page it follows. The conformance
tests replay the requests against the sandbox and read the answers with the client, so a drift
of either from the documented behaviour fails here.
"""

from __future__ import annotations

from typing import Any

#: "Timezones" (reference, GET /meta/timezones): the record fields.
TIMEZONE_RECORD_FIELDS = {"timezone_id", "timezone", "timezone_name", "utc_offset"}

#: "Timezones" (user guide): the documented boundary examples, as (UTC time of an event,
#: timezone_id) -> the report day it lands in.
BOUNDARY_EXAMPLES: list[tuple[str, int, str]] = [
    # 23:30 UTC lands in that day under UTC (67) and under New York (80: 19:30 or 18:30 local).
    ("D 23:30", 67, "D"),
    ("D 23:30", 80, "D"),
    # 03:30 UTC the next day is still the previous evening in New York.
    ("D+1 03:30", 80, "D"),
    ("D+1 03:30", 67, "D+1"),
]


def conversion_report_request(day: str, **extra: Any) -> dict[str, Any]:
    """ "Conversion report" (network reporting): the documented body with both show flags."""
    return {
        "show_conversions": True,
        "show_events": True,
        "from": day,
        "to": day,
        "timezone_id": 67,
        "currency_id": "USD",
        "query": {"filters": [], "search_terms": []},
        **extra,
    }


def timed_conversion_report_request(day: str, start: str, end: str) -> dict[str, Any]:
    """The documented ``YYYY-MM-DD hh:mm:ss`` form of from/to (conversion report)."""
    return conversion_report_request(day, **{"from": f"{day} {start}", "to": f"{day} {end}"})


def onhold_request(ids: list[str], status: str) -> dict[str, Any]:
    """ "On-hold conversion status": ``status`` is ``approved`` or ``rejected``."""
    return {"on_hold_conversion_ids": ids, "status": status}


def entity_table_request(day: str, timezone_id: int = 67) -> dict[str, Any]:
    """ "Entity reporting" (affiliate portal): columns, a date range, a timezone."""
    return {
        "from": day,
        "to": day,
        "timezone_id": timezone_id,
        "currency_id": "USD",
        "columns": [{"column": "offer"}, {"column": "date"}],
        "query": {"filters": []},
    }


def network_entity_table_request(day: str, timezone_id: int = 67) -> dict[str, Any]:
    """ "Aggregated Data Reports" (network reporting, ``POST /networks/reporting/entity/table``):
    the affiliate table's body; ``affiliate`` and ``offer`` give one row per couple."""
    return {
        "from": day,
        "to": day,
        "timezone_id": timezone_id,
        "currency_id": "USD",
        "columns": [{"column": "affiliate"}, {"column": "offer"}],
        "query": {"filters": []},
    }


#: "Aggregated Data Reports" / "Get Reporting Summary" (network): metrics a row's ``reporting``
#: carries that the reconciliation reads, and the on-hold ones beside them.
NETWORK_REPORTING_METRICS = {
    "cv",
    "event",
    "payout",
    "revenue",
    "on_hold_conversion_count",
    "on_hold_potential_payout",
    "on_hold_potential_revenue",
}
