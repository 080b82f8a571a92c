"""The browser stage's Airflow: the e2e harness's components on a SQLite metadata DB, a sandbox.

The stage drives the real Airflow 3.3 UI, so it needs a real api-server with the simple auth
manager, and a scheduler, dag-processor and triggerer (human-in-the-loop requests wait in the
triggerer) to run what the UI triggers. Every component and its environment come from
``tests/e2e/harness.py``; only the metadata DB differs: a SQLite file in the stage's work folder
(WAL mode), so the stage needs no PostgreSQL server and runs wherever Chromium installs.

Chromium and its driver are Debian's (``apt-get install chromium chromium-driver``, which
``.ci/run`` does); Selenium is pointed at both binaries, so Selenium Manager never downloads a
browser or a driver.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo.connections import sandbox_connections
from tests.e2e.harness import (
    DAGS_FOLDER,
    SANDBOX_SEED,
    AirflowCluster,
    ClusterSettings,
    MetadataDatabase,
)
from tests.support.review_settings import INCLUDE_DIR_ENV, include_with_review

from .stage_auth import DAG_GRANTS, USERS_WITHOUT_DAGS

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

#: The person answering review requests in the browser (the audit records this name).
REVIEWER = "reviewer"
#: A signed-in person granted no DAG (``stage_auth.StageAuthManager``): sees nothing of them.
OUTSIDER = "outsider"
#: A second review DAG's id (its runs written under the same base) and its only reader.
OTHER_REVIEW_DAG = "affiliate_onhold_review_eu"
EU_READER = "eu_reader"
#: DAGs whose UI the stage walks.
DAG_IDS = ("affiliate_daily_reports", "affiliate_onhold_review", "affiliate_offer_sync")

#: The stage's auth manager module, as copied into ``$AIRFLOW_HOME/config``.
STAGE_AUTH = "afn_stage_auth.py"
#: Stage settings on top of the e2e deployment's (``SHARED_AIRFLOW_ENV``).
STAGE_ENV: dict[str, str] = {
    # Only what the browser triggers runs: no hourly run beside the tests' manual ones.
    "AFFILIATE_ONHOLD_REVIEW_SCHEDULE": "none",
    # admin (the harness's API client), a named reviewer who uses the browser, and a viewer
    # granted no DAG by the stage's auth manager (the simple one, but for that user).
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": (
        f"admin:admin,{REVIEWER}:admin,{OUTSIDER}:viewer,{EU_READER}:viewer"
    ),
    "AIRFLOW__CORE__AUTH_MANAGER": f"{STAGE_AUTH[:-3]}.StageAuthManager",
    USERS_WITHOUT_DAGS: OUTSIDER,
    # A reader of the second review DAG only (the network page must show it nothing else).
    DAG_GRANTS: f"{EU_READER}={OTHER_REVIEW_DAG}",
}


def chromium_missing() -> str | None:
    """Why the browser stage cannot run here, or ``None`` when Chromium and its driver exist."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        return (
            f"browser stage: {', '.join(missing)} not installed "
            "(Debian: apt-get install chromium chromium-driver; .ci/run does it)"
        )
    return None


@dataclass
class SqliteMetadataDatabase(MetadataDatabase):
    """A SQLite metadata DB file, in place of the harness's PostgreSQL database.

    :param path: the database file (created by ``airflow db migrate``).
    """

    path: Path = field(default_factory=lambda: Path("airflow.db"))

    @property
    def sqlalchemy_url(self) -> str:
        return f"sqlite:///{self.path}"

    @property
    def celery_result_backend(self) -> str:  # LocalExecutor: no Celery
        return ""

    def create(self, template: str | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def use_wal(self) -> None:
        """WAL journal: the api-server reads while the scheduler writes (stored in the file)."""
        with sqlite3.connect(self.path) as db:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise RuntimeError(f"{self.path}: journal_mode {mode}, wanted wal")

    def drop(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


@dataclass
class UiStage:
    """What the browser tests share: the deployment, the sandbox behind it, the work folder.

    :param cluster: the running Airflow components (``cluster.api`` is a logged-in REST client).
    :param sandbox: the sandbox the connections point at.
    :param workdir: AIRFLOW_HOME, logs and the DAGs' outputs (``data/``).
    """

    cluster: AirflowCluster
    sandbox: Any
    workdir: Path

    @property
    def url(self) -> str:
        return self.cluster.api.base_url

    @property
    def reviewer_password(self) -> str:
        return self.cluster.password

    @property
    def data_base(self) -> Path:
        return self.workdir / "data"


@contextmanager
def ui_stage(workdir: Path) -> Iterator[UiStage]:
    """A sandbox and Airflow's api-server, scheduler, dag-processor and triggerer on loopback.

    Everything started here is stopped by PID in ``finally`` (the harness's ``stop``); the work
    folder is left to the caller (kept after a failure, for its logs).
    """
    from affiliate_network_sandbox.testing import start_sandbox

    sandbox = start_sandbox(seed=SANDBOX_SEED)
    cluster: AirflowCluster | None = None
    try:
        # A "Keep on hold" answer is asked again by the next run, so a second run can be
        # answered in the browser too (the default remembers it for 24 hours).
        include = include_with_review(workdir / "include", keep_decision_hours=0)
        env = {
            **sandbox_connections(sandbox, include),
            **STAGE_ENV,
            INCLUDE_DIR_ENV: str(include),
            "AFFILIATE_NETWORK_DATA_BASE": str(workdir / "data"),
        }
        database = SqliteMetadataDatabase(path=workdir / "airflow_home" / "airflow.db")
        settings = ClusterSettings("LocalExecutor", DAGS_FOLDER, env)
        database.create()
        # Migrate through a CLI-only cluster first: the serving cluster picks its free ports
        # right before it starts, not a minute earlier (another process took one meanwhile).
        cli = AirflowCluster(workdir, database, settings)
        # The stage's auth manager, where every component imports it ($AIRFLOW_HOME/config).
        shutil.copyfile(Path(__file__).with_name("stage_auth.py"), cli.home / "config" / STAGE_AUTH)
        cli.migrate()
        database.use_wal()
        cluster = AirflowCluster(workdir, database, settings)
        # The reviewer and the outsider log in with admin's password (one secret per stage).
        Path(cluster.env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]).write_text(
            json.dumps(
                {name: cluster.password for name in ("admin", REVIEWER, OUTSIDER, EU_READER)}
            )
            + "\n"
        )
        cluster.start()
        cluster.wait_dags_parsed(DAG_IDS)
        yield UiStage(cluster, sandbox, workdir)
    finally:
        try:
            if cluster is not None:
                cluster.stop()
        finally:
            sandbox.stop()


def new_driver(download_dir: Path | None = None) -> Any:
    """Headless Debian Chromium through Debian's chromedriver (nothing downloaded)."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never reach the network
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1440,1000",
        "--lang=en-US",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.implicitly_wait(0)
    return driver


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
