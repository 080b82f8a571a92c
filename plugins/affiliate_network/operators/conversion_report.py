"""Land conversion reports as day partitions; home of the report operators' public names.

:class:`ConversionReportOperator` streams ``POST /networks/reporting/conversions`` (network
portal) into ``<base>/<dataset>/date=YYYY-MM-DD/``, one pull and one partition per day of the
window, so a partition holds exactly what the network reports for that day in its timezone,
whether the day was pulled alone or inside a longer window. The landing itself is
:func:`affiliate_network.reports.landing.land_conversion_day`; the window is
:mod:`affiliate_network.reports.window`.

:class:`AffiliateReportOperator` (:mod:`~affiliate_network.operators.affiliate_report`),
:func:`dataset_asset` (:mod:`~affiliate_network.operators.assets`) and the settings loaders
(:mod:`affiliate_network.settings.models`) stay importable from here, where DAGs and users import
them. Heavy modules (pyarrow, the hook) are imported in ``execute``: DAG files import this module at
parse time.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.compat import AirflowSkipException
from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.affiliate_report import AffiliateReportOperator
from affiliate_network.operators.assets import dataset_asset
from affiliate_network.operators.lineage import CONVERSIONS_ENDPOINT
from affiliate_network.operators.publish import announce_pending, changed_partitions_extra
from affiliate_network.operators.report_base import ReportOperatorBase, check_format
from affiliate_network.reports.window import MAX_WINDOW_DAYS
from affiliate_network.settings.paths import resolve_data_base

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

#: Environment setting: the first day the network has data for (``YYYY-MM-DD``); a run's day
#: before it is refused instead of landing as an empty partition. Unset: only the conversion
#: report's documented 365-day history applies.
FIRST_DAY_ENV = "AFFILIATE_NETWORK_FIRST_DAY"

#: Names that moved to :mod:`affiliate_network.settings.models` (the one loader of include/), still
#: importable from here; resolved on first use so parsing a DAG file reads no settings code.
_FROM_SETTINGS = ("load_affiliate_report_targets", "load_network_config")

__all__ = [
    "MAX_WINDOW_DAYS",
    "AffiliateReportOperator",
    "ConversionReportOperator",
    "dataset_asset",
]


def __getattr__(name: str) -> Any:
    """The settings loaders under their old import path (PEP 562)."""
    if name in _FROM_SETTINGS:
        from affiliate_network.settings import models as settings

        return getattr(settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ConversionReportOperator(ReportOperatorBase):
    """Pull the conversion report for a window and land one partition per day.

    Each day of the window is pulled on its own (``from = to = day`` in the network's
    timezone) and published atomically to ``<base>/<dataset>/date=YYYY-MM-DD/`` with a
    ``_manifest.json``. Rerunning a day replaces its partition; the same API data gives the
    same content checksum.

    Change-aware (``only_if_changed``, the default): a day whose pull has the published
    partition's content checksum is not written again (its files and manifest stay byte for
    byte); a changed day is published with a change record beside its manifest
    (``_changes-<ns>-<token>.json``: status transitions, new, removed and updated ids). The summary
    says per partition whether it ``changed``. A change stays pending until a run announces it:
    with an Asset outlet the event lists every partition whose change no run has announced
    yet (this pull's, or those of an earlier run that failed before announcing them:
    :func:`~affiliate_network.operators.publish.announce_pending`), and when there is none the
    task ends **skipped** (no event). In a DAG
    where tasks follow the pull, give it ``outlets=[]`` and announce through
    :class:`~affiliate_network.operators.publish.PublishChangesOperator` instead, as the daily
    DAG does, so that the pull itself always ends green.

    :param affiliate_network_conn_id: network-portal connection.
    :param from_date: first day ``YYYY-MM-DD`` (templated); default: the data interval's start
        in the network timezone.
    :param to_date: last day, inclusive (templated); default: the data interval's last day.
    :param lookback_days: when set (templated), pull the ``lookback_days`` days *before* the
        window's first day instead (the trailing re-pull that picks up late status changes).
        ``0`` pulls nothing.
    :param backfill_lookback_param: the run-conf key that asks a **backfill** run for its
        ``lookback_days`` (the daily DAG: ``trailing_days``). A backfill run whose conf does not
        name it re-pulls no day before its own: the UI's backfill dialog sends no conf unless
        "Override parameters on existing runs" is ticked, and the param's default would make
        every backfill run re-pull the same trailing days again, in parallel. ``None`` (the
        default): ``lookback_days`` applies to every run.
    :param first_day: the first day the network has data for (templated, ``YYYY-MM-DD``);
        default: env ``AFFILIATE_NETWORK_FIRST_DAY``, else none. A run's own day before it is
        refused (:class:`~affiliate_network.exceptions.ConfigValidationError`, nothing is
        requested or landed); trailing days before it are left out of the re-pull.
    :param timezone_id: network timezone id (default: ``include/network.yaml``).
    :param network_timezone: IANA name of that timezone, to turn the data interval into days
        (default: ``include/network.yaml``).
    :param currency_id: currency code (default: ``include/network.yaml``; ``""`` = server
        default).
    :param show_conversions: include conversions.
    :param show_events: include events (``is_event`` tells them apart).
    :param filters: conversion report filter items (or the hook's mapping shorthand).
    :param search_terms: search-term items.
    :param format: ``parquet`` (default) or ``jsonl`` (gzip JSON Lines).
    :param base_path: output base (templated); default: Variable ``affiliate_network_data_base``,
        env ``AFFILIATE_NETWORK_DATA_BASE``, then ``<project>/data``.
    :param dataset: dataset folder under the base.
    :param page_size: rows per page (default: the connection's, else 2,000).
    :param consistency_retries: extra pulls of a day whose pages shifted while it was paged
        (``total_count`` changed, pages short or overlapping, unique rows differing from
        ``total_count``), 2 s apart; default 2 (three pulls), then the task fails with
        ``PullShiftedError`` and nothing is published
        (``reports.landing.DEFAULT_CONSISTENCY_RETRIES``).
    :param row_group_rows: Parquet rows per row group (memory bound of the writer).
    :param hook_kwargs: extra :class:`AffiliateNetworkHook` arguments (``max_attempts``,
        ``base_delay``, ``concurrency`` ...).
    :param only_if_changed: keep identical partitions and record changes (default); ``False``
        republishes every day pulled (and every day counts as changed).
    """

    template_fields: Sequence[str] = (
        "from_date",
        "to_date",
        "lookback_days",
        "first_day",
        "timezone_id",
        "currency_id",
        "filters",
        "search_terms",
        "base_path",
        "format",
    )
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        affiliate_network_conn_id: str = "affiliate_network_default",
        from_date: str | None = None,
        to_date: str | None = None,
        lookback_days: int | str | None = None,
        backfill_lookback_param: str | None = None,
        first_day: str | dt.date | None = None,
        timezone_id: int | str | None = None,
        network_timezone: str | None = None,
        currency_id: str | None = None,
        show_conversions: bool = True,
        show_events: bool = False,
        filters: Any = None,
        search_terms: Sequence[dict[str, Any]] | None = None,
        format: str = "parquet",
        base_path: str | None = None,
        dataset: str = "conversions",
        page_size: int | None = None,
        consistency_retries: int = 2,  # reports.landing.DEFAULT_CONSISTENCY_RETRIES (lazy)
        row_group_rows: int | None = None,
        hook_kwargs: dict[str, Any] | None = None,
        only_if_changed: bool = True,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs:
            kwargs["outlets"] = [dataset_asset(dataset)]
        super().__init__(**kwargs)
        if not (show_conversions or show_events):
            raise ConfigValidationError("show_conversions and show_events are both false")
        check_format(format)
        if not dataset or "/" in dataset or dataset.startswith(("_", ".")):
            raise ConfigValidationError(f"dataset {dataset!r} must be a plain folder name")
        if isinstance(lookback_days, int) and lookback_days < 0:
            raise ConfigValidationError("lookback_days must be >= 0")
        if consistency_retries < 0:
            raise ConfigValidationError("consistency_retries must be >= 0")
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.from_date = from_date
        self.to_date = to_date
        self.lookback_days = lookback_days
        self.backfill_lookback_param = backfill_lookback_param
        self.first_day = first_day
        self.timezone_id = timezone_id
        self.network_timezone = network_timezone
        self.currency_id = currency_id
        self.show_conversions = show_conversions
        self.show_events = show_events
        self.filters = filters
        self.search_terms = search_terms
        self.format = format
        self.base_path = base_path
        self.dataset = dataset
        self.page_size = page_size
        self.consistency_retries = consistency_retries
        self.row_group_rows = row_group_rows
        self.hook_kwargs = hook_kwargs
        self.only_if_changed = only_if_changed

    def days(self, context: Context) -> list[dt.date]:
        """The days this run lands, oldest first."""
        from affiliate_network.reports.window import window_days

        start, end = self._window(context)
        return window_days(start, end, self._lookback(context))

    def _lookback(self, context: Context) -> int | str | None:
        """``lookback_days``, or 0 for a backfill run whose conf did not ask for it."""
        if self.lookback_days is None or not self.backfill_lookback_param:
            return self.lookback_days
        dag_run = context.get("dag_run")
        if run_type_of(dag_run) != "backfill":
            return self.lookback_days
        conf = getattr(dag_run, "conf", None) or {}
        if self.backfill_lookback_param in conf:
            return self.lookback_days
        self.log.info(
            "Backfill run: no trailing day re-pulled (its conf does not set %s; a backfill "
            "re-pulls trailing days only when asked, e.g. the dialog's override box with %s > 0)",
            self.backfill_lookback_param,
            self.backfill_lookback_param,
        )
        return 0

    def _first_day(self) -> dt.date | None:
        """The first day the network has data for: the argument, else the environment."""
        from affiliate_network.reports.window import parse_date

        value = self.first_day or os.environ.get(FIRST_DAY_ENV, "").strip() or None
        if value is None:
            return None
        return parse_date(value, "first_day" if self.first_day else FIRST_DAY_ENV)

    def _before_first_day(self, days: list[dt.date]) -> list[dt.date]:
        """``days`` without those before the network's first day; a run's own day there fails.

        :raises ConfigValidationError: this task lands the run's own day(s) (no lookback) and
            one is before the first day: a partition of 0 rows would look like a day without
            conversions.
        """
        first = self._first_day()
        if first is None or not days or days[0] >= first:
            return days
        kept = [d for d in days if d >= first]
        if self.lookback_days is None:
            raise ConfigValidationError(
                f"day {days[0]} is before the network's first day with data, {first} (setting "
                f"{'first_day' if self.first_day else FIRST_DAY_ENV}); nothing was requested or "
                f"landed. Backfill from {first} on (airflow backfill create --from-date {first} "
                "...), or change that setting if the network has older data."
            )
        self.log.info(
            "Trailing re-pull: %d day(s) before the network's first day with data (%s) left out",
            len(days) - len(kept),
            first,
        )
        return kept

    def _lands_line(self, context: Context, days: list[dt.date]) -> str:
        """One line: the run, its logical date and kind, and the day(s) this task lands."""
        dag_run = context.get("dag_run")
        logical = context.get("logical_date")
        what = "re-pulls" if self.lookback_days is not None else "lands"
        span = describe_days(days) if days else "no day"
        return (
            f"Run {context.get('run_id')} ({run_type_of(dag_run) or 'unknown'} run, logical date "
            f"{logical.isoformat() if logical else 'none'}) {what} {span}"
        )

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.hooks._memory import prefer_system_arrow_pool

        prefer_system_arrow_pool()  # first: Arrow picks its allocator when pyarrow loads
        self.reset_lineage()
        check_format(self.format)
        days = self._before_first_day(self.days(context))
        # Airflow 3 gives a task no way to set its run's note: the landed day goes to the log
        # and the XCom summary ("lands").
        self.log.info("%s", self._lands_line(context, days))
        if days:
            from affiliate_network.settings.models import check_report_history

            # Documented: the conversion report serves the prior 365 days only.
            check_report_history(days[0], self._timezone()[1])
        base = resolve_data_base(self.base_path)
        if self.only_if_changed:
            from affiliate_network.reports.announcements import start_tracking

            # Before the first change record: from here every change stays pending until a
            # run announces it (the publish step, or this task's own outlet below).
            start_tracking(base, self.dataset)
        started = time.monotonic()
        run_id = context.get("run_id")
        partitions: list[dict[str, Any]] = []
        for day in days:
            partitions.append(self._land_day(self.hook, base, day, run_id))
            # Day by day: a later day failing still reports what was landed.
            self._record_endpoint_read(CONVERSIONS_ENDPOINT)
            self._record_partition_written(partitions[-1]["path"], partitions[-1]["rows"])
        summary = {
            "lands": [d.isoformat() for d in days],
            "dataset": self.dataset,
            "format": self.format,
            "paths": [p["path"] for p in partitions],
            "partitions": partitions,
            "rows": sum(p["rows"] for p in partitions),
            "pages": sum(p["pages"] for p in partitions),
            "duplicates_dropped": sum(p["duplicates_dropped"] for p in partitions),
            "seconds": round(time.monotonic() - started, 3),
            "changed": [p["date"] for p in partitions if p["changed"]],
        }
        extra: dict[str, Any] = {"dataset": self.dataset, "partitions": []}
        keys: list[str] = []
        if self._announces():
            if self.only_if_changed:
                # Every change no run announced yet, this run's and a failed run's.
                extra, keys = announce_pending(context, base, self.dataset)
            else:
                extra, keys = changed_partitions_extra(self.dataset, partitions)
            self._emit_asset_events(context, extra, keys)
        self.log.info(
            "Pulled %d partition(s) of %s, %d changed: %d rows, %d pages, "
            "%d duplicates dropped in %.1fs",
            len(partitions),
            self.dataset,
            len(summary["changed"]),
            summary["rows"],
            summary["pages"],
            summary["duplicates_dropped"],
            summary["seconds"],
        )
        if not keys and self._announces():
            # Nothing to announce: skipped, so the outlet's Asset gets no event (a task with
            # an outlet emits one on every success). The work above is done and kept.
            raise AirflowSkipException(
                f"none of the {len(partitions)} partition(s) of {self.dataset} changed and no "
                "change is left to announce: no asset event"
            )
        return summary

    def _announces(self) -> bool:
        """Whether this task has an Asset outlet (its success would emit an event)."""
        from airflow.sdk import Asset

        return any(isinstance(o, Asset) for o in self.outlets or ())

    def _request(self, day: dt.date) -> dict[str, Any]:
        return {
            "endpoint": "POST /networks/reporting/conversions",
            "from": day.isoformat(),
            "to": day.isoformat(),
            "timezone_id": self._tz_id(),
            "timezone": self._timezone()[1],
            "currency_id": self._currency(),
            "show_conversions": bool(self.show_conversions),
            "show_events": bool(self.show_events),
            "filters": self.filters,
            "search_terms": self.search_terms,
            "conn_id": self.affiliate_network_conn_id,
        }

    def _land_day(
        self, hook: AffiliateNetworkHook, base: str, day: dt.date, run_id: str | None = None
    ) -> dict[str, Any]:
        from affiliate_network.reports.landing import land_conversion_day

        return land_conversion_day(
            hook,
            base,
            day,
            request=self._request(day),
            dataset=self.dataset,
            format=self.format,
            page_size=self.page_size,
            row_group_rows=self.row_group_rows,
            consistency_retries=self.consistency_retries,
            log=self.log,
            only_if_changed=self.only_if_changed,
            run_id=run_id,
        )


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
