"""``affiliate-network-demo``: run the project's DAGs end to end against the local sandbox.

Starts the sandbox on loopback, points the Airflow connections at it through ``AIRFLOW_CONN_*``
environment variables, migrates a SQLite metadata DB in a project-local ``AIRFLOW_HOME``
(``.airflow/``), runs each DAG with ``airflow dags test`` for a recent day and prints what
happened, read from each task's XCom summary. Nothing here touches a real network.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: DAGs in the order the demo runs them, with the run conf each gets.
DEMO_DAGS: list[tuple[str, dict[str, Any]]] = [
    ("affiliate_daily_reports", {}),
    ("affiliate_onhold_review", {"dry_run": False}),
    ("affiliate_offer_sync", {"dry_run": False}),
]
#: Nobody answers the human-review requests in a demo: they time out to "Keep on hold" after
#: this many minutes instead of the DAG's 50 (answer them yourself with ``--ui``).
DEMO_REVIEW_MINUTES = "1"
DEMO_SEED = 42


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
    }


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
            print(f"    {label}: {json.dumps(value, default=str)}")


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
    print(f"[demo] airflow standalone on http://127.0.0.1:{port} (login printed below and kept in")
    print(f"       {root / '.airflow'}/simple_auth_manager_passwords.json.generated); Ctrl-C stops")
    proc = subprocess.Popen([*airflow, "standalone"], start_new_session=True)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    parser.add_argument(
        "--date",
        default=(yesterday + dt.timedelta(days=1)).isoformat(),
        help="run date passed to `airflow dags test` (the daily report covers the day before; "
        "default: today, so yesterday's data)",
    )
    parser.add_argument("--dags", nargs="*", help="only these DAG ids")
    parser.add_argument(
        "--ui",
        action="store_true",
        help="instead of running the DAGs, start `airflow standalone` (UI on --ui-port) on the "
        "same setup, with the sandbox behind the connections; Ctrl-C stops everything",
    )
    parser.add_argument("--ui-port", type=int, default=8080)
    args = parser.parse_args(argv)

    root = _project_root()
    env = _airflow_env(root)
    os.environ.update(env)  # before airflow is imported in this process
    (root / ".airflow").mkdir(exist_ok=True)
    log_dir = root / ".airflow" / "demo-logs"
    log_dir.mkdir(exist_ok=True)

    from affiliate_network.demo_connections import sandbox_connections
    from affiliate_network.sandbox.testing import start_sandbox

    started = time.monotonic()
    print(f"[demo] project: {root}")
    with start_sandbox(seed=DEMO_SEED) as sandbox:
        print(f"[demo] sandbox: {sandbox.base_url} (seed {DEMO_SEED}, pid {sandbox.pid})")
        os.environ.update(sandbox_connections(sandbox, root / "include"))
        airflow = [sys.executable, "-m", "airflow"]
        print("[demo] migrating the metadata DB (SQLite in .airflow/) ...")
        subprocess.run([*airflow, "db", "migrate"], check=True, capture_output=True)
        if args.ui:
            return _standalone(airflow, args.ui_port, root)
        os.environ["AFFILIATE_ONHOLD_REVIEW_MINUTES"] = DEMO_REVIEW_MINUTES
        print(
            f"[demo] human-review requests are left unanswered: they keep their conversions on "
            f"hold after {DEMO_REVIEW_MINUTES} min (use --ui to answer them yourself)"
        )

        failures = 0
        for dag_id, conf in DEMO_DAGS:
            if args.dags and dag_id not in args.dags:
                continue
            log_path = log_dir / f"{dag_id}.log"
            print(
                f"[demo] {dag_id}: airflow dags test {dag_id} {args.date} -c '{json.dumps(conf)}'"
            )
            t0 = time.monotonic()
            with log_path.open("w") as log:
                proc = subprocess.run(
                    [*airflow, "dags", "test", dag_id, args.date, "-c", json.dumps(conf)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    check=False,
                )
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
