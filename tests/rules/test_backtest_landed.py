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

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.paths import PROJECT_ROOT
from affiliate_network.reports.storage import list_partitions, read_partition
from affiliate_network.rules.cli import main
from affiliate_network.rules.engine import RuleSet
from affiliate_network.rules.fields import on_hold_status
from affiliate_network.rules.records import as_record
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
