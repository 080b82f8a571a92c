"""Error mapping, retries, backoff, Retry-After and give-up, proven by the sandbox's request log."""

from __future__ import annotations

import random
import re

import pytest
import requests

from affiliate_network.exceptions import (
    AuthenticationError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    OutcomeUnknownError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    TransportError,
)


def _raw_error(sandbox, method: str, path: str, key: str, **kwargs) -> tuple[int, str]:
    """What the server itself says for a request: (status, ``error`` else ``Error``)."""
    response = requests.request(
        method, sandbox.base_url + path, headers={"X-Svc-Api-Key": key}, timeout=10, **kwargs
    )
    body = response.json()
    return response.status_code, body.get("error") or body.get("Error")


def test_400_invalid_request_carries_the_server_message(
    network_conn, make_hook, sandbox, requests_to
):
    hook = make_hook(network_conn)
    body = {"from": "2020-01-01", "to": "2020-01-02", "timezone_id": 999}
    status, message = _raw_error(
        sandbox, "POST", "/networks/reporting/conversions", sandbox.keys["network"], json=body
    )
    sandbox.clear_requests()
    with pytest.raises(InvalidRequestError) as info:
        list(hook.iter_conversions(from_date="2020-01-01", to_date="2020-01-02", timezone_id=999))
    assert status == 400
    assert info.value.status_code == 400
    assert info.value.message == message
    assert len(requests_to("/networks/reporting/conversions")) == 1  # not retried


def test_401_revoked_key(sandbox, make_connection, make_hook):
    conn = make_connection("an_revoked", host=sandbox.base_url, key=sandbox.keys["revoked"])
    with pytest.raises(AuthenticationError) as info:
        make_hook(conn).get_offer_url(sandbox.catalog()["network_offer_url_ids"][0])
    assert info.value.status_code == 401
    assert info.value.message == "No authentication method found"
    assert sum(1 for e in sandbox.requests_log() if "/networks/offerurls/" in e["path"]) == 1


def test_403_key_of_another_portal_is_out_of_realm(
    sandbox, make_connection, make_hook, affiliate_id
):
    # A connection that claims "network" but holds an affiliate key: the guard cannot know.
    conn = make_connection(
        "an_wrong_key", host=sandbox.base_url, key=sandbox.keys["affiliate"][affiliate_id]
    )
    with pytest.raises(PermissionDeniedError) as info:
        make_hook(conn).get_offer_url(sandbox.catalog()["network_offer_url_ids"][0])
    assert info.value.status_code == 403
    assert info.value.message == "Out of realm"
    assert sum(1 for e in sandbox.requests_log() if "/networks/offerurls/" in e["path"]) == 1


def test_403_missing_scope_on_a_write(sandbox, make_connection, make_hook):
    conn = make_connection(
        "an_restricted", host=sandbox.base_url, key=sandbox.keys["network_restricted"]
    )
    channel_id = sandbox.catalog()["network_channel_ids"][0]
    status, message = _raw_error(
        sandbox,
        "PUT",
        f"/networks/channels/{channel_id}",
        sandbox.keys["network_restricted"],
        json={"name": "x", "status": "active"},
    )
    sandbox.clear_requests()
    with pytest.raises(PermissionDeniedError) as info:
        make_hook(conn).update_channel(channel_id, name="x", status="active")
    assert (status, info.value.message) == (403, message)
    assert len(sandbox.requests_log()) == 1


def test_404_missing_record_uses_lowercase_error(network_conn, make_hook, sandbox):
    with pytest.raises(NotFoundError) as info:
        make_hook(network_conn).get_offer_url(987654321)
    assert info.value.status_code == 404
    assert info.value.message == "Can't find entry in the database"
    assert len(sandbox.requests_log()) == 1


def test_404_router_falls_back_to_capitalised_error(network_conn, make_hook, sandbox):
    status, message = _raw_error(sandbox, "GET", "/networks/no/such/route", sandbox.keys["network"])
    sandbox.clear_requests()
    with pytest.raises(NotFoundError) as info:
        make_hook(network_conn).request("GET", "/networks/no/such/route")
    assert status == 404
    assert message  # the router's capitalised ``Error``
    assert info.value.message == message
    assert len(sandbox.requests_log()) == 1


