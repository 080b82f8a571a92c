"""``python -m demo``: run the project's DAGs end to end against the local sandbox.

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
import re
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

from demo import demo_include

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
    from affiliate_network.settings.paths import PROJECT_ROOT

    return PROJECT_ROOT


def _airflow_env(root: Path) -> dict[str, str]:
    home = root / ".airflow"
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(root / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        # include/ with the sandbox's desired offer state over its template (demo_include).
        "AFFILIATE_NETWORK_INCLUDE_DIR": str(home / "include"),
        "AFFILIATE_NETWORK_DATA_BASE": str(root / "data"),
        # The reporting tasks take slots of the pool the demo creates (REPORTING_POOL).
        "AFFILIATE_NETWORK_REPORTING_POOL": REPORTING_POOL[0],
        # The demo's review and offer sync write to its own sandbox (a new deployment only
        # plans).
        "AFFILIATE_ONHOLD_ARMED": "true",
        "AFFILIATE_OFFER_SYNC_ARMED": "true",
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


def _xcom_values(dag_id: str, run_id: str) -> dict[str, Any]:
    """Every task's XCom return value of one run, by task label (``task[map_index]``), with
    Airflow's serialized objects (a HITL answer's ``responded_at``) turned back into values."""
    import importlib

    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    deserialize: Any = None
    # airflow.sdk.serde from 3.2 (where a 3.3 XCom's objects are read); before, in core.
    for module in ("airflow.sdk.serde", "airflow.serialization.serde"):
        with contextlib.suppress(ImportError):
            deserialize = importlib.import_module(module).deserialize
            break

    values: dict[str, Any] = {}
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
            if deserialize is not None:
                with contextlib.suppress(Exception):  # a value serde cannot read stays as is
                    value = deserialize(value)
            label = row.task_id if row.map_index < 0 else f"{row.task_id}[{row.map_index}]"
            values[label] = value
    return values


def _failed_tasks(dag_id: str, run_id: str) -> list[str]:
    """Labels (``task[map_index]``) of the run's task instances that failed, in task order."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        rows = (
            session.query(TaskInstance.task_id, TaskInstance.map_index)
            .filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
            .filter(TaskInstance.state == TaskInstanceState.FAILED)
            .order_by(TaskInstance.task_id, TaskInstance.map_index)
            .all()
        )
    return [task if index < 0 else f"{task}[{index}]" for task, index in rows]


#: ``airflow dags test`` brackets each task's lines with these (3.1 to 3.3).
_TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(\S+) map_index=(-?\d+)")
#: A log record's first line (the lines of a traceback and of its exception do not start so).
_LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d")


def task_errors(log_text: str) -> dict[str, tuple[str, str]]:
    """Each failed task's error as ``airflow dags test`` logged it: task label -> (the error's
    first line, its next step).

    The error's first line is the last line of the task's last traceback (``ClassName:
    message``, the module left out). The next step is what the project's errors end with
    (:func:`affiliate_network.exceptions.next_step_line`: ``Untouched: ... Next step: ...
    Runbook: ...``), from ``Next step:`` on; empty for an error that has none.

    :param log_text: the output of ``airflow dags test`` (the demo's ``<dag_id>.log``).
    """
    errors: dict[str, tuple[str, str]] = {}
    task = ""
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        started = _TASK_START.search(line)
        if started:
            name, index = started.group(1), int(started.group(2))
            task = name if index < 0 else f"{name}[{index}]"
            continue
        if not task or not line.startswith("Traceback (most recent call last):"):
            continue
        rest = lines[i + 1 :]
        # The frames are indented; the first line that is not is the exception's.
        at = next((j for j, x in enumerate(rest) if x and not x[0].isspace()), None)
        if at is None:
            continue
        head = rest[at]
        exc, _, message = head.partition(": ")
        first = f"{exc.rsplit('.', 1)[-1]}: {message}" if message else exc.rsplit(".", 1)[-1]
        step = ""
        for x in rest[at + 1 :]:
            if _LOG_RECORD.match(x) or x.startswith("Traceback ("):
                break
            if "Next step: " in x:
                step = x.split("Next step: ", 1)[1].strip()
                break
        errors[task] = (first.strip(), step)
    return errors


