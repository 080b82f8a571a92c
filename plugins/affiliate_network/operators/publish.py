"""Announce changed partitions, and only changed ones, as one asset event.

In Airflow 3 a task with an Asset outlet emits an event every time it succeeds, and a
downstream DAG scheduled on the Asset runs for it. A re-pull that changed nothing must not
wake those DAGs, and it must not be "skipped" either: the pull did its work (it checked every
day), and a skipped pull would skip the tasks after it under the default trigger rule. So in
the daily DAG the pulls and the reconciliation carry no outlet, and
:class:`PublishChangesOperator`, a leaf after them, carries it: it emits one event listing the
partitions whose change no run has announced yet (status transitions, new, removed and
updated counts, the change records' files, and each partition's reconciliation verdict), or
ends **skipped** when there is none. A skipped task emits no asset event, and a skipped leaf
holds nothing up.

What is pending is read from the dataset (:mod:`affiliate_network.reports.announcements`), not
from this run's pulls: a change recorded by a run that failed before its publish step is
announced by the next run that succeeds, exactly once.

What is announced, and the exactly-once claim, is
:func:`affiliate_network.reports.announcements.announce_pending` (also what a
:class:`~affiliate_network.operators.conversion_report.ConversionReportOperator` with its own
outlet announces); this operator emits it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from affiliate_network.compat import AirflowSkipException
from affiliate_network.operators.assets import dataset_asset, emit_asset_events

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["PublishChangesOperator"]


class PublishChangesOperator(BaseOperator):
    """Emit the dataset's asset event for every change no run has announced; skip otherwise.

    The pending changes are read from the dataset
    (:func:`~affiliate_network.reports.announcements.announce_pending`): the changes this
    run's pulls recorded, and those of an earlier run that failed before announcing them. When
    at least one partition is pending, the task succeeds and its outlet's event lists them
    (what changed since their last announced content, and each partition's reconciliation
    verdict) with their partition keys; when none is, it raises ``AirflowSkipException``:
    skipped, no event, downstream DAGs on the Asset do not run. A failed pull or
    reconciliation fails the run before this step (default trigger rule ``all_success``: this
    step is then ``upstream_failed``, never a skip that hides it), and its changes stay
    pending for the next run.

    :param dataset: the dataset folder; the outlet defaults to its Asset.
    :param base_path: output base (templated); default as the report operators'.
    :param reconciliation_task_id: a :class:`ReconciliationOperator` task whose verdicts the
        event carries per partition; None: the comparison files beside the partitions only.
    :param source_task_ids: the pull tasks before this step (named in the log only: the
        pending changes are read from the dataset).
    """

    template_fields: Sequence[str] = ("base_path",)
    ui_color = "#f3eefa"

    def __init__(
        self,
        *,
        dataset: str = "conversions",
        base_path: str | None = None,
        reconciliation_task_id: str | None = None,
        source_task_ids: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs:
            kwargs["outlets"] = [dataset_asset(dataset)]
        super().__init__(**kwargs)
        self.dataset = dataset
        self.base_path = base_path
        self.reconciliation_task_id = reconciliation_task_id
        self.source_task_ids = list(source_task_ids)

    def execute(self, context: Context) -> dict[str, Any]:
        summary = None
        if self.reconciliation_task_id:
            summary = context["ti"].xcom_pull(task_ids=self.reconciliation_task_id)
        return self.publish(context, summary)

    def publish(
        self, context: Context, reconciliation: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Announce the pending changes with their verdicts, or skip.

        :param context: the task context (its ``run_id`` and ``outlet_events``).
        :param reconciliation: the reconciliation task's summary (its ``partitions``: one
            verdict per day), or ``None``.
        :raises AirflowSkipException: nothing pending (no asset event).
        """
        from affiliate_network.reports.announcements import announce_pending
        from affiliate_network.reports.verdicts import DayVerdict
        from affiliate_network.settings.paths import resolve_data_base

        verdicts: dict[str, DayVerdict] | None = None
        if reconciliation is not None:
            verdicts = {
                str(p["date"]): DayVerdict.from_dict(p)
                for p in reconciliation.get("partitions", [])
            }
        extra, keys = announce_pending(
            context.get("run_id"), resolve_data_base(self.base_path), self.dataset, verdicts
        )
        if not keys:
            raise AirflowSkipException(
                f"no change of {self.dataset} left to announce: no asset event, downstream "
                "DAGs do not run"
            )
        emit_asset_events(context, self.outlets, extra, keys)
        self.log.info(
            "Announcing %d changed partition(s) of %s: %s",
            len(keys),
            self.dataset,
            ", ".join(f"{p['date']} {_describe(p)}" for p in extra["partitions"]),
        )
        return extra


def _describe(part: dict[str, Any]) -> str:
    """``(pending->approved: 3, new: 1; reconciled)`` for the log."""
    verdict = (part.get("reconciliation") or {}).get("verdict", "not_compared")
    if part.get("first_landing"):
        return f"(first landing, {part.get('rows')} rows; {verdict})"
    counts = dict(part.get("transitions") or {})
    counts.update({k: part[k] for k in ("new", "removed", "updated") if part.get(k)})
    return "(" + ", ".join(f"{k}: {v}" for k, v in counts.items()) + f"; {verdict})"
