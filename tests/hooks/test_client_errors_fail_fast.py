"""A 400, 404 or 405 is sent once and fails the task at once (no HTTP retry, no task retry).

Real HTTP to the sandbox: the faults are injected by the sandbox (``PUT /_sandbox/faults``,
``fail_hard``) or are the server's own answer to a bad request, and what was sent is read from
its request log (``GET /_sandbox/requests``). A 503 under the same injection is the control: it
is re-sent up to ``max_attempts`` and keeps the task's retries, so a log that failed to show
retries would fail these tests.
"""

from __future__ import annotations

import datetime as dt

import pytest
from airflow.sdk.exceptions import AirflowFailException

from affiliate_network.exceptions import (
    InvalidRequestError,
    MethodNotAllowedError,
    NonRetryableError,
    NotFoundError,
    ServerError,
)
from tests.support.report_ops import FAST_RETRIES, conversions_op, interval_context

REPORT = "/networks/reporting/conversions"
#: The operators' test retries (``max_attempts`` 8); the hook tests below use the same.
FAST = dict(FAST_RETRIES)
ATTEMPTS = FAST["max_attempts"]


@pytest.fixture
def day(sandbox) -> str:
    """A full day of sandbox data."""
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    return (last - dt.timedelta(days=1)).isoformat()


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(400, InvalidRequestError), (404, NotFoundError), (405, MethodNotAllowedError)],
)
def test_an_injected_client_error_is_sent_once_even_on_an_idempotent_read(
    sandbox, network_conn, make_hook, requests_to, day, status, error_class
) -> None:
    sandbox.set_faults(fail_hard=status, paths=[REPORT])
    sandbox.clear_requests()
    hook = make_hook(network_conn, **FAST)
    with pytest.raises(error_class) as info:
        list(hook.iter_conversions(from_date=day, to_date=day, timezone_id=67))
    assert info.value.status_code == status
    assert isinstance(info.value, NonRetryableError)
    assert [e["status"] for e in requests_to(REPORT)] == [status]


def test_control_an_injected_503_is_retried_and_stays_retryable(
    sandbox, network_conn, make_hook, requests_to, day
) -> None:
    sandbox.set_faults(fail_hard=503, paths=[REPORT])
    sandbox.clear_requests()
    hook = make_hook(network_conn, **FAST)
    with pytest.raises(ServerError) as info:
        list(hook.iter_conversions(from_date=day, to_date=day, timezone_id=67))
    assert not isinstance(info.value, NonRetryableError)
    assert [e["status"] for e in requests_to(REPORT)] == [503] * ATTEMPTS


def test_an_operator_given_a_bad_filter_fails_without_retries(
    sandbox, network_conn, requests_to, tmp_path, day
) -> None:
    """The server's own 400 (an unknown filter type): one request, AirflowFailException."""
    sandbox.clear_requests()
    bad = [{"resource_type": "no_such", "filter_id_value": "1"}]
    op = conversions_op(tmp_path, from_date=day, to_date=day, filters=bad)
    with pytest.raises(InvalidRequestError) as info:
        op.execute(interval_context(day))
    assert isinstance(info.value, AirflowFailException)
    assert info.value.status_code == 400
    assert "resource_type 'no_such'" in info.value.message
    assert [e["status"] for e in requests_to(REPORT)] == [400]


def test_an_operator_meeting_an_injected_400_fails_and_a_503_keeps_its_retries(
    sandbox, network_conn, requests_to, tmp_path, day
) -> None:
    sandbox.set_faults(fail_hard=400, paths=[REPORT])
    sandbox.clear_requests()
    with pytest.raises(InvalidRequestError) as failed:
        conversions_op(tmp_path, from_date=day, to_date=day).execute(interval_context(day))
    assert isinstance(failed.value, AirflowFailException)
    assert len(requests_to(REPORT)) == 1

    sandbox.set_faults(fail_hard=503, paths=[REPORT])
    sandbox.clear_requests()
    with pytest.raises(ServerError) as transient:
        conversions_op(tmp_path, from_date=day, to_date=day).execute(interval_context(day))
    assert not isinstance(transient.value, AirflowFailException)
    assert len(requests_to(REPORT)) == ATTEMPTS
