"""Group columns of the affiliate entity table, the request rule the hook and the report
schema share (spec, "Aggregated reporting": 1 to 10 columns, at most one time column), and the
formats a report partition is written in.

Imports only the error classes: the hook (below the job libraries), ``settings/models.py`` (checking
``include/reports.yaml``) and ``reports/schema.py`` all read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from affiliate_network.exceptions import ConfigValidationError

#: Formats a partition can be written in.
Format = Literal["parquet", "jsonl"]
FORMATS: tuple[str, ...] = ("parquet", "jsonl")

#: Group columns the entity table accepts ("not shown" in the spec; the sandbox documents them).
REPORT_COLUMNS: tuple[str, ...] = (
    "offer",
    "advertiser",
    "country",
    "platform",
    "device_type",
    *(f"sub{i}" for i in range(1, 6)),
)
#: Time columns; a request may hold at most one.
TIME_COLUMNS: tuple[str, ...] = ("hour", "date", "week", "month", "year")
MAX_REPORT_COLUMNS = 10
#: Columns that make a reporting request "granular" (public "Rate limiting" guide, newer page:
#: such a request counts against the hourly granular quota, 1,000 queries per rolling 60
#: minutes, network-wide). The guide's names in this API's snake_case; the hook's one list
#: (planning, counting). The sandbox keeps its own copy (affiliate_network_sandbox.choices); a
#: test checks that both read the guide alike.
GRANULAR_COLUMNS: frozenset[str] = frozenset(
    {
        # geolocation
        *("country", "region", "city", "dma", "carrier", "isp", "connection_type"),
        *("postal_code", "is_proxy"),
        # device
        *("platform", "os_version", "device_type", "browser", "device_brand", "language"),
        *("device_model", "device_make"),
        # offer detail
        *("offer_group", "offer_url", "event_name", "advertiser_event_name", "payout_type"),
        *("payout_amount", "revenue_type", "revenue_amount", "custom_payout_revenue"),
        # miscellaneous
        *(f"adv{i}" for i in range(1, 6)),
        *(f"sub{i}" for i in range(1, 6)),
        *("source_id", "project_id", "referrer", "coupon_code", "tracking_domain", "order_id"),
        *("attribution_method", "account_referred_by"),
    }
)


def granular_columns(columns: object) -> list[str]:
    """The granular columns a request body's ``columns`` names (empty: not a granular query).

    :param columns: the body's ``columns`` value: names or ``{"column": name}`` items; anything
        else names no column.
    """
    if not isinstance(columns, list | tuple):
        return []
    names = [c.get("column") if isinstance(c, dict) else c for c in columns]
    return [n for n in names if isinstance(n, str) and n in GRANULAR_COLUMNS]


def column_count_problem(names: Sequence[str]) -> str | None:
    """What breaks the entity table's column rule in ``names``, or ``None`` when it holds.

    :param names: requested column names, in order.
    """
    if not 1 <= len(names) <= MAX_REPORT_COLUMNS:
        return f"{len(names)} columns given, the entity table takes 1 to {MAX_REPORT_COLUMNS}"
    times = [n for n in names if n in TIME_COLUMNS]
    if len(times) > 1:
        return f"at most one time column ({'/'.join(TIME_COLUMNS)}), got {times}"
    return None


def validate_report_columns(columns: Iterable[str | dict[str, Any]]) -> list[str]:
    """Check an entity-table column list: 1 to 10 known names, at most one time column.

    :param columns: names, or ``{"column": name}`` dicts as the API takes them.
    :return: the plain column names, in order.
    :raises ConfigValidationError: naming the offending column(s).
    """
    names: list[str] = []
    for col in columns:
        name = col.get("column") if isinstance(col, dict) else col
        if not isinstance(name, str) or not name:
            raise ConfigValidationError(f"report column {col!r} is not a column name")
        names.append(name)
    problem = column_count_problem(names)
    if problem is not None and not 1 <= len(names) <= MAX_REPORT_COLUMNS:
        raise ConfigValidationError(f"report columns: {problem}")
    unknown = [n for n in names if n not in REPORT_COLUMNS and n not in TIME_COLUMNS]
    if unknown:
        raise ConfigValidationError(
            f"report columns: unknown {unknown}; allowed {[*REPORT_COLUMNS, *TIME_COLUMNS]}"
        )
    if len(set(names)) != len(names):
        raise ConfigValidationError(f"report columns: duplicates in {names}")
    if problem is not None:  # the time-column rule (checked after names, as before)
        raise ConfigValidationError(f"report columns: {problem}")
    return names
