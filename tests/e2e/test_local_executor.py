"""The three DAGs on a real deployment with the LocalExecutor, then a backfill and an on-call rerun.

One deployment (api-server, scheduler, dag-processor, triggerer on a fresh PostgreSQL metadata
database) serves every test of this module, in order: it costs half a minute to start on two
cores. The tests drive it like a user: the REST API (unpause, trigger, clear) and the
``airflow`` CLI (backfill), and check what landed and what the network (the sandbox) saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pendulum
import pytest

from .checks import (
    DAILY,
    ONHOLD,
    SYNC,
    check_affiliate_partitions,
    check_conversion_partitions,
    check_offer_sync_applied,
    day_truth,
    report_days,
    run_day,
    wait_all_runs,
    wait_scheduled_run,
)
from .conftest import deployment, timed
from .harness import AirflowCluster
from .onhold_checks import check_onhold_applied, onhold_conf

pytestmark = pytest.mark.e2e


@dataclass
class Stage:
    cluster: AirflowCluster
    sandbox: Any
    runs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def data_base(self) -> str:
        return self.cluster.env["AFFILIATE_NETWORK_DATA_BASE"]


@pytest.fixture(scope="module")
def local(e2e_sandbox: Any) -> Iterator[Stage]:
    e2e_sandbox.reset()
    with deployment("LocalExecutor", e2e_sandbox, label="local") as cluster:
        stage = Stage(cluster, e2e_sandbox)
        with timed("local: unpause + trigger the three DAGs"):
            trigger_all(stage)
        yield stage


def trigger_all(stage: Stage) -> None:
    """Unpause each DAG (the scheduler creates the latest scheduled run), then trigger it."""
    api = stage.cluster.api
    for dag_id in (DAILY, ONHOLD, SYNC):
        api.unpause(dag_id)
    stage.runs[DAILY] = [wait_scheduled_run(stage.cluster, DAILY)]
    stage.runs[ONHOLD] = [wait_scheduled_run(stage.cluster, ONHOLD)]
    # Manual runs as an operator starts them from the UI ("Trigger DAG w/ config").
    stage.runs[DAILY].append(api.trigger(DAILY, conf={"trailing_days": 1},
                                         logical_date=_days_ago(3)))
    stage.runs[ONHOLD].append(api.trigger(ONHOLD, conf=onhold_conf(), logical_date=None))
    stage.runs[SYNC] = [api.trigger(SYNC, conf={"dry_run": False}, logical_date=None)]


def _days_ago(n: int) -> str:
    return pendulum.now("UTC").start_of("day").subtract(days=n).to_iso8601_string()


def test_daily_reports_land_partitions_equal_to_the_network_truth(local: Stage) -> None:
    with timed("local: wait + check affiliate_daily_reports"):
        runs = wait_all_runs(local.cluster, DAILY)
        days = [d for r in runs for d in report_days(local.cluster, r["dag_run_id"])]
        run_days = [run_day(r) for r in runs]
        assert set(run_days) <= set(days)
        check_conversion_partitions(local.data_base, local.sandbox, days)
        check_affiliate_partitions(local.data_base, run_days)


def test_onhold_review_applies_decisions_in_the_network(local: Stage) -> None:
    with timed("local: wait + check affiliate_onhold_review"):
        runs = wait_all_runs(local.cluster, ONHOLD)
        check_onhold_applied(local.cluster, local.sandbox, runs)


def test_offer_sync_applies_the_desired_state(local: Stage) -> None:
    with timed("local: wait + check affiliate_offer_sync"):
        wait_all_runs(local.cluster, SYNC)
        check_offer_sync_applied(local.sandbox)


BACKFILL_FROM_DAYS_AGO = 11


def test_backfill_create_lands_one_partition_per_day(local: Stage) -> None:
    """The runbook's backfill command, then its three runs and partitions."""
    first = pendulum.now("UTC").start_of("day").subtract(days=BACKFILL_FROM_DAYS_AGO)
    days = [first.add(days=i).to_date_string() for i in range(3)]
    with timed("local: backfill 3 days"):
        dry = local.cluster.airflow(
            "backfill", "create", "--dag-id", DAILY, "--from-date", days[0],
            "--to-date", days[-1], "--dry-run",
        )
        assert all(d in dry for d in days), dry
        local.cluster.airflow(
            "backfill", "create", "--dag-id", DAILY, "--from-date", days[0],
            "--to-date", days[-1], "--max-active-runs", "3",
            "--dag-run-conf", json.dumps({"trailing_days": 0}),
        )
        backfills = local.cluster.api.backfills(DAILY)
        assert len(backfills) == 1
        runs = wait_all_runs(local.cluster, DAILY)
        backfill_runs = [r for r in runs if r["run_type"] == "backfill"]
        assert sorted(run_day(r) for r in backfill_runs) == days
        check_conversion_partitions(local.data_base, local.sandbox, days)
        check_affiliate_partitions(local.data_base, days)


def test_failed_report_task_cleared_through_rest_reruns_without_duplicates(local: Stage) -> None:
    """On-call: the network fails hard, the task fails; fault gone, clear it; exact partition."""
    cluster, sandbox = local.cluster, local.sandbox
    day = pendulum.now("UTC").start_of("day").subtract(days=6)
    with timed("local: forced failure + clear + rerun"):
        sandbox.set_faults(fail_hard=503, paths=["/networks/reporting/conversions"])
        try:
            run_id = cluster.api.trigger(
                DAILY, conf={"trailing_days": 0}, logical_date=day.to_iso8601_string()
            )
            failed = cluster.wait_task_state(DAILY, run_id, "pull_conversions", {"failed"})
            assert failed["try_number"] == 1
            run = cluster.wait_run(DAILY, run_id)
            assert run["state"] == "failed"
        finally:
            sandbox.clear_faults()
        # The failed attempt published nothing new: no partition of that day looks complete
        # unless an earlier run had landed it (then that one is intact and exact).
        sandbox.clear_requests()
        cleared = cluster.api.clear_task(DAILY, run_id, ["pull_conversions"])
        assert "pull_conversions" in {ti["task_id"] for ti in cleared}
        cluster.assert_run_succeeded(DAILY, run_id)
        tis = {ti["task_id"]: ti for ti in cluster.api.task_instances(DAILY, run_id)}
        assert tis["pull_conversions"]["try_number"] == 2
        day_s = run_day(cluster.api.dag_run(DAILY, run_id))
        assert report_days(cluster, run_id) == [day_s]
        manifests = check_conversion_partitions(local.data_base, sandbox, [day_s])
        assert manifests[day_s].row_count == day_truth(sandbox, day_s)
        assert len(manifests[day_s].files) == 1
        # The rerun pulled that one day once: every conversions request asked for it.
        pulls = [
            r for r in sandbox.requests_log()
            if r["path"].endswith("/networks/reporting/conversions")
        ]
        assert pulls, "the rerun did not call the network"
        assert all(r["status"] == 200 for r in pulls)
