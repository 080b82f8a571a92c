"""The three DAGs on a deployment scaled out with the CeleryExecutor, outputs on S3.

Redis is the broker, PostgreSQL (the fresh metadata database) the result backend, and three
``airflow celery worker`` processes (each its own ``--celery-hostname``, as
``docker compose up --scale airflow-worker=3``) share the tasks. This deployment also exercises
the runbook's other set-ups: the output base is ``s3://`` (moto's S3 server on loopback) set with
``airflow variables set``, and the connections come from all three places a deployment keeps
them: the environment (network), the metadata DB through ``airflow connections add`` (what the
UI writes) and a secrets backend (a local-filesystem backend standing in for Vault/AWS).

Scale-out against one network quota (issue 26): the sandbox keeps the documented quota (one
30-s window per network and user type, 10 requests in flight on ``/networks/reporting/*``, 1,000
granular queries per rolling hour, the documented numbers unshrunk); every connection names the
machine's Redis as its shared budget (``quota_redis_url``); the reporting tasks take the pool
``affiliate_network_reporting`` (created with ``airflow pools set``, given by a cluster policy as
a deployment that keeps the shipped DAG files would). While the scheduled and manual runs of the
three DAGs run, a 10-day backfill of the daily reports for every affiliate of
include/reports.yaml runs beside them. No 429, no concurrency refusal, every partition equal to
the sandbox's truth, and the tasks spread over the workers.

One network, several spellings (issue 35): the connections reach the sandbox as people write
them, ``127.0.0.1`` (the network portal, naming the network ``LOCALHOST/`` in its ``network``
extra), ``localhost`` and ``LOCALHOST/`` (the two affiliate portals): the workers count them in
one budget per user type, and the offer sync keeps one ledger for the network.

Long waits free the worker: a probe DAG (its file written beside the project's) spends the one
granular query of a connection's short "hour", then a deferrable report waits for the next one.
Its tasks go to the last worker, which runs one task at a time and takes the other DAGs' tasks
too: the waiting task is seen ``deferred``, and the other DAGs' tasks run on that one slot
before it resumes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .checks import (
    DAILY,
    SYNC,
    Stage,
    check_daily_reports,
    check_money_per_currency,
    check_offer_sync_applied,
    trigger_all,
    wait_all_runs,
)
from .deployments import DAG_IDS, affiliate_connections, deployment, network_connection, timed
from .harness import DAGS_FOLDER, AirflowCluster, MotoS3
from .onhold_checks import check_onhold_applied, wait_onhold_runs

pytestmark = pytest.mark.e2e

S3_CONN_ID = "aws_reports"
#: Celery workers of the stage (the machine has 2 cores: concurrency 2 each, parallelism 4).
CELERY_WORKERS = 3
#: The shared budget of every connection: the machine's Redis, another db than the broker's.
QUOTA_REDIS_URL = "redis://127.0.0.1:6379/1"
#: The backfill: report days ending before the first day the scheduled and manual runs write
#: (yesterday and its 7 trailing days), so no two runs write one partition: 10 days for every
#: affiliate, beside the scheduled runs of the three DAGs. Ten runs at 3 at once keep every
#: worker busy through several waves, which is what the Celery stage proves (each day equal to
#: the truth, one quota across workers); a month of it cost 12 of CI's 30 minutes and proves
#: no more (a 30-day backfill at scale is bench/bench_backfill.py). The month, or a quicker
#: local run: ``AFN_E2E_BACKFILL_DAYS=30`` (or 3) ``uv run --frozen pytest tests/e2e``.
BACKFILL_DAYS = int(os.environ.get("AFN_E2E_BACKFILL_DAYS", "10"))
BACKFILL_LAST_DAY_AGO = 9
#: Days of sandbox data: the backfill's first day is 38 days ago (startup default: 14).
SANDBOX_DAYS = BACKFILL_DAYS + BACKFILL_LAST_DAY_AGO + 1
#: Backfill runs at once: one per worker. ``trailing_days`` 0: each run writes only its own day
#: (the DAG doc's advice for a backfill), so runs do not overlap and may run side by side.
BACKFILL_MAX_ACTIVE_RUNS = 3
BACKFILL_CONF = {"trailing_days": 0}
#: Offers of the stage's network pay in several currencies, zero- and three-decimal ones among
#: them: every landed day must equal the truth per currency and reconcile per currency.
OFFER_CURRENCIES = ("USD", "EUR", "JPY", "KWD")
#: Waiting for every daily run: 30 backfill runs of 7 tasks each on 2 busy cores (a ceiling,
#: not a target: the stage takes what the machine gives it).
DAILY_TIMEOUT_S = 1800
#: Operators that send requests to /networks/reporting/*: the cluster policy gives them the pool.
REPORTING_TASK_TYPES = ("ConversionReportOperator", "OnHoldReviewOperator")


#: The probe DAG: its connection's granular budget is one query per this many seconds (the
#: "hour"), long enough for the other DAGs' tasks to use the freed slot meanwhile.
PROBE_DAG = "afn_e2e_granular_probe"
PROBE_CONN_ID = "afn_e2e_granular_probe"
PROBE_WINDOW_S = 90
PROBE_TASK = "waits_for_the_hour"
#: Columns of a granular query (the date column makes an affiliate report count).
PROBE_COLUMNS = ["offer", "country", "date"]
_PROBE_SOURCE = """
import pendulum
from airflow.sdk import dag

