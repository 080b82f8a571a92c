"""Land conversion reports and per-affiliate aggregated reports as day partitions.

* :class:`ConversionReportOperator` streams ``POST /networks/reporting/conversions`` (network
  portal) into ``<base>/<dataset>/date=YYYY-MM-DD/``, one pull and one partition per day of the
  window, so a partition holds exactly what the network reports for that day in its timezone,
  whether the day was pulled alone or inside a longer window.
* :class:`AffiliateReportOperator` calls the affiliate entity table (affiliate portal) and
  lands it under ``<base>/<dataset>/affiliate=<id>/date=.../``; on the 10,000-row cap it splits
  the date range in halves down to single days and never lands a truncated report.

Both write through :mod:`affiliate_network.reports.storage` (atomic publish, ``_manifest.json``) and
return a small summary for XCom. Heavy modules (pyarrow, the hook) are imported in
``execute``: DAG files import this module at parse time.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.base import AffiliateNetworkBaseOperator
from affiliate_network.paths import resolve_data_base
from affiliate_network.reports.schema import FORMATS, validate_report_columns

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

log = logging.getLogger(__name__)

#: Days in one window at most (a typo like from_date=2016 must not start a ten-year pull).
MAX_WINDOW_DAYS = 366


def dataset_asset(dataset: str) -> Asset:
    """The Asset a dataset's partitions are published as (downstream DAGs schedule on it)."""
    # An "x-" scheme: Airflow normalises it without loading every provider's asset handlers
    # (boto3 among them), which cost the DAG processor about 0.7 s per parse of this DAG file.
    return Asset(name=f"affiliate_network_{dataset}", uri=f"x-affiliate-network://{dataset}")


# -- configuration (read at run time, never at DAG parse time) -------------------------------
# The one loader of include/ lives in affiliate_network.settings; these names stay importable.


def load_network_config() -> dict[str, Any]:
    """``include/network.yaml`` as ``{"timezone", "timezone_id", "currency_id"}``.

    Validated against the API's timezone table (see :mod:`affiliate_network.settings`).
    """
    from affiliate_network.settings import load_network_settings

    return load_network_settings().as_dict()


def load_affiliate_report_targets() -> list[dict[str, Any]]:
    """Mapped-task kwargs for :class:`AffiliateReportOperator` (``include/reports.yaml``)."""
    from affiliate_network.settings import load_affiliate_report_targets as load

    return load()


# -- shared operator plumbing ----------------------------------------------------------------


def _parse_date(value: str | dt.date, name: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value).strip()[:10])
    except ValueError as err:
        raise ConfigValidationError(f"{name} {value!r} is not a YYYY-MM-DD date") from err


def _as_int(value: Any, name: str) -> int:
    # Rendered templates are strings: "7" -> 7.
    try:
        return int(value)
    except (TypeError, ValueError) as err:
        raise ConfigValidationError(f"{name} must be an integer, got {value!r}") from err


def _check_format(fmt: str) -> None:
    if "{{" not in fmt and fmt not in FORMATS:
        raise ConfigValidationError(f"format {fmt!r}: expected one of {list(FORMATS)}")


