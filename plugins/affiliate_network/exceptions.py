"""Errors raised by the affiliate network package: every error class lives here.

HTTP errors carry the status code and the server's message (``error``, falling back to
``Error``) and never the API key.

Errors a retry cannot fix are :class:`NonRetryableError`: the task fails at once instead of
spending its retries (re-pulling a window twice to trip the same guardrail). They are:
configuration and rules validation, a tripped guardrail, a blocked sync, a report that cannot
fit the row cap, a schema mismatch, a key that is refused (401, 403, wrong portal, bad
connection fields), and a request the API rejects as such (400 bad parameters, 404 no such
resource or path, 405 wrong method: the same request gets the same answer). Transient trouble
(5xx, 429, timeouts, a busy lease, an unknown outcome that the next run re-checks) stays
retryable. Being non-retryable changes nothing for a caller that handles one of these itself
(``except InvalidRequestError`` still catches it, inside or outside an operator).

Four errors of pure helpers are plain ``ValueError`` subclasses, not
:class:`AffiliateNetworkError`: :class:`NotUtf8Error` (decoding a file), :class:`PathError` (a
rules file's field path), :class:`UnknownTimezoneError` (the API's timezone table) and
:class:`FieldError` (a config model's cross-field check, raised inside pydantic). They say
what is wrong with one value; the loaders that meet them (settings, rules, desired state) turn
them into a :class:`ConfigValidationError` naming the file, line and field, and callers that
catch ``ValueError`` keep catching them. A module-private exception used as control flow inside
one module (``review.traffic._FallBack``: fall back to a full pull) is never raised out of it,
so it stays beside its one ``raise`` and ``except``.

This module imports nothing from Airflow (or from the rest of the package): importing Airflow
takes seconds, and the command lines (``affiliate-network-rules``, ``affiliate-network-sync``)
and job libraries import these errors. So the one set of error classes that cannot live here
are the Airflow-facing twins of the non-retryable errors: :mod:`affiliate_network.operators.failing`
declares, for every :class:`NonRetryableError` class below, a subclass of it and of Airflow's
``AirflowFailException`` (the exception Airflow's task runner fails without retries on), and the
operators' base (:func:`affiliate_network.operators.base.fail_fast`) raises those: still an
instance of the class raised here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal


class AffiliateNetworkError(Exception):
    """Base class of every error this package raises.

    :param message: human-readable description (the server's message for HTTP errors).
    :param status_code: HTTP status code, or ``None`` when no response was received.
    """

    #: The failed request's method and path (set by the hook's transport on HTTP errors).
    method: str | None = None
    path: str | None = None

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code

    def __str__(self) -> str:
        if self.status_code is None:
            return self.message
        return f"{self.status_code}: {self.message}"


class NonRetryableError(AffiliateNetworkError):
    """An error a retry cannot fix: the task fails without using its retries.

    Raised from an operator, it reaches Airflow as an ``AirflowFailException``: its twin in
    :mod:`affiliate_network.operators.failing` (see
    :func:`affiliate_network.operators.base.fail_fast`).
    """


class InvalidRequestError(NonRetryableError):
    """400: missing or malformed parameters (or a client-side check of them); not retried."""


class AuthenticationError(NonRetryableError):
    """401: missing, invalid or revoked API key; not retried."""


class PermissionDeniedError(NonRetryableError):
    """403: key of another portal (``Out of realm``) or lacking a permission scope."""


class NotFoundError(NonRetryableError):
    """404: the resource does not exist or the path is wrong; not retried."""


class MethodNotAllowedError(NonRetryableError):
    """405: the method is not allowed on that path; not retried."""


class RateLimitError(AffiliateNetworkError):
    """429 after every retry attempt was spent."""


class GranularQuotaError(AffiliateNetworkError):
    """Granular reporting queries would exceed what is left of the network's rolling-hour quota.

    Raised before anything is sent; the message names the queries needed, the budget, those used
    in the last hour and how long until enough are free. Retryable: the hour rolls on.
    """


class ServerError(AffiliateNetworkError):
    """5xx after every retry attempt was spent."""


class TransportError(AffiliateNetworkError):
    """No HTTP answer (connection refused, reset or timed out) after every retry attempt."""


class ReportRowLimitError(NonRetryableError):
    """An aggregated report reached the 10,000-row cap: the result is incomplete.

    The caller narrows the request (fewer columns, tighter filters, a shorter date range).
    """


class OutcomeUnknownError(AffiliateNetworkError):
    """A non-idempotent write may or may not have been applied (timeout or dropped connection).

    It is never re-sent automatically: the caller must reconcile before trying again.
    """


class PortalMismatchError(NonRetryableError):
    """An endpoint of one portal was called with a connection of another; nothing was sent."""


class ConnectionConfigError(NonRetryableError):
    """The Airflow connection is incomplete or malformed (names the connection and the field)."""


class ConfigValidationError(NonRetryableError):
    """A configuration, rules or desired-state file failed validation.

    The message names the file, the object and the field (and the line where known).
    """

    #: The single problems, when the validator collected several (a rules file's ``RuleError``).
    errors: Sequence[object] = ()


#: HTTP status code -> exception class for error responses.
STATUS_ERRORS: dict[int, type[AffiliateNetworkError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    429: RateLimitError,
}


def error_for_status(status_code: int, message: str) -> AffiliateNetworkError:
    """Build the exception matching an HTTP error status."""
    if status_code >= 500:
        return ServerError(message, status_code)
    return STATUS_ERRORS.get(status_code, AffiliateNetworkError)(message, status_code)


class QuotaStoreError(AffiliateNetworkError):
    """The store of the network's shared quota (Redis) did not answer; nothing was sent.

    The message names the store (its URL without credentials) and the connection extra that
    lets the hook go on with a conservative local budget instead. Retryable: the store may be
    back by the next try.
    """


class LeaseBusyError(AffiliateNetworkError):
    """Another run holds the network's on-hold write lease; nothing was written (retryable)."""


class LeaseLostError(AffiliateNetworkError):
    """The on-hold write lease is no longer this run's (it expired, another run took it over):
    the run stopped before its next chunk and wrote nothing more (retryable: the retry waits for
    the lease, then re-checks which ids are still on hold)."""


class GuardrailError(NonRetryableError):
    """A safety ceiling (reject share/count, approved payout) was crossed: nothing was written.

    The fields say what was at stake, for a notification (``affiliate_network.notify``) that
    should not parse the message; all default to "unknown" so older callers stay valid.

    :param message: what was crossed, the top rejecting rules and what to do.
    :param status_code: always ``None`` (no HTTP answer is involved).
    :param rejections: rejections in the run's plan.
    :param decided: conversions of the plan a rule decided.
    :param rejected_payout: payout of the plan's rejections per currency (code -> exact
        amount; payouts of different currencies are never added).
    :param approved_payout: payout of the plan's approvals per currency.
    :param currencies: currency codes of those payouts.
    :param top_rules: ``(rule id, rejections)`` of the top rejecting rules.
    :param conversion_ids: ids of the rejections with the highest payout (a sample; the audit
        file lists all).
    :param audit_path: the run's audit file (set by the review job).
    """

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        *,
        rejections: int | None = None,
        decided: int | None = None,
        rejected_payout: Mapping[str, Decimal] | None = None,
        approved_payout: Mapping[str, Decimal] | None = None,
        currencies: Sequence[str] = (),
        top_rules: Sequence[tuple[str, int]] = (),
        conversion_ids: Sequence[str] = (),
        audit_path: str | None = None,
    ) -> None:
        super().__init__(message, status_code)
        self.rejections = rejections
        self.decided = decided
        self.rejected_payout = None if rejected_payout is None else dict(rejected_payout)
        self.approved_payout = None if approved_payout is None else dict(approved_payout)
        self.currencies = tuple(currencies)
        self.top_rules = tuple(top_rules)
        self.conversion_ids = tuple(conversion_ids)
        self.audit_path = audit_path


