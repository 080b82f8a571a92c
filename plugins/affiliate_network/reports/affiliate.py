"""The affiliate's aggregated report and its 10,000-row cap: split the range until it fits.

Runnable without Airflow's task context: give it a hook of the affiliate portal.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import ReportRowLimitError

if TYPE_CHECKING:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

#: (first day, last day, rows) of each sub-request that fitted under the cap.
Piece = tuple[dt.date, dt.date, list[dict[str, Any]]]


def fetch_entity_table(
    hook: AffiliateNetworkHook,
    start: dt.date,
    end: dt.date,
    *,
    columns: Sequence[Any],
    timezone_id: int,
    currency_id: str | None,
    filters: Sequence[dict[str, Any]] | None,
    who: str,
    log: Any,
) -> list[Piece]:
    """The entity table for ``start..end``, split in halves while it hits the row cap.

    :param who: names the affiliate and connection in the error of a single day over the cap.
    :raises ReportRowLimitError: a single day still hits the cap (nothing is landed).
    """
    try:
        table = hook.affiliate_entity_table(
            from_date=start.isoformat(),
            to_date=end.isoformat(),
            columns=columns,
            timezone_id=timezone_id,
            currency_id=currency_id,
            filters=filters,
        )
        return [(start, end, table)]
    except ReportRowLimitError as err:
        if start == end:
            raise ReportRowLimitError(
                f"{who}: the entity table for the single day {start} still hits the 10,000-row "
                f"cap with columns {list(columns)}. Nothing was written. Narrow the report: drop "
                "a high-cardinality column (sub1..sub5, hour, country) or add filters (offer, "
                "country ...) in include/reports.yaml."
            ) from err
    mid = start + dt.timedelta(days=(end - start).days // 2)
    log.info(
        "%s..%s hit the row cap; splitting into %s..%s and %s..%s",
        start,
        end,
        start,
        mid,
        mid + dt.timedelta(days=1),
        end,
    )
    kwargs: dict[str, Any] = {
        "columns": columns,
        "timezone_id": timezone_id,
        "currency_id": currency_id,
        "filters": filters,
        "who": who,
        "log": log,
    }
    return fetch_entity_table(hook, start, mid, **kwargs) + fetch_entity_table(
        hook, mid + dt.timedelta(days=1), end, **kwargs
    )
