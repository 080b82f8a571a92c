"""A real Airflow deployment on loopback for the end-to-end stage.

Each Airflow component (api-server, scheduler, dag-processor, triggerer, Celery worker) runs as
its own process in its own process session, logging to a file, against a PostgreSQL metadata
database created for the run. Everything started here is stopped by PID (process group, then any
stray descendant) in :meth:`AirflowCluster.stop`, which the fixtures call from a ``finally``.

The deployment settings shared with ``docker-compose.yaml`` live in :data:`SHARED_AIRFLOW_ENV`
and :data:`SANDBOX_SEED` / :data:`CELERY_WORKER_CONCURRENCY`; ``tests/test_docker_compose.py``
checks that the compose file carries the same values, so the two cannot drift apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import requests
from cryptography.fernet import Fernet

from demo import demo_include
from tests.support.ports import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
AIRFLOW_BIN = str(VENV_BIN / "airflow")
#: The Airflow DAGs and plugins folders, as docker-compose.yaml mounts them.
DAGS_FOLDER = PROJECT_ROOT / "dags"
PLUGINS_FOLDER = PROJECT_ROOT / "plugins"

PG_HOST = "127.0.0.1"
PG_PORT = 5432
PG_USER = "postgres"
REDIS_URL = "redis://127.0.0.1:6379/0"

#: Settings that the e2e deployment and ``docker-compose.yaml`` must share, value for value.
SHARED_AIRFLOW_ENV: dict[str, str] = {
    "AIRFLOW__CORE__AUTH_MANAGER": (
        "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
    ),
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "true",
    "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
    # 2-core machines: the default parallelism of 32 starts 32 LocalExecutor workers.
    "AIRFLOW__CORE__PARALLELISM": "4",
    # The UI's connection "Test" button is off unless this is set (runbook: "test button").
    "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
    "AIRFLOW__API__WORKERS": "1",
}
#: Seed of the sandbox service (compose: ``--seed``), so the data is the same world everywhere.
SANDBOX_SEED = 42
#: ``airflow celery worker --concurrency`` in both places.
CELERY_WORKER_CONCURRENCY = 2

#: Final states of a DAG run / task instance.
RUN_FINAL = {"success", "failed"}
TI_FINAL = {"success", "failed", "skipped", "upstream_failed", "removed"}


class E2EError(AssertionError):
    """A check of the end-to-end stage failed; the message carries the evidence."""


def tail(path: Path, lines: int = 60, width: int = 400) -> str:
    """The last ``lines`` lines of a text file (each cut to ``width``), or a note if missing."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"<{path} does not exist>"
    return "\n".join(_cut(line, width) for line in text.splitlines()[-lines:])


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[:width] + " [...]"


def task_log_excerpt(path: Path, lines: int = 12, width: int = 600) -> str:
    """The error lines of a task log (exception type and message), then its last lines."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return f"<{path} does not exist>"
    errors = [_error_summary(line, width) for line in text if _is_error(line)]
    out = errors[:8]
    out.append("...")
    out.extend(_cut(line, width) for line in text[-lines:])
    return "\n".join(out)


def _is_error(line: str) -> bool:
    compact = line.replace(" ", "")
    return '"level":"error"' in compact or "[error" in line or line.startswith("Traceback")


def _error_summary(line: str, width: int) -> str:
    # Task logs are JSON lines; pull out the exception type and message when present.
    try:
        record = json.loads(line)
    except ValueError:
        return _cut(line, width)
    details = record.get("error_detail") or []
    if details:
        d = details[0]
        return _cut(f"{record.get('event', '')}: {d.get('exc_type')}: {d.get('exc_value')}", width)
    return _cut(str(record.get("event", line)), width)


def wait_for(
    predicate: Callable[[], Any],
    *,
    timeout: float,
    interval: float = 1.0,
    what: str,
    on_timeout: Callable[[], str] | None = None,
) -> Any:
    """Poll ``predicate`` until it returns a truthy value; raise :class:`E2EError` on timeout."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (requests.RequestException, OSError) as exc:  # not up yet
            last_exc = exc
            value = None
        if value:
            return value
        time.sleep(interval)
    detail = on_timeout() if on_timeout else ""
    raise E2EError(f"timed out after {timeout:.0f}s waiting for {what} ({last_exc})\n{detail}")