from affiliate_network.operators.affiliate_report import AffiliateReportOperator

ARGS = dict(
    affiliate_network_conn_id={conn_id!r}, affiliate_id={aff!r}, columns={columns!r},
    from_date={day!r}, to_date={day!r}, timezone_id=67, network_timezone="UTC",
    currency_id="USD", queue={queue!r},
    # Ahead of the backfill's tasks for the executor's 4 slots (else it waits for its end).
    priority_weight=1000, weight_rule="absolute",
)


@dag(dag_id={dag_id!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
     catchup=False, tags=["e2e"])
def probe():
    spends = AffiliateReportOperator(
        task_id="spends_the_hour", base_path={base!r} + "/spends", **ARGS
    )
    waits = AffiliateReportOperator(
        task_id={task!r}, base_path={base!r} + "/waits", deferrable=True, defer_after_s=0,
        **ARGS,
    )
    spends >> waits


probe()
"""


def _spelled(base_url: str, host: str, *, slash: bool = False) -> str:
    """``base_url`` with another spelling of its host (and a trailing slash)."""
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{host}:{parts.port}{parts.path}{'/' if slash else ''}"


def _one_network(base_url: str) -> Any:
    """The identity every connection of the stage reaches: the sandbox as ``localhost``."""
    from affiliate_network.hooks._network_identity import network_identity

    return network_identity(_spelled(base_url, "localhost"), {}, "stage")


def _dags_folder(workdir: Path, source: str) -> Path:
    """The project's DAG files (linked) and the probe DAG, in one folder."""
    folder = workdir / "dags"
    folder.mkdir()
    for dag_file in sorted(DAGS_FOLDER.glob("*.py")):
        (folder / dag_file.name).symlink_to(dag_file)
    (folder / f"{PROBE_DAG}.py").write_text(source)
    return folder


def _reporting_pool() -> tuple[str, str, str]:
    from demo.run import REPORTING_POOL

    return REPORTING_POOL


def _pool_policy() -> tuple[str, ...]:
    """Cluster-policy lines: reporting tasks hold as many pool slots as their hook's pages in
    flight (README "Sharing one network's quota": 10 / 4 = 2 pulls at once)."""
    from affiliate_network.hooks.affiliate_network import DEFAULT_CONCURRENCY

    return (
        f"if task.task_type in {REPORTING_TASK_TYPES!r}:",
        f"    task.pool = {_reporting_pool()[0]!r}",
        f"    task.pool_slots = {DEFAULT_CONCURRENCY}",
    )


def _shared_budget(conn: dict[str, Any]) -> dict[str, Any]:
    """The connection with the Redis budget every worker shares."""
    return {**conn, "extra": {**conn["extra"], "quota_redis_url": QUOTA_REDIS_URL}}


def _granular_key(network: Any, portal: str) -> str:
    """The Redis key of one network's granular counter for one user type."""
    from affiliate_network.hooks._budget import scope_of

    return f"affiliate_network:quota:{scope_of(network, portal)}:gq"


def _granular_keys() -> dict[str, int]:
    """Granular-query counters in the budget's Redis db: key -> queries in the rolling hour."""
    import redis

    client = redis.Redis.from_url(QUOTA_REDIS_URL, decode_responses=True)
    try:
        return {k: int(client.zcard(k)) for k in client.scan_iter("affiliate_network:quota:*:gq")}
    finally:
        client.close()


def _day_ago(n: int) -> str:
    return (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=n)).isoformat()


