"""The ``affiliate_onhold_review`` DAG: its shape, and a real run decided by a person.

The run test starts ``airflow dags test`` against the sandbox; the human-in-the-loop tasks
park in ``awaiting_input`` and the test answers them through Airflow's public REST API
(``PATCH /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/{map}/hitlDetails``), exactly as
the "Required actions" page does. The run then resumes and applies the choices.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from types import SimpleNamespace

import pytest

from affiliate_network.review.human_requests import (
    KEEP_PARAM,
    OPTION_KEEP,
    OPTION_REJECT,
    rule_of_subject,
)
from tests.isolation import isolated, only_isolated
from tests.support.dag_files import DAGS_DIR, dags_test_command, load_dag
from tests.support.review_settings import INCLUDE_DIR_ENV, include_with_review
from tests.support.sandbox_reads import onhold_states

DAG_ID = "affiliate_onhold_review"
DAG_FILE = DAGS_DIR / "affiliate_onhold_review.py"


@pytest.fixture(scope="module")
def dag():
    return load_dag(DAG_FILE, DAG_ID)


@pytest.mark.parametrize(
    ("conf", "dry_run"),
    [
        ({"mode": "dry_run"}, True),  # the trigger form, untouched
        ({"mode": "write"}, False),  # the trigger form, writing chosen
        ({}, False),  # scheduled or backfill without conf: by run type, writes
        (None, False),
        ({"dry_run": False}, False),  # API callers, the demo, older scripts
        ({"dry_run": True, "mode": "write"}, True),
        ({"dry_run": "true"}, True),  # "true"/"false" text is read
        ({"dry_run": None, "mode": "write"}, False),
    ],
)
def test_the_review_task_reads_the_form_and_the_older_conf(dag, conf, dry_run) -> None:
    _assert_review_dry_run(
        dag,
        dry_run,
        dag_run=SimpleNamespace(conf=conf, run_type="scheduled"),
        params={"mode": "dry_run"},  # every run carries the form's default
    )


@pytest.mark.parametrize(
    ("run_type", "params", "dry_run"),
    [
        # airflow tasks test ... -t '{"mode": "write"}': no conf, the params say write
        ("manual", {"mode": "write"}, False),
        ("manual", {"mode": "dry_run"}, True),  # an API trigger without conf: the default
        # a scheduled run carries the form's default too: it must still write
        ("scheduled", {"mode": "dry_run"}, False),
        ("backfill", {"mode": "dry_run"}, False),
    ],
)
def test_a_manual_run_without_conf_reads_the_mode_param(dag, run_type, params, dry_run) -> None:
    _assert_review_dry_run(
        dag, dry_run, dag_run=SimpleNamespace(conf={}, run_type=run_type), params=params
    )


def _assert_review_dry_run(dag, dry_run, **context) -> None:
    review = dag.get_task("review")
    assert review.dry_run is None  # the DAG leaves it to the run: decided in the operator
    assert review._chosen_dry_run(context) is dry_run


def test_dag_shape(dag) -> None:
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    assert "0 * * * *" in str(dag.timetable)  # hourly by default
    assert set(dag.tags) >= {"affiliate-network", "on-hold"}
    # A labelled choice in the trigger form (issue 19), starting on the dry run; no switch.
    assert dag.params["mode"] == "dry_run"
    mode = dag.params.get_param("mode").schema
    assert mode["type"] == "string"
    assert mode["enum"] == ["dry_run", "write"]
    assert mode["values_display"] == {
        "dry_run": "Dry run: decide and report, write nothing",
        "write": "Write decisions to the network",
    }
    assert "dry_run" not in dag.params
    assert [t.task_id for t in dag.topological_sort()] == [
        "review",
        "review_requests",
        "human_review",
        "apply_human_decisions",
    ]
    review = dag.get_task("review")
    assert review.owner == "affiliate-ops"
    assert review.retries >= 1
    assert dag.get_task("apply_human_decisions").trigger_rule == "none_failed"
    for words in (
        "`approve`",
        "`reject`",
        "`review`",
        "`hold`",
        "`review:` section",
        "dry run",
        "docs/onhold-review.md",
        "docs/configuration.md",
    ):
        assert words in dag.doc_md, words


def test_dag_file_is_thin() -> None:
    text = DAG_FILE.read_text()
    for heavy in ("import requests", "import yaml", "open(", "Variable.get", "Hook("):
        assert heavy not in text, heavy


@pytest.mark.timeout(900)
def test_human_review_run_in_a_fresh_process() -> None:
    isolated(f"{__file__}::test_run_with_human_review_through_the_rest_api")


@only_isolated
@pytest.mark.timeout(900)  # a loaded CI machine: `dags test` + HITL can pass 5 min
def test_run_with_human_review_through_the_rest_api(
    airflow_db, sandbox, network_conn, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("AFFILIATE_NETWORK_DATA_BASE", str(tmp_path / "data"))
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "True")
    day = sandbox.catalog()["last_date"]
    proc = subprocess.Popen(
        dags_test_command(DAG_ID, day, conf={"dry_run": False}),
        env=os.environ.copy(),
        stdout=(tmp_path / "dag.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        from airflow.api_fastapi.app import create_app
        from fastapi.testclient import TestClient

        client = TestClient(create_app("core"))
        deadline = time.monotonic() + 400
        audit: list[dict] = []
        pending: list[dict] = []
        while True:
            assert proc.poll() is None, (tmp_path / "dag.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no human-in-the-loop request appeared"
            files = list((tmp_path / "data").rglob("decisions-attempt-1.jsonl"))
            if files and not audit:
                rows = [json.loads(line) for line in files[0].read_text().splitlines()]
                if not any("pending" in r["reason"] for r in rows):
                    audit = rows
            response = client.get(
                f"/api/v2/dags/{DAG_ID}/dagRuns/~/hitlDetails", params={"response_received": False}
            )
            if response.status_code == 500 and "Database error" in response.text:
                # SQLite: the `dags test` process holds the write lock for a moment; ask again.
                time.sleep(1)
                continue
            assert response.status_code == 200, response.text
            pending = response.json()["hitl_details"]
            review_rules = {r["rule_id"] for r in audit if r["action"] == "review"}
            if audit and len(pending) == len(review_rules):
                break
            time.sleep(1)
        assert review_rules == {"outlier-sale-amount", "ip-mismatch"}

        # Reject the outliers; keep the IP mismatches on hold.
        choices = {"outlier-sale-amount": OPTION_REJECT, "ip-mismatch": OPTION_KEEP}
        for detail in pending:
            rule_id = rule_of_subject(detail["subject"])
            assert detail["options"] == ["Approve all", "Reject all", "Keep on hold"]
            assert "| conversion | affiliate | offer |" in detail["body"]
            ti = detail["task_instance"]
            url = (
                f"/api/v2/dags/{DAG_ID}/dagRuns/{ti['dag_run_id']}/taskInstances/"
                f"{ti['task_id']}/{ti['map_index']}/hitlDetails"
            )
            body = {"chosen_options": [choices[rule_id]], "params_input": {KEEP_PARAM: ""}}
            for _ in range(30):
                answer = client.patch(url, json=body)
                if not (answer.status_code == 500 and "Database error" in answer.text):
                    break
                time.sleep(1)  # SQLite locked by the `dags test` process: answer again
            assert answer.status_code == 200, answer.text
        assert proc.wait(timeout=300) == 0, (tmp_path / "dag.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()

    states = onhold_states(network_conn, sandbox.catalog()["first_date"], day)
    by_rule: dict[str, set[str]] = {}
    for row in audit:
        by_rule.setdefault(row["rule_id"], set()).add(row["on_hold_conversion_id"])
    assert {states[i] for i in by_rule["outlier-sale-amount"]} == {"rejected"}
    assert {states[i] for i in by_rule["ip-mismatch"]} == {"on_hold"}
    for rule_id in ("blocked-sub1", "duplicate-ip-24h", "click-to-conversion-under-10s"):
        assert {states[i] for i in by_rule[rule_id]} == {"rejected"}, rule_id
    human = list((tmp_path / "data").rglob("human-attempt-1.jsonl"))
    assert len(human) == 1
    rows = [json.loads(line) for line in human[0].read_text().splitlines()]
    assert {r["human_choice"] for r in rows} == {OPTION_REJECT, OPTION_KEEP}
    assert sandbox.keys["network"] not in (tmp_path / "dag.log").read_text()


@pytest.mark.timeout(900)  # a loaded CI machine: `dags test` + HITL can pass 5 min
def test_a_tripped_guardrail_fails_the_task_without_retries(
    airflow_db, sandbox, network_conn, tmp_path, monkeypatch
) -> None:
    # The DAG has retries=2: a tripped guardrail must fail at once (a retry re-pulls the window
    # and trips it again), so there is one attempt, no PATCH, and no second audit file.
    monkeypatch.setenv("AFFILIATE_NETWORK_DATA_BASE", str(tmp_path / "data"))
    include = include_with_review(tmp_path / "include", max_reject_count=1, min_age_hours=0)
    monkeypatch.setenv(INCLUDE_DIR_ENV, str(include))
    monkeypatch.setenv("AFFILIATE_ONHOLD_REVIEW_SCHEDULE", "none")
    sandbox.clear_requests()
    day = sandbox.catalog()["last_date"]
    log = tmp_path / "dag.log"
    with log.open("w") as out:
        proc = subprocess.run(
            dags_test_command(DAG_ID, day, conf={"dry_run": False}),
            env=os.environ.copy(),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )
    text = log.read_text()
    assert "GuardrailError" in text, text[-3000:]
    assert "max_reject_count" in text
    assert "UP_FOR_RETRY" not in text.upper().replace(" ", "_"), text[-3000:]
    attempts = sorted(p.name for p in (tmp_path / "data").rglob("decisions-attempt-*.jsonl"))
    assert attempts == ["decisions-attempt-1.jsonl"]
    assert [e for e in sandbox.requests_log() if e["method"] == "PATCH"] == []
    assert proc.returncode != 0 or "failed" in text.lower()
