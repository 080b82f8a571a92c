"""The review window's timezone comes from the network setting (``include/network.yaml``); the
review has no default of its own (issue 11)."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from pathlib import Path

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.review.window import ReviewWindow, review_window

WINDOW = {
    "lookback_days": 7,
    "to_date": "2026-11-20",
    "as_of": "2026-11-21T00:00:00+00:00",
    "horizon_hours": 24,
}


def test_the_shipped_setting_gives_utc_67() -> None:
    window = review_window(timezone_id=None, **WINDOW)
    assert window.timezone_id == 67
    assert window.timezone == "UTC"


def test_the_networks_timezone_is_followed(rules_include: Path) -> None:
    text = (rules_include / "network.yaml").read_text()
    text = text.replace("timezone: UTC\ntimezone_id: 67", "timezone: America/New_York")
    (rules_include / "network.yaml").write_text(text)
    window = review_window(timezone_id=None, **WINDOW)
    assert window.timezone_id == 80
    assert window.timezone == "America/New_York"
    # An explicit id is checked against the table, never trusted blindly.
    with pytest.raises(ConfigValidationError, match="timezone"):
        review_window(timezone_id=1000, **WINDOW)


# --- DST (issue 25, defect 3): the look-back and the as-of bound in absolute time -------------

NEW_YORK = zoneinfo.ZoneInfo("America/New_York")


def _midnight(day: str) -> float:
    d = dt.date.fromisoformat(day)
    return dt.datetime(d.year, d.month, d.day, tzinfo=NEW_YORK).timestamp()


def _readings(text: str) -> tuple[float, float]:
    """Both instants a server may read a local ``YYYY-MM-DD hh:mm:ss`` as (fold 0 and 1)."""
    naive = dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
    both = [naive.replace(tzinfo=NEW_YORK, fold=f).timestamp() for f in (0, 1)]
    return min(both), max(both)


def _sent_to(window: ReviewWindow) -> str:
    """The ``to`` the pull sends: the wall time of the window's end bound."""
    return f"{window.pull_to_bound:%Y-%m-%d %H:%M:%S}"


def _days(first: str, last: str) -> list[str]:
    start, stop = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    return [(start + dt.timedelta(days=i)).isoformat() for i in range((stop - start).days + 1)]


@pytest.mark.parametrize("horizon", [24, 36, 48])
def test_the_pull_covers_the_look_back_and_look_ahead_in_absolute_time(horizon) -> None:
    """Every decide day of March 2026 (spring forward 03-08) and of late October to mid
    November (fall back 11-01) in New York: the pull starts at a local midnight no later than
    decide_from's midnight minus the horizon (at most one day earlier), and ends no earlier
    than the horizon after the last decided day. Whole local days are 23 or 25 hours there:
    on 2026-03-09, 24 h before 00:00 EDT is 03-07 23:00 EST, in a day the old pull left out."""
    short: list[tuple[str, str, str]] = []
    windows = []
    for day in _days("2026-03-01", "2026-03-31") + _days("2026-10-25", "2026-11-15"):
        window = review_window(
            timezone_id=80,
            lookback_days=1,
            to_date=day,
            as_of=f"{dt.date.fromisoformat(day) + dt.timedelta(days=4)}T00:00:00Z",
            horizon_hours=horizon,
        )
        windows.append(window)
        look_back = window.decide_from_ts - horizon * 3600
        start = _midnight(window.pull_from.isoformat())  # read back from the texts sent
        end = window.decide_to_ts + horizon * 3600 - 1
        if not look_back - 25 * 3600 < start <= look_back or _readings(_sent_to(window))[0] < end:
            short.append((day, window.pull_from.isoformat(), _sent_to(window)))
    assert short == []
    for window in windows:
        assert window.pull_from_ts == _midnight(window.pull_from.isoformat())
        assert window.pull_to_ts == window.decide_to_ts + horizon * 3600 - 1


def test_the_as_of_bound_is_unambiguous_in_the_repeated_hour() -> None:
    """2026-11-01 01:00-01:59 happens twice in New York (EDT, then EST). An as_of in the second
    occurrence written as its wall time reads back an hour early as the first one: the pull
    would miss that hour's conversions. Every as_of of the night, each quarter hour: the ``to``
    sent covers as_of whichever occurrence the server reads, by less than an hour and a half."""
    start = dt.datetime(2026, 11, 1, 3, 0, tzinfo=dt.UTC)
    missed: list[tuple[str, str]] = []
    windows = []
    for quarter in range(24):
        as_of = start + dt.timedelta(minutes=15 * quarter)
        window = review_window(
            timezone_id=80,
            lookback_days=1,
            to_date=None,
            as_of=as_of.isoformat(),
            horizon_hours=24,
        )
        windows.append(window)
        early, late = _readings(_sent_to(window))
        if not as_of.timestamp() <= early <= late <= as_of.timestamp() + 5400:
            missed.append((as_of.isoformat(), _sent_to(window)))
    assert missed == []
    for window in windows:
        assert window.pull_to_ts == window.as_of_ts