class _ReportOperatorBase(AffiliateNetworkBaseOperator):
    """Window resolution, config defaults and asset events shared by the two operators."""

    def _network_defaults(self) -> dict[str, Any]:
        if not hasattr(self, "_network_cfg"):
            self._network_cfg = load_network_config()
        return self._network_cfg

    def _timezone(self) -> tuple[int, str]:
        """``(timezone_id, IANA name)``: explicit arguments, else ``include/network.yaml``.

        There is no operator-level default: the network setting decides, checked against the
        API's timezone table (a mismatch fails here, before any request).
        """
        if not hasattr(self, "_tz"):
            from affiliate_network.settings import NetworkSettings, resolve_timezone

            explicit = (self.timezone_id, self.network_timezone)
            cfg = None
            if all(x is None or str(x).strip() == "" for x in explicit):
                cfg = NetworkSettings(**self._network_defaults())
            self._tz = resolve_timezone(self.timezone_id, self.network_timezone, cfg)
        return self._tz

    def _tz_id(self) -> int:
        return self._timezone()[0]

    def _currency(self) -> str | None:
        if self.currency_id is not None:
            return self.currency_id or None
        return self._network_defaults().get("currency_id")

    def _window(self, context: Context) -> tuple[dt.date, dt.date]:
        """First and last day (inclusive) of the pull, in the network's timezone.

        ``from_date``/``to_date`` win; otherwise the run's data interval, converted to the
        network timezone (interval ``[D 00:00, D+1 00:00)`` gives the single day D).
        """
        tz = self._timezone()[1]
        if not self.from_date and context.get("data_interval_start") is None:
            # A manual run triggered without a logical date has no data interval (Airflow 3):
            # land the last complete day before the run, as the scheduled run would.
            day = _last_complete_day(context, tz)
            self.log.info("no data interval in this run: reporting %s, the day before it", day)
            return day, day
        if self.from_date:
            start = _parse_date(self.from_date, "from_date")
        else:
            start = _interval_bound(context, "data_interval_start", tz).date()
        if self.to_date:
            end = _parse_date(self.to_date, "to_date")
        elif self.from_date:
            end = start
        else:
            end_dt = _interval_bound(context, "data_interval_end", tz)
            end = (end_dt - dt.timedelta(microseconds=1)).date()
            end = max(end, start)  # an empty interval (start == end) still means that day
        if end < start:
            raise ConfigValidationError(f"from_date {start} is after to_date {end}")
        if (end - start).days + 1 > MAX_WINDOW_DAYS:
            raise ConfigValidationError(
                f"window {start}..{end} is longer than {MAX_WINDOW_DAYS} days; split it"
            )
        return start, end

    def _emit_asset_events(self, context: Context, extra: dict[str, Any], keys: list[str]) -> None:
        """Annotate this task's asset event(s): partitions written and their checksums."""
        outlet_events = context.get("outlet_events")
        if outlet_events is None:
            return
        for outlet in self.outlets or ():
            if isinstance(outlet, Asset):
                event = outlet_events[outlet]
                event.extra = extra
                if keys:
                    event.add_partitions(keys)


def _last_complete_day(context: Context, tz: str) -> dt.date:
    """The day before the run's ``run_after`` in the network timezone."""
    import pendulum

    dag_run = context.get("dag_run")
    moment = getattr(dag_run, "run_after", None) or context.get("logical_date")
    if moment is None:
        raise ConfigValidationError(
            "no data interval and no run_after in the task context: pass from_date"
        )
    return pendulum.instance(moment).in_timezone(tz).date() - dt.timedelta(days=1)


def _interval_bound(context: Context, name: str, tz: str) -> dt.datetime:
    import pendulum

    value = context.get(name)
    if value is None:
        raise ConfigValidationError(
            f"no {name} in the task context (a run without a data interval): pass from_date"
        )
    return pendulum.instance(value).in_timezone(tz)


# -- conversions --------------------------------------------------------------------------------


