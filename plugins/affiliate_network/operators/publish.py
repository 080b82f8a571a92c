"""Announce changed partitions, and only changed ones, as one asset event.

In Airflow 3 a task with an Asset outlet emits an event every time it succeeds, and a
downstream DAG scheduled on the Asset runs for it. A re-pull that changed nothing must not
wake those DAGs, and it must not be "skipped" either: the pull did its work (it checked every
day), and a skipped pull would skip the tasks after it under the default trigger rule. So in
the daily DAG the pulls carry no outlet and report what changed in their XCom summary
(``partitions[*].changed``), and :class:`PublishChangesOperator`, a leaf after them, carries
the outlet: it emits one event listing the changed partitions (status transitions, new,
removed and updated counts, the change record's file), or ends **skipped** when nothing
changed. A skipped task emits no asset event, and a skipped leaf holds nothing up.

:func:`changed_partitions_extra` is the event ``extra`` both this step and a
:class:`~affiliate_network.operators.conversion_report.ConversionReportOperator` with its own
outlet use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from affiliate_network.compat import AirflowSkipException
from affiliate_network.operators.assets import dataset_asset, emit_asset_events

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["PublishChangesOperator", "changed_partitions_extra"]

#: What the event says of each changed partition (from the pull's partition summary).
_EVENT_FIELDS = ("date", "path", "rows", "checksum")


def changed_partitions_extra(
    dataset: str, partitions: Iterable[dict[str, Any]]
) -> tuple[dict[str, Any], list[str]]:
    """The asset event's ``extra`` and partition keys for the changed partitions only.

    :param dataset: the dataset folder (``conversions``).
    :param partitions: the pulls' partition summaries
        (:func:`~affiliate_network.reports.landing.land_conversion_day`); the last one of a
        day wins (a day pulled twice in one run).
    :returns: ``({"dataset", "partitions": [...]}, ["date=YYYY-MM-DD", ...])``; no partition
        when nothing changed.
    """
    by_day: dict[str, dict[str, Any]] = {}
    for part in partitions:
        if part.get("changed", True):  # a summary from before change tracking: changed
            entry = {k: part[k] for k in _EVENT_FIELDS if k in part}
            entry.update(part.get("changes") or {})
            by_day[part["date"]] = entry
    changed = [by_day[day] for day in sorted(by_day)]
    return {"dataset": dataset, "partitions": changed}, [f"date={p['date']}" for p in changed]


class PublishChangesOperator(BaseOperator):
    """Emit the dataset's asset event for the partitions the pulls changed; skip otherwise.

    Reads the XCom summaries of ``source_task_ids`` (report operators). When at least one
    partition changed, the task succeeds and its outlet's event lists the changed partitions
    (with their transition counts) and their partition keys; when none changed it raises
    ``AirflowSkipException``: skipped, no event, downstream DAGs on the Asset do not run. A
    failed pull fails the run before this step (default trigger rule ``all_success``: this
    step is then ``upstream_failed``, never a skip that hides it).

    :param dataset: the dataset folder; the outlet defaults to its Asset.
    :param source_task_ids: the tasks whose summaries to announce, in order.
    :param reconciliation_task_id: a :class:`ReconciliationOperator` task whose verdict the
        event carries (``"reconciled"`` and ``"reconciliation"``: date, verdict, comparison
        file); None: the event says nothing of it.
    """

    template_fields: Sequence[str] = ()
    ui_color = "#f3eefa"

    def __init__(
        self,
        *,
        dataset: str = "conversions",
        source_task_ids: Sequence[str],
        reconciliation_task_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs:
            kwargs["outlets"] = [dataset_asset(dataset)]
        super().__init__(**kwargs)
        self.dataset = dataset
        self.source_task_ids = list(source_task_ids)
        self.reconciliation_task_id = reconciliation_task_id

    def execute(self, context: Context) -> dict[str, Any]:
        summaries = context["ti"].xcom_pull(task_ids=self.source_task_ids)
        if isinstance(summaries, dict):  # one task id: Airflow returns the value itself
            summaries = [summaries]
        verdict = None
        if self.reconciliation_task_id:
            verdict = context["ti"].xcom_pull(task_ids=self.reconciliation_task_id)
        return self.publish(context, [s for s in summaries or [] if s], verdict)

    def publish(
        self,
        context: Context,
        summaries: Sequence[dict[str, Any]],
        verdict: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Annotate the event with the changed partitions of ``summaries``, or skip.

        :param context: the task context (its ``outlet_events``).
        :param summaries: the report operators' return values.
        :param verdict: the reconciliation task's summary (``date``, ``reconciled``,
            ``comparison``), carried into the event.
        :raises AirflowSkipException: no partition changed (no asset event).
        """
        parts = [p for summary in summaries for p in summary.get("partitions", [])]
        extra, keys = changed_partitions_extra(self.dataset, parts)
        if not keys:
            raise AirflowSkipException(
                f"no partition of {self.dataset} changed ({len(parts)} checked): "
                "no asset event, downstream DAGs do not run"
            )
        if verdict:
            extra["reconciled"] = bool(verdict.get("reconciled"))
            extra["reconciliation"] = {
                k: verdict[k] for k in ("date", "reconciled", "comparison") if k in verdict
            }
        emit_asset_events(context, self.outlets, extra, keys)
        self.log.info(
            "Announcing %d changed partition(s) of %s: %s",
            len(keys),
            self.dataset,
            ", ".join(f"{p['date']} {_describe(p)}" for p in extra["partitions"]),
        )
        return extra


def _describe(part: dict[str, Any]) -> str:
    """``(pending->approved: 3, new: 1)`` for the log."""
    if part.get("first_landing"):
        return f"(first landing, {part.get('rows')} rows)"
    counts = dict(part.get("transitions") or {})
    counts.update({k: part[k] for k in ("new", "removed", "updated") if part.get(k)})
    return "(" + ", ".join(f"{k}: {v}" for k, v in counts.items()) + ")"