def test_405_method_not_allowed(network_conn, make_hook, sandbox):
    url_id = sandbox.catalog()["network_offer_url_ids"][0]
    path = f"/networks/offerurls/{url_id}"
    status, message = _raw_error(sandbox, "DELETE", path, sandbox.keys["network"])
    sandbox.clear_requests()
    with pytest.raises(MethodNotAllowedError) as info:
        make_hook(network_conn).request("DELETE", path)
    assert (status, info.value.status_code, info.value.message) == (405, 405, message)
    assert len(sandbox.requests_log()) == 1


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (429, RateLimitError),
        (500, ServerError),
        (502, ServerError),
        (503, ServerError),
        (504, ServerError),
    ],
)
def test_retryable_status_gives_up_after_max_attempts(
    status, error_class, network_conn, make_hook, sandbox, fake_time
):
    sandbox.set_faults(fail_hard=status)
    hook = make_hook(network_conn, max_attempts=3, sleep=fake_time.sleep, clock=fake_time.clock)
    url_id = sandbox.catalog()["network_offer_url_ids"][0]
    with pytest.raises(error_class) as info:
        hook.get_offer_url(url_id)
    assert info.value.status_code == status
    assert info.value.message  # the gateway's / endpoint's message, never empty
    # ... and that it was retried: the error a task ends with says so itself.
    assert info.value.message.endswith(": gave up after 3 attempts)"), info.value.message
    assert sum(1 for e in sandbox.requests_log() if "/networks/offerurls/" in e["path"]) == 3
    assert len(fake_time.sleeps) == 2


def test_backoff_doubles_from_base_delay_and_caps(network_conn, make_hook, sandbox, fake_time):
    sandbox.set_faults(fail_hard=500)
    hook = make_hook(
        network_conn,
        max_attempts=6,
        base_delay=1.0,
        max_delay=5.0,
        jitter=0.0,
        sleep=fake_time.sleep,
        clock=fake_time.clock,
    )
    with pytest.raises(ServerError):
        hook.get_offer_url(sandbox.catalog()["network_offer_url_ids"][0])
    assert fake_time.sleeps == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_backoff_jitter_is_bounded_and_seeded(network_conn, make_hook, sandbox, fake_time):
    sandbox.set_faults(fail_hard=503)
    hook = make_hook(
        network_conn,
        max_attempts=5,
        base_delay=1.0,
        max_delay=30.0,
        jitter=1.0,
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        rng=random.Random(3),
    )
    with pytest.raises(ServerError):
        hook.get_offer_url(sandbox.catalog()["network_offer_url_ids"][0])
    expected_rng = random.Random(3)
    assert fake_time.sleeps == [base + expected_rng.random() for base in (1.0, 2.0, 4.0, 8.0)]
    assert all(base <= s < base + 1 for s, base in zip(fake_time.sleeps, (1, 2, 4, 8), strict=True))


def test_retry_after_is_honoured(network_conn, make_hook, sandbox, fake_time):
    sandbox.set_faults(fail_hard=429, retry_after_s=7)
    hook = make_hook(
        network_conn, max_attempts=3, base_delay=0.01, sleep=fake_time.sleep, clock=fake_time.clock
    )
    with pytest.raises(RateLimitError):
        hook.get_offer_url(sandbox.catalog()["network_offer_url_ids"][0])
    assert fake_time.sleeps[:2] == [7.0, 7.0]


def test_transient_faults_are_retried_to_success(network_conn, make_hook, sandbox, fake_time):
    url_id = sandbox.catalog()["network_offer_url_ids"][0]
    sandbox.set_faults(error_rate=0.5, seed=11, paths=["/networks/offerurls"])
    hook = make_hook(network_conn, max_attempts=10, sleep=fake_time.sleep, clock=fake_time.clock)
    for _ in range(5):
        assert hook.get_offer_url(url_id)["network_offer_url_id"] == url_id
    statuses = [e["status"] for e in sandbox.requests_log() if "/networks/offerurls/" in e["path"]]
    assert statuses.count(200) == 5
    assert len(statuses) > 5  # some attempts failed and were retried
    assert len(fake_time.sleeps) == len(statuses) - 5


