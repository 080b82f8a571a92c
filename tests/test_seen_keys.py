"""The pull's key set: exact like a Python set, 4 bytes per key in memory."""

from __future__ import annotations

import random
from typing import Any

import pytest

from affiliate_network.exceptions import StorageError
from affiliate_network.helpers.seen_keys import MAX_LEVEL, SeenKeys


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


@pytest.mark.parametrize("hash_bits", [1, 3, 32])
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
        if hash_bits < 32:
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


def test_memory_is_four_bytes_per_key_once_levels_are_full() -> None:
    """Hashes stay in memory; a full level's ordinals go to disk (only small levels keep
    theirs, at most about MAX_LEVEL keys' worth)."""
    n = 2_000 * (3 * MAX_LEVEL // 2_000)  # whole pages, three full levels
    keys = SeenKeys()
    try:
        for start in range(0, n, 2_000):
            keys.add_many([f"id-{i:09d}" for i in range(start, start + 2_000)])
        assert len(keys) == n
        assert 4 * n <= keys.memory_bytes <= 4 * n + 4 * MAX_LEVEL
    finally:
        keys.close()


def test_keys_in_spilled_levels_are_still_found() -> None:
    """Duplicates of keys whose level's ordinals are on disk, with colliding hashes too."""
    for hash_bits in (12, 32):  # 12: every lookup meets ~60 same-hash keys, read back
        keys = SeenKeys(hash_bits=hash_bits)
        try:
            first = [f"k{i}" for i in range(MAX_LEVEL + 10)]
            for start in range(0, len(first), 2_000):
                assert all(keys.add_many(first[start : start + 2_000]))
            assert any(level.ordinals is None for level in keys._levels)  # spilled
            again = [*first[::997], "new-1", "new-2"]
            assert keys.add_many(again) == [False] * (len(again) - 2) + [True, True]
        finally:
            keys.close()


def test_hash_bits_out_of_range_is_refused() -> None:
    with pytest.raises(StorageError, match="hash_bits"):
        SeenKeys(hash_bits=60)
