"""Reconciliation on the sandbox's large world: offers paying in USD, EUR, GBP, JPY (no minor
unit), KWD (three decimals) and IDR, 300 affiliates x 60 offers (over 14,000 cells in a day,
more than one report answer holds), late-recorded and deleted conversions, pulled with a
report currency (EUR) that most offers do not pay in. The sandbox's money truth is computed
from the records' draws, not from its report code."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from affiliate_network.exceptions import ReconciliationError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.write import write_partition
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.reconcile import COUNTED_STATUS, reconcile_day
from affiliate_network.reports.schema import conversion_schema
from affiliate_network_sandbox.testing import RunningSandbox, clock_after_data, start_sandbox

LOG = logging.getLogger("test")
#: A day of the large world: cells over the 10,000-row cap, every currency present.
CONVERSIONS_PER_DAY = 22_000
FIELDS = ("cv", "payout", "revenue")


@pytest.fixture(scope="module")
def large() -> Iterator[RunningSandbox]:
    end = dt.date(2026, 11, 29)  # a fixed day: time is an input
    server = start_sandbox(
        world="large",
        days=2,
        conversions_per_day=CONVERSIONS_PER_DAY,
        end_date=end,
        clock=clock_after_data(end),
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def hook(large, make_connection, tmp_path) -> Iterator[AffiliateNetworkHook]:
    conn = make_connection(
        "recon_large",
        host=large.base_url,
        key=large.keys["network"],
        quota_dir=str(tmp_path / "quota"),
    )
    h = AffiliateNetworkHook(conn)
    yield h
    h.close()


@pytest.fixture
def day(large) -> dt.date:
    return dt.date.fromisoformat(large.catalog()["first_date"])


def _request(day: dt.date) -> ConversionPull:
    return ConversionPull(day, 67, currency_id="EUR", show_events=True)


def test_a_landed_day_reconciles_with_the_truth_per_currency(hook, large, tmp_path, day) -> None:
    land_conversion_day(hook, str(tmp_path), _request(day), log=LOG)
    truth = large.truth_money(day, timezone_id=67)
    assert len(truth["cells"]) > 10_000  # more than one answer of the report holds

    summary = reconcile_day(hook, tmp_path, day, log=LOG)

    assert summary["reconciled"] is True, summary
    assert summary["currencies"] == sorted(truth["currencies"])
    assert {"JPY", "KWD"} <= set(summary["currencies"])
    for currency, expected in truth["currencies"].items():
        for side in ("landed", "network"):
            got = summary["totals"][currency][side]
            assert got["cv"] == expected["entity"]["cv"], (currency, side)
            for f in ("payout", "revenue"):  # equal to the minor unit: exact decimals
                assert Decimal(got[f]) == Decimal(expected["entity"][f]), (currency, side, f)
    doc = json.loads(Path(summary["comparison"]).read_text())
    cells = {(c["affiliate"], c["offer"], c["currency"]): c for c in doc["cells"]}
    truth_cells = {
        (t["network_affiliate_id"], t["network_offer_id"], t["currency_id"]): t
        for t in truth["cells"]
    }
    counted = {k for k, t in truth_cells.items() if t["cv"] or t["event"]}
    assert counted <= set(cells)
    for key in counted:
        for f in FIELDS:
            assert Decimal(cells[key]["network"][f]) == Decimal(truth_cells[key][f]), (key, f)
            assert Decimal(cells[key]["landed"][f]) == Decimal(truth_cells[key][f]), (key, f)
    # One request per currency (none capped) and the day's offer list.
    assert doc["request"]["requests"] == len(truth["currencies"]) + 1


def test_planted_missing_rows_fail_their_cells_in_their_currencies(
    hook, large, tmp_path, day
) -> None:
    """One approved conversion missing in KWD (three decimals), one in JPY (none): each fails
    its cell, named with its currency, by exactly the row; the other currencies' totals hold."""
    records = list(
        hook.iter_conversions(
            from_date=day, to_date=day, timezone_id=67, currency_id="EUR", show_events=True
        )
    )
    missing = {
        currency: next(
            r
            for r in records
            if r["currency_id"] == currency and r["status"] == COUNTED_STATUS and not r["is_event"]
        )
        for currency in ("KWD", "JPY")
    }
    gone = {id(r) for r in missing.values()}
    write_partition(
        tmp_path,
        "conversions",
        {"date": day.isoformat()},
        [r for r in records if id(r) not in gone],
        conversion_schema(),
        request=_request(day).record(),
    )

    with pytest.raises(ReconciliationError) as info:
        reconcile_day(hook, tmp_path, day, log=LOG)

    err = info.value
    assert err.differences == 2
    lines = {line.split(":")[0]: line for line in err.cells}
    for currency, row in missing.items():
        rel = row["relationship"]
        cell = (
            f"affiliate {rel['affiliate']['network_affiliate_id']} "
            f"offer {rel['offer']['network_offer_id']} in {currency}"
        )
        line = lines[cell]
        payout, revenue = Decimal(str(row["payout"])), Decimal(str(row["revenue"]))
        assert "(difference 1)" in line
        assert f"(difference {payout.normalize():f})" in line
        difference = err.totals[currency]["difference"]
        assert difference["cv"] == 1
        assert Decimal(difference["payout"]) == payout
        assert Decimal(difference["revenue"]) == revenue
    for other in set(err.totals) - set(missing):
        assert err.totals[other]["difference"] == {"cv": 0, "payout": "0", "revenue": "0"}
