"""``affiliate-network-rules backtest`` on sandbox days landed by the report job library.

The network decides some held conversions first (PATCHes through the hook: the blocklisted ones
rejected, the duplicate-IP ones approved), then the days are landed as the report DAG lands
them; the test reads back only the files it landed. The expected figures come from the landed
partitions read through the storage's own reader, each day's window computed by hand and the
engine run on it.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections import Counter
from decimal import Decimal

from affiliate_network.backtest.cli import main
from affiliate_network.backtest.records import as_record
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.manifest import list_partitions
from affiliate_network.partitions.read import read_partition
from affiliate_network.rules.engine import RuleSet
from affiliate_network.rules.fields import on_hold_status
from affiliate_network.settings.paths import PROJECT_ROOT
from tests.support.landed_history import land_days

RULES = PROJECT_ROOT / "include" / "onhold_rules.yaml"


def _landed_records(base) -> dict[dt.date, list[dict]]:
    out = {}
    for rel in list_partitions(base, "conversions"):
        day = dt.date.fromisoformat(rel.split("=", 1)[1])
        table = read_partition(base / "conversions" / rel)
        out[day] = [{**as_record(row, base), "_payout": row["payout"]} for row in table.to_pylist()]
    return out


def test_backtest_of_landed_sandbox_days_matches_the_engine_and_the_network(
    sandbox, network_conn, tmp_path, capsys
) -> None:
    catalog = sandbox.catalog()
    first = dt.date.fromisoformat(catalog["first_date"])
    last = dt.date.fromisoformat(catalog["last_date"])
    truth = sandbox.planted(first.isoformat(), last.isoformat())["on_hold_conversion_ids"]
    hook = AffiliateNetworkHook(network_conn)
    try:
        rejected = sorted(truth["blocklisted_sub"])
        approved = sorted(truth["duplicate_ip"])[::2]  # the network let half of them through
        assert hook.set_on_hold_status(rejected, "rejected")
        assert hook.set_on_hold_status(approved, "approved")
    finally:
        hook.close()
    land_days(network_conn, tmp_path, first, last)
    days = _landed_records(tmp_path)
    assert len(days) == (last - first).days + 1

    d1, d2 = first + dt.timedelta(days=7), last - dt.timedelta(days=2)
    out = tmp_path / "decisions.csv"
    code = main(
        ["backtest", str(RULES), "--records", str(tmp_path / "conversions"),
         "--from", str(d1), "--to", str(d2), "--decisions", str(out)]
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "warning" not in printed.err  # every day of every window is landed

    # Expected, by hand: the run deciding D is 24 h (the rules' horizon) after D ends, in UTC
    # (timezone 67); its traffic starts a day before its 7-day window; candidates are D's
    # conversions that have been on hold.
    ruleset = RuleSet.from_file(RULES)
    expected: Counter = Counter()
    net: Counter = Counter()
    payout: dict[str, Decimal] = {}
    day = d1
    while day <= d2:
        as_of = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC) + dt.timedelta(days=2)
        pull_from = as_of.date() - dt.timedelta(days=7)
        traffic = [
            r
            for landed_day, records in days.items()
            if pull_from <= landed_day <= as_of.date()
            for r in records
            if r["conversion_unix_timestamp"] <= as_of.timestamp()
        ]
        eligible = [
            i
            for i, r in enumerate(traffic)
            if dt.datetime.fromtimestamp(r["conversion_unix_timestamp"], dt.UTC).date() == day
            and on_hold_status(r) is not None
        ]
        evaluation = ruleset.evaluate(traffic, now=as_of.timestamp(), eligible=eligible)
        for i in eligible:
            decision = evaluation.for_index(i)
            rule = decision.rule_id if decision else "(no rule)"
            expected[(day.isoformat(), rule)] += 1
            net[(rule, on_hold_status(traffic[i]))] += 1
            payout[rule] = payout.get(rule, Decimal(0)) + traffic[i]["_payout"]
        day += dt.timedelta(days=1)

    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert Counter((r["day"], r["rule"]) for r in rows) == expected
    assert sum(expected.values()) > 100
    by_rule: dict[str, Decimal] = {}
    for r in rows:
        by_rule[r["rule"]] = by_rule.get(r["rule"], Decimal(0)) + Decimal(r["payout"])
    assert by_rule == payout
    # The network's side: what was PATCHed shows as the network's decision.
    status = {"on_hold": "on_hold", "approved": "approved", "rejected": "rejected"}
    assert Counter((r["rule"], r["network_status"]) for r in rows) == Counter(
        {(rule, status[s]): n for (rule, s), n in net.items()}
    )
    scores = Counter((r["rule"], r["agreement"]) for r in rows)
    # Every blocklisted conversion decided was rejected by the network: all agree.
    blocked = [r for r in rows if r["rule"] == "blocked-sub1"]
    assert blocked
    assert scores[("blocked-sub1", "agree")] == len(blocked)
    # Half the duplicate-IP ones were approved by the network: the rule disagrees with those.
    assert scores[("duplicate-ip-24h", "disagree")] > 0
    assert scores[("duplicate-ip-24h", "open")] > 0
    assert not [r for r in rows if r["action"] in ("review", "hold") and r["agreement"] != "none"]

    # The printed totals equal the rows.
    totals = {
        line.split()[1]: int(line.split()[3])
        for line in printed.out.splitlines()
        if line.startswith("total ") and not line.split()[1].startswith("(")
    }
    for rule, n in Counter(r["rule"] for r in rows).items():
        if not rule.startswith("("):
            assert totals[rule] == n


#: Rules whose aggregates see every kind of traffic difference: a per-offer burst within an
#: hour, one IP within a day (no ``is_event`` guard) and a ratio to the offer's median over the
#: whole pull (no window: it depends on exactly which rows the run pulled).
SAME_AS_REVIEW_RULES = """\
rules:
  - id: offer-burst
    description: eight or more conversions of one offer within an hour
    action: reject
    when: {agg: {count_same: relationship.offer.network_offer_id, within_hours: 1}, ge: 8}
  - id: shared-ip
    description: three or more conversions of one IP within a day
    action: reject
    when: {agg: {count_same: conversion_user_ip, within_hours: 24}, ge: 3}
  - id: big-for-its-offer
    description: three times the offer's median sale
    action: review
    when: {agg: {ratio_to_median: sale_amount, per: relationship.offer.network_offer_id}, gt: 3}
