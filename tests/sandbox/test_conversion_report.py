"""POST /networks/reporting/conversions: record shape, events, filters, search terms."""

from __future__ import annotations

import datetime as dt
import re

from tests.support.sandbox_api import day_body

STRING_FIELDS = (
    [f"adv{n}" for n in range(1, 11)]
    + [
        "android_id",
        "android_id_md5",
        "android_id_sha1",
        "app_id",
        "brand",
        "browser",
        "carrier",
        "city",
        "conversion_id",
        "conversion_user_ip",
        "country",
        "coupon_code",
        "currency_id",
        "device_model",
        "device_type",
        "email",
        "error_message",
        "event",
        "google_ad_id",
        "google_ad_id_md5",
        "google_ad_id_sha1",
        "http_user_agent",
        "idfa",
        "idfa_md5",
        "idfa_sha1",
        "isp",
        "language",
        "notes",
        "order_id",
        "os_version",
        "payout_type",
        "platform",
        "referer",
        "region",
        "revenue_type",
        "session_user_ip",
        "source_id",
        "status",
    ]
    + [f"sub{n}" for n in range(1, 11)]
    + ["transaction_id", "url"]
)
INT_FIELDS = [
    "click_unix_timestamp",
    "conversion_unix_timestamp",
    "dma",
    "error_code",
    "network_offer_payout_revenue_id",
    "previous_network_offer_id",
]
NUM_FIELDS = ("payout", "revenue", "sale_amount")
BOOL_FIELDS = ("is_event", "is_scrub", "is_view_through")
_EMPLOYEE = "account_status first_name full_name last_name network_employee_id network_id"
REL_OBJECTS = {
    "account_manager": _EMPLOYEE,
    "affiliate_manager": _EMPLOYEE,
    "adv_global_event": "advertiser_id entry_name network_advertiser_global_event_id network_id",
    "advertiser": "account_status name network_advertiser_id network_id",
    "affiliate": "account_status name network_affiliate_id network_id",
    "affiliate_tier": "name network_affiliate_tier_id network_id status",
    "campaign": "campaign_name campaign_status network_campaign_id network_id",
    "offer": "name network_id network_offer_id offer_status",
    "offer_group": "name network_advertiser_id network_id network_offer_group_id offer_count "
    "offer_group_status",
    "offer_url": "name network_id network_offer_id network_offer_url_id",
    "postback_control": "name network_id network_postback_control_id",
}
REL_SCALARS = [
    "attribution_method",
    "click_attribution_method",
    "conversion_referer",
    "redirect_url",
    "referer",
    "events_count",
    "is_enforce_caps",
    "unix_timestamp_postback",
    "usm_data",
    "query_parameters",
    "candidate_clicks",
    "on_hold_snapshots",
    "snapshots",
    "order_line_items",
    "line_items_custom_payout_revenue_settings",
    "custom_payout_revenue",
    "tiered_commission",
]
SNAPSHOT_FIELDS = set(
    [
        "initiator",
        "network_employee",
        "network_id",
        "on_hold_conversion_history_snapshot_id",
        "on_hold_conversion_id",
        "snapshot_type",
        "status",
        "unix_timestamp",
    ]
)


def test_every_field_of_the_conversion_record_is_present_and_typed(api, day):
    rows = api.conversions(day_body(day, show_events=True), page_size=2000).json()["conversions"]
    assert rows
    for r in rows:
        for f in STRING_FIELDS:
            assert isinstance(r[f], str), f
        for f in INT_FIELDS:
            assert isinstance(r[f], int), f
            assert not isinstance(r[f], bool), f
        for f in NUM_FIELDS:
            assert isinstance(r[f], int | float), f
        for f in BOOL_FIELDS:
            assert isinstance(r[f], bool), f
        rel = r["relationship"]
        for name, fields in REL_OBJECTS.items():
            assert set(fields.split()) <= set(rel[name]), name
        for name in REL_SCALARS:
            assert name in rel, name
        for click in rel["candidate_clicks"]:
            assert set(click) == {"relationship", "transaction_id", "unix_timestamp"}
            assert "affiliate" in click["relationship"]
        assert r["click_unix_timestamp"] <= r["conversion_unix_timestamp"]
        assert re.fullmatch(r"[0-9a-f]{32}", r["conversion_id"])
        assert re.fullmatch(r"[0-9a-f]{32}", r["transaction_id"])


def test_on_hold_conversions_are_pending_with_one_on_hold_snapshot(api, day, sandbox):
    rows = api.all_conversions(day_body(day))
    held = [r for r in rows if r["relationship"]["on_hold_snapshots"]]
    assert len(held) == sandbox.truth(day, day)["on_hold"] > 0
    for r in held:
        assert r["status"] == "pending"
        snaps = r["relationship"]["on_hold_snapshots"]
        assert len(snaps) == 1
        assert set(snaps[0]) == SNAPSHOT_FIELDS
        assert snaps[0]["status"] == "on_hold"
        assert snaps[0]["initiator"] == "manual"
    assert all(r["status"] == "approved" for r in rows if r not in held)


