"""Fixtures of the end-to-end stage: prerequisites, a sandbox of its own, deployments.

The stage needs PostgreSQL (127.0.0.1:5432, user ``postgres``, trust) and Redis
(127.0.0.1:6379). Without them it is skipped with the reason; with them, a missing Python
dependency of a real deployment (PostgreSQL async driver, a Celery that the Celery provider
supports) is a failure, not a skip: the production shape would not work either.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import harness
from .deployments import FAILURES, TIMINGS, timed
from .harness import (
    SANDBOX_SEED,
    AirflowCluster,
    ClusterSettings,
    MetadataDatabase,
    postgres_available,
    redis_available,
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.failed and "e2e" in item.keywords:
        FAILURES[0] += 1
    return report


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