# --------------------------------------------------------------------------- PostgreSQL


def _psql(sql: str, *, database: str = "postgres") -> None:
    subprocess.run(
        [
            "psql",
            "-h",
            PG_HOST,
            "-p",
            str(PG_PORT),
            "-U",
            PG_USER,
            "-d",
            database,
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ],
        check=True,
        capture_output=True,
        text=True,
    )


@dataclass
class MetadataDatabase:
    """A uniquely named PostgreSQL database for one e2e stage, dropped by :meth:`drop`.

    :param name: database name (``afn_e2e_<hex>``).
    """

    name: str = field(default_factory=lambda: f"afn_e2e_{uuid.uuid4().hex[:12]}")

    @property
    def sqlalchemy_url(self) -> str:
        return f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{self.name}"

    @property
    def celery_result_backend(self) -> str:
        return f"db+postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{self.name}"

    def create(self, template: str | None = None) -> None:
        """Create the database, empty or as a copy of a (migrated) ``template`` database."""
        suffix = f' TEMPLATE "{template}"' if template else ""
        _psql(f'CREATE DATABASE "{self.name}"{suffix}')

    def drop(self) -> None:
        # FORCE (PostgreSQL 13+) ends sessions a killed process may have left behind.
        _psql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def postgres_available() -> bool:
    return (
        subprocess.run(
            ["pg_isready", "-h", PG_HOST, "-p", str(PG_PORT)], capture_output=True, check=False
        ).returncode
        == 0
    )


def redis_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


# --------------------------------------------------------------------------- REST client


