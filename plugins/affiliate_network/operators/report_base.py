"""What the two report operators share: the network's timezone and currency, and the window.

The window itself is computed by :mod:`affiliate_network.reports.window` from plain dates; this
base only reads the run's data interval (or ``run_after``) from the task context.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from affiliate_network.api.report_columns import FORMATS
from affiliate_network.compat import AirflowSkipException
from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.assets import emit_asset_events
from affiliate_network.operators.base import AffiliateNetworkBaseOperator
from affiliate_network.operators.lineage import (
    OpenLineageMixin,
    api_endpoint_dataset,
    storage_dataset,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


def check_format(fmt: str) -> None:
    """Refuse an unknown output format (a template is checked once rendered).

    :raises ConfigValidationError: not one of :data:`~affiliate_network.api.report_columns.FORMATS`.
    """
    if "{{" not in fmt and fmt not in FORMATS:
        raise ConfigValidationError(f"format {fmt!r}: expected one of {list(FORMATS)}")


# The mixin after the operator base: with a plain class first in the bases, Airflow's operator
# metaclass wraps the inherited ``__init__`` a second time and mapped tasks lose their inlets.
class ReportOperatorBase(AffiliateNetworkBaseOperator, OpenLineageMixin):
    """Timezone, currency and window resolution, asset events and lineage, for the report operators.

    Lineage (OpenLineage provider, optional): input the report endpoint, outputs the
    partitions written (:mod:`affiliate_network.operators.lineage`).
    """

    from_date: str | None
    to_date: str | None
    timezone_id: int | str | None
    network_timezone: str | None
    currency_id: str | None

    def _network_defaults(self) -> dict[str, Any]:
        if not hasattr(self, "_network_cfg"):
            from affiliate_network.settings.models import load_network_config

            self._network_cfg = load_network_config()
        return self._network_cfg

    def _timezone(self) -> tuple[int, str]:
        """``(timezone_id, IANA name)``: explicit arguments, else ``include/network.yaml``.

        There is no operator-level default: the network setting decides, checked against the
        API's timezone table (a mismatch fails here, before any request).
        """
        if not hasattr(self, "_tz"):
            from affiliate_network.settings.models import NetworkSettings, resolve_timezone

            explicit = (self.timezone_id, self.network_timezone)
            cfg = None
            if all(x is None or str(x).strip() == "" for x in explicit):
                cfg = NetworkSettings(**self._network_defaults())
            self._tz = resolve_timezone(self.timezone_id, self.network_timezone, cfg)
        return self._tz

    def _check_dag_timezone(self) -> None:
        """The DAG's timetable cuts days where the network does, before any request.

        A window taken from the run's data interval is whole network days only when the
        timetable's zone is the network's (:mod:`affiliate_network.settings.agreement`).

        :raises ConfigValidationError: they differ, naming both values and the files.
        """
        from affiliate_network.compat import timetable_timezone
        from affiliate_network.settings.agreement import check_network_timezone, same_zone

        dag = self.dag if self.has_dag() else None  # type: ignore[no-untyped-call]
        zone = timetable_timezone(getattr(dag, "timetable", None))
        if dag is None or zone is None:
            return
        setting = f"the timezone of DAG {dag.dag_id}'s timetable"
        where = str(getattr(dag, "fileloc", None) or dag.dag_id)
        if any(
            x is not None and str(x).strip() != ""
            for x in (self.timezone_id, self.network_timezone)
        ):
            network = self._timezone()[1]  # the operator's own arguments, not network.yaml
            if not same_zone(zone, network):
                raise ConfigValidationError(
                    f"{where}: {setting} is {zone!r} but task {self.task_id}'s "
                    f"timezone_id/network_timezone arguments say {network!r}: a run would land "
                    "a day that has not finished. Make them equal."
                )
            return
        check_network_timezone(zone, setting=setting, where=where)

    def _tz_id(self) -> int:
        return self._timezone()[0]

    def _currency(self) -> str | None:
        if self.currency_id is not None:
            return self.currency_id or None
        return self._network_defaults().get("currency_id")

    def _window(self, context: Context) -> tuple[dt.date, dt.date]:
        """First and last day (inclusive) of the pull, in the network's timezone.

        ``from_date``/``to_date`` win; otherwise the run's data interval (see
        :func:`affiliate_network.reports.window.report_window`).
        """
        from affiliate_network.reports.window import last_complete_day, report_window

        tz = self._timezone()[1]
        if not self.from_date:
            self._check_dag_timezone()
        if not self.from_date and context.get("data_interval_start") is None:
            # A manual run triggered without a logical date has no data interval (Airflow 3):
            # land the last complete day before the run, as the scheduled run would.
            dag_run = context.get("dag_run")
            run_after = getattr(dag_run, "run_after", None) or context.get("logical_date")
            day = last_complete_day(run_after, tz)
            self.log.info("no data interval in this run: reporting %s, the day before it", day)
            return day, day
        return report_window(
            timezone=tz,
            from_date=self.from_date,
            to_date=self.to_date,
            interval_start=context.get("data_interval_start"),
            interval_end=context.get("data_interval_end"),
        )

    def _emit_asset_events(self, context: Context, extra: dict[str, Any], keys: list[str]) -> None:
        """Annotate this task's asset event(s): partitions written and their checksums."""
        emit_asset_events(context, self.outlets, extra, keys)

    def _record_endpoint_read(self, path: str) -> None:
        """Lineage: the report endpoint ``path`` was read (call while the hook is open)."""
        self.record_lineage(inputs=[api_endpoint_dataset(self.hook.base_url, path)])

    def _record_partition_written(self, location: str, rows: int) -> None:
        """Lineage: a partition was published at ``location`` with ``rows`` rows."""
        self.record_lineage(outputs=[storage_dataset(location, rows=rows)])


def announce_landed(
    context: Context,
    outlets: Iterable[Any] | None,
    base: str,
    dataset: str,
    partitions: Iterable[dict[str, Any]],
    *,
    only_if_changed: bool,
) -> list[str] | None:
    """Emit a pull's asset event: every pending change, or the pull's changed partitions.

    :param context: the task context.
    :param outlets: the task's outlets; without an Asset among them nothing is announced.
    :param base: the output base.
    :param dataset: the dataset folder.
    :param partitions: the pull's partition summaries.
    :param only_if_changed: the pull tracks changes (announce every pending one, this run's
        and a failed run's); else its changed partitions are announced.
    :returns: the partition keys announced, or ``None`` without an Asset outlet.
    """
    from airflow.sdk import Asset

    from affiliate_network.reports.announcements import announce_pending, changed_partitions_extra

    if not any(isinstance(o, Asset) for o in outlets or ()):
        return None
    if only_if_changed:
        extra, keys = announce_pending(context.get("run_id"), base, dataset)
    else:
        extra, keys = changed_partitions_extra(dataset, partitions)
    emit_asset_events(context, outlets, extra, keys)
    return keys


def skip_if_unannounced(keys: list[str] | None, dataset: str, partitions: int) -> None:
    """End a pull skipped when its Asset outlet has nothing to announce.

    A task with an outlet emits an event on every success; skipped, the Asset gets none. The
    work done is kept.

    :param keys: :func:`announce_landed`'s keys (``None``: no Asset outlet, nothing to skip).
    :param dataset: the dataset folder.
    :param partitions: how many partitions the pull landed.
    :raises AirflowSkipException: nothing announced.
    """
    if keys == []:
        raise AirflowSkipException(
            f"none of the {partitions} partition(s) of {dataset} changed and no "
            "change is left to announce: no asset event"
        )
