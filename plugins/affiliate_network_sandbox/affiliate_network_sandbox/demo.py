"""``affiliate-network-demo``: run the project's DAGs end to end against the local sandbox.

Starts the sandbox on loopback, migrates a SQLite metadata DB in a project-local
``AIRFLOW_HOME`` (``.airflow/``), stores the Airflow connections pointing at the sandbox in it,
runs each DAG with ``airflow dags test`` for a recent day and prints what happened, read from
each task's XCom summary. Nothing here touches a real network.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

#: DAGs in the order the demo runs them, with the run conf each gets.
DEMO_DAGS: list[tuple[str, dict[str, Any]]] = [
    ("affiliate_daily_reports", {}),
    ("affiliate_onhold_review", {"dry_run": False}),
    ("affiliate_offer_sync", {"dry_run": False}),
]
#: The demo answers human-review requests itself with this option (``--ui`` to answer yourself).
DEMO_REVIEW_ANSWER = "Keep on hold"
DEMO_SEED = 42


#: ``airflow pools set`` arguments: the pool of the reporting tasks, as big as the network's
#: documented cap on requests in flight to /networks/reporting/*.
REPORTING_POOL = (
    "affiliate_network_reporting",
    "10",
    "Requests in flight on the network reporting endpoints (the documented cap)",
)


def default_logical_date() -> str:
    """The demo's ``airflow dags test`` logical date: now, to the second.

    ``dags test`` makes the logical date the run's start date, so today's midnight made the UI
    show a 38 s run as lasting since midnight (issue 19). The daily report still lands
    yesterday: a manual data interval ends at the last midnight before the logical date.
    """
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def _project_root() -> Path:
    cwd = Path.cwd()
    if (cwd / "dags").is_dir() and (cwd / "include").is_dir():
        return cwd
    from affiliate_network.paths import PROJECT_ROOT

    return PROJECT_ROOT


def _airflow_env(root: Path) -> dict[str, str]:
    home = root / ".airflow"
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(root / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AFFILIATE_NETWORK_INCLUDE_DIR": str(root / "include"),
        "AFFILIATE_NETWORK_DATA_BASE": str(root / "data"),
        # The reporting tasks take slots of the pool the demo creates (REPORTING_POOL).
        "AFFILIATE_NETWORK_REPORTING_POOL": REPORTING_POOL[0],
        # The demo's review writes to its sandbox (a new deployment only plans).
        "AFFILIATE_ONHOLD_ARMED": "true",
        # Airflow's generated default is 16 bytes, below what its HS512 tokens want (PyJWT's
        # InsecureKeyLengthWarning); a fresh 64-byte secret per demo (nothing outlives it).
        "AIRFLOW__API_AUTH__JWT_SECRET": os.environ.get("AIRFLOW__API_AUTH__JWT_SECRET")
        or secrets.token_urlsafe(64),
    }


def _quiet_airflow_in_process() -> None:
    """Import Airflow in this process with WARNING logs: its API's access log would print a line
    per poll. The ``airflow dags test`` subprocesses keep the configured level."""
    previous = os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL")
    os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
    try:
        import airflow.settings  # noqa: F401  (configures logging once, at import)
    finally:
        if previous is None:
            del os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"]
        else:
            os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = previous


def _print_summaries(dag_id: str, run_id: str) -> None:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(XComModel)
            .filter(XComModel.dag_id == dag_id, XComModel.run_id == run_id)
            .filter(XComModel.key == "return_value")
            .order_by(XComModel.task_id, XComModel.map_index)
            .all()
        )
        for row in rows:
            value = row.value
            if isinstance(value, str | bytes):
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            label = row.task_id if row.map_index < 0 else f"{row.task_id}[{row.map_index}]"
            print(f"    {label}: {json.dumps(_abbreviated(value), default=str)}")


def _abbreviated(value: Any) -> Any:
    """Long lists (partitions, paths) shown by their length: the summary line stays readable."""
    if isinstance(value, dict):
        return {k: _abbreviated(v) for k, v in value.items()}
    if isinstance(value, list) and len(value) > 2:
        return f"[{len(value)} items]"
    return value


def _wait_answering_reviews(proc: subprocess.Popen[bytes], dag_id: str) -> None:
    """Wait for ``airflow dags test``; answer its human-review requests as a reviewer would.

    ``dags test`` waits for human-in-the-loop input without a triggerer, so nobody's answer
    would mean waiting forever. The answer goes through Airflow's REST API (in process, on the
    same metadata DB), exactly as the UI sends it.
    """
    client = None
    while proc.poll() is None:
        time.sleep(1)
        if dag_id != "affiliate_onhold_review":
            continue
        if client is None:
            os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
            # Airflow 3.3.2's DAG-file discovery asks pathspec 1.x for the deprecated
            # 'gitwildmatch' pattern when the API app reads the DAG folder: Airflow's to fix,
            # nothing a demo user can act on. Only that message is silenced, in this process.
            warnings.filterwarnings(
                "ignore", message=r"GitWildMatchPattern", category=DeprecationWarning
            )
            from airflow.api_fastapi.app import create_app
            from fastapi.testclient import TestClient

            client = TestClient(create_app("core"))
        pending = client.get(
            f"/api/v2/dags/{dag_id}/dagRuns/~/hitlDetails", params={"response_received": False}
        )
        for detail in pending.json().get("hitl_details", []) if pending.is_success else []:
            ti = detail["task_instance"]
            answer = client.patch(
                f"/api/v2/dags/{dag_id}/dagRuns/{ti['dag_run_id']}/taskInstances/"
                f"{ti['task_id']}/{ti['map_index']}/hitlDetails",
                json={"chosen_options": [DEMO_REVIEW_ANSWER], "params_input": {"keep_on_hold": ""}},
            )
            status = answer.status_code
            print(f"    review request '{detail['subject']}' -> {DEMO_REVIEW_ANSWER} ({status})")


def _latest_run_id(dag_id: str) -> str | None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        run = (
            session.query(DagRun).filter(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).first()
        )
        return run.run_id if run else None


def _standalone(airflow: list[str], port: int, root: Path) -> int:
    """Run ``airflow standalone`` in its own process session; SIGINT stops it and its children."""
    os.environ["AIRFLOW__CORE__PARALLELISM"] = "4"  # 2-core machines: the default spawns 32
    os.environ["AIRFLOW__API__PORT"] = str(port)
    os.environ["AIRFLOW__CORE__TEST_CONNECTION"] = "Enabled"
    # standalone starts its components as `airflow ...`: this environment's bin must come first.
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    print(f"[demo] airflow standalone on http://127.0.0.1:{port} (login printed below and kept in")
    print(f"       {root / '.airflow'}/simple_auth_manager_passwords.json.generated); Ctrl-C stops")
    os.environ["AIRFLOW__API__HOST"] = "127.0.0.1"  # a dev UI: loopback only

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C or SIGTERM (even where SIGINT was inherited as ignored, as in background jobs).
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    proc = subprocess.Popen([*airflow, "standalone"], start_new_session=True)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        print("[demo] stopping airflow standalone ...")
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        return 0
    finally:
        # Components standalone started live in its process group: none may outlive it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)


def _set_aside_previous_outputs(data: Path) -> None:
    """Each demo starts a fresh sandbox (a new world on a new port): the previous demo's sync
    ledger, on-hold state and partitions describe a network that no longer exists, and the
    ledger would (rightly) refuse the new one. They are kept one generation, in ``data.previous``.
    """
    if not data.exists() or not any(data.iterdir()):
        return
    previous = data.with_name(f"{data.name}.previous")
    if previous.exists():
        shutil.rmtree(previous)
    data.rename(previous)
    print(f"[demo] the previous demo's outputs are now in {previous}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--date",
        default=default_logical_date(),
        help="logical date passed to `airflow dags test` (the daily report covers the day "
        "before; default: now, so yesterday's data)",
    )
    parser.add_argument("--dags", nargs="*", help="only these DAG ids")
    parser.add_argument(
        "--ui",
        action="store_true",
        help="instead of running the DAGs, start `airflow standalone` (UI on --ui-port) on the "
        "same setup, with the sandbox behind the connections; Ctrl-C stops everything",
    )
    parser.add_argument("--ui-port", type=int, default=8080)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="the on-hold review and the offer sync only plan (dry_run): nothing is written to "
        "the sandbox and no human review is asked (the older-Airflow smoke stage uses it)",
    )
    args = parser.parse_args(argv)

    root = _project_root()
    env = _airflow_env(root)
    os.environ.update(env)  # before airflow is imported in this process
    (root / ".airflow").mkdir(exist_ok=True)
    log_dir = root / ".airflow" / "demo-logs"
    log_dir.mkdir(exist_ok=True)

    from affiliate_network_sandbox.demo_connections import (
        sandbox_connection_records,
        store_connections,
    )
    from affiliate_network_sandbox.testing import start_sandbox

    started = time.monotonic()
    print(f"[demo] project: {root}")
    _set_aside_previous_outputs(Path(env["AFFILIATE_NETWORK_DATA_BASE"]))
    with start_sandbox(seed=DEMO_SEED) as sandbox:
        print(f"[demo] sandbox: {sandbox.base_url} (seed {DEMO_SEED}, pid {sandbox.pid})")
        airflow = [sys.executable, "-m", "airflow"]
        print("[demo] migrating the metadata DB (SQLite in .airflow/) ...")
        subprocess.run([*airflow, "db", "migrate"], check=True, capture_output=True)
        # The pool reporting tasks take slots of (README "Sharing one network's quota").
        subprocess.run([*airflow, "pools", "set", *REPORTING_POOL], check=True, capture_output=True)
        _quiet_airflow_in_process()
        # In the metadata DB (replaced on every run: each demo's sandbox has new keys and a new
        # port), so Admin -> Connections lists them and Test works in the UI.
        stored = store_connections(sandbox_connection_records(sandbox, root / "include"))
        print(f"[demo] connections in the metadata DB: {', '.join(stored)}")
        if args.ui:
            return _standalone(airflow, args.ui_port, root)

        failures = 0
        for dag_id, demo_conf in DEMO_DAGS:
            conf = {**demo_conf, "dry_run": True} if args.dry_run and demo_conf else demo_conf
            if args.dags and dag_id not in args.dags:
                continue
            log_path = log_dir / f"{dag_id}.log"
            print(
                f"[demo] {dag_id}: airflow dags test {dag_id} {args.date} -c '{json.dumps(conf)}'"
            )
            t0 = time.monotonic()
            with log_path.open("w") as log:
                proc = subprocess.Popen(
                    [*airflow, "dags", "test", dag_id, args.date, "-c", json.dumps(conf)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
                _wait_answering_reviews(proc, dag_id)
            state = "success" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
            if "state=failed" in log_path.read_text():
                state = "FAILED (a task failed)"
            failures += state != "success"
            print(f"  -> {state} in {time.monotonic() - t0:.1f}s; log: {log_path}")
            run_id = _latest_run_id(dag_id)
            if run_id:
                _print_summaries(dag_id, run_id)

        writes = sandbox.request_counts()
        print(f"[demo] sandbox saw: {json.dumps(writes, sort_keys=True)}")
    print(f"[demo] outputs under {env['AFFILIATE_NETWORK_DATA_BASE']}")
    print(f"[demo] done in {time.monotonic() - started:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
