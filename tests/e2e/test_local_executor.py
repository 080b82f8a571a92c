"""The three DAGs on a real deployment with the LocalExecutor, then a backfill and an on-call rerun.

One deployment (api-server, scheduler, dag-processor, triggerer on a fresh PostgreSQL metadata
database) serves every test of this module, in order: it costs half a minute to start on two
cores. The tests drive it like a user: the REST API (unpause, trigger, test a connection,
clear a task) and the ``airflow`` CLI (backfill), and check what landed and what the network
(the sandbox) saw.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pendulum
import pytest

from .checks import (
    DAILY,
    SYNC,
    Stage,
    check_affiliate_partitions,
    check_conversion_partitions,
    check_daily_reports,
    check_offer_sync_applied,
    day_truth,
    report_days,
    run_day,
    trigger_all,
    wait_all_runs,
)
from .deployments import connection_env, deployment, network_connection, timed
from .onhold_checks import check_onhold_applied

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local(e2e_sandbox: Any, migrated_template: str) -> Iterator[Stage]:
    e2e_sandbox.reset()
    workdir = Path(tempfile.mkdtemp(prefix="afn-e2e-local-"))
    env = connection_env(e2e_sandbox)
    env["AFFILIATE_NETWORK_DATA_BASE"] = str(workdir / "data")
    with deployment(
        "LocalExecutor", label="local", template=migrated_template, env=env, workdir=workdir
    ) as cluster:
        stage = Stage(cluster, e2e_sandbox, env["AFFILIATE_NETWORK_DATA_BASE"])
        with timed("local: unpause + trigger the three DAGs"):
            trigger_all(stage)
        yield stage


def test_daily_reports_land_partitions_equal_to_the_network_truth(local: Stage) -> None:
    with timed("local: wait + check affiliate_daily_reports"):
        check_daily_reports(local)


def test_onhold_review_applies_decisions_in_the_network(local: Stage) -> None:
    with timed("local: wait + check affiliate_onhold_review"):
        check_onhold_applied(local.cluster, local.sandbox)


def test_offer_sync_applies_the_desired_state(local: Stage) -> None:
    with timed("local: wait + check affiliate_offer_sync"):
        wait_all_runs(local.cluster, SYNC)
        check_offer_sync_applied(local.sandbox)


def test_component_health_checks_of_compose_pass(local: Stage) -> None:
    """The commands and endpoints docker-compose.yaml uses as health checks."""
    import requests

    cluster = local.cluster
    with timed("local: health checks"):
        port = cluster.env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT"]
        assert requests.get(f"http://127.0.0.1:{port}/health", timeout=10).ok
        # The api-server's view of every component, then compose's CLI health checks.
        health = cluster.api.call("GET", "/monitor/health")
        for component in ("metadatabase", "scheduler", "triggerer", "dag_processor"):
            assert health[component]["status"] == "healthy", health
        job_types = ("TriggererJob", "DagProcessorJob")
        with ThreadPoolExecutor(len(job_types)) as pool:  # three CLI start-ups at once
            outputs = pool.map(
                lambda job: cluster.airflow("jobs", "check", "--job-type", job, "--local"),
                job_types,
            )
            for out in outputs:
                assert "alive" in out.lower(), out


def _test_button(local: Stage, conn: dict[str, Any]) -> dict:
    """``POST /api/v2/connections/test``: what the UI's connection "Test" button sends."""
    body = {
        "connection_id": "affiliate_network_ui_test",
        "conn_type": conn["conn_type"],
        "host": conn["host"],
        "password": conn["password"],
        "extra": json.dumps(conn["extra"]),
    }
    return local.cluster.api.call("POST", "/connections/test", json=body)


def test_connection_test_button_works_for_default_and_eu_accounts(local: Stage) -> None:
    with timed("local: connection test button"):
        network = network_connection(local.sandbox)
        ok = _test_button(local, network)
        assert ok["status"] is True, ok
        eu = {
            **network,
            "password": local.sandbox.keys["eu"]["network"],
            "extra": {
                "portal": "network",
                "region": "eu",
                "eu_base_url": local.sandbox.eu_base_url,
            },
        }
        ok_eu = _test_button(local, eu)
        assert ok_eu["status"] is True, ok_eu
        # An EU key on the default region is refused, and the answer does not echo the key.
        wrong = _test_button(local, {**eu, "extra": {"portal": "network"}})
        assert wrong["status"] is False
        assert eu["password"] not in wrong["message"]


BACKFILL_FROM_DAYS_AGO = 11


def test_backfill_create_lands_one_partition_per_day(local: Stage) -> None:
    """The runbook's backfill command, then the three runs and their partitions."""
    first = pendulum.now("UTC").start_of("day").subtract(days=BACKFILL_FROM_DAYS_AGO)
    days = [first.add(days=i).to_date_string() for i in range(3)]
    with timed("local: backfill 3 days"):
        window = ["--dag-id", DAILY, "--from-date", days[0], "--to-date", days[-1]]
        local.cluster.airflow(
            "backfill",
            "create",
            *window,
            "--max-active-runs",
            "3",
            "--dag-run-conf",
            json.dumps({"trailing_days": 0}),
        )
        assert len(local.cluster.api.backfills(DAILY)) == 1
        runs = wait_all_runs(local.cluster, DAILY)
        backfill_runs = [r for r in runs if r["run_type"] == "backfill"]
        assert sorted(run_day(r) for r in backfill_runs) == days
        for run in backfill_runs:
            assert report_days(local.cluster, run["dag_run_id"]) == [run_day(run)]
        check_conversion_partitions(local.data_base, local.sandbox, days)
        check_affiliate_partitions(local.data_base, days)


def test_failed_report_task_cleared_through_rest_reruns_without_duplicates(local: Stage) -> None:
    """On-call: the network fails hard, the task fails; fault gone, clear it; exact partition."""
    cluster, sandbox = local.cluster, local.sandbox
    logical = pendulum.now("UTC").start_of("day").subtract(days=6).to_iso8601_string()
    with timed("local: forced failure + clear + rerun"):
        sandbox.set_faults(fail_hard=503, paths=["/networks/reporting/conversions"])
        try:
            run_id = cluster.api.trigger(DAILY, conf={"trailing_days": 0}, logical_date=logical)
            failed = cluster.wait_task_state(DAILY, run_id, "pull_conversions", {"failed"})
            assert failed["try_number"] == 1
            assert cluster.wait_run(DAILY, run_id)["state"] == "failed"
        finally:
            sandbox.clear_faults()
        day = run_day(cluster.api.dag_run(DAILY, run_id))
        sandbox.clear_requests()

        cleared = cluster.api.clear_task(DAILY, run_id, ["pull_conversions"])
        assert "pull_conversions" in {ti["task_id"] for ti in cleared}
        cluster.assert_run_succeeded(DAILY, run_id)

        tis = {ti["task_id"]: ti for ti in cluster.api.task_instances(DAILY, run_id)}
        assert tis["pull_conversions"]["try_number"] == 2
        assert report_days(cluster, run_id) == [day]
        manifests = check_conversion_partitions(local.data_base, sandbox, [day])
        assert manifests[day].row_count == day_truth(sandbox, day)
        assert len(manifests[day].files) == 1
        # The rerun pulled its day from the network, successfully.
        pulls = [
            r
            for r in sandbox.requests_log()
            if r["path"].endswith("/networks/reporting/conversions")
        ]
        assert pulls
        assert all(r["status"] == 200 for r in pulls)
