"""ReconciliationOperator: compare landed days with the network's own aggregated report.

Thin: it resolves the days and the settings, makes one call into
:func:`affiliate_network.reports.verdicts.reconcile_days`, emits the asset event of the days'
partitions with each one's verdict in its extra, and returns the verdicts (XCom).
Heavy modules are imported in ``execute``: DAG files import this module at parse time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.report_base import ReportOperatorBase

if TYPE_CHECKING:
    from airflow.sdk import Context

#: What a difference beyond the tolerance does (reports.reconcile.ON_MISMATCH; kept here so a
#: DAG file's parse does not import the job module).
_ON_MISMATCH = ("fail", "warn")
#: The endpoint read, for lineage.
NETWORK_ENTITY_TABLE_ENDPOINT = "/networks/reporting/entity/table"


class ReconciliationOperator(ReportOperatorBase):
    """Reconcile landed days of a dataset with the network's report, one verdict per partition.

    Which days: ``date`` when given; else, with ``source_task_ids``, every day those pull tasks
    landed or re-landed in this run (their XCom summaries) and every day whose change no run
    has announced yet (:func:`~affiliate_network.reports.announcements.pending_changes`; a
    difference on such a day that this run did not land is a warning, not a failure); else the
    run's day. Per day it compares ``cv``, ``payout`` and ``revenue`` per (affiliate,
    offer) and in total with ``POST /networks/reporting/entity/table`` (non-granular columns
    only) and writes ``_reconciliation.json`` beside the day's manifest; a day the pulls of
    this run re-pulled and found unchanged since it reconciled with the same tolerance keeps
    that verdict (:mod:`affiliate_network.reports.verdicts`). Beyond the tolerance it fails
    after every day was compared (``on_mismatch="fail"``,
    :class:`~affiliate_network.exceptions.ReconciliationError` naming each differing day, not
    retried) or warns. Its outlets (the dataset's Asset) get an event whose extra lists each
    partition with ``"reconciled"`` (true, false, or null when not compared) and its
    ``"reconciliation"`` (verdict and reason); a failed reconciliation emits none.

    :param affiliate_network_conn_id: network-portal connection.
    :param date: the day ``YYYY-MM-DD`` (templated); default: the days of ``source_task_ids``,
        else the run's day (the data interval's last day in the network timezone, as the pull
        lands it).
    :param source_task_ids: the pull tasks whose landed days to reconcile (the daily DAG's
        ``pull_conversions`` and ``repull_trailing_window``).
    :param dataset: the dataset folder under the base.
    :param base_path: output base (templated); default as the report operators'.
    :param on_mismatch: ``fail`` or ``warn`` (templated: a DAG param).
    :param money_tolerance: absolute difference allowed in payout and revenue (templated;
        default ``0``: money is exact decimal on both sides).
    :param count_tolerance: absolute difference allowed in conversions (templated; default 0).
    :param max_cells: differing cells named per day in the error.
    :param keep_valid: a day the pulls of this run found unchanged keeps its still-valid verdict
        (default); ``False`` compares every day again.
    :param settle: a landed day that differs is re-pulled once and compared again before its
        verdict (default): a status the network changed after the landing (another run's
        approvals) settles, a lost row still fails. ``False``: the first comparison decides.
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
        source_task_ids: Sequence[str] = (),
        dataset: str = "conversions",
        base_path: str | None = None,
        on_mismatch: str = "fail",
        money_tolerance: str | float | None = None,
        count_tolerance: int | str | None = None,
        max_cells: int = 20,
        keep_valid: bool = True,
        settle: bool = True,
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
        if isinstance(source_task_ids, str):
            raise ConfigValidationError("source_task_ids must be a list of task ids")
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.date = date
        self.source_task_ids = list(source_task_ids)
        self.dataset = dataset
        self.base_path = base_path
        self.on_mismatch = on_mismatch
        self.money_tolerance = money_tolerance
        self.count_tolerance = count_tolerance
        self.max_cells = max_cells
        self.keep_valid = keep_valid
        self.settle = settle
        self.network_timezone = network_timezone
        self.timezone_id = timezone_id
        self.hook_kwargs = hook_kwargs
        # The window resolution of the report operators, for one day.
        self.from_date = date
        self.to_date = date
        self.currency_id = None

    def days(self, context: Context, base: str) -> tuple[list[str], set[str], list[str]]:
        """The days to reconcile (see the class doc): those this run landed, oldest first;
        those of them the pulls found unchanged (they may keep their verdict); and the days
        only pending from an earlier run."""
        if self.date or not self.source_task_ids:
            self.from_date = self.to_date = self.date or None
            return [self._window(context)[1].isoformat()], set(), []
        from affiliate_network.reports.announcements import pending_changes

        summaries = context["ti"].xcom_pull(task_ids=self.source_task_ids)
        if isinstance(summaries, dict):  # one task id: Airflow returns the value itself
            summaries = [summaries]
        parts = [p for s in summaries or [] if s for p in s.get("partitions", [])]
        landed = {str(p["date"]) for p in parts}
        # A day pulled twice in one run counts as changed if either pull changed it.
        changed = {str(p["date"]) for p in parts if p.get("changed", True)}
        pending = {
            p.keys["date"]
            for p in pending_changes(base, self.dataset, run_id=context.get("run_id"))
            if "date" in p.keys
        }
        return sorted(landed), landed - changed, sorted(pending - landed)

    def _reland(self, base: str, context: Context) -> Callable[[str], object]:
        """Re-land one day as its manifest's request asked (a new content is a change the
        publish step announces)."""
        from affiliate_network.partitions.manifest import MANIFEST_NAME, read_manifest
        from affiliate_network.reports.landing import land_conversion_day
        from affiliate_network.reports.pull import ConversionPull
        from affiliate_network.reports.storage import partition_path

        run = context.get("run_id")

        def reland(day: str) -> object:
            part = partition_path(base, self.dataset, date=day)
            manifest = read_manifest(part)
            if manifest is None or not manifest.request:
                return None
            return land_conversion_day(
                self.hook,
                base,
                ConversionPull.from_record(manifest.request, f"{part}/{MANIFEST_NAME}"),
                dataset=self.dataset,
                format=manifest.format,
                only_if_changed=True,
                run_id=str(run) if run else None,
                log=self.log,
            )

        return reland

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.reports.reconcile import Tolerance
        from affiliate_network.reports.verdicts import reconcile_days
        from affiliate_network.settings.paths import resolve_data_base

        self.reset_lineage()
        base = resolve_data_base(self.base_path)
        tolerance = Tolerance.of(self.money_tolerance, self.count_tolerance)
        landed, unchanged, earlier = self.days(context, base)
        settings: dict[str, Any] = {
            "dataset": self.dataset,
            "tolerance": tolerance,
            "max_cells": self.max_cells,
            "log": self.log,
        }
        # A day an earlier run left unannounced (outside this run's window): its verdict goes
        # into the announcement, but a difference there is not this run's failure (it would
        # fail every later run, as nothing re-pulls it).
        verdicts = reconcile_days(self.hook, base, earlier, on_mismatch="warn", **settings)
        verdicts += reconcile_days(
            self.hook,
            base,
            landed,
            on_mismatch=str(self.on_mismatch),
            repulled_unchanged=unchanged if self.keep_valid else (),
            settle=self._reland(base, context) if self.settle else None,
            **settings,
        )
        verdicts.sort(key=lambda v: v.date)
        if any(v.comparison and not v.kept for v in verdicts):
            self._record_endpoint_read(NETWORK_ENTITY_TABLE_ENDPOINT)
        entries = [
            {
                "date": v.date,
                "checksum": v.checksum,
                "reconciled": v.reconciled,
                "reconciliation": v.to_dict(),
            }
            for v in verdicts
        ]
        self._emit_asset_events(
            context,
            {"dataset": self.dataset, "partitions": entries},
            [f"date={v.date}" for v in verdicts],
        )
        return {
            "dataset": self.dataset,
            "partitions": [v.to_dict() for v in verdicts],
            # Dates by verdict; never one flag for all days.
            "days": {
                name: [v.date for v in verdicts if v.verdict == name]
                for name in ("reconciled", "differs", "not_compared")
            },
        }