def test_4xx_is_never_retried(network_conn, make_hook, sandbox, fake_time):
    hook = make_hook(network_conn, max_attempts=5, sleep=fake_time.sleep, clock=fake_time.clock)
    with pytest.raises(NotFoundError):
        hook.get_offer_url(987654321)
    with pytest.raises(InvalidRequestError):
        list(hook.iter_conversions(from_date="2020-01-01", to_date="2020-01-01", timezone_id=999))
    assert fake_time.sleeps == []
    assert [e["status"] for e in sandbox.requests_log()] == [404, 400]


def test_connection_refused_is_retried_then_reported(make_connection, make_hook, fake_time):
    conn = make_connection("an_nowhere", host="http://127.0.0.1:9/v1", key="some-long-test-key")
    hook = make_hook(conn, max_attempts=3, sleep=fake_time.sleep, clock=fake_time.clock)
    with pytest.raises(TransportError) as info:
        hook.get_offer_url(1)
    assert "connection error on attempt 3 of 3" in str(info.value)
    assert info.value.status_code is None
    assert len(fake_time.sleeps) == 2


def test_a_huge_retry_after_is_capped_and_logged(
    network_conn, make_hook, sandbox, fake_time, debug_logs
):
    # A proxy answering Retry-After: 86400 must not park a worker for a day: the wait is capped
    # at the spec's 30 s backoff ceiling and the cap is logged.
    sandbox.set_faults(fail_hard=503, retry_after_s=86400)
    hook = make_hook(
        network_conn, max_attempts=3, base_delay=0.01, sleep=fake_time.sleep, clock=fake_time.clock
    )
    with pytest.raises(ServerError):
        hook.get_offer_url(sandbox.catalog()["network_offer_url_ids"][0])
    assert fake_time.sleeps[:2] == [30.0, 30.0]
    assert max(fake_time.sleeps) <= 30.0
    assert "Retry-After 86400 s, capped at 30 s" in debug_logs.text()


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_create_is_never_resent_after_a_5xx(network_conn, make_hook, sandbox, fake_time, status):
    # Any 5xx may follow an applied create: the hook reports an unknown outcome, sends it once.
    sandbox.set_faults(fail_hard=status, paths=["/networks/categories"])
    hook = make_hook(network_conn, max_attempts=5, sleep=fake_time.sleep, clock=fake_time.clock)
    with pytest.raises(OutcomeUnknownError, match="not re-sent"):
        hook.create_category(name=f"once-{status}", status="active")
    posts = [e for e in sandbox.requests_log() if e["path"].endswith("/networks/categories")]
    assert [e["status"] for e in posts] == [status]
    assert fake_time.sleeps == []


def test_a_create_refused_with_429_is_resent(network_conn, make_hook, sandbox, fake_time):
    # A 429 is the rate limiter refusing before the request was handled: safe to send again.
    sandbox.set_faults(error_rate=1.0, statuses=[429], paths=["/networks/categories"])
    hook = make_hook(network_conn, max_attempts=3, sleep=fake_time.sleep, clock=fake_time.clock)
    with pytest.raises(RateLimitError):
        hook.create_category(name="after-429", status="active")
    posts = [e for e in sandbox.requests_log() if e["path"].endswith("/networks/categories")]
    assert [e["status"] for e in posts] == [429, 429, 429]


def test_a_pull_that_gives_up_does_not_claim_0_retries(
    network_conn, make_hook, sandbox, fake_time, debug_logs
):
    # "giving up after 3 attempts" was followed by "... 0 retries": the failed page's retries
    # were not counted. The stop line now leaves the count to the error.
    sandbox.set_faults(fail_hard=503)
    hook = make_hook(network_conn, max_attempts=3, sleep=fake_time.sleep, clock=fake_time.clock)
    day = sandbox.catalog()["last_date"]
    with pytest.raises(ServerError) as info:
        list(hook.iter_conversions(from_date=day, to_date=day, timezone_id=67))
    text = debug_logs.text()
    assert "giving up after 3 attempts, last status 503" in text
    assert re.search(r"stopped after 0 rows in \d+ slices \(\d+ requests\) in ", text), text
    assert "retries in" not in text
    assert "gave up after 3 attempts" in str(info.value)
