"""``affiliate-network-rules backtest`` on landed partitions written here (no sandbox).

The expected decisions are computed in the test: each day's review window written out in UTC
arithmetic, the traffic and candidates picked by hand, the engine run on them directly.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from affiliate_network.backtest.cli import main
from affiliate_network.backtest.job import agreement, network_status
from affiliate_network.partitions.manifest import MANIFEST_NAME, FileEntry, Manifest
from affiliate_network.rules.engine import RuleSet
from affiliate_network.rules.loader import loads_rules

RULES = """\
rules:
  - id: dup-ip
    description: three or more conversions of one IP within 24 hours
    action: reject
    when: {agg: {count_same: conversion_user_ip, within_hours: 24}, ge: 3}
  - id: small-sale
    description: small sales are fine
    action: approve
    when: {field: sale_amount, lt: 50}
  - id: huge-sale
    description: a person looks
    action: review
    when: {field: sale_amount, ge: 900}
"""

FIRST = dt.date(2026, 3, 1)
DAYS = 12
UTC = dt.UTC


def _midnight(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _records(day: dt.date, n: int = 40) -> list[dict]:
    """A day of conversions: every third one on hold, IPs shared in groups, mixed outcomes."""
    base = int(_midnight(day))
    rows = []
    for i in range(n):
        ts = base + 600 + i * 2000  # spread over the day
        held = i % 3 != 2
        # The network's outcome cycles: still on hold, approved, rejected.
        outcome = ("on_hold", "approved", "rejected")[(i + day.day) % 3]
        snaps = []
        if held:
            snaps = [{"on_hold_conversion_id": f"oh-{day}-{i}", "status": "on_hold",
                      "unix_timestamp": ts}]  # fmt: skip
            if outcome != "on_hold":
                snaps.append({"on_hold_conversion_id": f"oh-{day}-{i}", "status": outcome,
                              "unix_timestamp": ts + 7200})  # fmt: skip
        status = ("pending" if outcome == "on_hold" else outcome) if held else "approved"
        rows.append(
            {
                "conversion_id": f"c-{day}-{i}",
                "conversion_unix_timestamp": ts,
                "click_unix_timestamp": ts - 300,
                # The first 4 of every 10 share an IP; the others have their own.
                "conversion_user_ip": f"10.{day.day}.{i // 10}.1"
                if i % 10 < 4
                else f"10.{day.day}.{i}.2",
                "session_user_ip": "10.9.9.9",
                "sale_amount": float(10 + (i * 37 + day.day * 11) % 1000),
                "payout": Decimal(f"{1 + i % 7}.{i % 100:02d}5"),
                "status": status,
                "is_event": False,
                "relationship": json.dumps({"on_hold_snapshots": snaps}),
            }
        )
    return rows


def _land(base: Path, day: dt.date, rows: list[dict], timezone_id: int = 67) -> None:
    """One partition the way the storage publishes it: a Parquet file and its manifest."""
    folder = base / f"date={day}"
    folder.mkdir(parents=True)
    schema = pa.schema(
        [
            ("conversion_id", pa.string()),
            ("conversion_unix_timestamp", pa.int64()),
            ("click_unix_timestamp", pa.int64()),
            ("conversion_user_ip", pa.string()),
            ("session_user_ip", pa.string()),
            ("sale_amount", pa.decimal128(18, 6)),
            ("payout", pa.decimal128(18, 6)),
            ("status", pa.string()),
            ("is_event", pa.bool_()),
            ("relationship", pa.string()),
        ]
    )
    table = pa.Table.from_pylist(
        [{**r, "sale_amount": Decimal(str(r["sale_amount"]))} for r in rows], schema=schema
    )
    path = folder / "part-00000.parquet"
    pq.write_table(table, path)
    data = path.read_bytes()
    manifest = Manifest(
        dataset="conversions",
        partition={"date": str(day)},
        format="parquet",
        files=[FileEntry(path.name, len(rows), len(data), hashlib.sha256(data).hexdigest())],
        row_count=len(rows),
        content_checksum="",
        duplicates_dropped=0,
        request={"timezone_id": timezone_id},
        pulled_at="",
        package_version="",
        schema={},
    )
    (folder / MANIFEST_NAME).write_bytes(manifest.to_json())


@pytest.fixture
def landed(tmp_path) -> tuple[Path, dict[dt.date, list[dict]]]:
    base = tmp_path / "conversions"
    days = {}
    for k in range(DAYS):
        day = FIRST + dt.timedelta(days=k)
        days[day] = _records(day)
        _land(base, day, days[day])
    (base / "_staging").mkdir()  # never read
    return base, days


@pytest.fixture
def rules(tmp_path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES)
    return path


def _as_api(row: dict) -> dict:
    """A written row as the API's record (what the review's rules see)."""
    return {
        **row,
        "sale_amount": float(row["sale_amount"]),
        "payout": float(row["payout"]),
        "relationship": json.loads(row["relationship"]),
    }


def _expected(days: dict, first: dt.date, last: dt.date, lookback: int, after_h: float):
    """Per day and rule: (count, payout, network statuses, agreements), computed by hand."""
    ruleset = RuleSet(loads_rules(RULES))
    horizon = 24 * 3600
    out: dict[tuple[str, str], dict] = {}
    rows = []
    day = first
    while day <= last:
        as_of = _midnight(day + dt.timedelta(days=1)) + after_h * 3600
        to_date = dt.datetime.fromtimestamp(as_of, UTC).date()
        decide_from = to_date - dt.timedelta(days=lookback - 1)
        pull_from = _midnight(decide_from) - horizon
        traffic = [
            _as_api(r)
            for records in days.values()
            for r in records
            if pull_from <= r["conversion_unix_timestamp"] < int(as_of) + 1
        ]
        lo, hi = _midnight(day), _midnight(day + dt.timedelta(days=1))
        eligible = [
            i
            for i, r in enumerate(traffic)
            if lo <= r["conversion_unix_timestamp"] < hi
            and r["relationship"]["on_hold_snapshots"]
            and as_of - r["conversion_unix_timestamp"] >= horizon
        ]
        evaluation = ruleset.evaluate(traffic, now=as_of, eligible=eligible)
        for i in eligible:
            d = evaluation.for_index(i)
            rule, action = (d.rule_id, d.action) if d else ("(no rule)", "hold")
            net = traffic[i]["relationship"]["on_hold_snapshots"][-1]["status"]
            score = {
                ("reject", "rejected"): "agree",
                ("approve", "approved"): "agree",
                ("reject", "approved"): "disagree",
                ("approve", "rejected"): "disagree",
            }.get((action, net), "open" if action in ("approve", "reject") else "none")
            cell = out.setdefault(
                (day.isoformat(), rule), {"count": 0, "payout": Decimal(0), "net": {}, "score": {}}
            )
            cell["count"] += 1
            cell["payout"] += Decimal(str(traffic[i]["payout"]))
            cell["net"][net] = cell["net"].get(net, 0) + 1
            cell["score"][score] = cell["score"].get(score, 0) + 1
            rows.append((traffic[i]["conversion_id"], day.isoformat(), rule, action, net, score))
        day += dt.timedelta(days=1)
    return out, rows


def _printed(out: str) -> dict[tuple[str, str], dict]:
    """The per-day lines of the command's table."""
    cells = {}
    for line in out.splitlines():
        line, _, money = line.partition("  payout ")
        parts = line.split()
        if not parts or not parts[0][:1].isdigit() or len(parts[0]) != 10:
            continue
        if parts[1] == "(no":  # "(no rule)" is two words
            parts = [parts[0], "(no rule)", *parts[3:]]
        day, rule, _action, count, *numbers = parts
        approved, rejected, on_hold, other, agree, disagree, open_ = map(int, numbers)
        # These records name no currency: one amount, kept under "(no currency)".
        amount, _, currency = money.partition(" ")
        assert currency == "(no currency)", money
        cells[(day, rule)] = {
            "count": int(count),
            "payout": Decimal(amount),
            "net": {"approved": approved, "rejected": rejected, "on_hold": on_hold},
            "score": {"agree": agree, "disagree": disagree, "open": open_},
            "other": other,
        }
    return cells