def _failure_lines(task: str, error: tuple[str, str] | None, log_path: Path) -> list[str]:
    """A failed task in the summary: its error's first line and its next step (wrapped)."""
    if error is None:
        first, step = "no error in its log", f"read {_shown(log_path)}"
    else:
        first, step = (_relative_paths(x) for x in error)
    wrap = textwrap.TextWrapper(width=122, subsequent_indent="  ", break_on_hyphens=False)
    lines = wrap.wrap(f"task {task} FAILED: {first}")
    if step:
        lines += wrap.wrap(f"  next step: {step}")
    return lines


def _relative_paths(text: str) -> str:
    """The text with paths under the working directory made relative (shorter lines)."""
    return text.replace(f"{Path.cwd()}{os.sep}", "")


def _print_summaries(dag_id: str, run_id: str, log_dir: Path) -> None:
    """A few lines a person reads in seconds, then the file with every task's full summary.

    A failed task's lines are its error and its next step (from the DAG's log): a DAG's
    describer only speaks when the task its figures come from succeeded, so a failed run never
    shows zeros standing for figures nobody computed.
    """
    values = _xcom_values(dag_id, run_id)
    path = log_dir / f"{dag_id}.summary.json"
    path.write_text(json.dumps(values, indent=2, default=str) + "\n")
    lines: list[str] = []
    failed = _failed_tasks(dag_id, run_id)
    if failed:
        log_path = log_dir / f"{dag_id}.log"
        errors = task_errors(log_path.read_text()) if log_path.is_file() else {}
        for task in failed:
            lines += _failure_lines(task, errors.get(task), log_path)
    describe = _DESCRIBERS.get(dag_id)
    head_task = _HEAD_TASKS.get(dag_id)
    if describe is None:
        lines.append(f"{len(values)} task summaries")
    elif head_task is None or head_task in values:
        lines += describe(values)
    for line in lines:
        print(f"    {line}")
    print(f"    full summaries: {_shown(path)}")


def _shown(path: Path | str) -> str:
    """A path relative to the working directory when under it (shorter lines)."""
    with contextlib.suppress(ValueError):
        return str(Path(path).relative_to(Path.cwd()))
    return str(path)


def _describe_daily(values: dict[str, Any]) -> list[str]:
    """Rows landed per day, each day reconciled or not; the affiliate reports' rows."""
    days: dict[str, int] = {}
    run_days: list[str] = []
    for task in ("repull_trailing_window", "pull_conversions"):
        summary = values.get(task) or {}
        for part in summary.get("partitions", []):
            days[part["date"]] = part["rows"]
        if task == "pull_conversions":
            run_days = list(summary.get("lands", []))
    verdicts = {
        p["date"]: p.get("verdict", "?")
        for p in (values.get("reconcile_conversions") or {}).get("partitions", [])
    }
    words = {"reconciled": "ok", "differs": "DIFFERS"}
    cells = [
        f"{d} {rows:>6,} {words.get(verdicts.get(d, ''), 'not compared')}"
        for d, rows in sorted(days.items())
    ]
    lines = [
        f"conversions landed, {len(days)} day(s), {sum(days.values()):,} rows "
        f"(run's day {', '.join(run_days) or 'none'}); rows per day, reconciled:"
    ]
    lines += ["  " + "   ".join(cells[i : i + 3]) for i in range(0, len(cells), 3)]
    reports = [
        f"{v['affiliate_id']}: {v['rows']:,} rows"
        for k, v in sorted(values.items())
        if k.startswith("affiliate_report[") and isinstance(v, dict)
    ]
    if reports:
        lines.append(f"affiliate reports: {', '.join(reports)}")
    return lines


