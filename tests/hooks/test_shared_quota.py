"""Processes sharing one network quota (issue 26): real subprocesses, real HTTP to one sandbox
in documented mode with small numbers (20 requests per 1-s window, 3 in flight on reporting)."""

from __future__ import annotations

import importlib.util
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from affiliate_network.exceptions import GranularQuotaError
from affiliate_network.hooks._budget import FileStore, GranularBudget, QuotaSettings, SharedBudget

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_quota.py"
_spec = importlib.util.spec_from_file_location("bench_quota", _BENCH)
assert _spec is not None
assert _spec.loader is not None
bench_quota = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_quota)


def _pull(sandbox, spellings=None, **extras):
    sandbox.set_quota(window_s=1.0, limits={"network": 20}, reporting_concurrency=3)
    sandbox.set_faults(latency_ms=60)
    extras = {
        "rate_window_s": 1.0,
        "reporting_concurrency_cap": 3,
        "quota_dir": tempfile.mkdtemp(prefix="quota-test-"),
        "quota_network": uuid.uuid4().hex,
        **extras,
    }
    return bench_quota.run_scenario(
        sandbox, processes=3, pages=36, extras=extras, base_delay=0.05, spellings=spellings
    )


@pytest.mark.parametrize(
    "store", [{}, {"quota_redis_url": "redis://127.0.0.1:6379/0"}], ids=["file", "redis"]
)
def test_three_processes_share_one_quota_without_a_429(sandbox, store):
    res = _pull(sandbox, **store)
    assert res["errors"] == []
    assert res["rows"] == res["expected_rows"]
    assert res["status_429"] == 0, res["refused"]


def _spellings(sandbox) -> list[dict[str, str]]:
    """Three connections to the one sandbox, written three ways: by IP address (naming the
    network by its other host name: two host names are joined only when a person says so), by
    host name, and by the host name in capitals with a trailing slash."""
    port = urlsplit(sandbox.base_url).port
    return [
        {"host": f"http://127.0.0.1:{port}/v1", "network": f"http://localhost:{port}/v1"},
        {"host": f"http://localhost:{port}/v1"},
        {"host": f"HTTP://LOCALHOST:{port}/v1/"},
    ]


def test_three_spellings_of_one_network_share_one_quota_without_a_429(sandbox):
    extras = {"quota_network": "", "quota_dir": tempfile.mkdtemp(prefix="quota-test-")}
    res = _pull(sandbox, spellings=_spellings(sandbox), **extras)
    assert res["errors"] == []
    assert res["rows"] == res["expected_rows"]
    assert res["status_429"] == 0, res["refused"]


def test_three_spellings_key_one_quota_lease_and_ledger(sandbox, make_connection, tmp_path):
    from affiliate_network.hooks._budget import scope_of
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.lease import lease_path
    from affiliate_network.sync.ledger import default_ledger_path

    hooks = []
    for n, spelling in enumerate(_spellings(sandbox)):
        conn = make_connection(f"spelling_{n}", key=sandbox.keys["network"], **spelling)
        hooks.append(AffiliateNetworkHook(conn))
    [network] = {hook.network for hook in hooks}
    assert str(network) == f"http://localhost:{urlsplit(sandbox.base_url).port}/v1"
    assert len({scope_of(hook.network, hook.portal) for hook in hooks}) == 1
    assert len({str(lease_path(str(tmp_path), hook.network.slug)) for hook in hooks}) == 1
    assert len({default_ledger_path(hook.network.slug, str(tmp_path)) for hook in hooks}) == 1
    # The IP address alone is another network: nothing proves the two names one machine.
    alone = make_connection("by_ip", host=sandbox.base_url, key=sandbox.keys["network"])
    assert AffiliateNetworkHook(alone).network != network


def test_per_process_throttles_hit_the_shared_quota(sandbox):
    # The control: the same pull with each process on its own throttle (what the hook did).
    res = _pull(sandbox, quota="local")
    assert res["status_429"] > 0
    assert res["refused"]["rate"] + res["refused"]["concurrency"] == res["status_429"]


