"""The Airflow-facing twins of the package's non-retryable errors.

Airflow's task runner (``airflow.sdk.execution_time.task_runner``) fails a task at once, without
its retries, only for ``AirflowFailException`` (and sensor timeouts).
:mod:`affiliate_network.exceptions` imports nothing of Airflow (the command lines import it), so its
:class:`~affiliate_network.exceptions.NonRetryableError` classes cannot derive from that
exception. Each one has a twin here that derives from both: same name, same constructor, still
caught by ``except GuardrailError`` (the package's class); the operators raise the twin
(:func:`affiliate_network.operators.base.fail_fast`).

The twins are plain module-level classes, so a raised one pickles by reference (a callback, a
listener) and ``AirflowException.serialize`` names an importable class.
"""

from __future__ import annotations

from typing import TypeVar

from affiliate_network import exceptions as errors
from affiliate_network.compat import AirflowFailException

E = TypeVar("E", bound=BaseException)


# The package's ``status_code`` (``int | None``: the HTTP status, if any) is not the type of
# Airflow's class-level ``HTTPStatus`` one; the package's wins (first base), as it always did.
class NonRetryableError(errors.NonRetryableError, AirflowFailException):
    """Twin of :class:`affiliate_network.exceptions.NonRetryableError`; base of the others."""

    status_code: int | None  # type: ignore[assignment]  # see above


class InvalidRequestError(errors.InvalidRequestError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.InvalidRequestError`."""


class ReviewAnswerError(errors.ReviewAnswerError, InvalidRequestError):
    """Twin of :class:`affiliate_network.exceptions.ReviewAnswerError`."""


class AuthenticationError(errors.AuthenticationError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.AuthenticationError`."""


class PermissionDeniedError(errors.PermissionDeniedError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.PermissionDeniedError`."""


class NotFoundError(errors.NotFoundError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.NotFoundError`."""


class MethodNotAllowedError(errors.MethodNotAllowedError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.MethodNotAllowedError`."""


class ReportRowLimitError(errors.ReportRowLimitError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.ReportRowLimitError`."""


class PortalMismatchError(errors.PortalMismatchError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.PortalMismatchError`."""


class ConnectionConfigError(errors.ConnectionConfigError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.ConnectionConfigError`."""


class ConfigValidationError(errors.ConfigValidationError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.ConfigValidationError`."""


class GuardrailError(errors.GuardrailError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.GuardrailError`."""


class SyncBlockedError(errors.SyncBlockedError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.SyncBlockedError`."""


class ReconciliationError(errors.ReconciliationError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.ReconciliationError`."""


class SchemaMismatchError(errors.SchemaMismatchError, NonRetryableError):
    """Twin of :class:`affiliate_network.exceptions.SchemaMismatchError`."""


#: The package's class -> its twin (each twin's first base is the class it stands for).
TWINS: dict[type[BaseException], type[errors.NonRetryableError]] = {
    twin.__bases__[0]: twin
    for twin in (
        NonRetryableError,
        InvalidRequestError,
        ReviewAnswerError,
        AuthenticationError,
        PermissionDeniedError,
        NotFoundError,
        MethodNotAllowedError,
        ReportRowLimitError,
        PortalMismatchError,
        ConnectionConfigError,
        ConfigValidationError,
        GuardrailError,
        SyncBlockedError,
        ReconciliationError,
        SchemaMismatchError,
    )
}


def twin_of(cls: type[errors.NonRetryableError]) -> type[errors.NonRetryableError]:
    """The twin of ``cls``; for a class without one (a subclass declared elsewhere), the twin
    of its nearest ancestor that has one (at worst :class:`NonRetryableError`'s).
    """
    for ancestor in cls.__mro__:
        twin = TWINS.get(ancestor)
        if twin is not None:
            return twin
    return NonRetryableError  # not reached: every NonRetryableError has that ancestor


def told(error: E) -> E:
    """``error`` ending with its next step: the last line of the traceback Airflow logs.

    A package error gets :func:`affiliate_network.exceptions.next_step_line` as the last line
    of its message (what is untouched, what to do, the runbook entry); its ``message`` and
    fields stay as they were (a notification quotes :meth:`~affiliate_network.exceptions.
    AffiliateNetworkError.happened`). Another error (a bug, a library's) gets the generic line
    as a note, which Python prints after the message. Airflow's own exceptions (a skip, a
    deferral) pass as they are.

    :param error: the error a task ends with.
    :returns: the same object.
    """
    line = errors.next_step_line(error)
    if isinstance(error, errors.AffiliateNetworkError):
        error._told = line
    elif not type(error).__module__.startswith("airflow") and line not in getattr(
        error, "__notes__", ()
    ):
        error.add_note(line)
    return error
