"""The review's traffic from a snapshot plus what is new: same decisions, fewer rows.

Real HTTP to the sandbox; the rows the API answered are read from its request log
(``GET /_sandbox/requests``, ``rows`` of each conversion-report page).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import ObjectStoragePath

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.paths import include_dir
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.traffic import (
    TrafficSnapshotStore,
    pull_review_traffic,
    traffic_snapshot_path,
)
from affiliate_network.review.window import review_window
from affiliate_network.rules.engine import RuleSet
from affiliate_network.rules.fields import on_hold_conversion_id, on_hold_status
from affiliate_network_sandbox.testing import start_sandbox

REPORT = "/networks/reporting/conversions"
DAYS = 4
LOOKBACK = 2
RULES = include_dir() / "onhold_rules.yaml"
FIELDS = ("conversion_id", "transaction_id", "currency_id", "payout", "sale_amount")
MEMBERS = ("on_hold_snapshots", "affiliate", "offer")


@pytest.fixture(scope="module")
def world() -> Iterator[Any]:
    end = dt.date.today() - dt.timedelta(days=1)
    with start_sandbox(
        seed=7, end_date=end.isoformat(), days=DAYS, conversions_per_day=400, on_hold_share=0.3
    ) as sb:
        yield sb


@pytest.fixture
def conn(world, make_connection) -> str:
    world.reset()
    return make_connection("afn_traffic", host=world.base_url, key=world.keys["network"])


@pytest.fixture
def hook(conn) -> Iterator[AffiliateNetworkHook]:
    h = AffiliateNetworkHook(conn)
    yield h
    h.close()


def _start(world: Any) -> dt.datetime:
    """Mid-morning of the data's third day (UTC): a window with traffic before and after."""
    first = dt.date.fromisoformat(world.catalog()["first_date"])
    return dt.datetime(first.year, first.month, first.day, 10, tzinfo=dt.UTC) + dt.timedelta(days=2)


def _ruleset() -> RuleSet:
    return RuleSet.from_file(RULES)


def _window(ruleset: RuleSet, as_of: dt.datetime) -> Any:
    return review_window(
        timezone_id=67,
        lookback_days=LOOKBACK,
        to_date=None,
        as_of=as_of.isoformat(),
        horizon_hours=ruleset.horizon_hours,
    )


def _fields(ruleset: RuleSet) -> tuple[set[str], set[str]]:
    fields = {*(p.split(".", 1)[0] for p in ruleset.prefetch), *FIELDS, "conversion_unix_timestamp"}
    return fields, {*ruleset.relationship_members(), *MEMBERS}


def _pull(hook: Any, store: Any, as_of: dt.datetime, **kw: Any) -> Any:
    ruleset = _ruleset()
    fields, members = _fields(ruleset)
    return pull_review_traffic(
        hook,
        window=_window(ruleset, as_of),
        fields=fields,
        members=members,
        store=store,
        page_size=kw.pop("page_size", 200),
        **kw,
    )


def _rows(world: Any) -> int:
    """Conversion-report rows the API answered since the log was last cleared."""
    return sum(
        e.get("rows") or 0
        for e in world.requests_log()
        if e["method"] == "POST" and e["path"].endswith(REPORT) and e["status"] == 200
    )


def _store(tmp_path: Path, name: str = "state") -> TrafficSnapshotStore:
    return TrafficSnapshotStore(traffic_snapshot_path(ObjectStoragePath(str(tmp_path / name)), 67))


def test_incremental_pull_equals_full_pull_and_asks_for_far_fewer_rows(
    world, hook, tmp_path
) -> None:
    store = _store(tmp_path)
    t1 = _start(world)
    world.clear_requests()
    first = _pull(hook, store, t1)
    assert first.mode == "full"
    assert "first run" in first.reason
    assert first.saved
    full_rows = _rows(world)
    assert full_rows == len(first.records) > 500

    # Someone decides some on-hold conversions between runs (another tool, a person).
    held = [on_hold_conversion_id(r) for r in first.records if on_hold_status(r) == "on_hold"]
    hook.set_on_hold_status(held[:5], "rejected")
    hook.set_on_hold_status(held[5:9], "approved")

    t2 = t1 + dt.timedelta(hours=1)
    world.clear_requests()
    second = _pull(hook, store, t2)
    rows = _rows(world)
    assert second.mode == "incremental", second.reason
    reference = _pull(hook, None, t2)  # the full window, nothing kept
    assert second.records == reference.records
    states = {on_hold_conversion_id(r): on_hold_status(r) for r in second.records}
    assert [states[i] for i in held[:9]] == ["rejected"] * 5 + ["approved"] * 4
    # New since the previous run + what was on hold: the bound of issue 14, and far below full.
    new = sum(1 for r in reference.records if r["conversion_unix_timestamp"] >= t1.timestamp())
    assert rows == second.rows_new + second.rows_refreshed
    assert rows <= 2 * (new + len(held))
    assert rows < full_rows / 2


