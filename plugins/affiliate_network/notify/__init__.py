"""Someone hears about it: notifiers and deadline alerts, from ``include/notifications.yaml``.

A DAG file makes one call, :func:`attach_notifications`, on the DAG it built. With notifications
off (no file, or ``enabled: false``, the default) it attaches nothing: the DAG is exactly what it
was. With them on it attaches:

* an ``on_failure_callback`` notifier to every task (a tripped guardrail, a blocked sync, a day
  that did not reconcile, any other failure: the exception decides the message);
* a notifier to every human-in-the-loop task, sent when the request starts waiting;
* a deadline alert (``late_after_minutes``) whose callback announces a late run.

What is sent, and where, is read again when a notifier fires. See docs/notifications.md.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import DAG

    from affiliate_network.settings import NotificationSettings

#: Import path of the deadline alert's callback (run by the executor when a run is late).
LATE_CALLBACK = "affiliate_network.notify.notifier.LateRunNotifier"

__all__ = ["LATE_CALLBACK", "attach_notifications"]


def attach_notifications(dag: DAG, settings: NotificationSettings | None = None) -> DAG:
    """Attach the configured notifiers and deadline alert to ``dag``; return it.

    :param dag: a DAG whose tasks are all defined.
    :param settings: the notification settings (default: read ``include/notifications.yaml``).
    :raises ConfigValidationError: the file is invalid (names file, line and field).
    """
    if settings is None:
        from affiliate_network.settings import load_notification_settings

        settings = load_notification_settings()
    if not settings.enabled:
        return dag
    from affiliate_network.notify.notifier import (
        ON_REVIEW_WAITING,
        AffiliateNetworkNotifier,
    )

    on_failure = AffiliateNetworkNotifier()
    on_waiting = AffiliateNetworkNotifier(ON_REVIEW_WAITING)
    for task in dag.tasks:
        task.on_failure_callback = [*_callbacks(task.on_failure_callback), on_failure]
        if _is_human_review(task):
            _add_review_notifier(task, on_waiting)
    late_after = settings.late_after(dag.dag_id)
    if late_after is not None:
        from airflow.sdk.definitions.callback import SyncCallback
        from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

        minutes = int(late_after.total_seconds() // 60)
        alert = DeadlineAlert(
            reference=DeadlineReference.DAGRUN_QUEUED_AT,
            interval=late_after,
            callback=SyncCallback(LATE_CALLBACK, kwargs={"late_after_minutes": minutes}),
            name=f"{dag.dag_id} late after {minutes} min",
        )
        dag.deadline = [*_callbacks(dag.deadline), alert]
    return dag


def _callbacks(value: Any) -> list[Any]:
    if not value:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _is_human_review(task: Any) -> bool:
    # Only a DAG that imported Airflow's HITL module can hold such a task: no import here.
    hitl = sys.modules.get("airflow.providers.standard.operators.hitl")
    cls = getattr(task, "operator_class", type(task))
    return hitl is not None and isinstance(cls, type) and issubclass(cls, hitl.HITLOperator)


def _add_review_notifier(task: Any, notifier: Any) -> None:
    partial = getattr(task, "partial_kwargs", None)
    if partial is not None:  # a mapped task: the notifiers reach each expanded request
        partial["notifiers"] = [*_callbacks(partial.get("notifiers")), notifier]
    else:
        task.notifiers = [*_callbacks(task.notifiers), notifier]
