"""A crash between the approvals and the rejections never changes the guardrail's verdict.

Default guardrails (``max_reject_share`` 50 %) and the shipped rules on the planted sandbox
traffic. The worker dies right after the approvals landed (exactly the clean plan's approvals,
sent through the hook as the run sends them). Then the same run's retry, or, without a retry,
the next hourly run, must pass the guardrail as the clean run did and end in its network state:
the guardrail reads the run's whole plan (every conversion of the window that has been on hold),
not the part still on hold, which the approvals just shrank (issue 25, defect 1).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.onhold_lookup import chunked
from affiliate_network.settings.paths import include_dir
from tests.support.review_settings import set_review
from tests.support.stepped_reviews import (
    DAYS,
    after_the_end,
    held_states,
    planted_fraud,
)

# The module's sandbox: the world fixture reads it.
from tests.support.stepped_reviews import WORLD as WORLD

CHUNK = 10


def _review(
    conn: str, base: Path, as_of: dt.datetime, run_id: str, *, dry_run: bool = False
) -> dict[str, Any]:
    """A scheduled review with the operator's DEFAULT guardrails."""
    set_review(lookback_days=DAYS + 3, min_age_hours=0, chunk_size=CHUNK)
    op = OnHoldReviewOperator(
        task_id="review",
        affiliate_network_conn_id=conn,
        rules_file=str(include_dir() / "onhold_rules.yaml"),
        as_of=as_of.isoformat(),
        dry_run=dry_run,
        lease_wait_minutes=1,
        base_path=str(base),
    )
    return op.execute({"run_id": run_id})


def _die_after_the_approvals(conn: str, approve_ids: list[str]) -> None:
    """What a worker killed right after its last approval chunk leaves on the network."""
    hook = AffiliateNetworkHook(conn)
    try:
        for chunk in chunked(approve_ids, CHUNK):
            hook.set_on_hold_status(chunk, "approved")
    finally:
        hook.close()


def _share(summary: dict[str, Any]) -> str:
    plan = summary["plan"]
    decided = sum(plan.values())
    return f"{plan['reject']}/{decided} = {plan['reject'] / decided:.1%}"


@pytest.mark.parametrize(("then", "crashed_hours_before"), [("retry", 0), ("next hourly run", 1)])
def test_a_crash_after_the_approvals_keeps_the_verdict_and_the_end_state(
    world, conn, tmp_path, then, crashed_hours_before
) -> None:
    end = after_the_end(world)
    clean_summary = _review(conn, tmp_path / "clean", end, "clean")
    clean = held_states(world, conn)
    decisions = clean_summary["decisions"]
    assert decisions["approve"] > 0
    assert decisions["reject"] > 0
    assert clean_summary["guardrail_tripped"] is False
    assert {i for i, s in clean.items() if s == "approved"} & planted_fraud(world) == set()
    # Once the approvals leave "on hold", the rejections are a majority of what is still on
    # hold: the share the old guardrail computed after such a crash.
    remaining = decisions["reject"] + decisions["review"] + decisions["hold"]
    assert decisions["reject"] / remaining > 0.5

    # The crashed run: the retry runs at its as_of, the next hourly run an hour later.
    world.reset()
    crashed_at = end - dt.timedelta(hours=crashed_hours_before)
    planned = _review(conn, tmp_path / "plan", crashed_at, "plan", dry_run=True)
    assert planned["guardrail_tripped"] is False
    audit = read_jsonl(planned["audit_path"])
    approve_ids = [r["on_hold_conversion_id"] for r in audit if r["action"] == "approve"]
    _die_after_the_approvals(conn, approve_ids)
    crashed = Counter(held_states(world, conn).values())
    assert crashed["approved"] == len(approve_ids)
    assert crashed["rejected"] == 0

    after = _review(conn, tmp_path / "crashed", end, f"scheduled__{then}")
    print(
        f"clean: {decisions}, share {_share(clean_summary)}; crashed run ({crashed_at}): "
        f"{planned['decisions']}, share {_share(planned)}; after the crash, the {then}: "
        f"{after['decisions']}, share {_share(after)}"
    )
    assert after["guardrail_tripped"] is False
    assert after["plan"] == clean_summary["plan"]
    # Only ids still on hold were sent: the approvals that landed are not sent again.
    assert after["applied"]["approved"] == decisions["approve"] - len(approve_ids)
    assert after["applied"]["rejected"] == decisions["reject"]
    assert held_states(world, conn) == clean