"""


def test_the_backtest_decides_the_ids_the_review_decides_on_the_same_days(
    sandbox, network_conn, tmp_path, capsys
) -> None:
    """Days landed as the daily report DAG lands them (events included); for each decided day
    the review itself (``run_review``, a dry run) runs at the instant the backtest replays, on
    the sandbox: both decide the same on-hold ids with the same rules."""
    from affiliate_network.backtest.job import Backtest
    from affiliate_network.review.job import ReviewOptions, ReviewRun, run_review
    from affiliate_network.review.window import review_window

    catalog = sandbox.catalog()
    first = dt.date.fromisoformat(catalog["first_date"])
    last = dt.date.fromisoformat(catalog["last_date"])
    land_days(network_conn, tmp_path, first, last, show_events=True)
    rules = tmp_path / "rules.yaml"
    rules.write_text(SAME_AS_REVIEW_RULES)
    d1, d2 = first + dt.timedelta(days=7), first + dt.timedelta(days=9)
    out = tmp_path / "decisions.csv"
    code = main(
        ["backtest", str(rules), "--records", str(tmp_path / "conversions"), "--from", str(d1),
         "--to", str(d2), "--lookback-days", "7", "--min-age-hours", "1", "--decisions", str(out)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    with out.open(newline="") as handle:
        backtest = {
            (r["day"], r["on_hold_conversion_id"], r["rule"])
            for r in csv.DictReader(handle)
            if r["rule"] != "(no rule)"
        }

    ruleset = RuleSet.from_file(rules)
    replay = Backtest(ruleset, timezone="UTC", lookback_days=7, min_age_hours=1.0)
    review: set[tuple[str, str, str]] = set()
    hook = AffiliateNetworkHook(network_conn)
    try:
        day = d1
        while day <= d2:
            as_of = replay.plan(day).as_of
            window = review_window(
                timezone_id=67,
                lookback_days=7,
                to_date=None,
                as_of=as_of.isoformat(),
                horizon_hours=ruleset.horizon_hours,
            )
            result = run_review(
                hook,
                ruleset,
                window,
                options=ReviewOptions(min_age_hours=1.0),
                run=ReviewRun(
                    base=str(tmp_path / "review"),
                    conn_id=network_conn,
                    dag_id="same",
                    run_id=str(day),
                ),
                dry_run=True,
            )
            for row in result.rows:
                at = dt.datetime.fromtimestamp(row["conversion_unix_timestamp"], dt.UTC)
                if at.date() == day:  # the run also decides the other days of its window
                    review.add((day.isoformat(), row["on_hold_conversion_id"], row["rule_id"]))
            day += dt.timedelta(days=1)
    finally:
        hook.close()
    assert {rule for _, _, rule in review} == {"offer-burst", "shared-ip", "big-for-its-offer"}
    assert backtest == review
