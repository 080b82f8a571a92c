"""include/network.yaml and reports.yaml: the one loader, checked against the API's timezone
table; every error names the file, the line and the field, before anything is sent."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pendulum
import pytest
from airflow.sdk.execution_time.context import OutletEventAccessors

from affiliate_network.api.timezones import TIMEZONES, id_for_name, name_for_id
from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.conversion_report import ConversionReportOperator
from affiliate_network.settings.models import (
    check_report_history,
    load_affiliate_report_targets,
    load_network_settings,
    resolve_timezone,
)
from affiliate_network.settings.paths import include_dir


@pytest.fixture
def include(tmp_path, monkeypatch) -> Path:
    """A private include/ folder holding copies of the shipped files."""
    for name in ("network.yaml", "reports.yaml"):
        (tmp_path / name).write_bytes((include_dir() / name).read_bytes())
    monkeypatch.setenv("AFFILIATE_NETWORK_INCLUDE_DIR", str(tmp_path))
    return tmp_path


def _network(include: Path, text: str) -> None:
    (include / "network.yaml").write_text(text)


def test_shipped_network_config_sends_67_for_utc() -> None:
    cfg = load_network_settings()
    assert (cfg.timezone, cfg.timezone_id, cfg.currency_id) == ("UTC", 67, "USD")


def test_documented_ids_of_the_public_reference() -> None:
    # Read on the public reference pages: 1 is Kiritimati (UTC+14), 67 UTC, 80 New York.
    assert name_for_id(1) == "Pacific/Kiritimati"
    assert name_for_id(16) == "Asia/Tokyo"
    assert name_for_id(67) == "UTC"
    assert name_for_id(80) == "America/New_York"
    assert name_for_id(85) == "America/Chicago"
    assert name_for_id(87) == "America/Denver"
    assert name_for_id(99) == "Pacific/Pago_Pago"
    assert sorted(TIMEZONES) == list(range(1, 100))
    assert id_for_name("Etc/UTC") == 67


def test_the_id_is_looked_up_from_the_name(include) -> None:
    _network(include, "timezone: America/New_York\ncurrency_id: usd\n")
    cfg = load_network_settings()
    assert (cfg.timezone, cfg.timezone_id, cfg.currency_id) == ("America/New_York", 80, "USD")


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("timezone: Mars/Olympus\n", r"network.yaml:1: timezone: .*Mars/Olympus"),
        (
            "timezone: America/New_Yrok\n",
            r"network.yaml:1: timezone: .*did you mean America/New_York",
        ),
        ("timezone: UTC\ntimezone_id: 150\n", r"network.yaml:2: timezone_id: .*150"),
        ("timezone: UTC\ntimezone_id: '67'\n", r"network.yaml:2: timezone_id: must be an integer"),
        # The old shipped value: 1 is Kiritimati, not UTC.
        (
            "timezone: UTC\ntimezone_id: 1\n",
            r"network.yaml:2: timezone_id: 1 is Pacific/Kiritimati",
        ),
        ("currency_id: USD\n", r"network.yaml:1: timezone: required"),
        ("timezone: UTC\ntimezon_id: 67\n", r"network.yaml:2: timezon_id: unknown .*'timezone_id'"),
        ("timezone: UTC\ncurrency_id: 12\n", r"network.yaml:2: currency_id: .*3-letter"),
        ("timezone: [UTC\n", r"network.yaml:\d+: not valid YAML"),
        (
            "timezone: UTC\ntimezone: America/New_York\n",
            r"network.yaml:2: timezone: key 'timezone' appears twice",
        ),
    ],
)
def test_bad_network_config_names_file_line_and_field(include, text, pattern) -> None:
    _network(include, text)
    with pytest.raises(ConfigValidationError, match=pattern):
        load_network_settings()


def test_network_config_that_is_not_utf8_names_the_byte(include) -> None:
    (include / "network.yaml").write_bytes(b"timezone: Europe/Z\xfcrich\n")
    with pytest.raises(ConfigValidationError, match=r"network.yaml:1: not UTF-8 text: byte 18"):
        load_network_settings()


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        ({"format": "csv"}, r"reports.yaml:\d+: affiliate_reports.affiliates\[1\].format"),
        (
            {"affiliate_id": "abc"},
            r"reports.yaml:\d+: affiliate_reports.affiliates\[1\].affiliate_id",
        ),
        ({"affiliate_id": 2001}, r"affiliates\[1\].affiliate_id: 2001 repeated"),
        ({"conn_id": ""}, r"affiliates\[1\].conn_id"),
        ({"colums": ["date"]}, r"affiliates\[1\].colums: unknown field .*did you mean 'columns'"),
    ],
)
def test_every_reports_entry_is_validated_when_the_config_loads(include, edit, pattern) -> None:
    import yaml

    doc = yaml.safe_load((include / "reports.yaml").read_text())
    doc["affiliate_reports"]["affiliates"][1].update(edit)
    (include / "reports.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigValidationError, match=pattern):
        load_affiliate_report_targets()


def test_operator_arguments_complete_each_other_from_the_table() -> None:
    assert resolve_timezone(80, None) == (80, "America/New_York")
    assert resolve_timezone("85", "") == (85, "America/Chicago")
    assert resolve_timezone(None, "Asia/Tokyo") == (16, "Asia/Tokyo")
    with pytest.raises(ConfigValidationError, match="timezone_id 1 is Pacific/Kiritimati"):
        resolve_timezone(1, "UTC")
    with pytest.raises(ConfigValidationError, match="timezone_id"):
        resolve_timezone(0, None)


def test_history_limit_refuses_days_older_than_365() -> None:
    today = dt.date(2026, 11, 25)
    check_report_history(dt.date(2025, 11, 25), "UTC", today=today)
    with pytest.raises(ConfigValidationError, match=r"2025-11-24 is older .*from 2025-11-25 on"):
        check_report_history(dt.date(2025, 11, 24), "UTC", today=today)


def _context(day: str) -> dict:
    start = pendulum.parse(day, tz="UTC")
    return {
        "data_interval_start": start,
        "data_interval_end": start.add(days=1),
        "outlet_events": OutletEventAccessors(),
    }


def test_bad_timezone_config_fails_the_task_before_any_request(
    include, sandbox, network_conn, tmp_path
) -> None:
    _network(include, "timezone: UTC\ntimezone_id: 1\n")
    sandbox.clear_requests()
    op = ConversionReportOperator(
        task_id="pull", affiliate_network_conn_id=network_conn, base_path=str(tmp_path)
    )
    day = sandbox.catalog()["last_date"]
    with pytest.raises(ConfigValidationError, match=r"network.yaml:2: timezone_id"):
        op.execute(_context(day))
    assert sandbox.request_counts()["total"] == 0


def test_backfill_of_a_day_beyond_the_history_is_refused_before_sending(
    sandbox, network_conn, tmp_path
) -> None:
    sandbox.clear_requests()
    old = (dt.date.today() - dt.timedelta(days=400)).isoformat()
    op = ConversionReportOperator(
        task_id="pull", affiliate_network_conn_id=network_conn, base_path=str(tmp_path)
    )
    with pytest.raises(ConfigValidationError, match="prior 365 days"):
        op.execute(_context(old))
    assert sandbox.request_counts()["total"] == 0
    assert not (tmp_path / "conversions").exists()
