"""Stepped on-hold reviews over planted sandbox traffic, shared by the review tests and
``tests/review/scenarios.py``: one review as the stepped tests run it, a review killed after
``k`` writes, and what the sandbox planted and holds."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.settings.paths import include_dir
from tests.support.review_settings import set_review
from tests.support.sandbox_reads import onhold_states

ONHOLD = "/networks/reporting/onhold"
#: Days of the stepped tests' traffic.
DAYS = 4
#: The last day of the stepped runs' traffic.
END_DATE = dt.date(2026, 11, 29)
#: On-hold ids per status write: small, so every step writes in several chunks and a kill
#: "after k writes" (k up to 3) always finds its k-th write.
CHUNK = 4
#: The stepped runs' sandbox (a module's ``world`` fixture reads its ``WORLD``).
WORLD = {
    "seed": 11,
    # A fixed day (time is an input): yesterday's world planted another day's traffic, and
    # whether a kill found its k-th write changed from one day to the next.
    "end_date": END_DATE.isoformat(),
    "days": DAYS,
    "conversions_per_day": 300,
    "on_hold_share": 0.3,
}


def stepped_review(conn: str, base: Path, as_of: dt.datetime, run_id: str, **kw: Any) -> dict:
    set_review(
        lookback_days=DAYS + 3,
        min_age_hours=0,
        chunk_size=kw.pop("chunk_size", CHUNK),
        max_reject_share=None,  # the guardrails are not what this test is about
        max_reject_count=None,
    )
    op = OnHoldReviewOperator(
        task_id="review",
        affiliate_network_conn_id=conn,
        rules_file=str(include_dir() / "onhold_rules.yaml"),
        as_of=as_of.isoformat(),
        lease_wait_minutes=2,
        base_path=str(base),
        **kw,
    )
    return op.execute({"run_id": run_id})


_KILLED = """
import datetime as dt, sys
sys.path.insert(0, {root!r})
from {module} import {function}
from pathlib import Path
{function}({conn!r}, Path({base!r}), dt.datetime.fromisoformat({at!r}), {run!r})
"""


def patch_count(world: Any) -> int:
    return sum(
        1 for e in world.requests_log() if e["method"] == "PATCH" and e["path"].endswith(ONHOLD)
    )


def killed_after(
    world: Any,
    conn: str,
    base: Path,
    at: dt.datetime,
    run_id: str,
    k: int,
    *,
    module: str = "tests.support.stepped_reviews",
    function: str = "stepped_review",
    delay_s: float = 1.0,
) -> bool:
    """Run ``module.function`` in a process and SIGKILL it once ``k`` PATCHes landed (each answer
    is held back ``delay_s`` after it is applied, so the kill falls between two writes)."""
    world.set_faults(apply_then_delay_paths=[ONHOLD], apply_then_delay_s=delay_s)
    before = patch_count(world)
    root = str(Path(__file__).resolve().parents[2])
    script = _KILLED.format(
        root=root,
        module=module,
        function=function,
        conn=conn,
        base=str(base),
        at=at.isoformat(),
        run=run_id,
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy())
    killed = False
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if patch_count(world) - before >= k:
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


def held_states(world: Any, conn: str) -> dict[str, str | None]:
    catalog = world.catalog()
    return onhold_states(conn, catalog["first_date"], catalog["last_date"])


def planted_fraud(world: Any) -> set[str]:
    catalog = world.catalog()
    planted = world.planted(catalog["first_date"], catalog["last_date"])
    return {i for ids in planted["on_hold_conversion_ids"].values() for i in ids}


def after_the_end(world: Any) -> dt.datetime:
    last = dt.date.fromisoformat(world.catalog()["last_date"])
    return dt.datetime(last.year, last.month, last.day, tzinfo=dt.UTC) + dt.timedelta(days=2)
