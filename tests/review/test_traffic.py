"""The review's traffic from a snapshot plus what is new: same decisions, fewer rows.

Real HTTP to the sandbox; the rows the API answered are read from its request log
(``GET /_sandbox/requests``, ``rows`` of each conversion-report page).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affiliate_network.hooks._transport import API_KEY_HEADER
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.traffic import (
    DEFAULT_OVERLAP_S,
    pull_review_traffic,
)
from affiliate_network.rules.fields import on_hold_conversion_id, on_hold_status
from tests.support.changing_lists import ChangeBetween, judge
from tests.support.review_settings import set_review
from tests.support.review_traffic import (
    LOOKBACK,
    RULES,
    pull_traffic,
    shipped_ruleset,
    snapshot_store,
    start_of_traffic,
    traffic_fields,
    traffic_window,
)

REPORT = "/networks/reporting/conversions"
DAYS = 4
#: The sandbox of this module (the ``world`` fixture).
WORLD = {
    "seed": 7,
    "end_date": (dt.date.today() - dt.timedelta(days=1)).isoformat(),
    "days": DAYS,
    "conversions_per_day": 400,
    "on_hold_share": 0.3,
}


@pytest.fixture
def hook(conn) -> Iterator[AffiliateNetworkHook]:
    h = AffiliateNetworkHook(conn)
    yield h
    h.close()


def _rows(world: Any) -> int:
    """Conversion-report rows the API answered since the log was last cleared."""
    return sum(
        e.get("rows") or 0
        for e in world.requests_log()
        if e["method"] == "POST" and e["path"].endswith(REPORT) and e["status"] == 200
    )


def test_incremental_pull_equals_full_pull_and_asks_for_far_fewer_rows(
    world, hook, tmp_path
) -> None:
    store = snapshot_store(tmp_path)
    t1 = start_of_traffic(world)
    world.clear_requests()
    first = pull_traffic(hook, store, t1)
    assert first.mode == "full"
    assert "first run" in first.reason
    assert first.saved
    full_rows = _rows(world)
    # answers of slices split for holding more than a page are dropped, so a few more rows
    assert full_rows >= len(first.records) > 500

    # Someone decides some on-hold conversions between runs (another tool, a person).
    held = [on_hold_conversion_id(r) for r in first.records if on_hold_status(r) == "on_hold"]
    hook.set_on_hold_status(held[:5], "rejected")
    hook.set_on_hold_status(held[5:9], "approved")

    t2 = t1 + dt.timedelta(hours=1)
    world.clear_requests()
    second = pull_traffic(hook, store, t2)
    rows = _rows(world)
    assert second.mode == "incremental", second.reason
    reference = pull_traffic(hook, None, t2)  # the full window, nothing kept
    assert second.records == reference.records
    states = {on_hold_conversion_id(r): on_hold_status(r) for r in second.records}
    assert [states[i] for i in held[:9]] == ["rejected"] * 5 + ["approved"] * 4
    # New since the previous run's cursor less the late-arrival bound + what was on hold: the
    # bound of issue 14, and far below full.
    since = t1.timestamp() - DEFAULT_OVERLAP_S
    new = sum(1 for r in reference.records if r["conversion_unix_timestamp"] >= since)
    assert rows >= second.rows_new + second.rows_refreshed
    assert rows <= 2 * (new + len(held))
    assert rows < full_rows / 2


def test_lost_or_damaged_snapshot_falls_back_to_the_full_window(world, hook, tmp_path) -> None:
    store = snapshot_store(tmp_path)
    t1 = start_of_traffic(world)
    pull_traffic(hook, store, t1)
    t2 = t1 + dt.timedelta(hours=2)
    reference = pull_traffic(hook, None, t2).records
    good = store.path.read_bytes()
    damaged = {
        "unreadable": b"not gzip at all",
        "incomplete": good[: len(good) // 2],
    }
    for why, content in damaged.items():
        store.path.write_bytes(content)
        again = pull_traffic(hook, store, t2)
        assert again.mode == "full", why
        assert "unreadable" in again.reason or "incomplete" in again.reason
        assert again.records == reference
        assert again.saved
    store.path.unlink()
    lost = pull_traffic(hook, store, t2)
    assert lost.mode == "full"
    assert "first run" in lost.reason
    assert lost.records == reference
    # ...and the rewritten snapshot serves the next run incrementally.
    assert pull_traffic(hook, store, t2 + dt.timedelta(hours=1)).mode == "incremental"


def test_runs_behind_the_cursor_are_served_but_never_rewind_it(world, hook, tmp_path) -> None:
    store = snapshot_store(tmp_path)
    t1 = start_of_traffic(world)
    pull_traffic(hook, store, t1 + dt.timedelta(hours=6))
    cursor = store.load()[0].cursor_ts
    # A manual run / backfill a few hours back: the same conversions a full pull returns.
    back = pull_traffic(hook, store, t1)
    assert back.mode == "incremental"
    assert not back.saved
    assert back.records == pull_traffic(hook, None, t1).records
    assert store.load()[0].cursor_ts == cursor
    # A backfill whose window starts before the snapshot: full pull, snapshot untouched.
    older = pull_traffic(hook, store, t1 - dt.timedelta(days=1))
    assert older.mode == "full"
    assert "before the snapshot" in older.reason
    assert not older.saved
    assert store.load()[0].cursor_ts == cursor


def test_age_new_fields_and_a_forced_full_pull_fall_back(world, hook, tmp_path) -> None:
    store = snapshot_store(tmp_path)
    t1 = start_of_traffic(world)
    pull_traffic(hook, store, t1)
    later = t1 + dt.timedelta(hours=1)
    aged = pull_traffic(
        hook, store, later, clock=lambda: dt.datetime.now(dt.UTC).timestamp() + 90_000
    )
    assert aged.mode == "full"
    assert "full pull more than 24 h ago" in aged.reason
    assert pull_traffic(hook, store, later, full=True).mode == "full"
    ruleset = shipped_ruleset()
    fields, members = traffic_fields(ruleset)
    wider = pull_review_traffic(
        hook,
        window=traffic_window(ruleset, later),
        fields=fields | {"adv5"},
        members=members,
        store=store,
    )
    assert wider.mode == "full"
    assert "fields" in wider.reason
    # The snapshot now keeps the union: both field sets are served incrementally.
    assert pull_traffic(hook, store, later + dt.timedelta(hours=1)).mode == "incremental"


def _review(conn: str, base: Path, as_of: dt.datetime, run_id: str, **kw: Any) -> dict:
    set_review(
        lookback_days=LOOKBACK,
        min_age_hours=0,
        chunk_size=25,
        max_reject_share=None,
        max_reject_count=None,
    )
    op = OnHoldReviewOperator(
        task_id="review",
        affiliate_network_conn_id=conn,
        rules_file=RULES.name,
        as_of=as_of.isoformat(),
        timezone_id=67,
        lease_wait_minutes=1,
        base_path=str(base),
        **kw,
    )
    return op.execute({"run_id": run_id})


def _decisions(summary: dict) -> dict[str, tuple]:
    return {
        r["conversion_id"]: (r["rule_id"], r["action"], repr(r["matched"]))
        for r in read_jsonl(summary["audit_path"])
    }


def test_review_decisions_after_a_run_that_decided_part_of_a_group_match_a_full_window_run(
    world, conn, tmp_path
) -> None:
    base = tmp_path / "scheduled"
    t1 = start_of_traffic(world)
    # The schedule: a run that writes (rejecting the elder members of groups whose youngest
    # members are too young to decide), then the next hour's run from the snapshot.
    done = _review(conn, base, t1, "scheduled__1", dry_run=False)
    assert done["applied"]["rejected"] > 0
    t2 = t1 + dt.timedelta(hours=8)
    incremental = _review(conn, base, t2, "scheduled__2", dry_run=True)
    full = _review(conn, tmp_path / "other", t2, "manual__full", dry_run=True, full_pull=True)
    assert incremental["traffic"]["mode"] == "incremental"
    assert full["traffic"]["mode"] == "full"
    assert incremental["pulled"] == full["pulled"]
    got, want = _decisions(incremental), _decisions(full)
    assert got == want
    assert sum(1 for _, action, _ in got.values() if action == "reject") > 0
    # No planted fraud approved by the incremental run.
    catalog = world.catalog()
    planted = world.planted(catalog["first_date"], catalog["last_date"])
    fraud = {i for ids in planted["conversion_ids"].values() for i in ids}
    assert not {c for c, (_, action, _) in got.items() if action == "approve"} & fraud
    snapshot = base / "onhold_review" / "_state" / conn / "traffic-tz67.jsonl.gz"
    assert snapshot.exists()


def _listing(world: Any, window: Any) -> dict[str, int]:
    """The traffic window's conversions now, from ONE answer (atomic): id -> timestamp."""
    lo, hi = int(window.pull_from_ts), int(window.pull_to_ts)
    text = "%Y-%m-%d %H:%M:%S"
    reply = requests.post(
        world.base_url + REPORT,
        params={"page": 1, "page_size": 2000},
        json={
            "from": dt.datetime.fromtimestamp(lo, dt.UTC).strftime(text),
            "to": dt.datetime.fromtimestamp(hi, dt.UTC).strftime(text),
            "timezone_id": 67,
        },
        headers={API_KEY_HEADER: world.keys["network"]},
        timeout=30,
    ).json()
    assert reply["paging"]["total_count"] == len(reply["conversions"])
    return {r["conversion_id"]: r["conversion_unix_timestamp"] for r in reply["conversions"]}


