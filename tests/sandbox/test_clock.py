"""The sandbox's clock (issue 25): no record later than it is served, by any read.

And ``/meta/*`` answers without a key, as the public metadata reference documents.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from affiliate_network_sandbox.__main__ import build_parser, config_from_args
from affiliate_network_sandbox.testing import SandboxAdminError

#: The data's timezone in these tests (America/New_York): not UTC, so local and UTC days differ.
TZ_ID = 80
TZ = zoneinfo.ZoneInfo("America/New_York")
TABLE = "/affiliates/reporting/entity/table"


def _local(day: str, hh: int, mm: int) -> dt.datetime:
    d = dt.date.fromisoformat(day)
    return dt.datetime(d.year, d.month, d.day, hh, mm, tzinfo=TZ)


def _report(api, day: str, **extra) -> list[dict]:
    body = {"from": day, "to": day, "timezone_id": TZ_ID, "show_events": True, **extra}
    return api.all_conversions(body)


def _search(api, day: str, search_type: str, values: list[str], first: str = "") -> dict:
    body = {
        "from": first or day,
        "to": day,
        "timezone_id": TZ_ID,
        "show_events": True,
        "query": {"search_terms": [{"search_type": search_type, "value": v} for v in values]},
    }
    resp = api.conversions(body, page_size=2000)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.fixture
def ny_day(sandbox) -> str:
    """The data's last day ("today"), with New York as the network's reporting timezone."""
    sandbox.reset(reporting_timezone_id=TZ_ID)
    return sandbox.catalog()["last_date"]


def test_no_record_later_than_the_clock_in_any_read(sandbox, api, ny_day):
    day = ny_day
    clock = _local(day, 8, 37)
    cut = int(clock.timestamp())
    # Records the clock has not reached yet, read while the clock is past the whole day.
    sandbox.set_clock(_local(day, 23, 59) + dt.timedelta(hours=1))
    later = [r for r in _report(api, day) if r["conversion_unix_timestamp"] > cut]
    future = next(
        r
        for r in later
        if not r["is_event"]
        and r["relationship"]["events_count"] == 1
        and r["relationship"]["on_hold_snapshots"]
    )
    future_oh = future["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]

    assert sandbox.set_clock(clock)["frozen"] is True
    assert sandbox.clock()["unix"] == cut
    # Conversion report, both date forms, conversions and events, plain and filtered.
    rows = _report(api, day)
    assert rows, "the morning has traffic"
    assert max(r["conversion_unix_timestamp"] for r in rows) <= cut
    assert len(later) > len(rows), "most of the day is still to come at 08:37"
    timed = api.all_conversions(
        {
            "from": f"{day} 00:00:00",
            "to": f"{day} 23:59:59",
            "timezone_id": TZ_ID,
            "show_events": True,
        }
    )
    assert [r["conversion_id"] for r in timed] == [r["conversion_id"] for r in rows]
    offer = rows[0]["relationship"]["offer"]["network_offer_id"]
    filtered = _report(
        api, day, query={"filters": [{"resource_type": "offer", "filter_id_value": str(offer)}]}
    )
    assert filtered
    assert max(r["conversion_unix_timestamp"] for r in filtered) <= cut
    # The admin truth agrees with the report: same count, planted ids among the served ones.
    truth = sandbox.truth(day, day, timezone_id=TZ_ID)
    assert truth["total"] == len(rows)
    served = {r["conversion_id"] for r in rows}
    planted = sandbox.planted(day, day, timezone_id=TZ_ID)
    assert {i for ids in planted["conversion_ids"].values() for i in ids} <= served
    assert set(planted["clean_on_hold_conversion_ids"]) <= served
    # Id searches (the on-hold lookup the review uses) do not find a record still to come.
    for stype, value in (
        ("conversion_id", future["conversion_id"]),
        ("transaction_id", future["transaction_id"]),
        ("on_hold_conversion_id", future_oh),
    ):
        assert _search(api, day, stype, [value])["paging"]["total_count"] == 0, stype
    # Nor do the id endpoints: the record does not exist yet.
    flow = api.call("GET", f"/networks/reporting/transactions/{future['transaction_id']}/flowchart")
    assert flow.status_code == 404
    patch = api.call(
        "PATCH",
        "/networks/reporting/onhold",
        json={"on_hold_conversion_ids": [future_oh], "status": "rejected"},
    )
    assert patch.status_code == 404
    # The catalog's sample ids (newest first, by UTC day) are ids that exist now.
    sample = sandbox.catalog()["on_hold_conversion_ids"]
    first = (dt.date.fromisoformat(day) - dt.timedelta(days=2)).isoformat()
    found = _search(api, day, "on_hold_conversion_id", sample[:20], first)
    assert found["paging"]["total_count"] == 20
    # The aggregated (entity) table of an affiliate: no hour after 08 today, same totals.
    fid, key = next(iter(sandbox.keys["affiliate"].items()))
    body = {
        "from": day,
        "to": day,
        "timezone_id": TZ_ID,
        "columns": [{"column": "hour"}],
    }
    resp = api.call("POST", TABLE, key=key, json=body)
    assert resp.status_code == 200, resp.text
    table = resp.json()["table"]
    assert table
    assert max(int(row["columns"][0]["id"]) for row in table) <= 8
    mine = [r for r in rows if r["relationship"]["affiliate"]["network_affiliate_id"] == int(fid)]
    counted = sum(
        row["reporting"]["cv"]
        + row["reporting"]["event"]
        + row["reporting"]["on_hold_conversion_count"]
        for row in table
    )
    assert counted == len([r for r in mine if r["status"] != "rejected"])


def test_advancing_the_clock_one_hour_adds_exactly_that_hours_records(sandbox, api, ny_day):
    day = ny_day
    start = _local(day, 8, 0)
    t0 = int(start.timestamp())
    sandbox.set_clock(start)
    before = _report(api, day)
    hour = {"from": f"{day} 08:00:01", "to": f"{day} 09:00:00", "timezone_id": TZ_ID}
    assert sandbox.truth(hour["from"], hour["to"], timezone_id=TZ_ID)["total"] == 0
    # A status written now stays written as time passes.
    held = next(r for r in before if r["status"] == "pending")
    oh_id = held["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]
    patch = api.call(
        "PATCH",
        "/networks/reporting/onhold",
        json={"on_hold_conversion_ids": [oh_id], "status": "rejected"},
    )
    assert patch.status_code == 200, patch.text

    assert sandbox.advance_clock(3600)["unix"] == t0 + 3600
    after = _report(api, day)
    old = {r["conversion_id"] for r in before}
    assert old <= {r["conversion_id"] for r in after}
    new = [r for r in after if r["conversion_id"] not in old]
    assert all(t0 < r["conversion_unix_timestamp"] <= t0 + 3600 for r in new)
    truth = sandbox.truth(hour["from"], hour["to"], timezone_id=TZ_ID)
    assert truth["total"] == len(new) > 0
    window = api.all_conversions({**hour, "show_events": True})
    assert {r["conversion_id"] for r in window} == {r["conversion_id"] for r in new}
    assert next(r for r in after if r["conversion_id"] == held["conversion_id"])["status"] == (
        "rejected"
    )


def test_meta_timezones_answer_without_a_key(api):
    for key in (None, "not-a-key", "revoked"):
        resp = api.call("GET", "/meta/timezones", key=key)
        assert resp.status_code == 200, (key, resp.text)
        utc = [t for t in resp.json()["timezones"] if t["timezone_id"] == 67]
        assert [t["timezone"] for t in utc] == ["UTC"]
    assert api.call("GET", "/meta/timezones", key=None, eu=True).status_code == 200
    # The other portals still need their key.
    assert api.call("GET", "/networks", key=None).status_code == 401


def test_clock_admin_api_and_reset(sandbox):
    startup = sandbox.clock()
    assert startup["frozen"] is True  # the session sandbox is frozen after its data
    sandbox.set_clock("2026-03-08T06:59:00-05:00")
    assert sandbox.clock()["now"] == "2026-03-08T11:59:00+00:00"
    assert sandbox.advance_clock(60)["now"] == "2026-03-08T12:00:00+00:00"
    for bad in ({"now": "2026-03-08T06:59:00"}, {"advance_s": -1}, {"advance_s": "1"}, {}):
        with pytest.raises(SandboxAdminError, match="400"):
            sandbox.admin("PUT", "/_sandbox/clock", json=bad)
    assert sandbox.set_clock(None)["frozen"] is False
    with pytest.raises(SandboxAdminError, match="advance_s moves a frozen clock"):
        sandbox.advance_clock(1)
    sandbox.reset()
    assert sandbox.clock() == startup


def test_cli_clock_flag_sets_the_data_day():
    args = build_parser().parse_args(["--clock", "2026-03-10T08:37:00+00:00"])
    assert config_from_args(args).end_date == dt.date(2026, 3, 10)
    args = build_parser().parse_args(["--clock", "2026-03-10T23:30:00-05:00", "--days", "3"])
    assert config_from_args(args).end_date == dt.date(2026, 3, 11)
    args = build_parser().parse_args(
        ["--clock", "2026-03-10T08:37:00Z", "--end-date", "2026-03-01"]
    )
    assert config_from_args(args).end_date == dt.date(2026, 3, 1)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--clock", "2026-03-10 08:37"])
