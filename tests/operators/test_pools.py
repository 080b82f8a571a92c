"""The reporting pool: off by default, named by the deployment, slots checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.pools import POOL_ENV, SLOTS_ENV, reporting_pool

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
#: The tasks that send requests to /networks/reporting/* (the network's 10-in-flight cap).
REPORTING_TASKS = {
    "affiliate_daily_reports": {
        "pull_conversions",
        "reconcile_conversions",
        "repull_trailing_window",
    },
    "affiliate_onhold_review": {"review", "apply_human_decisions"},
}


def _pools(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, dict[str, tuple[str, int]]]:
    for name in (POOL_ENV, SLOTS_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    bag = DagBag(dag_folder=str(DAGS_DIR))
    assert bag.import_errors == {}
    return {
        dag_id: {t.task_id: (t.pool, t.pool_slots) for t in bag.dags[dag_id].tasks}
        for dag_id in REPORTING_TASKS
    }


def test_without_the_setting_every_task_stays_in_the_default_pool(monkeypatch) -> None:
    pools = _pools(monkeypatch)
    for tasks in pools.values():
        assert set(tasks.values()) == {("default_pool", 1)}


def test_a_named_pool_takes_the_reporting_tasks_with_the_hooks_slots(monkeypatch) -> None:
    pools = _pools(monkeypatch, **{POOL_ENV: "affiliate_network_reporting"})
    for dag_id, reporting in REPORTING_TASKS.items():
        for task_id, (pool, slots) in pools[dag_id].items():
            if task_id in reporting:
                assert (pool, slots) == ("affiliate_network_reporting", 4), task_id
            else:
                assert (pool, slots) == ("default_pool", 1), task_id


def test_slots_follow_the_setting(monkeypatch) -> None:
    monkeypatch.setenv(POOL_ENV, "reporting")
    monkeypatch.setenv(SLOTS_ENV, "2")
    assert reporting_pool() == {"pool": "reporting", "pool_slots": 2}


@pytest.mark.parametrize("slots", ["0", "11", "four", "2.5"])
def test_slots_outside_the_cap_name_the_variable(monkeypatch, slots: str) -> None:
    monkeypatch.setenv(POOL_ENV, "reporting")
    monkeypatch.setenv(SLOTS_ENV, slots)
    with pytest.raises(ConfigValidationError, match=SLOTS_ENV) as error:
        reporting_pool()
    assert repr(slots) in str(error.value)
