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
from typing import ClassVar

#: The runbook whose anchors the errors' next steps link to (in the repository and the docs).
RUNBOOK = "docs/runbook.md"


class AffiliateNetworkError(Exception):
    """Base class of every error this package raises.

    :param message: human-readable description (the server's message for HTTP errors).
    :param status_code: HTTP status code, or ``None`` when no response was received.
    """

    #: The failed request's method and path (set by the hook's transport on HTTP errors).
    method: str | None = None
    path: str | None = None

    #: What a failure of this kind leaves as it was (one sentence, for the person on call).
    untouched: ClassVar[str] = (
        "What the task had published before stays as it was: partitions and audits are "
        "replaced whole, never in part."
    )
    #: What to do now (one sentence). An instance may say more (:meth:`next_step_text`).
    next_step: ClassVar[str] = (
        "Read the message above, fix its cause, then clear the task: every task of these "
        "DAGs is safe to clear and rerun."
    )
    #: Anchor of the failure's entry in :data:`RUNBOOK`.
    runbook_anchor: ClassVar[str] = "a-task-failed"

    #: The next step as rendered when the error left an operator (:func:`told`); empty before.
    _told: str = ""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code

    def happened(self) -> str:
        "''What happened: the status code (if any) and the message, without the next step.''"
        if self.status_code is None:
            return self.message
        return f"{self.status_code}: {self.message}"

    def next_step_text(self) -> str:
        "''What to do now; subclasses with facts (cells, files) add them to :attr:`next_step`.''"
        return self.next_step

    def __str__(self) -> str:
        # Once told (the operators' failure path), the next step is the message's last line:
        # the last line of the traceback Airflow logs, and of the UI's error box.
        return f"{self.happened()}\n{self._told}" if self._told else self.happened()


class NonRetryableError(AffiliateNetworkError):
    """An error a retry cannot fix: the task fails without using its retries.

    Raised from an operator, it reaches Airflow as an ``AirflowFailException``: its twin in
    :mod:`affiliate_network.operators.failing` (see
    :func:`affiliate_network.operators.base.fail_fast`).
    """


class InvalidRequestError(NonRetryableError):
    """400: missing or malformed parameters (or a client-side check of them); not retried."""

    untouched = "Nothing was written: the API refused the request before acting on it."
    next_step = (
        "The same request gets the same answer: check the run's parameters and the "
        "connection's host and path against the message, fix them, then clear the task."
    )
    runbook_anchor = "a-request-the-api-refuses"


class ReviewAnswerError(InvalidRequestError):
    """A reviewer's answer cannot be applied as given (a ``keep_on_hold`` id that matches none
    of the request's conversions): nothing of that request was written; not retried (the same
    answer gives the same error)."""

    untouched = (
        "Nothing of the named requests was written: their conversions stay on hold (the other "
        "requests were applied, as the message says)."
    )
    next_step = (
        "Tell the reviewer which id was wrong; the next run asks again, answer the review "
        "there. Clearing this task only repeats the error."
    )
    runbook_anchor = "a-review-answer-names-an-unknown-id"


class AuthenticationError(NonRetryableError):
    """401: missing, invalid or revoked API key; not retried."""

    untouched = (
        "Nothing was read or written with this key; landed days, audits and the "
        "network's data are as before."
    )
    next_step = (
        "Fix the connection's API key (Admin > Connections, or its AIRFLOW_CONN_ "
        "variable), check it with the connection's Test button or `airflow connections "
        "test <conn id>`, then clear the task."
    )
    runbook_anchor = "the-key-is-refused-401-or-403"


class PermissionDeniedError(NonRetryableError):
    """403: key of another portal (``Out of realm``) or lacking a permission scope."""

    untouched = (
        "Nothing was read or written with this key; landed days, audits and the "
        "network's data are as before."
    )
    next_step = (
        "Give the connection a key of the right portal with the needed scope (its extra"
        " `portal` names the portal), test the connection, then clear the task."
    )
    runbook_anchor = "the-key-is-refused-401-or-403"


class NotFoundError(NonRetryableError):
    """404: the resource does not exist or the path is wrong; not retried."""

    untouched = "Nothing was written: the API found no such resource or path."
    next_step = (
        "Check the connection's host (it ends with /v1) and the ids in the run's "
        "parameters, fix them, then clear the task."
    )
    runbook_anchor = "a-request-the-api-refuses"


class MethodNotAllowedError(NonRetryableError):
    """405: the method is not allowed on that path; not retried."""

    untouched = "Nothing was written: the API refused the method on that path."
    next_step = (
        "Check the connection's host (it ends with /v1); a wrong base path is the usual"
        " cause. Fix it, then clear the task."
    )
    runbook_anchor = "a-request-the-api-refuses"


class RateLimitError(AffiliateNetworkError):
    """429 after every retry attempt was spent."""

    untouched = (
        "Nothing partial was kept: a day is published only whole, and a review writes a"
        " chunk only after re-checking it."
    )
    next_step = (
        "The network's rate limit held for every attempt: lower the parallel tasks on "
        "this key (the reporting pool's slots), then clear the task."
    )
    runbook_anchor = "the-api-is-rate-limited-429"


