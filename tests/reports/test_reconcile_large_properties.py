"""Properties of a landed and reconciled day of the large world, end to end (real HTTP).

Hypothesis chooses the world's offer currencies (which, how many, in which order offers take
them), the report currency the day is pulled in, the day's size, the page size, the moment the
clock is frozen inside the day, and a change between two answers of the pull: after the k-th
answer one already-served held conversion is approved and the clock moves on, so rows are
deleted (a removal from pages already served), conversions recorded late arrive inside slices
already read and new ones arrive at the end. The landing must serve every row that existed
throughout the pull exactly once; the day, reconciled (a differing day re-landed once, as the
daily run does), must reconcile, and its landed money must equal the sandbox's truth per
currency to the minor unit.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyarrow.parquet as pq
import pytest
import requests
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from affiliate_network.hooks._transport import API_KEY_HEADER
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.verdicts import reconcile_days
from tests.support.changing_lists import REPORT, ChangeBetween, judge
from tests.support.landed_money import MINOR_DIGITS, landed_money, truth_money

LOG = logging.getLogger("test")
CURRENCIES = sorted(MINOR_DIGITS)

#: Bounded for CI: each example is a fresh world, a pull and a reconciliation over real HTTP.
PROPERTY = settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def plain_hook(network_conn) -> Iterator[AffiliateNetworkHook]:
    """A hook without changes between answers (the reconciliation's and re-landing's)."""
    hook = AffiliateNetworkHook(network_conn, base_delay=0.01, max_delay=0.05, jitter=0.0)
    yield hook
    hook.close()


def _listing(sandbox: Any, day: dt.date) -> dict[str, dict[str, Any]]:
    """Every record of the day now (conversions and events), from ONE answer."""
    body = {"from": day.isoformat(), "to": day.isoformat(), "timezone_id": 67}
    reply = requests.post(
        sandbox.base_url + REPORT,
        params={"page": 1, "page_size": 2000},
        json={**body, "show_conversions": True, "show_events": True},
        headers={API_KEY_HEADER: sandbox.keys["network"]},
        timeout=30,
    )
    reply.raise_for_status()
    doc = reply.json()
    assert doc["paging"]["total_count"] == len(doc["conversions"]) < 2000
    return {r["conversion_id"]: r for r in doc["conversions"]}


def _approve_first_held(sandbox: Any, day: dt.date) -> None:
    """Approve the day's earliest held conversion (it sits on the pull's first slices)."""
    held = sorted(
        (r for r in _listing(sandbox, day).values() if r["status"] == "pending"),
        key=lambda r: (r["conversion_unix_timestamp"], r["conversion_id"]),
    )
    if not held:
        return
    snapshot = held[0]["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]
    reply = requests.patch(
        sandbox.base_url + "/networks/reporting/onhold",
        json={"on_hold_conversion_ids": [snapshot], "status": "approved"},
        headers={API_KEY_HEADER: sandbox.keys["network"]},
        timeout=30,
    )
    reply.raise_for_status()


@PROPERTY
@given(
    offer_currencies=st.lists(st.sampled_from(CURRENCIES), min_size=1, max_size=6, unique=True),
    report_currency=st.sampled_from(CURRENCIES),
    conversions=st.integers(300, 1200),
    page_size=st.integers(20, 150),
    frozen_hour=st.integers(8, 22),
    after_answer=st.integers(1, 4),
    # Up to an hour of traffic arrives during the pull (a split slice's parts may report up
    # to half again the slice's count: _paging.SPLIT_ARRIVALS).
    advance_s=st.integers(60, 3600),
    late_share=st.sampled_from([0.02, 0.2]),
    deletion_share=st.sampled_from([0.0, 0.05]),
)
def test_a_day_changing_while_landed_loses_no_row_and_reconciles_to_the_truth(
    sandbox,
    network_conn,
    plain_hook,
    tmp_path_factory,
    offer_currencies,
    report_currency,
    conversions,
    page_size,
    frozen_hour,
    after_answer,
    advance_s,
    late_share,
    deletion_share,
) -> None:
    sandbox.reset(
        world="large",
        days=2,
        conversions_per_day=conversions,
        offer_currencies=offer_currencies,
        late_share=late_share,
        late_max_s=6 * 3600,
        deletion_share=deletion_share,
        deletion_max_s=6 * 3600,
    )
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    frozen = dt.datetime.combine(day, dt.time(frozen_hour), dt.UTC)
    sandbox.set_clock(frozen)
    before = set(_listing(sandbox, day))

    def change() -> None:
        _approve_first_held(sandbox, day)
        sandbox.set_clock(frozen + dt.timedelta(seconds=advance_s))

    base = tmp_path_factory.mktemp("landed")
    pull = ConversionPull(day, 67, currency_id=report_currency, show_events=True)
    between = ChangeBetween({after_answer: change})
    changing = AffiliateNetworkHook(
        network_conn, concurrency=1, adapter=between,
        base_delay=0.01, max_delay=0.05, jitter=0.0,
    )  # fmt: skip
    try:
        land_conversion_day(
            changing, str(base), pull, page_size=page_size,
            consistency_wait_s=0, log=LOG,
        )  # fmt: skip
    finally:
        changing.close()
    assume(between.answers > after_answer)  # the change came between two answers
    after = set(_listing(sandbox, day))
    part = base / "conversions" / f"date={day.isoformat()}"
    [path] = part.glob("*.parquet")
    served = pq.read_table(path, columns=["conversion_id"])["conversion_id"].to_pylist()
    judge(served, before, after)

    def reland(d: str) -> object:
        return land_conversion_day(
            plain_hook, str(base), replace(pull, day=dt.date.fromisoformat(d)),
            only_if_changed=True, consistency_wait_s=0, log=LOG,
        )  # fmt: skip

    [verdict] = reconcile_days(plain_hook, base, [day], settle=reland, log=LOG)
    assert verdict.verdict == "reconciled", verdict
    truth = sandbox.truth_money(day, timezone_id=67, cells=False)
    money = landed_money(part)
    assert money == truth_money(truth)
    assert {currency for currency, _kind in money} <= set(offer_currencies)
    for (currency, kind), (_rows, payout, revenue) in money.items():
        for amount in (payout, revenue):
            assert amount == round(amount, MINOR_DIGITS[currency]), (currency, kind)
