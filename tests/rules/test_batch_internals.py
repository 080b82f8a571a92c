"""The batch's fast paths against plain reference implementations, on awkward records.

The single-pass prefetch and the Arrow aggregates each fall back to a slower general way when
records are irregular; both ways must give the same values.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from affiliate_network.rules.aggregates import (
    combine,
    count_distinct,
    count_same,
    count_same_within,
    factorize,
    ratio_to_median,
    share_same,
)
from affiliate_network.rules.engine import Batch

NOW = 1_800_000_000

PATHS = (
    "sub1",
    "sale_amount",
    "relationship.offer.network_offer_id",
    "relationship.offer.offer_status",
    "relationship.affiliate.network_affiliate_id",
    "relationship.on_hold_snapshots",
)


class SubDict(dict):
    pass


def _record(n: int) -> dict[str, Any]:
    return {
        "sub1": f"s{n % 3}",
        "sale_amount": float(n),
        "relationship": {
            "offer": {"network_offer_id": n % 2, "offer_status": "active"},
            "affiliate": {"network_affiliate_id": n},
            "on_hold_snapshots": [{"unix_timestamp": n}],
        },
    }


def _broken(kind: str) -> dict[str, Any]:
    record = _record(99)
    if kind == "missing-top-key":
        del record["sub1"]
    elif kind == "missing-nested-level":
        del record["relationship"]["offer"]
    elif kind == "missing-leaf":
        del record["relationship"]["affiliate"]["network_affiliate_id"]
    elif kind == "relationship-none":
        record["relationship"] = None
    elif kind == "relationship-list":
        record["relationship"] = [{"offer": {"network_offer_id": 1}}]
    elif kind == "offer-string":
        record["relationship"]["offer"] = "paused"
    elif kind == "offer-dict-subclass":
        # The guarded fetch reads only plain dicts: a subclass reads as absent, both ways.
        record["relationship"]["offer"] = SubDict(network_offer_id=5, offer_status="x")
    return record


def _guarded(path: str, record: dict[str, Any]) -> Any:
    """What the guarded fetch gives: ``None`` below a level that is not a plain dict."""
    value: Any = record
    for key in path.split("."):
        if type(value) is not dict:
            return None
        value = value.get(key)
    return value


@pytest.mark.parametrize(
    "kind",
    [
        None,
        "missing-top-key",
        "missing-nested-level",
        "missing-leaf",
        "relationship-none",
        "relationship-list",
        "offer-string",
        "offer-dict-subclass",
    ],
)
def test_prefetch_reads_every_path_like_the_guarded_fetch(kind: str | None) -> None:
    records = [_record(n) for n in range(5)]
    if kind is not None:
        records.insert(2, _broken(kind))
    batch = Batch(records, NOW, PATHS)
    for path in PATHS:
        assert list(batch.column(path)) == [_guarded(path, r) for r in records], path
    # Without prefetch, paths are read on first use: the same values.
    lazy = Batch(records, NOW)
    for path in PATHS:
        assert list(lazy.column(path)) == list(batch.column(path)), path


# --- aggregates against brute force --------------------------------------------------------


def _present(value: Any) -> bool:
    return value is not None and value != ""


def _ref_count_same(keys: list[Any], times: list[Any] | None, window: float | None) -> list:
    out: list[Any] = []
    for k, t in zip(keys, times or [0] * len(keys), strict=True):
        if not _present(k) or (window is not None and t is None):
            out.append(None)
            continue
        out.append(
            sum(
                1
                for k2, t2 in zip(keys, times or [0] * len(keys), strict=True)
                if k2 == k
                and (window is None or (t2 is not None and t - window <= t2 <= t + window))
            )
        )
    return out


def _keys(rng: random.Random, n: int, pool: list[Any]) -> list[Any]:
    return [rng.choice(pool) for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_aggregates_match_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = 80
    strings = _keys(rng, n, ["a", "b", "c", "", None, "d"])
    ints = _keys(rng, n, [1, 2, 3, None])
    big = 2**60
    times_choices: list[list[Any]] = [
        [NOW + rng.randint(-7200, 7200) for _ in range(n)],
        [NOW + rng.uniform(-7200, 7200) if rng.random() > 0.1 else None for _ in range(n)],
        [big + rng.randint(-7200, 7200) for _ in range(n)],  # beyond float64: Python path
        [None] * n,
    ]
    s_codes, i_codes = factorize(strings), factorize(ints)
    assert count_same(s_codes) == _ref_count_same(strings, None, None)
    pairs = [
        (s, i) if _present(s) and i is not None else None
        for s, i in zip(strings, ints, strict=True)
    ]
    assert count_same(combine([s_codes, i_codes])) == _ref_count_same(pairs, None, None)
    for times in times_choices:
        for window in (3600, 1800.0, 0):
            assert count_same_within(s_codes, times, window) == _ref_count_same(
                strings, times, window
            ), (times[:3], window)

    # share_same: of the batch and per group.
    counts = _ref_count_same(strings, None, None)
    assert share_same(s_codes, None) == [None if c is None else c / n for c in counts]
    expected_share = []
    for s, i in zip(strings, ints, strict=True):
        if not _present(s) or i is None:
            expected_share.append(None)
            continue
        group = [s2 for s2, i2 in zip(strings, ints, strict=True) if i2 == i]
        expected_share.append(group.count(s) / len(group))
    assert share_same(s_codes, i_codes) == expected_share

    # count_distinct: groups whose values are all missing count 0.
    expected_distinct = [
        None
        if i is None
        else len({s2 for s2, i2 in zip(strings, ints, strict=True) if i2 == i and _present(s2)})
        for i in ints
    ]
    assert count_distinct(s_codes, i_codes) == expected_distinct


def _ref_ratio(numbers: list[Any], groups: list[Any] | None) -> list[Any]:
    groups = groups if groups is not None else [0] * len(numbers)
    out: list[Any] = []
    for v, g in zip(numbers, groups, strict=True):
        if v is None or g is None:
            out.append(None)
            continue
        values = sorted(
            v2 for v2, g2 in zip(numbers, groups, strict=True) if g2 == g and v2 is not None
        )
        mid = len(values) // 2
        median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
        out.append(v / median if median else None)
    return out


@pytest.mark.parametrize(
    "numbers",
    [
        [5.0, 1.0, 3.0, None, 8.5, 2.0, 2.0, 7.0, 0.0, 4.0],
        [5, 1, 3, None, 8, 2, 2, 7, 0, 4],  # ints: medians of even groups are floats
        [0, 0, 0, 1, 0, None, 0, 0, 2, 0],  # zero medians give no ratio
        [2**60 + k for k in range(10)],  # beyond float64: Python path
        [None] * 10,
    ],
)
def test_ratio_to_median_matches_brute_force(numbers: list[Any]) -> None:
    groups = [1, 2, 1, 2, None, 1, 2, 1, 2, 3]
    per = factorize(groups)
    assert ratio_to_median(numbers, per) == _ref_ratio(numbers, groups)
    assert ratio_to_median(numbers, None) == _ref_ratio(numbers, None)


def test_factorize_odd_columns() -> None:
    # Mixed types and unhashable values go the Python way; "" and () are missing.
    codes, size = factorize(["x", 1, "", None, "x", ()])
    assert codes.to_pylist() == [0, 1, None, None, 0, None]
    assert size == 2
    codes, size = factorize([[1], [1], {"a": 1}, None])
    assert codes.to_pylist() == [0, 0, 1, None]
    assert size == 2
    codes, size = factorize([None, None])
    assert codes.to_pylist() == [None, None]
    assert size == 0
