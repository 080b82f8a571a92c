"""The exact set of record keys seen in one pull, held in numpy arrays and a spill file.

A landing drops a record whose key (``conversion_id``) was already written in the same pull.
A Python ``set`` of the ids costs about 130 MB per million rows; this structure costs 8 bytes
per row in memory and keeps the keys themselves in a temporary file:

* each key becomes one ``uint64``: the top :data:`HASH_BITS` bits of its Python hash, then its
  ordinal (the how-manyth kept key it is) in the other low bits;
* these words live in a few sorted numpy arrays ("levels"; a new page's words are one level,
  small levels are merged, up to :data:`MAX_LEVEL` words each, so a merge never copies more
  than a few MB). Looking a page up is one ``searchsorted`` per level;
* the keys' UTF-8 bytes are appended to a temporary file, with each key's end offset in a
  second one. A word whose hash bits match is only a *suspect*: the earlier key is read back
  by its ordinal and compared byte for byte, so two different keys that share a hash are both
  kept (exact), and a duplicate is dropped only when the bytes are equal.

With 36 hash bits, a day of 5,000,000 distinct keys meets about 180 suspects that turn out
distinct (one disk read each); a real duplicate is one read too.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from affiliate_network.exceptions import StorageError

#: Bits of a key's hash kept in its word; the other 28 hold the ordinal (268 million keys).
HASH_BITS = 36
#: Largest level built by merging (8 MB of words): bounds the copy a merge makes.
MAX_LEVEL = 1 << 20


def _key_text(key: Any) -> str:
    """A key as text; non-string keys get a prefix no string id starts with (NUL)."""
    if type(key) is str:
        return key
    return "\x00" + orjson.dumps(key, option=orjson.OPT_SORT_KEYS).decode()


class SeenKeys:
    """Exact membership of the keys kept so far in one pull (see the module docstring).

    :param spill_dir: folder for the two temporary files (default: the system's temp folder).
    :param hash_bits: hash bits per word (1 to 48); fewer bits mean more suspects read back
        from disk, never a wrong answer (tests use a few bits to force collisions).
    """

    def __init__(self, spill_dir: str | None = None, *, hash_bits: int = HASH_BITS) -> None:
        if not 1 <= hash_bits <= 48:
            raise StorageError(f"hash_bits {hash_bits}: expected 1 to 48")
        self._max_keys = 1 << (64 - hash_bits)
        self._ord_mask = np.uint64(self._max_keys - 1)
        self._shift = np.uint64(64 - hash_bits)
        self._levels: list[np.ndarray] = []
        self._count = 0
        # Closed by close() (the writer calls it on commit and abort), not a with-block.
        self._keys = tempfile.TemporaryFile(dir=spill_dir)  # noqa: SIM115 - UTF-8, back to back
        self._ends = tempfile.TemporaryFile(dir=spill_dir)  # noqa: SIM115 - uint64 end offsets
        self._keys_bytes = 0
        #: Suspects read back from disk (hash bits equal): the cost of exactness.
        self.verified = 0

    def __len__(self) -> int:
        return self._count

    @property
    def memory_bytes(self) -> int:
        """Bytes of the in-memory words (8 per kept key)."""
        return sum(level.nbytes for level in self._levels)

    def close(self) -> None:
        """Release the words and delete the spill files."""
        self._levels = []
        self._keys.close()
        self._ends.close()

    def add_many(self, keys: Sequence[Any]) -> list[bool]:
        """For each key, in order: ``True`` if it is new (it is remembered now), ``False`` if
        it was seen before, earlier in this pull or earlier in ``keys``."""
        texts = [k if type(k) is str else _key_text(k) for k in keys]
        n = len(texts)
        if n == 0:
            return []
        keep = np.ones(n, dtype=bool)
        if len(set(texts)) != n:  # duplicates inside the batch: later copies go
            first: set[str] = set()
            for i, text in enumerate(texts):
                if text in first:
                    keep[i] = False
                first.add(text)
        hashes = np.fromiter(map(hash, texts), dtype=np.int64, count=n).view(np.uint64)
        prefixes = (hashes >> self._shift) << self._shift
        for i in self._suspects(prefixes, keep):
            if self._seen_on_disk(texts[i], prefixes[i]):
                keep[i] = False
        self._remember([t for t, k in zip(texts, keep.tolist(), strict=True) if k], prefixes[keep])
        return keep.tolist()

    def _suspects(self, prefixes: np.ndarray, keep: np.ndarray) -> list[int]:
        """Positions whose hash bits match a kept key's (still to verify on disk)."""
        order = np.argsort(prefixes, kind="stable")  # sorted needles: searchsorted walks on
        needles = prefixes[order]
        hit = np.zeros(len(needles), dtype=bool)
        for level in self._levels:
            at = np.searchsorted(level, needles, side="left")
            found = level.take(np.minimum(at, level.size - 1))
            hit |= (found >> self._shift) == (needles >> self._shift)
        positions = order[hit]
        return sorted(p for p in positions.tolist() if keep[p])

    def _seen_on_disk(self, text: str, prefix: np.uint64) -> bool:
        data = text.encode("utf-8", "surrogatepass")
        end = prefix | self._ord_mask
        for level in self._levels:
            lo = int(np.searchsorted(level, prefix, side="left"))
            hi = int(np.searchsorted(level, end, side="right"))
            for word in level[lo:hi].tolist():
                self.verified += 1
                if self._read_key(word & (self._max_keys - 1)) == data:
                    return True
        return False

    def _read_key(self, ordinal: int) -> bytes:
        if ordinal == 0:
            start = 0
            (end,) = np.frombuffer(os.pread(self._ends.fileno(), 8, 0), dtype=np.uint64)
        else:
            raw = os.pread(self._ends.fileno(), 16, (ordinal - 1) * 8)
            start, end = np.frombuffer(raw, dtype=np.uint64).tolist()
        return os.pread(self._keys.fileno(), int(end) - int(start), int(start))

    def _remember(self, texts: list[str], prefixes: np.ndarray) -> None:
        n = len(texts)
        if n == 0:
            return
        if self._count + n > self._max_keys:
            raise StorageError(f"more than {self._max_keys:,} distinct keys in one pull")
        blob = "".join(texts).encode("utf-8", "surrogatepass")
        if len(blob) == sum(map(len, texts)):  # one byte per character: lengths as they are
            lengths = np.fromiter(map(len, texts), dtype=np.uint64, count=n)
        else:
            encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
            lengths = np.fromiter(map(len, encoded), dtype=np.uint64, count=n)
        ends = np.cumsum(lengths, dtype=np.uint64) + np.uint64(self._keys_bytes)
        os.pwrite(self._keys.fileno(), blob, self._keys_bytes)
        os.pwrite(self._ends.fileno(), ends.tobytes(), self._count * 8)
        self._keys_bytes = int(ends[-1])
        ordinals = np.arange(self._count, self._count + n, dtype=np.uint64)
        self._count += n
        words = prefixes | ordinals
        words.sort()  # the words of one batch are distinct (ordinals differ)
        self._levels.append(words)
        self._merge_levels()

    def _merge_levels(self) -> None:
        """Merge the newest levels while the older one is not larger (binary-counter style)."""
        levels = self._levels
        while (
            len(levels) > 1
            and levels[-2].size <= levels[-1].size
            and levels[-2].size + levels[-1].size <= MAX_LEVEL
        ):
            merged = np.concatenate((levels[-2], levels[-1]))
            merged.sort(kind="stable")  # two sorted runs: a stable sort merges them in one pass
            levels[-2:] = [merged]
