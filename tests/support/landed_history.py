"""Land a run of sandbox days as the report DAG does (for tests and benches reading landed data)."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull


def land_days(
    conn_id: str,
    base: Path,
    first: dt.date,
    last: dt.date,
    *,
    timezone_id: int = 67,
    show_events: bool = False,
) -> list[dict]:
    """Land ``first``..``last`` as ``<base>/conversions/date=YYYY-MM-DD/`` Parquet partitions.

    :param conn_id: an Airflow connection to the sandbox's network portal.
    :param base: the output base.
    :param show_events: land the events too (as the daily report DAG does).
    :returns: each day's landing summary.
    """
    hook = AffiliateNetworkHook(conn_id)
    out = []
    try:
        day = first
        while day <= last:
            out.append(
                land_conversion_day(
                    hook,
                    str(base),
                    ConversionPull(day, timezone_id, show_events=show_events),
                    page_size=2000,
                    consistency_retries=1,
                    log=logging.getLogger("landed_history"),
                    consistency_wait_s=0.01,
                )
            )
            day += dt.timedelta(days=1)
    finally:
        hook.close()
    return out
