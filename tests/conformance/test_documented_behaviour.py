"""Conformance: the sandbox and the client against the public documentation's shapes.

Separate from the sandbox's own tests: each test replays a documented request (our fixtures in
``examples.py``) against the sandbox, reads the answer with the client (hook, operators) and
checks what the documentation says. A drift of the sandbox or of the client fails here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import zoneinfo
from collections.abc import Iterator

import pendulum
import pytest
from airflow.sdk.execution_time.context import OutletEventAccessors

from affiliate_network.api.timezones import TIMEZONES, compare_with_api
from affiliate_network.exceptions import InvalidRequestError, ReportRowLimitError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.conversion_report import ConversionReportOperator
from affiliate_network.partitions.manifest import read_manifest
from affiliate_network.partitions.read import read_partition
from tests.conformance import examples

FAST = {"max_attempts": 2, "base_delay": 0.005, "max_delay": 0.01, "jitter": 0.0}


@pytest.fixture
def hook(network_conn) -> Iterator[AffiliateNetworkHook]:
    h = AffiliateNetworkHook(network_conn, **FAST)
    try:
        yield h
    finally:
        h.close()


@pytest.fixture
def day(sandbox) -> dt.date:
    """A full day of data that has a full next day too (boundary checks read both)."""
    return dt.date.fromisoformat(sandbox.catalog()["last_date"]) - dt.timedelta(days=2)


@contextlib.contextmanager
def _affiliate_hook(sandbox, make_connection, conn_id: str) -> Iterator[AffiliateNetworkHook]:
    """A hook on the affiliate portal of the sandbox's first affiliate, closed on exit."""
    affiliate = sorted(sandbox.keys["affiliate"], key=int)[0]
    conn = make_connection(
        conn_id,
        host=sandbox.base_url,
        key=sandbox.keys["affiliate"][affiliate],
        portal="affiliate",
    )
    h = AffiliateNetworkHook(conn, **FAST)
    try:
        yield h
    finally:
        h.close()


def _utc_seconds(moment: str, day: dt.date) -> tuple[int, int]:
    """``"D 23:30"`` / ``"D+1 03:30"`` -> the UTC half-hour ``[t, t + 1800)`` it names."""
    which, hhmm = moment.split(" ")
    base = day + dt.timedelta(days=1 if which == "D+1" else 0)
    hh, mm = (int(x) for x in hhmm.split(":"))
    start = dt.datetime(base.year, base.month, base.day, hh, mm, tzinfo=dt.UTC)
    return int(start.timestamp()), int(start.timestamp()) + 1800


def _pull_ids(hook: AffiliateNetworkHook, day: dt.date, tz_id: int) -> dict[str, int]:
    return {
        r["conversion_id"]: r["conversion_unix_timestamp"]
        for r in hook.iter_conversions(from_date=day, to_date=day, timezone_id=tz_id)
    }


@pytest.mark.parametrize(("moment", "tz_id", "lands_in"), examples.BOUNDARY_EXAMPLES)
def test_documented_day_boundary_examples(hook, day, moment, tz_id, lands_in) -> None:
    """The "Timezones" guide's examples: 23:30 UTC and 03:30 UTC next day, under 67 and 80."""
    t0, t1 = _utc_seconds(moment, day)
    target = day + dt.timedelta(days=1 if lands_in == "D+1" else 0)
    other = day + dt.timedelta(days=0 if lands_in == "D+1" else 1)
    landed = _pull_ids(hook, target, tz_id)
    elsewhere = _pull_ids(hook, other, tz_id)
    in_slot = {cid for cid, ts in {**landed, **elsewhere}.items() if t0 <= ts < t1}
    assert in_slot, f"no sandbox conversion in the half hour {moment}: widen the data"
    assert in_slot <= set(landed)
    assert not in_slot & set(elsewhere)


