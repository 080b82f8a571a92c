"""A large-world day holding reversals and adjustments (negative payout, revenue and sale
amount, in six currencies, some on hold) lands with its negative money exact, and reconciles
per currency: the report's sums and the landed ones both carry the negative amounts.

Real HTTP to the session sandbox, reset to a small day of the large world; the expected money
is the sandbox's truth (computed from its draws, not its report code).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.reconcile import reconcile_day

LOG = logging.getLogger("test")
#: The large world's shape and reversal share, at a small day (a quick landing).
WORLD = {"world": "large", "days": 2, "conversions_per_day": 3000}
#: (currency, kind, status) -> (rows, payout, revenue).
Money = dict[tuple[str, str, str], tuple[int, Decimal, Decimal]]


def _landed_negative(part: Path) -> Money:
    """The landed rows with a negative payout, read straight from the partition's Parquet."""
    sums: dict[tuple[str, str, str], list[Any]] = defaultdict(lambda: [0, Decimal(0), Decimal(0)])
    columns = ["currency_id", "notes", "status", "is_event", "payout", "revenue", "sale_amount"]
    for path in sorted(part.glob("*.parquet")):
        table = pq.read_table(path, columns=columns)
        table = table.filter(pc.less(table["payout"], 0))
        for row in table.to_pylist():
            assert row["is_event"] is False, row
            assert row["revenue"] < 0, row
            # A reversal takes back its sale amount; an adjustment carries none.
            assert (
                (row["sale_amount"] < 0)
                if row["notes"] == "reversal"
                else (row["sale_amount"] == 0)
            ), row
            acc = sums[(row["currency_id"], row["notes"], row["status"])]
            acc[0] += 1
            acc[1] += row["payout"]
            acc[2] += row["revenue"]
    return {k: (n, p, r) for k, (n, p, r) in sums.items()}


def _truth_negative(truth: dict[str, Any]) -> Money:
    out = {}
    for currency, money in truth["currencies"].items():
        for kind, per_status in money["reversals"].items():
            for status, agg in per_status.items():
                if agg["count"]:
                    out[(currency, kind, status)] = (
                        agg["count"],
                        Decimal(agg["payout"]),
                        Decimal(agg["revenue"]),
                    )
    return out


def test_reversals_land_with_their_negative_money_and_the_day_reconciles_per_currency(
    sandbox: Any, make_connection: Any, tmp_path: Path
) -> None:
    sandbox.reset(**WORLD)
    conn = make_connection("afn_reversals", host=sandbox.base_url, key=sandbox.keys["network"])
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    hook = AffiliateNetworkHook(conn)
    try:
        pull = ConversionPull(day, 67, currency_id="EUR", show_events=True)
        land_conversion_day(hook, str(tmp_path), pull, log=LOG)
        summary = reconcile_day(hook, tmp_path, day, log=LOG)
    finally:
        hook.close()
    truth = sandbox.truth_money(day, timezone_id=67, cells=False)

    landed = _landed_negative(tmp_path / "conversions" / f"date={day.isoformat()}")
    assert landed == _truth_negative(truth)
    # Reversals and adjustments in several currencies, approved and on hold.
    assert len({currency for currency, _kind, _status in landed}) >= 4, landed
    assert {kind for _currency, kind, _status in landed} == {"reversal", "adjustment"}
    assert {status for _currency, _kind, status in landed} >= {"approved", "pending"}

    # The day reconciles per currency, with the negative money on both sides.
    assert summary["reconciled"] is True, summary
    for currency, expected in truth["currencies"].items():
        for side in ("landed", "network"):
            got = summary["totals"][currency][side]
            assert got["cv"] == expected["entity"]["cv"], (currency, side)
            for name in ("payout", "revenue"):
                assert Decimal(got[name]) == Decimal(expected["entity"][name]), (currency, name)
