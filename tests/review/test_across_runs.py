"""On-hold decisions across runs: a function of the traffic, never of the review's own history.

The review is driven over days of planted sandbox traffic in steps of a few hours (its clock
injected with ``as_of``), the way the hourly schedule runs it, with PATCH chunks failing at
random boundaries (then the failed step rerun, as on-call would) and, at some steps, a second
run overlapping the first. The final state of every on-hold conversion must equal what ONE
clean run at the end decides on the same data, and no planted fraud may be approved.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.paths import include_dir
from affiliate_network_sandbox.testing import start_sandbox
from tests.support.sandbox_reads import onhold_states

ONHOLD = "/networks/reporting/onhold"
DAYS = 4
STEP_HOURS = 12


@pytest.fixture(scope="module")
def world() -> Iterator[Any]:
    end = dt.date.today() - dt.timedelta(days=1)
    with start_sandbox(
        seed=11, end_date=end.isoformat(), days=DAYS, conversions_per_day=300, on_hold_share=0.3
    ) as sb:
        yield sb


@pytest.fixture
def conn(world, make_connection) -> str:
    world.reset()
    return make_connection("afn_runs", host=world.base_url, key=world.keys["network"])


def _review(conn: str, base: Path, as_of: dt.datetime, run_id: str, **kw: Any) -> dict:
    op = OnHoldReviewOperator(
        task_id="review",
        affiliate_network_conn_id=conn,
        rules_file=str(include_dir() / "onhold_rules.yaml"),
        lookback_days=DAYS + 3,
        as_of=as_of.isoformat(),
        min_age_hours=0,
        chunk_size=kw.pop("chunk_size", 10),
        max_reject_share=None,  # the guardrails are not what this test is about
        max_reject_count=None,
        lease_wait_minutes=2,
        base_path=str(base),
        **kw,
    )
    return op.execute({"run_id": run_id})


_KILLED = """
import datetime as dt, sys
sys.path.insert(0, {root!r})
from {module} import _review
_review({conn!r}, __import__("pathlib").Path({base!r}), dt.datetime.fromisoformat({at!r}), {run!r})
"""


def _patches(world: Any) -> int:
    return sum(
        1 for e in world.requests_log() if e["method"] == "PATCH" and e["path"].endswith(ONHOLD)
    )


def _killed_after(
    world: Any,
    conn: str,
    base: Path,
    at: dt.datetime,
    run_id: str,
    k: int,
    *,
    module: str = "tests.review.test_across_runs",
    delay_s: float = 1.0,
) -> bool:
    """Run ``module._review`` in a process and SIGKILL it once ``k`` PATCHes landed (each answer
    is held back ``delay_s`` after it is applied, so the kill falls between two writes)."""
    world.set_faults(apply_then_delay_paths=[ONHOLD], apply_then_delay_s=delay_s)
    before = _patches(world)
    root = str(Path(__file__).resolve().parents[2])
    script = _KILLED.format(
        root=root, module=module, conn=conn, base=str(base), at=at.isoformat(), run=run_id
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy())
    killed = False
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if _patches(world) - before >= k:
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
            time.sleep(0.05)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        world.clear_faults()
    return killed


def _states(world: Any, conn: str) -> dict[str, str | None]:
    catalog = world.catalog()
    return onhold_states(conn, catalog["first_date"], catalog["last_date"])


def _fraud(world: Any) -> set[str]:
    catalog = world.catalog()
    planted = world.planted(catalog["first_date"], catalog["last_date"])
    return {i for ids in planted["on_hold_conversion_ids"].values() for i in ids}


def _end(world: Any) -> dt.datetime:
    last = dt.date.fromisoformat(world.catalog()["last_date"])
    return dt.datetime(last.year, last.month, last.day, tzinfo=dt.UTC) + dt.timedelta(days=2)


def test_stepped_runs_with_kills_and_overlaps_end_where_one_clean_run_ends(
    world, conn, tmp_path
) -> None:
    end = _end(world)
    # One clean run at the end.
    _review(conn, tmp_path / "clean", end, "clean")
    clean = _states(world, conn)
    fraud = _fraud(world)
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
            failures += _killed_after(world, conn, base, clock, run_id, rng.randint(1, 3))
            _review(conn, base, clock, run_id)
        elif rng.random() < 0.3:
            overlaps += 1
            errors: list[BaseException] = []

            def other(
                at: dt.datetime = clock, rid: str = f"manual__{step}", out: list = errors
            ) -> None:
                try:
                    _review(conn, base, at, rid, chunk_size=7)
                except BaseException as err:
                    out.append(err)

            thread = threading.Thread(target=other)
            thread.start()
            _review(conn, base, clock, run_id)
            thread.join()
            assert not errors, errors
        else:
            _review(conn, base, clock, run_id)
    stepped = _states(world, conn)
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
