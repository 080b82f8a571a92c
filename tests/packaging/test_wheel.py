"""The provider as a user installs it: a wheel in a fresh venv with the pinned Airflow (15.6).

The wheel is built from this checkout, installed into a new virtualenv with exactly the
versions ``uv.lock`` pins (offline from uv's cache when it holds them), and used from outside the
checkout: Airflow lists the provider and its connection type, and ``airflow dags test`` runs the
daily report DAG from a copied ``dags/`` with ``include/`` beside it (no environment variable
points at it), against the sandbox, landing its data beside the DAGs folder.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "affiliate_daily_reports"
DIST = "airflow-provider-affiliate-network"


def uv() -> list[str]:
    """The uv binary (``uv run`` exports it as ``$UV``), else ``python3 -m uv`` as in CI."""
    found = os.environ.get("UV") or shutil.which("uv")
    return [found] if found else ["python3", "-m", "uv"]


def run(cmd: list[str], *, env: dict[str, str] | None = None, timeout: int = 300, cwd=None):
    done = subprocess.run(
        cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{cmd[:4]}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def install(tmp: Path) -> Path:
    """Build the wheel and install it with the lock's versions into a fresh venv."""
    run([*uv(), "build", "--wheel", "--out-dir", str(tmp / "dist")], cwd=PROJECT_ROOT)
    (wheel,) = (tmp / "dist").glob("*.whl")
    requirements = tmp / "requirements.txt"
    run([*uv(), "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes",
         "--format", "requirements-txt", "--output-file", str(requirements)],
        cwd=PROJECT_ROOT)  # fmt: skip
    venv = tmp / "venv"
    run([*uv(), "venv", "--quiet", "--python", sys.executable, str(venv)])
    python = venv / "bin" / "python"
    cmd = [*uv(), "pip", "install", "--quiet", "--python", str(python), "-r",
           str(requirements), str(wheel)]  # fmt: skip
    offline = subprocess.run([*cmd, "--offline"], capture_output=True, text=True, check=False)
    if offline.returncode != 0:  # a cache without some pinned file: fetch it
        run(cmd)
    return venv


def clean_env(tmp: Path, venv: Path, project: Path) -> dict[str, str]:
    """A user's environment: nothing of this checkout or of the test session's Airflow."""
    return {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "LANG": "C.UTF-8",
        "AIRFLOW_HOME": str(tmp / "airflow_home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(project / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(64),
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    (tmp / "home").mkdir()
    venv = install(tmp)
    # The user's Airflow project: dags/ and include/ copied, no plugins/ and no package source.
    project = tmp / "project"
    shutil.copytree(PROJECT_ROOT / "dags", project / "dags",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copytree(PROJECT_ROOT / "include", project / "include")
    env = clean_env(tmp, venv, project)
    airflow = str(venv / "bin" / "airflow")
    run([airflow, "db", "migrate"], env=env)
    return {"venv": venv, "project": project, "env": env, "airflow": airflow}


def test_the_package_is_imported_from_the_wheel(installed) -> None:
    code = "import affiliate_network.paths as p; print(p.__file__, p.include_dir())"
    python = str(installed["venv"] / "bin" / "python")
    done = run([python, "-c", code], env=installed["env"], cwd=installed["project"])
    module, include = done.stdout.split()
    assert Path(module).is_relative_to(installed["venv"])
    # Installed as a wheel, include/ is found beside the DAGs folder.
    assert Path(include) == installed["project"] / "include"


def test_airflow_lists_the_provider(installed) -> None:
    done = run(
        [installed["airflow"], "providers", "list", "--output", "json"], env=installed["env"]
    )
    providers = {p["package_name"]: p for p in json.loads(done.stdout)}
    assert DIST in providers, sorted(providers)
    import affiliate_network

    assert providers[DIST]["version"] == affiliate_network.__version__


def test_airflow_registers_the_connection_type(installed) -> None:
    done = run(
        [installed["airflow"], "providers", "hooks", "--output", "json"], env=installed["env"]
    )
    hooks = {h["connection_type"]: h for h in json.loads(done.stdout)}
    assert hooks["affiliate_network"]["class"] == (
        "affiliate_network.hooks.affiliate_network.AffiliateNetworkHook"
    )
    assert hooks["affiliate_network"]["package_name"] == DIST


def test_dags_test_of_the_daily_report_lands_beside_the_dags(installed, sandbox) -> None:
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    day = (last - dt.timedelta(days=1)).isoformat()
    keys = {
        "affiliate_network_default": ("network", sandbox.keys["network"]),
        "affiliate_network_affiliate_2001": ("affiliate", sandbox.keys["affiliate"]["2001"]),
        "affiliate_network_affiliate_2002": ("affiliate", sandbox.keys["affiliate"]["2002"]),
    }
    env = dict(installed["env"])
    for conn_id, (portal, key) in keys.items():
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "affiliate_network", "host": sandbox.base_url, "password": key,
             "extra": {"portal": portal}}
        )  # fmt: skip
    # A run at ``last`` 00:00 lands ``day`` (its data interval), plus one trailing day.
    done = subprocess.run(
        [installed["airflow"], "dags", "test", DAG_ID, last.isoformat(),
         "--conf", json.dumps({"trailing_days": 1})],
        env=env, cwd=installed["project"], capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    for _, key in keys.values():
        assert key not in output, "an API key reached the task log"
    # No Variable or environment variable names a data base: data/ beside dags/ and include/.
    data = installed["project"] / "data"
    assert (data / "conversions" / f"date={day}" / "_manifest.json").is_file(), output[-3000:]
    for affiliate in ("2001", "2002"):
        partition = data / "affiliate_reports" / f"affiliate={affiliate}" / f"date={day}"
        assert (partition / "_manifest.json").is_file()