class ConversionReportOperator(_ReportOperatorBase):
    """Pull the conversion report for a window and land one partition per day.

    Each day of the window is pulled on its own (``from = to = day`` in the network's
    timezone) and published atomically to ``<base>/<dataset>/date=YYYY-MM-DD/`` with a
    ``_manifest.json``. Rerunning a day replaces its partition; the same API data gives the
    same content checksum.

    :param affiliate_network_conn_id: network-portal connection.
    :param from_date: first day ``YYYY-MM-DD`` (templated); default: the data interval's start
        in the network timezone.
    :param to_date: last day, inclusive (templated); default: the data interval's last day.
    :param lookback_days: when set (templated), pull the ``lookback_days`` days *before* the
        window's first day instead (the trailing re-pull that picks up late status changes).
        ``0`` pulls nothing.
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
    :param consistency_retries: extra pulls of a day whose unique row count differs from the
        server's ``total_count`` (the result set moved while paging).
    :param row_group_rows: Parquet rows per row group (memory bound of the writer).
    :param hook_kwargs: extra :class:`AffiliateNetworkHook` arguments (``max_attempts``,
        ``base_delay``, ``concurrency`` ...).
    """

    template_fields: Sequence[str] = (
        "from_date",
        "to_date",
        "lookback_days",
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
        consistency_retries: int = 1,
        row_group_rows: int | None = None,
        hook_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs:
            kwargs["outlets"] = [dataset_asset(dataset)]
        super().__init__(**kwargs)
        if not (show_conversions or show_events):
            raise ConfigValidationError("show_conversions and show_events are both false")
        _check_format(format)
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

    def days(self, context: Context) -> list[dt.date]:
        """The days this run lands, oldest first."""
        start, end = self._window(context)
        if self.lookback_days is not None and str(self.lookback_days).strip() != "":
            n = _as_int(self.lookback_days, "lookback_days")
            if n < 0:
                raise ConfigValidationError("lookback_days must be >= 0")
            start, end = start - dt.timedelta(days=n), start - dt.timedelta(days=1)
            if n == 0:
                return []
        return [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]

    def execute_job(self, context: Context) -> dict[str, Any]:
        _check_format(self.format)
        days = self.days(context)
        if days:
            from affiliate_network.settings import check_report_history

            # Documented: the conversion report serves the prior 365 days only.
            check_report_history(days[0], self._timezone()[1])
        base = resolve_data_base(self.base_path)
        started = time.monotonic()
        partitions: list[dict[str, Any]] = []
        for day in days:
            partitions.append(self._land_day(self.hook, base, day))
        summary = {
            "dataset": self.dataset,
            "format": self.format,
            "paths": [p["path"] for p in partitions],
            "partitions": partitions,
            "rows": sum(p["rows"] for p in partitions),
            "pages": sum(p["pages"] for p in partitions),
            "duplicates_dropped": sum(p["duplicates_dropped"] for p in partitions),
            "seconds": round(time.monotonic() - started, 3),
        }
        self._emit_asset_events(
            context,
            {
                "dataset": self.dataset,
                "partitions": [
                    {k: p[k] for k in ("date", "path", "rows", "checksum")} for p in partitions
                ],
            },
            [f"date={p['date']}" for p in partitions],
        )
        self.log.info(
            "Landed %d partition(s) of %s: %d rows, %d pages, %d duplicates dropped in %.1fs",
            len(partitions),
            self.dataset,
            summary["rows"],
            summary["pages"],
            summary["duplicates_dropped"],
            summary["seconds"],
        )
        return summary

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

    def _land_day(self, hook: AffiliateNetworkHook, base: str, day: dt.date) -> dict[str, Any]:
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
            filters=self.filters,
            search_terms=self.search_terms,
            log=self.log,
        )


# -- per-affiliate aggregated reports -------------------------------------------------------------


