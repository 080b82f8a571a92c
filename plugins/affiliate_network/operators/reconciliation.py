"""ReconciliationOperator: compare a landed day with the network's own aggregated report.

Thin: it resolves the day and the settings, makes one call into
:func:`affiliate_network.reports.reconcile.reconcile_day`, emits the asset event of the day's
partition with ``"reconciled"`` in its extra, and returns the job's small summary (XCom).
Heavy modules are imported in ``execute``: DAG files import this module at parse time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.report_base import ReportOperatorBase
from affiliate_network.paths import resolve_data_base

if TYPE_CHECKING:
    from airflow.sdk import Context

#: What a difference beyond the tolerance does (reports.reconcile.ON_MISMATCH; kept here so a
#: DAG file's parse does not import the job module).
_ON_MISMATCH = ("fail", "warn")
#: The endpoint read, for lineage.
NETWORK_ENTITY_TABLE_ENDPOINT = "/networks/reporting/entity/table"


class ReconciliationOperator(ReportOperatorBase):
    """Reconcile the run's day (or ``date``) of a landed dataset with the network's report.

    Compares ``cv``, ``payout`` and ``revenue`` per (affiliate, offer) and in total with
    ``POST /networks/reporting/entity/table`` (non-granular columns only), writes
    ``_reconciliation.json`` beside the day's manifest, and fails (``on_mismatch="fail"``,
    :class:`~affiliate_network.exceptions.ReconciliationError`, not retried) or warns beyond
    the tolerance. Its outlets (the dataset's Asset) get an event whose extra says
    ``"reconciled": true`` (or ``false`` under ``warn``); a failed reconciliation emits none.

    :param affiliate_network_conn_id: network-portal connection.
    :param date: the day ``YYYY-MM-DD`` (templated); default: the run's day (the data
        interval's last day in the network timezone, as the pull lands it).
    :param dataset: the dataset folder under the base.
    :param base_path: output base (templated); default as the report operators'.
    :param on_mismatch: ``fail`` or ``warn`` (templated: a DAG param).
    :param money_tolerance: absolute difference allowed in payout and revenue (templated;
        default ``0``: money is exact decimal on both sides).
    :param count_tolerance: absolute difference allowed in conversions (templated; default 0).
    :param max_cells: differing cells named in the error.
    :param network_timezone: IANA name of the network's timezone, to turn the data interval
        into a day (default: ``include/network.yaml``).
    :param timezone_id: the network's timezone id (default: ``include/network.yaml``); the
        report itself is asked in the timezone the day was pulled in (its manifest).
    :param hook_kwargs: extra :class:`AffiliateNetworkHook` arguments.
    """

    template_fields: Sequence[str] = (
        "date",
        "base_path",
        "on_mismatch",
        "money_tolerance",
        "count_tolerance",
    )
    ui_color = "#f4efe8"

    def __init__(
        self,
        *,
        affiliate_network_conn_id: str = "affiliate_network_default",
        date: str | None = None,
        dataset: str = "conversions",
        base_path: str | None = None,
        on_mismatch: str = "fail",
        money_tolerance: str | float | None = None,
        count_tolerance: int | str | None = None,
        max_cells: int = 20,
        network_timezone: str | None = None,
        timezone_id: int | str | None = None,
        hook_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if "{{" not in on_mismatch and on_mismatch not in _ON_MISMATCH:
            raise ConfigValidationError(
                f"on_mismatch {on_mismatch!r}: expected one of {list(_ON_MISMATCH)}"
            )
        if not dataset or "/" in dataset or dataset.startswith(("_", ".")):
            raise ConfigValidationError(f"dataset {dataset!r} must be a plain folder name")
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.date = date
        self.dataset = dataset
        self.base_path = base_path
        self.on_mismatch = on_mismatch
        self.money_tolerance = money_tolerance
        self.count_tolerance = count_tolerance
        self.max_cells = max_cells
        self.network_timezone = network_timezone
        self.timezone_id = timezone_id
        self.hook_kwargs = hook_kwargs
        # The window resolution of the report operators, for one day.
        self.from_date = date
        self.to_date = date
        self.currency_id = None

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.reports.reconcile import Tolerance, reconcile_day

        self.reset_lineage()
        self.from_date = self.to_date = self.date or None
        _, day = self._window(context)
        tolerance = Tolerance.of(self.money_tolerance, self.count_tolerance)
        summary = reconcile_day(
            self.hook,
            resolve_data_base(self.base_path),
            day,
            dataset=self.dataset,
            tolerance=tolerance,
            on_mismatch=str(self.on_mismatch),
            max_cells=self.max_cells,
            log=self.log,
        )
        self._record_endpoint_read(NETWORK_ENTITY_TABLE_ENDPOINT)
        self._emit_asset_events(
            context,
            {
                "dataset": self.dataset,
                "reconciled": summary["reconciled"],
                "comparison": summary["comparison"],
                "partitions": [self._partition_entry(summary)],
            },
            [f"date={summary['date']}"],
        )
        return summary

    @staticmethod
    def _partition_entry(summary: dict[str, Any]) -> dict[str, Any]:
        """The day's partition as the pull's event describes it (date, path, rows, checksum)."""
        from affiliate_network.reports.storage import read_manifest

        manifest = read_manifest(summary["path"])
        return {
            "date": summary["date"],
            "path": summary["path"],
            "rows": manifest.row_count if manifest else None,
            "checksum": manifest.content_checksum if manifest else None,
        }
