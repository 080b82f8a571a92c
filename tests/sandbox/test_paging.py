"""Paging rules: query string only, default 1/50, max 2000, envelope, full coverage."""

from __future__ import annotations

import pytest

from affiliate_network_sandbox.testing import start_sandbox
from tests.support.sandbox_api import day_body


def test_default_page_is_1_with_50_rows(api, day):
    data = api.conversions(day_body(day)).json()
    assert data["paging"] == {"page": 1, "page_size": 50, "total_count": 500}
    assert len(data["conversions"]) == 50


def test_page_size_2000_is_allowed_and_2001_is_400(api, day):
    assert api.conversions(day_body(day), page_size=2000).status_code == 200
    resp = api.conversions(day_body(day), page_size=2001)
    assert resp.status_code == 400
    assert resp.json()["error"].startswith("Invalid parameters.")


@pytest.mark.parametrize(
    "params", [{"page": 0}, {"page_size": 0}, {"page": "x"}, {"page_size": -5}]
)
def test_bad_paging_values_are_400(api, day, params):
    assert api.conversions(day_body(day), **params).status_code == 400


def test_paging_in_body_is_ignored(api, day):
    data = api.conversions(day_body(day, page=3, page_size=7)).json()
    assert data["paging"] == {"page": 1, "page_size": 50, "total_count": 500}
    first = api.conversions(day_body(day)).json()["conversions"]
    assert data["conversions"] == first


def test_pages_cover_the_day_exactly_once(api, day, sandbox):
    seen = []
    for page in range(1, 12):
        data = api.conversions(day_body(day), page=page, page_size=47).json()
        seen.extend(c["conversion_id"] for c in data["conversions"])
    assert len(seen) == 500
    assert len(set(seen)) == 500
    assert sandbox.truth(day, day)["conversions"] == 500


def test_page_after_the_end_is_empty_with_total(api, day):
    data = api.conversions(day_body(day), page=99, page_size=50).json()
    assert data["conversions"] == []
    assert data["paging"]["total_count"] == 500


def test_pages_are_deterministic_across_calls(api, day):
    a = api.conversions(day_body(day), page=3, page_size=100).json()
    b = api.conversions(day_body(day), page=3, page_size=100).json()
    assert a == b


def test_pages_are_deterministic_across_a_restart(api, day, sandbox):
    page = api.conversions(day_body(day), page=2, page_size=30).json()
    # Same data config and same clock (a wall-clock restart would serve less of today).
    with start_sandbox(seed=42, end_date=day, clock=sandbox.clock()["now"]) as other:
        other_api = type(api)(other)
        again = other_api.conversions(day_body(day), page=2, page_size=30).json()
    assert again == page


def test_a_different_seed_gives_different_data(api, day, sandbox):
    before = api.conversions(day_body(day), page_size=5).json()["conversions"]
    sandbox.reset(seed=7)
    after = api.conversions(day_body(day), page_size=5).json()["conversions"]
    assert [c["conversion_id"] for c in before] != [c["conversion_id"] for c in after]


def test_timestamps_fall_inside_the_requested_timezone_window(api, day, sandbox):
    import datetime as dt
    import zoneinfo

    body = {"from": day, "to": day, "timezone_id": 16}  # Asia/Tokyo
    rows = api.all_conversions(body)
    tz = zoneinfo.ZoneInfo("Asia/Tokyo")
    assert rows
    for r in rows:
        local = dt.datetime.fromtimestamp(r["conversion_unix_timestamp"], tz).date().isoformat()
        assert local == day
    assert len(rows) == sandbox.truth(day, day, timezone_id=16)["conversions"]


def test_multi_day_window_totals_match_truth(api, catalog, sandbox):
    body = {"from": catalog["first_date"], "to": catalog["last_date"], "timezone_id": 80}
    total = api.conversions(body, page_size=1).json()["paging"]["total_count"]
    assert total == sandbox.truth(catalog["first_date"], catalog["last_date"], 80)["conversions"]
    # A New York window loses the first UTC hours of the first day and gains none after the end.
    assert 0 < total < 14 * 500


def test_other_paged_endpoints_use_the_same_rules(api):
    data = api.call("POST", "/networks/pixelstable", json={"page": 2, "page_size": 1}).json()
    assert data["paging"]["page"] == 1
    assert data["paging"]["page_size"] == 50
    one = api.call(
        "POST", "/networks/pixelstable", json={}, params={"page": 2, "page_size": 1}
    ).json()
    assert one["paging"] == {
        "page": 2,
        "page_size": 1,
        "total_count": data["paging"]["total_count"],
    }
    assert one["pixels"] == data["pixels"][1:2]
    assert (
        api.call(
            "POST", "/networks/tieredcommissions/table", json={}, params={"page_size": 2001}
        ).status_code
        == 400
    )
