"""Which days a conversion-report run lands and how it says so: first-day limit, backfill
lookback, the landing loop, the log lines and the run's summary.

Plain values in (the run's type and conf, the days, a mapping for the log line): no Airflow
import, so a script gets the same rules as the operator.

Change-aware (``only_if_changed``, the default): a day whose pull has the published
partition's content checksum is not written again (its files and manifest stay byte for
byte); a changed day is published with a change record beside its manifest
(``_changes-<ns>-<token>.json``: status transitions, new, removed and updated ids). The summary
says per partition whether it ``changed``. A change stays pending until a run announces it:
with an Asset outlet the event lists every partition whose change no run has announced
yet (this pull's, or those of an earlier run that failed before announcing them:
:func:`~affiliate_network.reports.announcements.announce_pending`), and when there is none the
task (:class:`~affiliate_network.operators.conversion_report.ConversionReportOperator`)
ends **skipped** (no event). In a DAG
where tasks follow the pull, give it ``outlets=[]`` and announce through
:class:`~affiliate_network.operators.publish.PublishChangesOperator` instead, as the daily
DAG does, so that the pull itself always ends green.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import ConfigValidationError

if TYPE_CHECKING:
    from affiliate_network.helpers.tasklog import TaskLog
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.reports.pull import ConversionPull

#: Environment setting: the first day the network has data for (``YYYY-MM-DD``); a run's day
#: before it is refused instead of landing as an empty partition. Unset: only the conversion
#: report's documented 365-day history applies.
FIRST_DAY_ENV = "AFFILIATE_NETWORK_FIRST_DAY"


def check_landing_args(
    show_conversions: bool,
    show_events: bool,
    dataset: str,
    lookback_days: int | str | None,
    consistency_retries: int,
) -> None:
    """Cheap checks of a conversion pull's arguments, before any request.

    :param show_conversions: include conversions.
    :param show_events: include events.
    :param dataset: the dataset folder (a plain folder name).
    :param lookback_days: trailing days (an int must be >= 0; a template is checked later).
    :param consistency_retries: extra pulls of a shifted day (>= 0).
    :raises ConfigValidationError: the argument named is out of range.
    """
    if not (show_conversions or show_events):
        raise ConfigValidationError("show_conversions and show_events are both false")
    if not dataset or "/" in dataset or dataset.startswith(("_", ".")):
        raise ConfigValidationError(f"dataset {dataset!r} must be a plain folder name")
    if isinstance(lookback_days, int) and lookback_days < 0:
        raise ConfigValidationError("lookback_days must be >= 0")
    if consistency_retries < 0:
        raise ConfigValidationError("consistency_retries must be >= 0")


def run_type_of(dag_run: Any) -> str | None:
    """A run's type as plain text (``scheduled``, ``manual``, ``backfill``, ``asset_triggered``).

    :param dag_run: the task context's ``dag_run`` (None outside a run).
    """
    run_type = getattr(dag_run, "run_type", None)
    if run_type is None:
        return None
    return str(getattr(run_type, "value", run_type))


def describe_days(days: list[dt.date]) -> str:
    """``2026-11-19`` or ``2026-11-12..2026-11-18 (7 days)`` for consecutive days."""
    if len(days) == 1:
        return days[0].isoformat()
    return f"{days[0]}..{days[-1]} ({len(days)} days)"


def run_lookback(
    lookback_days: int | str | None,
    backfill_lookback_param: str | None,
    dag_run: Any,
    log: TaskLog,
) -> int | str | None:
    """``lookback_days``, or 0 for a backfill run whose conf did not ask for it.

    The UI's backfill dialog sends no conf unless "Override parameters on existing runs" is
    ticked, and the param's default would make every backfill run re-pull the same trailing
    days again, in parallel.

    :param lookback_days: the operator's ``lookback_days``.
    :param backfill_lookback_param: the run-conf key a backfill run must set to re-pull.
    :param dag_run: the task context's ``dag_run``.
    :param log: where the backfill notice goes.
    """
    if lookback_days is None or not backfill_lookback_param:
        return lookback_days
    if run_type_of(dag_run) != "backfill":
        return lookback_days
    conf = getattr(dag_run, "conf", None) or {}
    if backfill_lookback_param in conf:
        return lookback_days
    log.info(
        "Backfill run: no trailing day re-pulled (its conf does not set %s; a backfill "
        "re-pulls trailing days only when asked, e.g. the dialog's override box with %s > 0)",
        backfill_lookback_param,
        backfill_lookback_param,
    )
    return 0


def first_day(value: str | dt.date | None) -> dt.date | None:
    """The first day the network has data for: ``value``, else the environment.

    :param value: the operator's ``first_day`` (rendered).
    """
    from affiliate_network.reports.window import parse_date

    chosen = value or os.environ.get(FIRST_DAY_ENV, "").strip() or None
    if chosen is None:
        return None
    return parse_date(chosen, "first_day" if value else FIRST_DAY_ENV)


def drop_before_first_day(
    days: list[dt.date],
    first_day_setting: str | dt.date | None,
    *,
    trailing: bool,
    log: TaskLog,
) -> list[dt.date]:
    """``days`` without those before the network's first day; a run's own day there fails.

    :param days: the days of the run, oldest first.
    :param first_day_setting: the operator's ``first_day`` (else the environment applies).
    :param trailing: the days are a trailing re-pull (``lookback_days`` set).
    :param log: where the left-out days are reported.
    :raises ConfigValidationError: the run's own day(s) (not ``trailing``) and one is before
        the first day (nothing is requested or landed): a partition of 0 rows would look like a
        day without conversions. Trailing days before it are left out of the re-pull.
    """
    first = first_day(first_day_setting)
    if first is None or not days or days[0] >= first:
        return days
    kept = [d for d in days if d >= first]
    if not trailing:
        raise ConfigValidationError(
            f"day {days[0]} is before the network's first day with data, {first} (setting "
            f"{'first_day' if first_day_setting else FIRST_DAY_ENV}); nothing was requested or "
            f"landed. Backfill from {first} on (airflow backfill create --from-date {first} "
            "...), or change that setting if the network has older data."
        )
    log.info(
        "Trailing re-pull: %d day(s) before the network's first day with data (%s) left out",
        len(days) - len(kept),
        first,
    )
    return kept


def checked_days(
    days: list[dt.date],
    context: Mapping[str, Any],
    *,
    first_day: str | dt.date | None,
    trailing: bool,
    timezone: str,
    log: TaskLog,
) -> list[dt.date]:
    """The days to land: before the first day left out (or refused), logged, history checked.

    :param days: the run's days, oldest first.
    :param context: the task context (for the log line).
    :param first_day: the operator's ``first_day``.
    :param trailing: the days are a trailing re-pull.
    :param timezone: the network timezone's IANA name.
    :param log: where the line goes.
    """
    days = drop_before_first_day(days, first_day, trailing=trailing, log=log)
    # Airflow 3 gives a task no way to set its run's note: the landed day goes to the log
    # and the XCom summary ("lands").
    log.info("%s", lands_line(context, days, trailing=trailing))
    if days:
        from affiliate_network.settings.models import check_report_history

        # Documented: the conversion report serves the prior 365 days only.
        check_report_history(days[0], timezone)
    return days


def lands_line(context: Mapping[str, Any], days: list[dt.date], *, trailing: bool) -> str:
    """One line: the run, its logical date and kind, and the day(s) this task lands.

    :param context: the task context (``dag_run``, ``logical_date``, ``run_id``).
    :param days: the days landed.
    :param trailing: the days are a trailing re-pull.
    """
    dag_run = context.get("dag_run")
    logical = context.get("logical_date")
    what = "re-pulls" if trailing else "lands"
    span = describe_days(days) if days else "no day"
    return (
        f"Run {context.get('run_id')} ({run_type_of(dag_run) or 'unknown'} run, logical date "
        f"{logical.isoformat() if logical else 'none'}) {what} {span}"
    )


def landing_summary(
    days: list[dt.date],
    dataset: str,
    format: str,
    partitions: list[dict[str, Any]],
    seconds: float,
) -> dict[str, Any]:
    """The run's XCom summary: the days, partitions and their totals.

    :param days: the days landed.
    :param dataset: the dataset folder.
    :param format: ``parquet`` or ``jsonl``.
    :param partitions: each day's landing result.
    :param seconds: the time the landing took.
    """
    return {
        "lands": [d.isoformat() for d in days],
        "dataset": dataset,
        "format": format,
        "paths": [p["path"] for p in partitions],
        "partitions": partitions,
        "rows": sum(p["rows"] for p in partitions),
        "pages": sum(p["pages"] for p in partitions),
        "duplicates_dropped": sum(p["duplicates_dropped"] for p in partitions),
        "seconds": round(seconds, 3),
        "changed": [p["date"] for p in partitions if p["changed"]],
    }


def land_days(
    hook: Callable[[], AffiliateNetworkHook],
    base: str,
    days: list[dt.date],
    pull_for: Callable[[dt.date], ConversionPull],
    *,
    dataset: str,
    only_if_changed: bool,
    on_landed: Callable[[dict[str, Any]], None],
    **landing: Any,
) -> dict[str, Any]:
    """Land each day in turn (change tracking first) and return the run's summary.

    :param hook: gives the network-portal hook (asked only when there is a day to land).
    :param base: the output base.
    :param days: the days to land, oldest first.
    :param pull_for: each day's pull.
    :param dataset: the dataset folder.
    :param only_if_changed: keep identical partitions and record changes.
    :param on_landed: called with each day's result as soon as it is landed, so a later day
        failing still reports what was landed.
    :param landing: further :func:`~affiliate_network.reports.landing.land_conversion_day`
        arguments (``format``, ``page_size``, ``log`` ...).
    """
    from affiliate_network.reports.landing import land_conversion_day

    if only_if_changed:
        from affiliate_network.reports.announcements import start_tracking

        # Before the first change record: from here every change stays pending until a
        # run announces it (the publish step, or the task's own outlet).
        start_tracking(base, dataset)
    started = time.monotonic()
    partitions: list[dict[str, Any]] = []
    for day in days:
        partitions.append(
            land_conversion_day(
                hook(),
                base,
                pull_for(day),
                dataset=dataset,
                only_if_changed=only_if_changed,
                **landing,
            )
        )
        on_landed(partitions[-1])
    return landing_summary(days, dataset, landing["format"], partitions, time.monotonic() - started)


def log_landed(summary: Mapping[str, Any], log: TaskLog) -> None:
    """One log line: partitions, changed, rows, pages, duplicates and seconds of a run.

    :param summary: :func:`land_days`'s summary.
    :param log: where it goes.
    """
    log.info(
        "Pulled %d partition(s) of %s, %d changed: %d rows, %d pages, "
        "%d duplicates dropped in %.1fs",
        len(summary["partitions"]),
        summary["dataset"],
        len(summary["changed"]),
        summary["rows"],
        summary["pages"],
        summary["duplicates_dropped"],
        summary["seconds"],
    )