class SyncBlockedError(NonRetryableError):
    """A sync section holds unresolved or drifted create-only objects: nothing of it was sent.

    A person must decide (see the runbook), so the task fails at once.

    :param message: every blocked object with what to do about it.
    :param status_code: always ``None``.
    :param blocked: keys of the blocked objects (empty when the whole ledger is in question).
    """

    def __init__(
        self, message: str, status_code: int | None = None, *, blocked: Sequence[str] = ()
    ) -> None:
        super().__init__(message, status_code)
        self.blocked = tuple(blocked)


class ReconciliationError(NonRetryableError):
    """A landed day differs from the network's own aggregated report beyond the tolerance.

    Non-retryable: running the comparison again meets the same difference; what fixes it is a
    re-pull of the day (a lost page, a late status change) or a person (a difference that
    persists). The fields are what a notification lists (``affiliate_network.notify``).

    :param message: the day, the differing cells and what to do.
    :param status_code: always ``None``.
    :param day: the day compared (``YYYY-MM-DD``).
    :param cells: the first differing cells, one line each (``affiliate 2001 offer 7 in USD: cv
        landed 41 network 43 (difference 2)``); the comparison file has every cell.
    :param differences: how many cells differ beyond the tolerance.
    :param totals: the day's totals per currency (``{"USD": {landed, network, difference}}``),
        amounts as text.
    :param comparison_path: the comparison file written beside the day's manifest.
    """

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        *,
        day: str | None = None,
        cells: Sequence[str] = (),
        differences: int | None = None,
        totals: dict[str, object] | None = None,
        comparison_path: str | None = None,
    ) -> None:
        super().__init__(message, status_code)
        self.day = day
        self.cells = tuple(cells)
        self.differences = differences
        self.totals = dict(totals or {})
        self.comparison_path = comparison_path


