"""Deployments of the end-to-end stage: the connections they get and a context manager that
starts one on a fresh metadata DB and stops it, whatever failed (used by the e2e tests; the
fixtures and the session hooks are in ``conftest.py``)."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import harness
from .harness import PROJECT_ROOT, AirflowCluster, ClusterSettings, MetadataDatabase

#: DAGs of the project the stage runs.
DAG_IDS = ("affiliate_daily_reports", "affiliate_onhold_review", "affiliate_offer_sync")

#: Failed e2e tests so far (a deployment keeps its logs when one of its tests failed).
FAILURES = [0]


#: Wall time per part of the stage, printed at the end of the session (-rA not needed).
TIMINGS: dict[str, float] = {}


@contextlib.contextmanager
def timed(part: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        TIMINGS[part] = TIMINGS.get(part, 0.0) + time.monotonic() - start


def network_connection(sandbox: Any) -> dict[str, Any]:
    """The network-portal connection, in the JSON form the runbook documents."""
    return {
        "conn_type": "affiliate_network",
        "host": sandbox.base_url,
        "password": sandbox.keys["network"],
        "extra": {"portal": "network"},
    }


def affiliate_connections(sandbox: Any) -> dict[str, dict[str, Any]]:
    """One affiliate-portal connection per entry of include/reports.yaml (conn_id -> JSON)."""
    import yaml

    reports = yaml.safe_load((PROJECT_ROOT / "include" / "reports.yaml").read_text())
    return {
        entry["conn_id"]: {
            "conn_type": "affiliate_network",
            "host": sandbox.base_url,
            "password": sandbox.keys["affiliate"][str(entry["affiliate_id"])],
            "extra": {"portal": "affiliate"},
        }
        for entry in reports["affiliate_reports"]["affiliates"]
    }


def connection_env(sandbox: Any) -> dict[str, str]:
    """``AIRFLOW_CONN_*`` for the network connection and each affiliate connection."""
    env = {"AIRFLOW_CONN_AFFILIATE_NETWORK_DEFAULT": json.dumps(network_connection(sandbox))}
    for conn_id, conn in affiliate_connections(sandbox).items():
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    return env


@contextlib.contextmanager
def deployment(
    executor: str,
    *,
    label: str,
    template: str,
    env: dict[str, str],
    workdir: Path | None = None,
    before_start: Callable[[AirflowCluster], None] | None = None,
    celery_workers: int = 1,
    task_policy: tuple[str, ...] = (),
    dags_folder: Path | None = None,
    dag_ids: tuple[str, ...] = DAG_IDS,
    narrow_worker: tuple[int, str] | None = None,
) -> Iterator[AirflowCluster]:
    """A fresh metadata DB, migrated; the Airflow components started; all stopped after.

    :param template: migrated database the fresh one is copied from.
    :param env: connections, output base... for every component.
    :param before_start: CLI set-up on the fresh DB (connections, variables), run while the
        components start.
    :param celery_workers: Celery worker processes (CeleryExecutor).
    :param task_policy: extra lines of the cluster policy's ``task_policy(task)`` body.
    :param dags_folder: the folder the dag-processor parses (default: the project's ``dags/``).
    :param dag_ids: the DAGs to wait for before the stage starts.
    :param narrow_worker: see :class:`~tests.e2e.harness.ClusterSettings`.

    Stopping (by PID) and dropping the database happen in ``finally``, whatever failed. The work
    folder (AIRFLOW_HOME, process and task logs, local outputs) is removed after a passing
    stage and kept, with its path printed, after a failing one.
    """
    workdir = workdir or Path(tempfile.mkdtemp(prefix=f"afn-e2e-{label}-"))
    database = MetadataDatabase()
    cluster = AirflowCluster(
        workdir,
        database,
        ClusterSettings(
            executor,
            dags_folder or harness.DAGS_FOLDER,
            dict(env),
            celery_workers=celery_workers,
            task_policy=task_policy,
            narrow_worker=narrow_worker,
        ),
    )
    failures_before = FAILURES[0]
    try:
        with timed(f"{label}: start components (+ set-up commands)"):
            database.create(template=template)
            cluster.start(
                while_starting=None if before_start is None else lambda: before_start(cluster)
            )
            cluster.wait_dags_parsed(dag_ids)
        yield cluster
    except BaseException:
        FAILURES[0] += 1
        raise
    finally:
        with timed(f"{label}: stop components + drop DB"):
            try:
                cluster.stop()
            finally:
                database.drop()
        if FAILURES[0] == failures_before:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"\ne2e {label}: logs kept in {workdir}")
