"""The one base of the package's operators: a hook per execution, always closed."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook


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