class StorageError(AffiliateNetworkError):
    """A partition could not be written, published or read back consistently."""


class PullShiftedError(AffiliateNetworkError):
    """The result set moved while a window was paged: a later page's ``total_count`` differs
    from page 1's, a page came back short or overlapping, or fewer unique rows than
    ``total_count`` arrived. Such a pull is incomplete and is never landed as consistent.

    Retryable: the landing re-pulls a bounded number of times first, and a rerun meets a window
    that has settled. Names what was pulled and the counts.

    :param message: what moved, with the window and the counts.
    :param status_code: always ``None`` from the hook (every page answered 200); kept so the
        class takes the base's arguments like every other error.
    :param expected: rows page 1's ``total_count`` promised (``None`` when unknown).
    :param got: rows (or unique rows) actually received, or the later ``total_count``.
    """

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        *,
        expected: int | None = None,
        got: int | None = None,
    ) -> None:
        super().__init__(message, status_code)
        self.expected = expected
        self.got = got


class SchemaMismatchError(NonRetryableError):
    """An API record cannot be stored under the explicit schema (names the field and record).

    Raised instead of landing a partition with silently nulled or truncated values.
    """


class DataBaseUnavailableError(AffiliateNetworkError):
    """The configured output base could not be read (the Airflow Variable lookup failed).

    Retryable: a task never falls back to a local default it was not configured with.
    """


# ---------------------------------------------------------------------------------------------
# Value errors of pure helpers (plain ValueError subclasses, see the module docstring)
# ---------------------------------------------------------------------------------------------


class NotUtf8Error(ValueError):
    """A file's bytes are not UTF-8; the message gives the byte offset and the line.

    Raised by :func:`affiliate_network.textfile.decode_utf8`.

    :param message: what is wrong, with the offset, the line, the byte and a hint.
    :param offset: 0-based byte offset of the first byte that cannot be decoded.
    :param line: 1-based line holding that byte.
    """

    def __init__(self, message: str, offset: int, line: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.line = line


class PathError(ValueError):
    """A field path is malformed or names a field the conversion record does not have.

    Raised by the rules' field paths (``parse_path``, ``describe_path``).
    """


class UnknownTimezoneError(ValueError):
    """An id or name that is not in the API's timezone table (``affiliate_network.timezones``)."""


class FieldError(ValueError):
    """Raised by a config model's validator to name the field a cross-field check is about.

    Pydantic places an error from a model validator at the model itself;
    :func:`affiliate_network.config.load` reads the ``loc`` of this error and reports the
    field's own line instead.

    :param loc: the field's place relative to the model being validated.
    :param message: what is wrong.
    """

    def __init__(self, loc: tuple[str | int, ...] | list[str | int], message: str) -> None:
        super().__init__(message)
        self.loc = tuple(loc)