def test_granular_refusal_names_the_numbers(tmp_path):
    settings = QuotaSettings(granular_per_hour=5, granular_window_s=3600.0)
    budget = SharedBudget(FileStore(tmp_path, "scope"), settings, "affiliate", slot_ttl_s=5)
    budget.take_granular(3, "first")
    with pytest.raises(GranularQuotaError) as info:
        budget.check_granular(4, "affiliate 2001, 2026-11-01..2026-11-04")
    message = str(info.value)
    assert "affiliate 2001, 2026-11-01..2026-11-04: needs 4 granular queries" in message
    assert "budget is 5 per rolling hour and 3 were used in the last hour (2 left)" in message
    assert "enough frees in 1:00:00" in message  # the oldest of the 3 leaves in an hour
    assert "Nothing was sent" in message
    # A second process sees the same count (one file per network, not per hook).
    other = SharedBudget(FileStore(tmp_path, "scope"), settings, "affiliate", slot_ttl_s=5)
    assert other.granular_status().used == 3
    with pytest.raises(GranularQuotaError, match="more than the whole budget"):
        other.check_granular(6, "backfill")


def test_wait_for_counts_the_oldest_queries_out():
    status = GranularBudget(budget=4, window_s=100.0, ages=(90.0, 50.0, 10.0))
    assert status.wait_for(1) == 0.0
    assert status.wait_for(2) == pytest.approx(10.0)  # the 90-s-old one must leave
    assert status.wait_for(3) == pytest.approx(50.0)
    assert status.wait_for(5) is None


def test_affiliate_report_refuses_before_sending_when_the_hour_is_spent(
    sandbox, make_connection, make_hook, affiliate_id, tmp_path
):
    import dataclasses
    import datetime as dt
    import logging

    from affiliate_network.reports.affiliate import EntityTablePull, fetch_entity_table

    conn = make_connection(
        "affiliate_network_affiliate_quota",
        host=sandbox.base_url,
        key=sandbox.keys["affiliate"][affiliate_id],
        portal="affiliate",
        quota_dir=str(tmp_path),
        granular_per_hour=2,
    )
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    pull = EntityTablePull(
        affiliate_id=str(affiliate_id),
        start=day,
        end=day,
        columns=["offer", "country", "date"],
        timezone_id=67,
        timezone="America/New_York",
        conn_id=conn,
    )
    log = logging.getLogger(__name__)
    for _ in range(2):
        assert fetch_entity_table(make_hook(conn), pull, log)
    sent = len(sandbox.requests_log())
    with pytest.raises(GranularQuotaError, match=r"needs 1 granular queries.*budget is 2.*2 were"):
        fetch_entity_table(make_hook(conn), pull, log)
    assert len(sandbox.requests_log()) == sent  # nothing was sent
    # Columns outside the guide's list are not granular: no budget needed.
    offers = dataclasses.replace(pull, columns=["offer"])
    assert fetch_entity_table(make_hook(conn), offers, log)


def test_backfill_estimate_counts_granular_affiliates_per_day():
    from affiliate_network.reports.affiliate import estimate_granular_backfill

    targets = [{"columns": ["offer", "country", "date"]}] * 50 + [{"columns": ["offer"]}]
    est = estimate_granular_backfill(30, targets)
    assert (est.queries, est.min_duration_s) == (1500, 3600.0)
    assert "takes at least 1.0 h under the granular quota" in str(est)
    assert estimate_granular_backfill(30, targets[:1]).min_duration_s == 0


def test_network_report_spends_granular_queries_only_for_granular_columns(
    sandbox, make_connection, make_hook, tmp_path
):
    """The network's aggregated report by affiliate and offer (reconciliation) spends none of
    the hourly granular quota; the same report with a granular column spends one and is
    refused before sending when the hour is spent."""
    import datetime as dt

    conn = make_connection(
        "affiliate_network_quota_network_table",
        host=sandbox.base_url,
        key=sandbox.keys["network"],
        quota_dir=str(tmp_path),
        granular_per_hour=1,
    )
    hook = make_hook(conn)
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    for _ in range(3):
        assert hook.network_entity_table(
            from_date=day, to_date=day, columns=["affiliate", "offer"], timezone_id=67
        )
    assert hook.granular_budget().used == 0
    granular = {"from_date": day, "to_date": day, "columns": ["affiliate", "sub1"]}
    assert hook.network_entity_table(**granular, timezone_id=67)
    assert hook.granular_budget().used == 1
    sent = len(sandbox.requests_log())
    with pytest.raises(GranularQuotaError):
        hook.network_entity_table(**granular, timezone_id=67)
    assert len(sandbox.requests_log()) == sent  # nothing was sent