@pytest.fixture(scope="module")
def celery(celery_prerequisites: None, e2e_sandbox: Any, migrated_template: str) -> Iterator[Stage]:
    # Writes of the LocalExecutor stage are forgotten; data back far enough for the backfill.
    e2e_sandbox.reset(days=SANDBOX_DAYS, offer_currencies=list(OFFER_CURRENCIES))
    e2e_sandbox.set_quota()  # the documented numbers, shared by every key (until the next reset)
    workdir = Path(tempfile.mkdtemp(prefix="afn-e2e-celery-"))
    moto = MotoS3(workdir)
    data_base = f"s3://{S3_CONN_ID}@{moto.bucket}/affiliate-network"
    base_url = e2e_sandbox.base_url
    affiliates = [
        (conn_id, _shared_budget(conn))
        for conn_id, conn in affiliate_connections(e2e_sandbox).items()
    ]
    (ui_conn_id, ui_conn), (secret_conn_id, secret_conn) = affiliates[0], affiliates[1]
    # One network, three spellings (see the module doc): the affiliate portals' hosts differ in
    # case and trailing slash; the network portal reaches it by its IP address and says so.
    ui_conn["host"] = _spelled(base_url, "localhost")
    secret_conn["host"] = _spelled(base_url, "LOCALHOST", slash=True)
    network_conn = _shared_budget(network_connection(e2e_sandbox))
    network_conn["extra"]["network"] = _spelled(base_url, "LOCALHOST", slash=True)
    secrets_file = workdir / "connections.json"
    secrets_file.write_text(json.dumps({secret_conn_id: secret_conn}))
    # The probe: a granular "hour" of PROBE_WINDOW_S seconds and one query, a network name of
    # its own (one per stage: the Redis budget outlives the stage), its tasks on the narrow
    # worker's queue.
    probe_queue = f"afn_e2e_probe_{uuid.uuid4().hex[:8]}"
    probe_aff = str(ui_conn_id).rsplit("_", 1)[-1]
    probe_network = f"e2e-granular-probe-{uuid.uuid4().hex[:8]}"
    probe_conn = _shared_budget(
        {
            **ui_conn,
            "extra": {
                "portal": "affiliate",
                "network": probe_network,
                "granular_per_hour": 1,
                "granular_window_s": PROBE_WINDOW_S,
            },
        }
    )
    probe_source = _PROBE_SOURCE.format(
        conn_id=PROBE_CONN_ID,
        aff=probe_aff,
        columns=PROBE_COLUMNS,
        day=_day_ago(BACKFILL_LAST_DAY_AGO),
        queue=probe_queue,
        dag_id=PROBE_DAG,
        base=str(workdir / "probe"),
        task=PROBE_TASK,
    )
    env = {
        "AIRFLOW_CONN_AFFILIATE_NETWORK_DEFAULT": json.dumps(network_conn),
        f"AIRFLOW_CONN_{PROBE_CONN_ID.upper()}": json.dumps(probe_conn),
        f"AIRFLOW_CONN_{S3_CONN_ID.upper()}": moto.connection_json(),
        "AIRFLOW__SECRETS__BACKEND": "airflow.secrets.local_filesystem.LocalFilesystemBackend",
        "AIRFLOW__SECRETS__BACKEND_KWARGS": json.dumps(
            {"connections_file_path": str(secrets_file)}
        ),
    }

    def set_up(cluster: AirflowCluster) -> None:
        # The runbook's commands: the UI-equivalent connection, then the S3 output base.
        cluster.airflow("connections", "add", ui_conn_id, "--conn-json", json.dumps(ui_conn))
        cluster.airflow("variables", "set", "affiliate_network_data_base", data_base)
        cluster.airflow("pools", "set", *_reporting_pool())

    previous = os.environ.get(f"AIRFLOW_CONN_{S3_CONN_ID.upper()}")
    os.environ[f"AIRFLOW_CONN_{S3_CONN_ID.upper()}"] = moto.connection_json()  # test reads S3
    try:
        with timed("celery: start moto S3"):
            moto.start()
        with deployment(
            "CeleryExecutor",
            label="celery",
            template=migrated_template,
            env=env,
            workdir=workdir,
            before_start=set_up,
            celery_workers=CELERY_WORKERS,
            task_policy=_pool_policy(),
            dags_folder=_dags_folder(workdir, probe_source),
            dag_ids=(*DAG_IDS, PROBE_DAG),
            narrow_worker=(1, probe_queue),
        ) as cluster:
            stage = Stage(cluster, e2e_sandbox, data_base)
            stage.notes["network"] = _one_network(base_url)
            stage.notes["probe_network"] = probe_network
            stage.notes["granular_keys_before"] = _granular_keys()
            with timed("celery: unpause + trigger the three DAGs"):
                trigger_all(stage)
            with timed(f"celery: backfill create ({BACKFILL_DAYS} days)"):
                cluster.airflow(
                    "backfill",
                    "create",
                    "--dag-id",
                    DAILY,
                    "--from-date",
                    _day_ago(BACKFILL_DAYS + BACKFILL_LAST_DAY_AGO - 1),
                    "--to-date",
                    _day_ago(BACKFILL_LAST_DAY_AGO),
                    "--max-active-runs",
                    str(BACKFILL_MAX_ACTIVE_RUNS),
                    "--dag-run-conf",
                    json.dumps(BACKFILL_CONF),
                )
            with timed("celery: granular probe until its wait defers"):
                stage.notes["probe"] = _start_probe(cluster)
            yield stage
    finally:
        moto.stop()
        if previous is None:
            os.environ.pop(f"AIRFLOW_CONN_{S3_CONN_ID.upper()}", None)
        else:
            os.environ[f"AIRFLOW_CONN_{S3_CONN_ID.upper()}"] = previous
        e2e_sandbox.reset()  # the startup data and rate limit for whoever comes next


