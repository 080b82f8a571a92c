"""The on-hold review writes to the network, and asks people, only on an armed deployment.

``AFFILIATE_ONHOLD_ARMED`` (read when the task runs): a new deployment starts without it, and
then every run, scheduled or manual, whatever the trigger form sent, plans, writes its audit
and asks nobody. The suite runs armed (tests/conftest.py); these tests unset it.
"""

from __future__ import annotations

import importlib.util
import traceback
from pathlib import Path
from types import SimpleNamespace

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.steps import ReviewRequestsOperator
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.options import ARMED_VARIABLE, review_armed
from affiliate_network.settings.paths import PROJECT_ROOT
from tests.support.onhold_support import context, patches, review_op

pytestmark = pytest.mark.usefixtures("network_conn")


def run_review(rules_file, window, tmp_path, run_type: str, dry_run):
    ctx = {**context(f"{run_type}__run"), "dag_run": SimpleNamespace(run_type=run_type)}
    summary = review_op(rules_file, window, tmp_path, dry_run=dry_run).execute(ctx)
    requests = ReviewRequestsOperator(task_id="review_requests", summary=summary).execute(ctx)
    return summary, requests


@pytest.mark.parametrize(
    ("run_type", "dry_run"),
    [
        ("scheduled", None),  # the hourly run an unpaused DAG starts
        ("manual", "False"),  # the form's "Write decisions to the network" (rendered)
        ("backfill", None),
    ],
)
def test_an_unarmed_deployment_plans_and_asks_nobody(
    sandbox, rules_file, window, tmp_path, monkeypatch, run_type, dry_run
) -> None:
    monkeypatch.delenv(ARMED_VARIABLE, raising=False)
    sandbox.clear_requests()
    summary, requests = run_review(rules_file, window, tmp_path, run_type, dry_run)
    assert patches(sandbox) == []  # the sandbox's request log: no PATCH at all
    # Reads only: the report is a POST that reads; nothing patched, put or deleted.
    assert {e["method"] for e in sandbox.requests_log()} <= {"GET", "POST"}
    assert {e["path"] for e in sandbox.requests_log() if e["method"] == "POST"} == {
        "/v1/networks/reporting/conversions"
    }
    assert requests == []  # no human-in-the-loop request
    assert summary["dry_run"] is True
    assert summary["armed"] is False
    # It planned: the audit says what it would approve, reject and ask about.
    rows = read_jsonl(Path(summary["audit_path"]))
    actions = {row["action"] for row in rows}
    assert {"approve", "reject", "review"} <= actions, actions
    assert not any(row["applied"] for row in rows)


def test_an_armed_deployment_writes_and_asks(
    sandbox, rules_file, window, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(ARMED_VARIABLE, "true")
    sandbox.clear_requests()
    summary, requests = run_review(rules_file, window, tmp_path, "scheduled", None)
    assert summary["armed"] is True
    assert summary["dry_run"] is False
    assert patches(sandbox)
    assert requests  # one request per rule with review decisions


def test_arming_is_read_when_the_task_runs(
    sandbox, rules_file, window, tmp_path, monkeypatch
) -> None:
    # One operator object (one parse), armed only after it was built.
    monkeypatch.delenv(ARMED_VARIABLE, raising=False)
    op = review_op(rules_file, window, tmp_path, dry_run=None)
    monkeypatch.setenv(ARMED_VARIABLE, "yes")
    sandbox.clear_requests()
    op.execute({**context(), "dag_run": SimpleNamespace(run_type="scheduled")})
    assert patches(sandbox)


@pytest.mark.parametrize(
    ("raw", "armed"),
    [("", False), ("0", False), ("off", False), ("TRUE", True), (" on ", True), ("1", True)],
)
def test_the_setting_reads_true_and_false(raw: str, armed: bool) -> None:
    assert review_armed({ARMED_VARIABLE: raw}) is armed
    assert review_armed({}) is False


def test_a_bad_value_fails_the_task_naming_the_setting(
    sandbox, rules_file, window, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(ARMED_VARIABLE, "maybe")
    sandbox.clear_requests()
    with pytest.raises(ConfigValidationError) as info:
        review_op(rules_file, window, tmp_path, dry_run=None).execute(context())
    assert ARMED_VARIABLE in str(info.value)
    assert "'maybe'" in str(info.value)
    last = traceback.format_exception(info.value)[-1].rstrip().splitlines()[-1]
    assert "Next step: Fix the file, field or setting" in last
    assert sandbox.requests_log() == []


def test_the_dag_doc_says_it_first() -> None:
    path = PROJECT_ROOT / "dags" / "affiliate_onhold_review.py"
    spec = importlib.util.spec_from_file_location("onhold_dag_doc", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    first = next(line for line in module.DOC_MD.splitlines() if line.strip())
    assert ARMED_VARIABLE in first
    assert "only decides" in first
    assert "nobody is asked" in first
    dag = module.affiliate_onhold_review()
    assert dag.description == module.ARMING_LINE
