"""Every DAG file parses, carries the metadata on-call relies on, and stays light to parse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
DAG_FILES = sorted(p for p in DAGS_DIR.glob("*.py") if not p.name.startswith("_"))
EXPECTED_DAG_IDS = {"affiliate_daily_reports", "affiliate_onhold_review", "affiliate_offer_sync"}


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_DIR))


def test_dag_files_import_without_errors(dagbag) -> None:
    assert dagbag.import_errors == {}


def test_every_project_dag_is_present(dagbag) -> None:
    missing = EXPECTED_DAG_IDS - set(dagbag.dag_ids)
    assert not missing


@pytest.mark.parametrize("dag_id", sorted(EXPECTED_DAG_IDS))
def test_dag_has_owner_tags_docs_and_retries(dagbag, dag_id: str) -> None:
    dag = dagbag.dags[dag_id]  # get_dag() would query the metadata DB
    assert dag.tags, "tags let the UI filter our DAGs"
    assert len(dag.doc_md or "") > 200, "doc_md tells on-call what the DAG does"
    assert dag.max_active_runs is not None
    from airflow.providers.standard.operators.hitl import HITLOperator

    for task in dag.tasks:
        assert task.owner not in ("", None, "airflow"), f"{task.task_id} has no real owner"
        # A human answers a HITL task once; retrying it would ask again.
        if not isinstance(task, HITLOperator):
            assert task.retries >= 1, f"{dag_id}.{task.task_id} has no retries"


@pytest.mark.parametrize("dag_id", sorted(EXPECTED_DAG_IDS))
def test_dag_params_declare_the_draft_07_dialect_and_still_refuse_bad_values(
    dagbag, dag_id: str
) -> None:
    """Airflow checks a scheduled DAG's params at every parse, each schema against its
    dialect's metaschema first: draft-07's costs a third of the default 2020-12 one
    (docs/benchmarks.md). The dialect must not loosen a param: a bad value is still refused."""
    from airflow.sdk.definitions.param import ParamValidationError
    from jsonschema import Draft7Validator
    from jsonschema.validators import validator_for

    params = dagbag.dags[dag_id].params
    assert params, dag_id
    for name in params:
        param = params.get_param(name)
        assert validator_for(param.schema) is Draft7Validator, f"{dag_id}.{name}"
        kind = str(param.schema.get("type"))
        bad = {"integer": "three", "boolean": "yes"}.get(kind, 12)
        with pytest.raises(ParamValidationError):
            param.resolve(bad)


@pytest.mark.parametrize("dag_file", DAG_FILES, ids=lambda p: p.name)
def test_dag_file_parse_imports_nothing_heavy(dag_file: Path) -> None:
    """The scheduler parses DAG files every few seconds: no data libraries, no sandbox, no I/O."""
    heavy = [
        "pyarrow",
        "fastapi",
        "uvicorn",
        "pandas",
        # Creating an Asset with a plain custom scheme loaded every provider's asset handlers
        # (the amazon provider's S3 hook, boto3): the x- scheme keeps them out.
        "boto3",
        "airflow.providers.amazon.aws.hooks.s3",
        "affiliate_network_sandbox",
        "affiliate_network.hooks.affiliate_network",
        "affiliate_network.reports.storage",
        "affiliate_network.partitions.write",
        "affiliate_network.rules.engine",
        # The review run (pull, traffic snapshot, audit, sticky decisions, window, writes,
        # guardrails and their money): the review operator checks its own arguments with
        # review.options at parse, the rest loads in execute.
        "affiliate_network.review.job",
        "affiliate_network.review.apply",
        "affiliate_network.review.guardrails",
        "affiliate_network.review.money",
        "affiliate_network.rules.fields",
        "affiliate_network.review.traffic",
        "affiliate_network.review.audit",
        "affiliate_network.review.candidates",
        "affiliate_network.review.human_decisions",
        "affiliate_network.review.window",
        # Our pydantic models (rules, desired offer state) and the config readers load in
        # execute. pydantic itself cannot be listed: ``import airflow.sdk`` already loads it.
        "affiliate_network.rules.model",
        "affiliate_network.rules.loader",
        "affiliate_network.sync.models",
        "affiliate_network.sync.loader",
        "affiliate_network.settings.models",
        "affiliate_network.settings.loader",
        # The reports' run (days, landing): the conversion operator checks its arguments with
        # reports.run_days at parse; the landing loads in execute.
        "affiliate_network.reports.landing",
        # The core (scheduler-side) timetables and serializers: DAG files use the Task SDK's.
        "airflow.serialization.encoders",
        "airflow.timetables.interval",
        # A @task function (or PythonOperator) loads the standard provider's python operator
        # module and `packaging` with it, about half of a DAG file's parse budget: DAG files use
        # the package's small operators instead (bench/bench_parse.py).
        "airflow.providers.standard.operators.python",
    ]
    # The offer sync checks its run parameters in execute (sync.plan), so its parse compiles
    # none of the error classes: the whole module is about 1.5 ms of a parse without bytecode.
    # The report DAG reads one key of network.yaml at parse (settings.agreement: its timetable's
    # zone must be the network's), so settings.paths loads there; the full loader does not.
    heavy += {
        "affiliate_offer_sync.py": ["affiliate_network.exceptions"],
    }.get(dag_file.name, [])
    code = (
        "import json, runpy, sys\n"
        f"runpy.run_path({str(dag_file)!r})\n"
        f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"{dag_file.name} imports {loaded} at parse time"
