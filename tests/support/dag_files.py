"""Loading one DAG file the way the scheduler does, for the tests of that DAG."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: The project's ``dags/`` folder.
DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"


def load_dag(dag_file: Path, dag_id: str) -> Any:
    """The DAG ``dag_id`` parsed from ``dag_file`` by a DagBag; the file must import cleanly.

    :param dag_file: path of the DAG file.
    :param dag_id: id of the DAG it defines.
    """
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(dag_file))
    assert bag.import_errors == {}
    return bag.dags[dag_id]


def dags_test_command(dag_id: str, *args: str, conf: dict[str, Any] | None = None) -> list[str]:
    """The argv of ``airflow dags test`` for ``dag_id`` in this interpreter's environment.

    :param dag_id: the DAG to run.
    :param args: further positional arguments (the logical date).
    :param conf: the run's ``--conf``, sent as JSON.
    """
    command = [sys.executable, "-m", "airflow", "dags", "test", dag_id, *args]
    if conf is not None:
        command += ["--conf", json.dumps(conf)]
    return command
