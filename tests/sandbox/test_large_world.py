"""The large world: offers in several currencies, tens of thousands of couples, the money truth.

Every amount is read as a Decimal from the JSON text (never a float), summed per currency.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest

from affiliate_network_sandbox.testing import SandboxAdminError
from tests.support.sandbox_api import day_body

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


# --- records that arrive late or disappear: reads follow the clock ------------------------------


def _noon(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"{day}T12:00:00+00:00")


def _morning(day: str, **extra: Any) -> dict[str, Any]:
    """The window [00:00, 12:00) UTC of ``day`` (``to`` is inclusive)."""
    return {"from": f"{day} 00:00:00", "to": f"{day} 11:59:59", "timezone_id": 67, **extra}


def _search(api: Any, day: str, conversion_id: str) -> list[dict[str, Any]]:
    terms = [{"search_type": "conversion_id", "value": conversion_id}]
    body = day_body(day, query={"search_terms": terms})
    resp = api.conversions(body)
    assert resp.status_code == 200, resp.text
    return resp.json()["conversions"]


def _truth_count(sandbox: Any, day: str) -> int:
    money = sandbox.truth_money(day, timezone_id=67, cells=False)["currencies"]
    return sum(agg["count"] for cur in money.values() for agg in cur["conversions"].values())


def test_late_recorded_conversions_appear_once_the_clock_passes_their_recording(sandbox, api, day):
    sandbox.reset(world="large", conversions_per_day=3000, late_share=0.1, deletion_share=0)
    noon = _noon(day)
    sandbox.set_clock(noon)
    first = {r["conversion_id"]: r for r in api.all_conversions(_morning(day))}
    assert _truth_count(sandbox, day) == len(first)
    sandbox.advance_clock(6 * 3600)
    later = {r["conversion_id"]: r for r in api.all_conversions(_morning(day))}
    assert _truth_count(sandbox, day) > len(later)  # the afternoon counts in the day's truth
    # Nothing vanished; conversions timestamped before noon arrived in the already-read window.
    assert set(first) <= set(later)
    arrived = sorted(set(later) - set(first))
    assert len(arrived) >= 5
    assert all(later[c]["conversion_unix_timestamp"] <= noon.timestamp() for c in arrived)
    # Before its recording no read serves it: search by id, the flowchart; after, both do.
    late = later[arrived[0]]
    flowchart = f"/networks/reporting/transactions/{late['transaction_id']}/flowchart"
    sandbox.set_clock(noon)
    assert _search(api, day, late["conversion_id"]) == []
    assert api.call("GET", flowchart).status_code == 404
    sandbox.set_clock(noon + dt.timedelta(hours=6))
    assert [r["conversion_id"] for r in _search(api, day, late["conversion_id"])] == [arrived[0]]
    assert api.call("GET", flowchart).status_code == 200


def test_deleted_conversions_disappear_from_every_read_and_from_the_truth(sandbox, api, day):
    sandbox.reset(world="large", conversions_per_day=3000, deletion_share=0.01, late_share=0)
    past = (dt.date.fromisoformat(day) - dt.timedelta(days=3)).isoformat()
    sandbox.set_clock(dt.datetime.fromisoformat(f"{past}T23:59:59+00:00"))
    body = day_body(past, show_events=True)
    first = {r["conversion_id"]: r for r in api.all_conversions(body)}
    sandbox.advance_clock(3 * 86400)
    later = {r["conversion_id"]: r for r in api.all_conversions(body)}
    assert set(later) <= set(first)
    gone = [first[c] for c in sorted(set(first) - set(later))]
    assert gone
    gone_txns = {r["transaction_id"] for r in gone}
    # An event goes with its conversion.
    assert not gone_txns & {r["transaction_id"] for r in later.values()}
    base = [r for r in gone if not r["is_event"]]
    assert base
    assert _search(api, past, base[0]["conversion_id"]) == []
    flowchart = f"/networks/reporting/transactions/{base[0]['transaction_id']}/flowchart"
    assert api.call("GET", flowchart).status_code == 404
    truth = sandbox.truth_money(past, timezone_id=67, cells=False)["currencies"]
    counted = sum(c["events"]["count"] for c in truth.values()) + sum(
        agg["count"] for c in truth.values() for agg in c["conversions"].values()
    )
    assert counted == len(later)


def test_on_hold_listing_changes_while_read(sandbox, api, day):
    sandbox.reset(world="large", conversions_per_day=3000, late_share=0.2, deletion_share=0)
    sandbox.set_clock(_noon(day))
    pending = _morning(
        day, query={"filters": [{"resource_type": "status", "filter_id_value": "pending"}]}
    )

    def listing() -> dict[str, str]:
        return {
            r["conversion_id"]: r["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]
            for r in api.all_conversions(pending, page_size=50)
        }

    held = listing()
    assert len(held) > 20
    approved = sorted(held)[0]
    resp = api.call(
        "PATCH",
        "/networks/reporting/onhold",
        json={"on_hold_conversion_ids": [held[approved]], "status": "approved"},
    )
    assert resp.status_code == 200
    # An approval removes its row from the on-hold listing...
    assert set(listing()) == set(held) - {approved}
    # ...and late holds arrive in the already-read window as the clock runs.
    sandbox.advance_clock(6 * 3600)
    after = listing()
    assert set(held) - {approved} < set(after)


def test_the_outlier_rule_catches_exactly_the_planted_outliers_in_every_currency(large, api, day):
    planted = large.planted(day, day, timezone_id=67)
    assert "rate of the record's currency_id" in planted["rules"]["outlier_sale_amount"]
    outliers = set(planted["conversion_ids"]["outlier_sale_amount"])
    flagged = {
        r["conversion_id"]
        for r in api.all_conversions(day_body(day))
        if Decimal(str(r["sale_amount"])) >= Decimal(5000) * RATES[r["currency_id"]]
    }
    assert outliers
    assert flagged == outliers


@pytest.mark.parametrize("target", ["USD", "KWD"])
def test_the_affiliate_table_converts_its_earnings_the_same_way(large, api, day, target):
    fid, key = next(iter(large.keys["affiliate"].items()))
    cells = [
        c
        for c in large.truth_money(day, timezone_id=67)["cells"]
        if c["network_affiliate_id"] == int(fid)
    ]
    assert len({c["currency_id"] for c in cells}) > 1
    body = day_body(day, currency_id=target, columns=[{"column": "offer"}])
    resp = api.call("POST", "/affiliates/reporting/entity/table", key=key, json=body)
    assert resp.status_code == 200, resp.text
    got = {r["columns"][0]["id"]: r["reporting"] for r in _decimal_json(resp.text)["table"]}
    for cell in cells:
        src, earned = cell["currency_id"], Decimal(cell["payout"])
        expected = (
            earned if src == target else _to_minor(earned * RATES[target] / RATES[src], target)
        )
        row = got[str(cell["network_offer_id"])]
        assert (row["revenue"], row["cv"]) == (expected, cell["cv"]), cell
