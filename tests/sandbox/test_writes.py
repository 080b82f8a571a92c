"""Write endpoints change state, and later reads show it."""

from __future__ import annotations

import pytest

from tests.support.sandbox_api import day_body

ONHOLD = "/networks/reporting/onhold"


def _held(api, day, n=3):
    rows = api.all_conversions(day_body(day))
    held = [r for r in rows if r["status"] == "pending"][:n]
    return held, [r["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"] for r in held]


def _by_id(api, day, conversion_id, **extra):
    body = day_body(
        day,
        query={"search_terms": [{"search_type": "conversion_id", "value": conversion_id}]},
        **extra,
    )
    (row,) = api.conversions(body).json()["conversions"]
    return row


@pytest.mark.parametrize("status", ["approved", "rejected"])
def test_onhold_patch_changes_status_and_appends_snapshot(api, day, sandbox, status):
    held, ids = _held(api, day, 2)
    resp = api.call("PATCH", ONHOLD, json={"on_hold_conversion_ids": ids, "status": status})
    assert resp.status_code == 200
    assert resp.json() == {"result": True}
    for row in held:
        now = _by_id(api, day, row["conversion_id"])
        assert now["status"] == status
        snaps = now["relationship"]["on_hold_snapshots"]
        assert [s["status"] for s in snaps] == ["on_hold", status]
    truth = sandbox.truth(day, day)
    assert (
        truth[status] >= 2
        if status == "rejected"
        else truth["on_hold_pending"] == truth["on_hold"] - 2
    )


def test_onhold_patch_is_idempotent_and_can_move_on(api, day):
    held, ids = _held(api, day, 1)
    body = {"on_hold_conversion_ids": ids, "status": "approved"}
    api.call("PATCH", ONHOLD, json=body)
    api.call("PATCH", ONHOLD, json=body)
    snaps = _by_id(api, day, held[0]["conversion_id"])["relationship"]["on_hold_snapshots"]
    assert [s["status"] for s in snaps] == ["on_hold", "approved"]
    api.call("PATCH", ONHOLD, json={**body, "status": "rejected"})
    row = _by_id(api, day, held[0]["conversion_id"])
    assert [s["status"] for s in row["relationship"]["on_hold_snapshots"]] == [
        "on_hold",
        "approved",
        "rejected",
    ]
    assert row["status"] == "rejected"


def test_onhold_patch_status_filter_sees_the_change(api, day):
    _, ids = _held(api, day, 2)
    api.call("PATCH", ONHOLD, json={"on_hold_conversion_ids": ids, "status": "rejected"})
    body = day_body(
        day, query={"filters": [{"resource_type": "status", "filter_id_value": "rejected"}]}
    )
    rows = api.all_conversions(body)
    assert sorted(
        r["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"] for r in rows
    ) == sorted(ids)


def test_onhold_patch_unknown_id_is_404_and_applies_nothing(api, day):
    held, ids = _held(api, day, 1)
    resp = api.call(
        "PATCH", ONHOLD, json={"on_hold_conversion_ids": [*ids, "0" * 32], "status": "approved"}
    )
    assert resp.status_code == 404
    assert resp.json() == {"error": "Can't find entry in the database"}
    assert _by_id(api, day, held[0]["conversion_id"])["status"] == "pending"


@pytest.mark.parametrize(
    "body",
    [
        {"status": "approved"},
        {"on_hold_conversion_ids": ["x"], "status": "maybe"},
        {"on_hold_conversion_ids": [], "status": "approved"},
    ],
)
def test_onhold_patch_validation(api, body):
    assert api.call("PATCH", ONHOLD, json=body).status_code == 400


def test_onhold_ignore_ids_fault_reports_success_without_change(api, day, sandbox):
    held, ids = _held(api, day, 2)
    sandbox.set_faults(onhold_ignore_ids=[ids[0]])
    resp = api.call("PATCH", ONHOLD, json={"on_hold_conversion_ids": ids, "status": "approved"})
    assert resp.json() == {"result": True}
    assert _by_id(api, day, held[0]["conversion_id"])["status"] == "pending"
    assert _by_id(api, day, held[1]["conversion_id"])["status"] == "approved"


def test_sale_amount_correction_shows_in_the_report(api, day):
    row = api.conversions(day_body(day), page_size=1).json()["conversions"][0]
    path = f"/networks/reporting/conversions/{row['conversion_id']}/saleamount"
    resp = api.call("PUT", path, json={"sale_amount": 123.45, "is_event": False})
    assert resp.json() == {"result": True}
    now = _by_id(api, day, row["conversion_id"])
    assert now["sale_amount"] == 123.45
    assert now["relationship"]["snapshots"][-1]["snapshot_type"] == "sale_amount"
    # Raw conversion reports are not converted (documented): the amount stays as written.
    assert _by_id(api, day, row["conversion_id"], currency_id="GBP")["sale_amount"] == 123.45


