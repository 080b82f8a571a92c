"""Rate limiting (token bucket per key) and fault injection (deterministic by seed)."""

from __future__ import annotations

import time

import pytest
import requests

from tests.support.sandbox_api import CONVERSIONS, Api, day_body


def test_remaining_decreases_then_429_with_retry_after(api, sandbox, day):
    sandbox.set_rate_limit(capacity=5, refill_per_second=0.01)
    remaining = [
        int(api.conversions(day_body(day)).headers["X-RateLimit-Remaining"]) for _ in range(5)
    ]
    assert remaining == [4, 3, 2, 1, 0]
    resp = api.conversions(day_body(day))
    assert resp.status_code == 429
    assert resp.json() == {"Error": "Too Many Requests"}
    assert int(resp.headers["Retry-After"]) >= 1
    # Buckets are per key: another key still has tokens.
    assert (
        api.call("POST", CONVERSIONS, key="network_restricted", json=day_body(day)).status_code
        == 200
    )


def test_bucket_refills(api, sandbox, day):
    sandbox.set_rate_limit(capacity=1, refill_per_second=20)
    assert api.conversions(day_body(day)).status_code == 200
    time.sleep(0.2)
    assert api.conversions(day_body(day)).status_code == 200


def test_reset_restores_the_generous_default(api, sandbox, day):
    sandbox.set_rate_limit(capacity=1, refill_per_second=0)
    api.conversions(day_body(day))
    sandbox.reset()
    assert int(api.conversions(day_body(day)).headers["X-RateLimit-Remaining"]) > 1000


def _statuses(api, day, n):
    return [api.call("GET", "/networks/labels/vip").status_code for _ in range(n)]


def test_error_rate_share_is_roughly_as_configured(api, sandbox, day):
    sandbox.set_faults(error_rate=0.3, seed=1)
    statuses = _statuses(api, day, 300)
    failed = [s for s in statuses if s != 200]
    assert 0.2 <= len(failed) / len(statuses) <= 0.4
    assert set(failed) <= {500, 503, 504, 429}
    assert len(set(failed)) >= 3


def test_faults_are_deterministic_by_seed(api, sandbox, day):
    sandbox.set_faults(error_rate=0.5, seed=3)
    a = _statuses(api, day, 40)
    sandbox.set_faults(error_rate=0.5, seed=3)
    b = _statuses(api, day, 40)
    sandbox.set_faults(error_rate=0.5, seed=4)
    c = _statuses(api, day, 40)
    assert a == b
    assert a != c


def test_statuses_and_retry_after(api, sandbox, day):
    sandbox.set_faults(error_rate=1.0, statuses=[503], retry_after_s=7)
    resp = api.call("GET", "/networks/labels/vip")
    assert resp.status_code == 503
    assert resp.headers["Retry-After"] == "7"
    sandbox.set_faults(error_rate=1.0, statuses=[500], retry_after_s=7)
    assert "Retry-After" not in api.call("GET", "/networks/labels/vip").headers


def test_paths_limit_faults_to_prefixes(api, sandbox, day):
    sandbox.set_faults(fail_hard=503, paths=["/networks/reporting"])
    assert api.conversions(day_body(day)).status_code == 503
    assert api.call("GET", "/networks/labels/vip").status_code == 200


def test_fail_hard_until_cleared(api, sandbox):
    sandbox.set_faults(fail_hard=504)
    assert _statuses(api, None, 5) == [504] * 5
    sandbox.clear_faults()
    assert _statuses(api, None, 2) == [200, 200]


def test_latency_is_added(api, sandbox):
    sandbox.set_faults(latency_ms=300)
    start = time.monotonic()
    assert api.call("GET", "/networks/labels/vip").status_code == 200
    assert time.monotonic() - start >= 0.3  # a lower bound: sleeping never returns early


def test_apply_then_delay_applies_the_write_before_the_client_times_out(api, sandbox, catalog):
    cid = catalog["network_channel_ids"][0]
    sandbox.set_faults(apply_then_delay_paths=["/networks/channels"], apply_then_delay_s=2)
    with pytest.raises(requests.Timeout):
        api.call(
            "PUT",
            f"/networks/channels/{cid}",
            json={"name": "late", "status": "active"},
            timeout=0.5,
        )
    # The write was applied before the (delayed) answer; allow a loaded machine a moment.
    deadline = time.monotonic() + 10
    while str(cid) not in sandbox.objects("channels") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox.objects("channels")[str(cid)]["name"] == "late"


def test_bad_fault_settings_are_rejected(sandbox):
    from affiliate_network_sandbox.testing import SandboxAdminError

    for bad in ({"error_rate": 2}, {"statuses": [418]}, {"colour": "red"}, {"latency_ms": -1}):
        with pytest.raises(SandboxAdminError):
            sandbox.set_faults(**bad)


