"""reports/pull.py: a conversion pull is a typed value; its manifest record gives it back."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.partitions.manifest import read_manifest
from affiliate_network.partitions.write import write_partition
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.reconcile import reconcile_day
from affiliate_network.reports.schema import conversion_schema

DAY = dt.date(2026, 3, 8)  # a DST day in America/New_York
PULL = ConversionPull(
    DAY,
    22,
    "America/New_York",
    currency_id="EUR",
    show_events=True,
    filters={"offer_id": [3, 5]},
    conn_id="affiliate_network_default",
)


def test_the_record_gives_the_same_pull_back() -> None:
    record = PULL.record()
    assert record["from"] == record["to"] == "2026-03-08"
    assert record["endpoint"] == "POST /networks/reporting/conversions"
    assert ConversionPull.from_record(record, "m.json") == PULL


def test_a_record_without_the_optional_keys_is_a_whole_day_pull() -> None:
    pull = ConversionPull.from_record({"from": "2026-03-08", "timezone_id": 67}, "m.json")
    assert pull == ConversionPull(DAY, 67)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"from": "08/03/2026"}, "request.from"),
        ({"to": "2026-03-09"}, "request.to"),
        ({"timezone_id": "22"}, "request.timezone_id"),
        ({"timezone_id": True}, "request.timezone_id"),
        ({"show_events": "yes"}, "request.show_events"),
        ({"currency_id": 978}, "request.currency_id"),
    ],
)
def test_a_bad_record_names_the_manifest_and_the_field(change: dict, field: str) -> None:
    record = {**PULL.record(), **change}
    with pytest.raises(ConfigValidationError, match=f"^data/date=2026-03-08/m.json: {field} "):
        ConversionPull.from_record(record, "data/date=2026-03-08/m.json")


def test_no_record_is_named() -> None:
    with pytest.raises(ConfigValidationError, match=r"m\.json: .*records no request"):
        ConversionPull.from_record(None, "m.json")


def test_a_landed_day_records_its_pull_and_reads_back_as_it(hook, sandbox, tmp_path) -> None:
    """Over real HTTP: the manifest holds the pull as asked (currency, flags, timezone), which
    a re-landing (the reconciliation's settle) reads back to ask the same again."""
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    pull = ConversionPull(day, 22, "America/New_York", currency_id="EUR", show_events=True)
    summary = land_conversion_day(
        hook, str(tmp_path), pull, page_size=500, consistency_retries=1,
        log=logging.getLogger("test"),
    )  # fmt: skip
    assert summary["date"] == day.isoformat()
    assert summary["rows"] > 0
    manifest = read_manifest(summary["path"])
    assert manifest is not None
    assert ConversionPull.from_record(manifest.request, "manifest") == pull


def test_a_reconciliation_names_the_manifest_field_it_cannot_read(hook, tmp_path) -> None:
    """A landed day whose manifest records no timezone is refused before any request, naming
    the manifest and the field (the reconciliation reads the pull through from_record)."""
    record = PULL.record()
    del record["timezone_id"]
    write_partition(
        tmp_path, "conversions", {"date": DAY.isoformat()}, [], conversion_schema(), request=record
    )
    before = hook.granular_budget().used
    with pytest.raises(ConfigValidationError) as caught:
        reconcile_day(hook, tmp_path, DAY)
    assert str(caught.value).startswith(
        f"{tmp_path}/conversions/date=2026-03-08/_manifest.json: request.timezone_id is None"
    )
    assert hook.granular_budget().used == before
