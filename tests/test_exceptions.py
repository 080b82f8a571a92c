"""Which errors spend a task's retries and which fail it at once (AirflowFailException)."""

from __future__ import annotations

import inspect

import pytest
from airflow.sdk.exceptions import AirflowFailException

from affiliate_network import exceptions
from affiliate_network.exceptions import AffiliateNetworkError, NonRetryableError

#: A retry cannot fix these: the same input gives the same error.
NOT_RETRYABLE = {
    "ConfigValidationError",
    "GuardrailError",
    "SyncBlockedError",
    "ReportRowLimitError",
    "SchemaMismatchError",
    "AuthenticationError",
    "PermissionDeniedError",
    "PortalMismatchError",
    "ConnectionConfigError",
}
#: Transient: the next attempt may succeed (or re-check what an unknown outcome did).
RETRYABLE = {
    "RateLimitError",
    "ServerError",
    "TransportError",
    "OutcomeUnknownError",
    "LeaseBusyError",
    "StorageError",
    "DataBaseUnavailableError",
    "InvalidRequestError",
    "NotFoundError",
    "MethodNotAllowedError",
}


def _classes() -> dict[str, type]:
    return {
        name: cls
        for name, cls in inspect.getmembers(exceptions, inspect.isclass)
        if issubclass(cls, AffiliateNetworkError)
        and cls not in (AffiliateNetworkError, NonRetryableError)
    }


def test_every_error_class_lives_in_exceptions_and_is_classified() -> None:
    assert set(_classes()) == NOT_RETRYABLE | RETRYABLE


@pytest.mark.parametrize("name", sorted(NOT_RETRYABLE))
def test_errors_a_retry_cannot_fix_fail_at_once(name: str) -> None:
    cls = _classes()[name]
    assert issubclass(cls, AirflowFailException)
    assert issubclass(cls, AffiliateNetworkError)


@pytest.mark.parametrize("name", sorted(RETRYABLE))
def test_transient_errors_keep_their_retries(name: str) -> None:
    assert not issubclass(_classes()[name], AirflowFailException)
