"""The window an on-hold review looks at, in the network's timezone."""

from __future__ import annotations

import datetime as dt
import zoneinfo
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
    :param pull_from: first local day pulled: the local day of ``decide_from``'s midnight minus
        the aggregates' look-back, counted in absolute time (a 23-hour day is not a 24-hour one).
    :param pull_to: the ``to`` sent for the end of the pull (the documented
        ``YYYY-MM-DD hh:mm:ss`` form), chosen so that every reading of it is at or after
        ``pull_to_ts``: in the hour a fall-back repeats, a wall time names two instants.
    :param pull_from_ts: local midnight of ``pull_from``, in unix seconds.
    :param pull_to_ts: the instant the pull ends (inclusive): ``as_of`` or, for a window ending
        earlier, its last day plus the look-ahead. Records after it are dropped client-side.
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
    pull_from_ts: float
    pull_to_ts: float


def _readings(text: str, tz: zoneinfo.ZoneInfo) -> tuple[float, float]:
    """Unix seconds of both readings of a local ``YYYY-MM-DD hh:mm:ss`` (equal unless the wall
    time is repeated by a fall-back: then the first and the second occurrence)."""
    naive = dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
    first = naive.replace(tzinfo=tz, fold=0).timestamp()
    second = naive.replace(tzinfo=tz, fold=1).timestamp()
    return min(first, second), max(first, second)


def local_bound(instant: float, tz: zoneinfo.ZoneInfo, *, end: bool) -> str:
    """A local ``YYYY-MM-DD hh:mm:ss`` for a timed ``from`` (``end`` False) or an inclusive ``to``
    that covers ``instant`` however the server reads a repeated wall time.

    The form has no offset, so in the hour a fall-back repeats one text names two instants an
    hour apart. A ``to`` is moved later until even its earlier reading is at or after
    ``instant``, a ``from`` earlier until even its later reading is at or before it; the pull
    may then return a little more than asked, which the caller drops by unix timestamp.

    :param instant: unix seconds.
    :param tz: the timezone of the request's ``timezone_id``.
    :param end: a ``to`` bound (else a ``from``).
    """
    moment = float(int(instant))  # the form has whole seconds; the floor keeps ``to`` inclusive
    text = ""
    for _ in range(4):  # one step leaves a repeated hour; the bound is for a runaway tz table
        text = dt.datetime.fromtimestamp(moment, tz).strftime("%Y-%m-%d %H:%M:%S")
        early, late = _readings(text, tz)
        if end and early < int(instant):
            moment += int(instant) - early
        elif not end and late > int(instant):
            moment -= late - int(instant)
        else:
            return text
    return text


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
    start = dt.datetime(first.year, first.month, first.day, tzinfo=tz)
    after_last = last + dt.timedelta(days=1)
    end = dt.datetime(after_last.year, after_last.month, after_last.day, tzinfo=tz)
    # The look-back in absolute time: aware-datetime arithmetic in one zone is wall-clock
    # arithmetic, and whole local days are 23 or 25 hours around a DST change.
    pull_start = (start.astimezone(dt.UTC) - horizon).astimezone(tz).date()
    pull_start_at = dt.datetime(pull_start.year, pull_start.month, pull_start.day, tzinfo=tz)
    # Windowed aggregates look both ways: pull the horizon after the last day too (up to as_of).
    pull_end = min(moment_utc, end.astimezone(dt.UTC) + horizon - dt.timedelta(seconds=1))
    return ReviewWindow(
        timezone_id=tz_id,
        timezone=tz_name,
        as_of=local.strftime("%Y-%m-%d %H:%M:%S"),
        as_of_ts=moment_utc.timestamp(),
        decide_from=first.isoformat(),
        decide_from_ts=start.timestamp(),
        decide_to_ts=end.timestamp(),
        to_date=last.isoformat(),
        pull_from=pull_start.isoformat(),
        pull_to=local_bound(pull_end.timestamp(), tz, end=True),
        pull_from_ts=pull_start_at.timestamp(),
        pull_to_ts=pull_end.timestamp(),
    )
