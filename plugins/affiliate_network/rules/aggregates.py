"""Batch aggregates: numbers computed once per batch over every candidate, one per conversion.

Every grouping column is first *factorised* into dense integer codes (cached for the batch),
kept as an Arrow ``int64`` array (null when missing): ``dictionary_encode`` hashes strings in C.
The rest of the chain stays in Arrow compute (C++) and becomes a Python list once, at the end:
composite keys are ``a * size_b + b`` re-encoded to dense codes, a count per code comes from
``value_counts`` and goes back to every record with ``take``. The windowed count sorts only the
repeated keys' times together with two window-edge probes per record (one Arrow sort instead of
two binary searches per record); the median sorts by (group, value) in Arrow and reads the
middle of each group's run.

Conversions whose grouping value is missing or empty get ``None``: they never share a value with
anyone, and a condition on ``None`` is false (``missing`` is true).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from affiliate_network.rules.model import Aggregate

#: Codes of a column: an ``int64`` array of codes 0..size-1 (null when missing), and ``size``.
#: Codes are dense: each of 0..size-1 is the code of at least one record.
Codes = tuple[pa.Array, int]

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)
_NULL_INT = pa.scalar(None, pa.int64())
_NULL_FLOAT = pa.scalar(None, pa.float64())
#: Largest integer a float64 holds exactly: beyond it, Arrow's float maths would round.
_EXACT_INT = 2**53


def _hashable(value: Any) -> Hashable:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def factorize(column: Sequence[Any]) -> Codes:
    """Map each distinct present value to 0..m-1; missing/empty values to null.

    Scalar columns are hashed by Arrow (``dictionary_encode``, in C: about twice as fast as a
    Python dict on 100,000 distinct strings); anything Arrow cannot type goes the Python way.
    """
    try:
        array = pa.array(column)
        if pa.types.is_null(array.type):  # nothing present at all
            return pa.nulls(len(array), pa.int64()), 0
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            empty = pc.equal(array, "")
            if pc.any(empty).as_py():  # "" is missing: null it before encoding (codes stay dense)
                array = pc.if_else(empty, pa.scalar(None, array.type), array)
        encoded = array.dictionary_encode()
    except _ARROW_ERRORS:
        return _factorize_python(column)
    return encoded.indices.cast(pa.int64()), len(encoded.dictionary)


def _factorize_python(column: Sequence[Any]) -> Codes:
    mapping: dict[Any, int] = {}
    setdefault = mapping.setdefault
    try:
        codes = [
            None if (v is None or v == "" or v == ()) else setdefault(v, len(mapping))
            for v in column
        ]
    except TypeError:
        # Rare: untyped paths yielding lists/objects, which cannot be dict keys as they are.
        return _factorize_python([_hashable(v) for v in column])
    return pa.array(codes, pa.int64()), len(mapping)


def combine(parts: Sequence[Codes]) -> Codes:
    """Codes of a composite key (null when any part is missing), from the parts' codes.

    ``a * size_b + b`` is unique per pair; re-encoding it keeps the codes dense (and small).
    """
    codes, size = parts[0]
    for other, other_size in parts[1:]:
        encoded = pc.add(pc.multiply(codes, other_size), other).dictionary_encode()
        codes, size = encoded.indices.cast(pa.int64()), len(encoded.dictionary)
    return codes, size


def _counts_by_code(codes: pa.Array, size: int) -> pa.Array:
    """Number of records with each code, indexed by code (``int64``, length ``size``)."""
    counted = pc.value_counts(codes)
    values, counts = counted.field("values"), counted.field("counts")
    if values.null_count:
        present = pc.is_valid(values)
        values, counts = values.filter(present), counts.filter(present)
    # Dense codes: the values are a permutation of 0..size-1, so sorting them orders the counts.
    assert len(values) == size, "codes must be dense"
    return counts.take(pc.sort_indices(values))


def _row_counts(codes: pa.Array, size: int) -> pa.Array:
    """For each record: how many records share its code (null when the code is)."""
    return _counts_by_code(codes, size).take(codes)


def count_same(key: Codes) -> list[float | None]:
    return _row_counts(*key).to_pylist()


def exact_numbers(numbers: Sequence[float | None]) -> pa.Array | None:
    """``numbers`` as an Arrow int64/float64 array, or ``None`` when Arrow's maths could differ
    from Python's (ints beyond float64 precision, values Arrow cannot type)."""
    try:
        array = pa.array(numbers)
    except _ARROW_ERRORS:
        return None
    if pa.types.is_floating(array.type):
        return array
    if not pa.types.is_integer(array.type):
        return None
    bounds = pc.min_max(array).as_py()
    if bounds["min"] is not None and max(-bounds["min"], bounds["max"]) > _EXACT_INT:
        return None
    return array


