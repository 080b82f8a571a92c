"""Which errors spend a task's retries and which fail it at once (AirflowFailException).

The errors module imports no Airflow (the command lines import it); an error a retry cannot fix
is a :class:`NonRetryableError`, which the operators' ``execute`` raises as an
``AirflowFailException`` (its twin declared in ``operators/failing.py``): that is what is
checked here, on what an operator raises. Every error class of the package is declared in
``exceptions.py``, the twins excepted (read from the source: nothing is built at run time).
"""

from __future__ import annotations

import ast
import inspect
import pickle
import re
import traceback
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from affiliate_network import exceptions
from affiliate_network.exceptions import AffiliateNetworkError, NonRetryableError
from affiliate_network.operators import failing
from affiliate_network.operators.base import AffiliateNetworkBaseOperator

PACKAGE_DIR = Path(exceptions.__file__).parent
#: Where error classes may be declared: the errors module, and the Airflow-facing twins (they
#: derive from Airflow's exception, which the errors module does not import).
ERROR_MODULES = {PACKAGE_DIR / "exceptions.py", PACKAGE_DIR / "operators" / "failing.py"}

#: A retry cannot fix these: the same input gives the same error.
NOT_RETRYABLE = {
    "ConfigValidationError",
    "GuardrailError",
    "SyncBlockedError",
    "ReconciliationError",  # a real difference: re-pull the day or ask a person, not retry
    "ReportRowLimitError",
    "SchemaMismatchError",
    "AuthenticationError",
    "PermissionDeniedError",
    "PortalMismatchError",
    "ConnectionConfigError",
    "InvalidRequestError",
    "ReviewAnswerError",  # a reviewer's keep_on_hold id: the same answer, the same error
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
    "QuotaStoreError",  # the store may be back by the next try
}
#: Plain ``ValueError`` subclasses of pure helpers: one bad value (a file's bytes, a field path,
#: a timezone); the loaders turn them into a ConfigValidationError naming file and field, the
#: commands into one line on stderr (UsageError).
VALUE_ERRORS = {"NotUtf8Error", "PathError", "UnknownTimezoneError", "FieldError", "UsageError"}


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


