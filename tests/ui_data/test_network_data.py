"""The network page's data library on files landed from the sandbox, against its truth."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from decimal import Decimal
from pathlib import Path

from affiliate_network.hooks._budget import FileStore
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.reports.reconcile import reconcile_day
from affiliate_network.ui.network_data import QuotaSource, quota_headroom, read_page
from tests.support.landed_history import land_days


def _land(network_conn: str, base: Path, first: dt.date, last: dt.date) -> None:
    land_days(network_conn, base, first, last)
    hook = AffiliateNetworkHook(network_conn)
    try:
        day = first
        while day <= last:
            reconcile_day(hook, str(base), day, on_mismatch="warn", log=logging.getLogger("t"))
            day += dt.timedelta(days=1)
    finally:
        hook.close()


def test_landed_days_match_the_sandbox_truth_per_status_and_currency(
    sandbox, network_conn: str, tmp_path: Path
) -> None:
    last = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    first = last - dt.timedelta(days=1)
    _land(network_conn, tmp_path, first, last)
    page = read_page(tmp_path, last=last, days=5).to_json()
    assert page["last"] == last.isoformat()
    assert page["problems"] == []
    shown = {d["date"]: d for d in page["days"]}
    assert [d for d, v in shown.items() if v["landed"]] == [first.isoformat(), last.isoformat()]
    for day in (first, last):
        truth = sandbox.truth_money(day.isoformat(), cells=False)
        entry = shown[day.isoformat()]
        for currency, money in truth["currencies"].items():
            for status, cell in money["conversions"].items():
                got = entry["by_status"].get(status, {})
                assert got.get("conversions", 0) == cell["count"], (day, currency, status)
                if cell["count"]:
                    # Conversions' payout apart from events' (the truth counts them apart too).
                    shown_payout = Decimal(got["payout"][currency])
                    assert shown_payout == Decimal(cell["payout"]), (day, currency, status)
        # Landed without events: compared by the report's conversion counts only (the report
        # sums both parts' money), so the day reconciles; the page shows the file's verdict.
        written = json.loads(
            (tmp_path / f"conversions/date={day}/_reconciliation.json").read_text()
        )
        rec = entry["reconciliation"]
        assert rec["reconciled"] is written["reconciled"] is True
        assert rec["differing_count"] == len(written["differing"]) == 0


#: Offers paying in four currencies (two decimals, none, three): the page must keep them apart.
CURRENCIES = ["USD", "EUR", "JPY", "KWD"]


def test_money_per_currency_equals_the_truth_and_never_adds_two_currencies(
    sandbox, make_connection, tmp_path: Path
) -> None:
    sandbox.reset(offer_currencies=CURRENCIES)  # this test's world; the fixture resets it after
    conn = make_connection(
        "affiliate_network_default", host=sandbox.base_url, key=sandbox.keys["network"]
    )
    last = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    land_days(conn, tmp_path, last, last, show_events=True)  # as the daily report DAG lands
    hook = AffiliateNetworkHook(conn)
    try:
        reconcile_day(hook, str(tmp_path), last, on_mismatch="fail", log=logging.getLogger("t"))
    finally:
        hook.close()
    entry = read_page(tmp_path, last=last, days=1).to_json()["days"][0]
    assert entry["reconciliation"]["reconciled"] is True
    truth = sandbox.truth_money(last.isoformat(), timezone_id=67, cells=False)["currencies"]
    assert len(truth) >= 3, truth.keys()  # a world of one currency would prove nothing
    shown: dict[str, Decimal] = {}
    for status, figures in entry["by_status"].items():
        assert figures["rows"] == figures["conversions"] + figures["events"], status
        for key in ("payout", "events_payout"):
            for currency, text in figures[key].items():
                shown[currency] = shown.get(currency, Decimal(0)) + Decimal(text)
        assert figures["conversions"] == sum(
            t["conversions"].get(status, {}).get("count", 0) for t in truth.values()
        ), status
    expected = {
        currency: Decimal(money["events"]["payout"])
        + sum((Decimal(c["payout"]) for c in money["conversions"].values()), Decimal(0))
        for currency, money in truth.items()
    }
    # Per currency to the minor unit (JPY none, KWD three): a sum of two currencies differs.
    assert shown == expected
    events = sum(f["events"] for f in entry["by_status"].values())
    assert events == sum(money["events"]["count"] for money in truth.values()) > 0


def test_quota_headroom_counts_the_rolling_window_only(tmp_path: Path) -> None:
    """Read from files the real file store wrote (its clock is this boot's monotonic one)."""
    for age in (4000.0, 10.0):
        store = FileStore(tmp_path, "abc", clock=lambda age=age: time.monotonic() - age)
        assert store.granular(1, 60, 10 * 3600.0)[0]
    (tmp_path / "bad.granular.json").write_text("{torn")
    rows = quota_headroom(
        [
            QuotaSource("a", "abc", 60, 3600.0, tmp_path),
            QuotaSource("b", "bad", 60, 3600.0, tmp_path),
            QuotaSource("c", "none", 5, 60.0, tmp_path),
        ]
    )
    assert [(r["network"], r["used"], r["left"]) for r in rows] == [
        ("a", 1, 59),
        ("b", None, None),
        ("c", 0, 5),
    ]


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_review_money_stays_per_currency_and_answers_name_the_person(tmp_path: Path) -> None:
    run = tmp_path / "onhold_review/affiliate_onhold_review/manual__2026-11-20T08_00_00_00_00"
    rows = [
        {"rule_id": "r1", "action": "review", "payout": "10.10", "currency_id": "USD",
         "on_hold_conversion_id": "a"},
        {"rule_id": "r1", "action": "review", "payout": "1000", "currency_id": "JPY",
         "on_hold_conversion_id": "b"},
        {"rule_id": "r2", "action": "reject", "payout": 2.5, "currency_id": "USD",
         "on_hold_conversion_id": "c", "reason": "dry run", "applied": False},
    ]  # fmt: skip
    _jsonl(run / "decisions-attempt-1.jsonl", rows)
    day = dt.date(2026, 11, 20)
    review = read_page(tmp_path, last=day, today=day).review
    (shown,) = review["runs"]
    assert shown["decided_money"] == {
        "reject": {"USD": "2.5"},
        "review": {"JPY": "1000", "USD": "10.1"},
    }
    assert shown["outcome"] == "dry_run"
    assert review["waiting_count"] is None  # Airflow not asked: unknown, not the audit's rows
    _jsonl(run / "human-attempt-1.jsonl", [
        {**rows[0], "human_choice": "Approve", "responded_by": "reviewer", "applied": True},
        {**rows[1], "human_choice": "Keep on hold", "responded_by": "", "applied": False},
    ])  # fmt: skip
    answered = read_page(tmp_path, last=day, today=day).review
    assert [a["responded_by"] for a in answered["answered"]] == ["reviewer", ""]
