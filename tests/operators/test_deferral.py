"""Long waits for a shared resource free the worker: the operators defer to the triggerer.

Real sandbox on loopback, the real file store of the granular budget and the real write lease.
The task's ``execute`` raises ``TaskDeferred`` (what Airflow's task runner turns into the
DEFERRED state); the trigger it names runs for real (its async ``run()``, with a short wait);
``resume_execution`` is what the task runner calls when the trigger fired. "Worker-slot
seconds" below are the seconds spent inside ``execute``/``resume_execution``: the only time a
worker slot is held.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk.exceptions import TaskDeferred
from airflow.sdk.execution_time.context import OutletEventAccessors

from affiliate_network.exceptions import ConfigValidationError, GranularQuotaError, LeaseBusyError
from affiliate_network.operators.affiliate_report import AffiliateReportOperator
from affiliate_network.operators.onhold_review import OnHoldReviewApplyOperator
from affiliate_network.review.human_requests import OPTION_APPROVE, build_review_requests
from affiliate_network.review.lease import WriteLease, lease_path
from affiliate_network.triggers.lease import WriteLeaseTrigger
from tests.support.onhold_support import context, patches, review_op, states

#: A short "hour": the refused query fits again within seconds.
WINDOW_S = 4.0
GRANULAR = ["offer", "country", "date"]


def interval_context(day: str) -> dict[str, Any]:
    start = pendulum.parse(day, tz="UTC")
    return {
        "data_interval_start": start,
        "data_interval_end": start.add(days=1),
        "outlet_events": OutletEventAccessors(),
    }


@pytest.fixture
def day(sandbox) -> str:
    return sandbox.catalog()["last_date"]


@pytest.fixture
def quota_conn(sandbox, make_connection, tmp_path) -> tuple[str, str]:
    """An affiliate connection whose granular budget is 1 query per ``WINDOW_S`` seconds."""
    aff = sorted(sandbox.keys["affiliate"])[0]
    conn = make_connection(
        "affiliate_network_deferral",
        host=sandbox.base_url,
        key=sandbox.keys["affiliate"][aff],
        portal="affiliate",
        quota_dir=str(tmp_path / "quota"),
        granular_per_hour=1,
        granular_window_s=WINDOW_S,
    )
    return conn, aff


def report_op(tmp_path: Path, conn: str, aff: str, **kwargs: Any) -> AffiliateReportOperator:
    return AffiliateReportOperator(
        task_id=f"aff_{aff}",
        affiliate_network_conn_id=conn,
        affiliate_id=aff,
        columns=GRANULAR,
        base_path=str(tmp_path / "out"),
        timezone_id=67,
        network_timezone="UTC",
        currency_id="USD",
        hook_kwargs={"max_attempts": 2, "base_delay": 0.005, "max_delay": 0.02, "jitter": 0.0},
        **kwargs,
    )


def spend_the_hour(tmp_path: Path, conn: str, aff: str, day: str) -> None:
    """Spend the budget's one granular query with a report (after a warm-up that spends none:
    the first report in a process imports its libraries, longer than the short window)."""
    warm = report_op(tmp_path / "warm", conn, aff)
    warm.columns = ["offer"]  # not a granular query
    assert warm.execute(interval_context(day))["rows"] > 0
    assert report_op(tmp_path / "first", conn, aff).execute(interval_context(day))["rows"] > 0


def first_event(trigger: Any) -> tuple[Any, float]:
    """The trigger's first event from its real ``run()``, and the seconds it took."""

    async def one() -> Any:
        async for event in trigger.run():
            return event
        raise AssertionError("the trigger ended without an event")

    started = time.monotonic()
    event = asyncio.run(one())
    return event, time.monotonic() - started


def test_an_exhausted_granular_hour_defers_and_the_resumed_task_lands_the_report(
    sandbox, quota_conn, tmp_path, day
) -> None:
    conn, aff = quota_conn
    spend_the_hour(tmp_path, conn, aff, day)  # by another report of the same network
    sent = len(sandbox.requests_log())

    op = report_op(tmp_path, conn, aff, deferrable=True, defer_after_s=0)
    started = time.monotonic()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(interval_context(day))
    before_s = time.monotonic() - started
    assert len(sandbox.requests_log()) == sent  # refused before sending
    defer = deferred.value
    assert isinstance(defer.trigger, DateTimeTrigger)
    assert defer.method_name == "execute_after_wait"
    wait_s = defer.kwargs["state"]["granular_wait_s"]
    assert 0 < wait_s <= WINDOW_S + 0.5
    resume_at = defer.trigger.moment
    assert 0 < (resume_at - pendulum.now("UTC")).total_seconds() <= WINDOW_S + 0.5
    # The trigger is what the triggerer stores and rebuilds.
    classpath, kwargs = defer.trigger.serialize()
    assert classpath == "airflow.providers.standard.triggers.temporal.DateTimeTrigger"

    event, waited_s = first_event(DateTimeTrigger(**kwargs))
    assert pendulum.now("UTC") >= resume_at
    started = time.monotonic()
    ctx = interval_context(day)
    summary = op.resume_execution(defer.method_name, {**defer.kwargs, "event": event.payload}, ctx)
    after_s = time.monotonic() - started
    part = tmp_path / "out" / "affiliate_reports" / f"affiliate={aff}" / f"date={day}"
    assert summary["path"] == str(part)
    assert summary["rows"] > 0
    print(
        f"\ngranular hour: waited {waited_s:.2f} s in the trigger; worker-slot seconds "
        f"{before_s:.3f} before deferring + {after_s:.3f} after resuming (the report itself)"
    )


