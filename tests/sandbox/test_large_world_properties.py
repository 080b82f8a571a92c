"""Properties of the large world, in process (many worlds, clocks and page sizes per second).

The served records (enumerated by stride, split into segments) must equal the records that the
per-record definition says exist at the clock; pages must tile that set at every boundary; the
money truth must equal the records' amounts summed per currency.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from affiliate_network_sandbox.clock import SandboxClock
from affiliate_network_sandbox.config import DataConfig
from affiliate_network_sandbox.data import DAY as DAY_S
from affiliate_network_sandbox.data import KIND_CONVERSION, KIND_EVENT
from affiliate_network_sandbox.world import World

END = dt.date(2026, 5, 10)
END_START = int(dt.datetime(2026, 5, 10, tzinfo=dt.UTC).timestamp())

PROFILE = settings(max_examples=40, deadline=None, derandomize=True)

worlds = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 10_000),
        "conversions_per_day": st.integers(1, 1500),
        "late_share": st.sampled_from([0.0, 0.02, 0.1, 0.5, 1.0]),
        "late_max_s": st.integers(3601, 2 * 86400),
        "deletion_share": st.sampled_from([0.0, 0.002, 0.05, 0.3]),
        "deletion_max_s": st.integers(3601, 3 * 86400),
    }
)
#: Clock instants from the start of the day before the last to three days after it.
clocks = st.integers(END_START - DAY_S, END_START + 3 * DAY_S)


def _world(params: dict, clock: int) -> World:
    cfg = DataConfig(end_date=END, days=3).with_overrides(
        {"world": "large", "affiliates": 20, "offers": 12, "advertisers": 4, **params}
    )
    return World(cfg, "default", SandboxClock(float(clock)))


def _served(w: World, t0: int, t1: int) -> set[tuple[int, int, int]]:
    out = set()
    for seg in w.gen.segments(t0, t1, conversions=True, events=True):
        out.update((seg.kind, seg.ctx.ord, i) for i in range(seg.lo, seg.hi))
    return out


def _defined(w: World, t0: int, t1: int) -> set[tuple[int, int, int]]:
    """Records that exist at the clock by the per-record definition (a scan of every index)."""
    gen = w.gen
    ve = gen.visible_end()
    out = set()
    for o in range(gen.first_ord, gen.last_ord + 1):
        c = gen.day(o)
        for i in range(c.n):
            ts = gen.conv_ts(c, i)
            if t0 <= ts < min(t1, ve) and not gen.conv_hidden(c, i, ve, ts):
                out.add((KIND_CONVERSION, o, i))
        for j in range(c.e):
            ts = gen.event_ts(c, j)
            if t0 <= ts < min(t1, ve) and not gen.event_hidden(c, j, ve):
                out.add((KIND_EVENT, o, j))
    return out


@PROFILE
@given(params=worlds, clock=clocks, day_offset=st.integers(0, 2))
def test_served_records_are_exactly_those_recorded_and_not_deleted_at_the_clock(
    params, clock, day_offset
):
    w = _world(params, clock)
    t0 = END_START - day_offset * DAY_S
    assert _served(w, t0, t0 + DAY_S) == _defined(w, t0, t0 + DAY_S)


@PROFILE
@given(params=worlds, clock=clocks, later=st.integers(0, 3 * DAY_S))
def test_a_later_clock_only_adds_recorded_records_and_only_removes_deleted_ones(
    params, clock, later
):
    w = _world(params, clock)
    t0, t1 = END_START - 2 * DAY_S, END_START + DAY_S
    before = _served(w, t0, t1)
    w.clock.advance(later)
    after = _served(w, t0, t1)
    gen = w.gen
    for kind, o, i in before - after:
        c = gen.day(o)
        parent = i if kind == KIND_CONVERSION else gen.event_parent(c, i)
        assert gen.deleted_at(c, parent) is not None
    for kind, o, i in after - before:
        c = gen.day(o)
        parent = i if kind == KIND_CONVERSION else gen.event_parent(c, i)
        ts = gen.conv_ts(c, i) if kind == KIND_CONVERSION else gen.event_ts(c, i)
        # New: happened after the first clock, or recorded late.
        assert ts >= clock or gen.late_delay(c, parent) > 0


@PROFILE
@given(params=worlds, clock=clocks, page_size=st.integers(40, 700))
def test_pages_tile_the_served_records_at_every_boundary(params, clock, page_size):
    w = _world(params, clock)
    body = {"from": "2026-05-08", "to": "2026-05-10", "timezone_id": 67, "show_events": True}
    ids: list[str] = []
    page = 1
    while True:
        doc = orjson.loads(b"".join(w.conversion_report(dict(body), page, page_size).chunks))
        ids.extend(r["conversion_id"] for r in doc["conversions"])
        total = doc["paging"]["total_count"]
        if page * page_size >= total:
            break
        page += 1
    assert len(ids) == len(set(ids)) == total
    t0, t1 = w.window(dict(body))
    assert total == len(_served(w, t0, t1))


@PROFILE
@given(params=worlds, clock=clocks)
def test_money_truth_equals_the_records_summed_per_currency(params, clock):
    w = _world(params, clock)
    t0, t1 = w.window({"from": "2026-05-09", "to": "2026-05-09", "timezone_id": 67}, "admin")
    truth = w.money_truth(t0, t1)
    sums: dict[tuple[str, str], list] = defaultdict(lambda: [0, Decimal(0), Decimal(0)])
    gen = w.gen
    for seg in gen.segments(t0, t1, conversions=True, events=True):
        for i in range(seg.lo, seg.hi):
            rec = gen.record_dict(seg.kind, seg.ctx, i)
            kind = "events" if rec["is_event"] else rec["status"]
            acc = sums[(rec["currency_id"], kind)]
            acc[0] += 1
            acc[1] += Decimal(repr(rec["payout"]))
            acc[2] += Decimal(repr(rec["revenue"]))
    got = {}
    for cur, t in truth["currencies"].items():
        for status, agg in [*t["conversions"].items(), ("events", t["events"])]:
            if agg["count"]:
                got[(cur, status)] = [agg["count"], Decimal(agg["payout"]), Decimal(agg["revenue"])]
    assert got == dict(sums)
