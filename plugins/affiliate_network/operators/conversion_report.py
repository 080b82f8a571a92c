"""Land conversion reports as day partitions; home of the report operators' public names.

:class:`ConversionReportOperator` lands ``POST /networks/reporting/conversions`` one day at a
time (:mod:`affiliate_network.reports.run_days`, :mod:`affiliate_network.reports.window`).

:class:`AffiliateReportOperator` (:mod:`~affiliate_network.operators.affiliate_report`),
:func:`dataset_asset` (:mod:`~affiliate_network.operators.assets`) and the settings loaders
(:mod:`affiliate_network.settings.models`) stay importable from here for DAGs and users. Heavy
modules (pyarrow, the hook) load in ``execute``: DAG files import this module at parse time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.operators.affiliate_report import AffiliateReportOperator
from affiliate_network.operators.assets import dataset_asset
from affiliate_network.operators.lineage import CONVERSIONS_ENDPOINT
from affiliate_network.operators.report_base import (
    ReportOperatorBase,
    announce_landed,
    check_format,
    skip_if_unannounced,
)
from affiliate_network.reports import run_days
from affiliate_network.reports.run_days import FIRST_DAY_ENV
from affiliate_network.reports.window import MAX_WINDOW_DAYS

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.reports.pull import ConversionPull

__all__ = [
    "FIRST_DAY_ENV",
    "MAX_WINDOW_DAYS",
    "AffiliateReportOperator",
    "ConversionReportOperator",
    "dataset_asset",
]


class ConversionReportOperator(ReportOperatorBase):
    """Pull the conversion report for a window and land one partition per day.

    Each day of the window is pulled on its own (``from = to = day`` in the network's
    timezone) and published atomically to ``<base>/<dataset>/date=YYYY-MM-DD/`` with a
    ``_manifest.json``. Rerunning a day replaces its partition; the same API data gives the
    same content checksum.

    Change-aware (``only_if_changed``, the default): an unchanged day is not written again; a
    changed one is published with a change record, and with an Asset outlet the task announces
    every pending change or ends **skipped** (:mod:`affiliate_network.reports.run_days` tells
    how). Where tasks follow the pull, give it ``outlets=[]`` and announce through
    :class:`~affiliate_network.operators.publish.PublishChangesOperator`, as the daily DAG does.

    :param affiliate_network_conn_id: network-portal connection.
    :param from_date: first day ``YYYY-MM-DD`` (templated); default: the data interval's start
        in the network timezone.
    :param to_date: last day, inclusive (templated); default: the data interval's last day.
    :param lookback_days: when set (templated), pull the ``lookback_days`` days *before* the
        window's first day instead (the trailing re-pull that picks up late status changes).
        ``0`` pulls nothing.
    :param backfill_lookback_param: the run-conf key that asks a **backfill** run for its
        ``lookback_days`` (the daily DAG: ``trailing_days``); a backfill whose conf does not name
        it re-pulls no trailing day (:func:`~affiliate_network.reports.run_days.run_lookback`).
        ``None`` (the default): ``lookback_days`` applies to every run.
    :param first_day: the first day the network has data for (templated, ``YYYY-MM-DD``);
        default: env ``AFFILIATE_NETWORK_FIRST_DAY``, else none
        (:func:`~affiliate_network.reports.run_days.drop_before_first_day`).
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
    :param consistency_retries: extra pulls of a day whose pages shifted while it was paged, 2 s
        apart; default 2, then ``PullShiftedError`` and nothing is published
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
        run_days.check_landing_args(
            show_conversions, show_events, dataset, lookback_days, consistency_retries
        )
        check_format(format)
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
        lookback = run_days.run_lookback(
            self.lookback_days, self.backfill_lookback_param, context.get("dag_run"), self.log
        )
        return window_days(start, end, lookback)

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.hooks._memory import prefer_system_arrow_pool
        from affiliate_network.settings.paths import resolve_data_base

        prefer_system_arrow_pool()  # first: Arrow picks its allocator when pyarrow loads
        self.reset_lineage()
        check_format(self.format)
        days = run_days.checked_days(
            self.days(context),
            context,
            first_day=self.first_day,
            trailing=self.lookback_days is not None,
            timezone=self._timezone()[1],
            log=self.log,
        )
        base = resolve_data_base(self.base_path)

        def landed(partition: dict[str, Any]) -> None:
            self._record_endpoint_read(CONVERSIONS_ENDPOINT)
            self._record_partition_written(partition["path"], partition["rows"])

        summary = run_days.land_days(
            lambda: self.hook,
            base,
            days,
            self._pull,
            dataset=self.dataset,
            only_if_changed=self.only_if_changed,
            on_landed=landed,
            format=self.format,
            page_size=self.page_size,
            row_group_rows=self.row_group_rows,
            consistency_retries=self.consistency_retries,
            log=self.log,
            run_id=context.get("run_id"),
        )
        keys = announce_landed(
            context,
            self.outlets,
            base,
            self.dataset,
            summary["partitions"],
            only_if_changed=self.only_if_changed,
        )
        run_days.log_landed(summary, self.log)
        skip_if_unannounced(keys, self.dataset, len(summary["partitions"]))
        return summary

    def _pull(self, day: dt.date) -> ConversionPull:
        from affiliate_network.reports.pull import ConversionPull

        return ConversionPull(
            day,
            *self._timezone(),
            currency_id=self._currency(),
            show_conversions=bool(self.show_conversions),
            show_events=bool(self.show_events),
            filters=self.filters,
            search_terms=self.search_terms,
            conn_id=self.affiliate_network_conn_id,
        )