def test_not_deferrable_the_refusal_stays_a_retryable_error_and_short_waits_sleep(
    sandbox, quota_conn, tmp_path, day
) -> None:
    conn, aff = quota_conn
    spend_the_hour(tmp_path, conn, aff, day)
    with pytest.raises(GranularQuotaError, match="enough frees in"):
        report_op(tmp_path, conn, aff, deferrable=False).execute(interval_context(day))
    # Deferrable, but the wait is under defer_after_s: slept in the worker (the wait).
    op = report_op(tmp_path, conn, aff, deferrable=True, defer_after_s=60)
    started = time.monotonic()
    assert op.execute(interval_context(day))["rows"] > 0
    slept_s = time.monotonic() - started
    assert slept_s > 1.0
    print(f"\ngranular hour, waited in the worker: {slept_s:.2f} worker-slot seconds")


def test_deferrable_defaults_to_the_deployments_setting(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    assert report_op(tmp_path, "c", "1").deferrable is True
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "False")
    assert report_op(tmp_path, "c", "1").deferrable is False
    assert report_op(tmp_path, "c", "1", deferrable="true").deferrable is True
    with pytest.raises(ConfigValidationError, match="defer_after_s must be >= 0"):
        report_op(tmp_path, "c", "1", defer_after_s=-1)
    with pytest.raises(ConfigValidationError, match="deferrable must be true or false"):
        report_op(tmp_path, "c", "1", deferrable="sometimes")


OTHER_RUN = "affiliate_onhold_review/scheduled__2026-11-25T10:00:00+00:00"


def _network_key(conn_id: str) -> str:
    """The lease's key: the network the connection reaches (every spelling shares it)."""
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    return AffiliateNetworkHook(conn_id).network.slug


def test_a_busy_write_lease_defers_the_review_and_the_trigger_lets_it_write_once_freed(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    path = lease_path(str(tmp_path / "data"), _network_key(network_conn))
    holder = WriteLease(path, OTHER_RUN)
    holder.acquire(wait_s=0)
    sandbox.clear_requests()
    op = review_op(
        rules_file, window, tmp_path, dry_run=False, deferrable=True, defer_after_s=0,
        lease_wait_minutes=5,
    )  # fmt: skip
    started = time.monotonic()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context("manual__writer"))
    before_s = time.monotonic() - started
    assert patches(sandbox) == []
    defer = deferred.value
    trigger = defer.trigger
    assert isinstance(trigger, WriteLeaseTrigger)
    assert trigger.holder_token == holder.read()["token"]
    assert trigger.wait_s == pytest.approx(300, abs=1)
    classpath, kwargs = trigger.serialize()
    assert classpath == "affiliate_network.triggers.lease.WriteLeaseTrigger"

    # Resumed while the lease is still held: deferred again at once, nothing pulled or sent.
    sandbox.clear_requests()
    still = {**defer.kwargs, "event": {"status": "changed", "waited_s": 10.0}}
    with pytest.raises(TaskDeferred) as again:
        op.resume_execution(defer.method_name, still, context("manual__writer"))
    assert sandbox.requests_log() == []
    assert again.value.trigger.wait_s == pytest.approx(290, abs=1)

    # The real trigger polls the record (read only) and fires once the holder lets go.
    rebuilt = WriteLeaseTrigger(**{**kwargs, "poll_s": 0.1})
    releaser = threading.Timer(1.0, holder.release)
    releaser.start()
    event, waited_s = first_event(rebuilt)
    releaser.join()
    assert event.payload["status"] == "free"
    assert event.payload["waited_s"] >= 0.9
    started = time.monotonic()
    summary = op.resume_execution(
        defer.method_name, {**defer.kwargs, "event": event.payload}, context("manual__writer")
    )
    after_s = time.monotonic() - started
    assert summary["dry_run"] is False
    assert patches(sandbox) != []
    print(
        f"\nwrite lease: waited {waited_s:.2f} s in the trigger; worker-slot seconds "
        f"{before_s:.3f} before deferring + {after_s:.3f} after resuming (the review)"
    )


