"""The window an on-hold review looks at, in the network's timezone."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from affiliate_network.exceptions import ConfigValidationError


@dataclass(frozen=True)
class ReviewWindow:
    """Where a review looks, in the network's timezone.

    :param timezone_id: the API's id of the network's reporting timezone.
    :param timezone: its IANA name.
    :param as_of: the review's "now" (``YYYY-MM-DD hh:mm:ss`` local): nothing later is seen.
    :param as_of_ts: the same, in unix seconds.
    :param decide_from: first local day whose conversions are decided.
    :param decide_from_ts: its local midnight, in unix seconds.
    :param decide_to_ts: the local midnight after ``to_date`` (conversions before it are decided).
    :param to_date: the local day of ``as_of`` (last day decided).
    :param pull_from: first local day pulled: ``decide_from`` minus the aggregates' look-back.
    :param pull_to: end of the pull, ``as_of`` (the documented ``YYYY-MM-DD hh:mm:ss`` form).
    """

    timezone_id: int
    timezone: str
    as_of: str
    as_of_ts: float
    decide_from: str
    decide_from_ts: float
    decide_to_ts: float
    to_date: str
    pull_from: str
    pull_to: str


def review_window(
    *,
    timezone_id: int | str | None,
    lookback_days: int,
    to_date: str | None,
    as_of: str | None,
    horizon_hours: float,
) -> ReviewWindow:
    """The window of a review as of ``as_of`` (default: now), in the network's timezone.

    ``timezone_id`` None takes the network's reporting timezone from ``include/network.yaml``
    (there is no default of the review's own).
    """
    import math
    import zoneinfo

    import pendulum

    from affiliate_network.settings import resolve_timezone

    tz_id, tz_name = resolve_timezone(timezone_id, None)
    tz = zoneinfo.ZoneInfo(tz_name)
    now = dt.datetime.now(dt.UTC)
    if as_of:
        try:
            moment = pendulum.parse(str(as_of), tz="UTC")
        except Exception as err:  # pendulum raises several parser errors
            raise ConfigValidationError(f"as_of {as_of!r} is not an ISO date-time") from err
        if not isinstance(moment, pendulum.DateTime):  # a duration (P1D) parses too
            raise ConfigValidationError(f"as_of {as_of!r} is not an ISO date-time")
        moment_utc = dt.datetime.fromtimestamp(moment.timestamp(), dt.UTC)
    else:
        moment_utc = now
    day: dt.date | None = None
    if to_date:
        try:
            day = dt.date.fromisoformat(str(to_date).strip()[:10])
        except ValueError as err:
            raise ConfigValidationError(f"to_date {to_date!r} is not a YYYY-MM-DD date") from err
        end_of_day = dt.datetime(day.year, day.month, day.day, 23, 59, 59, tzinfo=tz)
        if not as_of:
            moment_utc = min(now, end_of_day.astimezone(dt.UTC))
    local = moment_utc.astimezone(tz)
    last = day if day is not None else local.date()
    first = last - dt.timedelta(days=lookback_days - 1)
    horizon = dt.timedelta(hours=horizon_hours)
    back = dt.timedelta(days=math.ceil(horizon_hours / 24))
    start = dt.datetime(first.year, first.month, first.day, tzinfo=tz)
    after_last = last + dt.timedelta(days=1)
    end = dt.datetime(after_last.year, after_last.month, after_last.day, tzinfo=tz)
    # Windowed aggregates look both ways: pull the horizon after the last day too (up to as_of).
    pull_end = min(moment_utc, (end + horizon - dt.timedelta(seconds=1)).astimezone(dt.UTC))
    return ReviewWindow(
        timezone_id=tz_id,
        timezone=tz_name,
        as_of=local.strftime("%Y-%m-%d %H:%M:%S"),
        as_of_ts=moment_utc.timestamp(),
        decide_from=first.isoformat(),
        decide_from_ts=start.timestamp(),
        decide_to_ts=end.timestamp(),
        to_date=last.isoformat(),
        pull_from=(first - back).isoformat(),
        pull_to=pull_end.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S"),
    )