def _late_and_deleted_world(world: Any, as_of: dt.datetime) -> Any:
    """Late-recorded (1 to 5 hours) and deleted conversions, the clock frozen at ``as_of``."""
    world.reset(late_share=0.1, late_max_s=5 * 3600, deletion_share=0.1, deletion_max_s=4 * 3600)
    world.set_clock(as_of)
    return traffic_window(shipped_ruleset(), as_of)


def _ahead(gone: set[str], new: set[str], stamps: dict[str, int], rows: int) -> bool:
    """Whether the deleted conversion sits at least ``rows`` places before the arrived one in
    time order: offset pages then shift by one between them, and a row falls between pages."""
    order = sorted(stamps, key=lambda cid: (stamps[cid], cid))
    return order.index(next(iter(new))) - order.index(next(iter(gone))) >= rows


def _one_leaving_and_one_arriving(
    world: Any, window: Any, start: float, after: int = 100
) -> tuple[float, float] | None:
    """Clock instants ``(c0, c1)`` after ``start`` between which exactly one conversion of the
    window is deleted and exactly one recorded late arrives, ``after`` rows or more behind it
    in time order (a change no count check sees); None when these 8 hours hold none."""
    step, seen, stamps = 300, [], {}
    for j in range(0, 8 * 3600 // step):
        world.set_clock(dt.datetime.fromtimestamp(start + j * step, dt.UTC))
        listing = _listing(world, window)
        stamps.update(listing)
        seen.append(set(listing))
    for j1 in range(1, len(seen)):
        for j2 in range(j1, len(seen)):
            gone, new = seen[j1 - 1] - seen[j2], seen[j2] - seen[j1 - 1]
            if len(gone) == len(new) == 1 and _ahead(gone, new, stamps, after):
                return start + (j1 - 1) * step, start + j2 * step
            if len(gone) > 1 or len(new) > 1:
                break
    return None


def _a_span_with_one_change_each_way(world: Any, after: int) -> tuple[Any, float, float]:
    """A window and clock instants ``(c0, c1)`` of :func:`_one_leaving_and_one_arriving` from
    mid-morning of the data's third day. Whether such a span exists depends on the day's draws
    (the world ends yesterday): none on 2026-12-06's or 2026-11-29's, nor in the 48 hours after
    (measured), so the test skips saying so; a world built to hold it on every day is an open
    item (closing note, issue 43)."""
    as_of = start_of_traffic(world)
    window = _late_and_deleted_world(world, as_of)
    span = _one_leaving_and_one_arriving(world, window, as_of.timestamp(), after)
    if span is None:
        pytest.skip("no clock span with one deletion and one late arrival in this day's draws")
    return window, *span


def _full_traffic(conn: str, window: Any, changes: dict, *, page_size: int) -> list[str]:
    hook = AffiliateNetworkHook(conn, adapter=ChangeBetween(changes), concurrency=1)
    fields, members = traffic_fields(shipped_ruleset())
    try:
        pulled = pull_review_traffic(
            hook, window=window, fields=fields, members=members, page_size=page_size, full=True
        )
    finally:
        hook.close()
    return [r["conversion_id"] for r in pulled.records]


def test_traffic_that_changes_at_any_boundary_counts_every_conversion_that_stayed(
    world, conn
) -> None:
    PAGE = 40  # noqa: N806 (one page size for the search and the pulls)
    """While the review pulls its window, one conversion is deleted and one recorded late
    arrives (the sandbox clock moves on between two answers), after each answer in turn:
    every conversion that existed throughout is in the traffic, once. Before the fix the
    counts matched and one conversion was missing from the aggregates."""
    window, clock, moved = _a_span_with_one_change_each_way(world, PAGE)
    world.set_clock(dt.datetime.fromtimestamp(clock, dt.UTC))
    counter = ChangeBetween({})
    _full_traffic_answers = AffiliateNetworkHook(conn, adapter=counter, concurrency=1)
    fields, members = traffic_fields(shipped_ruleset())
    try:
        pull_review_traffic(
            _full_traffic_answers, window=window, fields=fields, members=members, page_size=PAGE
        )
    finally:
        _full_traffic_answers.close()
    for after in range(1, counter.answers + 1):
        world.set_clock(dt.datetime.fromtimestamp(clock, dt.UTC))
        before = set(_listing(world, window))

        def change() -> None:
            world.set_clock(dt.datetime.fromtimestamp(moved, dt.UTC))

        served = _full_traffic(conn, window, {after: change}, page_size=PAGE)
        judge(served, before, set(_listing(world, window)))


@settings(
    max_examples=int(os.environ.get("AFN_PAGING_EXAMPLES", "20")) * 2 // 5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    page_size=st.integers(40, 300),
    first=st.integers(1, 20),
    steps=st.lists(st.integers(0, 4 * 3600), min_size=1, max_size=3),
)
def test_traffic_under_clock_steps_at_any_boundaries_counts_every_conversion_that_stayed(
    world, conn, page_size, first, steps
) -> None:
    """Property: the clock moves on (deletions, late arrivals) at up to three boundaries."""
    as_of = start_of_traffic(world)
    window = _late_and_deleted_world(world, as_of)
    before = set(_listing(world, window))
    moved = as_of.timestamp()
    changes = {}
    for i, step in enumerate(steps):
        moved += step

        def change(at: float = moved) -> None:
            world.set_clock(dt.datetime.fromtimestamp(at, dt.UTC))

        changes[first + 3 * i] = change
    served = _full_traffic(conn, window, changes, page_size=page_size)
    judge(served, before, set(_listing(world, window)))


def test_a_conversion_recorded_late_within_the_bound_reaches_the_counts(
    world, hook, tmp_path
) -> None:
    """A conversion recorded more than an hour (and less than the 6-hour default bound) after
    its timestamp, after the previous run: the next incremental run counts it. With a 1-hour
    bound (the old look-back) it stays missing until the next full pull."""
    as_of = start_of_traffic(world)
    window = _late_and_deleted_world(world, as_of)
    store = snapshot_store(tmp_path)
    first = pull_traffic(hook, store, as_of)
    known = {r["conversion_id"] for r in first.records}
    late: set[str] = set()
    step = 0
    while not late:
        step += 600
        assert step <= 6 * 3600, "no conversion of the window recorded late"
        world.set_clock(as_of + dt.timedelta(seconds=step))
        late = {
            cid
            for cid, at in _listing(world, window).items()
            if cid not in known and at < as_of.timestamp() - 3600
        }
    later = as_of + dt.timedelta(seconds=step)
    old_bound = snapshot_store(tmp_path, "old")
    old_bound.path.parent.mkdir(parents=True, exist_ok=True)
    old_bound.path.write_bytes(store.path.read_bytes())

    second = pull_traffic(hook, store, later)
    assert second.mode == "incremental", second.reason
    assert late <= {r["conversion_id"] for r in second.records}

    hour = pull_traffic(hook, old_bound, later, overlap_s=3600)
    assert hour.mode == "incremental", hour.reason
    assert not late & {r["conversion_id"] for r in hour.records}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nan", "must be a finite number of hours, got 'nan'"),
        ("inf", "must be a finite number of hours, got 'inf'"),
        ("six", "must be a finite number of hours, got 'six'"),
        ("-1", "must be 0 to 168 hours, got '-1'"),
        ("200", "must be 0 to 168 hours, got '200'"),
    ],
)
def test_the_late_arrival_bound_is_a_checked_setting(value, message) -> None:
    """late_arrival_hours (the rules file's review.late_arrival_hours): 6 hours by default,
    a bad value names the setting and stops the run."""
    from affiliate_network.exceptions import ConfigValidationError
    from affiliate_network.review.traffic import late_arrival_hours

    assert late_arrival_hours() == 6.0
    assert late_arrival_hours(2.5) == 2.5
    with pytest.raises(ConfigValidationError, match=f"late_arrival_hours {message}"):
        late_arrival_hours(value)  # type: ignore[arg-type]
