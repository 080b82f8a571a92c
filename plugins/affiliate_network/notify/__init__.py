"""Someone hears about it: notifiers and deadline alerts, from ``include/notifications.yaml``.

A DAG file makes one call, :func:`attach_notifications`, on the DAG it built. It reads no
settings (a DAG file is parsed again and again; docs/architecture.md): what it attaches reads
``include/notifications.yaml`` when it fires, and does nothing while notifications are off
(no file, or ``enabled: false``, the default). It attaches:

* an ``on_failure_callback`` to every task (a tripped guardrail, a blocked sync, a day that did
  not reconcile, any other failure: the exception decides the message), :class:`FailureCallback`,
  which loads the notifier only when a task fails;
* a notifier to every human-in-the-loop task, sent when the request starts waiting;
* deadline alerts at fixed checkpoints after the run was queued (:data:`CHECKPOINTS_MIN`): a
  deadline's interval is part of the serialized DAG, so it cannot come from a file read when
  the alert fires. The checkpoint that first reaches the DAG's ``late_after_minutes`` announces
  the late run; the others fire, read the file and stay silent (so does a checkpoint of a run
  that has finished meanwhile). A run that ends in time has its deadlines deleted by Airflow.
  Airflow 3.2+; 3.1 gets none (``compat.deadline_alert`` says why, once). Only when the
  deployment sets :data:`CHECKPOINTS_ENV` (off by default: see there why).

See docs/notifications.md.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import DAG, Context

#: Import path of the deadline alert's callback (run by the executor when a run is late).
LATE_CALLBACK = "affiliate_network.notify.notifier.LateRunNotifier"
#: Minutes after a run was queued at which its deadline alerts check it: a DAG's
#: ``late_after_minutes`` is announced at the first checkpoint that reaches it (so 55 is told at
#: 60; more than a day is told at a day).
CHECKPOINTS_MIN = (15, 30, 45, 60, 90, 120, 180, 240, 360, 480, 720, 1440)

#: The deployment's switch for the deadline checkpoints (an environment variable: read at parse
#: without opening a file). Off by default: Airflow 3.3.2 cannot clear a task of a run that has
#: a run-queued deadline (``clearTaskInstances`` answers 500, "unsupported type for timedelta
#: seconds component: dict"), and clearing is the on-call path of every DAG here.
CHECKPOINTS_ENV = "AFFILIATE_NETWORK_DEADLINE_CHECKPOINTS"

__all__ = [
    "CHECKPOINTS_ENV",
    "CHECKPOINTS_MIN",
    "LATE_CALLBACK",
    "FailureCallback",
    "attach_notifications",
]


class FailureCallback:
    """A task's ``on_failure_callback``: the failure notifier, loaded when a task fails.

    Not a notifier itself: loading the notifier module cost every parse of a DAG file about
    1 ms (``docs/benchmarks.md``), and only a failing task needs it. Called by the task
    runner with the task's context, it sends what
    :class:`~affiliate_network.notify.notifier.AffiliateNetworkNotifier` sends, and like it never
    raises.
    """

    def __call__(self, context: Context) -> None:
        from affiliate_network.notify.notifier import AffiliateNetworkNotifier

        AffiliateNetworkNotifier()(context)

    def __repr__(self) -> str:
        return "FailureCallback()"


def checkpoints_enabled() -> bool:
    """Whether the deployment turned the deadline checkpoints on (:data:`CHECKPOINTS_ENV`).

    :raises ConfigValidationError: a value that is not a yes or a no, naming the variable.
    """
    raw = os.environ.get(CHECKPOINTS_ENV, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    from affiliate_network.exceptions import ConfigValidationError

    raise ConfigValidationError(
        f"environment variable {CHECKPOINTS_ENV} must be true or false, got {raw[:40]!r}"
    )


def attach_notifications(dag: DAG) -> DAG:
    """Attach the notifiers and the deadline checkpoints to ``dag``; return it.

    Reads no file: each notifier and checkpoint reads ``include/notifications.yaml`` when it
    fires (off: nothing is sent). The checkpoints only when :data:`CHECKPOINTS_ENV` is on.

    :param dag: a DAG whose tasks are all defined.
    """
    on_failure = FailureCallback()
    for task in dag.tasks:
        task.on_failure_callback = [*_callbacks(task.on_failure_callback), on_failure]
        if _is_human_review(task):  # Airflow's HITL module has loaded the notifier base anyway
            from affiliate_network.notify.notifier import (
                ON_REVIEW_WAITING,
                AffiliateNetworkNotifier,
            )

            _add_review_notifier(task, AffiliateNetworkNotifier(ON_REVIEW_WAITING))
    if not checkpoints_enabled():
        return dag
    from affiliate_network.compat import deadline_alert  # only with checkpoints: not every parse

    alerts = []
    previous = 0
    for minutes in CHECKPOINTS_MIN:
        alert = deadline_alert(
            dt.timedelta(minutes=minutes),
            callback=LATE_CALLBACK,
            kwargs={"checkpoint_minutes": minutes, "previous_minutes": previous},
            name=f"{dag.dag_id} not finished {minutes} min after it was queued",
        )
        if alert is None:  # Airflow 3.1 (compat.deadline_alert warned)
            break
        alerts.append(alert)
        previous = minutes
    if alerts:
        dag.deadline = [*_callbacks(dag.deadline), *alerts]
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
