"""On-hold decisions across runs: a function of the traffic, never of the review's own history.

The review is driven over days of planted sandbox traffic in steps of a few hours (its clock
injected with ``as_of``), the way the hourly schedule runs it, with PATCH chunks failing at
random boundaries (then the failed step rerun, as on-call would) and, at some steps, a second
run overlapping the first. The final state of every on-hold conversion must equal what ONE
clean run at the end decides on the same data, and no planted fraud may be approved.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections import Counter

from tests.support.stepped_reviews import (
    ONHOLD,
    after_the_end,
    held_states,
    killed_after,
    planted_fraud,
    stepped_review,
)

# The module's sandbox: the world fixture reads it.
from tests.support.stepped_reviews import WORLD as WORLD

STEP_HOURS = 12


def test_stepped_runs_with_kills_and_overlaps_end_where_one_clean_run_ends(
    world, conn, tmp_path
) -> None:
    end = after_the_end(world)
    # One clean run at the end.
    stepped_review(conn, tmp_path / "clean", end, "clean")
    clean = held_states(world, conn)
    fraud = planted_fraud(world)
    assert {i for i, s in clean.items() if s == "approved"} & fraud == set()
    assert Counter(clean.values())["rejected"] > 10

    # Same data, from scratch: the schedule's way, with failures and overlaps.
    world.reset()
    rng = random.Random(20261125)
    first = dt.date.fromisoformat(world.catalog()["first_date"])
    clock = dt.datetime(first.year, first.month, first.day, tzinfo=dt.UTC)
    base = tmp_path / "stepped"
    failures = overlaps = step = 0
    while clock < end:
        clock = min(clock + dt.timedelta(hours=STEP_HOURS), end)
        step += 1
        run_id = f"scheduled__{clock:%Y%m%dT%H}"
        if rng.random() < 0.3:
            # Killed at a random chunk boundary, then on-call clears the task: the same run again.
            failures += killed_after(world, conn, base, clock, run_id, rng.randint(1, 3))
            stepped_review(conn, base, clock, run_id)
        elif rng.random() < 0.3:
            overlaps += 1
            errors: list[BaseException] = []

            def other(
                at: dt.datetime = clock, rid: str = f"manual__{step}", out: list = errors
            ) -> None:
                try:
                    stepped_review(conn, base, at, rid, chunk_size=7)
                except BaseException as err:
                    out.append(err)

            thread = threading.Thread(target=other)
            thread.start()
            stepped_review(conn, base, clock, run_id)
            thread.join()
            assert not errors, errors
        else:
            stepped_review(conn, base, clock, run_id)
    stepped = held_states(world, conn)
    assert failures > 0
    assert overlaps > 0
    assert {i for i, s in stepped.items() if s == "approved"} & fraud == set()
    assert stepped == clean

    # No on-hold id was sent twice (successful PATCHes only: a failed chunk changed nothing).
    sent = Counter(
        i
        for entry in world.requests_log()
        if entry["method"] == "PATCH" and entry["path"].endswith(ONHOLD) and entry["status"] == 200
        for i in (entry.get("body") or {}).get("on_hold_conversion_ids", [])
    )
    assert sent
    assert max(sent.values()) == 1
