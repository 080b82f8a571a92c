"""The large world: offers in several currencies, tens of thousands of couples, the money truth.

Every amount is read as a Decimal from the JSON text (never a float), summed per currency.
"""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest

from affiliate_network_sandbox.testing import SandboxAdminError

from .conftest import day_body

NETWORK_TABLE = "/networks/reporting/entity/table"

#: The sandbox's documented rates (docs/sandbox.md "Currencies"): units per 1 USD. Written out
#: here, not imported, so a changed constant is caught.
RATES = {
    "USD": Decimal("1"),
    "EUR": Decimal("0.92"),
    "GBP": Decimal("0.79"),
    "JPY": Decimal("150"),
    "KWD": Decimal("0.307"),
    "IDR": Decimal("15800"),
}
MINOR_DIGITS = {"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0, "KWD": 3, "IDR": 2}


def _decimal_json(text: str) -> Any:
    return json.loads(text, parse_float=Decimal, parse_int=Decimal)


def _table(api: Any, body: dict[str, Any]) -> dict[str, Any]:
    resp = api.call("POST", NETWORK_TABLE, json=body)
    assert resp.status_code == 200, resp.text
    return _decimal_json(resp.text)


def _offer_currencies(sandbox: Any) -> dict[str, str]:
    return {oid: o["currency_id"] for oid, o in sandbox.catalog()["offers"].items()}


def _to_minor(value: Decimal, currency: str) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-MINOR_DIGITS[currency]), rounding=ROUND_HALF_UP)


@pytest.fixture
def large(sandbox: Any) -> Any:
    """The session sandbox as a large world with a small day (fast reads)."""
    sandbox.reset(world="large", conversions_per_day=3000)
    return sandbox


def test_the_default_world_stays_small_and_in_one_currency(sandbox):
    cfg = sandbox.admin("GET", "/_sandbox/config")
    assert (cfg["world"], cfg["offer_currencies"], cfg["affiliates"], cfg["offers"]) == (
        "small",
        ["USD"],
        8,
        12,
    )
    assert set(_offer_currencies(sandbox).values()) == {"USD"}


def test_raw_records_carry_the_offers_currency_at_its_minor_unit(large, api, day):
    offer_cur = _offer_currencies(large)
    assert {"USD", "EUR", "GBP", "JPY", "KWD", "IDR"} <= set(offer_cur.values())
    resp = api.conversions(day_body(day, currency_id="EUR", show_events=True), page_size=2000)
    assert resp.status_code == 200
    recs = _decimal_json(resp.text)["conversions"]
    seen: dict[str, int] = defaultdict(int)
    kwd_three_digits = 0
    for rec in recs:
        cur = rec["currency_id"]
        # The offer's currency, whatever the request's currency_id (raw reports: unconverted).
        assert cur == offer_cur[str(rec["relationship"]["offer"]["network_offer_id"])]
        seen[cur] += 1
        for field in ("payout", "revenue", "sale_amount"):
            exponent = rec[field].as_tuple().exponent
            assert exponent >= -MINOR_DIGITS[cur], (cur, field, rec[field])
            if cur == "JPY":
                # Whole numbers, written without a decimal point.
                assert "." not in str(rec[field])
            if cur == "KWD" and exponent == -3:
                kwd_three_digits += 1
    assert set(seen) == {"USD", "EUR", "GBP", "JPY", "KWD", "IDR"}
    assert kwd_three_digits > 50
    # The flowchart of a JPY conversion tells the same currency.
    jpy = next(r for r in recs if r["currency_id"] == "JPY" and not r["is_event"])
    flow = api.call(
        "GET", f"/networks/reporting/transactions/{jpy['transaction_id']}/flowchart"
    ).json()
    assert flow["clicks"][0]["currency_id"] == "JPY"
    assert flow["conversions"][0]["currency_id"] == "JPY"
    assert flow["conversions"][0]["payout"] == int(jpy["payout"])


def test_entity_table_in_the_offers_currency_sums_exactly_to_the_truth(large, api, day):
    truth = large.truth_money(day, timezone_id=67, cells=False)["currencies"]
    offer_cur = _offer_currencies(large)
    assert len(truth) == 6
    for cur, expected in truth.items():
        offers = [oid for oid, c in offer_cur.items() if c == cur]
        flt = [{"resource_type": "offer", "filter_id_value": oid} for oid in offers]
        body = day_body(day, currency_id=cur, columns=[{"column": "offer"}], query={"filters": flt})
        rows = [r["reporting"] for r in _table(api, body)["table"]]
        got = {
            name: sum((r[name] for r in rows), Decimal(0))
            for name in (
                "cv",
                "event",
                "payout",
                "revenue",
                "on_hold_conversion_count",
                "on_hold_potential_payout",
                "on_hold_potential_revenue",
            )
        }
        assert got == {k: Decimal(v) for k, v in expected["entity"].items()}, cur


