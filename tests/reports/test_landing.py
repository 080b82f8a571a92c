"""The reports job library without an operator or a task context: a hook, a base, a day."""

from __future__ import annotations

import datetime as dt
import logging
import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affiliate_network.hooks._paging import PagedIterator
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.manifest import read_manifest
from affiliate_network.partitions.read import read_partition
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from tests.support.changing_lists import (
    PENDING,
    ChangeBetween,
    ChangingDay,
    crowded_second,
    judge,
)


@dataclass(frozen=True)
class OneSecond(ConversionPull):
    """One crowded second of the day (``YYYY-MM-DD hh:mm:ss``), landed as the day's partition:
    paged with the count checks where the conversions arriving between pages shift it."""

    at: str = ""

    def pages(self, hook: AffiliateNetworkHook, page_size: int | None) -> PagedIterator:
        return hook.iter_conversions(
            from_date=self.at, to_date=self.at, timezone_id=self.timezone_id,
            page_size=page_size, raw_pages=True,
        )  # fmt: skip


def test_land_a_day_directly(sandbox, network_conn, tmp_path) -> None:
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    pull = ConversionPull(day, 67)
    hook = AffiliateNetworkHook(network_conn)
    try:
        summary = land_conversion_day(
            hook,
            str(tmp_path),
            pull,
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
    assert manifest.request == pull.record()
    assert summary["rows"] == manifest.row_count == expected > 0
    assert read_partition(summary["path"]).num_rows == expected


def _land_changing(changing: ChangingDay, conn: str, base, changes, *, page_size: int) -> list:
    """Land ``changing``'s listing with ``changes`` made between the hook's requests; the
    conversion ids of the published partition."""
    hook = AffiliateNetworkHook(conn, adapter=ChangeBetween(changes), concurrency=1)
    try:
        summary = land_conversion_day(
            hook,
            str(base),
            ConversionPull(changing.day, changing.timezone_id, filters=changing.filters),
            page_size=page_size,
            consistency_wait_s=0.01,
            log=logging.getLogger("test"),
        )
    finally:
        hook.close()
    manifest = read_manifest(summary["path"])
    assert manifest is not None
    assert manifest.request["from"] == changing.day.isoformat()
    assert manifest.request["timezone_id"] == changing.timezone_id
    return read_partition(summary["path"]).column("conversion_id").to_pylist()


def _changing_day(sandbox, day: dt.date, timezone_id: int = 67, **config) -> ChangingDay:
    sandbox.reset(**config)
    changing = ChangingDay(sandbox, day, timezone_id, filters=list(PENDING))
    changing.freeze_inside(0.6)
    return changing


def test_a_day_that_changes_at_any_boundary_lands_every_row_that_stayed(
    sandbox, network_conn, tmp_path
) -> None:
    """The day's held conversions (a ``status: pending`` list) while the review approves one
    of the first and a new one arrives, after each answer in turn: the partition holds every
    row that was there from the first request to the last, once. Before the fix the landing
    published one row short for every boundary inside the offset pages, as consistent."""
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    counter = ChangeBetween({})
    hook = AffiliateNetworkHook(network_conn, adapter=counter, concurrency=1)
    changing = _changing_day(sandbox, day)
    try:
        sum(1 for _ in hook.iter_conversions(
            from_date=day, to_date=day, timezone_id=67, filters=PENDING, page_size=6
        ))  # fmt: skip
    finally:
        hook.close()
    assert counter.answers >= 8
    for after in range(1, counter.answers + 1):
        changing = _changing_day(sandbox, day)
        before = set(changing.listing())
        landed = _land_changing(
            changing, network_conn, tmp_path / str(after), {after: changing.change([0], 1)},
            page_size=6,
        )  # fmt: skip
        judge(landed, before, set(changing.listing()))


@settings(
    max_examples=int(os.environ.get("AFN_PAGING_EXAMPLES", "20")) * 2 // 5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    page_size=st.integers(2, 9),
    first=st.integers(2, 14),
    removals=st.lists(st.integers(0, 20), min_size=1, max_size=3, unique=True),
    more=st.sampled_from([0, 0, 0, 1, -1]),
    new_york=st.booleans(),
)
def test_any_change_during_a_landing_lands_every_row_that_stayed(
    sandbox, network_conn, tmp_path_factory, page_size, first, removals, more, new_york
) -> None:
    """Property over boundaries, page sizes and changes (as many arrivals as removals, the
    change no count sees, or one more or fewer), on a New York DST day too."""
    arrivals = len(removals) + more
    if new_york:
        day, tz, config = dt.date(2026, 11, 1), 80, {"end_date": "2026-11-03", "days": 4}
    else:
        sandbox.reset()  # an earlier example may have left the DST world
        day, tz, config = dt.date.fromisoformat(sandbox.catalog()["last_date"]), 67, {}
    changing = _changing_day(sandbox, day, tz, **config)
    before = set(changing.listing())
    landed = _land_changing(
        changing,
        network_conn,
        tmp_path_factory.mktemp("landing"),
        {first: changing.change(removals, arrivals)},
        page_size=page_size,
    )
    judge(landed, before, set(changing.listing()))


def test_a_second_that_shifts_is_pulled_again_and_lands_the_truth(
    sandbox, network_conn, tmp_path
) -> None:
    """A second fuller than a page is paged with the checks; conversions arriving between its
    pages (sandbox fault, first pull only) make that pull shifted: it is discarded and pulled
    again, and the partition holds the second's records."""
    sandbox.reset(conversions_per_day=200_000, days=2)
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    at, held = crowded_second(sandbox, day)
    # the fault's pulls start at each page-1 request: the whole second (1), its paged page 1 (2)
    sandbox.set_faults(insert_after_page=1, insert_count=1, insert_pulls=2)
    hook = AffiliateNetworkHook(network_conn, concurrency=1)
    try:
        summary = land_conversion_day(
            hook,
            str(tmp_path),
            OneSecond(day, 67, at=at),
            page_size=1,
            consistency_wait_s=0.01,
            log=logging.getLogger("test"),
        )
    finally:
        hook.close()
    manifest = read_manifest(summary["path"])
    assert manifest is not None
    assert manifest.stats["pull_attempts"] == 2
    assert manifest.stats["paged_seconds"] == 1
    assert summary["rows"] == manifest.row_count == held
    assert not list((tmp_path / "conversions" / "_staging").iterdir())


def test_a_second_that_always_shifts_fails_naming_the_counts_and_publishes_nothing(
    sandbox, network_conn, tmp_path
) -> None:
    """Every pull of a crowded second meets arriving conversions: after three pulls the task
    fails with PullShiftedError naming the day and the counts, and publishes nothing."""
    from affiliate_network.exceptions import PullShiftedError

    sandbox.reset(conversions_per_day=200_000, days=2)
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    at, held = crowded_second(sandbox, day)
    sandbox.set_faults(insert_after_page=1, insert_count=1)
    hook = AffiliateNetworkHook(network_conn, concurrency=1)
    try:
        with pytest.raises(PullShiftedError) as caught:
            land_conversion_day(
                hook,
                str(tmp_path),
                OneSecond(day, 67, at=at),
                page_size=1,
                consistency_wait_s=0.01,
                log=logging.getLogger("test"),
            )
    finally:
        hook.close()
    message = str(caught.value)
    assert message.startswith(f"{day}: 3 pull(s) all shifted while paging, nothing was published")
    assert f"total_count changed from {held - 1} at page 1 to {held}" in message
    assert not (tmp_path / "conversions" / f"date={day}").exists()
    assert not list((tmp_path / "conversions" / "_staging").iterdir())
