"""The demo, run twice in the same checkout: the second run works too, and no warning is
printed.

Each demo starts a fresh sandbox on a new port, so the first run's sync ledger describes a
network that no longer exists: the second run must not stop on "this ledger records what
was applied to http://127.0.0.1:<old port>/v1".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(900)
def test_the_demo_runs_twice_in_one_checkout_and_says_why_a_task_failed(tmp_path) -> None:
    """The whole demo (the README's command), then a second demo in the same checkout: the
    offer sync, whose ledger is the old network's, and the on-hold review with a ceiling it must
    trip (a copied ``include/`` allowing a 10 % reject share, so it stops whatever the world):
    the sync works, the review's failure is said in the summary and the demo exits 1."""
    for name in ("dags", "plugins", "demo"):
        (tmp_path / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "include", tmp_path / "include")
    runs = []
    for extra in ([], ["--dags", "affiliate_offer_sync", "affiliate_onhold_review"]):
        if extra:
            _trip_the_review_guardrail(tmp_path / "include" / "onhold_rules.yaml")
        proc = subprocess.run(
            [sys.executable, "-m", "demo", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=800,
            check=False,
        )
        runs.append(proc)
        # No warning reaches the user (it printed InsecureKeyLengthWarning four times).
        warned = [x for x in (proc.stdout + proc.stderr).splitlines() if "Warning" in x]
        assert warned == [], warned[:5]
        if not extra:  # the summaries the first demo wrote, before the second replaces them
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            _assert_readable(proc.stdout, tmp_path)
    second = runs[1]
    assert "previous demo's outputs are now in" in second.stdout
    assert second.returncode == 1, second.stdout[-3000:] + second.stderr[-3000:]
    assert re.search(r"offer sync applied: \d+ created, \d+ changed, \d+ unchanged", second.stdout)
    _assert_the_failure_is_said(second.stdout)
    # The connections live in the metadata DB (the UI lists them), once each after two runs,
    # pointing at the second run's sandbox.
    import sqlite3

    with sqlite3.connect(tmp_path / ".airflow" / "airflow.db") as db:
        rows = db.execute(
            "SELECT conn_id, host FROM connection WHERE conn_id = 'affiliate_network_default'"
        ).fetchall()
    assert len(rows) == 1
    assert rows[0][1] in second.stdout  # "[demo] sandbox: <url> ..."
    assert (tmp_path / "data.previous" / "sync").is_dir()
    assert (tmp_path / "data" / "sync").is_dir()


def _trip_the_review_guardrail(rules: Path) -> None:
    text, n = re.subn(r"(?m)^(\s+max_reject_share:) [0-9.]+", r"\1 0.1", rules.read_text())
    assert n == 1
    rules.write_text(text)


def _assert_the_failure_is_said(out: str) -> None:
    """A task that fails shows its error's first line and its next step in the demo's summary,
    never zeros or ``?..?`` for figures nobody computed (issue 43)."""
    assert "FAILED (a task failed)" in out, out
    # The error's first line (the guardrail, the share against the ceiling) and the next step.
    flat = " ".join(line.strip() for line in out.splitlines())
    assert re.search(
        r"task review FAILED: GuardrailError: On-hold review stopped before any write: "
        r"reject share [\d.]+% \(\d+/\d+ decided\) > max_reject_share 10\.0%",
        flat,
    ), out
    assert "next step: Check the top rejecting rules against the audit file" in flat, out
    assert "Runbook: docs/runbook.md#guardrail-failures" in flat, out
    # No figure stands for the review that did not happen.
    assert "?..?" not in out
    assert not re.search(r"\b0 on hold|approved +0|rejected +0|waiting 0", out), out
    lines = out.splitlines()
    assert len(lines) <= 40, out
    assert max(len(line) for line in lines) <= 130, out


def _assert_readable(out: str, project: Path) -> None:
    """The three DAGs' output fits on one screen, in words: rows per day and their verdicts,
    decisions with money per currency, objects created/changed/unchanged, then the files with
    the full summaries (it printed 24 KB of raw JSON, a HITL answer's ``responded_at`` as
    ``{"__classname__": "datetime.datetime", ...}``)."""
    lines = out.splitlines()
    assert len(lines) <= 40, out
    assert max(len(line) for line in lines) <= 130, out
    assert "__classname__" not in out
    assert not [line for line in lines if "{" in line and "-c '" not in line], out
    assert "conversions landed, 8 day(s)" in out  # the run's day and 7 trailing days
    assert out.count(" ok") == 8  # each day reconciled
    assert re.search(r"approved +\d+ +USD [\d,]+\.\d\d", out), out
    assert re.search(r"rejected +\d+ +USD [\d,]+\.\d\d", out), out
    assert "waiting 0" in out
    assert re.search(r"offer sync applied: \d+ created, \d+ changed, \d+ unchanged", out), out
    for dag_id in ("affiliate_daily_reports", "affiliate_onhold_review", "affiliate_offer_sync"):
        summary = project / ".airflow" / "demo-logs" / f"{dag_id}.summary.json"
        assert f"full summaries: {summary.relative_to(project)}" in out
        assert json.loads(summary.read_text())  # every task's summary, in full


def test_the_ui_port_is_where_the_workers_call(tmp_path) -> None:
    """``--ui-port``: what ``airflow standalone`` gets makes Airflow's own resolution of the
    execution API URL (the task runners' only way in) follow the port; with the port alone it
    stayed at 8080 and every task failed before it started, with an empty log (issue 43)."""
    from demo.run import standalone_env

    code = (
        "from airflow.configuration import conf\n"
        "from airflow.executors.base_executor import get_execution_api_server_url\n"
        "print(conf.get('api', 'port'), conf.get('api', 'host'), get_execution_api_server_url())"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), **standalone_env(18080)}
    env.pop("AIRFLOW__CORE__EXECUTION_API_SERVER_URL")  # derived from base_url alone, too
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert proc.stdout.split() == ["18080", "127.0.0.1", "http://127.0.0.1:18080/execution/"]
    assert standalone_env(18080)["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == (
        "http://127.0.0.1:18080/execution/"
    )


@pytest.mark.e2e  # a real scheduler and API server (`-m "not e2e"` leaves it out)
@pytest.mark.timeout(400)
def test_the_ui_runs_a_task_on_another_port(tmp_path) -> None:
    """``python -m demo --ui --ui-port <not 8080>`` for real: a triggered run's first task
    succeeds (it reached the execution API on that port), then SIGINT stops everything."""
    import httpx

    for name in ("dags", "include", "plugins", "demo"):
        (tmp_path / name).symlink_to(ROOT / name)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "ui.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "demo", "--ui", "--ui-port", str(port)],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    dag_id = "affiliate_offer_sync"  # no schedule: unpausing it starts nothing by itself
    state = None
    try:
        deadline = time.monotonic() + 300
        passwords = tmp_path / ".airflow" / "simple_auth_manager_passwords.json.generated"
        headers: dict[str, str] = {}
        while time.monotonic() < deadline and not headers:
            assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
            time.sleep(3)
            with contextlib.suppress(httpx.HTTPError, OSError, ValueError, KeyError):
                password = json.loads(passwords.read_text())["admin"]
                token = httpx.post(
                    f"{base}/auth/token", json={"username": "admin", "password": password}
                )
                headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        while time.monotonic() < deadline:  # the DAG is listed once the processor parsed it
            unpaused = httpx.patch(
                f"{base}/api/v2/dags/{dag_id}", json={"is_paused": False}, headers=headers
            )
            if unpaused.is_success:
                break
            time.sleep(3)
        run = httpx.post(
            f"{base}/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None}, headers=headers
        )
        assert run.is_success, run.text
        url = f"{base}/api/v2/dags/{dag_id}/dagRuns/{run.json()['dag_run_id']}/taskInstances"
        while time.monotonic() < deadline and state not in ("success", "failed"):
            time.sleep(3)
            state = httpx.get(f"{url}/validate", headers=headers).json().get("state")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        log.close()
    assert state == "success", (tmp_path / "ui.log").read_text()[-3000:]