def test_sale_amount_of_an_event(api, day):
    ev = next(r for r in api.all_conversions(day_body(day, show_events=True)) if r["is_event"])
    path = f"/networks/reporting/conversions/{ev['conversion_id']}/saleamount"
    assert api.call("PUT", path, json={"sale_amount": 9.5, "is_event": False}).status_code == 404
    assert api.call("PUT", path, json={"sale_amount": 9.5, "is_event": True}).status_code == 200
    assert _by_id(api, day, ev["conversion_id"], show_events=True)["sale_amount"] == 9.5


@pytest.mark.parametrize("body", [{"sale_amount": -1}, {"sale_amount": "10"}, {"is_event": False}])
def test_sale_amount_validation(api, day, body):
    row = api.conversions(day_body(day), page_size=1).json()["conversions"][0]
    resp = api.call(
        "PUT", f"/networks/reporting/conversions/{row['conversion_id']}/saleamount", json=body
    )
    assert resp.status_code == 400


def test_sale_amount_unknown_conversion_is_404(api):
    resp = api.call(
        "PUT", "/networks/reporting/conversions/nope/saleamount", json={"sale_amount": 1}
    )
    assert resp.status_code == 404


def test_offer_group_put_replaces_the_whole_object(api, catalog, sandbox):
    gid = catalog["network_offer_group_ids"][0]
    offer = next(
        o for o, info in catalog["offers"].items() if info["network_offer_group_id"] == gid
    )
    adv = catalog["offers"][offer]["network_advertiser_id"]
    full = {
        "name": "Summer",
        "offer_group_status": "paused",
        "network_advertiser_id": adv,
        "network_offer_ids": [int(offer)],
        "internal_notes": "n",
        "labels": ["vip"],
        "is_caps_enabled": True,
        "is_soft_cap": True,
        "daily_conversion_cap": 100,
    }
    rec = api.call("PUT", f"/networks/offergroups/{gid}", json=full).json()
    assert rec["offer_group_status"] == "paused"
    assert rec["daily_conversion_cap"] == 100
    assert rec["relationship"]["remaining_caps"]["remaining_daily_conversion_cap"] == 100
    assert rec["relationship"]["labels"] == {"total": 1, "entries": ["vip"]}
    assert rec["relationship"]["advertiser"]["network_advertiser_id"] == adv
    assert len(rec["relationship"]["remaining_caps"]) == 16
    # Omitted non-required fields go back to their defaults.
    rec = api.call(
        "PUT", f"/networks/offergroups/{gid}", json={"name": "Bare", "network_advertiser_id": adv}
    ).json()
    assert rec["offer_group_status"] == "active"
    assert rec["daily_conversion_cap"] == 0
    assert rec["is_caps_enabled"] is False
    assert rec["internal_notes"] == ""
    assert rec["relationship"]["network_offer_ids"] == []
    assert sandbox.objects("offer_groups")[str(gid)]["name"] == "Bare"


def test_offer_group_offers_must_belong_to_the_advertiser(api, catalog):
    gid = catalog["network_offer_group_ids"][0]
    offers = catalog["offers"]
    o1, o2 = next(
        (a, b)
        for a in offers
        for b in offers
        if offers[a]["network_advertiser_id"] != offers[b]["network_advertiser_id"]
    )
    body = {
        "name": "x",
        "network_advertiser_id": offers[o1]["network_advertiser_id"],
        "network_offer_ids": [int(o2)],
    }
    assert api.call("PUT", f"/networks/offergroups/{gid}", json=body).status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        {"network_advertiser_id": 5001},
        {"name": "x"},
        {"name": "x", "network_advertiser_id": 5001, "offer_group_status": "gone"},
        {"name": "x", "network_advertiser_id": 5001, "colour": "red"},
    ],
)
def test_offer_group_validation(api, catalog, body):
    gid = catalog["network_offer_group_ids"][0]
    assert api.call("PUT", f"/networks/offergroups/{gid}", json=body).status_code == 400


def test_offer_group_unknown_id_is_404(api):
    assert (
        api.call(
            "PUT", "/networks/offergroups/999999", json={"name": "x", "network_advertiser_id": 5001}
        ).status_code
        == 404
    )


