"""The notifier on its own: the reconciliation task's failure (issue 28 item 1 lands later) and a
receiver that is down, delivered to the loopback webhook by the notifier Airflow calls."""

from __future__ import annotations

import json

from affiliate_network.exceptions import NonRetryableError
from affiliate_network.notify.notifier import AffiliateNetworkNotifier


class ReconciliationError(NonRetryableError):
    """Stands for the reconciliation task's error: found by its class name, fields listed."""

    def __init__(self, message: str, *, day: str, cells: list[str], payout_difference: float):
        super().__init__(message)
        self.day = day
        self.cells = cells
        self.payout_difference = payout_difference


def test_a_failed_reconciliation_reaches_the_chat_with_its_cells_and_what_to_do(
    notify_include, webhook, chat_conn
) -> None:
    notify_include({"enabled": True, "webhook": {"conn_id": chat_conn, "format": "json"}})
    error = ReconciliationError(
        "2026-11-20 does not match the network's totals: 2 cells differ",
        day="2026-11-20",
        cells=["affiliate 2001 / offer 7: conversions 41 != 43", "affiliate 2002 / offer 9"],
        payout_difference=-18.5,
    )
    # What the task runner hands an on_failure_callback (a plain mapping is enough here).
    AffiliateNetworkNotifier()({"exception": error})

    [body] = webhook.bodies
    assert body["event"] == "reconciliation_failed"
    stake = "\n".join(body["at_stake"])
    assert "day: 2026-11-20" in stake
    assert "affiliate 2001 / offer 7: conversions 41 != 43" in stake
    assert "payout_difference: -18.5" in stake
    assert "clear the day's pull task" in body["to_do"]
    assert body["runbook"] == "docs/notifications.md#a-day-did-not-reconcile"


def test_an_event_left_out_of_events_is_not_sent(notify_include, webhook, chat_conn) -> None:
    notify_include(
        {"enabled": True, "webhook": {"conn_id": chat_conn}, "events": ["guardrail_tripped"]}
    )
    AffiliateNetworkNotifier()({"exception": RuntimeError("boom")})
    assert webhook.bodies == []


def test_a_receiver_that_is_down_is_logged_and_nothing_raises(
    notify_include, webhook, chat_conn, monkeypatch, capfd
) -> None:
    url = webhook.url
    webhook.stop()  # nothing listens any more
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHAT", json.dumps({"conn_type": "http", "host": f"{url}/hooks/secret"})
    )
    notify_include({"enabled": True, "webhook": {"conn_id": chat_conn, "timeout_s": 2}})
    AffiliateNetworkNotifier()({"exception": RuntimeError("boom")})
    AffiliateNetworkNotifier("review_waiting")({})
    # BaseNotifier's own wrapper re-raises what notify() raises: nothing reached it. Our log
    # line says which channel failed, without the webhook URL (its path is the secret).
    out = capfd.readouterr()
    ours = [line for line in (out.out + out.err).splitlines() if "not delivered by webhook" in line]
    assert len(ours) == 2
    assert "'task_failed' not delivered by webhook (connection 'chat')" in ours[0]
    assert "'review_waiting'" in ours[1]
    assert not [line for line in ours if "hooks/secret" in line]
    # The HTTP hook logs the URL's path itself when the receiver is down: the path is handed
    # to Airflow's secret masker, which masks it in real task logs (not in this test's output).
    from airflow.sdk.log import redact

    assert "hooks/secret" not in str(redact("Max retries exceeded with url: /hooks/secret"))


def test_the_reconciliation_tasks_own_error_lists_its_cells(
    notify_include, webhook, chat_conn
) -> None:
    """The real class (``affiliate_network.exceptions``) found by the same describer."""
    from affiliate_network.exceptions import ReconciliationError as TaskError

    notify_include({"enabled": True, "webhook": {"conn_id": chat_conn, "format": "json"}})
    error = TaskError(
        "2026-11-20 does not reconcile with the network's report: 1 of 96 cells differ",
        day="2026-11-20",
        cells=["affiliate 2001 offer 104: cv landed 4 network 5 (difference 1)"],
        differences=1,
        totals={"difference": {"cv": 1, "payout": "30.5", "revenue": "41"}},
        comparison_path="data/conversions/date=2026-11-20/_reconciliation.json",
    )
    AffiliateNetworkNotifier()({"exception": error})
    [body] = webhook.bodies
    assert body["event"] == "reconciliation_failed"
    stake = "\n".join(body["at_stake"])
    assert "day: 2026-11-20" in stake
    assert "affiliate 2001 offer 104: cv landed 4 network 5 (difference 1)" in stake
    assert "differences: 1" in stake
    assert "_reconciliation.json" in stake
