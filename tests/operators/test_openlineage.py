"""OpenLineage: inputs (API endpoints, the review's audit) and outputs (partitions, audit files,
the on-hold endpoint when written) of the report and on-hold operators.

Unit level: the naming helpers, and ``get_openlineage_facets_on_complete`` on operators that ran
against the sandbox. Task level: a real ``airflow dags test`` of the daily reports DAG and an
``airflow tasks test`` of the on-hold review with the OpenLineage provider's file transport,
reading the COMPLETE events it wrote.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pendulum
import pytest
from airflow.sdk.execution_time.context import OutletEventAccessors

from affiliate_network.operators.conversion_report import (
    AffiliateReportOperator,
    ConversionReportOperator,
)
from affiliate_network.operators.lineage import api_endpoint_dataset, storage_dataset
from affiliate_network.operators.onhold_review import OnHoldReviewApplyOperator
from affiliate_network.partitions.manifest import list_partitions
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.human_requests import OPTION_REJECT, build_review_requests
from tests.support.onhold_support import context, review_op
from tests.support.review_settings import INCLUDE_DIR_ENV, include_with_review

DAG_ID = "affiliate_daily_reports"


def _context(day: str) -> dict[str, Any]:
    start = pendulum.parse(day, tz="UTC")
    return {
        "data_interval_start": start,
        "data_interval_end": start.add(days=1),
        "outlet_events": OutletEventAccessors(),
    }


@pytest.fixture
def day(sandbox) -> str:
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    return (last - dt.timedelta(days=1)).isoformat()


@pytest.fixture
def api_namespace(sandbox) -> str:
    parts = urlsplit(sandbox.base_url)
    return f"{parts.scheme}://{parts.netloc}"


# ---------------------------------------------------------------------------- naming
@pytest.mark.parametrize(
    ("base_url", "path", "expected"),
    [
        ("https://api.example.com/v1", "/networks/reporting/conversions",
         ("https://api.example.com", "/v1/networks/reporting/conversions")),
        ("http://127.0.0.1:8080/eu/v1/", "affiliates/reporting/entity/table",
         ("http://127.0.0.1:8080", "/eu/v1/affiliates/reporting/entity/table")),
        ("https://user:secret@api.example.com/v1", "/x",
         ("https://api.example.com", "/v1/x")),
    ],
)  # fmt: skip
def test_api_endpoint_is_named_by_host_and_path(base_url, path, expected) -> None:
    ref = api_endpoint_dataset(base_url, path)
    assert (ref["namespace"], ref["name"]) == expected


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/data/conversions/date=2026-01-02", ("file", "/data/conversions/date=2026-01-02")),
        ("file:///data/c/date=2026-01-02", ("file", "/data/c/date=2026-01-02")),
        ("file://nas01/data/c", ("file://nas01", "/data/c")),
        ("s3://bucket/base/conversions/date=2026-01-02",
         ("s3://bucket", "base/conversions/date=2026-01-02")),
        ("s3://aws_reports@bucket/base/c", ("s3://bucket", "base/c")),
        ("gs://bkt/a/b", ("gs://bkt", "a/b")),
    ],
)  # fmt: skip
def test_storage_location_follows_the_naming_spec(location, expected) -> None:
    ref = storage_dataset(location, rows=3)
    assert (ref["namespace"], ref["name"], ref["rows"]) == (*expected, 3)


def test_relative_local_path_is_made_absolute(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage_dataset("out/x") == {"namespace": "file", "name": str(tmp_path / "out/x")}


# ---------------------------------------------------------------- executed operators
def _pairs(datasets: list[Any]) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def test_conversion_report_lineage_after_execute(
    sandbox, network_conn, day, tmp_path, api_namespace
) -> None:
    op = ConversionReportOperator(
        task_id="pull", base_path=str(tmp_path), timezone_id=67, network_timezone="UTC",
        currency_id="USD", to_date=day, from_date=(
            dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat(),
        outlets=[],  # the rerun below finds the day unchanged: with an Asset it would skip
    )  # fmt: skip
    assert op.get_openlineage_facets_on_complete(None).outputs == []  # nothing ran yet
    op.execute(_context(day))

    lineage = op.get_openlineage_facets_on_complete(None)
    assert _pairs(lineage.inputs) == [(api_namespace, "/v1/networks/reporting/conversions")]
    partitions = list_partitions(tmp_path, "conversions")
    assert len(partitions) == 2
    assert _pairs(lineage.outputs) == [
        ("file", str(tmp_path / "conversions" / key)) for key in partitions
    ]
    rows = [d.outputFacets["outputStatistics"].rowCount for d in lineage.outputs]
    assert rows == [m.row_count for m in partitions.values()]

    # A rerun of the same instance reports that run only (not the first run's datasets twice).
    op.from_date = op.to_date
    op.execute(_context(day))
    assert [d.name for d in op.get_openlineage_facets_on_complete(None).outputs] == [
        str(tmp_path / "conversions" / f"date={day}")
    ]


def test_affiliate_report_lineage_after_execute(
    sandbox, make_connection, day, tmp_path, api_namespace
) -> None:
    conn = make_connection(
        "ol_affiliate_2001", host=sandbox.base_url, key=sandbox.keys["affiliate"]["2001"],
        portal="affiliate",
    )  # fmt: skip
    op = AffiliateReportOperator(
        task_id="aff", affiliate_network_conn_id=conn, affiliate_id="2001",
        columns=["offer", "date"], base_path=str(tmp_path), timezone_id=67,
        network_timezone="UTC", currency_id="USD",
    )  # fmt: skip
    summary = op.execute(_context(day))

    lineage = op.get_openlineage_facets_on_complete(None)
    assert _pairs(lineage.inputs) == [(api_namespace, "/v1/affiliates/reporting/entity/table")]
    expected = tmp_path / "affiliate_reports" / "affiliate=2001" / f"date={day}"
    assert _pairs(lineage.outputs) == [("file", str(expected))]
    assert lineage.outputs[0].outputFacets["outputStatistics"].rowCount == summary["rows"] > 0


def test_onhold_review_lineage_dry_run_then_writing(
    sandbox, network_conn, rules_file, window, tmp_path, api_namespace
) -> None:
    conversions = (api_namespace, "/v1/networks/reporting/conversions")
    onhold = (api_namespace, "/v1/networks/reporting/onhold")
    dry = review_op(rules_file, window, tmp_path, dry_run=True)
    summary = dry.execute(context("dry"))
    lineage = dry.get_openlineage_facets_on_complete(None)
    assert _pairs(lineage.inputs) == [conversions]
    # A dry run writes its audit and nothing to the network.
    assert _pairs(lineage.outputs) == [("file", summary["audit_path"])]
    rows = len(read_jsonl(summary["audit_path"]))
    assert lineage.outputs[0].outputFacets["outputStatistics"].rowCount == rows > 0

    op = review_op(rules_file, window, tmp_path)
    summary = op.execute(context("writes"))
    assert summary["patch_requests"] > 0
    lineage = op.get_openlineage_facets_on_complete(None)
    assert _pairs(lineage.inputs) == [conversions]
    assert _pairs(lineage.outputs) == [("file", summary["audit_path"]), onhold]

    requests = build_review_requests(summary)
    apply = OnHoldReviewApplyOperator(
        task_id="apply", summary=summary, requests=requests,
        responses=[{"chosen_options": [OPTION_REJECT], "params_input": {}}] * len(requests),
    )  # fmt: skip
    result = apply.execute(context("writes"))
    lineage = apply.get_openlineage_facets_on_complete(None)
    assert _pairs(lineage.inputs) == [("file", summary["audit_path"]), conversions]
    assert _pairs(lineage.outputs) == [("file", result["audit_path"]), onhold]
    # Rerun: everything was already applied, no PATCH, so the endpoint is no output.
    apply.execute(context("writes"))
    assert _pairs(apply.get_openlineage_facets_on_complete(None).outputs) == [
        ("file", result["audit_path"])
    ]


# ---------------------------------------------------------------------- a real task run
def _ol_env(sandbox, base: Path, events: Path) -> dict[str, str]:
    env = os.environ.copy()
    conns = {
        "affiliate_network_default": ("network", sandbox.keys["network"]),
        "affiliate_network_affiliate_2001": ("affiliate", sandbox.keys["affiliate"]["2001"]),
        "affiliate_network_affiliate_2002": ("affiliate", sandbox.keys["affiliate"]["2002"]),
    }
    for conn_id, (portal, key) in conns.items():
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "affiliate_network", "host": sandbox.base_url, "password": key,
             "extra": {"portal": portal}}
        )  # fmt: skip
    env["AFFILIATE_NETWORK_DATA_BASE"] = str(base)
    env["AIRFLOW__OPENLINEAGE__DISABLED"] = "false"
    env["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "affiliate-network-test"
    env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
        {"type": "file", "log_file_path": str(events), "append": True}
    )
    return env


def _complete_events(events: Path) -> dict[str, list[dict[str, Any]]]:
    """COMPLETE events per job name (``<dag_id>.<task_id>``)."""
    by_job: dict[str, list[dict[str, Any]]] = {}
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event.get("eventType") == "COMPLETE":
            by_job.setdefault(event["job"]["name"], []).append(event)
    return by_job


def _datasets(event: dict[str, Any], side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event[side]]


def test_dag_run_emits_report_lineage_through_the_file_transport(
    airflow_db, sandbox, tmp_path, api_namespace
) -> None:
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    day = (last - dt.timedelta(days=1)).isoformat()
    base = tmp_path / "data"
    events = tmp_path / "openlineage.jsonl"
    env = _ol_env(sandbox, base, events)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "dags", "test", DAG_ID, last.isoformat(),
         "--conf", json.dumps({"trailing_days": 0})],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    print(f"dags test with OpenLineage: {time.monotonic() - started:.1f}s")

    # The listener emits from a forked process; give a late writer a moment.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        jobs = _complete_events(events) if events.exists() else {}
        if len(jobs.get(f"{DAG_ID}.affiliate_report", [])) == 2 and (
            f"{DAG_ID}.pull_conversions" in jobs
        ):
            break
        time.sleep(0.5)

    (pull,) = jobs[f"{DAG_ID}.pull_conversions"]
    assert pull["job"]["namespace"] == "affiliate-network-test"
    assert _datasets(pull, "inputs") == [(api_namespace, "/v1/networks/reporting/conversions")]
    partition = base / "conversions" / f"date={day}"
    assert _datasets(pull, "outputs") == [("file", str(partition))]
    rows = list_partitions(base, "conversions")[f"date={day}"].row_count
    assert pull["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == rows

    outputs = sorted(_datasets(e, "outputs")[0] for e in jobs[f"{DAG_ID}.affiliate_report"])
    assert outputs == [
        ("file", str(base / "affiliate_reports" / f"affiliate={a}" / f"date={day}"))
        for a in ("2001", "2002")
    ]
    for event in jobs[f"{DAG_ID}.affiliate_report"]:
        assert _datasets(event, "inputs") == [
            (api_namespace, "/v1/affiliates/reporting/entity/table")
        ]

    text = events.read_text()
    for key in (sandbox.keys["network"], *sandbox.keys["affiliate"].values()):
        assert key not in text, "an API key reached an OpenLineage event"


def test_onhold_review_task_emits_lineage_through_the_file_transport(
    airflow_db, sandbox, network_conn, tmp_path, api_namespace
) -> None:
    base = tmp_path / "data"
    events = tmp_path / "openlineage.jsonl"
    env = _ol_env(sandbox, base, events)
    env["AFFILIATE_ONHOLD_REVIEW_SCHEDULE"] = "none"
    settings = {"min_age_hours": 0, "max_reject_count": 100000, "max_reject_share": 1}
    env[INCLUDE_DIR_ENV] = str(include_with_review(tmp_path / "include", **settings))
    day = sandbox.catalog()["last_date"]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "tasks", "test", "affiliate_onhold_review", "review",
         day, "-t", json.dumps({"mode": "write"})],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    print(f"tasks test with OpenLineage: {time.monotonic() - started:.1f}s")

    deadline = time.monotonic() + 20
    while not (jobs := _complete_events(events) if events.exists() else {}):
        assert time.monotonic() < deadline, output[-3000:]
        time.sleep(0.5)
    (review,) = jobs["affiliate_onhold_review.review"]
    (audit,) = base.rglob("decisions-attempt-*.jsonl")
    assert _datasets(review, "inputs") == [(api_namespace, "/v1/networks/reporting/conversions")]
    assert _datasets(review, "outputs") == [
        ("file", str(audit)),
        (api_namespace, "/v1/networks/reporting/onhold"),
    ]
    assert sandbox.keys["network"] not in events.read_text()