class GranularQuotaError(AffiliateNetworkError):
    """Granular reporting queries would exceed what is left of the network's rolling-hour quota.

    Raised before anything is sent; the message names the queries needed, the budget, those used
    in the last hour and how long until enough are free. Retryable: the hour rolls on.
    """

    untouched = "Nothing was sent: the queries were refused before the first request."
    next_step = (
        "Wait the time the message names (the quota is a rolling hour), then clear the "
        "task; to avoid it, fewer runs or days per hour on this network."
    )
    runbook_anchor = "the-api-is-rate-limited-429"


class ServerError(AffiliateNetworkError):
    """5xx after every retry attempt was spent."""

    untouched = (
        "Nothing partial was kept: a landed day is replaced only whole, a review sends "
        "a chunk only after re-checking it, so what the last good run wrote stands."
    )
    next_step = (
        "Wait until the network's API answers again (`airflow connections test <conn "
        "id>`, or its status page), then clear the task; Airflow's own retries, if any "
        "are left, try first."
    )
    runbook_anchor = "the-api-answers-5xx"


class TransportError(AffiliateNetworkError):
    """No HTTP answer (connection refused, reset or timed out) after every retry attempt."""

    untouched = (
        "Nothing partial was kept: a landed day is replaced only whole, a review sends "
        "a chunk only after re-checking it."
    )
    next_step = (
        "Check that the connection's host is right and reachable from the workers "
        "(`airflow connections test <conn id>`), then clear the task."
    )
    runbook_anchor = "the-api-does-not-answer"


class ReportRowLimitError(NonRetryableError):
    """An aggregated report reached the 10,000-row cap: the result is incomplete.

    The caller narrows the request (fewer columns, tighter filters, a shorter date range).
    """

    untouched = "Nothing was landed from the capped report."
    next_step = (
        "Narrow the request (fewer columns, tighter filters, a shorter date range), "
        "then clear the task."
    )
    runbook_anchor = "a-request-the-api-refuses"


class OutcomeUnknownError(AffiliateNetworkError):
    """A non-idempotent write may or may not have been applied (timeout or dropped connection).

    It is never re-sent automatically: the caller must reconcile before trying again.
    """

    untouched = "The write may or may not have been applied; nothing was re-sent."
    next_step = (
        "Check the object's current state in the network before anything else; the on-"
        "hold review re-checks by itself, so clear the task; for the offer sync see its"
        " UNKNOWN OUTCOME entry."
    )
    runbook_anchor = "a-writes-outcome-is-unknown"


class PortalMismatchError(NonRetryableError):
    """An endpoint of one portal was called with a connection of another; nothing was sent."""

    untouched = "Nothing was sent."
    next_step = (
        "Point the task at a connection of the right portal (network or affiliate), "
        "then clear the task."
    )
    runbook_anchor = "the-key-is-refused-401-or-403"


class ConnectionConfigError(NonRetryableError):
    """The Airflow connection is incomplete or malformed (names the connection and the field)."""

    untouched = "Nothing was sent."
    next_step = (
        "Fix the connection field the message names (Admin > Connections, or its "
        "AIRFLOW_CONN_ variable), test the connection, then clear the task."
    )
    runbook_anchor = "the-key-is-refused-401-or-403"


class ConfigValidationError(NonRetryableError):
    """A configuration, rules or desired-state file failed validation.

    The message names the file, the object and the field (and the line where known).
    """

    untouched = (
        "Nothing was read from the network or written: settings and files are checked first."
    )
    next_step = (
        "Fix the file, field or setting the message names (ranges in "
        "docs/configuration.md), then clear the task."
    )
    runbook_anchor = "a-setting-or-file-is-invalid"

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

    untouched = "Nothing was sent to the network."
    next_step = (
        "Check the quota store the message names (is Redis up and reachable from the "
        "workers?), or set the connection extra it names to go on with a local budget; then "
        "clear the task."
    )
    runbook_anchor = "sharing-one-networks-quota"


class LeaseBusyError(AffiliateNetworkError):
    """Another run holds the network's on-hold write lease; nothing was written (retryable)."""

    untouched = "Nothing was written: the other writer holds the network's write lease."
    next_step = (
        "Let the run named in the message finish (or fail), then clear the task; it "
        "waits for the lease by itself first."
    )
    runbook_anchor = "another-run-is-writing"


class LeaseLostError(AffiliateNetworkError):
    """The on-hold write lease is no longer this run's (it expired, another run took it over):
    the run stopped before its next chunk and wrote nothing more (retryable: the retry waits for
    the lease, then re-checks which ids are still on hold)."""

    untouched = "The chunks already sent were re-checked and audited; nothing more was written."
    next_step = "Clear the task: it waits for the lease, then sends only what is still on hold."
    runbook_anchor = "another-run-is-writing"


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

    untouched = "Nothing was approved or rejected on the network by this run."
    next_step = (
        "Check the top rejecting rules against the audit file; fix the rule, or raise "
        "the ceiling only if the volume is expected, then clear the task."
    )
    runbook_anchor = "guardrail-failures-what-they-mean-what-to-do"

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

    def next_step_text(self) -> str:
        """The class's next step, naming the audit file when known."""
        where = f" (every decision: {self.audit_path})" if self.audit_path else ""
        return self.next_step.replace("the audit file", f"the audit file{where}", 1)