def test_not_deferrable_the_review_sleeps_through_the_lease_wait(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    holder = WriteLease(lease_path(str(tmp_path / "data"), _network_key(network_conn)), OTHER_RUN)
    holder.acquire(wait_s=0)
    try:
        op = review_op(
            rules_file, window, tmp_path, dry_run=False, deferrable=False, lease_wait_minutes=0.05
        )
        started = time.monotonic()
        with pytest.raises(LeaseBusyError, match="scheduled__"):
            op.execute(context("manual__sleeper"))
        slept_s = time.monotonic() - started
    finally:
        holder.release()
    assert slept_s >= 3.0
    print(f"\nwrite lease, waited in the worker: {slept_s:.2f} worker-slot seconds for a 3 s wait")


_ASK_RULES = """\
rules:
  - id: outlier-review
    description: Big sale, ask a person
    action: review
    when: {field: sale_amount, ge: 5000}
"""


def test_a_busy_write_lease_defers_the_human_step_and_it_applies_once_freed(
    sandbox, network_conn, rules_include, window, tmp_path
) -> None:
    """The human step (``OnHoldReviewApplyOperator``) waits for another run's lease like the
    review: deferred to the same trigger, nothing sent meanwhile, applied once it fires."""
    rules = rules_include / "onhold_rules_deferral.yaml"
    rules.write_text(_ASK_RULES)
    summary = review_op(rules, window, tmp_path).execute(context("manual__writer"))
    requests = build_review_requests(summary)
    assert requests
    answers = [
        {"chosen_options": [OPTION_APPROVE], "params_input": {}, "responded_by_user": {"id": "7"}}
        for _ in requests
    ]
    holder = WriteLease(lease_path(str(tmp_path / "data"), _network_key(network_conn)), OTHER_RUN)
    holder.acquire(wait_s=0)
    sandbox.clear_requests()
    op = OnHoldReviewApplyOperator(
        task_id="apply_human_decisions", summary=summary, requests=requests, responses=answers,
        deferrable=True, defer_after_s=0, lease_wait_minutes=5,
    )  # fmt: skip
    started = time.monotonic()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context("manual__writer"))
    before_s = time.monotonic() - started
    assert patches(sandbox) == []
    defer = deferred.value
    trigger = defer.trigger
    assert isinstance(trigger, WriteLeaseTrigger)
    assert trigger.holder_token == holder.read()["token"]
    assert trigger.wait_s == pytest.approx(300, abs=1)

    # Resumed while the lease is still held: deferred again at once, nothing sent.
    sandbox.clear_requests()
    still = {**defer.kwargs, "event": {"status": "changed", "waited_s": 10.0}}
    with pytest.raises(TaskDeferred) as again:
        op.resume_execution(defer.method_name, still, context("manual__writer"))
    assert sandbox.requests_log() == []
    assert again.value.trigger.wait_s == pytest.approx(290, abs=1)

    classpath, kwargs = trigger.serialize()
    assert classpath == "affiliate_network.triggers.lease.WriteLeaseTrigger"
    rebuilt = WriteLeaseTrigger(**{**kwargs, "poll_s": 0.1})
    releaser = threading.Timer(1.0, holder.release)
    releaser.start()
    event, waited_s = first_event(rebuilt)
    releaser.join()
    assert event.payload["status"] == "free"
    started = time.monotonic()
    result = op.resume_execution(
        defer.method_name, {**defer.kwargs, "event": event.payload}, context("manual__writer")
    )
    after_s = time.monotonic() - started
    sent = {i for e in patches(sandbox) for i in e["body"]["on_hold_conversion_ids"]}
    assert sent
    assert result["applied"] == {"approved": len(sent)}
    after = states(network_conn, window)
    assert {after[i] for i in sent} == {"approved"}
    print(
        f"\nhuman step, write lease: waited {waited_s:.2f} s in the trigger; worker-slot "
        f"seconds {before_s:.3f} before deferring + {after_s:.3f} after resuming (the writes)"
    )


def test_not_deferrable_the_human_step_sleeps_through_the_lease_wait(
    sandbox, network_conn, rules_include, window, tmp_path
) -> None:
    rules = rules_include / "onhold_rules_deferral.yaml"
    rules.write_text(_ASK_RULES)
    summary = review_op(rules, window, tmp_path).execute(context("manual__sleeper"))
    requests = build_review_requests(summary)
    answers = [
        {"chosen_options": [OPTION_APPROVE], "params_input": {}, "responded_by_user": {"id": "7"}}
        for _ in requests
    ]
    holder = WriteLease(lease_path(str(tmp_path / "data"), _network_key(network_conn)), OTHER_RUN)
    holder.acquire(wait_s=0)
    sandbox.clear_requests()
    try:
        op = OnHoldReviewApplyOperator(
            task_id="apply_human_decisions", summary=summary, requests=requests,
            responses=answers, deferrable=False, lease_wait_minutes=0.02,
        )  # fmt: skip
        with pytest.raises(LeaseBusyError, match="scheduled__"):
            op.execute(context("manual__sleeper"))
    finally:
        holder.release()
    assert patches(sandbox) == []