def test_offer_put(api, catalog, sandbox):
    oid = catalog["network_offer_ids"][0]
    adv = catalog["offers"][str(oid)]["network_advertiser_id"]
    body = {
        "name": "New name",
        "offer_status": "active",
        "network_advertiser_id": adv,
        "destination_url": "https://x.example/?t={transaction_id}",
        "currency_id": "EUR",
        "visibility": "public",
        "payout_revenue": [
            {
                "payout_type": "cpa",
                "payout_amount": 5,
                "revenue_type": "rpa",
                "revenue_amount": 8,
                "is_default": True,
            }
        ],
    }
    rec = api.call("PUT", f"/networks/offers/{oid}", json=body).json()
    assert rec["network_offer_id"] == oid
    assert rec["name"] == "New name"
    assert rec["currency_id"] == "EUR"
    assert rec["payout_revenue"][0]["payout_amount"] == 5
    assert rec["relationship"]["payout_revenue"]["total"] == 1
    assert rec["relationship"]["advertiser"]["network_advertiser_id"] == adv
    assert sandbox.objects("offers")[str(oid)]["name"] == "New name"
    bad = {**body, "payout_revenue": [{**body["payout_revenue"][0], "is_default": False}]}
    assert api.call("PUT", f"/networks/offers/{oid}", json=bad).status_code == 400
    assert api.call("PUT", "/networks/offers/1", json=body).status_code == 404


def test_scrub_rate_creation(api, catalog, sandbox):
    body = {
        "network_offer_id": catalog["network_offer_ids"][0],
        "network_affiliate_id": catalog["network_affiliate_ids"][0],
        "name": "Scrub 10",
        "custom_setting_status": "active",
        "scrub_rate_percentage": 10,
        "scrub_rate_status": "pending",
        "variables": [{"comparison_method": "equals", "variable": "sub1", "variable_value": "a"}],
    }
    a = api.call("POST", "/networks/custom/scrubrate", json=body).json()
    b = api.call("POST", "/networks/custom/scrubrate", json=body).json()
    assert a["network_custom_scrub_rate_setting_id"] != b["network_custom_scrub_rate_setting_id"]
    assert a["relationship"]["variables"]["total"] == 1
    assert a["relationship"]["offer"]["network_offer_id"] == body["network_offer_id"]
    assert len(sandbox.objects("custom_scrub_rates")) == 2
    for pct in (-1, 100.5, "10"):
        assert (
            api.call(
                "POST", "/networks/custom/scrubrate", json={**body, "scrub_rate_percentage": pct}
            ).status_code
            == 400
        )
    for edge in (0, 100):
        assert (
            api.call(
                "POST", "/networks/custom/scrubrate", json={**body, "scrub_rate_percentage": edge}
            ).status_code
            == 200
        )
    assert (
        api.call(
            "POST", "/networks/custom/scrubrate", json={**body, "scrub_rate_status": "approved"}
        ).status_code
        == 400
    )


def test_tracking_domain_rule_specific_offer_wins(api, catalog):
    fid = catalog["network_affiliate_ids"][0]
    td = catalog["network_tracking_domain_ids"][1]
    oid = catalog["network_offer_ids"][0]
    body = {
        "network_affiliate_id": fid,
        "network_tracking_domain_id": td,
        "is_apply_all_offers": True,
        "network_offer_id": oid,
    }
    rec = api.call("PUT", f"/networks/affiliates/{fid}/trackingdomains", json=body).json()
    assert rec["is_apply_all_offers"] is False
    assert rec["network_offer_id"] == oid
    assert rec["relationship"]["offer"]["network_offer_id"] == oid
    assert rec["relationship"]["tracking_domain"]["network_tracking_domain_id"] == td
    again = api.call("PUT", f"/networks/affiliates/{fid}/trackingdomains", json=body).json()
    assert (
        again["network_affiliate_tracking_domain_id"] == rec["network_affiliate_tracking_domain_id"]
    )
    all_offers = api.call(
        "PUT", f"/networks/affiliates/{fid}/trackingdomains", json={**body, "network_offer_id": 0}
    ).json()
    assert all_offers["is_apply_all_offers"] is True
    assert "offer" not in all_offers["relationship"]
    assert api.call("PUT", "/networks/affiliates/1/trackingdomains", json=body).status_code == 404
    assert (
        api.call(
            "PUT",
            f"/networks/affiliates/{fid}/trackingdomains",
            json={**body, "network_tracking_domain_id": 1},
        ).status_code
        == 400
    )


def _urls(catalog, n=2):
    oid = catalog["network_offer_ids"][0]
    return oid, catalog["offers"][str(oid)]["network_offer_url_ids"][:n]