def _declared_error_classes(path: Path) -> list[str]:
    """Classes in ``path`` whose bases name an exception (``...Error``, ``...Exception``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [
            b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases
        ]
        if any(name.endswith(("Error", "Exception")) for name in bases):
            found.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno} {node.name}")
    return found


def test_every_error_class_lives_in_exceptions_and_is_classified() -> None:
    assert set(_classes()) == NOT_RETRYABLE | RETRYABLE
    every_exception_class = {
        name
        for name, cls in inspect.getmembers(exceptions, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == exceptions.__name__
    }
    assert every_exception_class == (
        NOT_RETRYABLE | RETRYABLE | VALUE_ERRORS | {"AffiliateNetworkError", "NonRetryableError"}
    )
    for name in VALUE_ERRORS:
        cls = getattr(exceptions, name)
        assert issubclass(cls, ValueError)
        assert not issubclass(cls, AffiliateNetworkError)


def test_no_error_class_is_declared_outside_the_errors_module() -> None:
    # The sandbox (the API's stand-in, no code shared with the client) keeps its own errors; a
    # module-private class (``_FallBack``) is control flow that never leaves its module.
    outside = [
        declared
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if path not in ERROR_MODULES and "sandbox" not in path.relative_to(PACKAGE_DIR).parts
        for declared in _declared_error_classes(path)
        if not declared.split()[-1].startswith("_")
    ]
    assert outside == []


def test_every_non_retryable_error_has_a_declared_airflow_twin() -> None:
    needing = {NonRetryableError} | {
        c for c in _classes().values() if issubclass(c, NonRetryableError)
    }
    assert set(failing.TWINS) == needing
    for cls, twin in failing.TWINS.items():
        assert twin.__bases__[0] is cls
        assert issubclass(twin, AirflowFailException)
        assert (twin.__name__, twin.__module__) == (cls.__name__, failing.__name__)
        assert failing.twin_of(cls) is twin
    # Built from the source, never at run time: every twin is a class the module declares.
    declared = {entry.split()[-1] for entry in _declared_error_classes(Path(failing.__file__))}
    assert declared == {cls.__name__ for cls in failing.TWINS}


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
    # One traceback (not the original's, then the twin's): the original's frames, no chain.
    assert raised.__cause__ is None
    assert raised.__suppress_context__
    assert raised.__traceback__ is not None
    assert (raised.happened(), raised.status_code) == (str(original), 403)
    assert str(raised) == f"{original}\n{exceptions.next_step_line(original)}"


@pytest.mark.parametrize("name", sorted(RETRYABLE))
def test_transient_errors_keep_their_retries(name: str) -> None:
    cls = _classes()[name]
    assert not issubclass(cls, AirflowFailException)
    original = cls("try again later", 503)
    assert _raised_by_an_operator(original) is original
    assert str(original).splitlines()[-1] == exceptions.next_step_line(original)


def test_a_failing_error_pickles_as_itself() -> None:
    from affiliate_network.exceptions import GuardrailError

    raised = _raised_by_an_operator(GuardrailError("reject share 0.9 > 0.5"))
    copy = pickle.loads(pickle.dumps(raised))  # noqa: S301 - our own bytes
    assert isinstance(copy, GuardrailError)
    assert isinstance(copy, AirflowFailException)
    assert copy.happened() == "reject share 0.9 > 0.5"
    assert str(copy) == str(raised)  # the next step travels with it
    assert type(copy).__name__ == "GuardrailError"


def test_a_converted_error_is_not_converted_twice() -> None:
    from affiliate_network.exceptions import ConfigValidationError
    from affiliate_network.operators.base import failing_fast

    original = ConfigValidationError("bad file")
    with pytest.raises(ConfigValidationError) as info, failing_fast(), failing_fast():
        raise original
    assert isinstance(info.value, AirflowFailException)
    assert info.value.happened() == "bad file"
    assert str(info.value).count("Next step:") == 1  # told once, not once per block


@pytest.mark.parametrize("name", sorted(_classes()))
def test_every_error_names_what_is_untouched_and_its_next_step(name: str) -> None:
    cls = _classes()[name]
    anchors = _runbook_anchors()
    assert cls.runbook_anchor in anchors, f"{name}: docs/runbook.md has no #{cls.runbook_anchor}"
    line = exceptions.next_step_line(_instance(cls))
    assert line.startswith("Untouched: ")
    assert " Next step: " in line
    assert "\n" not in line
    assert line.endswith(f"Runbook: {exceptions.RUNBOOK}#{cls.runbook_anchor}")
    if cls.__bases__[0] not in (AffiliateNetworkError, NonRetryableError):
        return
    # Every class the runbook's table names says something of its own.
    assert cls.next_step != AffiliateNetworkError.next_step or cls.runbook_anchor == "a-task-failed"


def test_an_error_that_is_not_ours_gets_the_generic_next_step_as_a_note() -> None:
    from affiliate_network.operators.base import failing_fast

    with pytest.raises(KeyError) as info, failing_fast():
        raise KeyError("offer_id")
    last = "".join(traceback.format_exception(info.value)).rstrip().splitlines()[-1]
    assert last == exceptions.next_step_line(info.value)
    assert last.endswith("#a-task-failed")


def test_a_reconciliation_next_step_names_its_cells_and_file() -> None:
    error = exceptions.ReconciliationError(
        "2026-11-20 differs",
        day="2026-11-20",
        cells=[f"affiliate 2001 offer {n}: cv landed 41 network 43" for n in range(5)],
        comparison_path="/data/conversions/date=2026-11-20/_reconciliation.json",
    )
    line = exceptions.next_step_line(error)
    assert "Look at the differing cells (affiliate 2001 offer 0: cv landed 41 network 43;" in line
    assert (
        "; and 2 more; every cell in /data/conversions/date=2026-11-20/_reconciliation.json)"
        in (line)
    )


def _instance(cls: type) -> AffiliateNetworkError:
    return cls("something went wrong", None)  # type: ignore[no-any-return]


def _runbook_anchors() -> set[str]:
    text = (Path(__file__).resolve().parents[1] / exceptions.RUNBOOK).read_text(encoding="utf-8")
    heads = re.findall(r"^#{2,4} (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_a_failure_notification_tells_the_errors_next_step() -> None:
    from affiliate_network.notify.messages import describe_failure

    error = _raised_by_an_operator(exceptions.AuthenticationError("Invalid API key", 401))
    message = describe_failure({"exception": error}, "docs/notifications.md")
    assert message.happened == "AuthenticationError: 401: Invalid API key"  # no next step twice
    assert message.to_do == (
        f"{exceptions.AuthenticationError.next_step} "
        "(docs/runbook.md#the-key-is-refused-401-or-403)"
    )
    assert f"untouched: {exceptions.AuthenticationError.untouched}" in message.at_stake
