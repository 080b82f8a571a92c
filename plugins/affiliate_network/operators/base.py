"""The one base of the package's operators: a hook per execution, always closed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseOperator

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger

    from affiliate_network.exceptions import NonRetryableError
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

#: The JSON Schema dialect of the DAGs' params (``Param(..., **PARAM_DIALECT)``). Airflow checks a
#: scheduled DAG's params at every parse, schema first: against draft-07's metaschema that costs
#: about a third of the default 2020-12 one, and the params use only keywords the two share.
PARAM_DIALECT: dict[str, str] = {"$schema": "http://json-schema.org/draft-07/schema#"}

#: Waits for a shared resource up to this long are slept in the worker; longer ones defer.
DEFER_AFTER_S = 60.0


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
    # Loaded when a task runs, not when a DAG file imports an operator (the twins are a class
    # per error: a few milliseconds of every parse).
    from affiliate_network.compat import AirflowFailException
    from affiliate_network.operators.failing import twin_of

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
    from affiliate_network.compat import AirflowFailException
    from affiliate_network.exceptions import NonRetryableError
    from affiliate_network.operators.failing import told

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


def default_deferrable() -> bool:
    """The deployment's ``[operators] default_deferrable``, the default of the official providers.

    ``airflow.configuration`` is core's parser, present on every supported release (the Task
    SDK's own parser arrived in 3.2); the provider depends on ``apache-airflow``, so it is there.
    """
    from airflow.configuration import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)


def deferral_settings(deferrable: Any, defer_after_s: Any) -> tuple[bool, float]:
    """Checked ``deferrable`` (``None``: :func:`default_deferrable`) and ``defer_after_s``.

    :raises ConfigValidationError: ``deferrable`` not a flag, ``defer_after_s`` not a number >= 0.
    """
    from affiliate_network.exceptions import ConfigValidationError

    flag = default_deferrable() if deferrable is None else as_bool(deferrable, "deferrable")
    if isinstance(defer_after_s, bool) or not isinstance(defer_after_s, int | float):
        raise ConfigValidationError(
            f"defer_after_s must be a number of seconds, got {defer_after_s!r}"
        )
    if not defer_after_s >= 0:
        raise ConfigValidationError(f"defer_after_s must be >= 0, got {defer_after_s}")
    return flag, float(defer_after_s)


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
    #: Whether a long wait for a shared resource defers to the triggerer (:meth:`wait_deferred`).
    deferrable: bool = False
    #: Waits up to this many seconds are slept in the worker; longer ones defer when deferrable.
    defer_after_s: float = DEFER_AFTER_S
    #: What the trigger said when this execution resumed after a deferred wait (else ``None``).
    resumed_with: dict[str, Any] | None = None

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

    def run_recorded(
        self,
        context: Context,
        job: Callable[[], dict[str, Any]],
        *,
        folder: Callable[[str, str], Any],
        outcome_of: Callable[[dict[str, Any]], tuple[str, str | None]],
        stops: tuple[type[BaseException], ...] = (),
    ) -> dict[str, Any]:
        """``job()``, with what the run was recorded beside its outputs
        (:func:`affiliate_network.helpers.run_records.run_and_record` says how)."""
        from affiliate_network.exceptions import GuardrailError
        from affiliate_network.helpers.run_records import RunIdentity, run_and_record

        ti = (context or {}).get("ti")
        run_id = str((context or {}).get("run_id") or getattr(ti, "run_id", None) or "manual")
        identity = RunIdentity(
            dag_id=self.dag_id,
            run_id=run_id,
            task_id=self.task_id,
            attempt=int(getattr(ti, "try_number", None) or 1),
            conn_id=getattr(self, "affiliate_network_conn_id", None),
        )
        return run_and_record(
            job,
            identity,
            folder=folder(self.dag_id, run_id),
            outcome_of=outcome_of,
            stops=(GuardrailError, *stops),
            log=self.log,
        )

    def wait_deferred(
        self, trigger: BaseTrigger, *, why: str, kwargs: dict[str, Any] | None = None
    ) -> NoReturn:
        """Give the worker slot back while ``trigger`` waits in the triggerer; then run again.

        The task resumes in :meth:`execute_after_wait`, which runs :meth:`execute` from the
        start: every check is made anew (another task may have taken what freed meanwhile, and
        then the task waits again). The hook is closed before the task leaves the worker.

        :param trigger: what waits (serializable; fires one event when it is worth trying again).
        :param why: what is waited for, for the task log.
        :param kwargs: JSON-able values handed to the resumed execution (:attr:`resumed_with`).
        """
        self.close_hook()
        self.log.info("%s: deferring to the triggerer, the worker slot is free meanwhile", why)
        self.defer(
            trigger=trigger, method_name="execute_after_wait", kwargs={"state": kwargs or {}}
        )

    def execute_after_wait(
        self, context: Context, event: Any = None, state: dict[str, Any] | None = None
    ) -> Any:
        """Resume after :meth:`wait_deferred`: the trigger's ``event``, then :meth:`execute`.

        :param event: the trigger's event payload.
        :param state: the ``kwargs`` given to :meth:`wait_deferred`.
        """
        self.resumed_with = {"event": event, **(state or {})}
        self.log.info("Resumed after a deferred wait (trigger event %s); checking again", event)
        return self.execute(context)

    def close_hook(self) -> None:
        """Close the hook if this execution built one (the next execution builds a new one)."""
        hook = self.__dict__.pop("hook", None)
        if hook is not None:
            hook.close()
