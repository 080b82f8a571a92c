"""The ``affiliate_daily_reports`` DAG: its shape, its config, a real ``airflow dags test`` run."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess

import pendulum
import pytest
import yaml
from airflow.sdk.execution_time.context import OutletEventAccessors

from affiliate_network.operators.conversion_report import ConversionReportOperator
from affiliate_network.partitions.manifest import list_partitions
from affiliate_network.partitions.read import read_partition
from affiliate_network.settings.models import load_affiliate_report_targets, load_network_config
from affiliate_network.settings.paths import include_dir
from tests.support.dag_files import DAGS_DIR, dags_test_command, load_dag

DAG_FILE = DAGS_DIR / "affiliate_daily_reports.py"
DAG_ID = "affiliate_daily_reports"


@pytest.fixture(scope="module")
def dag():
    return load_dag(DAG_FILE, DAG_ID)


def test_schedule_is_a_daily_data_interval_in_the_network_timezone(dag) -> None:
    from airflow.serialization.encoders import coerce_to_core_timetable
    from airflow.timetables.interval import CronDataIntervalTimetable

    # The DAG file uses the Task SDK's timetable; the scheduler works with its core form.
    timetable = coerce_to_core_timetable(dag.timetable)
    assert isinstance(timetable, CronDataIntervalTimetable)
    # The timetable's zone is fixed at parse time; it must match include/network.yaml.
    assert timetable._timezone.name == load_network_config()["timezone"]
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    start = pendulum.datetime(2026, 3, 10, tz="UTC")
    interval = timetable.infer_manual_data_interval(run_after=start.add(hours=3))
    assert (interval.start, interval.end) == (start.subtract(days=1), start)


def test_tasks_retries_and_mapping(dag) -> None:
    assert set(dag.task_ids) == {
        "pull_conversions",
        "repull_trailing_window",
        "reconcile_conversions",
        "publish_conversions",
        "affiliate_report_targets",
        "affiliate_report",
    }
    for task in dag.tasks:
        assert task.owner == "affiliate-data"
        assert task.retries >= 1
        assert task.retry_exponential_backoff
    assert dag.get_task("repull_trailing_window").upstream_task_ids == {"pull_conversions"}
    # The conversions event comes from the publish step after both pulls (skipped when no day
    # changed); the pulls carry no outlet, so they end green whenever they worked.
    publish = dag.get_task("publish_conversions")
    # Every landed day is reconciled before the announcement: pulls, reconciliation, publish.
    assert publish.upstream_task_ids == {"reconcile_conversions"}
    assert publish.trigger_rule == "all_success"
    assert publish.downstream_task_ids == set()
    assert dag.get_task("pull_conversions").outlets == []
    assert dag.get_task("repull_trailing_window").outlets == []
    mapped = dag.get_task("affiliate_report")
    assert mapped.is_mapped
    # Every dataset the DAG writes is a registered outlet of its producing task (a mapped
    # operator's __init__ runs only at execution: an outlet set there never reached the
    # Assets view).
    assert [a.name for a in mapped.outlets] == ["affiliate_network_affiliate_reports"]
    assert [a.name for a in publish.outlets] == ["affiliate_network_conversions"]
    # The run's reconciliation feeds the publish step's event; it carries no outlet itself.
    reconcile = dag.get_task("reconcile_conversions")
    assert reconcile.upstream_task_ids == {"repull_trailing_window"}
    assert reconcile.source_task_ids == ["pull_conversions", "repull_trailing_window"]
    assert reconcile.outlets == []
    assert dag.params["trailing_days"] == 7
    assert dag.params["on_mismatch"] == "fail"


def test_include_config_is_valid() -> None:
    network = load_network_config()
    assert network == {"timezone": "UTC", "timezone_id": 67, "currency_id": "USD"}
    targets = load_affiliate_report_targets()
    assert [t["affiliate_id"] for t in targets] == ["2001", "2002"]
    for t in targets:
        assert t["affiliate_network_conn_id"].startswith("affiliate_network_affiliate_")
        assert 1 <= len(t["columns"]) <= 10


def test_bad_reports_config_names_file_and_field(tmp_path, monkeypatch) -> None:
    from affiliate_network.exceptions import ConfigValidationError

    doc = yaml.safe_load((include_dir() / "reports.yaml").read_text())
    doc["affiliate_reports"]["affiliates"][1]["columns"] = ["offer", "date", "hour"]
    (tmp_path / "reports.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("AFFILIATE_NETWORK_INCLUDE_DIR", str(tmp_path))
    where = r"reports.yaml:\d+: .*affiliates\[1\]\.columns"
    with pytest.raises(ConfigValidationError, match=where):
        load_affiliate_report_targets()


def test_dag_run_lands_conversions_and_affiliate_reports(airflow_db, sandbox, tmp_path) -> None:
    """A real run: 1 day + 2 trailing days of conversions, 2 mapped affiliate reports."""
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    day = (last - dt.timedelta(days=1)).isoformat()
    base = tmp_path / "data"
    conn = {
        "affiliate_network_default": ("network", sandbox.keys["network"]),
        "affiliate_network_affiliate_2001": ("affiliate", sandbox.keys["affiliate"]["2001"]),
        "affiliate_network_affiliate_2002": ("affiliate", sandbox.keys["affiliate"]["2002"]),
    }
    env = os.environ.copy()
    for conn_id, (portal, key) in conn.items():
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "affiliate_network", "host": sandbox.base_url, "password": key,
             "extra": {"portal": portal}}
        )  # fmt: skip
    env["AFFILIATE_NETWORK_DATA_BASE"] = str(base)
    # A run at ``last`` 00:00 has the data interval [day, last): it lands ``day``.
    done = subprocess.run(
        dags_test_command(DAG_ID, last.isoformat(), conf={"trailing_days": 2}),
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    for _, key in conn.values():
        assert key not in output, "an API key reached the task log"

    days = [(dt.date.fromisoformat(day) - dt.timedelta(days=i)).isoformat() for i in (2, 1, 0)]
    conversions = list_partitions(base, "conversions")
    assert list(conversions) == [f"date={d}" for d in days]
    for d in days:
        manifest = conversions[f"date={d}"]
        assert manifest.row_count == sandbox.truth(d, d, timezone_id=67)["total"]
        assert manifest.request["show_events"] is True
        assert manifest.request["currency_id"] == "USD"

    # Every landed day (the run's and the trailing ones) was reconciled with the network's
    # report, beside its manifest, for the content it holds.
    for d in days:
        comparison = json.loads(
            (base / "conversions" / f"date={d}" / "_reconciliation.json").read_text()
        )
        assert comparison["reconciled"] is True, d
        assert comparison["differing"] == []
        assert comparison["manifest_checksum"] == conversions[f"date={d}"].content_checksum
        assert int(comparison["totals"]["USD"]["network"]["cv"]) > 0  # totals per currency
    assert "reconcile_conversions" in output

    # The same days pulled one run at a time (a backfill) land the same partitions.
    singles = tmp_path / "singles"
    for d in days:
        start = pendulum.parse(d, tz="UTC")
        ConversionReportOperator(
            task_id="single", base_path=str(singles), show_events=True, outlets=[],
            affiliate_network_conn_id="dag_test_network",
        ).execute({"data_interval_start": start, "data_interval_end": start.add(days=1),
                   "outlet_events": OutletEventAccessors()})  # fmt: skip
    single = list_partitions(singles, "conversions")
    assert {k: m.content_checksum for k, m in single.items()} == {
        k: m.content_checksum for k, m in conversions.items()
    }

    reports = list_partitions(base, "affiliate_reports")
    assert list(reports) == [f"affiliate=2001/date={day}", f"affiliate=2002/date={day}"]
    t2001 = read_partition(base / "affiliate_reports" / "affiliate=2001" / f"date={day}")
    t2002 = read_partition(base / "affiliate_reports" / "affiliate=2002" / f"date={day}")
    assert {"offer", "country", "platform", "date"} <= set(t2001.column_names)
    assert "device_type" in t2002.column_names  # the per-affiliate columns override
    assert t2001.num_rows > 0
    assert t2002.num_rows > 0


@pytest.fixture(autouse=True)
def _single_run_connection(request, make_connection) -> None:
    """The in-process comparison runs use a connection of their own."""
    if "sandbox" in request.fixturenames:
        sandbox = request.getfixturevalue("sandbox")
        make_connection("dag_test_network", host=sandbox.base_url, key=sandbox.keys["network"])


def _dag_run_env(sandbox, base) -> dict[str, str]:
    env = os.environ.copy()
    env["AIRFLOW_CONN_AFFILIATE_NETWORK_DEFAULT"] = json.dumps(
        {"conn_type": "affiliate_network", "host": sandbox.base_url,
         "password": sandbox.keys["network"], "extra": {"portal": "network"}}
    )  # fmt: skip
    for affiliate, key in sandbox.keys["affiliate"].items():
        env[f"AIRFLOW_CONN_AFFILIATE_NETWORK_AFFILIATE_{affiliate}"] = json.dumps(
            {"conn_type": "affiliate_network", "host": sandbox.base_url, "password": key,
             "extra": {"portal": "affiliate"}}
        )  # fmt: skip
    env["AFFILIATE_NETWORK_DATA_BASE"] = str(base)
    return env


def _metadata_db(env: dict[str, str]) -> str:
    """The SQLite file the ``airflow dags test`` runs wrote to (their environment's)."""
    url = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert url.startswith("sqlite:///"), url
    return url.removeprefix("sqlite:///")


def _conversion_events(db: str) -> list[tuple[str, str, str]]:
    """``(source run id, source task id, extra)`` of every conversions asset event."""
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=rw", uri=True) as conn:
        return conn.execute(
            "SELECT e.source_run_id, e.source_task_id, e.extra FROM asset_event e "
            "JOIN asset a ON a.id = e.asset_id WHERE a.name = 'affiliate_network_conversions' "
            "ORDER BY e.id"
        ).fetchall()


def _task_state(db: str, logical_day: str, task_id: str) -> str:
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=rw", uri=True) as conn:
        run_id = conn.execute(
            "SELECT run_id FROM dag_run WHERE dag_id = ? AND logical_date LIKE ? "
            "ORDER BY id DESC LIMIT 1",
            (DAG_ID, f"{logical_day}%"),
        ).fetchone()[0]
        return conn.execute(
            "SELECT state FROM task_instance WHERE dag_id = ? AND run_id = ? AND task_id = ?",
            (DAG_ID, run_id, task_id),
        ).fetchone()[0]


def test_a_run_that_changes_nothing_emits_no_asset_event(airflow_db, sandbox, tmp_path) -> None:
    """Two real runs over the same days: the second lands nothing new and wakes no DAG."""
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    base = tmp_path / "data"
    env = _dag_run_env(sandbox, base)
    db = _metadata_db(env)

    def run(logical: dt.date, trailing: int) -> None:
        done = subprocess.run(
            dags_test_command(DAG_ID, logical.isoformat(), conf={"trailing_days": trailing}),
            env=env, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]

    # Run 1 lands last-1 with last-2 and last-3 behind it: three new days, one event.
    run(last, 2)
    assert _task_state(db, last.isoformat(), "publish_conversions") == "success"
    events = _conversion_events(db)
    assert events, "the first run announces its days"
    announced = json.loads(events[-1][2])
    assert announced["dataset"] == "conversions"
    assert len(announced["partitions"]) == 3
    # Each day with its own verdict: all three were compared in this run.
    assert "reconciled" not in announced
    for part in announced["partitions"]:
        assert part["reconciled"] is True, part["date"]
        assert part["reconciliation"]["verdict"] == "reconciled"
        assert part["reconciliation"]["checksum"] == part["checksum"]
    files = {p: p.stat().st_mtime_ns for p in (base / "conversions").rglob("*") if p.is_file()}

    # Run 2 pulls last-2 with last-3 behind it: both already landed, identical.
    earlier = last - dt.timedelta(days=1)
    run(earlier, 1)
    for task_id in ("pull_conversions", "repull_trailing_window"):
        assert _task_state(db, earlier.isoformat(), task_id) == "success"
    assert _task_state(db, earlier.isoformat(), "publish_conversions") == "skipped"
    # No event, so no DAG scheduled on the asset is queued to run.
    assert _conversion_events(db) == events
    assert {p: p.stat().st_mtime_ns for p in files} == files


# -- backfill runs, the landed day, the forms (what a person sees in the UI) -----------------


def _run_of_dag_task(dag, task_id: str, day: str, run_type: str, conf: dict | None, base):
    """The DAG's own task with its templates rendered for one run, as a worker renders them:
    the params are the defaults merged with the run's conf (None when the UI's backfill dialog
    left "Override parameters on existing runs" unticked)."""
    import copy

    from airflow.sdk.api.datamodels._generated import DagRun

    start = pendulum.parse(day, tz="UTC")
    run_id = f"{run_type}__{start.add(days=1).isoformat()}"
    dag_run = DagRun(
        dag_id=DAG_ID, run_id=run_id, logical_date=start, data_interval_start=start,
        data_interval_end=start.add(days=1), run_after=start.add(days=1), start_date=start,
        end_date=None, partition_key=None, clear_number=0, run_type=run_type, state="running",
        conf=conf,
        consumed_asset_events=[],
    )  # fmt: skip
    context = {
        "dag_run": dag_run,
        "run_id": run_id,
        "logical_date": start,
        "data_interval_start": start,
        "data_interval_end": start.add(days=1),
        "params": {**dag.params.dump(), **(conf or {})},
        "outlet_events": OutletEventAccessors(),
    }
    task = copy.copy(dag.get_task(task_id))
    task.render_template_fields(context)
    task.base_path = str(base)  # the run's output base (the Variable, in a deployment)
    return task, context


@pytest.mark.parametrize(
    ("conf", "trailing"),
    [(None, 0), ({}, 0), ({"on_mismatch": "warn"}, 0), ({"trailing_days": 2}, 2)],
)
def test_a_backfill_run_re_pulls_trailing_days_only_when_its_conf_asks(
    dag, sandbox, tmp_path, monkeypatch, make_connection, conf, trailing
) -> None:
    """The UI's backfill dialog sends no conf unless its override box is ticked: each run then
    got the param's default and re-pulled 7 trailing days, in parallel with the other runs."""
    make_connection("affiliate_network_default", host=sandbox.base_url, key=sandbox.keys["network"])
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    day = (last - dt.timedelta(days=1)).isoformat()
    base = tmp_path / "data"
    landed: dict[str, list[str]] = {}
    for task_id in ("pull_conversions", "repull_trailing_window"):
        task, context = _run_of_dag_task(dag, task_id, day, "backfill", conf, base)
        landed[task_id] = task.execute(context)["lands"]
    expected_trailing = [
        (dt.date.fromisoformat(day) - dt.timedelta(days=i)).isoformat()
        for i in range(trailing, 0, -1)
    ]
    assert landed == {"pull_conversions": [day], "repull_trailing_window": expected_trailing}
    assert list(list_partitions(base, "conversions")) == [
        f"date={d}" for d in [*expected_trailing, day]
    ]


@pytest.mark.parametrize("run_type", ["scheduled", "manual"])
def test_other_runs_keep_the_trailing_default(dag, tmp_path, run_type) -> None:
    day = "2026-11-19"
    task, context = _run_of_dag_task(dag, "repull_trailing_window", day, run_type, None, tmp_path)
    days = task.days(context)
    assert (len(days), days[-1].isoformat()) == (7, "2026-11-18")


def test_each_run_logs_the_day_it_lands(
    dag, sandbox, tmp_path, make_connection, caplog, capfd
) -> None:
    """A backfill run's label (backfill__<run_after>) names no landed day: the log does."""
    make_connection("affiliate_network_default", host=sandbox.base_url, key=sandbox.keys["network"])
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    day = (last - dt.timedelta(days=1)).isoformat()
    task, context = _run_of_dag_task(dag, "pull_conversions", day, "backfill", None, tmp_path)
    caplog.set_level("INFO")
    task.execute(context)
    out = caplog.text + "".join(capfd.readouterr())
    assert f"(backfill run, logical date {day}T00:00:00+00:00) lands {day}" in out


def test_the_doc_says_which_day_a_run_lands_and_how_to_re_land_one(dag) -> None:
    doc = dag.doc_md
    assert "A run with logical date D covers the data interval [D-1, D) and lands" in doc
    assert "409 Conflict" in doc
    assert "clear" in doc


def test_every_param_has_a_title_and_a_description(dag) -> None:
    for name in dag.params:
        param = dag.params.get_param(name)
        assert param.schema.get("title"), name
        assert len(param.description or "") > 20, name
