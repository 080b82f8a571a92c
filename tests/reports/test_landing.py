"""The reports job library without an operator or a task context: a hook, a base, a day."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.storage import read_manifest, read_partition
from tests.support.landed_history import day_request


def test_land_a_day_directly(sandbox, network_conn, tmp_path) -> None:
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    request = day_request(day)
    hook = AffiliateNetworkHook(network_conn)
    try:
        summary = land_conversion_day(
            hook,
            str(tmp_path),
            day,
            request=request,
            page_size=200,
            consistency_retries=1,
            log=logging.getLogger("test"),
        )
        expected = sum(
            1
            for _ in hook.iter_conversions(
                from_date=day, to_date=day, timezone_id=67, show_events=False
            )
        )
    finally:
        hook.close()
    manifest = read_manifest(summary["path"])
    assert manifest is not None
    assert manifest.request == request
    assert summary["rows"] == manifest.row_count == expected > 0
    assert read_partition(summary["path"]).num_rows == expected


def _land(hook, base, day, **kwargs):
    request = day_request(day)
    kwargs.setdefault("consistency_retries", 2)
    return land_conversion_day(
        hook,
        str(base),
        day,
        request=request,
        page_size=100,
        log=logging.getLogger("test"),
        consistency_wait_s=0.01,
        **kwargs,
    )


def _shift(sandbox, day: dt.date) -> tuple[int, int]:
    """(truth, insert_count): the records before the arrival fill whole pages of 100, so an
    unchecked pull's counts add up exactly while it loses the window's last records."""
    truth = sandbox.truth(day.isoformat(), day.isoformat(), timezone_id=67)["conversions"]
    count = truth % 100 or 100
    assert truth - count >= 200
    return truth, count


def _ids(hook, day: dt.date) -> list[str]:
    pull = hook.iter_conversions(from_date=day, to_date=day, timezone_id=67, show_events=False)
    return sorted(r["conversion_id"] for r in pull)


def test_a_pull_that_shifts_is_pulled_again_and_lands_the_truth(
    sandbox, network_conn, tmp_path
) -> None:
    """Conversions arrive after page 1 of the first pull only (sandbox fault, real HTTP): that
    pull is discarded and the day pulled again; the partition holds exactly the sandbox's
    records. Before the fix the first pull landed `truth - count` rows as consistent."""
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    truth, count = _shift(sandbox, day)
    sandbox.set_faults(insert_after_page=1, insert_count=count, insert_pulls=1)
    hook = AffiliateNetworkHook(network_conn)
    try:
        summary = _land(hook, tmp_path, day)
        sandbox.clear_faults()
        expected = _ids(hook, day)
    finally:
        hook.close()
    manifest = read_manifest(summary["path"])
    assert manifest is not None
    assert manifest.stats["pull_attempts"] == 2
    assert manifest.stats["consistent_with_total_count"] is True
    assert summary["rows"] == manifest.row_count == truth == len(expected)
    assert sorted(read_partition(summary["path"]).column("conversion_id").to_pylist()) == expected
    assert not list((tmp_path / "conversions" / "_staging").iterdir())


def test_a_pull_that_always_shifts_fails_naming_the_counts_and_publishes_nothing(
    sandbox, network_conn, tmp_path
) -> None:
    """Every pull meets arriving conversions: after three pulls the task fails with
    PullShiftedError naming the day and the counts; the partition landed earlier stays as it
    was (same checksum), and no staged file of the failed pulls is left. Before the fix the
    first pull replaced it with `truth - count` rows, `consistent_with_total_count: true`."""
    from affiliate_network.exceptions import PullShiftedError

    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    truth, count = _shift(sandbox, day)
    hook = AffiliateNetworkHook(network_conn)
    try:
        before = _land(hook, tmp_path, day)
        sandbox.set_faults(insert_after_page=1, insert_count=count)
        with pytest.raises(PullShiftedError) as caught:
            _land(hook, tmp_path, day)
    finally:
        hook.close()
    message = str(caught.value)
    assert message.startswith(f"{day}: 3 pull(s) all shifted while paging, nothing was published")
    assert f"total_count changed from {truth - count} at page 1 to {truth}" in message
    manifest = read_manifest(before["path"])
    assert manifest is not None
    assert manifest.row_count == truth
    assert manifest.content_checksum == before["checksum"]
    assert read_partition(before["path"]).num_rows == truth
    assert not list((tmp_path / "conversions" / "_staging").iterdir())
