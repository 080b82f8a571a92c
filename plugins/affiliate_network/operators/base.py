"""The one base of the package's operators: a hook per execution, always closed."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook


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
    success or error, so no pooled connection or worker thread outlives the task.
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
