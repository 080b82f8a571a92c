"""A conversion list that changes while it is read: every row that exists throughout the pull is
served exactly once, whatever leaves and arrives between two requests.

Real HTTP to the sandbox; the list changes through its own mechanisms between requests
(approving an on-hold conversion takes it out of a ``status: pending`` listing, moving the
frozen clock on makes new conversions exist): :mod:`tests.support.changing_lists`. Offset
paging lost a row silently here (one removed from a page already served, one arrived behind:
every count check passed); the time-sliced pull cannot.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import zoneinfo
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.changing_lists import (
    PENDING,
    ChangeBetween,
    ChangingDay,
    crowded_second,
    judge,
)

#: Bounded for CI (each example is a fresh sandbox state and one pull over real HTTP).
PROPERTY = settings(
    max_examples=int(os.environ.get("AFN_PAGING_EXAMPLES", "20")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _pull(
    make_hook: Callable[..., Any],
    conn: str,
    day: ChangingDay,
    changes: dict[int, Callable[[], None]],
    *,
    page_size: int,
    concurrency: int = 1,
) -> tuple[list[str], int]:
    """The ids one pull served (in order) and the number of answers it took."""
    between = ChangeBetween(changes)
    hook = make_hook(conn, concurrency=concurrency, adapter=between)
    pull = hook.iter_conversions(
        from_date=day.day,
        to_date=day.day,
        timezone_id=day.timezone_id,
        filters=day.filters,
        page_size=page_size,
    )
    return [r["conversion_id"] for r in pull], between.answers


def _fresh_day(sandbox: Any, day: dt.date, timezone_id: int = 67) -> ChangingDay:
    sandbox.reset()
    changing = ChangingDay(sandbox, day, timezone_id)
    changing.freeze_inside(0.6)
    return changing


def test_the_issue_example_four_rows_page_size_two_loses_nothing() -> None:
    """The fake network of the issue: rows c1..c4, page size 2; after the first answer c1
    leaves and c5 arrives. Offset pages served c1, c2 then c4, c5: c3 lost with every count
    right. Slices: the window is split, each slice answered whole by one request."""
    from affiliate_network.hooks._paging import RawPage, SlicedPull

    rows = {"c1": 10, "c2": 20, "c3": 30, "c4": 40}
    answers = 0

    def fetch(start: int, end: int, page: int, size: int) -> RawPage:
        nonlocal answers
        hits = sorted((t, cid) for cid, t in rows.items() if start <= t < end)
        chunk = hits[(page - 1) * size : page * size]
        body = {
            "conversions": [{"conversion_id": cid, "t": t} for t, cid in chunk],
            "paging": {"page": page, "page_size": size, "total_count": len(hits)},
        }
        answers += 1
        if answers == 1:
            del rows["c1"]
            rows["c5"] = 50
        return RawPage(orjson.dumps(body), 0)

    pull = SlicedPull(
        fetch,
        window=(0, 60),
        key="conversions",
        page_size=2,
        concurrency=1,
        label="fake",
        log=logging.getLogger("test"),
        unique_key="conversion_id",
    )
    served = [r["conversion_id"] for r in pull]
    judge(served, {"c1", "c2", "c3", "c4"}, {"c2", "c3", "c4", "c5"})
    assert pull.stats.splits >= 1
    assert pull.stats.paged_seconds == 0


def test_removal_plus_arrival_at_every_boundary_loses_no_row(
    sandbox, network_conn, make_hook
) -> None:
    """After each answer in turn (every boundary between two requests of the pull), the
    earliest held conversion is approved (it sat on the first page) and one more arrives.
    Every row that stayed is served once. Before the fix: for every boundary inside the
    offset pages one row was never served, silently."""
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    _, clean = _pull(make_hook, network_conn, _fresh_day(sandbox, day), {}, page_size=4)
    boundaries = clean
    assert boundaries >= 8
    for after in range(1, boundaries + 1):
        changing = _fresh_day(sandbox, day)
        before = set(changing.listing())
        served, _ = _pull(
            make_hook, network_conn, changing, {after: changing.change([0], 1)}, page_size=4
        )
        now = set(changing.listing())
        # the change happened: one row left, one arrived
        assert (len(before - now), len(now - before)) == (1, 1), after
        judge(served, before, now)


@PROPERTY
@given(
    page_size=st.integers(2, 9),
    first=st.integers(1, 14),
    second=st.integers(1, 20),
    removals=st.lists(st.integers(0, 80), min_size=0, max_size=3),
    arrivals=st.integers(0, 3),
    concurrency=st.sampled_from([1, 3]),
)
def test_any_removals_and_arrivals_at_any_boundaries_lose_no_row(
    sandbox, network_conn, make_hook, page_size, first, second, removals, arrivals, concurrency
) -> None:
    """Property over the boundaries, page sizes, how many rows leave (anywhere in the list)
    and arrive, at two boundaries, with concurrent slices too."""
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    changing = _fresh_day(sandbox, day)
    before = set(changing.listing())
    changes = {first: changing.change(removals, arrivals)}
    changes.setdefault(second, changing.change(removals[:1], 1))
    served, _ = _pull(
        make_hook, network_conn, changing, changes, page_size=page_size, concurrency=concurrency
    )
    judge(served, before, set(changing.listing()))


@pytest.mark.parametrize("day", ["2026-03-08", "2026-11-01"])  # 23 and 25 hours in New York
def test_a_dst_day_in_new_york_is_sliced_in_utc_and_loses_no_row(
    sandbox, network_conn, make_hook, requests_to, day
) -> None:
    """A DST day of America/New_York (timezone 80): the slices are UTC seconds (timezone 67)
    tiling exactly the local day's instants, and a change at every boundary loses nothing."""
    the_day = dt.date.fromisoformat(day)
    config = {"end_date": (the_day + dt.timedelta(days=2)).isoformat(), "days": 4}
    ny = zoneinfo.ZoneInfo("America/New_York")
    start = dt.datetime(the_day.year, the_day.month, the_day.day, tzinfo=ny)
    stop = start.replace(day=the_day.day + 1)
    hours = (stop.timestamp() - start.timestamp()) / 3600
    assert hours in (23, 25)

    def held_day() -> ChangingDay:
        sandbox.reset(**config)
        changing = ChangingDay(sandbox, the_day, 80)
        changing.freeze_inside(0.6)
        return changing

    _, answers = _pull(make_hook, network_conn, held_day(), {}, page_size=3)
    for after in range(1, answers + 1, max(1, answers // 6)):
        changing = held_day()
        before = set(changing.listing())
        served, _ = _pull(
            make_hook, network_conn, changing, {after: changing.change([0], 1)}, page_size=3
        )
        judge(served, before, set(changing.listing()))

    sandbox.reset(**config)
    changing = ChangingDay(sandbox, the_day, 80, filters=None)
    changing.sandbox.set_clock(stop + dt.timedelta(days=1))
    truth = set(changing.listing())
    sandbox.clear_requests()
    served, _ = _pull(make_hook, network_conn, changing, {}, page_size=100)
    assert sorted(served) == sorted(truth)
    bodies = [
        e["body"] if isinstance(e["body"], dict) else orjson.loads(e["body"])
        for e in requests_to("/networks/reporting/conversions", "POST")
    ]
    assert {b["timezone_id"] for b in bodies} == {67}
    utc = "%Y-%m-%d %H:%M:%S"
    assert (bodies[0]["from"], bodies[0]["to"]) == (
        start.astimezone(dt.UTC).strftime(utc),
        (stop - dt.timedelta(seconds=1)).astimezone(dt.UTC).strftime(utc),
    )


def test_a_second_fuller_than_a_page_is_paged_with_the_checks(
    sandbox, network_conn, make_hook
) -> None:
    """One second holding more records than a page cannot be split: it is paged with the
    offset checks, so a shift there stops the pull (and the landing pulls again)."""
    from affiliate_network.exceptions import PullShiftedError

    sandbox.reset(conversions_per_day=200_000, days=2)
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    # three in one second: the fault holds one back from the first answer, and two still
    # overflow a page of one
    at, held = crowded_second(sandbox, day)
    hook = make_hook(network_conn, concurrency=1)
    pull = hook.iter_conversions(from_date=at, to_date=at, timezone_id=67, page_size=1)
    assert len(list(pull)) == held
    assert pull.stats.paged_seconds == 1

    sandbox.set_faults(insert_after_page=1, insert_count=1)
    pull = hook.iter_conversions(from_date=at, to_date=at, timezone_id=67, page_size=1)
    with pytest.raises(PullShiftedError, match="total_count changed"):
        list(pull)


def test_a_status_filtered_listing_without_changes_is_the_truth(
    sandbox, network_conn, make_hook
) -> None:
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    changing = ChangingDay(sandbox, day, filters=list(PENDING))
    truth = set(changing.listing())
    served, answers = _pull(make_hook, network_conn, changing, {}, page_size=5, concurrency=4)
    assert sorted(served) == sorted(truth)
    assert len(truth) > 20
    assert answers >= len(truth) / 5
