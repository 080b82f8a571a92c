"""``include/notifications.yaml``: off by default, validated with file and line; what every DAG
carries (notifiers on every task and the human review, deadline checkpoints), read from no file
when the DAG is parsed."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.notify import (
    CHECKPOINTS_ENV,
    CHECKPOINTS_MIN,
    LATE_CALLBACK,
    FailureCallback,
    attach_notifications,
    checkpoints_enabled,
)
from affiliate_network.notify.notifier import AffiliateNetworkNotifier
from affiliate_network.settings.models import NOTIFICATION_EVENTS, load_notification_settings
from tests.support.dag_files import DAGS_DIR, load_dag

DAGS = {
    "affiliate_daily_reports": 180,
    "affiliate_onhold_review": 55,
    "affiliate_offer_sync": 60,
}


def _ours(callbacks) -> list:
    return [c for c in callbacks or [] if isinstance(c, AffiliateNetworkNotifier | FailureCallback)]


def test_the_shipped_file_is_off_and_valid() -> None:
    settings = load_notification_settings()
    assert settings.enabled is False
    assert settings.source.endswith("include/notifications.yaml")
    assert set(settings.events) == set(NOTIFICATION_EVENTS)


@pytest.mark.parametrize("dag_id", sorted(DAGS))
def test_the_dag_files_read_no_settings_when_parsed(notify_include, dag_id: str) -> None:
    # A DAG file is parsed again and again: nothing of include/ is read then (an invalid
    # notifications.yaml does not stop it parsing; the notifiers say so when they fire).
    folder = notify_include({})
    (folder / "notifications.yaml").write_text("enabled: true\nwebhok: {}\n")
    # Nor the notifier: a failing task loads it (notify.FailureCallback), or a human review.
    watched = (
        "affiliate_network.settings.models",
        "affiliate_network.settings.loader",
        "affiliate_network.notify.notifier",
    )
    probe = (
        "import runpy, sys; runpy.run_path(sys.argv[1]); "
        f"print(sorted(m for m in sys.modules if m in {watched!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(DAGS_DIR / f"{dag_id}.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected = watched[2:] if dag_id == "affiliate_onhold_review" else ()
    assert done.stdout.strip().splitlines()[-1] == str(sorted(expected))


@pytest.mark.parametrize("dag_id", sorted(DAGS))
def test_no_deadline_unless_the_deployment_turns_the_checkpoints_on(dag_id, monkeypatch) -> None:
    """Airflow 3.3.2 cannot clear a task of a run with a run-queued deadline (500): a new
    deployment's DAGs carry none, so clearing (the on-call path) works; a bad switch is named."""
    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    dag = load_dag(DAGS_DIR / f"{dag_id}.py", dag_id)
    assert not dag.deadline
    for task in dag.tasks:
        assert len(_ours(task.on_failure_callback)) == 1, task.task_id
    monkeypatch.setenv(CHECKPOINTS_ENV, "maybe")
    with pytest.raises(ConfigValidationError, match=CHECKPOINTS_ENV):
        checkpoints_enabled()


@pytest.mark.parametrize("dag_id", sorted(DAGS))
def test_each_dag_carries_the_notifiers_and_deadline_checkpoints(dag_id, monkeypatch) -> None:
    from airflow.sdk.definitions.callback import SyncCallback
    from airflow.sdk.definitions.deadline import DagRunQueuedAtDeadline

    monkeypatch.setenv(CHECKPOINTS_ENV, "true")
    dag = load_dag(DAGS_DIR / f"{dag_id}.py", dag_id)

    assert [alert.interval for alert in dag.deadline] == [
        dt.timedelta(minutes=m) for m in CHECKPOINTS_MIN
    ]
    previous = [0, *CHECKPOINTS_MIN[:-1]]
    for alert, minutes, before in zip(dag.deadline, CHECKPOINTS_MIN, previous, strict=True):
        assert isinstance(alert.reference, DagRunQueuedAtDeadline)
        assert isinstance(alert.callback, SyncCallback)  # Airflow 3.2+ (3.1: .ci/older-airflow)
        assert alert.callback.path == LATE_CALLBACK
        assert alert.callback.kwargs == {"checkpoint_minutes": minutes, "previous_minutes": before}
        assert alert.name == f"{dag_id} not finished {minutes} min after it was queued"
    for task in dag.tasks:
        assert len(_ours(task.on_failure_callback)) == 1, task.task_id
    if dag_id == "affiliate_onhold_review":
        human = dag.get_task("human_review")
        [waiting] = _ours(human.partial_kwargs["notifiers"])
        assert waiting.kind == "review_waiting"
    # What the scheduler stores: the deadline is part of the serialized DAG.
    from airflow.serialization.serialized_objects import DagSerialization

    assert LATE_CALLBACK in str(DagSerialization.to_dict(dag))


def test_attaching_twice_keeps_other_callbacks(notify_include) -> None:
    from airflow.sdk import DAG, BaseOperator

    def mine(context) -> None:
        pass

    with DAG("x", schedule=None) as dag:
        BaseOperator(task_id="t", on_failure_callback=mine)
    notify_include({"enabled": True, "email": {"to": ["ops@example.com"]}})
    attach_notifications(dag)
    callbacks = dag.get_task("t").on_failure_callback
    assert callbacks[0] is mine
    assert len(_ours(callbacks)) == 1


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        ("enabled: true\n", "notifications.yaml:1", "needs a channel"),
        (
            "enabled: true\nwebhook:\n  conn_id: chat\nevents: [guardrail_tripped, lunch]\n",
            "notifications.yaml:4: events[1]",
            "guardrail_tripped",
        ),
        (
            "enabled: true\nwebhok:\n  conn_id: chat\n",
            "notifications.yaml:2: webhok",
            "did you mean 'webhook'",
        ),
        (
            "enabled: true\nemail:\n  to: []\n",
            "notifications.yaml:3: email.to",
            "at least 1",
        ),
        (
            "enabled: true\nwebhook: {conn_id: chat}\nlate_after_minutes:\n  x: 0\n",
            "notifications.yaml:4: late_after_minutes.x",
            "greater than 0",
        ),
    ],
)
def test_an_invalid_file_names_file_line_and_field(notify_include, text, where, says) -> None:
    folder = notify_include({})
    (folder / "notifications.yaml").write_text(text)
    with pytest.raises(ConfigValidationError) as error:
        load_notification_settings()
    assert where in str(error.value)
    assert says in str(error.value)
