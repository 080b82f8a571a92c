"""The reports job library without an operator or a task context: a hook, a base, a day."""

from __future__ import annotations

import datetime as dt
import logging

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.storage import read_manifest, read_partition


def test_land_a_day_directly(sandbox, network_conn, tmp_path) -> None:
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    request = {
        "from": day.isoformat(),
        "to": day.isoformat(),
        "timezone_id": 67,
        "currency_id": None,
        "show_conversions": True,
        "show_events": False,
    }
    hook = AffiliateNetworkHook(network_conn)
    try:
        summary = land_conversion_day(
            hook,
            str(tmp_path),
            day,
            request=request,
            dataset="conversions",
            format="parquet",
            page_size=200,
            row_group_rows=None,
            consistency_retries=1,
            filters=None,
            search_terms=None,
            log=logging.getLogger("test"),
        )
        expected = sum(
            1
            for _ in hook.iter_conversions(
                from_date=day, to_date=day, timezone_id=67, show_events=False
            )
        )
    finally:
        hook.close()
    manifest = read_manifest(summary["path"])
    assert manifest is not None
    assert manifest.request == request
    assert summary["rows"] == manifest.row_count == expected > 0
    assert read_partition(summary["path"]).num_rows == expected