def count_same_within(
    key: Codes,
    times: Sequence[float | None],
    window_s: float,
    array: pa.Array | None = None,
) -> list[float | None]:
    """For each record: how many records with its key lie within ``window_s`` of its time.

    Only repeated keys need the window. For those, every record's time is sorted together with
    two probes per record, ``(key, time + window)`` just after equal times and
    ``(key, time - window)`` just before them: the records sorted up to the first probe, minus
    those up to the second, are the records of that key inside the window (the counts two
    binary searches per record would give).

    :param array: ``exact_numbers(times)`` when the caller has it already.
    """
    codes, size = key
    counts = _row_counts(codes, size)
    if array is None:
        array = exact_numbers(times)
    if array is None:
        return _count_same_within_python(codes.to_pylist(), counts.to_pylist(), times, window_s)
    timed = pc.is_valid(array)
    # Unique keys count 1 (themselves); no key or no time: None.
    result = pc.if_else(timed, counts, _NULL_INT)
    repeated = pc.fill_null(pc.and_(timed, pc.greater(counts, 1)), False)
    rows = pc.indices_nonzero(repeated)
    n = len(rows)
    if not n:
        return result.to_pylist()
    at = array.take(rows)
    if pa.types.is_floating(at.type) or not isinstance(window_s, int):
        at = at.cast(pa.float64())  # as Python: int + float is a float
    key_codes = codes.take(rows)
    probes = pa.table(
        {
            "key": pa.concat_arrays([key_codes, key_codes, key_codes]),
            "time": pa.concat_arrays(
                [at, pc.add(at, window_s).cast(at.type), pc.subtract(at, window_s).cast(at.type)]
            ),
            # Records, then "up to time + window" probes after equal times, "before time -
            # window" probes before them.
            "kind": pa.concat_arrays([pa.repeat(pa.scalar(k, pa.int8()), n) for k in (0, 1, -1)]),
        }
    )
    order = pc.sort_indices(
        probes, sort_keys=[("key", "ascending"), ("time", "ascending"), ("kind", "ascending")]
    )
    records_so_far = pc.cumulative_sum(
        pc.equal(probes["kind"].take(order), 0).combine_chunks().cast(pa.int64())
    )
    position = pc.sort_indices(order)  # the inverse permutation: where each row was sorted to
    within = pc.subtract(
        records_so_far.take(position.slice(n, n)), records_so_far.take(position.slice(2 * n, n))
    )
    return pc.replace_with_mask(result, repeated, within).to_pylist()


def _count_same_within_python(
    codes: list[int | None],
    counts: list[int | None],
    times: Sequence[float | None],
    window_s: float,
) -> list[float | None]:
    """:func:`count_same_within` for times Arrow cannot hold exactly: bisect per record."""
    result: list[float | None] = [
        None if c is None or t is None else (1 if counts[i] == 1 else 0)
        for i, (c, t) in enumerate(zip(codes, times, strict=True))
    ]
    groups: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for i, (c, t) in enumerate(zip(codes, times, strict=True)):
        if result[i] == 0 and c is not None and t is not None:  # 0: code and time are known
            groups[c].append((t, i))
    for members in groups.values():
        members.sort()
        ts = [t for t, _ in members]
        for t, i in members:
            result[i] = bisect_right(ts, t + window_s) - bisect_left(ts, t - window_s)
    return result


def _ratio(numerator: pa.Array, denominator: pa.Array) -> list[float | None]:
    # int -> float64 is exact for the ints seen here, so this is Python's own division.
    return pc.divide(numerator.cast(pa.float64()), denominator.cast(pa.float64())).to_pylist()


def share_same(key: Codes, per: Codes | None) -> list[float | None]:
    """Share of the batch (or of the ``per`` group) that has this record's value."""
    if per is None:
        counts = _row_counts(*key)
        return _ratio(counts, pa.scalar(len(counts), pa.float64()))
    return _ratio(_row_counts(*combine([key, per])), _row_counts(*per))


