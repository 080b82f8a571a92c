"""The retry policy's arithmetic and Retry-After parsing (pure functions, no HTTP)."""

from __future__ import annotations

import email.utils

import pytest
import requests
from urllib3.exceptions import MaxRetryError, NewConnectionError

from affiliate_network.hooks._retry import (
    RetryPolicy,
    is_retryable_status,
    parse_retry_after,
    was_never_sent,
)


def test_spec_defaults_double_from_one_second_capped_at_thirty():
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.base_delay, policy.max_delay, policy.jitter) == (
        5,
        1.0,
        30.0,
        1.0,
    )
    assert [policy.backoff(n, 0.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert policy.backoff(3, 0.999) == pytest.approx(4.999)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 599])
def test_retryable_statuses(status):
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 422])
def test_other_client_errors_are_not_retryable(status):
    assert not is_retryable_status(status)


def test_retry_after_seconds_and_http_date():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after("-3") == 0.0
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert parse_retry_after(date, now=lambda: now) == pytest.approx(12.0)
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None


def test_only_unsent_requests_count_as_never_sent():
    # requests wraps urllib3's MaxRetryError, whose reason says what failed
    refused = requests.exceptions.ConnectionError(
        MaxRetryError(None, "/v1/x", reason=NewConnectionError(None, "refused"))
    )
    assert was_never_sent(refused)
    assert was_never_sent(requests.exceptions.ConnectTimeout())
    assert not was_never_sent(requests.exceptions.ReadTimeout())
    assert not was_never_sent(requests.exceptions.ChunkedEncodingError())
    assert not was_never_sent(requests.exceptions.ConnectionError("Connection aborted."))


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(jitter=-1)
