"""The days a report run lands, in the network's timezone.

Plain dates and datetimes in, days out: no Airflow task context. The report operators read the
run's data interval (or ``run_after``) from the context and pass it here; a script passes the
dates it wants.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from affiliate_network.exceptions import ConfigValidationError

#: Days in one window at most (a typo like from_date=2016 must not start a ten-year pull).
MAX_WINDOW_DAYS = 366


def parse_date(value: str | dt.date, name: str) -> dt.date:
    """A day from a date, a datetime or a ``YYYY-MM-DD...`` string (a rendered template).

    :param value: the value given.
    :param name: the argument's name, for the error.
    :raises ConfigValidationError: not a ``YYYY-MM-DD`` date.
    """
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value).strip()[:10])
    except ValueError as err:
        raise ConfigValidationError(f"{name} {value!r} is not a YYYY-MM-DD date") from err


def as_int(value: Any, name: str) -> int:
    """An integer from an int or a rendered template string (``"7"`` -> 7).

    :raises ConfigValidationError: anything else, naming ``name``.
    """
    try:
        return int(value)
    except (TypeError, ValueError) as err:
        raise ConfigValidationError(f"{name} must be an integer, got {value!r}") from err


def last_complete_day(run_after: dt.datetime | None, timezone: str) -> dt.date:
    """The day before ``run_after`` in ``timezone`` (what a scheduled run would land).

    :param run_after: when the run was due (aware datetime); None fails.
    :param timezone: IANA name of the network's reporting timezone.
    :raises ConfigValidationError: no ``run_after``.
    """
    import pendulum

    if run_after is None:
        raise ConfigValidationError(
            "no data interval and no run_after in the task context: pass from_date"
        )
    return pendulum.instance(run_after).in_timezone(timezone).date() - dt.timedelta(days=1)


def _in_timezone(value: dt.datetime | None, name: str, timezone: str) -> dt.datetime:
    import pendulum

    if value is None:
        raise ConfigValidationError(
            f"no {name} in the task context (a run without a data interval): pass from_date"
        )
    return pendulum.instance(value).in_timezone(timezone)


def report_window(
    *,
    timezone: str,
    from_date: str | dt.date | None = None,
    to_date: str | dt.date | None = None,
    interval_start: dt.datetime | None = None,
    interval_end: dt.datetime | None = None,
) -> tuple[dt.date, dt.date]:
    """First and last day (inclusive) of a pull, in the network's timezone.

    ``from_date``/``to_date`` win; otherwise the data interval, converted to ``timezone``
    (the interval ``[D 00:00, D+1 00:00)`` gives the single day D; an empty interval still means
    its day). A run without an interval and without ``from_date`` is the caller's case (see
    :func:`last_complete_day`).

    :param timezone: IANA name of the network's reporting timezone.
    :param from_date: explicit first day.
    :param to_date: explicit last day (default: ``from_date``, or the interval's last day).
    :param interval_start: start of the run's data interval (aware).
    :param interval_end: end of the run's data interval (aware, exclusive).
    :raises ConfigValidationError: reversed or longer than :data:`MAX_WINDOW_DAYS` days.
    """
    if from_date:
        start = parse_date(from_date, "from_date")
    else:
        start = _in_timezone(interval_start, "data_interval_start", timezone).date()
    if to_date:
        end = parse_date(to_date, "to_date")
    elif from_date:
        end = start
    else:
        end_dt = _in_timezone(interval_end, "data_interval_end", timezone)
        end = (end_dt - dt.timedelta(microseconds=1)).date()
        end = max(end, start)  # an empty interval (start == end) still means that day
    return check_window(start, end)


def check_window(start: dt.date, end: dt.date) -> tuple[dt.date, dt.date]:
    """``(start, end)`` when in order and at most :data:`MAX_WINDOW_DAYS` days long.

    :raises ConfigValidationError: otherwise.
    """
    if end < start:
        raise ConfigValidationError(f"from_date {start} is after to_date {end}")
    if (end - start).days + 1 > MAX_WINDOW_DAYS:
        raise ConfigValidationError(
            f"window {start}..{end} is longer than {MAX_WINDOW_DAYS} days; split it"
        )
    return start, end


def window_days(
    start: dt.date, end: dt.date, lookback_days: int | str | None = None
) -> list[dt.date]:
    """The days of ``start..end``, oldest first; or, with ``lookback_days``, the days before it.

    :param start: first day of the window.
    :param end: last day of the window (inclusive).
    :param lookback_days: when set (an int or a rendered template string), the ``n`` days
        *before* ``start`` instead (the trailing re-pull); ``0`` gives no day.
    :raises ConfigValidationError: a negative or non-integer ``lookback_days``.
    """
    if lookback_days is not None and str(lookback_days).strip() != "":
        n = as_int(lookback_days, "lookback_days")
        if n < 0:
            raise ConfigValidationError("lookback_days must be >= 0")
        if n == 0:
            return []
        start, end = start - dt.timedelta(days=n), start - dt.timedelta(days=1)
    return [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
