"""Report windows: ``from``/``to`` and ``timezone_id`` -> a UTC ``[t0, t1)``.

What the public documentation says (reporting pages and the "Timezones" user guide), followed
here:

* ``from``/``to`` are ``YYYY-MM-DD`` (whole local days, ``to`` inclusive) or, on the conversion
  report, ``YYYY-MM-DD hh:mm:ss`` (that local second, ``to`` inclusive);
* the day boundaries are midnight in the requested ``timezone_id`` (DST included); without it,
  the network's default reporting timezone applies;
* the conversion report covers the prior 365 days only (older dates are an error); aggregated
  requests span one year at most.

The sandbox's "today" is its data's last day (``end_date``, today by default), so a world built
for a past period stays queryable. The error messages are the sandbox's own (not documented).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import Any

from affiliate_network_sandbox.errors import invalid
from affiliate_network_sandbox.timezones import TIMEZONES

#: The conversion report's documented history: the prior 365 days.
HISTORY_DAYS = 365
#: Aggregated requests: one year of range at most (366 days covers a leap year).
MAX_RANGE_DAYS = 366
# Unix timestamps of the generated data start in 1970; years past 9998 cannot be given an end.
_MIN = dt.datetime(1970, 1, 2)
_MAX = dt.datetime(9998, 12, 31)


def resolve_timezone(body: dict[str, Any], default_id: int) -> tuple[int, str]:
    """``(timezone_id, IANA name)`` of a request: its ``timezone_id`` or the network default."""
    tz = body.get("timezone_id")
    if tz is None:
        tz = default_id
    if isinstance(tz, bool) or not isinstance(tz, int) or tz not in TIMEZONES:
        raise invalid(f"timezone_id: unknown timezone_id (the API's ids are 1..{max(TIMEZONES)})")
    return tz, TIMEZONES[tz]


def _bound(value: Any, name: str, *, end: bool, allow_time: bool) -> tuple[dt.datetime, bool]:
    """A naive local datetime for ``from`` (start) or ``to`` (exclusive end); and if timed."""
    forms = "YYYY-MM-DD or YYYY-MM-DD hh:mm:ss" if allow_time else "YYYY-MM-DD"
    if not isinstance(value, str):
        raise invalid(f"{name} must be a {forms} string")
    text = value.strip()
    try:
        if len(text) == 10:
            day = dt.date.fromisoformat(text)
            moment, timed = dt.datetime(day.year, day.month, day.day), False
        elif allow_time and len(text) == 19 and text[10] == " ":
            moment, timed = dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S"), True
        else:
            raise ValueError(text)
    except ValueError:
        raise invalid(f"{name} must be a {forms} date") from None
    if not _MIN <= moment <= _MAX:
        raise invalid(f"{name}: {text} is outside the dates the data can hold (1970..9998)")
    if end:
        moment += dt.timedelta(seconds=1) if timed else dt.timedelta(days=1)
    return moment, timed


def utc_window(
    body: dict[str, Any],
    default_tz_id: int,
    today: dt.date,
    *,
    allow_time: bool,
    history_days: int | None,
) -> tuple[int, int]:
    """UTC ``[t0, t1)`` seconds of a request's ``from``..``to`` in its timezone.

    :param default_tz_id: the network's reporting timezone (``timezone_id`` omitted).
    :param today: the sandbox's today (its last day with data).
    :param allow_time: accept ``YYYY-MM-DD hh:mm:ss`` (the conversion report).
    :param history_days: ``from`` may not lie before ``today - history_days`` (None: no limit,
        but the range is capped at :data:`MAX_RANGE_DAYS`).
    """
    if "from" not in body or body.get("from") is None:
        raise invalid("from is required")
    if "to" not in body or body.get("to") is None:
        raise invalid("to is required")
    start, _ = _bound(body["from"], "from", end=False, allow_time=allow_time)
    stop, _ = _bound(body["to"], "to", end=True, allow_time=allow_time)
    if stop <= start:
        raise invalid("to must not be before from")
    _, tzname = resolve_timezone(body, default_tz_id)
    if history_days is not None:
        oldest = today - dt.timedelta(days=history_days)
        if start.date() < oldest:
            raise invalid(
                f"from: the conversion report covers the prior {history_days} days only "
                f"(oldest day {oldest.isoformat()})"
            )
    elif (stop - start) > dt.timedelta(days=MAX_RANGE_DAYS):
        raise invalid(f"to: the range is limited to one year ({MAX_RANGE_DAYS} days)")
    tz = zoneinfo.ZoneInfo(tzname)
    return int(start.replace(tzinfo=tz).timestamp()), int(stop.replace(tzinfo=tz).timestamp())
