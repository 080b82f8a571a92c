"""The network page's data library on a large-world day holding reversals and adjustments:
negative payouts shown in their own currency and status, included, never dropped or netted
across currencies.

Landed from the session sandbox (real HTTP) as the daily report DAG lands a day (events too),
reconciled, then read by the page's reader; compared with the sandbox's truth.
"""

from __future__ import annotations

import datetime as dt
import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.reports.reconcile import reconcile_day
from affiliate_network.ui.network_data import read_page
from tests.support.landed_history import land_days

#: The large world's shape and reversal share, at a small day.
WORLD = {"world": "large", "days": 2, "conversions_per_day": 3000}


def test_the_page_shows_negative_payouts_per_currency_and_status(
    sandbox: Any, make_connection: Any, tmp_path: Path
) -> None:
    sandbox.reset(**WORLD)
    conn = make_connection("afn_page_rev", host=sandbox.base_url, key=sandbox.keys["network"])
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    land_days(conn, tmp_path, day, day, show_events=True)
    hook = AffiliateNetworkHook(conn)
    try:
        reconcile_day(hook, str(tmp_path), day, on_mismatch="fail", log=logging.getLogger("t"))
    finally:
        hook.close()
    entry = read_page(tmp_path, last=day, today=day, days=1).to_json()["days"][0]
    assert entry["reconciliation"]["reconciled"] is True
    truth = sandbox.truth_money(day.isoformat(), timezone_id=67, cells=False)["currencies"]

    held_back = {  # on-hold reversals and adjustments, per currency
        currency: sum(
            (Decimal(per["pending"]["payout"]) for per in money["reversals"].values()),
            Decimal(0),
        )
        for currency, money in truth.items()
    }
    assert len([c for c, amount in held_back.items() if amount < 0]) >= 3, held_back

    shown = entry["by_status"]
    for currency, money in truth.items():
        conversions = money["conversions"]
        # Approved: conversions (reversals and adjustments included); the events apart.
        approved = Decimal(conversions["approved"]["payout"])
        assert Decimal(shown["approved"]["payout"][currency]) == approved, currency
        events = Decimal(shown["approved"]["events_payout"].get(currency, "0"))
        assert events == Decimal(money["events"]["payout"]), currency
        pending = Decimal(conversions["pending"]["payout"])
        if conversions["pending"]["count"]:
            got = Decimal(shown["pending"]["payout"][currency])
            assert got == pending, currency  # the negative amounts are in, exactly
            if held_back[currency]:
                assert got != pending - held_back[currency], currency
    # Counts: every base conversion, reversals included, under its status.
    for status in ("approved", "pending"):
        assert shown[status]["conversions"] == sum(
            t["conversions"][status]["count"] for t in truth.values()
        ), status