def test_lost_or_damaged_snapshot_falls_back_to_the_full_window(world, hook, tmp_path) -> None:
    store = _store(tmp_path)
    t1 = _start(world)
    _pull(hook, store, t1)
    t2 = t1 + dt.timedelta(hours=2)
    reference = _pull(hook, None, t2).records
    good = store.path.read_bytes()
    damaged = {
        "unreadable": b"not gzip at all",
        "incomplete": good[: len(good) // 2],
    }
    for why, content in damaged.items():
        store.path.write_bytes(content)
        again = _pull(hook, store, t2)
        assert again.mode == "full", why
        assert "unreadable" in again.reason or "incomplete" in again.reason
        assert again.records == reference
        assert again.saved
    store.path.unlink()
    lost = _pull(hook, store, t2)
    assert lost.mode == "full"
    assert "first run" in lost.reason
    assert lost.records == reference
    # ...and the rewritten snapshot serves the next run incrementally.
    assert _pull(hook, store, t2 + dt.timedelta(hours=1)).mode == "incremental"


def test_runs_behind_the_cursor_are_served_but_never_rewind_it(world, hook, tmp_path) -> None:
    store = _store(tmp_path)
    t1 = _start(world)
    _pull(hook, store, t1 + dt.timedelta(hours=6))
    cursor = store.load()[0].cursor_ts
    # A manual run / backfill a few hours back: the same conversions a full pull returns.
    back = _pull(hook, store, t1)
    assert back.mode == "incremental"
    assert not back.saved
    assert back.records == _pull(hook, None, t1).records
    assert store.load()[0].cursor_ts == cursor
    # A backfill whose window starts before the snapshot: full pull, snapshot untouched.
    older = _pull(hook, store, t1 - dt.timedelta(days=1))
    assert older.mode == "full"
    assert "before the snapshot" in older.reason
    assert not older.saved
    assert store.load()[0].cursor_ts == cursor


def test_age_new_fields_and_a_forced_full_pull_fall_back(world, hook, tmp_path) -> None:
    store = _store(tmp_path)
    t1 = _start(world)
    _pull(hook, store, t1)
    later = t1 + dt.timedelta(hours=1)
    aged = _pull(hook, store, later, clock=lambda: dt.datetime.now(dt.UTC).timestamp() + 90_000)
    assert aged.mode == "full"
    assert "full pull more than 24 h ago" in aged.reason
    assert _pull(hook, store, later, full=True).mode == "full"
    ruleset = _ruleset()
    fields, members = _fields(ruleset)
    wider = pull_review_traffic(
        hook,
        window=_window(ruleset, later),
        fields=fields | {"adv5"},
        members=members,
        store=store,
    )
    assert wider.mode == "full"
    assert "fields" in wider.reason
    # The snapshot now keeps the union: both field sets are served incrementally.
    assert _pull(hook, store, later + dt.timedelta(hours=1)).mode == "incremental"


def _review(conn: str, base: Path, as_of: dt.datetime, run_id: str, **kw: Any) -> dict:
    op = OnHoldReviewOperator(
        task_id="review",
        affiliate_network_conn_id=conn,
        rules_file=str(RULES),
        lookback_days=LOOKBACK,
        as_of=as_of.isoformat(),
        timezone_id=67,
        min_age_hours=0,
        chunk_size=25,
        max_reject_share=None,
        max_reject_count=None,
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
    t1 = _start(world)
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


def test_a_traffic_pull_that_always_shifts_fails_naming_the_window(world, hook, tmp_path) -> None:
    """Conversions arrive during every pull of the review's traffic (sandbox fault, real HTTP):
    after three pulls the task fails with PullShiftedError naming the window and saying that
    nothing was decided, and no snapshot is kept. The review's pull used to re-raise the last
    pull's bare error (no window, no count of pulls)."""
    from affiliate_network.exceptions import PullShiftedError

    store = _store(tmp_path)
    world.set_faults(insert_after_page=1, insert_count=50)
    try:
        with pytest.raises(PullShiftedError) as caught:
            _pull(hook, store, _start(world))
    finally:
        world.clear_faults()
    message = str(caught.value)
    assert message.startswith("the traffic of ")
    assert "3 pull(s) all shifted while paging, nothing was decided" in message
    assert "total_count changed" in message
    assert not store.path.exists()
