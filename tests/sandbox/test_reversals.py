"""Reversals and adjustments planted in the large world (sandbox choices, ``choices.py``):
negative amounts on ordinary base conversion records, some held, in every currency; none in
the default world. In process: every record of a day against the per-record definition.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from decimal import ROUND_HALF_UP, Decimal

import orjson

from affiliate_network_sandbox.config import DataConfig
from affiliate_network_sandbox.data import (
    KIND_CONVERSION,
    R_ADJUSTMENT,
    R_NONE,
    R_REVERSAL,
)
from affiliate_network_sandbox.world import World

END = dt.date(2026, 5, 10)
MINOR_DIGITS = {"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0, "KWD": 3, "IDR": 2}


def _world(**overrides: object) -> World:
    return World(DataConfig(end_date=END, days=1).with_overrides(overrides), "default")


def _day_records(w: World) -> list[tuple[int, dict]]:
    gen = w.gen
    c = gen.day(gen.last_ord)
    return [(i, orjson.loads(gen.record_json(KIND_CONVERSION, c, i))) for i in range(c.n)]


def test_the_default_world_plants_no_negative_amount() -> None:
    w = _world()
    assert w.cfg.reversal_share == 0
    assert not [r for _i, r in _day_records(w) if r["payout"] < 0 or r["revenue"] < 0]


def test_large_world_reversals_and_adjustments_are_exactly_the_planted_ones() -> None:
    w = _world(world="large", conversions_per_day=6000)
    assert w.cfg.reversal_share == 0.01
    gen = w.gen
    c = gen.day(gen.last_ord)
    kinds: Counter[tuple[str, int]] = Counter()
    held: Counter[str] = Counter()
    money: dict[str, Decimal] = defaultdict(Decimal)
    for i, rec in _day_records(w):
        u, _ts, pattern, oh = gen.core(c, i)
        kind = gen.reversal_of(c, i, pattern)
        assert rec == gen.record_dict(KIND_CONVERSION, c, i)  # JSON and dict forms agree
        t = gen.pair((u >> 16) % gen.pairs)
        cur = rec["currency_id"]
        assert cur == t.cur
        pay, rev = Decimal(repr(t.payout)), Decimal(repr(t.revenue))
        got = (Decimal(repr(rec["payout"])), Decimal(repr(rec["revenue"])))
        if kind == R_NONE:
            assert got == (pay, rev), rec
            assert rec["notes"] == "", rec
            continue
        assert pattern == 0  # never a planted fraud pattern
        assert rec["is_event"] is False
        assert rec["status"] == ("pending" if oh else "approved")
        if kind == R_REVERSAL:
            assert got == (-pay, -rev)
            assert rec["notes"] == "reversal"
            assert Decimal(repr(rec["sale_amount"])) < 0
        else:
            assert kind == R_ADJUSTMENT
            assert rec["notes"] == "adjustment"
            q = Decimal(1).scaleb(-MINOR_DIGITS[cur])
            half = [-(a / 2).quantize(q, rounding=ROUND_HALF_UP) for a in (pay, rev)]
            assert list(got) == half
            assert rec["sale_amount"] == 0
        kinds[(cur, kind)] += 1
        held[cur] += oh
        money[cur] += got[0]
    # 1 % of 6000 (less the few that fell on a planted pattern), a reversal and an adjustment
    # in turn, in all six currencies, some held.
    assert 55 <= sum(kinds.values()) <= 60
    assert 27 <= sum(n for (_c, k), n in kinds.items() if k == R_REVERSAL) <= 30
    assert {cur for cur, _k in kinds} == set(MINOR_DIGITS)
    assert sum(held.values()) >= 10, held
    # The money truth counts them apart, per currency, with their exact negative amounts.
    truth = w.money_truth(c.start, c.start + 86400, cells=False)["currencies"]
    for cur, amount in money.items():
        per_kind = truth[cur]["reversals"]
        assert (
            sum(Decimal(per_kind[k][st]["payout"]) for k in per_kind for st in per_kind[k])
            == amount
        )
        assert sum(per_kind[k][st]["count"] for k in per_kind for st in per_kind[k]) == sum(
            n for (c2, _k), n in kinds.items() if c2 == cur
        )
