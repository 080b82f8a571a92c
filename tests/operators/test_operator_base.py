"""One operator base: every operator's hook is built per execution and closed, error or not.

Checked from the outside: ``execute`` leaves the process with no more TCP connections to the
sandbox than before it (a hook left open keeps its pooled keep-alive connections).
"""

from __future__ import annotations

import copy
import os
import subprocess
from urllib.parse import urlsplit

import psutil
import pytest
import yaml

from affiliate_network.exceptions import GuardrailError
from affiliate_network.operators.base import AffiliateNetworkBaseOperator
from affiliate_network.operators.conversion_report import ConversionReportOperator
from affiliate_network.operators.offer_state_sync import ScrubRateSyncOperator
from affiliate_network.operators.onhold_review import (
    OnHoldReviewApplyOperator,
    OnHoldReviewOperator,
)
from demo import SANDBOX_OFFER_STATE
from tests.support.dag_files import dags_test_command
from tests.support.onhold_support import context, review_op

EXAMPLE = SANDBOX_OFFER_STATE  # include/offer_state.yaml is a template


def open_connections(sandbox) -> int:
    port = urlsplit(sandbox.base_url).port
    return sum(
        1
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )


@pytest.mark.parametrize(
    "cls",
    [ConversionReportOperator, OnHoldReviewOperator, OnHoldReviewApplyOperator,
     ScrubRateSyncOperator],
)  # fmt: skip
def test_every_operator_shares_the_base(cls) -> None:
    assert issubclass(cls, AffiliateNetworkBaseOperator)
    assert "execute" not in cls.__dict__, "operators implement execute_job; the base closes"


def test_a_sync_dry_run_closes_its_hook(sandbox, network_conn, tmp_path) -> None:
    # The dry run returns early: before the base, that path never closed the hook.
    state = tmp_path / "offer_state.yaml"
    state.write_text(yaml.safe_dump(copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))))
    op = ScrubRateSyncOperator(
        task_id="sync",
        state_file=str(state),
        ledger_path=str(tmp_path / "ledger.json"),
        dry_run=True,
    )
    before = open_connections(sandbox)
    assert op.execute(context={})["dry_run"] is True
    assert "hook" not in op.__dict__
    assert open_connections(sandbox) == before


def test_a_failing_review_closes_its_hook(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    op = review_op(rules_file, window, tmp_path, max_reject_count=1)
    before = open_connections(sandbox)
    with pytest.raises(GuardrailError):
        op.execute(context())
    assert "hook" not in op.__dict__
    assert open_connections(sandbox) == before


def test_a_report_closes_its_hook_and_a_rerun_builds_a_new_one(
    sandbox, network_conn, tmp_path
) -> None:
    day = sandbox.catalog()["last_date"]
    op = ConversionReportOperator(
        task_id="report",
        from_date=day,
        base_path=str(tmp_path),
        network_timezone="UTC",
        outlets=[],  # the retry finds the day unchanged: with an Asset outlet it would skip
    )
    before = open_connections(sandbox)
    op.execute(context())
    assert open_connections(sandbox) == before
    op.execute(context())  # a retry in the same worker: a fresh hook, closed again
    assert open_connections(sandbox) == before


FAILING_DAG = """
import datetime as dt
from pathlib import Path

import pendulum
from airflow.sdk import dag

from affiliate_network.exceptions import GuardrailError, ServerError
from affiliate_network.operators.base import AffiliateNetworkBaseOperator

ATTEMPTS = Path(__file__).with_name("attempts.txt")


class Raising(AffiliateNetworkBaseOperator):
    def __init__(self, error: str, **kwargs):
        super().__init__(retries=2, retry_delay=dt.timedelta(0), **kwargs)
        self.error = error

    def execute_job(self, context):
        with ATTEMPTS.open("a") as out:
            out.write(self.task_id + "\\n")
        raise {"guardrail": GuardrailError, "server": ServerError}[self.error]("boom", 503)


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"))
def fail_fast_probe():
    Raising(task_id="guardrail", error="guardrail")
    Raising(task_id="server", error="server")


fail_fast_probe()
"""


def test_the_task_runner_fails_a_non_retryable_error_without_retries(airflow_db, tmp_path) -> None:
    # Through Airflow's own task runner: a NonRetryableError runs once although the task has
    # retries; a transient error spends them (3 attempts).
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "fail_fast_probe.py").write_text(FAILING_DAG)
    env = {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(dags)}
    done = subprocess.run(
        dags_test_command("fail_fast_probe", "2026-01-02"),
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    attempts = (dags / "attempts.txt").read_text().split()
    assert sorted(attempts) == ["guardrail", "server", "server", "server"], done.stdout[-4000:]
    # Each attempt's log ends with its next step: the line before Airflow's "Post Execute"
    # marker is the traceback's last line, and the traceback is printed once.
    lines = done.stdout.splitlines()
    ends = [lines[i - 1] for i, line in enumerate(lines) if "::group::Post Execute" in line]
    assert len(ends) == 4, done.stdout[-4000:]
    assert sum("#guardrail-failures-what-they-mean-what-to-do" in end for end in ends) == 1
    assert sum(end.endswith("#the-api-answers-5xx") for end in ends) == 3, ends
    assert all(end.startswith("Untouched: ") and " Next step: " in end for end in ends), ends
    assert "The above exception was the direct cause" not in done.stdout