def _start_probe(cluster: AirflowCluster) -> dict[str, Any]:
    """Run the probe DAG; return its run id and the state its waiting task was first seen in
    after it started (``deferred`` while its trigger waits; the rest of the stage goes on)."""
    cluster.api.unpause(PROBE_DAG)
    run_id = cluster.api.trigger(PROBE_DAG, conf={}, logical_date=None)
    ti = cluster.wait_task_state(
        PROBE_DAG,
        run_id,
        PROBE_TASK,
        {"deferred", "success", "failed", "upstream_failed", "up_for_retry"},
        timeout=600,
    )
    return {"run_id": run_id, "state_seen": ti["state"]}


#: The first test carries the stage's start-up and the backfill (pyproject's default: 300 s).
@pytest.mark.timeout(DAILY_TIMEOUT_S + 300)
def test_daily_reports_land_on_s3_through_celery(celery: Stage) -> None:
    """The scheduled and manual runs and the backfill: every day equals the truth."""
    with timed("celery: wait + check affiliate_daily_reports"):
        days = check_daily_reports(celery, timeout=DAILY_TIMEOUT_S)
    backfill_runs = [r for r in celery.cluster.api.dag_runs(DAILY) if r["run_type"] == "backfill"]
    assert len(backfill_runs) == BACKFILL_DAYS, [r["dag_run_id"] for r in backfill_runs]
    wanted = {
        _day_ago(n) for n in range(BACKFILL_LAST_DAY_AGO, BACKFILL_LAST_DAY_AGO + BACKFILL_DAYS)
    }
    assert wanted <= set(days), sorted(wanted - set(days))
    with timed("celery: money per currency of the backfilled days"):
        check_money_per_currency(celery.data_base, celery.sandbox, wanted)
    print(f"\ncelery: {len(days)} conversion partitions equal to the sandbox's truth")


def _executed(log_text: str) -> list[str]:
    """Task-instance keys in the order a Celery worker started executing them."""
    return [
        m.group(0)
        for line in log_text.splitlines()
        if "Executing workload in Celery" in line
        for m in [_LOG_KEY.search(line)]
        if m is not None
    ]