def _apply(api, oid, ids, *fields):
    return api.call(
        "PATCH",
        "/networks/patch/offerurls/apply",
        json={"network_offer_id": oid, "network_offer_url_ids": ids, "fields": list(fields)},
    )


def test_offer_url_bulk_edit_overwrite_and_replace(api, catalog, sandbox):
    oid, ids = _urls(catalog)
    before = api.call("GET", f"/networks/offerurls/{ids[0]}").json()
    resp = _apply(
        api,
        oid,
        ids,
        {"field_type": "url_status", "field_value": "paused", "operator": "overwrite"},
        {"field_type": "name", "field_value": "Renamed", "operator": "overwrite"},
        {
            "field_type": "destination_url_replace",
            "field_value": {"find": "https://", "replace": "http://"},
            "operator": "overwrite",
        },
    )
    assert resp.json() == {"result": True}
    for uid in ids:
        rec = api.call("GET", f"/networks/offerurls/{uid}").json()
        assert rec["url_status"] == "paused"
        assert rec["name"] == "Renamed"
        assert rec["destination_url"].startswith("http://")
    assert before["url_status"] == "active"
    assert set(sandbox.objects("offer_urls")) == {str(i) for i in ids}


def test_offer_url_bulk_edit_multi_value_operators(api, catalog):
    oid, ids = _urls(catalog, 1)
    affs = catalog["network_affiliate_ids"]
    url = f"/networks/offerurls/{ids[0]}"

    def op(operator, value):
        resp = _apply(
            api,
            oid,
            ids,
            {"field_type": "network_affiliate_ids", "field_value": value, "operator": operator},
        )
        assert resp.status_code == 200, resp.text
        return api.call("GET", url).json()["network_affiliate_ids"]

    assert op("overwrite", affs[:2]) == affs[:2]
    assert op("append", [affs[2], affs[0]]) == affs[:3]
    assert op("delete", [affs[1]]) == [affs[0], affs[2]]
    assert op("clear", None) == []


@pytest.mark.parametrize("operator", ["append", "delete", "clear"])
def test_offer_url_single_value_fields_reject_multi_value_operators(api, catalog, operator):
    oid, ids = _urls(catalog, 1)
    resp = _apply(
        api, oid, ids, {"field_type": "url_status", "field_value": "paused", "operator": operator}
    )
    assert resp.status_code == 400
    assert api.call("GET", f"/networks/offerurls/{ids[0]}").json()["url_status"] == "active"


def test_offer_url_bulk_edit_rejects_urls_of_other_offers(api, catalog):
    oid, _ = _urls(catalog)
    other = catalog["offers"][str(catalog["network_offer_ids"][1])]["network_offer_url_ids"]
    resp = _apply(
        api,
        oid,
        other,
        {"field_type": "url_status", "field_value": "paused", "operator": "overwrite"},
    )
    assert resp.status_code == 400


def test_channel_put_needs_all_fields(api, catalog, sandbox):
    cid = catalog["network_channel_ids"][0]
    rec = api.call(
        "PUT", f"/networks/channels/{cid}", json={"name": "Paid search", "status": "inactive"}
    ).json()
    assert rec["name"] == "Paid search"
    assert rec["status"] == "inactive"
    assert rec["network_channel_id"] == cid
    assert (
        api.call("PUT", f"/networks/channels/{cid}", json={"name": "only name"}).status_code == 400
    )
    assert (
        api.call("PUT", f"/networks/channels/{cid}", json={"status": "active"}).status_code == 400
    )
    assert (
        api.call("PUT", "/networks/channels/1", json={"name": "a", "status": "active"}).status_code
        == 404
    )
    assert sandbox.objects("channels")[str(cid)]["status"] == "inactive"


def test_category_creation(api, sandbox):
    a = api.call("POST", "/networks/categories", json={"name": "Health", "status": "active"}).json()
    b = api.call("POST", "/networks/categories", json={"name": "Pets", "status": "inactive"}).json()
    assert a["network_category_id"] != b["network_category_id"]
    assert b["status"] == "inactive"
    assert (
        api.call(
            "POST", "/networks/categories", json={"name": "X", "status": "deleted"}
        ).status_code
        == 400
    )
    assert len(sandbox.objects("categories")) == 2
    assert a["network_category_id"] in sandbox.catalog()["network_category_ids"]


def test_reset_clears_writes(api, catalog, sandbox):
    cid = catalog["network_channel_ids"][0]
    api.call("PUT", f"/networks/channels/{cid}", json={"name": "x", "status": "inactive"})
    sandbox.reset()
    assert sandbox.objects("channels") == {}
