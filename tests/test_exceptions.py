"""Which errors spend a task's retries and which fail it at once (AirflowFailException).

The errors module imports no Airflow (the command lines import it); an error a retry cannot fix
is a :class:`NonRetryableError`, which the operators' ``execute`` raises as an
``AirflowFailException``: that is what is checked here, on what an operator raises.
"""

from __future__ import annotations

import inspect
import pickle

import pytest
from airflow.sdk.exceptions import AirflowFailException

from affiliate_network import exceptions
from affiliate_network.exceptions import AffiliateNetworkError, NonRetryableError
from affiliate_network.operators.base import AffiliateNetworkBaseOperator

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
    "InvalidRequestError",
    "NotFoundError",
    "MethodNotAllowedError",
}
#: Transient: the next attempt may succeed (or re-check what an unknown outcome did).
RETRYABLE = {
    "RateLimitError",
    "GranularQuotaError",
    "ServerError",
    "TransportError",
    "OutcomeUnknownError",
    "LeaseBusyError",
    "LeaseLostError",  # the retry waits for the lease and sends only what is still on hold
    "PullShiftedError",  # the landing re-pulled already; a rerun meets a settled window
    "StorageError",
    "DataBaseUnavailableError",
}


class _Raising(AffiliateNetworkBaseOperator):
    """An operator whose job raises a given error (the base's ``execute`` wraps it)."""

    def __init__(self, error: Exception, **kwargs) -> None:
        super().__init__(task_id="raising", **kwargs)
        self.error = error

    def execute_job(self, context) -> None:
        raise self.error


def _raised_by_an_operator(error: Exception) -> BaseException:
    with pytest.raises(type(error)) as info:
        _Raising(error=error).execute(context={})
    return info.value


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
    # Was `issubclass(cls, AirflowFailException)`: the errors module no longer imports Airflow,
    # so the Airflow class is checked on what an operator raises.
    assert issubclass(cls, NonRetryableError)
    assert issubclass(cls, AffiliateNetworkError)
    original = cls("the network said no", 403)
    raised = _raised_by_an_operator(original)
    assert isinstance(raised, AirflowFailException)
    assert isinstance(raised, cls)
    assert raised.__cause__ is original
    assert (str(raised), raised.status_code) == (str(original), 403)


@pytest.mark.parametrize("name", sorted(RETRYABLE))
def test_transient_errors_keep_their_retries(name: str) -> None:
    cls = _classes()[name]
    assert not issubclass(cls, AirflowFailException)
    original = cls("try again later", 503)
    assert _raised_by_an_operator(original) is original


def test_a_failing_error_pickles_as_itself() -> None:
    from affiliate_network.exceptions import GuardrailError

    raised = _raised_by_an_operator(GuardrailError("reject share 0.9 > 0.5"))
    copy = pickle.loads(pickle.dumps(raised))  # noqa: S301 - our own bytes
    assert isinstance(copy, GuardrailError)
    assert isinstance(copy, AirflowFailException)
    assert str(copy) == "reject share 0.9 > 0.5"
    assert type(copy).__name__ == "GuardrailError"


def test_a_converted_error_is_not_converted_twice() -> None:
    from affiliate_network.exceptions import ConfigValidationError
    from affiliate_network.operators.base import failing_fast

    original = ConfigValidationError("bad file")
    with pytest.raises(ConfigValidationError) as info, failing_fast(), failing_fast():
        raise original
    assert isinstance(info.value, AirflowFailException)
    assert info.value.__cause__ is original
