"""A day pulled with one part (conversions only, events only) is compared with that part of the
network's report (issue 44, defect 3), real HTTP to the sandbox.

The report counts conversions (``cv``) and events (``event``) apart but sums their money
together, so a one-part day is compared by its count and its money is "not comparable": it
never fails the run, nor tells on-call to re-pull (which never helps). A difference of the part
that was landed still fails.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affiliate_network.exceptions import ReconciliationError
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.reconcile import reconcile_day
from affiliate_network.reports.verdicts import reconcile_days

LOG = logging.getLogger("test")
#: Pull kinds: (show_conversions, show_events) -> the report fields the day is compared by.
KINDS = {
    (True, True): ["cv", "payout", "revenue"],
    (True, False): ["cv"],
    (False, True): ["event"],
}


def _day(sandbox: Any) -> dt.date:
    return dt.date.fromisoformat(sandbox.catalog()["last_date"]) - dt.timedelta(days=1)


def _land(hook: Any, base: Path, day: dt.date, kind: tuple[bool, bool]) -> dict[str, Any]:
    conversions, events = kind
    pull = ConversionPull(
        day, 67, currency_id="USD", show_conversions=conversions, show_events=events
    )
    return land_conversion_day(hook, str(base), pull, consistency_retries=1, log=LOG)


def _approve_a_held_conversion(hook: Any, day: dt.date, which: int) -> None:
    """The network approves an on-hold conversion after the day landed: its report's ``cv``
    and money move, its ``event`` does not."""
    held = [
        r
        for r in hook.iter_conversions(
            from_date=day, to_date=day, timezone_id=67, currency_id="USD", show_events=False
        )
        if r["status"] == "pending"
    ]
    assert held, "the sandbox day has on-hold conversions"
    target = held[which % len(held)]
    on_hold_id = target["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]
    assert hook.set_on_hold_status([on_hold_id], "approved") is True


def test_an_events_only_day_is_compared_by_its_events_and_reconciles(
    hook, sandbox, tmp_path
) -> None:
    day = _day(sandbox)
    landed = _land(hook, tmp_path, day, (False, True))
    assert landed["rows"] > 0

    summary = reconcile_day(hook, tmp_path, day, log=LOG)

    assert summary["reconciled"] is True
    assert summary["differences"] == 0
    assert summary["compared_fields"] == ["event"]
    doc = json.loads(Path(summary["comparison"]).read_text())
    assert doc["part"] == "events"
    assert set(doc["not_compared"]) == {"payout", "revenue"}
    assert "not comparable" in doc["not_compared"]["payout"]
    # The events were counted on both sides: the comparison is not empty.
    assert sum(int(t["landed"]["event"]) for t in doc["totals"].values()) > 0
    verdicts = reconcile_days(hook, tmp_path, [day], log=LOG)
    assert [v.verdict for v in verdicts] == ["reconciled"]


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    approve_after_landing=st.booleans(),
    which=st.integers(0, 40),
)
def test_each_pull_kind_is_judged_by_the_report_part_it_landed(
    hook, sandbox, tmp_path_factory, kind, approve_after_landing, which
) -> None:
    """Property over pull kinds x report parts: a day differs exactly when the part it landed
    moved on the network (an approval moves ``cv`` and money, never ``event``); a one-part
    day's money is never judged, and no message about it tells on-call to re-pull."""
    sandbox.reset()
    base = tmp_path_factory.mktemp("recon")
    day = _day(sandbox)
    _land(hook, base, day, kind)
    if approve_after_landing:
        _approve_a_held_conversion(hook, day, which)
    moved = approve_after_landing and kind[0]  # the landed part includes conversions
    if not moved:
        summary = reconcile_day(hook, base, day, log=LOG)
        assert summary["reconciled"] is True, summary
        assert summary["compared_fields"] == KINDS[kind]
        return
    with pytest.raises(ReconciliationError) as info:
        reconcile_day(hook, base, day, log=LOG)
    err = info.value
    assert err.differences == 1
    assert "cv landed" in str(err)
    beyond = {f for c in err.cells for f in KINDS[(True, True)] if f"{f} landed" in c}
    assert beyond <= set(KINDS[kind])
    if kind != (True, True):
        assert "pulled with conversions only" in str(err)
