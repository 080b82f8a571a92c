"""Client-side throttling keeps a rate-limited pull free of 429s."""

from __future__ import annotations


def _pull_statuses(sandbox, hook) -> tuple[int, list[int]]:
    catalog = sandbox.catalog()
    rows = sum(
        1
        for _ in hook.iter_conversions(
            from_date=catalog["first_date"],
            to_date=catalog["last_date"],
            timezone_id=67,
            page_size=200,
        )
    )
    statuses = [
        e["status"] for e in sandbox.requests_log() if e["path"].endswith("/reporting/conversions")
    ]
    return rows, statuses


def test_throttled_pull_sees_no_429(network_conn, make_hook, sandbox):
    truth = sandbox.truth(sandbox.catalog()["first_date"], sandbox.catalog()["last_date"])
    sandbox.set_rate_limit(capacity=5, refill_per_second=10)
    hook = make_hook(network_conn, concurrency=4)
    rows, statuses = _pull_statuses(sandbox, hook)
    assert rows == truth["conversions"]
    assert len(statuses) >= 30  # enough requests to drain the bucket several times over
    assert 429 not in statuses
    assert hook.throttle.waits > 0  # it did have to hold requests back


def test_without_throttling_the_same_pull_hits_429(network_conn, make_hook, sandbox):
    # The control: proves the scenario above really is rate-limited.
    sandbox.set_rate_limit(capacity=5, refill_per_second=10)
    hook = make_hook(network_conn, concurrency=4, throttle=False, max_attempts=20)
    rows, statuses = _pull_statuses(sandbox, hook)
    assert rows > 0
    assert 429 in statuses
