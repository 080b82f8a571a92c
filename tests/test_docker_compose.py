"""docker-compose.yaml is valid and deploys what the end-to-end stage runs.

There is no Docker engine here or in CI: the file is validated with the PyPI ``docker-compose``
1.29 client's ``config`` command, which parses, interpolates and schema-checks a compose file
without an engine. It lives in its own virtual environment under ``.cache/compose-venv``
(pinned ``pyyaml`` below 6, which that client needs), created on first use and reused after.

Then the resolved configuration is compared with the e2e harness's settings
(``tests/e2e/harness.py``), so the compose file and the tested deployment cannot drift apart,
and the default sandbox connections of ``.env.example`` are checked against a real sandbox.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.harness import CELERY_WORKER_CONCURRENCY, SANDBOX_SEED, SHARED_AIRFLOW_ENV

PROJECT_ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yaml"
ENV_EXAMPLE = PROJECT_ROOT / ".env.example"
VENV = PROJECT_ROOT / ".cache" / "compose-venv"
PINS = ["docker-compose==1.29.2", "pyyaml==5.3.1"]
AIRFLOW_SERVICES = {
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-worker",
}
#: Signs that pip could not reach the package index (then the test is skipped, not failed).
_OFFLINE_MARKERS = (
    "Could not find a version that satisfies",
    "No matching distribution found",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectTimeoutError",
)


def _compose_bin() -> Path:
    return VENV / "bin" / "docker-compose"


@pytest.fixture(scope="session")
def compose() -> Path:
    """The docker-compose 1.29.2 client in its own cached venv (installed on first use)."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    # One builder at a time (another pytest session or worker may be building it now).
    with (VENV.parent / "compose-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _built_compose()


def _built_compose() -> Path:
    binary = _compose_bin()
    marker = VENV / "pins.json"
    if binary.exists() and marker.exists() and json.loads(marker.read_text()) == PINS:
        return binary
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    pip = subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", *PINS],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if pip.returncode != 0:
        output = pip.stdout + pip.stderr
        if any(m in output for m in _OFFLINE_MARKERS):
            pytest.skip(f"pip cannot reach the package index to install {PINS}: {output[-500:]}")
        pytest.fail(f"installing {PINS} failed:\n{output[-3000:]}", pytrace=False)
    marker.write_text(json.dumps(PINS))
    return binary


def _run_config(
    compose: Path, *extra: str, env_file: Path | None = ENV_EXAMPLE
) -> subprocess.CompletedProcess:
    args = [str(compose), "--project-directory", str(PROJECT_ROOT), "-f", str(COMPOSE_FILE)]
    if env_file is not None:
        args += ["--env-file", str(env_file)]
    # A clean environment: a developer's exported variables must not mask a missing default.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(
        [*args, "config", *extra], capture_output=True, text=True, env=env, check=False
    )


@pytest.fixture(scope="session")
def resolved(compose: Path) -> dict[str, Any]:
    """``docker-compose config`` output (interpolated with .env.example), parsed."""
    proc = _run_config(compose)
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)


def test_compose_file_is_valid(compose: Path) -> None:
    proc = _run_config(compose, "--quiet")
    assert proc.returncode == 0, proc.stderr


def test_compose_refuses_to_start_without_the_secrets_of_env(compose: Path, tmp_path: Path) -> None:
    """Secrets are never defaulted in the file: without a .env, config names what is missing."""
    empty = tmp_path / "empty.env"
    empty.write_text("")
    proc = _run_config(compose, "--quiet", env_file=empty)
    assert proc.returncode != 0
    assert "AIRFLOW__API_AUTH__JWT_SECRET" in proc.stderr


def test_official_services_and_sandbox_are_present(resolved: dict[str, Any]) -> None:
    services = set(resolved["services"])
    assert AIRFLOW_SERVICES | {"postgres", "redis", "sandbox"} <= services


