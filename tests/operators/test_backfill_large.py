"""A backfill of the daily conversion tasks on the sandbox's large world.

The daily DAG's conversion tasks (pull the run's day, re-pull the trailing day, reconcile every
day landed, publish) run for consecutive logical dates, each at the moment a scheduler runs it
(the sandbox's clock just after the day), with real HTTP to the sandbox and real files: offers
in six currencies (JPY without a minor unit, KWD with three), a report currency (EUR) that most
offers do not pay in, over 10,000 (affiliate, offer) cells a day, conversions recorded hours
late and rare deletions, so the trailing re-pull finds days changed and re-lands them. Every
landed partition, new or re-landed, must reconcile, and its money must equal the sandbox's
truth per currency to the minor unit at the moment it was landed; a row removed from a landed
file must fail its cell, and only it.

The suite runs :data:`TEST_DAYS` logical dates (the CI budget); ``bench/bench_backfill.py``
runs the same :func:`backfill` over 30 and prints its figures.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from affiliate_network.exceptions import ReconciliationError
from affiliate_network.operators.conversion_report import ConversionReportOperator
from affiliate_network.operators.reconciliation import ReconciliationOperator
from tests.support.daily_run import FAST_RETRIES, DailyRun
from tests.support.landed_money import MINOR_DIGITS, landed_money, partition_files, truth_money

#: Logical dates of the backfill in the suite (``bench/bench_backfill.py``: 30).
TEST_DAYS = 5
#: Days re-pulled before each run's own (the daily DAG's ``trailing_days``).
TRAILING_DAYS = 1
#: Base conversions a day: the large world's 300 x 60 couples, over 10,000 of them with
#: conversions every day (about 10,500; asserted per day from the truth), at about half the
#: large world's default 30,000 (every day costs CI time twice: landed, then re-landed).
CONVERSIONS_PER_DAY = 16_000
#: The report currency the days are pulled with (most offers pay in another one).
REPORT_CURRENCY = "EUR"
CURRENCIES = {"USD", "EUR", "GBP", "JPY", "KWD", "IDR"}


#: Minor units per currency (docs/sandbox.md "Currencies"), written out: a changed one is caught.
class LargeRun(DailyRun):
    """The daily run, pulling in :data:`REPORT_CURRENCY`."""

    def _pull_op(self, task_id: str, **kwargs: Any) -> ConversionReportOperator:
        return ConversionReportOperator(
            task_id=task_id, base_path=str(self.base), timezone_id=67, network_timezone="UTC",
            currency_id=REPORT_CURRENCY, show_events=True, outlets=[],
            hook_kwargs=dict(FAST_RETRIES), **kwargs,
        )  # fmt: skip


def reset_world(sandbox: Any, days: int) -> list[dt.date]:
    """The sandbox as the large world (days enough for a backfill of ``days`` logical dates
    and their trailing days); the logical dates, ending the day before its last."""
    end = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    sandbox.reset(
        world="large", days=days + TRAILING_DAYS + 1, conversions_per_day=CONVERSIONS_PER_DAY
    )
    return [end - dt.timedelta(days=days - n) for n in range(days)]


def partition(base: Path, day: str) -> Path:
    return base / "conversions" / f"date={day}"


def _check_partition(
    sandbox: Any, base: Path, day: str, verdict: dict[str, Any], kept: bool
) -> None:
    """One landed partition: its verdict, its comparison and its money against the truth."""
    part = partition(base, day)
    manifest = json.loads((part / "_manifest.json").read_text())
    assert (verdict["verdict"], verdict["reconciled"]) == ("reconciled", True), verdict
    assert verdict["checksum"] == manifest["content_checksum"], day
    assert verdict["kept"] is kept, (day, verdict)
    doc = json.loads((part / "_reconciliation.json").read_text())
    assert (doc["manifest_checksum"], doc["reconciled"]) == (verdict["checksum"], True), day
    truth = sandbox.truth_money(day, timezone_id=67, cells=False)
    assert truth["cells_with_conversions"] > 10_000, day
    money = landed_money(part)
    assert money == truth_money(truth), day
    for (currency, kind), (_rows, payout, revenue) in money.items():
        for amount in (payout, revenue):  # to the minor unit, never beyond it
            assert amount == round(amount, MINOR_DIGITS[currency]), (day, currency, kind)
    assert set(doc["totals"]) == CURRENCIES, day
    for currency, t in truth["currencies"].items():
        for side in ("landed", "network"):
            got = doc["totals"][currency][side]
            assert got["cv"] == t["entity"]["cv"], (day, currency, side)
            for f in ("payout", "revenue"):
                assert Decimal(got[f]) == Decimal(t["entity"][f]), (day, currency, side, f)


def backfill(
    sandbox: Any,
    base: Path,
    logical: list[dt.date],
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the daily conversion tasks for each of ``logical``, oldest first, each at its
    scheduled moment, and check every partition each run landed (see the module doc).

    :param sandbox: the running sandbox, reset by :func:`reset_world`.
    :param base: the output base.
    :param logical: the runs' logical dates.
    :param on_run: called with each run's figures as it ends.
    :returns: per run: ``day``, ``landed`` and ``relanded`` days, ``rows`` pulled, ``seconds``
        (the four tasks, without the checks).
    """
    runs = []
    for day in logical:
        # A day's run starts just after the day ends (10 minutes: the sandbox's last events
        # come 5 minutes after its last conversions).
        sandbox.set_clock(dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0, 10), dt.UTC))
        run = LargeRun(
            base, day.isoformat(), f"backfill__{day.isoformat()}T00:00:00+00:00",
            trailing_days=TRAILING_DAYS,
        )  # fmt: skip
        started = time.perf_counter()
        pulled = run.pull()
        summary = run.reconcile()
        extra = run.publish()
        seconds = time.perf_counter() - started
        landed = sorted({str(p["date"]) for s in pulled.values() for p in s["partitions"]})
        assert landed == [
            (day - dt.timedelta(days=n)).isoformat() for n in range(TRAILING_DAYS, -1, -1)
        ]
        trailing = pulled["repull_trailing_window"]["partitions"]
        relanded = sorted(str(p["date"]) for p in trailing if p["changed"])
        verdicts = {v["date"]: v for v in summary["partitions"]}
        assert sorted(verdicts) == landed
        assert summary["days"]["reconciled"] == landed, summary["days"]
        for d in landed:
            # A re-landed day is compared again; a day re-pulled unchanged keeps its verdict.
            kept = d != day.isoformat() and d not in relanded
            _check_partition(sandbox, base, d, verdicts[d], kept)
        announced = {p["date"]: p for p in extra["partitions"]}
        assert set(announced) <= set(landed)
        for d, p in announced.items():
            assert (p["reconciled"], p["checksum"]) == (True, verdicts[d]["checksum"]), d
        figures = {
            "day": day.isoformat(),
            "landed": landed,
            "relanded": relanded,
            "rows": sum(s["rows"] for s in pulled.values()),
            "seconds": seconds,
        }
        runs.append(figures)
        if on_run is not None:
            on_run(figures)
    return runs


