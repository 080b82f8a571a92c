"""The example DAG of one's own loads, and runs green against the sandbox (`airflow dags test`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from affiliate_network.partitions.manifest import list_partitions

EXAMPLE = Path(__file__).with_name("example_my_daily_conversions.py")
DAG_ID = "example_my_daily_conversions"


def test_the_example_dag_loads_with_its_two_tasks() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(EXAMPLE))
    assert bag.import_errors == {}
    dag = bag.dags[DAG_ID]
    assert set(dag.task_ids) == {"land_conversions", "conversions_per_offer"}
    assert dag.get_task("conversions_per_offer").upstream_task_ids == {"land_conversions"}


@pytest.mark.timeout(600)
def test_the_example_dag_runs_against_the_sandbox(airflow_db, sandbox, tmp_path) -> None:
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    day = last - dt.timedelta(days=1)
    env = os.environ.copy()
    env["AIRFLOW_CONN_AFFILIATE_NETWORK_DEFAULT"] = json.dumps(
        {
            "conn_type": "affiliate_network",
            "host": sandbox.base_url,
            "password": sandbox.keys["network"],
            "extra": {"portal": "network"},
        }
    )
    env["AFFILIATE_NETWORK_DATA_BASE"] = str(tmp_path / "data")
    # As a user would: the file copied into a DAGs folder of its own.
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(EXAMPLE, dags / EXAMPLE.name)
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    # A run at `last` 00:00 has the data interval [day, last): it lands `day`.
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "dags", "test", DAG_ID, f"{last}T00:00:00+00:00",
         "-f", str(dags / EXAMPLE.name)],
        env=env, capture_output=True, text=True, timeout=550, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    db = airflow_db / "airflow.db"
    with sqlite3.connect(db) as conn:
        states = dict(
            conn.execute(
                "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = "
                "(SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1)",
                (DAG_ID, DAG_ID),
            ).fetchall()
        )
    assert states == {"land_conversions": "success", "conversions_per_offer": "success"}
    landed = list_partitions(str(tmp_path / "data"), "my_conversions")
    assert list(landed) == [f"date={day}"], landed
    assert "conversions over" in done.stdout + done.stderr
