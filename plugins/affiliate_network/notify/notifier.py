"""The Airflow notifiers: on a task's failure, when a human review starts waiting, on a late run.

Each is a :class:`airflow.sdk.BaseNotifier`. It reads ``include/notifications.yaml`` when it
fires (so a channel change needs no re-parse), builds the message
(:mod:`affiliate_network.notify.messages`) and sends it (:mod:`affiliate_network.notify.channels`).
It never raises: Airflow's HITL operator calls its notifiers without a guard, and a task's
outcome must not depend on a mail server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseNotifier

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.notify import CHECKPOINTS_MIN

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.notify.messages import Message
    from affiliate_network.settings.models import NotificationSettings

#: The notifier's kinds: a task's failure (the exception decides the event), a waiting review.
ON_FAILURE, ON_REVIEW_WAITING = "failure", "review_waiting"


class AffiliateNetworkNotifier(BaseNotifier):
    """Tell a person, through the configured channels, what happened and what to do.

    :param kind: ``failure`` (an ``on_failure_callback``: guardrail tripped, sync blocked, day
        not reconciled, any other failure) or ``review_waiting`` (a HITL task's ``notifiers``).
    :raises ConfigValidationError: another kind.
    """

    def __init__(self, kind: str = ON_FAILURE, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if kind not in (ON_FAILURE, ON_REVIEW_WAITING):
            raise ConfigValidationError(
                f"notifier kind must be {ON_FAILURE!r} or {ON_REVIEW_WAITING!r}, got {kind!r}"
            )
        self.kind = kind

    def notify(self, context: Context) -> None:
        """Send the message; log (never raise) when it cannot be built or sent."""
        try:
            from affiliate_network.settings.models import load_notification_settings

            settings = load_notification_settings()
            if not settings.enabled:  # attached to every DAG; the file decides
                return
            if self.skipped(context, settings):
                return
            message = self.message(context, settings.runbook_url)
            if not settings.wants(message.event):
                self.log.info("Notification %r is not configured: not sent", message.event)
                return
            from affiliate_network.notify.channels import deliver

            deliver(message, settings, self.log)
        except Exception as err:
            from affiliate_network.notify.channels import safe_reason

            self.log.warning(
                "No notification sent (%s); the task's outcome is unchanged", safe_reason(err)
            )

    def skipped(self, context: Context, settings: NotificationSettings) -> bool:
        """True when this context is not announced (see :class:`LateRunNotifier`)."""
        return False

    def message(self, context: Context | dict[str, Any], runbook: str) -> Message:
        """The message for ``context``.

        :param context: what Airflow passed the notifier.
        :param runbook: base link of the runbook.
        """
        from affiliate_network.notify import messages

        if self.kind == ON_REVIEW_WAITING:
            return messages.describe_review(context, runbook)
        return messages.describe_failure(context, runbook)


class LateRunNotifier(AffiliateNetworkNotifier):
    """A deadline checkpoint's callback: is the run late by the DAG's ``late_after_minutes``?

    Run by the executor (a ``SyncCallback``) with the context the scheduler builds for a missed
    deadline (``dag_run`` as the REST API shows it, ``deadline``). It announces the run when
    this checkpoint is the first one that reaches the DAG's ``late_after_minutes`` (read now,
    not when the DAG was parsed).

    :param checkpoint_minutes: this checkpoint, minutes after the run was queued.
    :param previous_minutes: the checkpoint before it (0 for the first).
    :param late_after_minutes: a fixed deadline instead of the settings' (DAGs serialized by
        an earlier version of the provider carry it).
    :param context: set by Airflow.
    """

    def __init__(
        self,
        checkpoint_minutes: int = 0,
        previous_minutes: int = 0,
        late_after_minutes: int = 0,
        context: Context | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(ON_FAILURE, context=context, **kwargs)
        self.checkpoint_minutes = checkpoint_minutes
        self.previous_minutes = previous_minutes
        self.late_after_minutes = late_after_minutes

    def message(self, context: Context | dict[str, Any], runbook: str) -> Message:
        from affiliate_network.notify.messages import describe_late

        return describe_late(context, self.late_after_minutes, runbook)

    def skipped(self, context: Context, settings: NotificationSettings) -> bool:
        """Not this checkpoint's to announce, a finished run, or a backfill run unless
        ``late_backfill_runs`` (they queue together and wait for each other)."""
        # The scheduler's context: the run as the REST API shows it (a dict), not a DagRun.
        raw: Any = context.get("dag_run")
        run: dict[str, Any] = dict(raw or {})
        if self.checkpoint_minutes:
            late_after = settings.late_after(str(run.get("dag_id", "")))
            minutes = int(late_after.total_seconds() // 60) if late_after else 0
            last = self.checkpoint_minutes >= CHECKPOINTS_MIN[-1]
            if not minutes or minutes <= self.previous_minutes:
                return True
            if minutes > self.checkpoint_minutes and not last:
                return True
            self.late_after_minutes = minutes
        if str(run.get("state", "")).lower() in ("success", "failed"):
            return True
        if str(run.get("run_type", "")).lower() == "backfill" and not settings.late_backfill_runs:
            self.log.info("Backfill run %s is late: not announced", run.get("dag_run_id"))
            return True
        return False