def plant_missing_row(sandbox: Any, base: Path, day: str, currency: str = "KWD") -> None:
    """Remove one approved ``currency`` conversion from the day's landed file (the manifest's
    size and digest follow: a complete partition that silently lost a row); its cell alone
    must differ, by exactly that row."""
    part = partition(base, day)
    [path] = partition_files(part)
    table = pq.read_table(path)
    rows = table.select(
        ["conversion_id", "currency_id", "status", "is_event", "payout", "revenue",
         "rel_network_affiliate_id", "rel_network_offer_id"]
    ).to_pylist()  # fmt: skip
    gone = next(
        r
        for r in rows
        if r["currency_id"] == currency and r["status"] == "approved" and not r["is_event"]
    )
    pq.write_table(table.filter(pc.not_equal(table["conversion_id"], gone["conversion_id"])), path)
    data = path.read_bytes()
    manifest = json.loads((part / "_manifest.json").read_text())
    manifest["files"][0].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (part / "_manifest.json").write_text(json.dumps(manifest))

    op = ReconciliationOperator(
        task_id="reconcile_planted", base_path=str(base), date=day, settle=False, outlets=[],
        network_timezone="UTC", timezone_id=67, hook_kwargs=dict(FAST_RETRIES),
    )  # fmt: skip
    try:
        op.execute({})
    except ReconciliationError as err:
        failure = err
    else:
        raise AssertionError(f"{day} reconciled without the planted row {gone['conversion_id']}")
    cell = (gone["rel_network_affiliate_id"], gone["rel_network_offer_id"], currency)
    assert failure.differences == 1, failure.cells
    [line] = failure.cells
    assert line.startswith(f"affiliate {cell[0]} offer {cell[1]} in {currency}: cv "), line
    assert "(difference 1)" in line, line
    assert f"(difference {gone['payout'].normalize():f})" in line, line
    doc = json.loads((part / "_reconciliation.json").read_text())
    assert [(c["affiliate"], c["offer"], c["currency"]) for c in doc["differing"]] == [cell]
    for name, t in doc["totals"].items():
        if name == currency:
            diff = t["difference"]
            assert (diff["cv"], Decimal(diff["payout"]), Decimal(diff["revenue"])) == (
                1,
                gone["payout"],
                gone["revenue"],
            )
        else:
            assert t["difference"] == {"cv": 0, "payout": "0", "revenue": "0"}, name


def test_a_backfill_reconciles_every_landed_day_with_the_truth_and_a_lost_row_fails_its_cell(
    sandbox, network_conn, tmp_path
) -> None:
    logical = reset_world(sandbox, TEST_DAYS)
    runs = backfill(sandbox, tmp_path, logical)
    assert sum(len(r["landed"]) for r in runs) == TEST_DAYS * (TRAILING_DAYS + 1)
    # Late records and deletions: most trailing re-pulls found their day changed and re-landed
    # it (each then compared again, above).
    relanded = [d for r in runs for d in r["relanded"]]
    assert len(relanded) >= TEST_DAYS // 2, relanded
    plant_missing_row(sandbox, tmp_path, logical[-1].isoformat())