def _money(records: list[dict[str, Any]]) -> str:
    """Payout per currency (never summed across currencies)."""
    from decimal import Decimal

    totals: dict[str, Decimal] = {}
    for rec in records:
        currency = str(rec.get("currency_id") or "?")
        totals[currency] = totals.get(currency, Decimal(0)) + Decimal(str(rec.get("payout") or 0))
    if not totals:
        return "no payout"
    return ", ".join(f"{c} {v:,.2f}" for c, v in sorted(totals.items()))


def _audit(path: str | None) -> list[dict[str, Any]]:
    if not path or not Path(path).is_file():
        return []
    with Path(path).open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _chose(record: dict[str, Any], action: str) -> bool:
    """Whether a reviewer's answer in the audit means ``action`` (approve or reject)."""
    return record.get("action") == action or action in str(record.get("human_choice", "")).lower()


def _describe_review(values: dict[str, Any]) -> list[str]:
    """Approved, rejected, kept and waiting, each with its payout per currency."""
    review = values.get("review") or {}
    human = values.get("apply_human_decisions") or {}
    dry = bool(review.get("dry_run"))
    decided = _audit(review.get("audit_path"))
    answered = _audit(human.get("audit_path"))

    def picked(recs: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
        return [r for r in recs if r.get("action") == action and (dry or r.get("applied"))]

    by_human = [r for r in answered if r.get("applied")]
    approved = picked(decided, "approve") + [r for r in by_human if _chose(r, "approve")]
    rejected = picked(decided, "reject") + [r for r in by_human if _chose(r, "reject")]
    to_review = [r for r in decided if r.get("action") == "review"]
    kept = [r for r in answered if not r.get("applied")]
    window = review.get("window") or ["?", "?"]
    verb = "would be " if dry else ""
    lines = [
        f"on-hold review {window[0]}..{window[-1]}: {review.get('on_hold', 0)} on hold, "
        f"{review.get('eligible', 0)} old enough to decide" + (" (dry run)" if dry else ""),
        f"  {verb}approved {len(approved):>5}   {_money(approved)}",
        f"  {verb}rejected {len(rejected):>5}   {_money(rejected)}",
        f"  sent to a reviewer {len(to_review)} ({_money(to_review)}): kept on hold "
        f"{len(kept)}, waiting {human.get('unanswered', 0 if not to_review else len(to_review))}",
    ]
    left = int(review.get("too_young", 0)) + int(review.get("undecided", 0))
    lines.append(f"  left on hold (too young or no rule matched): {left}")
    return lines


def _describe_sync(values: dict[str, Any]) -> list[str]:
    """Objects created, changed, unchanged; what blocks the apply."""
    plan = values.get("plan") or {}
    applies = [
        v
        for k, v in values.items()
        if k not in ("plan", "validate") and isinstance(v, dict) and "counts" in v
    ]
    dry = not applies or all(v.get("dry_run") for v in applies)
    source = [plan] if dry else applies
    total: dict[str, int] = {}
    for summary in source:
        for key, n in (summary.get("counts") or {}).items():
            total[key] = total.get(key, 0) + int(n)
    head = "offer sync planned (dry run, nothing sent)" if dry else "offer sync applied"
    lines = [
        f"{head}: {total.get('create', 0)} created, {total.get('update', 0)} changed, "
        f"{total.get('unchanged', 0)} unchanged"
        + "".join(f", {total[k]} {k}" for k in ("drift", "unresolved") if total.get(k))
    ]
    blocked = plan.get("blocked") or []
    lines.append(f"blocked: {', '.join(blocked) if blocked else 'nothing'}")
    if plan.get("ledger"):
        lines.append(f"ledger: {_shown(plan['ledger'])}")
    return lines


_DESCRIBERS = {
    "affiliate_daily_reports": _describe_daily,
    "affiliate_onhold_review": _describe_review,
    "affiliate_offer_sync": _describe_sync,
}
#: The task whose summary a DAG's describer reads its figures from: without it (the task
#: failed, or never ran), the describer would print zeros, so it is not asked.
_HEAD_TASKS = {
    "affiliate_daily_reports": "pull_conversions",
    "affiliate_onhold_review": "review",
    "affiliate_offer_sync": "plan",
}


def _describe_requests(counts: dict[str, Any], log_dir: Path) -> str:
    """What the sandbox saw, in one line; the per-route counts in a file."""
    path = log_dir / "sandbox-requests.json"
    path.write_text(json.dumps(counts, indent=2, sort_keys=True) + "\n")
    routes: dict[str, int] = counts.get("by_route") or {}
    total = sum(routes.values())
    # Reads: GET, and the reporting queries (POST .../reporting/...); the rest writes.
    writes = sum(
        n
        for route, n in routes.items()
        if not route.startswith("GET ")
        and not (route.startswith("POST ") and "/reporting/" in route)
    )
    return f"sandbox saw {total} requests, {writes} of them writes; by route: {_shown(path)}"


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


def standalone_env(port: int) -> dict[str, str]:
    """The settings ``airflow standalone`` gets on top of the demo's (:func:`_airflow_env`).

    The API server listens on ``port`` (``[api] port``), and everything that calls it follows:
    the task runners call the execution API at ``[core] execution_api_server_url``, whose
    default is ``[api] base_url`` + ``/execution/``, and ``base_url`` defaults to
    ``http://localhost:8080`` whatever the port (``get_execution_api_server_url`` in
    ``airflow.executors.base_executor``). With only the port changed, every task failed before
    it started, with an empty log. ``base_url`` also makes the task log links point at the UI.

    :param port: the API server's (and UI's) port on 127.0.0.1.
    """
    base_url = f"http://127.0.0.1:{port}"
    return {
        "AIRFLOW__CORE__PARALLELISM": "4",  # 2-core machines: the default spawns 32
        "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
        "AIRFLOW__API__HOST": "127.0.0.1",  # a dev UI: loopback only
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"{base_url}/",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
    }


def _standalone(airflow: list[str], port: int, root: Path) -> int:
    """Run ``airflow standalone`` in its own process session; SIGINT stops it and its children."""
    os.environ.update(standalone_env(port))
    # standalone starts its components as `airflow ...`: this environment's bin must come first.
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    print(f"[demo] airflow standalone on http://127.0.0.1:{port} (login printed below and kept in")
    print(f"       {root / '.airflow'}/simple_auth_manager_passwords.json.generated); Ctrl-C stops")

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


def _set_aside_previous_outputs(data: Path, db: Path) -> None:
    """Each demo starts a fresh sandbox (a new world on a new port): the previous demo's sync
    ledger, on-hold state and partitions describe a network that no longer exists, and the
    ledger would (rightly) refuse the new one. They are kept one generation, in ``data.previous``.

    The metadata DB's runs are those outputs' runs: the DB goes aside with them (to
    ``<db>.previous``), so the UI's runs and the network page (which reads the outputs) always
    show the same generation, never runs whose outputs are gone (issue 43). The demo migrates a
    fresh DB and stores its pool and connections again; the UI's login lives outside the DB.

    :param data: the outputs' base (``data/``).
    :param db: the SQLite metadata DB (``.airflow/airflow.db``).
    """
    moved = []
    if data.exists() and any(data.iterdir()):
        previous = data.with_name(f"{data.name}.previous")
        if previous.exists():
            shutil.rmtree(previous)
        data.rename(previous)
        moved.append(f"outputs are now in {_shown(previous)}")
    if db.exists():
        for suffix in ("", "-journal", "-wal", "-shm"):  # SQLite's side files go with it
            side = db.with_name(db.name + suffix)
            if side.exists():
                side.replace(side.with_name(f"{db.name}.previous{suffix}"))
        moved.append(f"runs in {_shown(db.with_name(f'{db.name}.previous'))}")
    if moved:
        print(f"[demo] the previous demo's {', its '.join(moved)}")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
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
    return parser.parse_args(argv)


def _run_dags(args: argparse.Namespace, airflow: list[str], log_dir: Path) -> int:
    """Run each demo DAG with ``airflow dags test``; the number that failed."""
    failures = 0
    for dag_id, demo_conf in DEMO_DAGS:
        conf = {**demo_conf, "dry_run": True} if args.dry_run and demo_conf else demo_conf
        if args.dags and dag_id not in args.dags:
            continue
        log_path = log_dir / f"{dag_id}.log"
        print(f"[demo] airflow dags test {dag_id} {args.date} -c '{json.dumps(conf)}'")
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
        print(f"  -> {state} in {time.monotonic() - t0:.1f}s; log: {_shown(log_path)}")
        run_id = _latest_run_id(dag_id)
        if run_id:
            _print_summaries(dag_id, run_id, log_dir)
        elif state != "success":  # no run at all (the DAG did not load): the log's last word
            last = [x for x in log_path.read_text().splitlines() if x.strip()][-1:]
            print(f"    {_relative_paths(last[0])[:122] if last else 'nothing in its log'}")
    return failures


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    root = _project_root()
    env = _airflow_env(root)
    os.environ.update(env)  # before airflow is imported in this process
    (root / ".airflow").mkdir(exist_ok=True)
    include = Path(env["AFFILIATE_NETWORK_INCLUDE_DIR"])
    shutil.rmtree(include, ignore_errors=True)  # built again: nothing left of a previous run
    demo_include(root / "include", include)
    log_dir = root / ".airflow" / "demo-logs"
    log_dir.mkdir(exist_ok=True)

    from affiliate_network_sandbox.testing import start_sandbox
    from demo.connections import (
        sandbox_connection_records,
        store_connections,
    )

    started = time.monotonic()
    print(f"[demo] project: {root}")
    _set_aside_previous_outputs(
        Path(env["AFFILIATE_NETWORK_DATA_BASE"]), root / ".airflow" / "airflow.db"
    )
    with start_sandbox(seed=DEMO_SEED) as sandbox:
        print(f"[demo] sandbox: {sandbox.base_url} (seed {DEMO_SEED}, pid {sandbox.pid})")
        # The network's first day with data: a run's day before it is refused, not landed
        # as an empty partition (the DAGs' subprocesses inherit this environment).
        os.environ["AFFILIATE_NETWORK_FIRST_DAY"] = str(sandbox.catalog()["first_date"])
        airflow = [sys.executable, "-m", "airflow"]
        print("[demo] migrating the metadata DB (SQLite in .airflow/) ...")
        subprocess.run([*airflow, "db", "migrate"], check=True, capture_output=True)
        # The pool reporting tasks take slots of (README "Sharing one network's quota").
        subprocess.run([*airflow, "pools", "set", *REPORTING_POOL], check=True, capture_output=True)
        _quiet_airflow_in_process()
        # In the metadata DB (replaced on every run: each demo's sandbox has new keys and a new
        # port), so Admin -> Connections lists them and Test works in the UI.
        stored = store_connections(sandbox_connection_records(sandbox, include))
        print("[demo] connections in the metadata DB:")
        print(f"       {', '.join(stored)}")
        if args.ui:
            return _standalone(airflow, args.ui_port, root)
        failures = _run_dags(args, airflow, log_dir)
        print(f"[demo] {_describe_requests(sandbox.request_counts(), log_dir)}")
    print(f"[demo] outputs under {env['AFFILIATE_NETWORK_DATA_BASE']}")
    print(f"[demo] done in {time.monotonic() - started:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