class AirflowApi:
    """A small client of the public REST API (``/api/v2``) with a simple-auth-manager token.

    :param base_url: ``http://127.0.0.1:PORT``.
    :param username: simple auth manager user.
    :param password: its password.
    """

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._username = username
        self._password = password
        self._session = requests.Session()

    def login(self) -> None:
        """``POST /auth/token`` as a user would (the token the UI and scripts use)."""
        resp = self._session.post(
            f"{self.base_url}/auth/token",
            json={"username": self._username, "password": self._password},
            timeout=30,
        )
        resp.raise_for_status()
        self._session.headers["Authorization"] = f"Bearer {resp.json()['access_token']}"

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 30)
        resp = self._session.request(method, f"{self.base_url}/api/v2{path}", **kwargs)
        if resp.status_code == 401:  # token expired: log in again once
            self.login()
            resp = self._session.request(method, f"{self.base_url}/api/v2{path}", **kwargs)
        return resp

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = self.request(method, path, **kwargs)
        if resp.status_code >= 400:
            raise E2EError(f"{method} /api/v2{path} -> {resp.status_code}: {resp.text[:2000]}")
        return resp.json() if resp.content else None

    # DAGs -------------------------------------------------------------------------------
    def dag(self, dag_id: str) -> dict | None:
        resp = self.request("GET", f"/dags/{dag_id}")
        return resp.json() if resp.status_code == 200 else None

    def import_errors(self) -> list[dict]:
        return self.call("GET", "/importErrors")["import_errors"]

    def unpause(self, dag_id: str) -> None:
        self.call("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def pause(self, dag_id: str) -> None:
        self.call("PATCH", f"/dags/{dag_id}", json={"is_paused": True})

    # Runs -------------------------------------------------------------------------------
    def trigger(
        self,
        dag_id: str,
        *,
        logical_date: str | None = None,
        conf: Mapping[str, Any] | None = None,
        run_id: str | None = None,
    ) -> str:
        body: dict[str, Any] = {"logical_date": logical_date, "conf": dict(conf or {})}
        if run_id:
            body["dag_run_id"] = run_id
        return self.call("POST", f"/dags/{dag_id}/dagRuns", json=body)["dag_run_id"]

    def dag_run(self, dag_id: str, run_id: str) -> dict:
        return self.call("GET", f"/dags/{dag_id}/dagRuns/{run_id}")

    def dag_runs(self, dag_id: str) -> list[dict]:
        return self.call("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self.call(
            "GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 100}
        )["task_instances"]

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        resp = self.request(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value",
            params={"map_index": map_index, "deserialize": True},
        )
        return resp.json().get("value") if resp.status_code == 200 else None

    def clear_task(self, dag_id: str, run_id: str, task_ids: Iterable[str]) -> list[dict]:
        """Clear failed task instances of a run, as the UI's "Clear" button does."""
        body = {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": list(task_ids),
            "only_failed": True,
            "reset_dag_runs": True,
            "include_downstream": True,
        }
        return self.call("POST", f"/dags/{dag_id}/clearTaskInstances", json=body)["task_instances"]

    def backfills(self, dag_id: str) -> list[dict]:
        return self.call("GET", "/backfills", params={"dag_id": dag_id})["backfills"]


# --------------------------------------------------------------------------- Processes


@dataclass
class ManagedProcess:
    """One Airflow component: its command, its process (own session) and its log file."""

    name: str
    argv: list[str]
    log_path: Path
    proc: subprocess.Popen | None = None

    def start(self, env: Mapping[str, str], cwd: Path) -> None:
        log = self.log_path.open("ab")
        try:
            # Own session = own process group: the group is signalled as a whole in stop().
            self.proc = subprocess.Popen(
                self.argv,
                env=dict(env),
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> list[psutil.Process]:
        """SIGTERM the process group; return the descendants seen before (to reap later)."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        try:
            descendants = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            descendants = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        return descendants

    def reap(self, descendants: list[psutil.Process], deadline: float) -> None:
        """Wait for the process until ``deadline``, then SIGKILL its group and stragglers."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        # Children that left the group (setsid) are still ours: end them by PID.
        _, alive = psutil.wait_procs(descendants, timeout=max(0.1, deadline - time.monotonic()))
        for child in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        psutil.wait_procs(alive, timeout=5)
        # The group may still hold processes forked after the snapshot (task runners).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self, timeout: float = 20.0) -> None:
        self.reap(self.terminate(), time.monotonic() + timeout)


@dataclass
class ClusterSettings:
    """What differs between two deployments of the stage.

    :param executor: ``LocalExecutor`` or ``CeleryExecutor``.
    :param dags_folder: folder the dag-processor parses.
    :param extra_env: connections, data base, include dir...
    :param celery_workers: ``airflow celery worker`` processes (CeleryExecutor), each with its
        own ``--celery-hostname``, as ``docker compose up --scale airflow-worker=N`` runs them.
    :param task_policy: extra lines of the cluster's ``task_policy(task)`` body (indented by
        the harness), e.g. the pool a deployment gives its reporting tasks.
    :param narrow_worker: ``(concurrency, queue)``: the last Celery worker runs this many tasks
        at once (instead of ``[celery] worker_concurrency``) and also takes the tasks of
        ``queue``, so a test can pin tasks to one worker slot whose every use is in its log.
    """

    executor: str
    dags_folder: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    celery_workers: int = 1
    task_policy: tuple[str, ...] = ()
    narrow_worker: tuple[int, str] | None = None


class AirflowCluster:
    """api-server, scheduler, dag-processor, triggerer (+ Celery worker) on one metadata DB.

    :param workdir: folder for AIRFLOW_HOME, logs and process logs.
    :param database: the migrated metadata database.
    :param settings: executor, dags folder, extra environment.
    """

    def __init__(self, workdir: Path, database: MetadataDatabase, settings: ClusterSettings):
        self.workdir = workdir
        self.home = workdir / "airflow_home"
        self.process_logs = workdir / "process_logs"
        self.home.mkdir(parents=True, exist_ok=True)
        self.process_logs.mkdir(parents=True, exist_ok=True)
        self.database = database
        self.settings = settings
        self.api_port = free_port()
        self.password = secrets.token_urlsafe(16)
        self.processes: list[ManagedProcess] = []
        self.api = AirflowApi(f"http://127.0.0.1:{self.api_port}", "admin", self.password)
        self.env = self._environment()
        self._write_password_file()
        self._write_local_settings()

    # Environment ------------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        # Start from the caller's environment minus every Airflow setting of the unit tests.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AIRFLOW", "AFFILIATE_NETWORK_", "_AIRFLOW"))
        }
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        env.update(SHARED_AIRFLOW_ENV)
        queue = f"afn_e2e_{uuid.uuid4().hex[:8]}"
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.settings.dags_folder),
                "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_FOLDER),
                "AIRFLOW__CORE__EXECUTOR": self.settings.executor,
                "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
                # The stages check what the on-hold review writes and what people answer, and
                # what the offer sync sends: an armed deployment (a new one only plans:
                # docs/onhold-review.md, docs/offer-sync.md).
                "AFFILIATE_ONHOLD_ARMED": "true",
                "AFFILIATE_OFFER_SYNC_ARMED": "true",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(
                    self.home / "passwords.json"
                ),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": (
                    f"http://127.0.0.1:{self.api_port}/execution/"
                ),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database.sqlalchemy_url,
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.api_port),
                # One Fernet key for every component. Unset, each process that finds no
                # airflow.cfg writes one with a key of its own: a Variable set by the CLI is then
                # unreadable to the api-server (tasks got the encrypted token as the value).
                "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
                # Every component signs/validates task tokens with the same secret.
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(64),
                "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
                # Log servers on free ports: other Airflow instances may hold the defaults.
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
                # The scheduler's health endpoint (compose healthcheck), on a free port.
                "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "True",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(free_port()),
                "AIRFLOW__CELERY__BROKER_URL": REDIS_URL,
                "AIRFLOW__CELERY__RESULT_BACKEND": self.database.celery_result_backend,
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(CELERY_WORKER_CONCURRENCY),
                # A queue of our own: other runs sharing this Redis never take our tasks.
                "AIRFLOW__OPERATORS__DEFAULT_QUEUE": queue,
                # The demo's include folder: the sandbox's desired offer state over the
                # shipped template (include/offer_state.yaml refuses its placeholders).
                "AFFILIATE_NETWORK_INCLUDE_DIR": str(
                    demo_include(PROJECT_ROOT / "include", self.home / "include")
                ),
            }
        )
        env.update(self.settings.extra_env)
        return env

    def _write_password_file(self) -> None:
        # The simple auth manager reads passwords from this file (it generates one if missing).
        path = Path(self.env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
        path.write_text(json.dumps({"admin": self.password}) + "\n")

    def _write_local_settings(self) -> None:
        # A cluster policy of the e2e deployment only: no task-level retries, so a forced
        # failure fails now instead of after 2-30 minutes of backoff (the hook still retries
        # HTTP errors). ``$AIRFLOW_HOME/config`` is on Airflow's sys.path.
        config = self.home / "config"
        config.mkdir(exist_ok=True)
        body = ["task.retries = 0", *self.settings.task_policy]
        (config / "airflow_local_settings.py").write_text(
            "def task_policy(task):\n" + "".join(f"    {line}\n" for line in body)
        )

    # CLI ----------------------------------------------------------------------------------
    def airflow(self, *args: str, timeout: float = 300, check: bool = True) -> str:
        """Run ``airflow ARGS`` with the cluster's environment; return stdout+stderr."""
        proc = subprocess.run(
            [AIRFLOW_BIN, *args],
            env=self.env,
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        out = proc.stdout + proc.stderr
        if check and proc.returncode != 0:
            raise E2EError(f"airflow {' '.join(args)} exited {proc.returncode}:\n{out[-4000:]}")
        return out

    def migrate(self) -> None:
        self.airflow("db", "migrate", timeout=600)

    # Start / stop -------------------------------------------------------------------------
    def _spawn(self, name: str, *args: str, env: Mapping[str, str] | None = None) -> ManagedProcess:
        proc = ManagedProcess(name, [AIRFLOW_BIN, *args], self.process_logs / f"{name}.log")
        self.processes.append(proc)
        proc.start({**self.env, **(env or {})}, self.workdir)
        return proc

    @property
    def celery_worker_names(self) -> list[str]:
        """Process (and log file) names of the Celery workers: ``celery-worker[-N]``."""
        if self.settings.executor != "CeleryExecutor":
            return []
        n = self.settings.celery_workers
        return ["celery-worker"] if n == 1 else [f"celery-worker-{i}" for i in range(1, n + 1)]

    def start(self, while_starting: Callable[[], None] | None = None) -> None:
        """Start every component; run ``while_starting`` (CLI set-up) meanwhile; wait for health.

        :param while_starting: commands to run while the components start (they only need the
            metadata DB, and nothing is triggered before the api-server is healthy).
        """
        self._spawn("api-server", "api-server", "--host", "127.0.0.1", "--port", str(self.api_port))
        self._spawn("scheduler", "scheduler")
        self._spawn("dag-processor", "dag-processor")
        self._spawn("triggerer", "triggerer")
        names = self.celery_worker_names
        for name in names:
            queues = self.env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"]
            # Concurrency comes from AIRFLOW__CELERY__WORKER_CONCURRENCY, as in compose, except
            # on the narrow worker.
            narrow: list[str] = []
            if self.settings.narrow_worker is not None and name == names[-1]:
                concurrency, queue = self.settings.narrow_worker
                queues = f"{queues},{queue}"
                narrow = ["--concurrency", str(concurrency)]
            self._spawn(
                name,
                "celery",
                "worker",
                *narrow,
                "--queues",
                queues,
                # Several workers on one machine: each its own Celery hostname and PID file.
                "--celery-hostname",
                f"afn-e2e-{name}-{uuid.uuid4().hex[:6]}@%h",
                "--pid",
                str(self.home / f"{name}.pid"),
                "--without-gossip",
                "--without-mingle",
                # ... and its own log server port (each worker serves its task logs).
                env={"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())},
            )
        if while_starting is not None:
            while_starting()
        wait_for(
            self._api_healthy,
            timeout=120,
            interval=1,
            what="api-server health",
            on_timeout=self.diagnostics,
        )
        self.api.login()

    def _api_healthy(self) -> bool:
        self.check_alive()
        resp = requests.get(f"{self.api.base_url}/api/v2/monitor/health", timeout=5)
        return resp.status_code == 200

    def check_alive(self) -> None:
        """Raise with the process log when a component died."""
        for proc in self.processes:
            if not proc.alive():
                code = proc.proc.returncode if proc.proc else "?"
                raise E2EError(
                    f"{proc.name} (pid {proc.pid}) exited with {code}"
                    f"\n--- {proc.log_path} ---\n{tail(proc.log_path, 80)}"
                )

    def stop(self, timeout: float = 20.0) -> None:
        """Stop every process this cluster started, by PID: SIGTERM all, wait, SIGKILL the rest."""
        errors: list[str] = []
        pending = []
        for proc in reversed(self.processes):  # workers first, the api-server last
            try:
                pending.append((proc, proc.terminate()))
            except Exception as exc:  # keep stopping the others
                errors.append(f"{proc.name}: {exc!r}")
        deadline = time.monotonic() + timeout
        for proc, descendants in pending:
            try:
                proc.reap(descendants, deadline)
            except Exception as exc:
                errors.append(f"{proc.name}: {exc!r}")
        self.processes.clear()
        if errors:
            raise E2EError("could not stop: " + "; ".join(errors))

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid]

    # Waiting ------------------------------------------------------------------------------
    def wait_dags_parsed(self, dag_ids: Iterable[str], timeout: float = 180) -> None:
        missing = set(dag_ids)

        def _all_parsed() -> bool:
            self.check_alive()
            errors = self.api.import_errors()
            if errors:
                raise E2EError(
                    "DAG import errors:\n"
                    + "\n".join(f"{e['filename']}: {e['stack_trace']}" for e in errors)
                )
            for dag_id in list(missing):
                if self.api.dag(dag_id) is not None:
                    missing.discard(dag_id)
            return not missing

        wait_for(
            _all_parsed,
            timeout=timeout,
            interval=2,
            what=f"DAGs parsed: {sorted(missing)}",
            on_timeout=lambda: self.diagnostics(components=("dag-processor",)),
        )

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 300) -> dict:
        """Wait for a DAG run to reach a final state; return it (does not assert success)."""

        def _done() -> dict | None:
            self.check_alive()
            run = self.api.dag_run(dag_id, run_id)
            return run if run["state"] in RUN_FINAL else None

        return wait_for(
            _done,
            timeout=timeout,
            interval=2,
            what=f"run {dag_id}/{run_id}",
            on_timeout=lambda: self.diagnostics(dag_id, run_id),
        )

    def wait_pause_taken(self, ti: dict, timeout: float = 120) -> None:
        """Wait until the scheduler has taken the executor's event of the worker that paused
        ``ti`` (a task instance of the REST API awaiting input), before a test answers it.

        A person answers a review request minutes after it appears; a test answers in a second.
        Answered that fast, the task is re-queued before the scheduler drains the paused
        worker's "success" event, and Airflow 3.3 then fails the resumed task ("finished with
        state success, but the task instance's state attribute is queued":
        apache/airflow#72716, #71580). What the test checks is the answer, not that race.
        """
        key = (
            f"TaskInstanceKey(dag_id='{ti['dag_id']}', task_id='{ti['task_id']}', "
            f"run_id='{ti['dag_run_id']}', try_number={ti['try_number']}, "
            f"map_index={ti['map_index']})"
        )
        needle = f"Received executor event with state success for task instance {key}"
        log = self.process_logs / "scheduler.log"

        def _taken() -> bool:
            self.check_alive()
            return needle in log.read_text(encoding="utf-8", errors="replace")

        wait_for(_taken, timeout=timeout, interval=0.5, what=f"the scheduler to take {key}'s pause")

    def wait_task_state(
        self, dag_id: str, run_id: str, task_id: str, states: set[str], timeout: float = 300
    ) -> dict:
        def _reached() -> dict | None:
            self.check_alive()
            for ti in self.api.task_instances(dag_id, run_id):
                if ti["task_id"] == task_id and ti["state"] in states:
                    return ti
            return None

        return wait_for(
            _reached,
            timeout=timeout,
            interval=2,
            what=f"{dag_id}/{run_id}/{task_id} in {states}",
            on_timeout=lambda: self.diagnostics(dag_id, run_id),
        )

    def assert_run_succeeded(self, dag_id: str, run_id: str, timeout: float = 300) -> dict:
        run = self.wait_run(dag_id, run_id, timeout)
        if run["state"] != "success":
            raise E2EError(
                f"{dag_id} run {run_id} ended {run['state']}\n" + self.diagnostics(dag_id, run_id)
            )
        return run

    # Diagnostics --------------------------------------------------------------------------
    def task_log_paths(self, dag_id: str, run_id: str | None = None) -> list[Path]:
        root = self.home / "logs" / f"dag_id={dag_id}"
        pattern = f"run_id={run_id}/**/*.log" if run_id else "**/*.log"
        return sorted(root.glob(pattern))

    def diagnostics(
        self,
        dag_id: str | None = None,
        run_id: str | None = None,
        components: Iterable[str] = ("scheduler", "celery-worker", "dag-processor"),
    ) -> str:
        """Task states, the failed tasks' logs and the tails of the component logs."""
        parts: list[str] = []
        if dag_id and run_id:
            try:
                tis = self.api.task_instances(dag_id, run_id)
                parts.append(
                    "task states: "
                    + ", ".join(f"{t['task_id']}[{t['map_index']}]={t['state']}" for t in tis)
                )
                bad = [t["task_id"] for t in tis if t["state"] not in ("success", "skipped")]
            except Exception as exc:
                parts.append(f"<task instances unavailable: {exc!r}>")
                bad = []
            for path in self.task_log_paths(dag_id, run_id):
                if not bad or any(f"task_id={b}" in str(path) for b in bad):
                    parts.append(
                        f"--- task log {path.relative_to(self.home)} ---\n{task_log_excerpt(path)}"
                    )
        wanted = tuple(components)
        for proc in self.processes:
            # "celery-worker" stands for every worker (celery-worker-1, -2, ...).
            if proc.name in wanted or proc.name.rsplit("-", 1)[0] in wanted:
                parts.append(f"--- {proc.name} log ---\n{tail(proc.log_path, 15)}")
        return "\n".join(parts)


# --------------------------------------------------------------------------- S3 (moto)


@dataclass
class MotoS3:
    """moto's S3 server on a free loopback port, with one bucket; stopped by PID.

    :param workdir: folder for its log.
    :param bucket: bucket created at start.
    """

    workdir: Path
    bucket: str = "affiliate-reports"
    port: int = field(default_factory=free_port)
    process: ManagedProcess | None = None
    access_key: str = "testing"  # moto accepts any credentials
    secret_key: str = "testing-secret"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = ManagedProcess(
            "moto",
            [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
            self.workdir / "moto.log",
        )
        self.process.start(os.environ, self.workdir)
        wait_for(
            lambda: requests.get(f"{self.endpoint}/moto-api/", timeout=2).ok,
            timeout=30,
            interval=0.2,
            what="moto server",
            on_timeout=lambda: tail(self.workdir / "moto.log"),
        )
        self.client().create_bucket(Bucket=self.bucket)

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
        )

    def connection_json(self) -> str:
        """The Airflow ``aws`` connection reaching this server (runbook: S3 outputs)."""
        return json.dumps(
            {
                "conn_type": "aws",
                "login": self.access_key,
                "password": self.secret_key,
                "extra": {"endpoint_url": self.endpoint, "region_name": "us-east-1"},
            }
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def wait_all_runs(
    cluster: AirflowCluster,
    dag_id: str,
    timeout: float = 400,
    *,
    interval: float = 2,
    on_poll: Callable[[], object] | None = None,
) -> list[dict]:
    """Wait until every run of ``dag_id`` is final; fail with diagnostics if one failed.

    :param on_poll: called on every poll before the runs are read (e.g. to answer reviews).
    """

    def _all_final() -> list[dict] | None:
        cluster.check_alive()
        if on_poll is not None:
            on_poll()
        runs = cluster.api.dag_runs(dag_id)
        return runs if runs and all(r["state"] in ("success", "failed") for r in runs) else None

    runs = wait_for(
        _all_final,
        timeout=timeout,
        interval=interval,
        what=f"all runs of {dag_id}",
        on_timeout=lambda: "\n".join(
            cluster.diagnostics(dag_id, r["dag_run_id"])
            for r in cluster.api.dag_runs(dag_id)
            if r["state"] not in ("success", "failed")
        ),
    )
    failed = [r for r in runs if r["state"] != "success"]
    if failed:
        raise E2EError(
            "\n".join(
                f"{dag_id} run {r['dag_run_id']} ended {r['state']}\n"
                + cluster.diagnostics(dag_id, r["dag_run_id"])
                for r in failed
            )
        )
    return runs