def test_airflow_settings_equal_the_e2e_deployment(resolved: dict[str, Any]) -> None:
    for name in AIRFLOW_SERVICES:
        env = resolved["services"][name]["environment"]
        for key, value in SHARED_AIRFLOW_ENV.items():
            assert env.get(key) == value, f"{name}: {key}={env.get(key)!r}, e2e runs {value!r}"
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert env["AIRFLOW__CELERY__WORKER_CONCURRENCY"] == str(CELERY_WORKER_CONCURRENCY)
        # SQLAlchemy 2.1 maps postgresql:// to psycopg 3; the e2e names psycopg2 as well.
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
        assert env["AIRFLOW__CELERY__RESULT_BACKEND"].startswith("db+postgresql+psycopg2://")
        assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://")


def test_dags_plugins_include_are_mounted(resolved: dict[str, Any]) -> None:
    for name in AIRFLOW_SERVICES - {"airflow-init"}:
        targets = {
            (v["target"] if isinstance(v, dict) else v.split(":")[1])
            for v in resolved["services"][name]["volumes"]
        }
        assert {"/opt/airflow/dags", "/opt/airflow/plugins", "/opt/airflow/include"} <= targets


def test_sandbox_service_runs_the_e2e_seed_and_connections_point_to_it(
    resolved: dict[str, Any],
) -> None:
    command = resolved["services"]["sandbox"]["command"]
    assert command[command.index("--seed") + 1] == str(SANDBOX_SEED)
    port = command[command.index("--port") + 1]
    env = resolved["services"]["airflow-worker"]["environment"]
    network = json.loads(env["AIRFLOW_CONN_AFFILIATE_NETWORK_DEFAULT"])
    assert network["host"] == f"http://sandbox:{port}/v1"
    assert network["extra"]["portal"] == "network"


def test_the_sandbox_service_installs_the_sandbox_distribution_and_airflow_the_provider(
    resolved: dict[str, Any],
) -> None:
    """The provider's wheel holds no sandbox: the sandbox service installs its own distribution."""
    services = resolved["services"]
    sandbox_pip = services["sandbox"]["environment"]["_PIP_ADDITIONAL_REQUIREMENTS"]
    assert sandbox_pip == "-e /opt/airflow/project/plugins/affiliate_network_sandbox"
    assert (PROJECT_ROOT / "plugins" / "affiliate_network_sandbox" / "pyproject.toml").is_file()
    assert services["sandbox"]["command"][:3] == ["python", "-m", "affiliate_network_sandbox"]
    for name in AIRFLOW_SERVICES - {"airflow-init"}:
        pip = services[name]["environment"]["_PIP_ADDITIONAL_REQUIREMENTS"]
        assert pip == "-e /opt/airflow/project[celery]", name


def _env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value
    return values


def test_env_example_connections_hold_the_sandbox_keys_and_every_report_connection() -> None:
    """The default connections hold the keys of a sandbox started with the compose seed."""
    from affiliate_network_sandbox.testing import start_sandbox

    with start_sandbox(seed=SANDBOX_SEED) as sandbox:
        keys = sandbox.keys
    values = _env_example()
    network = json.loads(values["AIRFLOW_CONN_AFFILIATE_NETWORK_DEFAULT"])
    assert network["password"] == keys["network"]
    reports = yaml.safe_load((PROJECT_ROOT / "include" / "reports.yaml").read_text())
    for entry in reports["affiliate_reports"]["affiliates"]:
        conn = json.loads(values[f"AIRFLOW_CONN_{entry['conn_id'].upper()}"])
        assert conn["extra"]["portal"] == "affiliate"
        assert conn["password"] == keys["affiliate"][str(entry["affiliate_id"])]


def test_compose_file_holds_no_key(resolved: dict[str, Any]) -> None:
    """Keys come from .env only: the compose file itself names no sandbox or real key."""
    text = COMPOSE_FILE.read_text()
    for value in _env_example().values():
        if value.startswith("{"):
            assert json.loads(value)["password"] not in text
