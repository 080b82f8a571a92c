"""reports.window: the days a report run lands, from plain dates (no Airflow task context)."""

from __future__ import annotations

import datetime as dt

import pendulum
import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.reports.window import (
    MAX_WINDOW_DAYS,
    last_complete_day,
    report_window,
    window_days,
)

D = dt.date(2026, 3, 10)


def test_a_daily_interval_is_its_first_day() -> None:
    start = pendulum.datetime(2026, 3, 10, tz="UTC")
    assert report_window(timezone="UTC", interval_start=start, interval_end=start.add(days=1)) == (
        D,
        D,
    )


def test_the_interval_is_read_in_the_network_timezone() -> None:
    # [D 00:00, D+1 00:00) New York time is 05:00 UTC to 05:00 UTC: still day D over there.
    start = pendulum.datetime(2026, 3, 10, tz="America/New_York").in_timezone("UTC")
    window = report_window(
        timezone="America/New_York", interval_start=start, interval_end=start.add(days=1)
    )
    assert window == (D, D)
    # The same instants read as UTC span two days.
    assert report_window(timezone="UTC", interval_start=start, interval_end=start.add(days=1)) == (
        D,
        D + dt.timedelta(days=1),
    )


def test_an_empty_interval_still_means_its_day() -> None:
    start = pendulum.datetime(2026, 3, 10, tz="UTC")
    assert report_window(timezone="UTC", interval_start=start, interval_end=start) == (D, D)


def test_explicit_dates_win_over_the_interval() -> None:
    start = pendulum.datetime(2026, 1, 1, tz="UTC")
    assert report_window(
        timezone="UTC",
        from_date="2026-01-30",
        to_date=dt.date(2026, 2, 1),
        interval_start=start,
        interval_end=start.add(days=1),
    ) == (dt.date(2026, 1, 30), dt.date(2026, 2, 1))
    assert report_window(timezone="UTC", from_date="2026-03-10T00:00:00") == (D, D)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"from_date": "2026-03-10", "to_date": "2026-03-09"}, "is after"),
        ({"from_date": "2024-01-01", "to_date": "2026-01-01"}, f"{MAX_WINDOW_DAYS} days"),
        ({"from_date": "10/03/2026"}, "not a YYYY-MM-DD date"),
        ({"interval_start": pendulum.datetime(2026, 3, 10, tz="UTC")}, "pass from_date"),
        ({}, "pass from_date"),
    ],
)
def test_bad_windows_fail_before_any_request(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigValidationError, match=message):
        report_window(timezone="UTC", **kwargs)


def test_the_last_complete_day_is_the_day_before_run_after_in_the_network_timezone() -> None:
    run_after = pendulum.datetime(2026, 3, 11, 3, 0, tz="UTC")
    assert last_complete_day(run_after, "UTC") == D
    # 03:00 UTC on the 11th is still the 10th in New York: the day before is the 9th.
    assert last_complete_day(run_after, "America/New_York") == dt.date(2026, 3, 9)
    with pytest.raises(ConfigValidationError, match="pass from_date"):
        last_complete_day(None, "UTC")


def test_window_days_and_the_trailing_look_back() -> None:
    assert window_days(D, D + dt.timedelta(days=2)) == [
        D,
        D + dt.timedelta(days=1),
        D + dt.timedelta(days=2),
    ]
    assert window_days(D, D, "3") == [dt.date(2026, 3, 7), dt.date(2026, 3, 8), dt.date(2026, 3, 9)]
    assert window_days(D, D, 0) == []
    assert window_days(D, D, "") == [D]
    with pytest.raises(ConfigValidationError, match=">= 0"):
        window_days(D, D, -1)
    with pytest.raises(ConfigValidationError, match="must be an integer"):
        window_days(D, D, "seven")