def test_per_day_counts_payout_and_agreement_match_the_engine_on_hand_picked_windows(
    landed, rules, tmp_path, capsys
) -> None:
    base, days = landed
    first, last = FIRST + dt.timedelta(days=7), FIRST + dt.timedelta(days=9)
    out_csv = tmp_path / "decisions.csv"
    code = main(
        ["backtest", str(rules), "--records", str(base), "--from", str(first), "--to", str(last),
         "--lookback-days", "7", "--min-age-hours", "1", "--decisions", str(out_csv)]
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    expected, rows = _expected(days, first, last, lookback=7, after_h=24)
    assert expected, "the windows decide something"
    got = _printed(printed.out)
    assert set(got) == set(expected)
    for key, want in expected.items():
        cell = got[key]
        assert cell["count"] == want["count"], key
        assert cell["payout"] == want["payout"], key  # exact: sub-cent digits shown
        assert {k: v for k, v in cell["net"].items() if v} == want["net"], key
        assert {k: v for k, v in cell["score"].items() if v} == {
            k: v for k, v in want["score"].items() if k != "none"
        }, key
    # Every kind of outcome shows up, so the mapping is exercised.
    scores = {s for *_, s in rows}
    assert {"agree", "disagree", "open", "none"} <= scores
    # --decisions: one CSV row per candidate, the same rule, action, status and agreement.
    with out_csv.open(newline="") as handle:
        written = list(csv.DictReader(handle))
    assert sorted(
        (r["conversion_id"], r["day"], r["rule"], r["action"], r["network_status"], r["agreement"])
        for r in written
    ) == sorted(rows)
    by_id = {r["conversion_id"]: r for records in days.values() for r in records}
    assert all(Decimal(r["payout"]) == by_id[r["conversion_id"]]["payout"] for r in written)


def test_the_lookback_and_min_age_default_to_the_rules_files_review_section(
    landed, rules, tmp_path, capsys
) -> None:
    """What the review reads is what the backtest decides with, unless the command line says."""
    base, _days = landed
    own = tmp_path / "rules.yaml"
    own.write_text(rules.read_text() + "\nreview:\n  lookback_days: 3\n  min_age_hours: 5\n")
    day = FIRST + dt.timedelta(days=5)
    argv = ["backtest", str(own), "--records", str(base), "--from", str(day), "--to", str(day)]
    assert main(argv) == 0
    assert "look-back 3 days" in capsys.readouterr().out
    assert main([*argv, "--lookback-days", "4"]) == 0
    printed = capsys.readouterr().out
    assert "look-back 4 days" in printed
    assert "on hold >= 5 h" in printed


def test_decisions_as_json_lines_and_the_lookback_option(landed, rules, tmp_path, capsys) -> None:
    base, days = landed
    day = FIRST + dt.timedelta(days=5)
    out = tmp_path / "decisions.jsonl"
    code = main(
        ["backtest", str(rules), "--records", str(base), "--from", str(day), "--to", str(day),
         "--lookback-days", "3", "--decide-after-hours", "30", "--decisions", str(out)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    _, rows = _expected(days, day, day, lookback=3, after_h=30)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(
        (r["conversion_id"], r["day"], r["rule"], r["action"], r["network_status"], r["agreement"])
        for r in lines
    ) == sorted(rows)
    assert set(lines[0]) == {
        "conversion_id", "on_hold_conversion_id", "day", "rule", "action", "network_status",
        "agreement", "payout", "currency_id",
    }  # fmt: skip


def _events_of(records: list[dict]) -> list[dict]:
    """An event after each conversion, from its IP and held like it: what the daily report
    lands beside the conversions (``show_events`` true)."""
    events = []
    for r in records:
        snaps = json.loads(r["relationship"])["on_hold_snapshots"]
        held = [{**s, "on_hold_conversion_id": "ev-" + s["on_hold_conversion_id"]} for s in snaps]
        events.append(
            {
                **r,
                "conversion_id": "ev-" + r["conversion_id"],
                "conversion_unix_timestamp": r["conversion_unix_timestamp"] + 5,
                "is_event": True,
                "relationship": json.dumps({"on_hold_snapshots": held}),
            }
        )
    return events


def test_landed_events_are_neither_counted_nor_decided(rules, tmp_path, capsys) -> None:
    """The review pulls conversions only: events landed beside them change no aggregate (the
    duplicate-IP counts would double) and are no candidates."""
    base = tmp_path / "conversions"
    days = {}
    for k in range(DAYS):
        day = FIRST + dt.timedelta(days=k)
        days[day] = _records(day)
        _land(base, day, [*days[day], *_events_of(days[day])])
    first, last = FIRST + dt.timedelta(days=7), FIRST + dt.timedelta(days=9)
    out = tmp_path / "decisions.csv"
    code = main(
        ["backtest", str(rules), "--records", str(base), "--from", str(first), "--to", str(last),
         "--decisions", str(out)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    _, rows = _expected(days, first, last, lookback=7, after_h=24)  # the conversions alone
    with out.open(newline="") as handle:
        written = list(csv.DictReader(handle))
    assert sorted(
        (r["conversion_id"], r["day"], r["rule"], r["action"], r["network_status"], r["agreement"])
        for r in written
    ) == sorted(rows)
    assert any(rule == "dup-ip" for _, _, rule, *_ in rows)


@pytest.mark.parametrize(
    ("request_", "why"),
    [
        ({"show_conversions": False, "show_events": True}, "landed without conversions"),
        ({"filters": [{"resource_type": "offer", "filter_id_value": "1"}]}, "with filters"),
        ({"search_terms": [{"search_type": "sub1", "value": "x"}]}, "with search terms"),
    ],
)
def test_a_day_landed_as_part_of_its_traffic_is_left_out_and_named(
    landed, rules, request_, why, capsys
) -> None:
    """Aggregates over part of a day would count less than the review's: such a partition is
    treated as missing, and stderr says why."""
    base, _ = landed
    gap = FIRST + dt.timedelta(days=6)
    manifest_path = base / f"date={gap}" / "_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["request"] = {**manifest["request"], **request_}
    manifest_path.write_text(json.dumps(manifest))
    day = FIRST + dt.timedelta(days=8)
    code = main(
        ["backtest", str(rules), "--records", str(base), "--from", str(day), "--to", str(day)]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"warning: {gap} left out: " in err
    assert why in err
    assert f"no complete partition for {gap}:" in err


def test_days_missing_around_the_range_are_named_on_stderr(landed, rules, capsys) -> None:
    base, _ = landed
    code = main(
        ["backtest", str(rules), "--records", str(base), "--from", str(FIRST), "--to", str(FIRST)]
    )
    err = capsys.readouterr().err
    assert code == 0
    # The run deciding 03-01 is at 03-03 00:00: its 7-day window starts 02-25, the horizon
    # of 24 h before it reaches into 02-24.
    assert "no complete partition for 2026-02-24, 2026-02-25" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "2026-03-09", "--to", "2026-03-02"], "--from 2026-03-09 is after --to"),
        (["--from", "2026-02-01", "--to", "2026-02-05"], "no complete partition from 2026-02-01"),
        (["--from", "2026-03-02", "--to", "2026-03-03", "--lookback-days", "0"], "lookback"),
        (["--from", "2026-03-05", "--to", "2026-03-05", "--decide-after-hours", "200"],
         "no longer in it"),
    ],
)  # fmt: skip
def test_a_bad_range_or_option_is_a_clear_error(landed, rules, args, message, capsys) -> None:
    base, _ = landed
    code = main(["backtest", str(rules), "--records", str(base), *args])
    err = capsys.readouterr().err
    assert code == 1
    assert "affiliate-network-rules backtest:" in err
    assert message.lower() in err.lower()


def test_an_unparsable_date_is_refused_by_the_parser(landed, rules, capsys) -> None:
    base, _ = landed
    code = main(["backtest", str(rules), "--records", str(base), "--from", "March", "--to", "x"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1
    assert "argument --from: 'March' is not a YYYY-MM-DD date" in err


def test_a_missing_records_folder_is_a_clear_error(rules, tmp_path, capsys) -> None:
    missing = tmp_path / "nowhere" / "conversions"
    code = main(
        ["backtest", str(rules), "--records", str(missing), "--from", "2026-03-01",
         "--to", "2026-03-02"]
    )  # fmt: skip
    assert code == 1
    assert f"{missing}: no such folder" in capsys.readouterr().err


def test_an_incomplete_partition_is_not_read(landed, rules, tmp_path, capsys) -> None:
    base, _ = landed
    day = FIRST + dt.timedelta(days=8)
    (base / f"date={day}" / "_manifest.json").unlink()  # a publish that never finished
    code = main(
        ["backtest", str(rules), "--records", str(base), "--from", str(day), "--to", str(day)]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert f"no complete partition from {day}" in captured.err


@pytest.mark.parametrize(
    ("snapshot", "status", "network"),
    [
        ("on_hold", "pending", "on_hold"),
        ("approved", "approved", "approved"),
        ("rejected", "rejected", "rejected"),
        ("declined", "rejected", "rejected"),  # another rejecting value of the PATCH
        (None, "pending", "on_hold"),
        (None, None, "other"),
    ],
)
def test_network_status_reads_the_last_on_hold_snapshot_then_the_status(
    snapshot, status, network
) -> None:
    snaps = [{"status": "on_hold"}, {"status": snapshot}] if snapshot else []
    record = {"status": status, "relationship": {"on_hold_snapshots": snaps}}
    assert network_status(record) == network


@pytest.mark.parametrize(
    ("action", "network", "score"),
    [
        ("reject", "rejected", "agree"),
        ("approve", "approved", "agree"),
        ("reject", "approved", "disagree"),
        ("approve", "rejected", "disagree"),
        ("reject", "on_hold", "open"),
        ("approve", "other", "open"),
        ("review", "rejected", "none"),
        ("hold", "approved", "none"),
    ],
)
def test_agreement_mapping(action, network, score) -> None:
    assert agreement(action, network) == score


def test_the_backtest_imports_no_airflow(landed, rules) -> None:
    """It reads the partitions with pyarrow: a local copy of the data needs no Airflow."""
    import subprocess
    import sys

    base, _ = landed
    day = str(FIRST + dt.timedelta(days=8))
    probe = (
        "import sys\n"
        "from affiliate_network.backtest.cli import main\n"
        f"code = main(['backtest', {str(rules)!r}, '--records', {str(base)!r}, "
        f"'--from', {day!r}, '--to', {day!r}])\n"
        "print(code, 'airflow' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "0 False"


@pytest.mark.parametrize("timezone_id", [67, 80, 5])
@pytest.mark.parametrize("after_hours", [None, 1.0, 72.0])
def test_each_run_is_the_review_window_of_that_instant(timezone_id, after_hours) -> None:
    """The backtest re-states the review's window (the rules language imports no job
    library): the run deciding a day has the window ``review_window`` gives for its instant,
    across DST changes too (America/New_York falls back on 2026-11-01, Auckland springs
    forward on 2026-09-27)."""
    from affiliate_network.api.timezones import TIMEZONES
    from affiliate_network.backtest.job import Backtest
    from affiliate_network.review.window import review_window

    ruleset = RuleSet(loads_rules(RULES))
    backtest = Backtest(ruleset, timezone=TIMEZONES[timezone_id], decide_after_hours=after_hours)
    for day in [dt.date(2026, 9, 25) + dt.timedelta(days=k) for k in range(45)]:
        plan = backtest.plan(day)
        window = review_window(
            timezone_id=timezone_id,
            lookback_days=backtest.lookback_days,
            to_date=None,
            as_of=plan.as_of.isoformat(),
            horizon_hours=ruleset.horizon_hours,
        )
        assert window.decide_from <= day <= window.to_date
        assert plan.span == (window.pull_from_ts, float(int(window.pull_to_ts)) + 1.0)