def test_on_hold_share_is_roughly_as_configured(api, day, sandbox):
    truth = sandbox.truth(day, day)
    assert 0.05 <= truth["on_hold"] / truth["conversions"] <= 0.16


def test_events_only_with_show_events_and_attached_to_conversions(api, day, sandbox):
    plain = api.all_conversions(day_body(day))
    assert not any(r["is_event"] for r in plain)
    both = api.all_conversions(day_body(day, show_events=True))
    events = [r for r in both if r["is_event"]]
    truth = sandbox.truth(day, day)
    assert len(events) == truth["events"] > 0
    assert len(both) == truth["conversions"] + truth["events"]
    # Conversions come first, then events (the documented order).
    assert [r["is_event"] for r in both] == sorted(r["is_event"] for r in both)
    by_txn = {r["transaction_id"]: r for r in plain}
    for ev in events:
        assert ev["event"]
        assert ev["status"] == "approved"
        # Events of the last minutes of the previous UTC day belong to a conversion of that day.
        parent = by_txn.get(ev["transaction_id"])
        if parent is not None:
            assert ev["conversion_unix_timestamp"] > parent["conversion_unix_timestamp"]
            assert parent["relationship"]["events_count"] == 1
    only_events = api.all_conversions(day_body(day, show_events=True, show_conversions=False))
    assert only_events == events


def test_show_nothing_returns_nothing(api, day):
    data = api.conversions(day_body(day, show_conversions=False)).json()
    assert data["conversions"] == []
    assert data["paging"]["total_count"] == 0


def test_days_outside_the_data_window_are_empty(api, catalog):
    first = dt.date.fromisoformat(catalog["first_date"])
    before = (first - dt.timedelta(days=40)).isoformat()
    data = api.conversions({"from": before, "to": before}).json()
    assert data["paging"]["total_count"] == 0


def test_days_older_than_the_documented_365_day_history_are_refused(api, catalog):
    last = dt.date.fromisoformat(catalog["last_date"])
    oldest = last - dt.timedelta(days=365)
    ok = api.conversions({"from": oldest.isoformat(), "to": oldest.isoformat()})
    assert ok.status_code == 200
    old = (oldest - dt.timedelta(days=1)).isoformat()
    resp = api.conversions({"from": old, "to": old})
    assert resp.status_code == 400
    assert "from" in resp.json()["error"]
    assert "365" in resp.json()["error"]


def test_filters_and_across_types_or_within(api, day, catalog):
    offers = catalog["network_offer_ids"][:2]
    body = day_body(
        day,
        query={
            "filters": [
                {"resource_type": "offer", "filter_id_value": str(offers[0])},
                {"resource_type": "offer", "filter_id_value": str(offers[1])},
                {"resource_type": "status", "filter_id_value": "pending"},
            ]
        },
    )
    rows = api.all_conversions(body, page_size=7)
    everything = api.all_conversions(day_body(day))
    expected = [
        r
        for r in everything
        if r["relationship"]["offer"]["network_offer_id"] in offers and r["status"] == "pending"
    ]
    assert rows == expected
    assert rows


def test_search_by_each_id_type(api, day):
    rows = api.all_conversions(day_body(day))
    held = next(r for r in rows if r["relationship"]["on_hold_snapshots"])
    ohid = held["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]
    for stype, value in (
        ("conversion_id", held["conversion_id"]),
        ("transaction_id", held["transaction_id"]),
        ("on_hold_conversion_id", ohid),
    ):
        body = day_body(day, query={"search_terms": [{"search_type": stype, "value": value}]})
        got = api.conversions(body).json()
        assert got["conversions"] == [held], stype
        assert got["paging"]["total_count"] == 1


def test_search_terms_are_ored_and_field_search_works(api, day):
    rows = api.all_conversions(day_body(day))
    a, b = rows[3], rows[200]
    body = day_body(
        day,
        query={
            "search_terms": [
                {"search_type": "conversion_id", "value": a["conversion_id"]},
                {"search_type": "order_id", "value": b["order_id"]},
                {"search_type": "conversion_id", "value": "f" * 32},
            ]
        },
    )
    assert api.conversions(body).json()["conversions"] == [a, b]


def test_unknown_search_type_is_400(api, day):
    body = day_body(day, query={"search_terms": [{"search_type": "shoe_size", "value": "9"}]})
    assert api.conversions(body).status_code == 400


def test_currency_is_not_applied_to_raw_conversion_reports(api, day):
    # Documented: raw conversion reports come in the offer's currency, unconverted.
    usd = api.conversions(day_body(day), page_size=5).json()["conversions"]
    eur = api.conversions(day_body(day, currency_id="EUR"), page_size=5).json()["conversions"]
    for u, e in zip(usd, eur, strict=True):
        assert e["currency_id"] == u["currency_id"] == "USD"
        assert e["payout"] == u["payout"]
        assert e["conversion_id"] == u["conversion_id"]
    assert api.conversions(day_body(day, currency_id="XYZ")).status_code == 400
