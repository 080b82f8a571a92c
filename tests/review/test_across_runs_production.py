"""The across-runs property where production lives (issue 25): one clean run is the reference.

``test_across_runs.py`` steps the review through planted traffic with kills and overlaps, but
with the guardrails off, a sandbox that served the whole day at once, writes that landed at
once and pages that never moved. Here every one of those is the production default or the
production condition:

- the **default guardrails** (reject share 50 %, 1,000 rejections), so a crash that changes the
  verdict of a retry or of the next run fails the step;
- **crash points at every write boundary**, among them the one between the last approval and
  the first rejection (found from a dry run of the same instant);
- **hourly steps across the fall-back change** of America/New_York (2026-11-01, the repeated
  01:00-02:00), with the network's timezone New York and the sandbox's clock moved with each
  step, so each run meets only the traffic that has happened (today's day fills as it goes);
- **late and lost writes**: status updates land 0.3 s after the PATCH and 15 % never land, so
  the read-back waits, records what did not land, and the next run decides those again;
- **pages that shift** while the review pulls its traffic, at some steps;
- an **overlapping** manual run at some steps.

The final state of every on-hold conversion must equal what ONE clean run decides at the end,
on the same data, with writes that land at once; no planted fraud may be approved, no step may
trip a guardrail, and no id may be sent twice within one run.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from tests.support.review_settings import set_review
from tests.support.stepped_reviews import held_states, killed_after, planted_fraud

ONHOLD = "/networks/reporting/onhold"
NEW_YORK = 80
CHUNK = 10
# Data: 2026-10-27..2026-11-02 (UTC days); the New York fall-back is 2026-11-01 06:00 UTC.
# The first step comes when the oldest conversions are past the 72-hour holding period, as on
# a network that has run for a while: before that, approvals cannot exist yet and the reject
# share of what is decided is above the default ceiling on any traffic.
END_DATE = dt.date(2026, 11, 2)
DAYS = 7
START = dt.datetime(2026, 11, 1, 0, tzinfo=dt.UTC)
# Hourly steps from 23:00 EDT on 10-31 to 04:00 EST on 11-01 (01:xx comes twice).
HOURLY_FROM = dt.datetime(2026, 11, 1, 3, tzinfo=dt.UTC)
HOURLY_TO = dt.datetime(2026, 11, 1, 9, tzinfo=dt.UTC)
END = dt.datetime(2026, 11, 5, 0, tzinfo=dt.UTC)
#: The sandbox of this module (the ``world`` fixture): New York, the sandbox's clock at END.
WORLD = {
    "seed": 11,
    "end_date": END_DATE.isoformat(),
    "days": DAYS,
    "conversions_per_day": 150,
    "on_hold_share": 0.3,
    "reporting_timezone_id": NEW_YORK,
    "clock": END.isoformat(),
}


def _review(conn: str, base: Path, as_of: dt.datetime, run_id: str, **kw: Any) -> dict[str, Any]:
    """One review as the DAG runs it: default guardrails, New York, the sandbox's clock."""
    # Every run, the clean one too, sees the whole data.
    set_review(lookback_days=DAYS + 3, min_age_hours=0, chunk_size=kw.pop("chunk_size", CHUNK))
    op = OnHoldReviewOperator(
        task_id="review",
        affiliate_network_conn_id=conn,
        rules_file="onhold_rules.yaml",
        timezone_id=NEW_YORK,
        as_of=as_of.isoformat(),
        page_size=kw.pop("page_size", 100),
        readback_wait_s=kw.pop("readback_wait_s", 1),
        lease_wait_minutes=2,
        base_path=str(base),
        **kw,
    )
    return op.execute({"run_id": run_id})


def _killed_after(world: Any, conn: str, base: Path, at: dt.datetime, run_id: str, k: int) -> bool:
    """This module's review, killed once ``k`` PATCHes were applied (half-second answers)."""
    here = "tests.review.test_across_runs_production"
    return killed_after(
        world, conn, base, at, run_id, k, module=here, function="_review", delay_s=0.5
    )


def _sent_per_run(world: Any) -> list[Counter[str]]:
    """Ids of every accepted PATCH, one counter per PATCH request (for the per-run check)."""
    return [
        Counter((e.get("body") or {}).get("on_hold_conversion_ids", []))
        for e in world.requests_log()
        if e["method"] == "PATCH" and e["path"].endswith(ONHOLD) and e["status"] == 200
    ]


def _steps() -> list[dt.datetime]:
    """Every six hours, hourly across the fall-back change, then twelve-hourly to the end."""
    out: list[dt.datetime] = [START]
    at = START
    while at < HOURLY_FROM:
        at = min(at + dt.timedelta(hours=6), HOURLY_FROM)
        out.append(at)
    while at < HOURLY_TO:
        at += dt.timedelta(hours=1)
        out.append(at)
    while at < END:
        at = min(at + dt.timedelta(hours=12), END)
        out.append(at)
    return out