class AffiliateReportOperator(_ReportOperatorBase):
    """Land one affiliate's entity table (aggregated report) for a window.

    Requests the whole window; when the hook reports the 10,000-row cap the range is split in
    halves and each half requested again, down to single days. Every row carries the
    ``report_from``/``report_to`` range it aggregates. A single day that still hits the cap
    fails with a message naming what to narrow; nothing is landed in that case.

    Output: ``<base>/<dataset>/affiliate=<affiliate_id>/date=<from>/`` for a one-day window
    (``date=<from>_<to>`` for a longer one).

    :param affiliate_network_conn_id: the affiliate's connection (affiliate portal).
    :param affiliate_id: the affiliate's id (partition key).
    :param columns: 1 to 10 group columns, at most one time column (validated here).
    :param from_date: first day (templated); default: the data interval.
    :param to_date: last day, inclusive (templated).
    :param timezone_id: network timezone id (default: ``include/network.yaml``).
    :param network_timezone: IANA name of that timezone (default: ``include/network.yaml``).
    :param currency_id: currency code (default: ``include/network.yaml``).
    :param filters: filter items.
    :param format: ``parquet`` (default) or ``jsonl``.
    :param base_path: output base (templated); default as for :class:`ConversionReportOperator`.
    :param dataset: dataset folder under the base.
    :param hook_kwargs: extra :class:`AffiliateNetworkHook` arguments.
    """

    template_fields: Sequence[str] = (
        "affiliate_id",
        "from_date",
        "to_date",
        "timezone_id",
        "currency_id",
        "filters",
        "base_path",
        "format",
    )
    ui_color = "#eaf0f8"

    def __init__(
        self,
        *,
        affiliate_network_conn_id: str,
        affiliate_id: str | int,
        columns: Sequence[str | dict[str, Any]],
        from_date: str | None = None,
        to_date: str | None = None,
        timezone_id: int | str | None = None,
        network_timezone: str | None = None,
        currency_id: str | None = None,
        filters: Sequence[dict[str, Any]] | None = None,
        format: str = "parquet",
        base_path: str | None = None,
        dataset: str = "affiliate_reports",
        hook_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs:
            kwargs["outlets"] = [dataset_asset(dataset)]
        super().__init__(**kwargs)
        # Cheap and before any request: 1-10 known columns, at most one time column.
        self.columns = validate_report_columns(columns)
        _check_format(format)
        if str(affiliate_id).strip() == "" or "/" in str(affiliate_id):
            raise ConfigValidationError(f"affiliate_id {affiliate_id!r} is not an id")
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.affiliate_id = affiliate_id
        self.from_date = from_date
        self.to_date = to_date
        self.timezone_id = timezone_id
        self.network_timezone = network_timezone
        self.currency_id = currency_id
        self.filters = filters
        self.format = format
        self.base_path = base_path
        self.dataset = dataset
        self.hook_kwargs = hook_kwargs

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.reports.schema import AffiliateReportSchema
        from affiliate_network.reports.storage import write_partition

        _check_format(self.format)
        start, end = self._window(context)
        started = time.monotonic()
        pieces = self._fetch(self.hook, start, end)
        self.close_hook()  # the rest is local work
        rows = [
            {**row, "report_from": a.isoformat(), "report_to": b.isoformat()}
            for a, b, table in pieces
            for row in table
        ]
        date_key = start.isoformat() if start == end else f"{start}_{end}"
        keys = {"affiliate": str(self.affiliate_id), "date": date_key}
        request = {
            "endpoint": "POST /affiliates/reporting/entity/table",
            "from": start.isoformat(),
            "to": end.isoformat(),
            "columns": self.columns,
            "timezone_id": self._tz_id(),
            "timezone": self._timezone()[1],
            "currency_id": self._currency(),
            "filters": self.filters,
            "conn_id": self.affiliate_network_conn_id,
        }
        stats = {
            "requests_landed": [
                {"from": a.isoformat(), "to": b.isoformat(), "rows": len(t)} for a, b, t in pieces
            ],
            "splits": len(pieces) - 1,
        }
        result = write_partition(
            resolve_data_base(self.base_path),
            self.dataset,
            keys,
            rows,
            AffiliateReportSchema(self.columns),
            request=request,
            format=self.format,
            stats=stats,
        )
        summary = {
            "dataset": self.dataset,
            "affiliate_id": str(self.affiliate_id),
            "path": result.path,
            "rows": result.rows,
            "pieces": len(pieces),
            "checksum": result.manifest.content_checksum,
            "seconds": round(time.monotonic() - started, 3),
        }
        partition_key = f"affiliate={self.affiliate_id}/date={date_key}"
        self._emit_asset_events(
            context,
            {"dataset": self.dataset, "partition": partition_key, "path": result.path,
             "rows": result.rows, "checksum": result.manifest.content_checksum},
            [partition_key],
        )  # fmt: skip
        return summary

    def _fetch(
        self, hook: AffiliateNetworkHook, start: dt.date, end: dt.date
    ) -> list[tuple[dt.date, dt.date, list[dict[str, Any]]]]:
        from affiliate_network.reports.affiliate import fetch_entity_table

        return fetch_entity_table(
            hook,
            start,
            end,
            columns=self.columns,
            timezone_id=self._tz_id(),
            currency_id=self._currency(),
            filters=self.filters,
            who=f"affiliate {self.affiliate_id} (connection {self.affiliate_network_conn_id})",
            log=self.log,
        )