@pytest.mark.parametrize("tz_id", [67, 80, 1, 16, 29, 99])
def test_every_record_of_a_day_lies_between_that_zones_midnights(hook, day, tz_id) -> None:
    tz = zoneinfo.ZoneInfo(TIMEZONES[tz_id])
    start = dt.datetime(day.year, day.month, day.day, tzinfo=tz)
    nxt = day + dt.timedelta(days=1)
    end = dt.datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz)
    stamps = _pull_ids(hook, day, tz_id).values()
    assert stamps
    assert all(start.timestamp() <= ts < end.timestamp() for ts in stamps)


#: New York's fall-back day of 2026 (a fixed day: time is an input; the sandbox serves any).
NEW_YORK_FALL_BACK = dt.date(2026, 11, 1)


def test_dst_day_in_new_york_is_cut_at_local_midnights(make_connection) -> None:
    from affiliate_network_sandbox.testing import start_sandbox

    change = NEW_YORK_FALL_BACK
    end = change + dt.timedelta(days=1)
    with start_sandbox(seed=3, end_date=end.isoformat(), days=3) as sb:
        conn = make_connection("afn_dst", host=sb.base_url, key=sb.keys["network"])
        h = AffiliateNetworkHook(conn, **FAST)
        try:
            stamps = list(_pull_ids(h, change, 80).values())
        finally:
            h.close()
    tz = zoneinfo.ZoneInfo("America/New_York")
    start = dt.datetime(change.year, change.month, change.day, tzinfo=tz).timestamp()
    nxt = change + dt.timedelta(days=1)
    stop = dt.datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz).timestamp()
    assert stop - start in (23 * 3600, 25 * 3600)  # the day really is a DST day
    assert stamps
    assert all(start <= ts < stop for ts in stamps)
    assert min(stamps) - start < 3600
    assert stop - max(stamps) < 3600


def test_omitted_timezone_uses_the_networks_reporting_timezone(hook, day, sandbox) -> None:
    info = hook.network_info()
    default_id = info["timezone_id"]
    assert default_id in TIMEZONES
    body = examples.conversion_report_request(day.isoformat())
    body.pop("timezone_id")
    without = hook.request("POST", "/networks/reporting/conversions", json=body)
    body["timezone_id"] = default_id
    explicit = hook.request("POST", "/networks/reporting/conversions", json=body)
    assert without["paging"]["total_count"] == explicit["paging"]["total_count"] > 0


def test_the_datetime_form_of_from_and_to_narrows_to_those_seconds(hook, day) -> None:
    body = examples.timed_conversion_report_request(day.isoformat(), "06:00:00", "11:59:59")
    rows = hook.request(
        "POST", "/networks/reporting/conversions", json=body, params={"page_size": 2000}
    )["conversions"]
    t0 = dt.datetime(day.year, day.month, day.day, 6, tzinfo=dt.UTC).timestamp()
    assert rows
    assert all(t0 <= r["conversion_unix_timestamp"] < t0 + 6 * 3600 for r in rows)


def test_days_older_than_the_365_day_history_are_an_error(hook, sandbox) -> None:
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    old = last - dt.timedelta(days=366)
    with pytest.raises(InvalidRequestError, match="365"):
        list(hook.iter_conversions(from_date=old, to_date=old, timezone_id=67))


@pytest.mark.parametrize("tz_id", [0, 100, -1])
def test_ids_outside_the_table_are_refused(hook, day, tz_id) -> None:
    with pytest.raises(InvalidRequestError, match="timezone_id"):
        list(hook.iter_conversions(from_date=day, to_date=day, timezone_id=tz_id))


def test_timezone_lookup_answers_the_documented_table_to_any_portal(
    hook, sandbox, make_connection
) -> None:
    records = hook.timezones()
    assert records
    assert all(set(r) == examples.TIMEZONE_RECORD_FIELDS for r in records)
    assert compare_with_api(records) == []
    with _affiliate_hook(sandbox, make_connection, "afn_aff") as h:
        assert h.timezones() == records


