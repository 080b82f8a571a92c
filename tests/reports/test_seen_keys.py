"""The pull's key set: exact like a Python set, 8 bytes per key in memory."""

from __future__ import annotations

import random
from typing import Any

import pytest

from affiliate_network.exceptions import StorageError
from affiliate_network.reports.seen_keys import SeenKeys


def _reference(batches: list[list[Any]]) -> list[list[bool]]:
    seen: set[tuple[type, Any]] = set()
    out = []
    for batch in batches:
        marks = []
        for key in batch:
            marks.append((type(key), key) not in seen)
            seen.add((type(key), key))
        out.append(marks)
    return out


@pytest.mark.parametrize("hash_bits", [1, 3, 36])
def test_answers_like_a_set_even_when_hashes_collide(hash_bits: int) -> None:
    """With 1 or 3 hash bits almost every lookup is a collision: the bytes decide, exactly."""
    rnd = random.Random(hash_bits)
    pool = [f"{rnd.getrandbits(128):032x}" for _ in range(700)]
    batches = [[rnd.choice(pool) for _ in range(150)] for _ in range(12)]
    keys = SeenKeys(hash_bits=hash_bits)
    try:
        got = [keys.add_many(batch) for batch in batches]
        assert got == _reference(batches)
        assert len(keys) == len({k for batch in batches for k in batch})
        if hash_bits < 36:
            assert keys.verified > 0  # the collisions really were read back
    finally:
        keys.close()


def test_duplicates_inside_one_batch_keep_the_first() -> None:
    keys = SeenKeys()
    try:
        assert keys.add_many(["a", "b", "a", "c", "b"]) == [True, True, False, True, False]
        assert keys.add_many(["c", "d", "d"]) == [False, True, False]
    finally:
        keys.close()


def test_non_string_keys_are_told_apart_from_their_text() -> None:
    keys = SeenKeys(hash_bits=1)
    try:
        assert keys.add_many([None, 7, "7", "null", None, 7.5, "é", "é"]) == [
            True,
            True,
            True,
            True,
            False,
            True,
            True,
            False,
        ]
        assert keys.add_many(["7", 7, "é"]) == [False, False, False]
    finally:
        keys.close()


def test_memory_is_eight_bytes_per_key() -> None:
    keys = SeenKeys()
    try:
        for start in range(0, 200_000, 2_000):
            keys.add_many([f"id-{i:09d}" for i in range(start, start + 2_000)])
        assert len(keys) == 200_000
        assert keys.memory_bytes == 8 * 200_000
    finally:
        keys.close()


def test_hash_bits_out_of_range_is_refused() -> None:
    with pytest.raises(StorageError, match="hash_bits"):
        SeenKeys(hash_bits=60)
