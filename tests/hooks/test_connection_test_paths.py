"""The ways to test a saved connection today, each against the sandbox (issue 19).

On Airflow 3.3.2 the UI's Test button on a *saved* connection sends ``port: 0`` and the masked
password, and the API answers 400 before our hook runs (apache/airflow#73298, fixed upstream).
docs/hook.md gives two ways that work: ``airflow connections test <conn_id>`` and the REST call
with ``port`` left out. Both are exercised here, with the right key and a wrong one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.isolation import isolated, only_isolated


def _cli_test(conn_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow", "connections", "test", conn_id],
        env={**os.environ, "AIRFLOW__CORE__TEST_CONNECTION": "Enabled"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_connections_test_passes_with_the_right_key(sandbox, network_conn) -> None:
    proc = _cli_test(network_conn)
    out = proc.stdout + proc.stderr
    assert "Connection success!" in out, out[-2000:]
    assert sandbox.keys["network"] not in out


def test_cli_connections_test_fails_clearly_with_a_wrong_key(sandbox, make_connection) -> None:
    wrong = "wrong-key-0123456789abcdef"
    conn = make_connection("afn_wrong_key", host=sandbox.base_url, key=wrong)
    proc = _cli_test(conn)
    out = proc.stdout + proc.stderr
    assert "Connection failed" in out, out[-2000:]
    assert "401" in out
    assert wrong not in out


@pytest.mark.timeout(600)
def test_rest_test_calls_in_a_fresh_process() -> None:
    isolated(f"{__file__}::test_rest_test_call_with_port_left_out")


@only_isolated
@pytest.mark.parametrize("right_key", [True, False])
def test_rest_test_call_with_port_left_out(
    airflow_db, sandbox, monkeypatch, right_key: bool
) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__TEST_CONNECTION", "Enabled")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "True")
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    key = sandbox.keys["network"] if right_key else "wrong-key-0123456789abcdef"
    body = {
        "connection_id": "afn_rest_test",
        "conn_type": "affiliate_network",
        "host": sandbox.base_url,
        "password": key,
        "extra": json.dumps({"portal": "network"}),
    }  # no "port": the body docs/hook.md gives
    client = TestClient(create_app("core"))
    answer = client.post("/api/v2/connections/test", json=body)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["status"] is right_key, result
    assert key not in answer.text
    if not right_key:
        assert "401" in result["message"]
