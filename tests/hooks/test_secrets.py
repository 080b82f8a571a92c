"""The API key never reaches a log line (at DEBUG), an exception or a repr."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from affiliate_network.exceptions import AffiliateNetworkError, OutcomeUnknownError


def _all_text(exc: BaseException | None) -> str:
    """Everything an exception shows: str, repr, args, and its whole cause/context chain."""
    parts = []
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts += [str(exc), repr(exc), repr(exc.args)]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def test_key_never_in_debug_logs_errors_or_reprs(sandbox, make_connection, make_hook, debug_logs):
    key = sandbox.keys["network"]
    conn = make_connection("an_secret", host=sandbox.base_url, key=key, timeout=0.5)
    hook = make_hook(conn, max_attempts=2)
    catalog = sandbox.catalog()
    errors: list[BaseException] = []

    # successes: a read and a paged pull
    hook.get_offer_url(catalog["network_offer_url_ids"][0])
    day = catalog["last_date"]
    list(hook.iter_conversions(from_date=day, to_date=day, timezone_id=67, page_size=200))
    # failures: 404, 400, outcome unknown, retried 503, connection refused
    sandbox.set_faults(apply_then_delay_paths=["/networks/categories"], apply_then_delay_s=1.5)
    for call in (
        lambda: hook.get_offer_url(987654321),
        lambda: list(
            hook.iter_conversions(from_date="2020-01-01", to_date="2020-01-01", timezone_id=999)
        ),
        lambda: hook.create_category(name="secret-test", status="active"),
    ):
        with pytest.raises(AffiliateNetworkError) as info:
            call()
        errors.append(info.value)
    assert isinstance(errors[-1], OutcomeUnknownError)
    sandbox.set_faults(fail_hard=503)
    with pytest.raises(AffiliateNetworkError) as info:
        hook.get_offer_url(catalog["network_offer_url_ids"][0])
    errors.append(info.value)
    sandbox.clear_faults()
    down = make_connection("an_secret_down", host="http://127.0.0.1:9/v1", key=key)
    with pytest.raises(AffiliateNetworkError) as info:
        make_hook(down, max_attempts=1).get_offer_url(1)
    errors.append(info.value)
    ok, message = hook.test_connection()

    text = debug_logs.text()
    # The debug lines really were captured (method, path, status, elapsed, attempt) ...
    assert "GET /networks/offerurls/987654321 -> 404 in " in text
    assert "(attempt 1/2)" in text
    assert re.search(r"pulled \d+ rows in \d+ slices \(\d+ requests: [^)]*\), 0 retries in", text)
    # ... and the key is in none of them.
    assert key not in text
    for error in errors:
        assert key not in _all_text(error)
    assert key not in repr(hook)
    assert ok is True
    assert key not in message


_PROBE_DAG = """
import pendulum
from airflow.sdk import dag, task


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def mask_probe():
    @task
    def pull(day):
        from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

        hook = AffiliateNetworkHook("mask_probe", concurrency=4)
        assert hook.test_connection()[0]
        rows = hook.iter_conversions(from_date=day, to_date=day, timezone_id=1, page_size=50)
        return sum(1 for _ in rows)

    pull("{day}")


mask_probe()
"""


def test_the_hook_adds_no_masked_secret_registration_of_its_own_at_debug(
    sandbox, airflow_db, tmp_path
):
    """Under ``airflow dags test`` at DEBUG, the in-process supervisor logs every masked-secret
    registration, value included (``Sending request msg=MaskSecret(value=...)``). Airflow's own
    connection lookup makes one for the password: that line is Airflow's (docs/runbook.md,
    "Security notes"). The hook adds none: it does not re-register a key Airflow already masks,
    and it does not look the connection up again for each of its sessions.
    """
    key = sandbox.keys["network"]
    day = sandbox.catalog()["last_date"]
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "mask_probe.py").write_text(_PROBE_DAG.replace("{day}", day))
    conn = {
        "conn_type": "affiliate_network",
        "host": sandbox.base_url,
        "password": key,
        "extra": {"portal": "network"},
    }
    env = {
        **os.environ,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "DEBUG",
        "AIRFLOW_CONN_MASK_PROBE": json.dumps(conn),
    }
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "dags", "test", "mask_probe"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "msg=MaskSecret(" in output  # DEBUG really was on and the registrations were logged
    assert " slices (" in output  # the sliced pull ran (several sessions)
    leaks = [line for line in output.splitlines() if key in line]
    # At most Airflow's own registration of the connection password, nothing from the hook.
    assert len(leaks) <= 1, "\n".join(leaks)
    assert all("MaskSecret(" in line for line in leaks)


def test_the_key_sent_in_the_real_familys_header_never_reaches_a_log_or_an_error(
    sandbox, make_connection, make_hook, debug_logs
):
    """``key_header: X-Eflow-API-Key``: calls succeed and fail as with the spec's header, and
    the key shows in no log line or error. The header's name itself stays readable: the extra
    is not named like a secret (Airflow masks the values of extras whose name holds
    ``api_key``), so neither the name nor a log line mentioning it is turned into ``***``."""
    from airflow.sdk.log import redact

    key = sandbox.keys["network"]
    conn = make_connection(
        "an_secret_alias", host=sandbox.base_url, key=key, key_header="X-Eflow-API-Key"
    )
    hook = make_hook(conn, max_attempts=2)
    catalog = sandbox.catalog()
    hook.get_offer_url(catalog["network_offer_url_ids"][0])
    day = catalog["last_date"]
    assert list(hook.iter_conversions(from_date=day, to_date=day, timezone_id=67, page_size=200))
    errors = []
    with pytest.raises(AffiliateNetworkError) as info:
        hook.get_offer_url(987654321)  # 404
    errors.append(info.value)
    revoked = make_connection(
        "an_secret_alias_revoked",
        host=sandbox.base_url,
        key=sandbox.keys["revoked"],
        key_header="X-Eflow-API-Key",
    )
    with pytest.raises(AffiliateNetworkError) as info:
        make_hook(revoked, max_attempts=1).get_offer_url(1)  # 401
    errors.append(info.value)
    text = debug_logs.text()
    assert "GET /networks/offerurls/987654321 -> 404 in " in text
    assert key not in text
    assert sandbox.keys["revoked"] not in text
    for error in errors:
        assert key not in _all_text(error)
        assert sandbox.keys["revoked"] not in _all_text(error)
    assert key not in repr(hook)
    # The key travelled in the real family's header (and in no other).
    assert [h for h, v in hook.get_conn().headers.items() if v == key] == ["X-Eflow-API-Key"]
    assert redact("X-Eflow-API-Key") == "X-Eflow-API-Key"
    assert redact(key) != key  # the key itself is masked
