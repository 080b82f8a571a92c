"""Cheap deterministic hashing and reversible id encodings.

Records are derived from ``(seed, date, index)`` on demand, so every per-record choice comes
from integer mixing (no ``random.Random`` per record) and every id encodes where its record
lives, which makes lookups by id O(1).
"""

from __future__ import annotations

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xD6E8FEB86659FD93
_C1_INV = pow(_C1, -1, 1 << 64)
_C2 = 0xBF58476D1CE4E5B9
#: Bits of the record index inside an id (records per day < 2**27).
INDEX_BITS = 27
MAX_PER_DAY = (1 << INDEX_BITS) - 1


def mix(x: int) -> int:
    """splitmix64 finaliser: a well-spread 64-bit hash of a 64-bit integer."""
    x &= M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def derive(seed: int, label: str) -> int:
    """A 64-bit key for one purpose (``label``) of one world seed."""
    h = seed & M64
    for ch in label.encode():
        h = mix(h ^ ch)
    return mix(h ^ GOLDEN)


class IdCodec:
    """Reversible 32-hex-char ids: ``value`` (day ordinal and index) <-> string.

    The second half is a keyed check of the first, so an id of another seed, region or kind
    does not decode.

    :param key1: scrambling key.
    :param key2: check key.
    """

    __slots__ = ("k1", "k2")

    def __init__(self, key1: int, key2: int) -> None:
        self.k1 = key1
        self.k2 = key2

    def encode(self, value: int) -> str:
        hi = ((value ^ self.k1) * _C1) & M64
        lo = ((hi ^ self.k2) * _C2) & M64
        return f"{hi:016x}{lo:016x}"

    def decode(self, text: object) -> int | None:
        """The encoded value, or ``None`` when ``text`` is not an id of this codec."""
        if not isinstance(text, str) or len(text) != 32:
            return None
        try:
            hi = int(text[:16], 16)
            lo = int(text[16:], 16)
        except ValueError:
            return None
        if lo != ((hi ^ self.k2) * _C2) & M64 or text != text.lower():
            return None
        return ((hi * _C1_INV) & M64) ^ self.k1


_B36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ENC_MASK = (1 << 40) - 1
_ENC_MUL = 0x5DEECE66D | 1
_ENC_INV = pow(_ENC_MUL, -1, 1 << 40)
MAX_ENCODABLE = _ENC_MASK


def encode_tracking_id(value: int, key: int) -> str:
    """Encode a positive integer id as the base-36 string used in tracking links (a bijection)."""
    x = ((value * _ENC_MUL) & _ENC_MASK) ^ (key & _ENC_MASK)
    out = []
    while True:
        x, r = divmod(x, 36)
        out.append(_B36[r])
        if not x:
            break
    return "".join(reversed(out)).rjust(5, "0")


def decode_tracking_id(text: str, key: int) -> int:
    """Inverse of :func:`encode_tracking_id`."""
    x = int(text, 36)
    return ((x ^ (key & _ENC_MASK)) * _ENC_INV) & _ENC_MASK