def _summary_line(step: int, at: dt.datetime, kind: str, summary: dict[str, Any]) -> str:
    local = at.astimezone(dt.timezone(dt.timedelta(hours=-4 if at < HOURLY_FROM else -5)))
    return (
        f"step {step:2d} {at:%m-%d %H:%M}Z ({local:%H:%M} NY) {kind:12s} "
        f"decisions={summary['decisions']} applied={summary['applied']} "
        f"not_landed={summary.get('accepted_not_landed')}"
    )


def test_runs_under_production_conditions_end_where_one_clean_run_ends(
    world: Any, conn: str, tmp_path: Path
) -> None:
    # One clean run at the end: writes land at once, nothing moves, nothing crashes.
    world.set_clock(END)
    clean_summary = _review(conn, tmp_path / "clean", END, "clean")
    assert not clean_summary["guardrail_tripped"]
    clean = held_states(world, conn)
    fraud = planted_fraud(world)
    counts = Counter(clean.values())
    print(f"clean run: {dict(counts)}; decisions {clean_summary['decisions']}")
    assert counts["approved"] > 20
    assert counts["rejected"] > 10
    assert {i for i, s in clean.items() if s == "approved"} & fraud == set()

    # The same data from scratch, the schedule's way.
    world.reset()
    rng = random.Random(20261126)
    base = tmp_path / "stepped"
    steps = _steps()
    # What happens at each step: the first one (a backlog of approvals and rejections) is killed
    # between its approvals and its rejections; the rest draw kills at random chunk boundaries,
    # page shifts and overlaps, each at least once.
    kinds = ["kill_between", "shift", "overlap", "kill", "plain", "shift", "overlap"]
    kinds += [rng.choice(["plain", "shift", "overlap", "kill"]) for _ in steps[len(kinds) :]]
    seen = Counter[str]()
    for step, (at, kind) in enumerate(zip(steps, kinds, strict=False), 1):
        world.set_clock(at)
        last_steps = step > len(steps) - 2
        # Late and lost writes, except on the last two steps ("rarely": the last ones land).
        world.set_late_writes(delay_s=0.3, lost_share=0.0 if last_steps else 0.15, seed=step)
        run_id = f"scheduled__{at:%Y%m%dT%H}"
        if kind.startswith("kill"):
            # Killed at a write boundary, then on-call clears the task: the same run again.
            if kind == "kill_between":
                plan = _review(conn, base / "dry", at, f"dry__{step}", dry_run=True)["decisions"]
                assert plan["approve"] > 0, plan
                assert plan["reject"] > 0, plan
                k = math.ceil(plan["approve"] / CHUNK)  # the last approval chunk, no rejection
            else:
                k = rng.randint(1, 3)
            seen[kind] += _killed_after(world, conn, base, at, run_id, k)
            summary = _review(conn, base, at, run_id)
        elif kind == "shift":
            # Pages shift while the review pulls its traffic (rows arriving mid-pull).
            world.set_faults(insert_after_page=1, insert_count=3, insert_pulls=1)
            seen[kind] += 1
            try:
                summary = _review(conn, base, at, run_id, full_pull=True, page_size=50)
            finally:
                world.clear_faults()
        elif kind == "overlap":
            seen[kind] += 1
            errors: list[BaseException] = []

            def other(
                at: dt.datetime = at, rid: str = f"manual__{step}", out: list = errors
            ) -> None:
                try:
                    _review(conn, base, at, rid, chunk_size=7)
                except BaseException as err:  # the main thread asserts on it
                    out.append(err)

            thread = threading.Thread(target=other)
            thread.start()
            summary = _review(conn, base, at, run_id)
            thread.join()
            assert not errors, errors
        else:
            summary = _review(conn, base, at, run_id)
        print(_summary_line(step, at, kind, summary))
        assert not summary["guardrail_tripped"], (step, at, summary)
        seen["not_landed"] += summary.get("accepted_not_landed") or 0

    stepped = held_states(world, conn)
    print(f"stepped runs: {dict(Counter(stepped.values()))}; {dict(seen)}")
    # Every production condition was met at least once.
    assert seen["kill"] > 0
    assert seen["kill_between"] == 1
    assert seen["shift"] > 0
    assert seen["overlap"] > 0
    assert seen["not_landed"] > 0
    assert {i for i, s in stepped.items() if s == "approved"} & fraud == set()
    diff = {i: (clean.get(i), stepped.get(i)) for i in clean.keys() | stepped.keys()}
    diff = {i: pair for i, pair in diff.items() if pair[0] != pair[1]}
    assert not diff, json.dumps(dict(list(diff.items())[:20]))
    # No PATCH carried one id twice.
    assert all(max(c.values()) == 1 for c in _sent_per_run(world) if c)
