"""The provider as a user installs it: a wheel in a fresh venv with the pinned Airflow (15.6).

The wheel is built from this checkout, installed into a new virtualenv with exactly the
versions ``uv.lock`` pins (offline from uv's cache when it holds them), and used from outside the
checkout: Airflow lists the provider and its connection type, and ``airflow dags test`` runs the
daily report DAG from a copied ``dags/`` with ``include/`` beside it (no environment variable
points at it), against the sandbox, landing its data beside the DAGs folder. Every module of the
provider imports there, with no sandbox installed.

The repository builds two distributions (a uv workspace): the provider, and the sandbox (the
demo runner, ``demo/``, is in neither). Both wheels are built (``uv build --package``) and read
as zip files: the provider's holds no file of the sandbox, none of its modules imports it, and
it neither requires the sandbox distribution nor installs its console scripts; the sandbox's
holds the sandbox and its scripts and requires nothing of the provider (its modules import
nothing of it).
"""

from __future__ import annotations

import ast
import datetime as dt
import email
import json
import os
import secrets
import shutil
import subprocess
import sys
import zipfile
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
    code = "import affiliate_network.settings.paths as p; print(p.__file__, p.include_dir())"
    python = str(installed["venv"] / "bin" / "python")
    done = run([python, "-c", code], env=installed["env"], cwd=installed["project"])
    module, include = done.stdout.split()
    assert Path(module).is_relative_to(installed["venv"])
    # Installed as a wheel, include/ is found beside the DAGs folder.
    assert Path(include) == installed["project"] / "include"


def test_every_provider_module_imports_without_the_sandbox(installed) -> None:
    """The wheel's venv has no sandbox: the provider needs none at run time (``__main__``
    modules run a CLI when imported, so they are left out)."""
    code = (
        "import importlib, importlib.util, pkgutil, affiliate_network as p\n"
        "assert importlib.util.find_spec('affiliate_network_sandbox') is None\n"
        "names = [m.name for m in pkgutil.walk_packages(p.__path__, 'affiliate_network.')\n"
        "         if not m.name.endswith('.__main__')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(len(names))"
    )
    python = str(installed["venv"] / "bin" / "python")
    done = run([python, "-c", code], env=installed["env"], cwd=installed["project"])
    assert int(done.stdout.split()[-1]) > 50


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


# --- Two distributions from one repository -------------------------------------------------------

PROVIDER = DIST
SANDBOX = "affiliate-network-sandbox"
SANDBOX_PKG = "affiliate_network_sandbox"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, zipfile.ZipFile]:
    out = tmp_path_factory.mktemp("dist")
    found: dict[str, zipfile.ZipFile] = {}
    for dist in (PROVIDER, SANDBOX):
        folder = out / dist
        run([*uv(), "build", "--package", dist, "--wheel", "--out-dir", str(folder)],
            cwd=PROJECT_ROOT)  # fmt: skip
        (wheel,) = folder.glob("*.whl")
        found[dist] = zipfile.ZipFile(wheel)
    yield found
    for wheel in found.values():
        wheel.close()


def _top_imports(wheel: zipfile.ZipFile, name: str) -> set[str]:
    """The top-level packages ``name`` (a .py file of the wheel) imports, lazy imports too."""
    tree = ast.parse(wheel.read(name), filename=name)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(wheel.read(name))


def _entry_points(wheel: zipfile.ZipFile) -> str:
    names = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    return wheel.read(names[0]).decode() if names else ""


def _requires(wheel: zipfile.ZipFile) -> set[str]:
    requires = _metadata(wheel).get_all("Requires-Dist") or []
    return {r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip()
            for r in requires}  # fmt: skip


def test_the_provider_wheel_holds_no_sandbox_file(wheels) -> None:
    names = wheels[PROVIDER].namelist()
    modules = [n for n in names if n.endswith(".py")]
    assert "affiliate_network/hooks/affiliate_network.py" in modules
    wrong = [n for n in names if SANDBOX_PKG in n or "/sandbox/" in n or "/demo" in n]
    assert wrong == []
    assert all(n.startswith(("affiliate_network/", "airflow_provider_")) for n in names), names


def test_the_provider_modules_import_nothing_of_the_sandbox(wheels) -> None:
    wheel = wheels[PROVIDER]
    modules = [n for n in wheel.namelist() if n.endswith(".py")]
    wrong = [name for name in modules if SANDBOX_PKG in _top_imports(wheel, name)]
    assert wrong == []
    assert SANDBOX not in _requires(wheel)
    scripts = _entry_points(wheel)
    assert "affiliate-network-rules" in scripts
    assert "affiliate-network-sandbox" not in scripts
    assert "affiliate-network-demo" not in scripts


def test_the_sandbox_wheel_holds_the_sandbox_and_requires_nothing_of_the_provider(wheels) -> None:
    wheel = wheels[SANDBOX]
    names = set(wheel.namelist())
    assert {f"{SANDBOX_PKG}/__main__.py", f"{SANDBOX_PKG}/app.py", f"{SANDBOX_PKG}/timezones.py",
            f"{SANDBOX_PKG}/testing.py", f"{SANDBOX_PKG}/world/reporting.py"} <= names  # fmt: skip
    assert not [n for n in names if n.startswith("affiliate_network/")]
    assert PROVIDER not in _requires(wheel)
    assert {"orjson", "uvicorn", "requests"} <= _requires(wheel)
    scripts = _entry_points(wheel)
    assert "affiliate-network-sandbox = affiliate_network_sandbox.__main__:main" in scripts
    # The demo runner imports the provider: it is the repository's (demo/), in no wheel.
    assert "demo" not in scripts
    assert not [n for n in names if "demo" in n]
    sandbox_modules = [n for n in names if n.endswith(".py")]
    wrong = [
        name
        for name in sandbox_modules
        if _top_imports(wheel, name) & {"affiliate_network", "airflow"}
    ]
    assert wrong == []


def test_airflow_plugin_loader_imports_no_file_of_plugins() -> None:
    """plugins/ is Airflow's plugins folder in the tests and the demo: its one AirflowPlugin is
    the network page's registration module; the loader would run every other file (the
    sandbox's ``__main__.py`` too) as a top-level module. ``.airflowignore`` keeps both packages
    out of its walk."""
    from airflow._shared.module_loading import find_path_from_directory

    plugins = PROJECT_ROOT / "plugins"
    assert (plugins / SANDBOX_PKG / SANDBOX_PKG / "__main__.py").is_file()
    walked = list(find_path_from_directory(str(plugins), ".airflowignore", "glob"))
    assert walked == [str(plugins / "affiliate_network_ui_plugin.py")]
