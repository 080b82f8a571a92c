"""Shared fixtures: an isolated Airflow home, a real sandbox on loopback, connections to it.

Airflow reads its configuration when first imported, so the environment is set here, at
conftest import time, before any test module imports airflow.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.connections import conn_env_name

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# pytest loads this file as ``conftest``; an import of ``tests.conftest`` would run it again and
# move AIRFLOW_HOME and the metadata DB to a fresh, unmigrated folder under the fixtures that
# already point at this one (shared helpers live in tests/support/). Refused, per process.
if os.environ.get("_AFN_TEST_CONFTEST_PID") == str(os.getpid()):
    raise ImportError(
        "tests/conftest.py imported a second time (as tests.conftest?): import shared helpers "
        "from tests/support/ instead"
    )
os.environ["_AFN_TEST_CONFTEST_PID"] = str(os.getpid())
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="afn-test-airflow-"))

os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
# 64 bytes: Airflow's generated 16-byte default draws PyJWT's InsecureKeyLengthWarning.
os.environ.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_urlsafe(64))
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(PROJECT_ROOT / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(PROJECT_ROOT / "plugins")
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_AIRFLOW_HOME}/airflow.db"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
os.environ.setdefault("AFFILIATE_NETWORK_INCLUDE_DIR", str(PROJECT_ROOT / "include"))
# The suite runs as an armed deployment (its tests check the review's and the offer sync's
# writes); the tests of an unarmed one unset it (tests/operators/test_onhold_arming.py,
# tests/operators/test_offer_sync_arming.py).
os.environ["AFFILIATE_ONHOLD_ARMED"] = "true"
os.environ["AFFILIATE_OFFER_SYNC_ARMED"] = "true"

#: Fixtures shared by test modules of several folders (``s3``: moto on loopback; the on-hold
#: operator and review tests' window, truth and rules file).
pytest_plugins = ("tests.support.s3", "tests.support.onhold_fixtures")

#: Tests that start a whole Airflow deployment (scheduler, workers, api-server, a browser): on a
#: 2-core machine two of them at once starve each other's timeouts, so xdist runs them on one
#: worker, one after the other, while the other worker runs the rest of the suite. The demo's
#: other tests run ``airflow dags test`` (no deployment): they balance the other worker.
_ONE_WORKER = (
    "tests/e2e/",
    "tests/ui/",
    "tests/test_demo.py::test_the_ui_runs_a_task_on_another_port",
)
#: Modules whose tests share one cached install (a session fixture per worker would build it
#: twice at once): each module's tests run on one worker.
_ONE_MODULE = ("tests/test_docker_compose.py",)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scheduler, with the deployment tests as one scope (one worker, in order).

    ``--dist loadgroup`` with ``xdist_group`` marks does not group on pytest 9 (xdist 3.8 renames
    ``item._nodeid``, which pytest 9 no longer reads), so the grouping is done here, through
    xdist's hook for a custom scheduler: every other test is a scope of its own, as in
    ``loadgroup``.
    """
    from xdist.scheduler import LoadScopeScheduling

    class _DeploymentsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(_ONE_WORKER):
                return "deployments"
            return nodeid.split("::", 1)[0] if nodeid.startswith(_ONE_MODULE) else nodeid

    return _DeploymentsTogether(config, log)


#: Seed and size of the session sandbox. Tests that need another world call ``sandbox.reset(...)``.
SANDBOX_SEED = 42


@pytest.fixture(scope="session")
def sandbox_server() -> Iterator:
    """One sandbox process for the session, on a free loopback port.

    Its clock is frozen just after its data (today, UTC, is its last day): every day is
    complete and stays so for the whole session, whatever the wall clock does meanwhile. A test
    about today's traffic still arriving sets the clock (``sandbox.set_clock``); the reset of
    the ``sandbox`` fixture puts this startup clock back.
    """
    import datetime as dt

    from affiliate_network_sandbox.testing import clock_after_data, start_sandbox

    today = dt.datetime.now(dt.UTC).date()
    server = start_sandbox(seed=SANDBOX_SEED, end_date=today, clock=clock_after_data(today))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sandbox(sandbox_server):
    """The session sandbox with fresh state: default data, no faults, counters at zero."""
    sandbox_server.reset()
    return sandbox_server


@pytest.fixture
def make_connection(monkeypatch) -> Callable[..., str]:
    """Register an Airflow connection through ``AIRFLOW_CONN_<ID>`` (JSON) for one test.

    ``make_connection(conn_id, host=..., key=..., portal="network", **extra)`` returns conn_id.
    """

    def _make(conn_id: str, *, host: str, key: str, portal: str = "network", **extra) -> str:
        value = {
            "conn_type": "affiliate_network",
            "host": host,
            "password": key,
            "extra": {"portal": portal, **extra},
        }
        monkeypatch.setenv(conn_env_name(conn_id), json.dumps(value))
        return conn_id

    return _make


@pytest.fixture
def network_conn(sandbox, make_connection) -> str:
    """``affiliate_network_default``: the network portal of the sandbox."""
    return make_connection(
        "affiliate_network_default", host=sandbox.base_url, key=sandbox.keys["network"]
    )


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated SQLite metadata DB in the session's AIRFLOW_HOME (for dag runs)."""
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        capture_output=True,
        env=os.environ.copy(),
    )
    # WAL: the in-process API server of a test reads while an `airflow dags test` subprocess
    # writes; in SQLite's default journal a busy writer makes those reads fail after 5 s
    # ("database is locked", a 500 "Database error"), which a loaded CI machine hits. The mode
    # is stored in the file, so every process opening it uses it.
    import sqlite3

    with sqlite3.connect(_AIRFLOW_HOME / "airflow.db") as db:
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    assert mode == "wal", mode
    return _AIRFLOW_HOME
