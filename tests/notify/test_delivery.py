"""Notifications reach a local receiver from real DAG runs (``airflow dags test``, the sandbox).

A tripped guardrail, a waiting human review and a blocked offer sync each arrive at a loopback
chat webhook and/or a loopback SMTP server, saying what happened, what is at stake and what to
do, without the API key. A channel whose receiver is down is logged, and the task ends exactly
as it would without notifications. A late run's deadline callback is run the way the executor
runs it (the scheduler that notices the missed deadline is the e2e stage's: see
docs/notifications.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.dag_files import dags_test_command
from tests.support.ports import free_port
from tests.support.review_settings import include_with_review

REVIEW_DAG = "affiliate_onhold_review"
SYNC_DAG = "affiliate_offer_sync"


def _env(tmp_path: Path) -> dict[str, str]:
    env = os.environ.copy()
    env["AFFILIATE_NETWORK_DATA_BASE"] = str(tmp_path / "data")
    # Airflow's plugin loader would import every file of plugins/ (the sandbox's __main__ runs).
    env["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(tmp_path / "no-plugins")
    return env


def _run(tmp_path: Path, dag_id: str, *args: str, conf: dict) -> str:
    log = tmp_path / f"{dag_id}.log"
    with log.open("w") as out:
        subprocess.run(
            dags_test_command(dag_id, *args, conf=conf),
            env=_env(tmp_path),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )
    return log.read_text()


def _down_smtp(monkeypatch) -> str:
    value = {
        "conn_type": "smtp",
        "host": "127.0.0.1",
        "port": free_port(),  # nothing listens there
        "extra": {"disable_tls": True, "disable_ssl": True, "retry_limit": 0, "timeout": 5},
    }
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DOWN", json.dumps(value))
    return "smtp_down"


def _no_key(sandbox, *texts: str) -> None:
    """No API key of the sandbox (the network's, every affiliate's) in any text."""
    keys: list[str] = []
    todo: list[object] = [sandbox.keys]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            todo += value.values()
        elif isinstance(value, str) and len(value) >= 16:
            keys.append(value)
    assert sandbox.keys["network"] in keys
    for key in keys:
        for text in texts:
            assert key not in text, "an API key reached a notification"


@pytest.mark.timeout(900)
def test_a_tripped_guardrail_reaches_mail_and_chat_with_ids_money_and_what_to_do(
    airflow_db,
    sandbox,
    network_conn,
    tmp_path,
    monkeypatch,
    notify_include,
    webhook,
    chat_conn,
    smtp_sink,
    smtp_conn,
) -> None:
    notify_include(
        {
            "enabled": True,
            "email": {"conn_id": smtp_conn, "to": ["affiliate-ops@example.com"]},
            "webhook": {"conn_id": chat_conn, "format": "json"},
            "runbook_url": "https://git.example.com/affiliate/docs/notifications.md",
        }
    )
    include_with_review(tmp_path / "include", max_reject_count=1, min_age_hours=0)
    monkeypatch.setenv("AFFILIATE_ONHOLD_REVIEW_SCHEDULE", "none")
    day = sandbox.catalog()["last_date"]

    text = _run(tmp_path, REVIEW_DAG, day, conf={"dry_run": False})

    assert "GuardrailError" in text, text[-3000:]
    # One notice: the review failed; its downstream tasks were not run (upstream failed).
    assert [b["event"] for b in webhook.bodies] == ["guardrail_tripped"], webhook.bodies
    [body] = webhook.bodies
    assert body["dag_id"] == REVIEW_DAG
    assert body["task_id"] == "review"
    assert "max_reject_count 1" in body["happened"]
    stake = "\n".join(body["at_stake"])
    audit = [
        json.loads(line)
        for path in (tmp_path / "data").rglob("decisions-attempt-1.jsonl")
        for line in path.read_text().splitlines()
    ]
    rejected = [r for r in audit if r["action"] == "reject"]
    assert rejected
    assert f"{len(rejected):,} rejections" in stake
    assert "rejected payout" in stake
    assert "USD" in stake
    highest = max(rejected, key=lambda r: float(r.get("payout") or 0))
    assert str(highest["conversion_id"]) in stake
    assert "decisions-attempt-1.jsonl" in stake
    assert "nothing was approved or rejected" in stake
    assert "max_reject_count" in body["to_do"]
    assert "the rules file's review: section" in body["to_do"]
    assert body["runbook"] == (
        "https://git.example.com/affiliate/docs/notifications.md#a-guardrail-tripped"
    )
    assert f"/dags/{REVIEW_DAG}/runs/" in body["link"]

    [(recipients, mail)] = smtp_sink.messages
    assert recipients == ["affiliate-ops@example.com"]
    assert "Guardrail tripped" in mail["subject"]
    [mail_text] = smtp_sink.texts()
    assert str(highest["conversion_id"]) in mail_text
    assert "What to do:" in mail_text
    _no_key(sandbox, json.dumps(webhook.bodies), mail_text)
    print(body["text"])  # what a person reads (shown with -s)


@pytest.mark.timeout(900)
def test_a_waiting_review_reaches_the_chat_while_a_down_mail_server_is_only_logged(
    airflow_db, sandbox, network_conn, tmp_path, monkeypatch, notify_include, webhook, chat_conn
) -> None:
    notify_include(
        {
            "enabled": True,
            "email": {"conn_id": _down_smtp(monkeypatch), "to": ["ops@example.com"]},
            "webhook": {"conn_id": chat_conn},  # text: {"text": ...}, as Slack takes it
            "events": ["review_waiting"],
        }
    )
    day = sandbox.catalog()["last_date"]
    log = tmp_path / "dag.log"
    proc = subprocess.Popen(
        dags_test_command(REVIEW_DAG, day, conf={"dry_run": False}),
        env=_env(tmp_path),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 500
        while len(webhook.bodies) < 2:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no review request was announced"
            time.sleep(1)
        # Both requests announced and the run still waits for a person: a mail server that is
        # down changed nothing (the HITL operator calls its notifiers without a guard).
        time.sleep(2)
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        proc.kill()
        proc.wait(timeout=60)

    texts = [b["text"] for b in webhook.bodies]
    rules = {"outlier-sale-amount", "ip-mismatch"}
    assert {t.splitlines()[0].split("Review waiting: ")[1].split(":")[0] for t in texts} == rules
    audit = [
        json.loads(line)
        for path in (tmp_path / "data").rglob("decisions-attempt-1.jsonl")
        for line in path.read_text().splitlines()
    ]
    for text in texts:
        rule = next(r for r in rules if f"Review waiting: {r}:" in text)
        flagged = [r for r in audit if r["rule_id"] == rule and r["action"] == "review"]
        assert f"flagged {len(flagged)} on-hold conversions (payout" in text
        top = max(flagged, key=lambda r: float(r.get("payout") or 0))
        assert f"conversion {top['conversion_id']}:" in text
        assert "Approve all, Reject all or Keep on hold" in text
        assert "Keep on hold applies" in text
        assert "#a-review-request-is-waiting" in text
        assert f"/dags/{REVIEW_DAG}/runs/" in text
        assert "/tasks/human_review/mapped/" in text
    dag_log = log.read_text()
    assert "not delivered by email" in dag_log
    assert "Failed to send notification" not in dag_log
    _no_key(sandbox, *texts)


@pytest.mark.timeout(600)
def test_a_blocked_sync_reaches_the_chat_and_fails_as_it_would_without_notifications(
    airflow_db, sandbox, network_conn, tmp_path, monkeypatch, notify_include, webhook, chat_conn
) -> None:
    from affiliate_network.sync.ledger import Ledger
    from affiliate_network.sync.loader import load_desired_state

    include = notify_include(
        {
            "enabled": True,
            "email": {"conn_id": _down_smtp(monkeypatch), "to": ["ops@example.com"]},
            "webhook": {"conn_id": chat_conn, "format": "json"},
        }
    )
    # A create whose outcome is unknown (a worker died after the POST): the sync must stop.
    rate = load_desired_state(include / "offer_state.yaml").section("scrub_rates")[0]
    ledger = Ledger(
        tmp_path / "data" / "sync" / "ledger-affiliate_network_default.json",
        target=sandbox.base_url,
    )
    ledger.record_intent(rate.ledger_key, definition=rate.body(), hash_=rate.definition_hash())

    text = _run(tmp_path, SYNC_DAG, conf={"dry_run": False})

    assert "SyncBlockedError" in text, text[-3000:]
    assert "UP_FOR_RETRY" not in text.upper().replace(" ", "_")  # fails at once, as before
    assert "not delivered by email" in text
    [body] = webhook.bodies
    assert body["event"] == "sync_blocked"
    assert body["task_id"] == "sync_scrub_rates"
    assert f"blocked objects: {rate.ledger_key}" in body["at_stake"]
    assert "UNKNOWN OUTCOME" in body["happened"]
    assert "resolve_unknown" in body["to_do"]
    assert body["runbook"].endswith("docs/notifications.md#a-sync-is-blocked")
    _no_key(sandbox, json.dumps(body))


def _late_context(run_type: str = "scheduled", state: str = "running") -> dict:
    """What the scheduler hands a missed deadline's callback: the run as the REST API shows
    it, and the deadline."""
    return {
        "dag_run": {
            "dag_id": "affiliate_onhold_review",
            "dag_run_id": "scheduled__2026-11-25T10:00:00+00:00",
            "run_type": run_type,
            "state": state,
            "queued_at": "2026-11-26T10:00:05Z",
            "start_date": "2026-11-26T10:00:07Z",
            "data_interval_start": "2026-11-25T10:00:00Z",
            "data_interval_end": "2026-11-25T11:00:00Z",
        },
        "deadline": {"id": "d1", "deadline_time": "2026-11-26T11:00:05Z"},
    }


def _checkpoint(context: dict, minutes: int) -> None:
    """Run the checkpoint ``minutes`` the way the executor runs a SyncCallback (3.2+)."""
    import structlog
    from airflow.sdk.execution_time.callback_supervisor import execute_callback

    from affiliate_network.notify import CHECKPOINTS_MIN, LATE_CALLBACK

    before = ([0, *CHECKPOINTS_MIN])[CHECKPOINTS_MIN.index(minutes)]
    kwargs = {"checkpoint_minutes": minutes, "previous_minutes": before, "context": context}
    ok, error = execute_callback(LATE_CALLBACK, kwargs, "", None, structlog.get_logger())
    assert ok, error


def test_a_late_run_is_told_once_by_the_checkpoint_that_reaches_its_setting(
    notify_include, webhook, chat_conn
) -> None:
    # late_after_minutes 55 is read when the checkpoints fire (not when the DAG was parsed):
    # the 60-minute checkpoint tells it; the earlier and later ones stay silent.
    from affiliate_network.notify import CHECKPOINTS_MIN

    notify_include(
        {
            "enabled": True,
            "webhook": {"conn_id": chat_conn, "format": "json"},
            "late_after_minutes": {"affiliate_onhold_review": 55},
        }
    )
    for minutes in CHECKPOINTS_MIN[:6]:
        _checkpoint(_late_context(), minutes)
    [body] = webhook.bodies
    assert body["event"] == "run_late"
    assert "had not finished 55 min after it was queued" in body["happened"]
    assert "state: running" in "\n".join(body["at_stake"])
    assert "/dags/affiliate_onhold_review/runs/" in body["link"]
    assert body["runbook"].endswith("#a-run-is-late")

    # A backfill queues its runs together: a late one is not announced unless asked for; a
    # run that finished meanwhile is not late.
    _checkpoint(_late_context(run_type="backfill"), 60)
    _checkpoint(_late_context(state="success"), 60)
    assert len(webhook.bodies) == 1


def test_checkpoints_stay_silent_for_a_dag_without_a_deadline_or_with_notifications_off(
    notify_include, webhook, chat_conn
) -> None:
    from affiliate_network.notify import CHECKPOINTS_MIN

    notify_include({"enabled": True, "webhook": {"conn_id": chat_conn}})
    for minutes in CHECKPOINTS_MIN:
        _checkpoint(_late_context(), minutes)
    notify_include(
        {
            "enabled": False,
            "webhook": {"conn_id": chat_conn},
            "late_after_minutes": {"affiliate_onhold_review": 55},
        }
    )
    _checkpoint(_late_context(), 60)
    assert webhook.bodies == []


def test_a_day_late_and_more_is_told_at_the_last_checkpoint(notify_include, webhook, chat_conn):
    from affiliate_network.notify import CHECKPOINTS_MIN

    late = {"affiliate_onhold_review": 3000}
    notify_include({"enabled": True, "webhook": {"conn_id": chat_conn}, "late_after_minutes": late})
    for minutes in CHECKPOINTS_MIN:
        _checkpoint(_late_context(), minutes)
    [body] = webhook.bodies
    assert "had not finished 3000 min" in body["text"]