@pytest.mark.parametrize("target", ["EUR", "JPY", "KWD"])
def test_converted_amounts_follow_the_documented_rates(large, api, day, target):
    cells = large.truth_money(day, timezone_id=67)["cells"]
    # Per offer: the exact sums in the offer's currency (the truth's couples, added up).
    per_offer: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    currency: dict[str, str] = {}
    for cell in cells:
        oid = str(cell["network_offer_id"])
        currency[oid] = cell["currency_id"]
        for name in ("payout", "revenue", "on_hold_potential_payout"):
            per_offer[oid][name] += Decimal(cell[name])
    body = day_body(day, currency_id=target, columns=[{"column": "offer"}])
    rows = _table(api, body)["table"]
    assert len(rows) == len(per_offer) == 60
    for row in rows:
        oid = row["columns"][0]["id"]
        src = currency[oid]
        for name, exact in per_offer[oid].items():
            if src == target:
                expected = exact  # no conversion: the exact sum
            else:
                expected = _to_minor(exact * RATES[target] / RATES[src], target)
            assert row["reporting"][name] == expected, (oid, src, name)
            if MINOR_DIGITS[target] == 0:
                assert "." not in str(row["reporting"][name])


def test_a_request_without_currency_id_is_answered_in_the_networks_currency_usd(large, api, day):
    body = day_body(day, columns=[{"column": "offer"}])
    assert _table(api, body) == _table(api, {**body, "currency_id": "USD"})


def test_a_large_day_has_over_ten_thousand_couples_and_the_table_says_it_is_capped(
    sandbox, api, day
):
    sandbox.reset(world="large")
    truth = sandbox.truth_money(day, timezone_id=67, cells=False)
    assert truth["cells_with_conversions"] > 10_000
    body = day_body(day, columns=[{"column": "affiliate"}, {"column": "offer"}])
    doc = _table(api, body)
    assert len(doc["table"]) == 10_000
    assert doc["incomplete_results"] is True


def test_truth_equals_a_full_paged_read_of_the_conversion_report(large, api, day):
    truth = large.truth_money(day, timezone_id=67)
    sums: dict[tuple[str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0)] * 3)
    cells: dict[tuple[int, int], list[Decimal]] = defaultdict(lambda: [Decimal(0)] * 3)
    page = 1
    while True:
        resp = api.conversions(day_body(day, show_events=True), page=page, page_size=1000)
        doc = _decimal_json(resp.text)
        for rec in doc["conversions"]:
            kind = "events" if rec["is_event"] else rec["status"]
            acc = sums[(rec["currency_id"], kind)]
            acc[0] += 1
            acc[1] += rec["payout"]
            acc[2] += rec["revenue"]
            if rec["is_event"] or rec["status"] == "approved":
                rel = rec["relationship"]
                cell = cells[
                    (rel["affiliate"]["network_affiliate_id"], rel["offer"]["network_offer_id"])
                ]
                cell[0] += 0 if rec["is_event"] else 1
                cell[1] += rec["payout"]
                cell[2] += rec["revenue"]
        if page * 1000 >= doc["paging"]["total_count"]:
            break
        page += 1
    expected: dict[tuple[str, str], list[Decimal]] = {}
    for cur, t in truth["currencies"].items():
        for status, agg in t["conversions"].items():
            if agg["count"]:
                expected[(cur, status)] = [
                    Decimal(agg["count"]),
                    Decimal(agg["payout"]),
                    Decimal(agg["revenue"]),
                ]
        ev = t["events"]
        expected[(cur, "events")] = [
            Decimal(ev["count"]),
            Decimal(ev["payout"]),
            Decimal(ev["revenue"]),
        ]
    assert dict(sums) == expected
    by_cell = {
        (c["network_affiliate_id"], c["network_offer_id"]): [
            Decimal(c["cv"]),
            Decimal(c["payout"]),
            Decimal(c["revenue"]),
        ]
        for c in truth["cells"]
        if c["cv"] or c["event"]
    }
    assert dict(cells) == by_cell


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"world": "huge"}, "world"),
        ({"offer_currencies": ["USD", "XYZ"]}, "XYZ"),
        ({"offer_currencies": []}, "offer_currencies"),
        ({"late_share": "nan"}, "late_share"),
        ({"deletion_share": 2}, "deletion_share"),
        ({"late_max_s": 60}, "late_max_s"),
    ],
)
def test_world_settings_are_validated(sandbox, overrides, message):
    with pytest.raises(SandboxAdminError, match=message):
        sandbox.reset(**overrides)
