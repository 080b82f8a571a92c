"""Batch aggregates: numbers computed once per batch over every candidate, one per conversion.

All kinds run in O(n) dict passes except the windowed count (one sort by time, then a
two-pointer sweep per group) and the median (a sort per group). Conversions whose grouping
value is missing or empty get ``None``: they never share a value with anyone, and a condition
on ``None`` is false (``missing`` is true).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from affiliate_network.review.model import Aggregate


def _hashable(value: Any) -> Hashable:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def group_keys(columns: Sequence[Sequence[Any]], size: int) -> list[Hashable | None]:
    """One key per record from one or more columns; ``None`` when any part is missing."""
    if len(columns) == 1:
        keys: list[Any] = [
            None if (v is None or v == "" or v == ()) else v for v in columns[0]
        ]
    else:
        keys = [
            None if (None in parts or "" in parts or () in parts) else parts
            for parts in zip(*columns, strict=True)
        ]
    # Rare: untyped paths may yield lists or objects, which cannot be dict keys as they are.
    if any(_UNHASHABLE & set(map(type, col)) for col in columns):
        keys = [None if k is None else _hashable(k) for k in keys]
    return keys


#: Value types that cannot be dict keys as they are (tuples may hold lists: checked too).
_UNHASHABLE = frozenset((list, dict, tuple))


def count_same(keys: Sequence[Hashable | None]) -> list[float | None]:
    counts = Counter(keys)  # C-level counting; the None bucket is never read
    return [None if k is None else counts[k] for k in keys]


def count_same_within(
    keys: Sequence[Hashable | None], times: Sequence[float | None], window_s: float
) -> list[float | None]:
    """For each record: how many records with its key lie within ``window_s`` of its time.

    Keys seen once are answered from a counter; only repeated keys are grouped, sorted by time
    and answered with two binary searches per record.
    """
    counts = Counter(keys)
    result: list[float | None] = [
        None if k is None or t is None else (1 if counts[k] == 1 else 0)
        for k, t in zip(keys, times, strict=True)
    ]
    groups: dict[Hashable, list[tuple[float, int]]] = defaultdict(list)
    for i in [i for i, value in enumerate(result) if value == 0]:
        groups[keys[i]].append((times[i], i))  # type: ignore[arg-type]
    for members in groups.values():
        members.sort()
        ts = [t for t, _ in members]
        for t, i in members:
            result[i] = bisect_right(ts, t + window_s) - bisect_left(ts, t - window_s)
    return result


def share_same(
    keys: Sequence[Hashable | None], per_keys: Sequence[Hashable | None] | None
) -> list[float | None]:
    if per_keys is None:
        counts = Counter(keys)
        total = len(keys)
        return [None if k is None else counts[k] / total for k in keys]
    # Share within the group: conversions with this value AND this group / those of the group.
    pairs = list(zip(keys, per_keys, strict=True))
    pair_counts = Counter(pairs)
    per_counts = Counter(per_keys)
    return [
        None if k is None or p is None else pair_counts[(k, p)] / per_counts[p]
        for (k, p) in pairs
    ]


def count_distinct(
    values: Sequence[Hashable | None], per_keys: Sequence[Hashable | None]
) -> list[float | None]:
    # Distinct (group, value) pairs via a set (C speed), then pairs per group.
    distinct = Counter(p for p, v in set(zip(per_keys, values, strict=True)) if v is not None)
    return [None if p is None else distinct[p] for p in per_keys]


def ratio_to_median(
    numbers: Sequence[float | None], per_keys: Sequence[Hashable | None] | None
) -> list[float | None]:
    groups: dict[Hashable, list[float]] = defaultdict(list)
    keys = per_keys if per_keys is not None else [0] * len(numbers)
    for v, p in zip(numbers, keys, strict=True):
        if v is not None and p is not None:
            groups[p].append(v)
    medians: dict[Hashable, float] = {}
    for p, values in groups.items():
        values.sort()
        n = len(values)
        mid = n // 2
        medians[p] = values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2
    out: list[float | None] = []
    for v, p in zip(numbers, keys, strict=True):
        median = medians.get(p) if p is not None else None
        out.append(v / median if v is not None and median else None)
    return out


def compute_aggregate(
    agg: Aggregate,
    column: Callable[[str], Sequence[Any]],
    numeric: Callable[[str], Sequence[float | None]],
    size: int,
) -> list[float | None]:
    """Compute one aggregate for a batch.

    :param agg: the validated aggregate.
    :param column: ``path -> raw column`` of the batch (cached by the caller).
    :param numeric: ``path -> numeric column`` of the batch.
    :param size: number of records in the batch.
    """
    per = group_keys([column(p) for p in agg.per_fields], size) if agg.per_fields else None
    kind = agg.kind
    if kind == "ratio_to_median":
        return ratio_to_median(numeric(agg.fields[0]), per)
    if kind == "count_distinct":
        return count_distinct(group_keys([column(agg.fields[0])], size), per or [None] * size)
    keys = group_keys([column(p) for p in agg.fields], size)
    if kind == "share_same":
        return share_same(keys, per)
    if per is not None:
        keys = [None if k is None or p is None else (k, p) for k, p in zip(keys, per, strict=True)]
    if agg.within_hours is not None:
        times = numeric("conversion_unix_timestamp")
        return count_same_within(keys, times, agg.within_hours * 3600)
    return count_same(keys)