def test_faults_and_requests_are_logged(api, sandbox, day):
    sandbox.set_faults(fail_hard=500)
    api.conversions(day_body(day))
    log = sandbox.requests_log()
    assert log[-1]["status"] == 500
    assert log[-1]["path"] == "/v1" + CONVERSIONS
    assert log[-1]["portal"] == "network"
    assert log[-1]["body"]["from"] == day
    counts = sandbox.request_counts()
    assert counts["by_status"]["500"] == 1
    assert counts["by_route"]["POST /v1" + CONVERSIONS] == 1
    sandbox.clear_requests()
    assert sandbox.requests_log() == []
    # No API key ever reaches the log.
    assert sandbox.keys["network"] not in str(log)


# --- documented mode: the public guide's quota (shared windows, concurrency, granular) ------------

TABLE = "/affiliates/reporting/entity/table"


def _remaining(resp) -> tuple[int, int, int]:
    return (
        resp.status_code,
        int(resp.headers["X-RateLimit-Limit"]),
        int(resp.headers["X-RateLimit-Remaining"]),
    )


def test_documented_window_is_shared_by_every_key_of_a_user_type(api, sandbox, day):
    sandbox.set_quota(window_s=60, limits={"network": 4, "affiliate": 3})
    # Two network keys draw on one window; every answer carries the shared window's headers.
    got = [_remaining(api.conversions(day_body(day))) for _ in range(2)]
    got += [
        _remaining(api.call("POST", CONVERSIONS, key="network_restricted", json=day_body(day)))
        for _ in range(2)
    ]
    assert got == [(200, 4, 3), (200, 4, 2), (200, 4, 1), (200, 4, 0)]
    refused = api.call("POST", CONVERSIONS, key="network_restricted", json=day_body(day))
    assert _remaining(refused) == (429, 4, 0)
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # Affiliate keys of two affiliates share the affiliate window, apart from the network's.
    aff = sorted(sandbox.keys["affiliate"], key=int)[:2]
    body = day_body(day, columns=[{"column": "offer"}])
    statuses = [
        api.call("POST", TABLE, key=sandbox.keys["affiliate"][a], json=body).status_code
        for a in (aff[0], aff[1], aff[0], aff[1])
    ]
    assert statuses == [200, 200, 200, 429]
    # The EU network has its own windows.
    assert api.call("GET", "/networks/labels/vip", eu=True).status_code == 200


def test_documented_reporting_concurrency_cap(api, sandbox, day):
    from concurrent.futures import ThreadPoolExecutor

    sandbox.set_quota(reporting_concurrency=2)
    sandbox.set_faults(latency_ms=400)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: Api(sandbox).conversions(day_body(day)), range(4)))
    refused = [r for r in answers if r.status_code == 429]
    assert sorted(r.status_code for r in answers) == [200, 200, 429, 429]
    assert all("concurrent" in r.json()["Error"] for r in refused)
    # Other paths are not capped; once the first ones are answered the slots are free again.
    assert api.conversions(day_body(day)).status_code == 200
    state = sandbox.admin("GET", "/_sandbox/rate_limit")
    assert (state["peak_in_flight"], state["refused"]["concurrency"]) == (2, 2)


def test_documented_granular_quota_names_itself(api, sandbox, day):
    sandbox.set_quota(granular_per_window=2, granular_window_s=120)
    key = sandbox.keys["affiliate"][sorted(sandbox.keys["affiliate"], key=int)[0]]
    other = sandbox.keys["affiliate"][sorted(sandbox.keys["affiliate"], key=int)[1]]

    def table(k, *cols):
        return api.call(
            "POST", TABLE, key=k, json=day_body(day, columns=[{"column": c} for c in cols])
        )

    assert table(key, "country", "date").status_code == 200
    assert table(other, "offer", "device_type").status_code == 200  # another affiliate, same quota
    refused = table(key, "platform")
    assert refused.status_code == 429
    assert refused.json() == {
        "Error": "Granular report quota exceeded: 2 queries per rolling 120 s"
    }
    assert 100 <= int(refused.headers["Retry-After"]) <= 120
    assert "X-RateLimit-Remaining" in refused.headers
    # Columns outside the guide's list are not granular.
    assert table(key, "offer", "date").status_code == 200


def test_documented_settings_are_validated(sandbox):
    from affiliate_network_sandbox.testing import SandboxAdminError

    with pytest.raises(SandboxAdminError, match=r"limits\.network must be an integer"):
        sandbox.set_quota(limits={"network": 0})
    with pytest.raises(SandboxAdminError, match="reporting_concurrency"):
        sandbox.set_quota(reporting_concurrency="ten")


def test_the_sandbox_and_the_hook_read_the_guides_granular_columns_alike() -> None:
    """Two copies on purpose (the sandbox shares no code with the client): they must agree."""
    from affiliate_network.api.report_columns import GRANULAR_COLUMNS as HOOK_COLUMNS
    from affiliate_network_sandbox.choices import GRANULAR_COLUMNS as SANDBOX_COLUMNS

    assert SANDBOX_COLUMNS == HOOK_COLUMNS
    assert {"country", "platform", "device_type", "sub1", "adv5"} <= SANDBOX_COLUMNS
    assert not {"offer", "advertiser", "affiliate", "date"} & SANDBOX_COLUMNS
