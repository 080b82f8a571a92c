"""The exact set of record keys seen in one pull, held in numpy arrays and spill files.

A landing drops a record whose key (``conversion_id``) was already written in the same pull.
A Python ``set`` of the ids costs about 130 MB per million rows; this structure costs 4 bytes
per row in memory and keeps the rest in temporary files:

* each key gets a ``uint32``: the top :data:`HASH_BITS` bits of its Python hash, and an
  ordinal (the how-manyth kept key it is);
* the hashes live in a few sorted numpy arrays ("levels"; a new page's keys are one level,
  small levels are merged, up to :data:`MAX_LEVEL` keys each, so a merge never copies more
  than a few MB). Looking a page up is one ``searchsorted`` per level. Next to each level's
  hashes, in the same order, are the keys' ordinals: in memory while the level may still be
  merged, then (a level over half of :data:`MAX_LEVEL`, never merged again) appended to a
  spill file, so memory holds 4 bytes per key plus at most about :data:`MAX_LEVEL` small
  levels' ordinals;
* the keys' UTF-8 bytes are appended to a temporary file, with each key's end offset in a
  second one. A key whose hash matches is only a *suspect*: the earlier key's ordinal is
  read (from memory or the spill file) and the key itself read back and compared byte for
  byte, so two different keys that share a hash are both kept (exact), and a duplicate is
  dropped only when the bytes are equal.

With 32 hash bits, a day of 5,000,000 distinct keys meets about 3,000 suspects that turn out
distinct (two disk reads each, from the page cache); a real duplicate costs the same.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from affiliate_network.exceptions import StorageError

#: Bits of a key's hash kept in memory (one ``uint32`` per key).
HASH_BITS = 32
#: Largest level built by merging (1 MB of hashes): bounds the copy a merge makes.
MAX_LEVEL = 1 << 18


def _key_text(key: Any) -> str:
    """A key as text; non-string keys get a prefix no string id starts with (NUL)."""
    if type(key) is str:
        return key
    return "\x00" + orjson.dumps(key, option=orjson.OPT_SORT_KEYS).decode()


class _Level:
    """One sorted run of hashes, with the ordinals of its keys in the same order.

    :param hashes: sorted ``uint32`` hashes.
    :param ordinals: the keys' ordinals (``uint32``), or ``None`` once spilled.
    :param offset: where the spilled ordinals start in the spill file.
    """

    __slots__ = ("hashes", "offset", "ordinals")

    def __init__(self, hashes: np.ndarray, ordinals: np.ndarray | None, offset: int = 0) -> None:
        self.hashes = hashes
        self.ordinals = ordinals
        self.offset = offset


class SeenKeys:
    """Exact membership of the keys kept so far in one pull (see the module docstring).

    :param spill_dir: folder for the temporary files (default: the system's temp folder).
    :param hash_bits: hash bits per key (1 to 32); fewer bits mean more suspects read back
        from disk, never a wrong answer (tests use a few bits to force collisions).
    """

    def __init__(self, spill_dir: str | None = None, *, hash_bits: int = HASH_BITS) -> None:
        if not 1 <= hash_bits <= 32:
            raise StorageError(f"hash_bits {hash_bits}: expected 1 to 32")
        self._max_keys = (1 << 32) - 1  # ordinals are uint32
        self._shift = np.uint64(64 - hash_bits)
        self._levels: list[_Level] = []
        self._count = 0
        # Closed by close() (the writer calls it on commit and abort), not a with-block.
        self._keys = tempfile.TemporaryFile(dir=spill_dir)  # noqa: SIM115 - UTF-8, back to back
        self._ends = tempfile.TemporaryFile(dir=spill_dir)  # noqa: SIM115 - uint64 end offsets
        self._ords = tempfile.TemporaryFile(dir=spill_dir)  # noqa: SIM115 - full levels' ordinals
        self._keys_bytes = 0
        self._ords_bytes = 0
        #: Suspects read back from disk (hash bits equal): the cost of exactness.
        self.verified = 0

    def __len__(self) -> int:
        return self._count

    @property
    def memory_bytes(self) -> int:
        """Bytes of the in-memory hashes and not yet spilled ordinals."""
        return sum(
            level.hashes.nbytes + (0 if level.ordinals is None else level.ordinals.nbytes)
            for level in self._levels
        )

    def close(self) -> None:
        """Release the levels and delete the spill files."""
        self._levels = []
        self._keys.close()
        self._ends.close()
        self._ords.close()

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
        hashes = (hashes >> self._shift).astype(np.uint32)
        for i in self._suspects(hashes, keep):
            if self._seen_on_disk(texts[i], int(hashes[i])):
                keep[i] = False
        self._remember([t for t, k in zip(texts, keep.tolist(), strict=True) if k], hashes[keep])
        return keep.tolist()

    def _suspects(self, hashes: np.ndarray, keep: np.ndarray) -> list[int]:
        """Positions whose hash matches a kept key's (still to verify on disk)."""
        order = np.argsort(hashes, kind="stable")  # sorted needles: searchsorted walks on
        needles = hashes[order]
        hit = np.zeros(len(needles), dtype=bool)
        for level in self._levels:
            run = level.hashes
            at = np.searchsorted(run, needles, side="left")
            hit |= run.take(np.minimum(at, run.size - 1)) == needles
        positions = order[hit]
        return sorted(p for p in positions.tolist() if keep[p])

    def _seen_on_disk(self, text: str, hashed: int) -> bool:
        data = text.encode("utf-8", "surrogatepass")
        needle = np.uint32(hashed)
        for level in self._levels:
            lo = int(np.searchsorted(level.hashes, needle, side="left"))
            hi = int(np.searchsorted(level.hashes, needle, side="right"))
            for ordinal in self._ordinals(level, lo, hi):
                self.verified += 1
                if self._read_key(ordinal) == data:
                    return True
        return False

    def _ordinals(self, level: _Level, lo: int, hi: int) -> list[int]:
        """Ordinals of positions ``lo:hi`` of a level (read back if spilled)."""
        if lo >= hi:
            return []
        if level.ordinals is not None:
            ordinals: list[int] = level.ordinals[lo:hi].tolist()
            return ordinals
        raw = os.pread(self._ords.fileno(), 4 * (hi - lo), level.offset + 4 * lo)
        spilled: list[int] = np.frombuffer(raw, dtype=np.uint32).tolist()
        return spilled

    def _read_key(self, ordinal: int) -> bytes:
        if ordinal == 0:
            start = 0
            (end,) = np.frombuffer(os.pread(self._ends.fileno(), 8, 0), dtype=np.uint64)
        else:
            raw = os.pread(self._ends.fileno(), 16, (ordinal - 1) * 8)
            start, end = np.frombuffer(raw, dtype=np.uint64).tolist()
        return os.pread(self._keys.fileno(), int(end) - int(start), int(start))

    def _remember(self, texts: list[str], hashes: np.ndarray) -> None:
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
        ordinals = np.arange(self._count, self._count + n, dtype=np.uint32)
        self._count += n
        order = np.argsort(hashes, kind="stable")
        self._levels.append(_Level(hashes[order], ordinals[order]))
        self._merge_levels()

    def _merge_levels(self) -> None:
        """Merge the newest levels while the older one is not larger (binary-counter style);
        a level over half of :data:`MAX_LEVEL` is never merged again: its ordinals spill."""
        levels = self._levels
        while (
            len(levels) > 1
            and levels[-2].ordinals is not None
            and levels[-1].ordinals is not None
            and levels[-2].hashes.size <= levels[-1].hashes.size
            and levels[-2].hashes.size + levels[-1].hashes.size <= MAX_LEVEL
        ):
            older, newer = levels[-2], levels[-1]
            assert older.ordinals is not None
            assert newer.ordinals is not None
            hashes = np.concatenate((older.hashes, newer.hashes))
            order = np.argsort(hashes, kind="stable")  # two sorted runs: merged in one pass
            ordinals = np.concatenate((older.ordinals, newer.ordinals))[order]
            levels[-2:] = [_Level(hashes[order], ordinals)]
            del hashes, order, ordinals, older, newer
        last = levels[-1]
        if last.ordinals is not None and 2 * last.hashes.size > MAX_LEVEL:
            # Never merged again (see above): its ordinals go to disk, 4 bytes per key stay.
            os.pwrite(self._ords.fileno(), last.ordinals.tobytes(), self._ords_bytes)
            last.offset = self._ords_bytes
            self._ords_bytes += last.ordinals.nbytes
            last.ordinals = None
