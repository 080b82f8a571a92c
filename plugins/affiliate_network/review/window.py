"""The window an on-hold review looks at, in the network's timezone."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass

from affiliate_network.exceptions import ConfigValidationError


def _midnight(day: dt.date, tz: zoneinfo.ZoneInfo) -> dt.datetime:
    """The local midnight that starts ``day``."""
    return dt.datetime(day.year, day.month, day.day, tzinfo=tz)


@dataclass(frozen=True)
class ReviewWindow:
    """Where a review looks, in the network's timezone: local days and aware instants, never
    their texts (the request's wall-time form is made where a request is built).

    :param timezone_id: the API's id of the network's reporting timezone.
    :param timezone: its IANA name.
    :param as_of: the review's "now" (aware, in ``timezone``): nothing later is seen.
    :param decide_from: first local day whose conversions are decided.
    :param to_date: the local day of ``as_of`` or the day asked for (last day decided).
    :param pull_from: first local day pulled: the local day of ``decide_from``'s midnight minus
        the aggregates' look-back, counted in absolute time (a 23-hour day is not a 24-hour one).
    :param pull_to_at: the instant the pull ends (inclusive, aware): ``as_of`` or, for a window
        ending earlier, its last day plus the look-ahead. Records after it are dropped
        client-side.
    """

    timezone_id: int
    timezone: str
    as_of: dt.datetime
    decide_from: dt.date
    to_date: dt.date
    pull_from: dt.date
    pull_to_at: dt.datetime

    @property
    def tz(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone)

    @property
    def decide_from_at(self) -> dt.datetime:
        """Local midnight of ``decide_from``."""
        return _midnight(self.decide_from, self.tz)

    @property
    def decide_to_at(self) -> dt.datetime:
        """The local midnight after ``to_date`` (conversions before it are decided)."""
        return _midnight(self.to_date + dt.timedelta(days=1), self.tz)

    @property
    def pull_from_at(self) -> dt.datetime:
        """Local midnight of ``pull_from``: the pull's first instant."""
        return _midnight(self.pull_from, self.tz)

    @property
    def pull_to_bound(self) -> dt.datetime:
        """The ``to`` sent for the end of the pull (its wall time in the documented
        ``YYYY-MM-DD hh:mm:ss`` form), chosen so that every reading of it is at or after
        ``pull_to_at``: in the hour a fall-back repeats, a wall time names two instants."""
        return local_bound(self.pull_to_at.timestamp(), self.tz, end=True)

    # Unix seconds of the instants: records carry ``conversion_unix_timestamp``.
    @property
    def as_of_ts(self) -> float:
        return self.as_of.timestamp()

    @property
    def decide_from_ts(self) -> float:
        return self.decide_from_at.timestamp()

    @property
    def decide_to_ts(self) -> float:
        return self.decide_to_at.timestamp()

    @property
    def pull_from_ts(self) -> float:
        return self.pull_from_at.timestamp()

    @property
    def pull_to_ts(self) -> float:
        return self.pull_to_at.timestamp()


def _readings(naive: dt.datetime, tz: zoneinfo.ZoneInfo) -> tuple[float, float]:
    """Unix seconds of both readings of a local wall time (equal unless the wall time is
    repeated by a fall-back: then the first and the second occurrence)."""
    first = naive.replace(tzinfo=tz, fold=0).timestamp()
    second = naive.replace(tzinfo=tz, fold=1).timestamp()
    return min(first, second), max(first, second)


def local_bound(instant: float, tz: zoneinfo.ZoneInfo, *, end: bool) -> dt.datetime:
    """A local time (aware, in ``tz``, whole seconds) whose wall time, sent as a timed ``from``
    (``end`` False) or an inclusive ``to``, covers ``instant`` however the server reads a
    repeated wall time.

    The form has no offset, so in the hour a fall-back repeats one text names two instants an
    hour apart. A ``to`` is moved later until even its earlier reading is at or after
    ``instant``, a ``from`` earlier until even its later reading is at or before it; the pull
    may then return a little more than asked, which the caller drops by unix timestamp.

    :param instant: unix seconds.
    :param tz: the timezone of the request's ``timezone_id``.
    :param end: a ``to`` bound (else a ``from``).
    """
    moment = float(int(instant))  # the form has whole seconds; the floor keeps ``to`` inclusive
    local = dt.datetime.fromtimestamp(moment, tz)
    for _ in range(4):  # one step leaves a repeated hour; the bound is for a runaway tz table
        local = dt.datetime.fromtimestamp(moment, tz)
        early, late = _readings(local.replace(tzinfo=None), tz)
        if end and early < int(instant):
            moment += int(instant) - early
        elif not end and late > int(instant):
            moment -= late - int(instant)
        else:
            return local
    return local


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

    from affiliate_network.settings.models import resolve_timezone

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
    start = _midnight(first, tz)
    end = _midnight(last + dt.timedelta(days=1), tz)
    # The look-back in absolute time: aware-datetime arithmetic in one zone is wall-clock
    # arithmetic, and whole local days are 23 or 25 hours around a DST change.
    pull_start = (start.astimezone(dt.UTC) - horizon).astimezone(tz).date()
    # Windowed aggregates look both ways: pull the horizon after the last day too (up to as_of).
    pull_end = min(moment_utc, end.astimezone(dt.UTC) + horizon - dt.timedelta(seconds=1))
    return ReviewWindow(
        timezone_id=tz_id,
        timezone=tz_name,
        as_of=local,
        decide_from=first,
        to_date=last,
        pull_from=pull_start,
        pull_to_at=pull_end.astimezone(tz),
    )
