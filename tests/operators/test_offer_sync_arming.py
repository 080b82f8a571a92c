"""The offer sync sends to the network only on an armed deployment (issue 47 item 2).

``AFFILIATE_OFFER_SYNC_ARMED`` (read when a task runs): a new deployment starts without it, and
then every run, a manual one whose form unticked ``dry_run`` or a scheduled one, plans and
reports. The suite runs armed (tests/conftest.py); these tests unset it. The tasks are the
DAG's own, their templates rendered as Airflow renders them for that kind of run.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.offer_state_sync import (
    ARMED_VARIABLE,
    OfferStateSyncOperator,
    offer_sync_armed,
)
from affiliate_network.review.options import ARMED_VARIABLE as REVIEW_ARMED_VARIABLE
from affiliate_network.review.options import review_armed
from demo import SANDBOX_OFFER_STATE
from tests.support.dag_files import DAGS_DIR, load_dag
from tests.support.sandbox_reads import network_requests

pytestmark = pytest.mark.usefixtures("network_conn")

DAG_ID = "affiliate_offer_sync"


def _dag_tasks() -> list[OfferStateSyncOperator]:
    """The DAG's sync tasks (plan, then the applies), from a fresh parse."""
    dag = load_dag(DAGS_DIR / "affiliate_offer_sync.py", DAG_ID)
    return [t for t in dag.topological_sort() if isinstance(t, OfferStateSyncOperator)]


def _run(
    tasks: list[OfferStateSyncOperator], tmp_path: Path, run_type: str, form_dry_run: bool
) -> dict[str, dict[str, Any]]:
    """Render each task as Airflow does for a ``run_type`` run whose form says
    ``form_dry_run``, then execute it; the summaries by task id."""
    params = {
        "dry_run": form_dry_run,
        "state_file": str(SANDBOX_OFFER_STATE),
        "force": None,
        "resolve_unknown": None,
        "accept_drift": None,
    }
    context: Any = {"params": params, "dag_run": SimpleNamespace(run_type=run_type, conf={})}
    summaries = {}
    for task in tasks:
        task.render_template_fields(context)
        task.ledger_path = str(tmp_path / "ledger.json")
        summary = task.execute(context)
        json.dumps(summary)  # an XCom
        summaries[task.task_id] = summary
    return summaries


def _writes(sandbox: Any) -> list[dict[str, Any]]:
    return [e for e in network_requests(sandbox) if e["method"] not in {"GET", "HEAD"}]


@pytest.mark.parametrize(
    ("run_type", "form_dry_run"),
    [
        ("manual", False),  # a person unticked "Dry run" in the trigger form
        ("scheduled", True),  # AFFILIATE_OFFER_SYNC_SCHEDULE set: the form's default is ignored
    ],
)
def test_an_unarmed_deployment_plans_and_sends_nothing(
    sandbox, tmp_path, monkeypatch, capsys, run_type, form_dry_run
) -> None:
    tasks = _dag_tasks()  # parsed armed (the suite's setting): read again when the task runs
    monkeypatch.delenv(ARMED_VARIABLE, raising=False)
    # The rendered dry_run is what an armed deployment would apply with.
    assert tasks[1].render_template(tasks[1].dry_run, {"params": {"dry_run": form_dry_run},
        "dag_run": SimpleNamespace(run_type=run_type)}) is False  # fmt: skip
    sandbox.clear_requests()
    summaries = _run(tasks, tmp_path, run_type, form_dry_run)

    assert _writes(sandbox) == []  # the sandbox's request log: not one PUT, POST or PATCH
    assert sandbox.objects("offer_groups").get("301", {}).get("daily_conversion_cap") != 200
    assert not (tmp_path / "ledger.json").exists()  # nothing recorded as applied
    applies = [s for task_id, s in summaries.items() if task_id != "plan"]
    assert len(applies) == 4
    for summary in summaries.values():
        assert summary["dry_run"] is True
        assert summary["armed"] is False
        assert f"set {ARMED_VARIABLE}=true" in summary["to_arm"]
        assert "applied" not in summary
    # It planned: what an armed run would create and change.
    assert summaries["plan"]["counts"]["create"] + summaries["plan"]["counts"]["update"] > 0
    # Its log says so, and what to set (the task log: structlog prints it).
    log = capsys.readouterr()
    warned = [line for line in (log.out + log.err).splitlines() if "Not armed" in line]
    assert len(warned) == 5, log.out + log.err
    assert all(f"set {ARMED_VARIABLE}=true on the deployment" in line for line in warned)
    assert sum("whatever the run asked" in line for line in warned) == 4  # not the plan's


def test_an_armed_deployment_sends_as_before(sandbox, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ARMED_VARIABLE, raising=False)
    tasks = _dag_tasks()  # parsed unarmed: armed before the tasks run
    monkeypatch.setenv(ARMED_VARIABLE, "true")
    sandbox.clear_requests()
    summaries = _run(tasks, tmp_path, "scheduled", True)

    assert {e["method"] for e in _writes(sandbox)} >= {"PUT", "POST"}
    assert sandbox.objects("offer_groups")["301"]["daily_conversion_cap"] == 200
    assert len(sandbox.objects("custom_scrub_rates")) == 1
    assert summaries["apply_offer_groups"]["armed"] is True
    assert summaries["apply_offer_groups"]["dry_run"] is False
    assert "to_arm" not in summaries["apply_offer_groups"]
    assert summaries["apply_offer_groups"]["applied"]


def test_a_bad_value_fails_the_task_naming_the_setting(sandbox, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(ARMED_VARIABLE, "maybe")
    sandbox.clear_requests()
    with pytest.raises(ConfigValidationError) as info:
        _run(_dag_tasks(), tmp_path, "manual", False)
    assert f"{ARMED_VARIABLE} must be true or false" in str(info.value)
    assert "'maybe'" in str(info.value)
    assert network_requests(sandbox) == []  # failed before reading anything


@pytest.mark.parametrize(
    ("raw", "armed"),
    [("", False), ("0", False), ("off", False), ("TRUE", True), (" on ", True), ("1", True)],
)
def test_one_reader_for_every_arming_switch(raw: str, armed: bool) -> None:
    assert offer_sync_armed({ARMED_VARIABLE: raw}) is armed
    assert offer_sync_armed({}) is False
    # The review's switch does not arm the sync, nor the other way round.
    assert offer_sync_armed({REVIEW_ARMED_VARIABLE: "true"}) is False
    assert review_armed({ARMED_VARIABLE: "true"}) is False
    # The same error for a bad value, naming each switch.
    for read, name in ((offer_sync_armed, ARMED_VARIABLE), (review_armed, REVIEW_ARMED_VARIABLE)):
        with pytest.raises(ConfigValidationError, match=rf"^{name} must be true or false"):
            read({name: "maybe"})


def test_the_dag_doc_says_it_first() -> None:
    path = DAGS_DIR / "affiliate_offer_sync.py"
    spec = importlib.util.spec_from_file_location("offer_sync_dag_doc", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    first = next(line for line in module.DOC_MD.splitlines() if line.strip())
    assert ARMED_VARIABLE in first
    assert "only plans" in first
    assert module.affiliate_offer_sync().description == module.ARMING_LINE
