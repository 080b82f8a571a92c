"""The one base of the package's operators: a hook per execution, always closed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from affiliate_network.compat import AirflowFailException
from affiliate_network.exceptions import NonRetryableError
from affiliate_network.operators.failing import told, twin_of

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook


def fail_fast(err: NonRetryableError) -> NonRetryableError:
    """The same error as an ``AirflowFailException``: Airflow fails the task without retries.

    Airflow's task runner (``airflow.sdk.execution_time.task_runner``) marks a task FAILED at
    once only for ``AirflowFailException`` (and sensor timeouts); any other exception goes
    through the retry check. The errors module stays free of Airflow imports (the command lines
    import it), so the operators make the conversion here, to the error's twin declared in
    :mod:`affiliate_network.operators.failing`. The result is still an instance of ``type(err)``
    (of its nearest ancestor with a twin, for a class declared outside the package) with the
    same message and attributes (nothing is added: no key can leak).

    :param err: a package error a retry cannot fix.
    :returns: a copy of ``err`` whose class also derives from ``AirflowFailException``.
    """
    if isinstance(err, AirflowFailException):
        return err
    twin = twin_of(type(err))
    copy = twin.__new__(twin, *err.args)
    copy.__dict__.update(err.__dict__)
    return copy


@contextmanager
def failing_fast() -> Iterator[None]:
    """In a ``@task`` function or an ``execute``: a :class:`NonRetryableError` fails at once.

    Every error leaving the block ends with its next step (:func:`~affiliate_network.
    operators.failing.told`): the last line Airflow logs says what is untouched, what to do
    and which runbook entry says more. The operators' ``execute`` does the same for every
    operator of the package.
    """
    try:
        yield
    except NonRetryableError as err:
        if isinstance(err, AirflowFailException):
            raise  # already converted (a nested block): keep it as is
        # One traceback, the original's frames: a chained one printed the failure twice.
        raise told(fail_fast(err)).with_traceback(err.__traceback__) from None
    except Exception as err:
        told(err)  # retryable or not ours: ends with its next step, raised as it is
        raise


_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


def as_bool(value: Any, name: str) -> bool:
    """A flag from a bool, or from a rendered template or form string (``"True"``, ``"off"``).

    :raises ConfigValidationError: anything else (a number, a list, ``"maybe"``), naming ``name``.
    """
    from affiliate_network.exceptions import ConfigValidationError

    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ConfigValidationError(
        f"{name} must be true or false, got a {type(value).__name__} ({str(value)[:40]!r})"
    )


class AffiliateNetworkBaseOperator(BaseOperator):
    """Adapter base: subclasses implement :meth:`execute_job` and use :attr:`hook`.

    The hook is built on first use (never at DAG parse time) from
    ``affiliate_network_conn_id`` and ``hook_kwargs``, and closed when ``execute`` ends, on
    success or error, so no pooled connection or worker thread outlives the task. A
    :class:`~affiliate_network.exceptions.NonRetryableError` leaves ``execute`` as an
    ``AirflowFailException`` too (:func:`fail_fast`): the task fails without its retries.
    """

    affiliate_network_conn_id: str
    hook_kwargs: dict[str, Any] | None = None

    @cached_property
    def hook(self) -> AffiliateNetworkHook:
        """The task's :class:`AffiliateNetworkHook` (one per execution)."""
        from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

        return AffiliateNetworkHook(self.affiliate_network_conn_id, **(self.hook_kwargs or {}))

    def execute(self, context: Context) -> Any:
        try:
            with failing_fast():
                return self.execute_job(context)
        finally:
            self.close_hook()

    def execute_job(self, context: Context) -> Any:
        """The operator's work (argument checks, one call into a job library, a summary)."""
        raise NotImplementedError

    def close_hook(self) -> None:
        """Close the hook if this execution built one (the next execution builds a new one)."""
        hook = self.__dict__.pop("hook", None)
        if hook is not None:
            hook.close()
