"""Read endpoints: offer URLs, labels, payout/revenue, flowchart, tiered commissions, pixels,
encoding."""

from __future__ import annotations

from affiliate_network_sandbox.ids import decode_tracking_id
from tests.support.sandbox_api import day_body


def test_offer_url_record(api, catalog):
    uid = catalog["network_offer_url_ids"][0]
    rec = api.call("GET", f"/networks/offerurls/{uid}").json()
    assert rec["network_offer_url_id"] == uid
    for f in (
        "network_id",
        "network_offer_id",
        "name",
        "destination_url",
        "preview_url",
        "url_status",
        "network_affiliate_ids",
        "is_apply_specific_affiliates",
        "is_hidden_affiliate",
        "time_created",
        "time_saved",
    ):
        assert f in rec
    assert set(rec["remote_offer_resource"]) == set(
        [
            "network_offer_id",
            "network_id",
            "resource_type",
            "remote_resource_id",
            "resource_id",
            "last_value_md5",
            "json_config",
            "json_data",
            "time_created",
            "time_saved",
        ]
    )


def test_label_record_and_404(api, catalog):
    label = catalog["labels"][0]
    rec = api.call("GET", f"/networks/labels/{label}").json()
    assert rec["label"] == label
    for f in (
        "advertiser_ids",
        "affiliate_ids",
        "campaign_ids",
        "offer_ids",
        "offer_group_ids",
        "affiliate_tier_ids",
        "relationship",
    ):
        assert f in rec
    assert api.call("GET", "/networks/labels/no-such-label").status_code == 404


def test_custom_payout_revenue_with_and_without_expansion(api, catalog):
    sid = catalog["network_custom_payout_revenue_setting_ids"][1]
    plain = api.call("GET", f"/networks/custom/payoutrevenue/{sid}").json()
    assert plain["network_custom_payout_revenue_setting_id"] == sid
    assert plain["relationship"] == {}
    full = api.call(
        "GET", f"/networks/custom/payoutrevenue/{sid}", params={"relationship": "all"}
    ).json()
    rel = full["relationship"]
    for member in (
        "affiliates",
        "offer",
        "payout_revenue",
        "currency_id",
        "ruleset",
        "variables",
        "offer_urls",
    ):
        assert member in rel
    assert rel["offer_urls"]
    assert set(rel["offer_urls"][0]) == {
        "network_offer_url_id",
        "network_id",
        "network_offer_id",
        "name",
    }
    assert api.call("GET", "/networks/custom/payoutrevenue/1").status_code == 404


def test_flowchart_of_a_transaction(api, day):
    rows = api.all_conversions(day_body(day, show_events=True))
    with_event = next(
        r
        for r in rows
        if not r["is_event"]
        and r["relationship"]["events_count"] == 1
        and r["status"] == "approved"
    )
    flow = api.call(
        "GET", f"/networks/reporting/transactions/{with_event['transaction_id']}/flowchart"
    ).json()
    assert set(flow) == {"clicks", "conversions", "pixel_logs"}
    (click,) = flow["clicks"]
    assert click["unix_timestamp"] == with_event["click_unix_timestamp"]
    assert click["relationship"] == {"internal_redirect_count": 0}
    assert next(c["conversion_id"] for c in flow["conversions"]) == with_event["conversion_id"]
    assert len(flow["conversions"]) == 2
    for log in flow["pixel_logs"]:
        assert set(log) == {
            "conversion_id",
            "unix_timestamp",
            "is_success",
            "pixel_id",
            "relationship",
        }
    held = next(r for r in rows if r["status"] == "pending")
    flow = api.call(
        "GET", f"/networks/reporting/transactions/{held['transaction_id']}/flowchart"
    ).json()
    on_hold = flow["conversions"][0]["relationship"]["on_hold"]
    assert on_hold["status"] == "on_hold"
    assert (
        on_hold["on_hold_conversion_id"]
        == held["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]
    )
    assert api.call("GET", "/networks/reporting/transactions/abc/flowchart").status_code == 404


def test_tiered_commissions_search_and_filters(api, catalog):
    all_ = api.call("POST", "/networks/tieredcommissions/table", json={}).json()
    assert (
        all_["paging"]["total_count"]
        == len(all_["commissions"])
        == len(catalog["network_tiered_commission_ids"])
    )
    first = all_["commissions"][0]
    hit = api.call(
        "POST",
        "/networks/tieredcommissions/table",
        json={"search_terms": [{"search_type": "name", "value": first["name"].upper()}]},
    ).json()
    assert first in hit["commissions"]
    oid = first["relationship"]["network_offer_ids"][0]
    by_offer = api.call(
        "POST", "/networks/tieredcommissions/table", json={"filters": {"network_offer_ids": [oid]}}
    ).json()
    assert [c["network_tiered_commission_id"] for c in by_offer["commissions"]] == [
        first["network_tiered_commission_id"]
    ]
    assert (
        api.call(
            "POST",
            "/networks/tieredcommissions/table",
            json={"search_terms": [{"search_type": "colour", "value": "x"}]},
        ).status_code
        == 400
    )


def test_pixels_filters(api, catalog):
    all_ = api.call(
        "POST", "/networks/pixelstable", json={"query": {"filters": {"pixel_type": "conversion"}}}
    ).json()
    assert all_["paging"]["total_count"] == len(catalog["network_pixel_ids"])
    oid = next(p["network_offer_id"] for p in all_["pixels"] if p["network_offer_id"])
    some = api.call(
        "POST", "/networks/pixelstable", json={"query": {"filters": {"network_offer_ids": [oid]}}}
    ).json()
    assert some["pixels"]
    assert all(p["network_offer_id"] == oid for p in some["pixels"])
    none = api.call(
        "POST", "/networks/pixelstable", json={"query": {"filters": {"pixel_type": "impression"}}}
    ).json()
    assert none["pixels"] == []


def test_encode_is_deterministic_and_reversible(api, sandbox):
    aff_key = next(iter(sandbox.keys["affiliate"].values()))
    body = {"type": "tracking_link_affiliate", "ids": [1, 2, 101, 987654]}
    a = api.call("POST", "/affiliates/encode", key=aff_key, json=body).json()["values"]
    b = api.call("POST", "/affiliates/encode", key=aff_key, json=body).json()["values"]
    assert a == b
    assert [v["decoded"] for v in a] == body["ids"]
    assert len({v["encoded"] for v in a}) == 4
    from affiliate_network_sandbox.ids import derive

    key = derive(1, "encode")
    assert [decode_tracking_id(v["encoded"], key) for v in a] == body["ids"]
    assert (
        api.call(
            "POST", "/affiliates/encode", key=aff_key, json={"type": "other", "ids": [1]}
        ).status_code
        == 400
    )
    assert (
        api.call(
            "POST",
            "/affiliates/encode",
            key=aff_key,
            json={"type": "tracking_link_affiliate", "ids": [0]},
        ).status_code
        == 400
    )