class SyncBlockedError(NonRetryableError):
    """A sync section holds unresolved or drifted create-only objects: nothing of it was sent.

    A person must decide (see the runbook), so the task fails at once.

    :param message: every blocked object with what to do about it.
    :param status_code: always ``None``.
    :param blocked: keys of the blocked objects (empty when the whole ledger is in question).
    """

    untouched = "Nothing of the blocked section was sent to the network."
    next_step = (
        "Resolve each blocked object as the message says (resolve_unknown or "
        "accept_drift in the trigger form), then trigger the DAG again."
    )
    runbook_anchor = "offer-sync-on-call"

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

    untouched = (
        "The landed days stay as landed; their changes stay pending and are announced "
        "by the next run that succeeds."
    )
    next_step = (
        "Look at the differing cells; a lost page or a late status change: clear the "
        "day's pull task with its downstream tasks; a difference that persists: ask the"
        " network."
    )
    runbook_anchor = "a-day-does-not-reconcile"

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

    def next_step_text(self) -> str:
        """The class's next step, naming the first differing cells and the comparison file."""
        cells = "; ".join(self.cells[:3])
        more = f"; and {len(self.cells) - 3} more" if len(self.cells) > 3 else ""
        if cells:
            cells = f" ({cells}{more}"
            cells += f"; every cell in {self.comparison_path})" if self.comparison_path else ")"
        return self.next_step.replace("the differing cells", f"the differing cells{cells}", 1)


def next_step_line(error: BaseException) -> str:
    """One line saying what is untouched, what to do and where the runbook says more.

    The line every failure a task ends with carries last (:func:`affiliate_network.operators.
    failing.told`); an error that is not this package's gets the generic text.

    :param error: the error the task ends with.
    """
    known = error if isinstance(error, AffiliateNetworkError) else None
    cls = type(known) if known is not None else AffiliateNetworkError
    step = known.next_step_text() if known is not None else AffiliateNetworkError.next_step
    return f"Untouched: {cls.untouched} Next step: {step} Runbook: {RUNBOOK}#{cls.runbook_anchor}"


class StorageError(AffiliateNetworkError):
    """A partition could not be written, published or read back consistently."""

    untouched = "The partition was not published: readers still see the previous one."
    next_step = (
        "Check the data base (free space, permissions, the object store's connection), "
        "then clear the task."
    )
    runbook_anchor = "a-task-failed"


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

    untouched = "Nothing of that pull was landed: readers still see the previous partition."
    next_step = "Clear the task: the window settles (the network was still changing it)."
    runbook_anchor = "a-task-failed"

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

    untouched = "Nothing of it was landed: readers still see the previous partition."
    next_step = (
        "The network sent a value the schema cannot hold (the message names the field "
        "and record): report it with that record, then clear the task once the schema "
        "or the data is fixed."
    )
    runbook_anchor = "a-task-failed"


class DataBaseUnavailableError(AffiliateNetworkError):
    """The configured output base could not be read (the Airflow Variable lookup failed).

    Retryable: a task never falls back to a local default it was not configured with.
    """

    untouched = "Nothing was written."
    next_step = (
        "Check the Airflow Variable affiliate_network_data_base (or "
        "AFFILIATE_NETWORK_DATA_BASE) is readable, then clear the task."
    )
    runbook_anchor = "a-setting-or-file-is-invalid"


# ---------------------------------------------------------------------------------------------
# Value errors of pure helpers (plain ValueError subclasses, see the module docstring)
# ---------------------------------------------------------------------------------------------


class NotUtf8Error(ValueError):
    """A file's bytes are not UTF-8; the message gives the byte offset and the line.

    Raised by :func:`affiliate_network.settings.textfile.decode_utf8`.

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
    """An id or name that is not in the API's timezone table
    (``affiliate_network.api.timezones``)."""


class FieldError(ValueError):
    """Raised by a config model's validator to name the field a cross-field check is about.

    Pydantic places an error from a model validator at the model itself;
    :func:`affiliate_network.settings.loader.load` reads the ``loc`` of this error and reports the
    field's own line instead.

    :param loc: the field's place relative to the model being validated.
    :param message: what is wrong.
    """

    def __init__(self, loc: tuple[str | int, ...] | list[str | int], message: str) -> None:
        super().__init__(message)
        self.loc = tuple(loc)


class UsageError(ValueError):
    """A bad command line of the package's commands: one line for stderr (the command prints it
    and exits 1). Never raised inside a task, so not an :class:`AffiliateNetworkError`."""
