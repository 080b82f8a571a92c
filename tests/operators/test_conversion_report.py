"""ConversionReportOperator and AffiliateReportOperator against the real sandbox, real files.

The operators run in-process through ``execute`` with a task context holding what they read
(data interval, outlet events); the hook talks real HTTP to the sandbox on 127.0.0.1.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.sdk import ObjectStoragePath
from airflow.sdk.exceptions import AirflowSkipException

from affiliate_network.exceptions import (
    ConfigValidationError,
    ReportRowLimitError,
    ServerError,
)
from affiliate_network.operators.conversion_report import (
    AffiliateReportOperator,
    ConversionReportOperator,
    dataset_asset,
)
from affiliate_network.operators.publish import PublishChangesOperator
from affiliate_network.partitions.changes import list_changes
from affiliate_network.partitions.manifest import is_complete, list_partitions, read_manifest
from affiliate_network.partitions.publish import STAGING_DIR
from affiliate_network.partitions.read import iter_partition_records, read_partition
from tests.support.processes import kill_when
from tests.support.report_ops import FAST_RETRIES, conversions_op, interval_context


@pytest.fixture
def day(sandbox) -> str:
    """A full day of sandbox data (the day before the last one)."""
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    return (last - dt.timedelta(days=1)).isoformat()


def _partition(base: Path, day: str, dataset: str = "conversions") -> Path:
    return base / dataset / f"date={day}"


def test_day_matches_truth_with_20pct_faults(sandbox, network_conn, tmp_path, day) -> None:
    truth = sandbox.truth(day, day, timezone_id=67)
    sandbox.set_faults(error_rate=0.2, seed=7, paths=["/networks/reporting"])
    op = conversions_op(tmp_path / "faulty", page_size=20)
    summary = op.execute(interval_context(day))

    faulted = sum(1 for r in sandbox.requests_log() if r["status"] >= 500 or r["status"] == 429)
    assert faulted > 0, "the faults were really injected"
    part = _partition(tmp_path / "faulty", day)
    assert summary["paths"] == [str(part)]
    assert summary["rows"] == truth["total"]
    assert summary["pages"] >= truth["total"] // 20
    table = read_partition(part)
    assert table.num_rows == truth["total"]
    rows = table.select(["is_event", "status"]).to_pylist()
    assert sum(1 for r in rows if r["is_event"]) == truth["events"]
    statuses = Counter(r["status"] for r in rows if not r["is_event"])
    assert statuses["approved"] == truth["approved"]
    assert statuses["pending"] == truth["on_hold_pending"]
    assert statuses["rejected"] == truth["rejected"]
    assert statuses.total() == truth["conversions"]
    ids = table.column("conversion_id").to_pylist()
    assert len(set(ids)) == len(ids)

    # Content: the same records as a fault-free pull (same content checksum).
    sandbox.clear_faults()
    clean = conversions_op(tmp_path / "clean").execute(interval_context(day))
    assert clean["partitions"][0]["checksum"] == summary["partitions"][0]["checksum"]


def test_rerun_replaces_partition_with_same_checksum(sandbox, network_conn, tmp_path, day) -> None:
    first = conversions_op(tmp_path).execute(interval_context(day))
    m1 = read_manifest(_partition(tmp_path, day))
    # No outlet: with the Asset as outlet an unchanged rerun ends skipped (no event).
    second = conversions_op(tmp_path, outlets=[]).execute(interval_context(day))
    assert second["partitions"][0]["rewritten"] is False
    m2 = read_manifest(_partition(tmp_path, day))
    assert m1 is not None
    assert m2 is not None
    assert m2.content_checksum == m1.content_checksum
    assert m2.row_count == m1.row_count == first["rows"] == second["rows"]
    assert sorted(
        p.name for p in _partition(tmp_path, day).iterdir() if "changes" not in p.name
    ) == [
        "_manifest.json",
        "part-00000.parquet",
    ]
    assert m2.request["from"] == m2.request["to"] == day
    assert m2.request["timezone_id"] == 67
    assert m2.request["timezone"] == "UTC"
    assert m2.request["currency_id"] == "USD"
    assert m2.stats["pages"] >= 1


def test_late_status_change_converges_on_repull(sandbox, network_conn, tmp_path, day) -> None:
    """An on-hold conversion approved after the day: the re-pull lands the new status."""
    conversions_op(tmp_path).execute(interval_context(day))
    before = read_partition(_partition(tmp_path, day)).to_pylist()
    held = [r for r in before if r["rel_on_hold_status"] == "on_hold"]
    assert held, "the sandbox day has on-hold conversions"
    target = held[0]
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    assert AffiliateNetworkHook(network_conn).set_on_hold_status(
        [target["rel_on_hold_conversion_id"]], "approved"
    )
    # The trailing re-pull of a later run covers this day.
    later = (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
    summary = conversions_op(tmp_path, lookback_days=1).execute(interval_context(later))
    assert [p["date"] for p in summary["partitions"]] == [day]
    after = {r["conversion_id"]: r for r in read_partition(_partition(tmp_path, day)).to_pylist()}
    assert after[target["conversion_id"]]["status"] == "approved"
    assert after[target["conversion_id"]]["rel_on_hold_status"] == "approved"
    assert len(after) == len(before)


def test_multi_day_window_equals_single_day_runs(sandbox, network_conn, tmp_path, day) -> None:
    d0 = dt.date.fromisoformat(day) - dt.timedelta(days=2)
    days = [(d0 + dt.timedelta(days=i)).isoformat() for i in range(3)]
    window = conversions_op(tmp_path / "window").execute(interval_context(days[0], days=3))
    assert [p["date"] for p in window["partitions"]] == days
    for d in days:  # three daily runs, as a backfill does
        conversions_op(tmp_path / "daily").execute(interval_context(d))
    a = list_partitions(tmp_path / "window", "conversions")
    b = list_partitions(tmp_path / "daily", "conversions")
    assert list(a) == list(b) == [f"date={d}" for d in days]
    for name in a:
        assert a[name].content_checksum == b[name].content_checksum
        assert a[name].row_count == b[name].row_count
        truth = sandbox.truth(name[5:], name[5:], timezone_id=67)
        assert a[name].row_count == truth["total"]


def test_failure_mid_pull_keeps_previous_partition(sandbox, network_conn, tmp_path, day) -> None:
    conversions_op(tmp_path).execute(interval_context(day))
    before = read_manifest(_partition(tmp_path, day))
    assert before is not None
    # Every page may fail, with no retries: the pull dies somewhere in the middle.
    sandbox.set_faults(error_rate=0.3, seed=3, paths=["/networks/reporting"])
    op = conversions_op(tmp_path, page_size=50, hook_kwargs={"max_attempts": 1})
    with pytest.raises(ServerError):
        op.execute(interval_context(day))
    after = read_manifest(_partition(tmp_path, day))
    assert after is not None
    assert after.content_checksum == before.content_checksum
    assert is_complete(_partition(tmp_path, day))
    assert list((tmp_path / "conversions" / STAGING_DIR).iterdir()) == []


_KILL_SCRIPT = textwrap.dedent(
    """
    from affiliate_network.partitions import write as storage
    from affiliate_network.operators.conversion_report import ConversionReportOperator
    storage.SINK_BUFFER_BYTES = 4096  # a small day: let the first row groups reach the disk
    op = ConversionReportOperator(
        task_id="killed", from_date={day!r}, base_path={base!r}, timezone_id=67,
        network_timezone="UTC", currency_id="USD", show_events=True, page_size=50,
        row_group_rows=100, hook_kwargs={{"concurrency": 1}}, outlets=[],
    )
    op.execute({{}})
    """
)


def test_killed_mid_write_leaves_no_complete_partition(
    sandbox, network_conn, tmp_path, day
) -> None:
    sandbox.set_faults(latency_ms=200)  # 5 pages/s, 12+ pages: the kill lands mid-write
    base = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILL_SCRIPT.format(day=day, base=str(base))],
        env=os.environ.copy(),
    )
    staging = base / "conversions" / STAGING_DIR
    kill_when(
        proc,
        lambda: any(p.stat().st_size > 0 for p in staging.rglob("*.parquet")),
        within=90,
        early_exit="the writer finished before it could be killed",
    )
    assert not is_complete(_partition(base, day))
    assert list_partitions(base, "conversions") == {}
    # A rerun lands the day completely.
    sandbox.clear_faults()
    summary = conversions_op(base).execute(interval_context(day))
    assert is_complete(_partition(base, day))
    assert summary["rows"] == sandbox.truth(day, day, timezone_id=67)["total"]


def test_jsonl_format_same_content(sandbox, network_conn, tmp_path, day) -> None:
    pq_sum = conversions_op(tmp_path, dataset="conv_pq").execute(interval_context(day))
    js_sum = conversions_op(tmp_path, dataset="conv_js", format="jsonl").execute(
        interval_context(day)
    )
    assert js_sum["partitions"][0]["checksum"] == pq_sum["partitions"][0]["checksum"]
    records = list(iter_partition_records(_partition(tmp_path, day, "conv_js")))
    assert len(records) == pq_sum["rows"]
    assert isinstance(records[0]["relationship"], dict)  # the raw API record, lossless


def test_asset_event_carries_the_partition(sandbox, network_conn, tmp_path, day) -> None:
    ctx = interval_context(day)
    summary = conversions_op(tmp_path).execute(ctx)
    event = ctx["outlet_events"][dataset_asset("conversions")]
    assert event.partition_keys == {f"date={day}"}
    assert event.extra["dataset"] == "conversions"
    [part] = event.extra["partitions"]
    assert part["date"] == day
    assert part["rows"] == summary["rows"]
    assert part["checksum"] == summary["partitions"][0]["checksum"]


def test_summary_is_small_and_has_no_secret(sandbox, network_conn, tmp_path, day) -> None:
    summary = conversions_op(tmp_path, filters=[{"resource_type": "status",
                                                 "filter_id_value": "approved"}]
                             ).execute(interval_context(day))  # fmt: skip
    text = repr(summary)
    assert len(text) < 2000
    assert sandbox.keys["network"] not in text
    manifest = (_partition(tmp_path, day) / "_manifest.json").read_text()
    assert sandbox.keys["network"] not in manifest
    truth = sandbox.truth(day, day, timezone_id=67)
    # The status filter reached the API: only approved records (conversions and events).
    assert summary["rows"] < truth["total"]
    statuses = set(read_partition(_partition(tmp_path, day)).column("status").to_pylist())
    assert statuses == {"approved"}
    assert set(summary) >= {"paths", "rows", "pages", "duplicates_dropped", "seconds"}


def test_window_resolution(tmp_path) -> None:
    op = conversions_op(tmp_path)
    ctx = interval_context("2026-03-10")
    assert op.days(ctx) == [dt.date(2026, 3, 10)]
    trailing = conversions_op(tmp_path, lookback_days="3")
    assert trailing.days(ctx) == [dt.date(2026, 3, 7), dt.date(2026, 3, 8), dt.date(2026, 3, 9)]
    assert conversions_op(tmp_path, lookback_days=0).days(ctx) == []
    explicit = conversions_op(tmp_path, from_date="2026-01-30", to_date="2026-02-01")
    assert len(explicit.days(ctx)) == 3
    # A non-UTC network: the interval [D 00:00, D+1 00:00) New York time is day D.
    ny = ConversionReportOperator(
        task_id="ny", network_timezone="America/New_York", timezone_id=80, base_path="x"
    )
    start = pendulum.datetime(2026, 3, 10, tz="America/New_York")
    assert ny.days({"data_interval_start": start, "data_interval_end": start.add(days=1)}) == [
        dt.date(2026, 3, 10)
    ]


def test_manual_run_without_logical_date_lands_the_day_before_run_after(tmp_path) -> None:
    """Airflow 3 lets a manual run have no logical date, hence no data interval."""
    from types import SimpleNamespace

    run = SimpleNamespace(run_after=pendulum.datetime(2026, 3, 11, 9, 30, tz="UTC"))
    ctx = {"data_interval_start": None, "data_interval_end": None, "dag_run": run}
    assert conversions_op(tmp_path).days(ctx) == [dt.date(2026, 3, 10)]
    trailing = conversions_op(tmp_path, lookback_days="2")
    assert trailing.days(ctx) == [dt.date(2026, 3, 8), dt.date(2026, 3, 9)]
    with pytest.raises(ConfigValidationError, match="pass from_date"):
        conversions_op(tmp_path).days({"data_interval_start": None})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "csv"}, "format"),
        ({"show_conversions": False, "show_events": False}, "both false"),
        ({"dataset": "../x"}, "plain folder"),
        ({"lookback_days": -1}, ">= 0"),
    ],
)
def test_conversion_operator_validates_in_init(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigValidationError, match=message):
        ConversionReportOperator(task_id="bad", **kwargs)


# -- aggregated affiliate reports -----------------------------------------------------------


def affiliate_op(
    base: Path, conn_id: str, affiliate_id: str, **kwargs: Any
) -> AffiliateReportOperator:
    kwargs.setdefault("hook_kwargs", dict(FAST_RETRIES))
    return AffiliateReportOperator(
        task_id=f"aff_{affiliate_id}",
        affiliate_network_conn_id=conn_id,
        affiliate_id=affiliate_id,
        base_path=str(base),
        timezone_id=67,
        network_timezone="UTC",
        currency_id="USD",
        **kwargs,
    )  # fmt: skip


def affiliate_conn(sandbox, make_connection, affiliate_id: str) -> str:
    return make_connection(
        f"affiliate_network_affiliate_{affiliate_id}",
        host=sandbox.base_url,
        key=sandbox.keys["affiliate"][affiliate_id],
        portal="affiliate",
    )


def test_affiliate_report_lands_partition(sandbox, make_connection, tmp_path, day) -> None:
    aff = sorted(sandbox.keys["affiliate"])[0]
    conn = affiliate_conn(sandbox, make_connection, aff)
    ctx = interval_context(day)
    summary = affiliate_op(tmp_path, conn, aff, columns=["offer", "country", "date"]).execute(ctx)
    part = tmp_path / "affiliate_reports" / f"affiliate={aff}" / f"date={day}"
    assert summary["path"] == str(part)
    assert summary["pieces"] == 1
    table = read_partition(part)
    assert table.num_rows == summary["rows"] > 0
    assert set(table.column("date").to_pylist()) == {day}
    assert set(table.column("report_from").to_pylist()) == {day}
    # The same request straight through the hook: the landed rows are the API's rows.
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    direct = AffiliateNetworkHook(conn).affiliate_entity_table(
        from_date=day, to_date=day, columns=["offer", "country", "date"], timezone_id=67,
        currency_id="USD",
    )  # fmt: skip
    assert table.num_rows == len(direct)
    assert sum(table.column("cv").to_pylist()) == sum(r["reporting"]["cv"] for r in direct)
    event = ctx["outlet_events"][dataset_asset("affiliate_reports")]
    assert event.partition_keys == {f"affiliate={aff}/date={day}"}


def test_row_cap_splits_range_down_to_days(sandbox, make_connection, tmp_path) -> None:
    # Dense days: sub2 is near-unique per conversion, so one affiliate's 3 days exceed the
    # 10,000-row cap while each single day stays below it.
    sandbox.reset(days=3, conversions_per_day=32_000, event_share=0.0)
    cat = sandbox.catalog()
    aff = sorted(sandbox.keys["affiliate"])[0]
    conn = affiliate_conn(sandbox, make_connection, aff)
    op = affiliate_op(
        tmp_path, conn, aff, columns=["sub2"], from_date=cat["first_date"],
        to_date=cat["last_date"],
    )  # fmt: skip
    summary = op.execute(interval_context(cat["first_date"]))
    assert summary["pieces"] >= 2, "the 3-day request hit the cap and was split"
    manifest = read_manifest(summary["path"])
    assert manifest is not None
    pieces = manifest.stats["requests_landed"]
    # Contiguous sub-ranges covering exactly the window, each under the cap.
    assert pieces[0]["from"] == cat["first_date"]
    assert pieces[-1]["to"] == cat["last_date"]
    for a, b in itertools.pairwise(pieces):
        assert dt.date.fromisoformat(b["from"]) == dt.date.fromisoformat(a["to"]) + dt.timedelta(1)
    assert all(p["rows"] < 10_000 for p in pieces)
    assert sum(p["rows"] for p in pieces) == manifest.row_count > 10_000
    table = read_partition(summary["path"])
    assert table.num_rows == manifest.row_count


def test_single_day_over_cap_fails_clearly(sandbox, make_connection, tmp_path) -> None:
    sandbox.reset(days=1, conversions_per_day=100_000, event_share=0.0)
    d = sandbox.catalog()["last_date"]
    aff = sorted(sandbox.keys["affiliate"])[0]
    conn = affiliate_conn(sandbox, make_connection, aff)
    op = affiliate_op(tmp_path, conn, aff, columns=["sub2"])
    with pytest.raises(ReportRowLimitError, match=r"single day .* drop a high-cardinality column"):
        op.execute(interval_context(d))
    assert list_partitions(tmp_path, "affiliate_reports") == {}


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["offer", "date", "week"], "at most one time column"),
        ([f"sub{i}" for i in range(1, 6)] + ["offer", "advertiser", "country", "platform",
                                              "device_type", "hour"], "1 to 10"),
        (["clicks"], "unknown"),
    ],
)  # fmt: skip
def test_affiliate_operator_validates_columns_in_init(columns: list[str], message: str) -> None:
    with pytest.raises(ConfigValidationError, match=message):
        AffiliateReportOperator(
            task_id="bad", affiliate_network_conn_id="x", affiliate_id="1", columns=columns
        )


def test_parquet_round_trip_of_sandbox_records(sandbox, network_conn, tmp_path, day) -> None:
    """Every field of every API record comes back from Parquet with its value and type."""
    import json
    from decimal import Decimal

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.reports.schema import MONEY_FIELDS, TIMESTAMP_FIELDS, conversion_schema

    api = list(
        AffiliateNetworkHook(network_conn).iter_conversions(
            from_date=day, to_date=day, timezone_id=67, currency_id="USD", show_events=True
        )
    )
    conversions_op(tmp_path).execute(interval_context(day))
    table = read_partition(_partition(tmp_path, day))
    assert table.schema.equals(conversion_schema().arrow_schema, check_metadata=False)
    landed = {r["conversion_id"]: r for r in table.to_pylist()}
    assert len(landed) == len(api)
    for rec in api:
        row = landed[rec["conversion_id"]]
        for name, value in rec.items():
            if name == "relationship":
                assert json.loads(row[name]) == value
            elif name in TIMESTAMP_FIELDS:  # schema 3: Unix seconds land as UTC datetimes
                assert row[name].timestamp() == value, name
            elif name in MONEY_FIELDS:  # schema 4: exact decimals, the JSON number's digits
                assert isinstance(row[name], Decimal), name
                assert row[name] == Decimal(repr(value)), name
            elif name in row:
                assert row[name] == (None if value == "" else value), name  # "" lands as null
                if isinstance(value, float):
                    assert isinstance(row[name], float)
            else:
                assert name in json.loads(row["extra_fields"] or "{}"), name


def test_each_day_landed_is_logged(sandbox, network_conn, tmp_path, day, caplog) -> None:
    # Issue 15: on-call follows a multi-day window in the task log, one line per day landed.
    import logging

    caplog.set_level(logging.INFO, logger="affiliate_network.partitions.write")
    d0 = dt.date.fromisoformat(day) - dt.timedelta(days=1)
    conversions_op(tmp_path / "logged").execute(interval_context(d0.isoformat(), days=2))
    published = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Published ")]
    assert len(published) == 2
    for i, line in enumerate(published):
        assert f"date={d0 + dt.timedelta(days=i)}" in line
        assert " rows, " in line


# -- change-aware re-pulls (issue 28, item 3) --------------------------------------------------


def _files_state(part: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of a partition with its bytes and modification time (ns)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(part.iterdir())}


def _next_day(day: str, days: int = 1) -> str:
    return (dt.date.fromisoformat(day) + dt.timedelta(days=days)).isoformat()


def test_unchanged_repull_rewrites_nothing_and_emits_no_event(
    sandbox, network_conn, tmp_path, day
) -> None:
    # The first landing, announced by the pull's own outlet.
    ctx = {**interval_context(day), "run_id": "manual__first"}
    conversions_op(tmp_path).execute(ctx)
    assert ctx["outlet_events"][dataset_asset("conversions")].partition_keys == {f"date={day}"}
    part = _partition(tmp_path, day)
    before = _files_state(part)
    assert [n for n in before if n.startswith("_changes-")], "the first landing is recorded"

    # The trailing re-pull of the next run, with the dataset's Asset as its outlet: nothing
    # changed and nothing is left to announce, so the task ends skipped (no asset event).
    with pytest.raises(AirflowSkipException, match="changed"):
        conversions_op(tmp_path, lookback_days=1).execute(interval_context(_next_day(day)))
    assert _files_state(part) == before  # not rewritten: same files, bytes and mtimes

    # As in the daily DAG: the pull has no outlet and ends green, the publish step skips.
    summary = conversions_op(tmp_path, lookback_days=1, outlets=[]).execute(
        interval_context(_next_day(day))
    )
    assert summary["changed"] == []
    [landed] = summary["partitions"]
    assert (landed["date"], landed["changed"], landed["rewritten"]) == (day, False, False)
    publish = PublishChangesOperator(task_id="publish", base_path=str(tmp_path))
    assert [a.name for a in publish.outlets] == ["affiliate_network_conversions"]
    with pytest.raises(AirflowSkipException, match="no change of conversions left"):
        publish.publish({**interval_context(_next_day(day)), "run_id": "scheduled__next"})
    assert _files_state(part) == before


def test_a_pull_announces_the_change_an_earlier_run_left_pending(
    sandbox, network_conn, tmp_path, day
) -> None:
    """A run whose pull recorded a change and then failed before announcing it: the next pull
    with the dataset's outlet announces that change with its own, and only once."""
    earlier = (dt.date.fromisoformat(day) - dt.timedelta(days=3)).isoformat()
    conversions_op(tmp_path, outlets=[]).execute({**interval_context(earlier), "run_id": "a"})
    ctx = {**interval_context(day), "run_id": "b"}
    conversions_op(tmp_path).execute(ctx)
    event = ctx["outlet_events"][dataset_asset("conversions")]
    assert event.partition_keys == {f"date={earlier}", f"date={day}"}
    assert [p["first_landing"] for p in event.extra["partitions"]] == [True, True]
    with pytest.raises(AirflowSkipException):
        conversions_op(tmp_path).execute({**interval_context(day), "run_id": "c"})


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_changed_day_alone_is_rewritten_with_its_changes(
    sandbox, network_conn, tmp_path, day, fmt
) -> None:
    """A status change (on-hold PATCH) and a sale-amount change in one day of the window."""
    first = (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()
    # Landed and announced (the pull's own outlet): what follows is the only change left.
    conversions_op(tmp_path, format=fmt).execute(interval_context(first, days=2))
    parts = {d: _partition(tmp_path, d) for d in (first, day)}
    before = {d: _files_state(p) for d, p in parts.items()}
    old_checksum = read_manifest(parts[day]).content_checksum  # type: ignore[union-attr]

    # What to change, read from a Parquet landing of the day (any format lands the same data).
    conversions_op(tmp_path / "probe", outlets=[]).execute(interval_context(day))
    rows = read_partition(_partition(tmp_path / "probe", day)).to_pylist()
    held = next(
        r for r in rows if r["rel_on_hold_status"] == "on_hold" and r["status"] != "approved"
    )
    amended = next(
        r for r in rows
        if not r["is_event"] and r["rel_on_hold_status"] is None
        and r["conversion_id"] != held["conversion_id"]
    )  # fmt: skip
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    hook = AffiliateNetworkHook(network_conn)
    assert hook.set_on_hold_status([held["rel_on_hold_conversion_id"]], "approved")
    assert hook.set_sale_amount(
        amended["conversion_id"], sale_amount=float(amended["sale_amount"] or 0) + 12.5
    )

    ctx = {**interval_context(_next_day(day)), "run_id": "scheduled__run_1"}
    summary = conversions_op(tmp_path, lookback_days=2, format=fmt).execute(ctx)
    assert summary["changed"] == [day]
    assert _files_state(parts[first]) == before[first]  # the unchanged day: not rewritten
    manifest = read_manifest(parts[day])
    assert manifest is not None
    assert manifest.content_checksum != old_checksum
    assert is_complete(parts[day])
    assert manifest.row_count == len(rows)  # readers see the data files only

    transition = f"{held['status']}->approved"
    records = list_changes(ObjectStoragePath(str(parts[day])))
    assert len(records) == 2  # the first landing, then this change
    record = records[-1]
    assert (record.from_checksum, record.to_checksum) == (old_checksum, manifest.content_checksum)
    assert record.transitions == {transition: 1}
    assert record.ids[transition] == [held["conversion_id"]]
    assert (record.new, record.removed, record.updated) == (0, 0, 1)
    assert record.ids["updated"] == [amended["conversion_id"]]
    assert record.run_id == "scheduled__run_1"

    # The event names the changed day only, with its counts.
    event = ctx["outlet_events"][dataset_asset("conversions")]
    assert event.partition_keys == {f"date={day}"}
    [announced] = event.extra["partitions"]
    assert announced["date"] == day
    assert announced["transitions"] == {transition: 1}
    assert (announced["new"], announced["removed"], announced["updated"]) == (0, 0, 1)
    assert announced["previous_checksum"] == old_checksum
    assert announced["changes_file"] == record.file_name

    # A retry of that run (it crashed after publishing) ends as the clean run did: the same
    # change announced, nothing rewritten; another run finds nothing to announce.
    after = _files_state(parts[day])
    retry_ctx = {**interval_context(_next_day(day)), "run_id": "scheduled__run_1"}
    retry = conversions_op(tmp_path, lookback_days=2, format=fmt).execute(retry_ctx)
    assert retry["changed"] == [day]
    assert retry_ctx["outlet_events"][dataset_asset("conversions")].extra == event.extra
    assert _files_state(parts[day]) == after
    with pytest.raises(AirflowSkipException):
        conversions_op(tmp_path, lookback_days=2, format=fmt).execute(
            {**interval_context(_next_day(day)), "run_id": "scheduled__run_2"}
        )
    assert _files_state(parts[day]) == after


def test_the_published_event_carries_each_partitions_verdict(
    sandbox, network_conn, tmp_path, day
) -> None:
    """The daily DAG's publish step: each announced day with this run's verdict of its content,
    never one flag for the whole event."""
    from affiliate_network.operators.reconciliation import ReconciliationOperator

    earlier = (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()
    conversions_op(tmp_path, outlets=[]).execute(interval_context(earlier, days=2))
    reconciliation = ReconciliationOperator(
        task_id="reconcile", base_path=str(tmp_path), date=day, outlets=[],
        hook_kwargs=dict(FAST_RETRIES),
    ).execute({})  # fmt: skip
    publish = PublishChangesOperator(
        task_id="publish", base_path=str(tmp_path), reconciliation_task_id="reconcile"
    )
    context = {**interval_context(day), "run_id": "scheduled__1"}
    publish.publish(context, reconciliation)
    [asset] = publish.outlets
    extra = context["outlet_events"][asset].extra
    assert "reconciled" not in extra
    by_day = {p["date"]: p for p in extra["partitions"]}
    assert sorted(by_day) == [earlier, day]
    assert by_day[day]["reconciled"] is True
    assert by_day[day]["reconciliation"] == reconciliation["partitions"][0]
    assert by_day[earlier]["reconciled"] is None  # nobody compared it
    assert by_day[earlier]["reconciliation"]["verdict"] == "not_compared"


# -- a day before the network's data ---------------------------------------------------------


def test_a_day_before_the_networks_data_is_refused_not_landed_empty(
    sandbox, network_conn, tmp_path, monkeypatch
) -> None:
    """The network answers a day before its data with 0 rows; landed, that day looked like a
    day without conversions. The first day (env, or the argument) refuses it, sending
    nothing; trailing days before it are left out of the re-pull."""
    first = dt.date.fromisoformat(sandbox.catalog()["first_date"])
    before = (first - dt.timedelta(days=1)).isoformat()
    base = tmp_path / "data"
    monkeypatch.setenv("AFFILIATE_NETWORK_FIRST_DAY", first.isoformat())
    sandbox.clear_requests()
    with pytest.raises(ConfigValidationError, match=rf"day {before} is before .* {first}"):
        conversions_op(base, outlets=[]).execute(interval_context(before))
    assert list_partitions(base, "conversions") == {}
    assert sandbox.request_counts().get("by_route", {}) == {}
    # The argument wins over the environment.
    monkeypatch.delenv("AFFILIATE_NETWORK_FIRST_DAY")
    with pytest.raises(ConfigValidationError, match="first_day"):
        conversions_op(base, outlets=[], first_day=first.isoformat()).execute(
            interval_context(before)
        )
    # A trailing re-pull of 3 days before first+2 lands first and first+1 only.
    run_day = (first + dt.timedelta(days=2)).isoformat()
    summary = conversions_op(
        base, outlets=[], lookback_days=3, first_day=first.isoformat()
    ).execute(interval_context(run_day))
    expected = [first.isoformat(), (first + dt.timedelta(days=1)).isoformat()]
    assert summary["lands"] == expected
    assert list(list_partitions(base, "conversions")) == [f"date={d}" for d in expected]