def _log_marks(path: Path) -> dict[str, dt.datetime]:
    """When the task log says: first line, deferring, resumed, last line."""
    marks: dict[str, dt.datetime] = {}
    for line in path.read_text("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
            stamp = dt.datetime.fromisoformat(str(record["timestamp"]).replace("Z", "+00:00"))
        except (ValueError, KeyError, TypeError):
            continue
        event = str(record.get("event", ""))
        marks.setdefault("started", stamp)
        if "deferring to the triggerer" in event:
            marks.setdefault("deferring", stamp)
        if "Resumed after a deferred wait" in event:
            marks.setdefault("resumed", stamp)
        marks["last"] = stamp
    return marks


def test_a_task_waiting_on_an_exhausted_granular_hour_frees_its_worker_slot(
    celery: Stage,
) -> None:
    """The probe's second report finds the granular "hour" spent: it defers (seen in state
    ``deferred``), and on the narrow worker (one slot, the probe's queue and the default one)
    other DAGs' tasks run between its deferral and its resumption, which a task sleeping in
    the slot would not let happen; then it resumes there and lands its report."""
    cluster = celery.cluster
    probe = celery.notes["probe"]
    run_id = probe["run_id"]
    assert probe["state_seen"] == "deferred", probe
    with timed("celery: wait + check the granular probe"):
        cluster.assert_run_succeeded(PROBE_DAG, run_id)
    narrow = cluster.celery_worker_names[-1]
    executed = _executed((cluster.process_logs / f"{narrow}.log").read_text("utf-8", "replace"))
    waits = f"dag_id={PROBE_DAG}/run_id={run_id}/task_id={PROBE_TASK}/"
    turns = [i for i, key in enumerate(executed) if key == waits]
    assert len(turns) == 2, (turns, executed)  # started, then resumed after the trigger fired
    meanwhile = [
        key
        for key in executed[turns[0] + 1 : turns[1]]
        if not key.startswith(f"dag_id={PROBE_DAG}/")
    ]
    assert meanwhile, executed
    assert {key.split("/")[0].removeprefix("dag_id=") for key in meanwhile} <= set(DAG_IDS)
    logs = cluster.task_log_paths(PROBE_DAG, run_id)
    # The task's own log (the trigger's is beside it, "attempt=1.log.trigger.N.log").
    log = next(p for p in logs if f"task_id={PROBE_TASK}" in str(p) and ".trigger." not in p.name)
    marks = _log_marks(log)
    assert {"deferring", "resumed"} <= set(marks), (marks, log)
    before_s = (marks["deferring"] - marks["started"]).total_seconds()
    trigger_s = (marks["resumed"] - marks["deferring"]).total_seconds()
    after_s = (marks["last"] - marks["resumed"]).total_seconds()
    print(
        f"\ncelery: the probe waited {trigger_s:.1f} s in the triggerer; worker-slot seconds "
        f"{before_s:.2f} from its start to its deferral (start-up, the budget's answer) + "
        f"{after_s:.2f} after resuming (the report); {len(meanwhile)} tasks of the other DAGs "
        "ran on its one slot meanwhile"
    )


def test_onhold_review_applies_decisions_through_celery(celery: Stage) -> None:
    with timed("celery: wait + check affiliate_onhold_review"):
        check_onhold_applied(celery.cluster, celery.sandbox)


def test_offer_sync_applies_the_desired_state_through_celery(celery: Stage) -> None:
    from affiliate_network.reports.storage import as_storage_path

    with timed("celery: wait + check affiliate_offer_sync"):
        wait_all_runs(celery.cluster, SYNC)
        check_offer_sync_applied(celery.sandbox)
    # The network connection names its network by another spelling than its host: the ledger
    # is that network's, the one every connection reaching it reads.
    slug = celery.notes["network"].slug
    ledgers = sorted(p.name for p in (as_storage_path(celery.data_base) / "sync").iterdir())
    assert ledgers, slug
    assert all(name.startswith(f"ledger-{slug}.json") for name in ledgers), (ledgers, slug)


#: A task's log folder as the worker names it ("Executing workload in Celery: ... log_path=").
_LOG_KEY = re.compile(r"dag_id=[^/\s'\"]+/run_id=[^/\s'\"]+/task_id=[^/\s'\"]+/(?:map_index=\d+/)?")


def _ti_key(dag_id: str, run_id: str, ti: dict) -> str:
    mapped = f"map_index={ti['map_index']}/" if ti["map_index"] >= 0 else ""
    return f"dag_id={dag_id}/run_id={run_id}/task_id={ti['task_id']}/{mapped}"


def test_every_task_ran_on_one_of_the_celery_workers(celery: Stage) -> None:
    """Each task instance that ran went through our queue to a worker, which logged it; the
    work is spread over more than one worker."""
    cluster = celery.cluster
    queue = cluster.env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"]
    executed = {
        name: set(
            _LOG_KEY.findall((cluster.process_logs / f"{name}.log").read_text("utf-8", "replace"))
        )
        for name in cluster.celery_worker_names
    }
    assert len(executed) == CELERY_WORKERS, executed.keys()
    not_on_worker = []
    per_worker: Counter[str] = Counter()
    for dag_id in celery.runs:
        for run in cluster.api.dag_runs(dag_id):
            for ti in cluster.api.task_instances(dag_id, run["dag_run_id"]):
                if ti["state"] not in ("success", "failed"):
                    continue  # never ran (skipped, upstream_failed): no worker to check
                assert ti["queue"] == queue, ti
                assert ti["hostname"], ti
                key = _ti_key(dag_id, run["dag_run_id"], ti)
                # A deferred task (human review) resumes on any worker: it may be in two logs.
                workers = [name for name, keys in executed.items() if key in keys]
                if not workers:
                    not_on_worker.append(key)
                per_worker.update(workers)
    print(f"\ncelery: task instances per worker {dict(sorted(per_worker.items()))}")
    assert not not_on_worker, f"not executed by a Celery worker: {not_on_worker}"
    assert len(per_worker) > 1, f"all the work on one worker: {dict(per_worker)}"


def test_one_network_quota_held_across_the_workers(celery: Stage) -> None:
    """Zero 429s and zero concurrency refusals under the documented quota; the workers counted
    their granular queries in one Redis budget; the reporting tasks took the pool."""
    from affiliate_network_sandbox import choices

    cluster, sandbox = celery.cluster, celery.sandbox
    wait_all_runs(cluster, DAILY, DAILY_TIMEOUT_S)
    wait_all_runs(cluster, SYNC)
    wait_onhold_runs(cluster)
    limiter = sandbox.admin("GET", "/_sandbox/rate_limit")
    counts = sandbox.request_counts()
    refused = [e for e in sandbox.requests_log() if e.get("status") == 429]
    print(
        f"\ncelery: {counts['total']} requests by status {counts['by_status']}; "
        f"refused {limiter.get('refused')}, peak in flight on reporting "
        f"{limiter.get('peak_in_flight')}"
    )
    assert limiter["mode"] == "documented", limiter
    documented = choices.RATE_LIMIT_PROFILES["documented"]
    assert limiter["limits"] == documented["limits"], limiter  # numbers not shrunk
    assert limiter["reporting_concurrency"] == documented["reporting_concurrency"], limiter
    assert limiter["refused"] == {"rate": 0, "concurrency": 0, "granular": 0}, (
        limiter,
        refused[:5],
    )
    assert "429" not in counts["by_status"], (counts, refused[:5])
    assert 0 < limiter["peak_in_flight"] <= documented["reporting_concurrency"], limiter

    # The budget is in Redis (not in each worker's files): the granular counter there holds at
    # least one query per affiliate report that ran.
    reports = [
        ti
        for run in cluster.api.dag_runs(DAILY)
        for ti in cluster.api.task_instances(DAILY, run["dag_run_id"])
        if ti["task_id"] == "affiliate_report" and ti["state"] == "success"
    ]
    before = celery.notes["granular_keys_before"]
    counted = {k: n for k, n in _granular_keys().items() if k not in before}
    print(f"celery: {len(reports)} affiliate reports, granular queries in Redis {counted}")
    # The affiliate connections spell the host `localhost` and `LOCALHOST/`: one counter for
    # both (the probe's, a network of its own name, aside).
    from affiliate_network.hooks._network_identity import network_identity

    probe = network_identity(sandbox.base_url, {"network": celery.notes["probe_network"]}, "p")
    counted.pop(_granular_key(probe, "affiliate"), None)
    one = _granular_key(celery.notes["network"], "affiliate")
    assert list(counted) == [one], (counted, one)
    least = len(affiliate_connections(sandbox)) * BACKFILL_DAYS
    assert counted[one] >= len(reports) >= least, (counted, len(reports))

    pool = _reporting_pool()[0]
    pulls = [
        ti
        for run in cluster.api.dag_runs(DAILY)
        for ti in cluster.api.task_instances(DAILY, run["dag_run_id"])
        if ti["task_id"] == "pull_conversions"
    ]
    assert pulls
    assert {ti["pool"] for ti in pulls} == {pool}
