"""The ``affiliate_offer_sync`` DAG: its shape, and real runs against the sandbox."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path

import pytest

from demo import SANDBOX_OFFER_STATE
from tests.support.dag_files import DAGS_DIR, dags_test_command, load_dag
from tests.support.sandbox_reads import network_requests

DAG_ID = "affiliate_offer_sync"
TASK_ORDER = [
    "validate",
    "plan",
    "apply_offer_groups",
    "apply_offers",
    "sync_scrub_rates",
    "sync_catalog",
]


@pytest.fixture(scope="module")
def dag():
    return load_dag(DAGS_DIR / "affiliate_offer_sync.py", DAG_ID)


#: Params a person may leave empty in the trigger form.
OPTIONAL = {"force", "resolve_unknown", "accept_drift"}


def test_the_trigger_form_shows_titles_and_marks_only_what_is_needed(dag) -> None:
    """The form showed the raw names (force, resolve_unknown ...), every one marked required:
    the UI marks a field optional only when its type admits null."""
    for name in dag.params:
        param = dag.params.get_param(name)
        assert param.schema.get("title"), name
        assert len(param.description or "") > 20, name
        optional = "null" in param.schema.get("type", [])
        assert optional == (name in OPTIONAL), name
        if optional:
            assert param.value is None, name
    # The defaults validate as the form sends them, and each optional field may stay empty.
    dag.params.validate()
    from airflow.sdk import Param

    for name in OPTIONAL:
        Param(None, **dag.params.get_param(name).schema).resolve()


def test_dag_is_manual_single_run_dry_run_by_default(dag):
    assert dag.max_active_runs == 1
    # No schedule unless AFFILIATE_OFFER_SYNC_SCHEDULE is set: manual trigger only.
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert dag.params["dry_run"] is True
    assert dag.params["resolve_unknown"] is None
    assert {"affiliate-network", "sync"} <= set(dag.tags)


def test_tasks_run_validate_plan_then_apply_in_order(dag):
    for upstream, downstream in itertools.pairwise(TASK_ORDER):
        assert dag.get_task(downstream).upstream_task_ids == {upstream}
    for task in dag.tasks:
        assert task.owner == "affiliate-ops"
        assert task.retries >= 1


def _dags_test(sandbox, tmp_path: Path, conf: dict | None = None) -> str:
    env = os.environ.copy()
    env["AFFILIATE_NETWORK_DATA_BASE"] = str(tmp_path / "data")
    # The package is installed; Airflow's plugin loader would import every file of plugins/,
    # including affiliate_network_sandbox/__main__.py under the name "__main__" (it runs).
    env["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(tmp_path / "no-plugins")
    # The sandbox's example: the include folder's offer_state.yaml is a template.
    command = dags_test_command(
        DAG_ID, conf={"state_file": str(SANDBOX_OFFER_STATE), **(conf or {})}
    )
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=280)
    output = done.stdout + done.stderr
    assert sandbox.keys["network"] not in output, "the API key reached the log"
    return output


def test_default_trigger_plans_and_sends_nothing(airflow_db, sandbox, network_conn, tmp_path):
    sandbox.clear_requests()
    output = _dags_test(sandbox, tmp_path)

    assert "DRY RUN: nothing is sent" in output
    assert "to create" in output
    assert network_requests(sandbox) == []
    assert not (tmp_path / "data" / "sync").exists()


def test_apply_run_pushes_the_state_and_leaves_nothing_to_do(
    airflow_db, sandbox, network_conn, tmp_path, capsys
):
    output = _dags_test(sandbox, tmp_path, {"dry_run": False})

    assert "Applying" in output
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    network = AffiliateNetworkHook(network_conn).network.slug  # one ledger per network
    ledger = tmp_path / "data" / "sync" / f"ledger-{network}.json"
    assert ledger.exists()
    objects = json.loads(ledger.read_text())["objects"]
    assert {entry["state"] for entry in objects.values()} == {"applied"}
    assert sandbox.objects("offer_groups")["301"]["daily_conversion_cap"] == 200
    assert len(sandbox.objects("custom_scrub_rates")) == 1
    # A rerun would send nothing: the plan against the ledger the run wrote is all unchanged
    # (a rerun's zero requests are pinned by the operator tests, without a second DAG run).
    from affiliate_network.sync.cli import main

    state = str(SANDBOX_OFFER_STATE)
    assert main(["plan", state, "--ledger", str(ledger), "--detailed-exitcode"]) == 0
    assert "0 to create, 0 to update" in capsys.readouterr().out
