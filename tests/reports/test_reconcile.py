"""Reconciliation of a landed day with the network's own aggregated report (real sandbox)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from decimal import Decimal
from pathlib import Path

import pytest

from affiliate_network.exceptions import ConfigValidationError, ReconciliationError
from affiliate_network.partitions.manifest import is_complete, list_partitions, read_manifest
from affiliate_network.partitions.write import write_partition
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.reconcile import (
    COMPARISON_NAME,
    Tolerance,
    reconcile_day,
)
from affiliate_network.reports.schema import conversion_schema
from affiliate_network.reports.storage import partition_files

LOG = logging.getLogger("test")


@pytest.fixture
def day(sandbox) -> dt.date:
    return dt.date.fromisoformat(sandbox.catalog()["last_date"]) - dt.timedelta(days=1)


def _request(day: dt.date) -> ConversionPull:
    return ConversionPull(day, 67, currency_id="USD", show_events=True)


def _land(hook, base: Path, day: dt.date) -> dict:
    return land_conversion_day(
        hook,
        str(base),
        _request(day),
        page_size=500,
        consistency_retries=1,
        log=LOG,
    )


def test_a_clean_day_reconciles_and_spends_no_granular_query(hook, tmp_path, day) -> None:
    base = tmp_path / "data"
    landed = _land(hook, base, day)
    files_before = partition_files(base, "conversions")
    used_before = hook.granular_budget().used

    summary = reconcile_day(hook, base, day, log=LOG)

    assert summary["reconciled"] is True
    assert summary["differences"] == 0
    assert summary["cells"] > 10
    assert summary["granular_queries"] == 0
    assert hook.granular_budget().used == used_before  # non-granular columns only
    # Totals per currency: the sandbox's offers pay in USD.
    assert summary["currencies"] == ["USD"]
    totals = summary["totals"]["USD"]
    assert totals["landed"] == totals["network"]
    assert int(totals["network"]["cv"]) > 0
    assert Decimal(totals["network"]["payout"]) > 0
    assert Decimal(totals["network"]["revenue"]) > 0
    # The comparison sits beside the manifest; readers and manifests do not see it.
    part = Path(landed["path"])
    doc = json.loads((part / COMPARISON_NAME).read_text())
    assert doc["reconciled"] is True
    assert doc["date"] == day.isoformat()
    assert doc["manifest_checksum"] == read_manifest(part).content_checksum
    assert len(doc["cells"]) == summary["cells"]
    assert doc["request"]["columns"] == ["affiliate", "offer"]
    assert {c["currency"] for c in doc["cells"]} == {"USD"}
    assert is_complete(part)
    assert partition_files(base, "conversions") == files_before
    assert COMPARISON_NAME not in {e.name for e in read_manifest(part).files}
    assert list(list_partitions(base, "conversions")) == [f"date={day.isoformat()}"]
    # Readable like the data beside it (the umask's permissions, not a temp file's 0600).
    assert (part / COMPARISON_NAME).stat().st_mode & 0o777 == (
        part / "_manifest.json"
    ).stat().st_mode & 0o777
    # The same report with a granular column is counted: the count above is live.
    hook.network_entity_table(
        from_date=day, to_date=day, columns=["affiliate", "country"], timezone_id=67
    )
    assert hook.granular_budget().used == used_before + 1


def test_a_dropped_page_fails_naming_the_cell(hook, tmp_path, day) -> None:
    base = tmp_path / "data"
    request = _request(day).record()
    records = list(
        hook.iter_conversions(
            from_date=day, to_date=day, timezone_id=67, currency_id="USD", show_events=True
        )
    )
    page = 200
    lost = records[page : 2 * page]  # page 2 of 200 never arrived
    write_partition(
        base,
        "conversions",
        {"date": day.isoformat()},
        records[:page] + records[2 * page :],
        conversion_schema(),
        request=request,
    )
    lost_conversions = [r for r in lost if not r["is_event"] and r["status"] == "approved"]
    assert lost_conversions
    first = lost_conversions[0]["relationship"]
    cell = (
        f"affiliate {first['affiliate']['network_affiliate_id']} "
        f"offer {first['offer']['network_offer_id']} in USD"
    )

    with pytest.raises(ReconciliationError) as info:
        reconcile_day(hook, base, day, max_cells=1000, log=LOG)

    err = info.value
    assert err.day == day.isoformat()
    assert cell in str(err)
    assert err.differences
    assert err.differences == len(err.cells)
    assert any(line.startswith(cell + ":") for line in err.cells)
    # The default names the first 20 cells and says how many more differ.
    with pytest.raises(ReconciliationError) as short:
        reconcile_day(hook, base, day, log=LOG)
    assert len(short.value.cells) == min(20, err.differences)
    if err.differences > 20:
        assert f"and {err.differences - 20} more" in str(short.value)
    # The network reports more than was landed: exactly the lost rows.
    lost_cv = len(lost_conversions)
    assert int(err.totals["USD"]["difference"]["cv"]) == lost_cv
    lost_payout = sum(Decimal(str(r["payout"])) for r in lost if r["status"] == "approved")
    assert Decimal(err.totals["USD"]["difference"]["payout"]) == lost_payout
    comparison = json.loads(Path(err.comparison_path).read_text())
    assert comparison["reconciled"] is False
    assert len(comparison["differing"]) == err.differences


def test_a_status_changed_after_landing_fails_naming_the_cell(hook, sandbox, tmp_path, day):
    base = tmp_path / "data"
    _land(hook, base, day)
    held = [
        r
        for r in hook.iter_conversions(
            from_date=day, to_date=day, timezone_id=67, currency_id="USD", show_events=False
        )
        if r["status"] == "pending"
    ]
    assert held, "the sandbox day has on-hold conversions"
    target = held[0]
    rel = target["relationship"]
    on_hold_id = (
        rel["on_hold_snapshots"][0]["on_hold_conversion_id"]
        if isinstance(rel.get("on_hold_snapshots"), list)
        else None
    )
    assert on_hold_id
    # The network approves it after the day landed: its report counts it, the partition not.
    assert hook.set_on_hold_status([on_hold_id], "approved") is True
    affiliate = rel["affiliate"]["network_affiliate_id"]
    offer = rel["offer"]["network_offer_id"]

    with pytest.raises(ReconciliationError) as info:
        reconcile_day(hook, base, day, log=LOG)

    err = info.value
    assert f"affiliate {affiliate} offer {offer} in USD: cv landed" in str(err)
    assert err.differences == 1
    (line,) = err.cells
    payout = Decimal(str(target["payout"]))
    assert line.startswith(f"affiliate {affiliate} offer {offer} in USD: cv landed ")
    assert "(difference 1)" in line
    assert f"(difference {payout})" in line
    comparison = json.loads(Path(err.comparison_path).read_text())
    (cell,) = comparison["differing"]
    assert (cell["affiliate"], cell["offer"], cell["currency"]) == (affiliate, offer, "USD")
    assert cell["difference"]["cv"] == 1
    assert Decimal(cell["difference"]["payout"]) == payout


def test_warn_mode_and_tolerance(hook, sandbox, tmp_path, day) -> None:
    base = tmp_path / "data"
    request = _request(day).record()
    records = list(
        hook.iter_conversions(
            from_date=day, to_date=day, timezone_id=67, currency_id="USD", show_events=True
        )
    )
    dropped = next(r for r in records if not r["is_event"] and r["status"] == "approved")
    write_partition(
        base,
        "conversions",
        {"date": day.isoformat()},
        [r for r in records if r is not dropped],
        conversion_schema(),
        request=request,
    )
    summary = reconcile_day(hook, base, day, on_mismatch="warn", log=LOG)
    assert summary["reconciled"] is False
    assert summary["differences"] == 1
    # One conversion and its money within the tolerance: it reconciles.
    amount = max(Decimal(str(dropped["payout"])), Decimal(str(dropped["revenue"])))
    tolerant = Tolerance.of(money=str(amount), count=1)
    assert reconcile_day(hook, base, day, tolerance=tolerant, log=LOG)["reconciled"] is True


def test_bad_settings_are_refused(hook, tmp_path, day) -> None:
    with pytest.raises(ConfigValidationError):
        Tolerance.of(money="-1")
    with pytest.raises(ConfigValidationError):
        Tolerance.of(count="x")
    with pytest.raises(ConfigValidationError):
        reconcile_day(hook, tmp_path, day, on_mismatch="ignore")
