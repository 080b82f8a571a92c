"""Readers of what the sandbox saw and holds, for tests that check the API side of a run."""

from __future__ import annotations

from typing import Any

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.rules.fields import on_hold_conversion_id, on_hold_status


def network_requests(sandbox: Any) -> list[dict[str, Any]]:
    """Request log entries of the /v1 API (admin calls excluded).

    :param sandbox: the running sandbox (``tests.conftest`` fixture or ``start_sandbox``).
    """
    return [e for e in sandbox.requests_log() if "/_sandbox" not in e["path"]]


def onhold_states(conn_id: str, first: str, last: str) -> dict[str, str | None]:
    """Current on-hold state of every held conversion of ``first..last``, read through the API.

    :param conn_id: an Airflow connection to the network portal.
    :param first: first day (``YYYY-MM-DD``) of the window, in timezone 67.
    :param last: last day of the window.
    """
    hook = AffiliateNetworkHook(affiliate_network_conn_id=conn_id)
    try:
        return {
            oh_id: on_hold_status(r)
            for r in hook.iter_conversions(from_date=first, to_date=last, timezone_id=67)
            if (oh_id := on_hold_conversion_id(r))
        }
    finally:
        hook.close()
