"""POST /affiliates/reporting/entity/table: columns rule, own data only, the 10,000-row cap."""

from __future__ import annotations

import pytest

from tests.support.sandbox_api import day_body

TABLE = "/affiliates/reporting/entity/table"
REPORTING = set(
    [
        "imp",
        "total_click",
        "unique_click",
        "invalid_click",
        "duplicate_click",
        "ctr",
        "cv",
        "view_through_cv",
        "event",
        "cvr",
        "evr",
        "rpc",
        "rpm",
        "revenue",
        "redirect_traffic_revenue",
        "on_hold_conversion_count",
        "on_hold_potential_revenue",
    ]
)


def _aff(sandbox):
    fid, key = next(iter(sandbox.keys["affiliate"].items()))
    return int(fid), key


def _table(api, key, day, columns, **extra):
    body = day_body(day, columns=[{"column": c} for c in columns], **extra)
    return api.call("POST", TABLE, key=key, json=body)


def test_rows_have_columns_and_reporting(api, sandbox, day):
    _, key = _aff(sandbox)
    resp = _table(api, key, day, ["offer", "date"])
    assert resp.status_code == 200
    table = resp.json()["table"]
    assert "paging" not in resp.json()
    assert table
    for row in table:
        assert [c["column_type"] for c in row["columns"]] == ["offer", "date"]
        assert all(set(c) == {"column_type", "id", "label"} for c in row["columns"])
        assert set(row["reporting"]) == REPORTING
        assert row["columns"][1]["id"] == day


def test_own_data_only_and_consistent_with_the_conversion_report(api, sandbox, day):
    fid, key = _aff(sandbox)
    table = _table(api, key, day, ["offer"]).json()["table"]
    rows = api.all_conversions(day_body(day, show_events=True))
    mine = [r for r in rows if r["relationship"]["affiliate"]["network_affiliate_id"] == fid]
    assert len(mine) < len(rows)
    approved = [r for r in mine if not r["is_event"] and r["status"] == "approved"]
    events = [r for r in mine if r["is_event"]]
    pending = [r for r in mine if r["status"] == "pending"]
    assert sum(t["reporting"]["cv"] for t in table) == len(approved)
    assert sum(t["reporting"]["event"] for t in table) == len(events)
    assert sum(t["reporting"]["on_hold_conversion_count"] for t in table) == len(pending)
    assert sum(t["reporting"]["revenue"] for t in table) == pytest.approx(
        sum(r["payout"] for r in approved + events), abs=0.05
    )
    offers = {r["relationship"]["offer"]["network_offer_id"] for r in mine}
    assert {int(t["columns"][0]["id"]) for t in table} == offers


def test_column_rules(api, sandbox, day):
    _, key = _aff(sandbox)
    ten = [
        "offer",
        "advertiser",
        "country",
        "platform",
        "device_type",
        "sub1",
        "sub2",
        "sub3",
        "sub4",
        "hour",
    ]
    assert _table(api, key, day, ten).status_code == 200
    assert _table(api, key, day, [*ten, "sub5"]).status_code == 400
    assert _table(api, key, day, []).status_code == 400
    assert _table(api, key, day, ["offer", "date", "hour"]).status_code == 400
    assert _table(api, key, day, ["planet"]).status_code == 400
    for time_col in ("hour", "date", "week", "month", "year"):
        assert _table(api, key, day, [time_col]).status_code == 200


def test_network_key_is_out_of_realm(api, day):
    resp = api.call("POST", TABLE, json=day_body(day, columns=[{"column": "offer"}]))
    assert resp.status_code == 403


def test_filters_narrow_the_table(api, sandbox, day):
    _, key = _aff(sandbox)
    full = _table(api, key, day, ["country"]).json()["table"]
    country = full[0]["columns"][0]["id"]
    only = _table(
        api,
        key,
        day,
        ["country"],
        query={"filters": [{"resource_type": "country", "filter_id_value": country}]},
    ).json()["table"]
    assert [r["columns"][0]["id"] for r in only] == [country]
    assert only[0]["reporting"] == full[0]["reporting"]


def test_table_is_cut_at_10000_rows(api, sandbox):
    sandbox.reset(affiliates=1, offers=1, advertisers=1, conversions_per_day=20000, days=1)
    day = sandbox.catalog()["last_date"]
    _, key = _aff(sandbox)
    table = _table(api, key, day, ["sub2"]).json()["table"]
    assert len(table) == 10_000
    small = _table(api, key, day, ["country"]).json()["table"]
    assert len(small) < 10_000


NETWORK_TABLE = "/networks/reporting/entity/table"


def test_network_table_is_the_network_keys_and_takes_the_affiliate_column(api, sandbox, day):
    body = day_body(day, columns=[{"column": "affiliate"}, {"column": "offer"}])
    resp = api.call("POST", NETWORK_TABLE, json=body)
    assert resp.status_code == 200, resp.text
    table = resp.json()["table"]
    affiliates = {row["columns"][0]["id"] for row in table}
    assert len(affiliates) > 1  # every affiliate, not one
    # An affiliate's key may not call it (network portal only).
    _, key = _aff(sandbox)
    assert api.call("POST", NETWORK_TABLE, key=key, json=body).status_code in (401, 403, 404)
    # The affiliate column is the network table's only: the affiliate table refuses it.
    assert api.call("POST", TABLE, key=key, json=body).status_code == 400


