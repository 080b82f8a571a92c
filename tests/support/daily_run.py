"""One run of the daily DAG's conversion tasks, in-process, as the scheduler would run them.

The operators themselves run (real HTTP to the sandbox, real files); what Airflow would carry
between them (the pulls' XCom summaries, the run id, the outlet events) is carried here by a
task context holding exactly those keys.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk.execution_time.context import OutletEventAccessors

from affiliate_network.operators.assets import dataset_asset
from affiliate_network.operators.conversion_report import ConversionReportOperator
from affiliate_network.operators.publish import PublishChangesOperator
from affiliate_network.operators.reconciliation import ReconciliationOperator

#: Fast retries: the sandbox's injected faults are retried without real back-off waits.
FAST_RETRIES = {"max_attempts": 8, "base_delay": 0.005, "max_delay": 0.02, "jitter": 0.0}
#: The daily DAG's pull task ids, in order.
PULL_TASKS = ("pull_conversions", "repull_trailing_window")


class RunXCom:
    """The XCom of one run: what each task returned, by task id (``ti.xcom_pull``)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def xcom_pull(self, task_ids: str | list[str]) -> Any:
        if isinstance(task_ids, str):
            return self.values.get(task_ids)
        return [self.values.get(t) for t in task_ids]


def run_context(day: str, run_id: str, xcom: RunXCom | None = None) -> dict[str, Any]:
    """The task context of a daily run whose data interval is ``day``."""
    start = pendulum.parse(day, tz="UTC")
    return {
        "data_interval_start": start,
        "data_interval_end": start.add(days=1),
        "outlet_events": OutletEventAccessors(),
        "run_id": run_id,
        "ti": xcom or RunXCom(),
    }


class DailyRun:
    """The daily DAG's conversion tasks for the run of ``day`` (pull, re-pull, reconcile,
    publish), each executed on its own so a test can stop between them.

    :param base: the output base.
    :param day: the run's day (``YYYY-MM-DD``).
    :param run_id: the Airflow run id.
    :param trailing_days: days re-pulled before ``day``.
    :param on_mismatch: the reconciliation's ``on_mismatch``.
    :param settle: the reconciliation's ``settle`` (re-pull a differing day once).
    """

    def __init__(
        self,
        base: Path,
        day: str,
        run_id: str,
        *,
        trailing_days: int = 7,
        on_mismatch: str = "fail",
        settle: bool = True,
    ) -> None:
        self.base = base
        self.day = day
        self.run_id = run_id
        self.trailing_days = trailing_days
        self.on_mismatch = on_mismatch
        self.settle = settle
        self.xcom = RunXCom()
        self.publish_context: dict[str, Any] | None = None

    def context(self) -> dict[str, Any]:
        return run_context(self.day, self.run_id, self.xcom)

    def _pull_op(self, task_id: str, **kwargs: Any) -> ConversionReportOperator:
        return ConversionReportOperator(
            task_id=task_id, base_path=str(self.base), timezone_id=67, network_timezone="UTC",
            currency_id="USD", show_events=True, outlets=[], hook_kwargs=dict(FAST_RETRIES),
            **kwargs,
        )  # fmt: skip

    def pull(self) -> dict[str, Any]:
        """``pull_conversions`` then ``repull_trailing_window``; their summaries."""
        self.xcom.values[PULL_TASKS[0]] = self._pull_op(PULL_TASKS[0]).execute(self.context())
        self.xcom.values[PULL_TASKS[1]] = self._pull_op(
            PULL_TASKS[1], lookback_days=self.trailing_days
        ).execute(self.context())
        return {t: self.xcom.values[t] for t in PULL_TASKS}

    def reconcile(self) -> dict[str, Any]:
        """``reconcile_conversions``: its summary (raises as the task would fail)."""
        op = ReconciliationOperator(
            task_id="reconcile_conversions", base_path=str(self.base),
            source_task_ids=list(PULL_TASKS), on_mismatch=self.on_mismatch, outlets=[],
            settle=self.settle,
            network_timezone="UTC", timezone_id=67, hook_kwargs=dict(FAST_RETRIES),
        )  # fmt: skip
        self.xcom.values["reconcile_conversions"] = op.execute(self.context())
        return self.xcom.values["reconcile_conversions"]

    def publish(self) -> dict[str, Any]:
        """``publish_conversions``: the event's extra (raises ``AirflowSkipException`` when
        nothing is pending)."""
        op = PublishChangesOperator(
            task_id="publish_conversions", base_path=str(self.base),
            source_task_ids=list(PULL_TASKS), reconciliation_task_id="reconcile_conversions",
        )  # fmt: skip
        self.publish_context = self.context()
        return op.execute(self.publish_context)

    def event_extra(self) -> dict[str, Any]:
        """The extra of the conversions event the publish step set."""
        assert self.publish_context is not None
        return dict(self.publish_context["outlet_events"][dataset_asset("conversions")].extra)

    def all(self) -> dict[str, Any]:
        """The whole run: pulls, reconciliation, publish; the event's extra."""
        self.pull()
        self.reconcile()
        return self.publish()


def previous_day(day: str, days: int = 1) -> str:
    return (dt.date.fromisoformat(day) - dt.timedelta(days=days)).isoformat()