def test_raw_conversion_amounts_are_not_converted(hook, day) -> None:
    """Documented: raw reports come in the offer's currency, whatever currency_id asks."""
    usd = list(hook.iter_conversions(from_date=day, to_date=day, timezone_id=67, page_size=50))
    eur = list(
        hook.iter_conversions(
            from_date=day, to_date=day, timezone_id=67, currency_id="EUR", page_size=50
        )
    )
    assert [(r["conversion_id"], r["payout"]) for r in usd] == [
        (r["conversion_id"], r["payout"]) for r in eur
    ]


def test_rejecting_status_is_rejected(hook, day) -> None:
    """ "On-hold conversion status": ``approved`` or ``rejected``; answers ``{result: true}``."""
    held = [
        r
        for r in hook.iter_conversions(from_date=day, to_date=day, timezone_id=67)
        if r["status"] == "pending"
    ][:2]
    ids = [r["relationship"]["on_hold_snapshots"][-1]["on_hold_conversion_id"] for r in held]
    assert hook.request(
        "PATCH", "/networks/reporting/onhold", json=examples.onhold_request(ids, "rejected")
    ) == {"result": True}
    after = {
        r["conversion_id"]: r["status"]
        for r in hook.iter_conversions(from_date=day, to_date=day, timezone_id=67)
    }
    assert {after[r["conversion_id"]] for r in held} == {"rejected"}


def test_entity_table_example_is_accepted(sandbox, make_connection, day) -> None:
    with _affiliate_hook(sandbox, make_connection, "afn_aff2") as h:
        for tz_id in (67, 80):
            doc = h.request(
                "POST",
                "/affiliates/reporting/entity/table",
                json=examples.entity_table_request(day.isoformat(), tz_id),
            )
            assert doc["table"]
            assert {c["column_type"] for row in doc["table"] for c in row["columns"]} == {
                "offer",
                "date",
            }
            assert {
                c["id"]
                for row in doc["table"]
                for c in row["columns"]
                if c["column_type"] == "date"
            } == {day.isoformat()}


def test_operator_lands_a_new_york_day_between_new_york_midnights(
    sandbox, network_conn, tmp_path, day
) -> None:
    """End to end: the report operator with a New York network lands exactly that local day."""
    op = ConversionReportOperator(
        task_id="pull",
        affiliate_network_conn_id=network_conn,
        network_timezone="America/New_York",
        base_path=str(tmp_path),
        hook_kwargs=FAST,
    )
    start = pendulum.datetime(day.year, day.month, day.day, tz="America/New_York")
    ctx = {
        "data_interval_start": start,
        "data_interval_end": start.add(days=1),
        "outlet_events": OutletEventAccessors(),
    }
    summary = op.execute(ctx)
    part = tmp_path / "conversions" / f"date={day.isoformat()}"
    manifest = read_manifest(part)
    assert manifest is not None
    assert manifest.request["timezone_id"] == 80
    assert manifest.request["timezone"] == "America/New_York"
    table = read_partition(part)
    # Landed as timestamp[UTC] (schema version 3): compare in Unix seconds.
    stamps = [ts.timestamp() for ts in table.column("conversion_unix_timestamp").to_pylist()]
    assert len(stamps) == summary["rows"] == sandbox.truth(day, day, timezone_id=80)["conversions"]
    lo, hi = start.int_timestamp, start.add(days=1).int_timestamp
    assert all(lo <= ts < hi for ts in stamps)


def test_hook_sends_the_timed_form_when_asked(hook, day) -> None:
    rows = list(
        hook.iter_conversions(
            from_date=f"{day} 06:00:00", to_date=f"{day} 11:59:59", timezone_id=67
        )
    )
    t0 = dt.datetime(day.year, day.month, day.day, 6, tzinfo=dt.UTC).timestamp()
    assert rows
    assert all(t0 <= r["conversion_unix_timestamp"] < t0 + 6 * 3600 for r in rows)
    with pytest.raises(InvalidRequestError, match="from_date must be a date or"):
        hook.iter_conversions(from_date=f"{day}T06:00", to_date=day, timezone_id=67)


