"""Land one affiliate's aggregated report (the affiliate portal's entity table) for a window.

The range is requested whole; on the 10,000-row cap
:func:`affiliate_network.reports.affiliate.fetch_entity_table` splits it in halves down to
single days and never lands a truncated report. Output goes through
:mod:`affiliate_network.partitions` (atomic publish, ``_manifest.json``) under
``<base>/<dataset>/affiliate=<id>/date=.../``. Heavy modules (pyarrow, the hook) are imported in
``execute``: DAG files import this module at parse time.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.api.report_columns import validate_report_columns
from affiliate_network.exceptions import ConfigValidationError, GranularQuotaError
from affiliate_network.operators.assets import dataset_asset
from affiliate_network.operators.base import DEFER_AFTER_S, deferral_settings
from affiliate_network.operators.lineage import ENTITY_TABLE_ENDPOINT
from affiliate_network.operators.report_base import ReportOperatorBase, check_format

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.reports.affiliate import EntityTablePull, Piece


class AffiliateReportOperator(ReportOperatorBase):
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
    :param deferrable: when the network's granular hour has no room for the report's granular
        queries, wait for it in the triggerer (the worker slot is free meanwhile) instead of
        failing with a retryable :class:`~affiliate_network.exceptions.GranularQuotaError`.
        Default: the deployment's ``[operators] default_deferrable``.
    :param defer_after_s: a deferrable task sleeps waits up to this many seconds in the worker
        and defers longer ones (default 60).
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
        deferrable: bool | str | None = None,
        defer_after_s: float = DEFER_AFTER_S,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs:
            kwargs["outlets"] = [dataset_asset(dataset)]
        super().__init__(**kwargs)
        # Cheap and before any request: 1-10 known columns, at most one time column.
        self.columns = validate_report_columns(columns)
        check_format(format)
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
        self.deferrable, self.defer_after_s = deferral_settings(deferrable, defer_after_s)

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.reports.affiliate import write_affiliate_report
        from affiliate_network.settings.paths import resolve_data_base

        self.reset_lineage()
        check_format(self.format)
        pull = self._pull(*self._window(context))
        started = time.monotonic()
        pieces = self._fetch_when_the_hour_allows(pull)
        self._record_endpoint_read(ENTITY_TABLE_ENDPOINT)
        self.close_hook()  # the rest is local work
        partition_key, result = write_affiliate_report(
            resolve_data_base(self.base_path),
            pull,
            pieces,
            dataset=self.dataset,
            format=self.format,
        )
        self._record_partition_written(result.path, result.rows)
        summary = {
            "dataset": self.dataset,
            "affiliate_id": pull.affiliate_id,
            "path": result.path,
            "rows": result.rows,
            "pieces": len(pieces),
            "checksum": result.manifest.content_checksum,
            "seconds": round(time.monotonic() - started, 3),
        }
        self._emit_asset_events(
            context,
            {"dataset": self.dataset, "partition": partition_key, "path": result.path,
             "rows": result.rows, "checksum": result.manifest.content_checksum},
            [partition_key],
        )  # fmt: skip
        return summary

    def _pull(self, start: dt.date, end: dt.date) -> EntityTablePull:
        """The report this task asks for over ``start..end``."""
        from affiliate_network.reports.affiliate import EntityTablePull

        tz_id, tz_name = self._timezone()
        return EntityTablePull(
            affiliate_id=str(self.affiliate_id),
            start=start,
            end=end,
            columns=self.columns,
            timezone_id=tz_id,
            timezone=tz_name,
            currency_id=self._currency(),
            filters=self.filters,
            conn_id=self.affiliate_network_conn_id,
        )

    def _fetch_when_the_hour_allows(self, pull: EntityTablePull) -> list[Piece]:
        """The report's pieces; when deferrable, a granular hour without room is waited for.

        The refusal comes before anything is sent. The wait is until the refused queries can
        first fit (the budget's oldest queries leave the rolling window, a time the store knows):
        slept in the worker up to ``defer_after_s``, else deferred to the triggerer. Either way
        the whole fetch runs again afterwards, checking the budget anew.

        :raises GranularQuotaError: not deferrable, or more queries than the whole budget.
        """
        from airflow.providers.standard.triggers.temporal import DateTimeTrigger

        while True:
            try:
                return self._fetch(self.hook, pull)
            except GranularQuotaError as err:
                if not self.deferrable:
                    raise
                status = self.hook.granular_budget()
                # The refused queries needed more than what is left: the earliest they can fit
                # is when one more than that is free (a resume that finds less waits again).
                wait = status.wait_for(status.left + 1)
                if wait is None:
                    raise
                wait += 0.5  # the store's clock and this one tick apart
                if wait > self.defer_after_s:
                    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=wait)
                    self.wait_deferred(
                        DateTimeTrigger(moment),
                        why=f"{err} Waiting {wait:.0f} s for the granular hour",
                        kwargs={"granular_wait_s": round(wait, 3)},
                    )
                self.log.info("%s Waiting %.1f s in the worker for the granular hour", err, wait)
                time.sleep(wait)

    def _fetch(self, hook: AffiliateNetworkHook, pull: EntityTablePull) -> list[Piece]:
        from affiliate_network.reports.affiliate import fetch_entity_table

        return fetch_entity_table(hook, pull, self.log)
