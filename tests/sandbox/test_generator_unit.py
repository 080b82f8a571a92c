"""In-process checks of the generator: the JSON hot path equals the dict path."""

from __future__ import annotations

import datetime as dt
import itertools

import orjson
import pytest

from affiliate_network_sandbox.config import DataConfig
from affiliate_network_sandbox.data import KIND_CONVERSION, KIND_EVENT
from affiliate_network_sandbox.ids import IdCodec, decode_tracking_id, encode_tracking_id
from affiliate_network_sandbox.world import World

DAY = dt.date(2026, 5, 1)


def _world(**overrides) -> World:
    cfg = DataConfig(end_date=DAY, days=2).with_overrides(
        {"conversions_per_day": 3000, **overrides}
    )
    return World(cfg, "default")


@pytest.mark.parametrize("world", ["small", "large"])
def test_json_records_equal_dict_records_including_writes(world):
    # The large world: offers in six currencies, amounts at 0, 2 and 3 decimals.
    w = _world(world=world, conversions_per_day=3000)
    gen = w.gen
    t0, t1 = gen.window(DAY, DAY, "UTC")
    segs = gen.segments(t0, t1, conversions=True, events=True)
    conv = next(s for s in segs if s.kind == KIND_CONVERSION)
    held = [i for i in range(conv.lo, conv.hi) if gen.core(conv.ctx, i)[3]][:3]
    # Writes: an approved and a rejected on-hold conversion, sale corrections on both kinds.
    w.patch_onhold(
        {
            "on_hold_conversion_ids": [gen.onhold_ids.encode(conv.ctx.vbase | held[0])],
            "status": "approved",
        },
        [],
    )
    w.patch_onhold(
        {
            "on_hold_conversion_ids": [gen.onhold_ids.encode(conv.ctx.vbase | held[1])],
            "status": "rejected",
        },
        [],
    )
    w.put_sale_amount(gen.conv_ids.encode(conv.ctx.vbase | 5), {"sale_amount": 1.25})
    w.put_sale_amount(
        gen.event_ids.encode(conv.ctx.vbase | 5), {"sale_amount": 2.5, "is_event": True}
    )
    checked = 0
    for seg in segs:
        for i in itertools.chain(range(seg.lo, min(seg.hi, seg.lo + 800)), held):
            if i >= seg.hi:
                continue
            as_json = orjson.loads(gen.record_json(seg.kind, seg.ctx, i))
            as_dict = gen.record_dict(seg.kind, seg.ctx, i)
            assert as_json == as_dict
            assert list(as_json) == list(as_dict)
            checked += 1
    assert checked > 1000
    statuses = {gen.build_conversion(conv.ctx, i)["status"] for i in held}
    assert statuses == {"approved", "rejected", "pending"}
    assert gen.build_conversion(conv.ctx, 5)["sale_amount"] == 1.25
    assert gen.build_event(conv.ctx, 5)["sale_amount"] == 2.5
    assert gen.build_event(conv.ctx, 5)["is_event"] is True
    _ = KIND_EVENT


def test_id_codec_round_trips_and_rejects_foreign_ids():
    a, b = IdCodec(1, 2), IdCodec(3, 4)
    for value in (0, 1, 12345, (739000 << 27) | 999_999):
        text = a.encode(value)
        assert len(text) == 32
        assert a.decode(text) == value
        assert b.decode(text) is None
    assert a.decode("zz") is None
    assert a.decode(a.encode(7).upper()) is None


def test_tracking_id_encoding_is_a_bijection_on_a_sample():
    key = 987654321
    seen = set()
    for value in range(1, 5000):
        text = encode_tracking_id(value, key)
        assert decode_tracking_id(text, key) == value
        seen.add(text)
    assert len(seen) == 4999


def test_records_are_a_pure_function_of_seed_date_and_index():
    a, b = _world(), _world()
    ca, cb = a.gen.day(DAY.toordinal()), b.gen.day(DAY.toordinal())
    for i in (0, 17, 2999):
        assert a.gen.build_conversion(ca, i) == b.gen.build_conversion(cb, i)
    other = _world(seed=43)
    assert other.gen.build_conversion(other.gen.day(DAY.toordinal()), 17) != a.gen.build_conversion(
        ca, 17
    )