def test_a_capped_entity_table_says_incomplete_results(sandbox, make_connection) -> None:
    # Public docs: the aggregated table holds at most 10,000 rows and a capped answer carries
    # ``incomplete_results: true``; the hook refuses such an answer instead of landing it.
    sandbox.reset(days=3, conversions_per_day=32_000, event_share=0.0)
    cat = sandbox.catalog()
    body = {"timezone_id": 67, "columns": [{"column": "sub2"}], "query": {"filters": []}}
    with _affiliate_hook(sandbox, make_connection, "afn_aff_cap") as h:
        whole = h.request(
            "POST",
            "/affiliates/reporting/entity/table",
            json={**body, "from": cat["first_date"], "to": cat["last_date"]},
        )
        assert whole["incomplete_results"] is True
        assert len(whole["table"]) == 10_000
        one_day = h.request(
            "POST",
            "/affiliates/reporting/entity/table",
            json={**body, "from": cat["last_date"], "to": cat["last_date"]},
        )
        assert len(one_day["table"]) < 10_000
        assert not one_day.get("incomplete_results")
        with pytest.raises(ReportRowLimitError, match="incomplete_results=True"):
            h.affiliate_entity_table(
                from_date=cat["first_date"],
                to_date=cat["last_date"],
                columns=["sub2"],
                timezone_id=67,
            )


def test_network_entity_table_example_counts_what_the_conversion_report_serves(hook, day) -> None:
    """The network key's aggregated report (public "Aggregated Data Reports"): one row per
    affiliate/offer couple with ``columns`` items ``{column_type, id, label}`` and ``reporting``
    metrics; ``cv`` counts the approved base conversions the conversion report serves, money
    sums the approved rows (conversions and events), on-hold counts the pending conversions."""
    from decimal import Decimal

    doc = hook.request(
        "POST",
        "/networks/reporting/entity/table",
        json=examples.network_entity_table_request(day.isoformat()),
    )
    assert doc["table"]
    expected: dict[tuple[str, str], dict[str, Decimal]] = {}
    for r in hook.iter_conversions(from_date=day, to_date=day, timezone_id=67, show_events=True):
        rel = r["relationship"]
        key = (str(rel["affiliate"]["network_affiliate_id"]), str(rel["offer"]["network_offer_id"]))
        cell = expected.setdefault(key, dict.fromkeys(("cv", "oh", "payout", "revenue"), Decimal()))
        if r["status"] == "approved":
            cell["cv"] += 0 if r["is_event"] else 1
            cell["payout"] += Decimal(str(r["payout"]))
            cell["revenue"] += Decimal(str(r["revenue"]))
        elif r["status"] == "pending":
            cell["oh"] += 1
    got = {}
    for row in doc["table"]:
        assert all(set(c) == {"column_type", "id", "label"} for c in row["columns"])
        assert [c["column_type"] for c in row["columns"]] == ["affiliate", "offer"]
        assert set(row["reporting"]) >= examples.NETWORK_REPORTING_METRICS
        m = row["reporting"]
        got[(row["columns"][0]["id"], row["columns"][1]["id"])] = {
            "cv": Decimal(m["cv"]),
            "oh": Decimal(m["on_hold_conversion_count"]),
            "payout": Decimal(str(m["payout"])),
            "revenue": Decimal(str(m["revenue"])),
        }
    assert got == expected
    # Through the client: the same rows, amounts as the Decimal of the number's text.
    import json

    assert hook.network_entity_table(
        from_date=day, to_date=day, columns=["affiliate", "offer"], timezone_id=67
    ) == json.loads(json.dumps(doc["table"]), parse_float=Decimal)


def test_a_capped_network_entity_table_is_refused(sandbox, network_conn) -> None:
    sandbox.reset(days=3, conversions_per_day=32_000, event_share=0.0)
    cat = sandbox.catalog()
    h = AffiliateNetworkHook(network_conn, **FAST)
    try:
        with pytest.raises(
            ReportRowLimitError, match=r"network entity table.*incomplete_results=True"
        ):
            h.network_entity_table(
                from_date=cat["first_date"],
                to_date=cat["last_date"],
                columns=["sub2"],
                timezone_id=67,
            )
    finally:
        h.close()
