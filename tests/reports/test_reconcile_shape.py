"""Reconciliation on a real network's shape (real sandbox): a day pulled in another currency
than its offers pay in, an offer with nothing landed, a day over the report's 10,000-row cap,
and the landed side read batch by batch."""

from __future__ import annotations

import datetime as dt
import json
import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.exceptions import ReconciliationError
from affiliate_network.partitions.read import read_partition
from affiliate_network.partitions.write import write_partition
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.reconcile import (
    COMPARISON_NAME,
    COUNTED_STATUS,
    landed_cells,
    reconcile_day,
)
from affiliate_network.reports.schema import conversion_schema

LOG = logging.getLogger("test")


def _day(sandbox) -> dt.date:
    return dt.date.fromisoformat(sandbox.catalog()["last_date"]) - dt.timedelta(days=1)


def _land(hook, base: Path, day: dt.date, *, currency_id: str = "USD", **more: Any) -> dict:
    pull = ConversionPull(day, 67, currency_id=currency_id, show_events=True)
    return land_conversion_day(hook, str(base), pull, consistency_retries=1, log=LOG, **more)


def _comparison(summary: dict) -> dict:
    return json.loads(Path(summary["comparison"]).read_text())


def test_a_day_pulled_in_another_currency_compares_in_the_offers_currency(
    hook, sandbox, tmp_path
) -> None:
    """Raw rows carry their offer's currency (USD here) whatever ``currency_id`` the day was
    pulled with; the report converts to the currency asked for. Asked in the offers' own
    currency, every cell is exact."""
    day = _day(sandbox)
    landed = _land(hook, tmp_path, day, currency_id="EUR")
    rows = read_partition(landed["path"])
    assert set(rows.column("currency_id").to_pylist()) == {"USD"}  # not converted

    summary = reconcile_day(hook, tmp_path, day, log=LOG)

    assert summary["reconciled"] is True, summary
    assert summary["currencies"] == ["USD"]
    usd = summary["totals"]["USD"]
    assert usd["landed"] == usd["network"]
    doc = _comparison(summary)
    assert doc["request"]["currency_id"] == "EUR"  # the pull's, recorded
    assert [a["currency_id"] for a in doc["request"]["by_currency"]] == ["USD"]
    assert {c["currency"] for c in doc["cells"]} == {"USD"}
    # The same day's report in EUR (the pull's currency) is converted: asked that way, the
    # money of nearly every cell would differ.
    eur = hook.network_entity_table(
        from_date=day, to_date=day, columns=["affiliate"], timezone_id=67, currency_id="EUR"
    )
    eur_payout = sum(Decimal(r["reporting"]["payout"]) for r in eur)
    assert eur_payout != Decimal(usd["network"]["payout"])


def test_an_offer_with_nothing_landed_fails_its_cells(hook, sandbox, tmp_path) -> None:
    """A lost offer leaves no landed currency to ask in: the day's offer list still finds it,
    and each of its cells the network counts fails, named."""
    day = _day(sandbox)
    records = list(
        hook.iter_conversions(
            from_date=day, to_date=day, timezone_id=67, currency_id="USD", show_events=True
        )
    )
    offers: dict[int, int] = {}
    for r in records:
        if r["status"] == COUNTED_STATUS:
            offer = r["relationship"]["offer"]["network_offer_id"]
            offers[offer] = offers.get(offer, 0) + 1
    lost = min(offers, key=offers.__getitem__)
    kept = [r for r in records if r["relationship"]["offer"]["network_offer_id"] != lost]
    request = ConversionPull(day, 67, currency_id="USD", show_events=True).record()
    write_partition(
        tmp_path,
        "conversions",
        {"date": day.isoformat()},
        kept,
        conversion_schema(),
        request=request,
    )
    lost_cells = {
        r["relationship"]["affiliate"]["network_affiliate_id"]
        for r in records
        if r["relationship"]["offer"]["network_offer_id"] == lost and r["status"] == COUNTED_STATUS
    }
    assert lost_cells

    with pytest.raises(ReconciliationError) as info:
        reconcile_day(hook, tmp_path, day, max_cells=1000, log=LOG)

    err = info.value
    assert err.differences == len(lost_cells)
    assert {line.split(":")[0] for line in err.cells} == {
        f"affiliate {a} offer {lost} (no currency landed)" for a in lost_cells
    }
    doc = json.loads(Path(err.comparison_path).read_text())
    assert {(c["offer"], c["currency"]) for c in doc["differing"]} == {(lost, None)}
    # The offers that did land still match, to the cent, in their currency.
    assert err.totals["USD"]["difference"] == {"cv": 0, "payout": "0", "revenue": "0"}


def test_a_day_over_the_row_cap_is_split_and_reconciles(hook, sandbox, tmp_path) -> None:
    """Two offers x 9,000 affiliates, about 11,000 (affiliate, offer) cells in a day: the
    whole table is capped (10,000 rows, ``incomplete_results``); the request is split by offer
    until every answer is whole (the affiliate split: tests/reports/test_reconcile_network.py)."""
    sandbox.reset(
        days=2,
        offers=2,
        advertisers=2,
        affiliates=9_000,
        conversions_per_day=17_000,
        event_share=0.0,
    )
    day = _day(sandbox)
    _land(hook, tmp_path, day, page_size=2000)

    summary = reconcile_day(hook, tmp_path, day, log=LOG)

    assert summary["reconciled"] is True, summary
    assert summary["cells"] > 10_000
    doc = _comparison(summary)
    assert doc["request"]["split_answers"] == {"offer": 1}
    usd = summary["totals"]["USD"]
    assert usd["landed"] == usd["network"]
    assert usd["landed"]["cv"] == sum(1 for c in doc["cells"] for _ in range(c["landed"]["cv"]))


def test_landed_cells_fold_batch_by_batch(hook, sandbox, tmp_path) -> None:
    """Read a few hundred rows at a time from many row groups, the cells are those of the
    whole day summed row by row."""
    day = _day(sandbox)
    landed = _land(hook, tmp_path, day, row_group_rows=300)
    part = Path(landed["path"])
    expected: dict[tuple, dict[str, Any]] = {}
    for row in read_partition(part).to_pylist():
        key = (row["rel_network_affiliate_id"], row["rel_network_offer_id"], row["currency_id"])
        cell = expected.setdefault(
            key, {"cv": 0, "event": 0, "payout": Decimal(0), "revenue": Decimal(0)}
        )
        if row["status"] == COUNTED_STATUS:
            cell["event" if row["is_event"] else "cv"] += 1
            cell["payout"] += row["payout"]
            cell["revenue"] += row["revenue"]
    assert len(expected) > 50

    assert landed_cells(part, batch_rows=128) == expected
    assert reconcile_day(hook, tmp_path, day, log=LOG)["reconciled"] is True
    assert (part / COMPARISON_NAME).exists()
