"""The three DAGs on a deployment scaled out with the CeleryExecutor, outputs on S3.

Redis is the broker, PostgreSQL (the fresh metadata database) the result backend, and one
``airflow celery worker`` runs every task. This deployment also exercises the runbook's other
set-ups: the output base is ``s3://`` (moto's S3 server on loopback) set with
``airflow variables set``, and the connections come from all three places a deployment keeps
them: the environment (network), the metadata DB through ``airflow connections add`` (what the
UI writes) and a secrets backend (a local-filesystem backend standing in for Vault/AWS).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .checks import (
    SYNC,
    Stage,
    check_daily_reports,
    check_offer_sync_applied,
    trigger_all,
    wait_all_runs,
)
from .conftest import affiliate_connections, deployment, network_connection, timed
from .harness import AirflowCluster, MotoS3
from .onhold_checks import check_onhold_applied

pytestmark = pytest.mark.e2e

S3_CONN_ID = "aws_reports"


@pytest.fixture(scope="module")
def celery(celery_prerequisites: None, e2e_sandbox: Any, migrated_template: str) -> Iterator[Stage]:
    e2e_sandbox.reset()  # writes of the LocalExecutor stage are forgotten
    workdir = Path(tempfile.mkdtemp(prefix="afn-e2e-celery-"))
    moto = MotoS3(workdir)
    data_base = f"s3://{S3_CONN_ID}@{moto.bucket}/affiliate-network"
    affiliates = list(affiliate_connections(e2e_sandbox).items())
    (ui_conn_id, ui_conn), (secret_conn_id, secret_conn) = affiliates[0], affiliates[1]
    secrets_file = workdir / "connections.json"
    secrets_file.write_text(json.dumps({secret_conn_id: secret_conn}))
    env = {
        "AIRFLOW_CONN_AFFILIATE_NETWORK_DEFAULT": json.dumps(network_connection(e2e_sandbox)),
        f"AIRFLOW_CONN_{S3_CONN_ID.upper()}": moto.connection_json(),
        "AIRFLOW__SECRETS__BACKEND": "airflow.secrets.local_filesystem.LocalFilesystemBackend",
        "AIRFLOW__SECRETS__BACKEND_KWARGS": json.dumps(
            {"connections_file_path": str(secrets_file)}
        ),
    }

    def set_up(cluster: AirflowCluster) -> None:
        # The runbook's commands: the UI-equivalent connection, then the S3 output base.
        cluster.airflow("connections", "add", ui_conn_id, "--conn-json", json.dumps(ui_conn))
        cluster.airflow("variables", "set", "affiliate_network_data_base", data_base)

    previous = os.environ.get(f"AIRFLOW_CONN_{S3_CONN_ID.upper()}")
    os.environ[f"AIRFLOW_CONN_{S3_CONN_ID.upper()}"] = moto.connection_json()  # test reads S3
    try:
        with timed("celery: start moto S3"):
            moto.start()
        with deployment(
            "CeleryExecutor",
            label="celery",
            template=migrated_template,
            env=env,
            workdir=workdir,
            before_start=set_up,
        ) as cluster:
            stage = Stage(cluster, e2e_sandbox, data_base)
            with timed("celery: unpause + trigger the three DAGs"):
                trigger_all(stage)
            yield stage
    finally:
        moto.stop()
        if previous is None:
            os.environ.pop(f"AIRFLOW_CONN_{S3_CONN_ID.upper()}", None)
        else:
            os.environ[f"AIRFLOW_CONN_{S3_CONN_ID.upper()}"] = previous


def test_daily_reports_land_on_s3_through_celery(celery: Stage) -> None:
    with timed("celery: wait + check affiliate_daily_reports"):
        check_daily_reports(celery)


def test_onhold_review_applies_decisions_through_celery(celery: Stage) -> None:
    with timed("celery: wait + check affiliate_onhold_review"):
        check_onhold_applied(celery.cluster, celery.sandbox)


def test_offer_sync_applies_the_desired_state_through_celery(celery: Stage) -> None:
    with timed("celery: wait + check affiliate_offer_sync"):
        wait_all_runs(celery.cluster, SYNC)
        check_offer_sync_applied(celery.sandbox)


def test_every_task_ran_on_the_celery_worker(celery: Stage) -> None:
    """Each task instance that ran went through our queue to the worker, which logged it."""
    cluster = celery.cluster
    queue = cluster.env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"]
    worker_log = (cluster.process_logs / "celery-worker.log").read_text(errors="replace")
    not_on_worker = []
    for dag_id in celery.runs:
        for run in cluster.api.dag_runs(dag_id):
            for ti in cluster.api.task_instances(dag_id, run["dag_run_id"]):
                if ti["state"] not in ("success", "failed"):
                    continue  # never ran (skipped, upstream_failed): no worker to check
                assert ti["queue"] == queue, ti
                assert ti["hostname"], ti
                # The worker logs "Executing workload in Celery: ... log_path='dag_id=.../...'".
                key = f"dag_id={dag_id}/run_id={run['dag_run_id']}/task_id={ti['task_id']}/"
                if key not in worker_log:
                    not_on_worker.append(key)
    assert not not_on_worker, f"not executed by the Celery worker: {not_on_worker}"