def test_the_lease_trigger_fires_on_a_stale_record_and_on_its_timeout(tmp_path) -> None:
    base = str(tmp_path / "data")
    holder = WriteLease(lease_path(base, "conn"), OTHER_RUN)
    holder.acquire(wait_s=0)
    try:
        token = holder.read()["token"]
        args = {"base": base, "conn_id": "conn", "owner": "dag/run", "holder_token": token}
        event, _ = first_event(WriteLeaseTrigger(**args, wait_s=30, stale_s=0.3, poll_s=0.05))
        assert event.payload["status"] == "stale"
        event, _ = first_event(WriteLeaseTrigger(**args, wait_s=0.3, stale_s=30, poll_s=0.05))
        assert event.payload["status"] == "timeout"
        assert event.payload["holder"] == OTHER_RUN
    finally:
        holder.release()


_DEFER_DAG = """
import pendulum
from airflow.sdk import dag

from affiliate_network.operators.affiliate_report import AffiliateReportOperator

ARGS = dict(
    affiliate_network_conn_id="defer_probe", affiliate_id="{aff}", columns={columns},
    from_date="{day}", to_date="{day}", timezone_id=67, network_timezone="UTC",
    currency_id="USD",
)


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def defer_probe():
    first = AffiliateReportOperator(task_id="spends_the_hour", base_path="{base}/a", **ARGS)
    waits = AffiliateReportOperator(
        task_id="waits_for_the_hour", base_path="{base}/b", deferrable=True, defer_after_s=0,
        **ARGS,
    )
    first >> waits


defer_probe()
"""


def test_a_dag_run_defers_to_the_trigger_and_resumes_the_report(
    sandbox, airflow_db, tmp_path, day
) -> None:
    """``airflow dags test`` runs a deferred task's trigger in line (Airflow's ``dag.test``):
    the first task spends the one granular query of a 30-s window, the second defers until it
    frees, its trigger fires, and the resumed task lands the report."""
    import json
    import os
    import re
    import subprocess
    import sys

    aff = sorted(sandbox.keys["affiliate"])[0]
    dags = tmp_path / "dags"
    dags.mkdir()
    source = _DEFER_DAG.format(aff=aff, columns=GRANULAR, day=day, base=tmp_path / "out")
    (dags / "defer_probe.py").write_text(source)
    conn = {
        "conn_type": "affiliate_network",
        "host": sandbox.base_url,
        "password": sandbox.keys["affiliate"][aff],
        "extra": {
            "portal": "affiliate",
            "quota_dir": str(tmp_path / "quota"),
            "granular_per_hour": 1,
            "granular_window_s": 30,
        },
    }
    env = {
        **os.environ,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW_CONN_DEFER_PROBE": json.dumps(conn),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "dags", "test", "defer_probe"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    elapsed = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "Pausing task as DEFERRED" in output
    assert "running trigger in line" in output
    assert re.search(r"Waiting \d+ s for the granular hour: deferring to the triggerer", output)
    assert "Resumed after a deferred wait" in output
    for folder in ("a", "b"):
        part = tmp_path / "out" / folder / "affiliate_reports" / f"affiliate={aff}" / f"date={day}"
        assert (part / "_manifest.json").exists(), output[-3000:]
    # Worker-slot seconds of the deferred task, from the run's own log: started -> deferred, and
    # resumed -> done; the wait between the two is the trigger's.
    marks = [
        pendulum.parse(line.split()[0])
        for line in output.splitlines()
        if re.match(r"\d{4}-\d\d-\d\dT", line)
        and re.search(r"Task started|Pausing task as DEFERRED|new_state=(success|deferred)", line)
    ]
    # spends_the_hour: started, success; waits_for_the_hour: started, deferred (x2: task runner
    # and API), started again, success.
    started_b, deferred_b, resumed_b, done_b = marks[2], marks[3], marks[-2], marks[-1]
    in_worker = (deferred_b - started_b).total_seconds() + (done_b - resumed_b).total_seconds()
    waited = (resumed_b - deferred_b).total_seconds()
    assert waited > 5  # the trigger really waited for the window to roll on
    print(
        f"\ndags test ({elapsed:.0f} s in all): the deferred task waited {waited:.1f} s in the "
        f"trigger and held a worker slot {in_worker:.2f} s"
    )