def count_distinct(values: Codes, per: Codes) -> list[float | None]:
    """Number of distinct values in the record's ``per`` group."""
    value_size = values[1] or 1
    # (group, value) as one int; the unique ones are the distinct pairs.
    pairs = pc.add(pc.multiply(per[0], value_size), values[0]).drop_null().unique()
    counted = pc.value_counts(pc.divide(pairs, value_size))  # int64: integer division
    groups, distinct = counted.field("values"), counted.field("counts")
    # Groups whose values are all missing have no pair: they count 0 distinct values.
    found = distinct.take(pc.index_in(per[0], value_set=groups))
    return pc.if_else(pc.is_valid(per[0]), pc.fill_null(found, 0), _NULL_INT).to_pylist()


def ratio_to_median(
    numbers: Sequence[float | None], per: Codes | None, values: pa.Array | None = None
) -> list[float | None]:
    """The record's value divided by the median of its ``per`` group (or of the batch).

    :param values: ``exact_numbers(numbers)`` when the caller has it already.
    """
    if values is None:
        values = exact_numbers(numbers)
    if values is None:
        if all(v is None for v in numbers):
            return [None] * len(numbers)
        return _ratio_to_median_python(numbers, per)
    groups = per[0] if per is not None else pc.fill_null(pa.nulls(len(values), pa.int64()), 0)
    size = per[1] if per is not None else 1
    table = pa.table({"g": groups, "v": values})
    table = table.filter(pc.and_(pc.is_valid(groups), pc.is_valid(values)))
    if not table.num_rows:
        return [None] * len(values)
    table = table.take(pc.sort_indices(table, sort_keys=[("g", "ascending"), ("v", "ascending")]))
    # Each group is now one run of ascending values: its median is in the middle of the run.
    runs = pc.run_end_encode(table["g"].combine_chunks())
    ends = runs.run_ends.cast(pa.int64())
    lengths = pc.subtract(ends, pa.concat_arrays([pa.array([0], pa.int64()), ends[:-1]]))
    starts = pc.subtract(ends, lengths)
    ordered = table["v"].combine_chunks()
    low = ordered.take(pc.add(starts, pc.divide(pc.subtract(lengths, 1), 2))).to_pylist()
    high = ordered.take(pc.add(starts, pc.divide(lengths, 2))).to_pylist()
    medians: list[float | None] = [None] * size
    for g, n, lo, hi in zip(runs.values.to_pylist(), lengths.to_pylist(), low, high, strict=True):
        median = lo if n % 2 else (lo + hi) / 2
        medians[g] = median if median else None  # a zero median gives no ratio
    return _ratio(values, pa.array(medians, pa.float64()).take(groups))


def _ratio_to_median_python(
    numbers: Sequence[float | None], per: Codes | None
) -> list[float | None]:
    """:func:`ratio_to_median` for numbers Arrow cannot hold exactly (huge ints)."""
    group_codes = per[0].to_pylist() if per is not None else [0] * len(numbers)
    groups: dict[int, list[float]] = defaultdict(list)
    for v, g in zip(numbers, group_codes, strict=True):
        if v is not None and g is not None:
            groups[g].append(v)
    medians: dict[int, float] = {}
    for g, values in groups.items():
        values.sort()
        n = len(values)
        mid = n // 2
        medians[g] = values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2
    out: list[float | None] = []
    for v, g in zip(numbers, group_codes, strict=True):
        median = medians.get(g) if g is not None else None
        out.append(v / median if v is not None and median else None)
    return out


def compute_aggregate(
    agg: Aggregate,
    codes: Callable[[str], Codes],
    numeric: Callable[[str], Sequence[float | None]],
    exact: Callable[[str], pa.Array | None] | None = None,
) -> list[float | None]:
    """Compute one aggregate for a batch.

    :param agg: the validated aggregate.
    :param codes: ``path -> factorised column`` of the batch (cached by the caller).
    :param numeric: ``path -> numeric column`` of the batch.
    :param exact: ``path -> exact_numbers(numeric(path))`` (cached by the caller), if any.
    """
    if exact is None:

        def exact(path: str) -> pa.Array | None:
            return exact_numbers(numeric(path))

    per = combine([codes(p) for p in agg.per_fields]) if agg.per_fields else None
    kind = agg.kind
    if kind == "ratio_to_median":
        return ratio_to_median(numeric(agg.fields[0]), per, exact(agg.fields[0]))
    if kind == "count_distinct":
        assert per is not None  # validation: count_distinct needs per
        return count_distinct(codes(agg.fields[0]), per)
    key = combine([codes(p) for p in agg.fields])
    if kind == "share_same":
        return share_same(key, per)
    if per is not None:
        key = combine([key, per])
    if agg.within_hours is not None:
        times = "conversion_unix_timestamp"
        return count_same_within(key, numeric(times), agg.within_hours * 3600, exact(times))
    return count_same(key)