def test_network_table_follows_a_status_change(api, sandbox, day):
    body = day_body(day, columns=[{"column": "affiliate"}, {"column": "offer"}])
    before = {
        tuple(c["id"] for c in row["columns"]): row["reporting"]
        for row in api.call("POST", NETWORK_TABLE, json=body).json()["table"]
    }
    held = [r for r in api.all_conversions(day_body(day)) if r["status"] == "pending"]
    assert held
    target = held[0]
    rel = target["relationship"]
    ohid = rel["on_hold_snapshots"][0]["on_hold_conversion_id"]
    resp = api.call(
        "PATCH",
        "/networks/reporting/onhold",
        json={"on_hold_conversion_ids": [ohid], "status": "approved"},
    )
    assert resp.status_code == 200, resp.text
    after = {
        tuple(c["id"] for c in row["columns"]): row["reporting"]
        for row in api.call("POST", NETWORK_TABLE, json=body).json()["table"]
    }
    key = (str(rel["affiliate"]["network_affiliate_id"]), str(rel["offer"]["network_offer_id"]))
    assert after[key]["cv"] == before[key]["cv"] + 1
    assert after[key]["on_hold_conversion_count"] == before[key]["on_hold_conversion_count"] - 1
    assert round(after[key]["payout"] - before[key]["payout"], 2) == target["payout"]
    others = {k: v for k, v in after.items() if k != key}
    assert others == {k: v for k, v in before.items() if k != key}


# --- the public rate-limiting guide's columns, sent by third-party clients ---------------------

GUIDE_COLUMNS = ("offer_url", "source_id", "adv1", "adv2", "adv3", "adv4", "adv5", "event_name")


@pytest.mark.parametrize("path", [TABLE, NETWORK_TABLE])
def test_the_guides_columns_are_accepted_and_group_the_records(api, sandbox, day, path):
    fid, aff_key = _aff(sandbox)
    key = aff_key if path == TABLE else "network"
    for column in GUIDE_COLUMNS:
        resp = api.call("POST", path, key=key, json=day_body(day, columns=[{"column": column}]))
        assert resp.status_code == 200, (column, resp.text)
        assert {row["columns"][0]["column_type"] for row in resp.json()["table"]} == {column}
    # The groups are the records' values: offer URLs by id with their names, event names.
    records = api.all_conversions(day_body(day, show_events=True))
    if path == TABLE:
        records = [
            r for r in records if r["relationship"]["affiliate"]["network_affiliate_id"] == fid
        ]
    urls = {
        (
            str(r["relationship"]["offer_url"]["network_offer_url_id"]),
            r["relationship"]["offer_url"]["name"],
        )
        for r in records
    }
    body = day_body(day, columns=[{"column": "offer_url"}])
    table = api.call("POST", path, key=key, json=body).json()["table"]
    assert {(row["columns"][0]["id"], row["columns"][0]["label"]) for row in table} == urls
    body = day_body(day, columns=[{"column": "event_name"}])
    table = api.call("POST", path, key=key, json=body).json()["table"]
    by_name = {row["columns"][0]["id"]: row["reporting"]["event"] for row in table}
    events = [r["event"] for r in records if r["is_event"]]
    assert by_name.get("", 0) == 0  # base conversions carry no event name
    assert {n: c for n, c in by_name.items() if n} == {n: events.count(n) for n in set(events)}


def test_the_guides_columns_count_against_the_granular_quota(api, sandbox, day):
    sandbox.set_quota(granular_per_window=len(GUIDE_COLUMNS), granular_window_s=600)
    for column in GUIDE_COLUMNS:
        body = day_body(day, columns=[{"column": column}])
        assert api.call("POST", NETWORK_TABLE, json=body).status_code == 200, column
    body = day_body(day, columns=[{"column": "adv1"}])
    refused = api.call("POST", NETWORK_TABLE, json=body)
    assert refused.status_code == 429
    assert "Granular" in refused.json()["Error"]


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ("offer", '"offer"'),
        (7, "7"),
        ({"name": "offer"}, '{"name":"offer"}'),
        ({"column": None}, '{"column":null}'),
        ({"column": "planet"}, "'planet'"),
    ],
)
@pytest.mark.parametrize("path", [TABLE, NETWORK_TABLE])
def test_a_bad_column_item_is_400_naming_it(api, sandbox, day, path, item, named):
    key = _aff(sandbox)[1] if path == TABLE else "network"
    resp = api.call("POST", path, key=key, json=day_body(day, columns=[item]))
    assert resp.status_code == 400
    message = resp.json()["error"]
    assert named in message
    assert "None" not in message
