"""Fixtures of the end-to-end stage: prerequisites, a sandbox of its own, deployments.

The stage needs PostgreSQL (127.0.0.1:5432, user ``postgres``, trust) and Redis
(127.0.0.1:6379). Without them it is skipped with the reason; with them, a missing Python
dependency of a real deployment (PostgreSQL async driver, a Celery that the Celery provider
supports) is a failure, not a skip: the production shape would not work either.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import harness
from .harness import (
    PROJECT_ROOT,
    SANDBOX_SEED,
    AirflowCluster,
    ClusterSettings,
    MetadataDatabase,
    postgres_available,
    redis_available,
)

#: DAGs of the project the stage runs.
DAG_IDS = ("affiliate_daily_reports", "affiliate_onhold_review", "affiliate_offer_sync")

#: Failed e2e tests so far (a deployment keeps its logs when one of its tests failed).
_FAILURES = [0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.failed and "e2e" in item.keywords:
        _FAILURES[0] += 1
    return report


#: Wall time per part of the stage, printed at the end of the session (-rA not needed).
TIMINGS: dict[str, float] = {}


@contextlib.contextmanager
def timed(part: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        TIMINGS[part] = TIMINGS.get(part, 0.0) + time.monotonic() - start


def pytest_terminal_summary(terminalreporter: Any) -> None:  # pragma: no cover - reporting
    if TIMINGS:
        terminalreporter.write_sep("-", "e2e stage timings (s)")
        for part, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{part:<45} {seconds:7.1f}")
        terminalreporter.write_line(f"{'total':<45} {sum(TIMINGS.values()):7.1f}")


def _missing(module: str, why: str) -> list[str]:
    try:
        importlib.import_module(module)
    except ImportError as err:
        return [f"{why} ({err})"]
    return []


@pytest.fixture(scope="session")
def e2e_prerequisites() -> None:
    if not postgres_available():
        pytest.skip("e2e: PostgreSQL is not reachable on 127.0.0.1:5432")
    if not redis_available():
        pytest.skip("e2e: Redis is not reachable on 127.0.0.1:6379")
    problems = _missing(
        "asyncpg",
        "Airflow 3.3 opens an async engine on a PostgreSQL metadata DB (postgresql -> asyncpg): "
        "add 'asyncpg' to the dev group (and to the extra that documents PostgreSQL)",
    )
    if problems:
        pytest.fail("e2e prerequisites missing:\n- " + "\n- ".join(problems), pytrace=False)


@pytest.fixture(scope="session")
def celery_prerequisites(e2e_prerequisites: None) -> None:
    problems = _missing(
        "airflow.providers.celery.executors.celery_executor_utils",
        "the Celery provider cannot import its executor: celery 5.7 removed "
        "celery.backends.database.retry; pin 'celery[redis]>=5.5,<5.7'",
    )
    if problems:
        pytest.fail(
            "CeleryExecutor prerequisites missing:\n- " + "\n- ".join(problems), pytrace=False
        )


@pytest.fixture(scope="session")
def migrated_template(e2e_prerequisites: None) -> Iterator[str]:
    """A metadata database migrated once; each deployment starts from a fresh copy of it.

    ``CREATE DATABASE ... TEMPLATE`` copies it in well under a second, where ``airflow db
    migrate`` takes 15-40 s on two busy cores.
    """
    workdir = Path(tempfile.mkdtemp(prefix="afn-e2e-template-"))
    template = MetadataDatabase()
    # Only the CLI is used: no component is started for this "cluster".
    cli = AirflowCluster(workdir, template, ClusterSettings("LocalExecutor", harness.DAGS_FOLDER))
    try:
        with timed("create + migrate the metadata DB (once)"):
            template.create()
            cli.migrate()
        yield template.name
    finally:
        template.drop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def e2e_sandbox(e2e_prerequisites: None) -> Iterator[Any]:
    """A sandbox of the stage's own (unit tests reset the shared one between tests)."""
    from affiliate_network_sandbox.testing import start_sandbox

    server = start_sandbox(seed=SANDBOX_SEED)
    try:
        yield server
    finally:
        server.stop()


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
    failures_before = _FAILURES[0]
    try:
        with timed(f"{label}: start components (+ set-up commands)"):
            database.create(template=template)
            cluster.start(
                while_starting=None if before_start is None else lambda: before_start(cluster)
            )
            cluster.wait_dags_parsed(dag_ids)
        yield cluster
    except BaseException:
        _FAILURES[0] += 1
        raise
    finally:
        with timed(f"{label}: stop components + drop DB"):
            try:
                cluster.stop()
            finally:
                database.drop()
        if _FAILURES[0] == failures_before:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"\ne2e {label}: logs kept in {workdir}")
