"""Deterministic, on-demand generator of conversion and event records.

Nothing of a day is stored: record ``i`` of UTC day ``d`` is a pure function of
``(seed, d, i, config)`` plus the small write overlay (:mod:`.state`). Timestamps are monotonic
in the index, so a timezone window maps to an index range per day by binary search, and page
``k`` costs O(page_size). Every per-record choice comes from integer mixing of one 64-bit hash.

Per-record cost is kept low by precomputing, per (offer, affiliate) pair, a template of the
top-level fields and of the shared ``relationship`` members; a record is a dict copy of the
template plus about twenty assignments.
"""

from __future__ import annotations

import bisect
import datetime as dt
import zoneinfo
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, cast

import orjson

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.config import DataConfig
from affiliate_network_sandbox.entities import (
    CAMPAIGN_BASE,
    POSTBACK_CONTROL_BASE,
    TIER_BASE,
    Catalog,
)
from affiliate_network_sandbox.ids import _C1, _C2, GOLDEN, INDEX_BITS, M64, IdCodec, derive, mix
from affiliate_network_sandbox.money import from_usd, json_amount, minor_digits, quantum
from affiliate_network_sandbox.state import State

KIND_CONVERSION = 0
KIND_EVENT = 1
DAY = 86400
#: Events happen this many seconds after their conversion (constant keeps them monotonic).
EVENT_DELAY_S = 300
#: Duplicate-IP groups: one candidate group per block of this many conversions.
DUP_BLOCK = 50
DUP_OFFSETS = (0, 7, 19, 29)
#: Blocks of DUP_BLOCK conversions holding a duplicate-IP group, per unit of ``on_hold_share``
#: (0.1 on hold: one block in ten, 0.7 % of conversions).
DUP_BLOCKS_PER_ON_HOLD = 1.0
#: Of an ordinary on-hold conversion's 256 pattern slots (``u >> 56``), each planted pattern
#: takes this many: fast_click, blocklisted_sub, outlier_sale_amount, ip_mismatch in order
#: (1/16 each); the rest (3/4) are clean. With the duplicate-IP groups, a default world's
#: on-hold traffic is about 19 % clear fraud, 12 % doubtful and 70 % clean, every day: the
#: provider's shipped rules and default guardrails decide it with room to spare (the
#: repository's tests/review/test_default_world_any_day.py sweeps two years of end dates).
PATTERN_SLOTS = 16

# Negative-amount kinds of a base conversion (0 = an ordinary one; choices.REVERSAL_NOTES).
R_NONE, R_REVERSAL, R_ADJUSTMENT = range(3)
REVERSAL_NAMES = {R_REVERSAL: "reversal", R_ADJUSTMENT: "adjustment"}
#: Of a planted reversal's or adjustment's 256 slots (``u >> 56``), those held for review
#: besides the on-hold draw (64: a quarter, so every currency has some on hold every day).
REVERSAL_HELD_SLOTS = 64

# Pattern codes (0 = none).
P_NONE, P_DUP, P_FAST, P_BLK, P_OUTLIER, P_MISMATCH = range(6)
PATTERN_NAMES = {
    P_DUP: "duplicate_ip",
    P_FAST: "fast_click",
    P_BLK: "blocklisted_sub",
    P_OUTLIER: "outlier_sale_amount",
    P_MISMATCH: "ip_mismatch",
}

# country, region, city, dma, isp, language, carrier
_GEOS = [
    ("US", "California", "Los Angeles", 803, "Comcast Cable", "en", "Verizon"),
    ("US", "New York", "New York", 501, "Spectrum", "en", "AT&T"),
    ("US", "Texas", "Houston", 618, "AT&T Internet", "en", "T-Mobile"),
    ("US", "Illinois", "Chicago", 602, "Comcast Cable", "en", "Verizon"),
    ("US", "Florida", "Miami", 528, "Hotwire", "en", "AT&T"),
    ("US", "Washington", "Seattle", 819, "CenturyLink", "en", "T-Mobile"),
    ("CA", "Ontario", "Toronto", 0, "Rogers", "en", "Rogers"),
    ("CA", "Quebec", "Montreal", 0, "Videotron", "fr", "Bell"),
    ("GB", "England", "London", 0, "BT", "en", "EE"),
    ("GB", "England", "Manchester", 0, "Virgin Media", "en", "O2"),
    ("DE", "Berlin", "Berlin", 0, "Deutsche Telekom", "de", "Telekom"),
    ("DE", "Bavaria", "Munich", 0, "Vodafone", "de", "Vodafone"),
    ("FR", "Ile-de-France", "Paris", 0, "Orange", "fr", "Orange"),
    ("ES", "Madrid", "Madrid", 0, "Movistar", "es", "Movistar"),
    ("IT", "Lazio", "Rome", 0, "TIM", "it", "TIM"),
    ("NL", "North Holland", "Amsterdam", 0, "KPN", "nl", "KPN"),
    ("AU", "New South Wales", "Sydney", 0, "Telstra", "en", "Telstra"),
    ("JP", "Tokyo", "Tokyo", 0, "NTT", "ja", "Docomo"),
    ("BR", "Sao Paulo", "Sao Paulo", 0, "Vivo", "pt", "Vivo"),
    ("MX", "CDMX", "Mexico City", 0, "Telmex", "es", "Telcel"),
]
GEO_FRAGS: list[dict[str, Any]] = [
    {
        "country": c,
        "region": r,
        "city": city,
        "dma": dma,
        "isp": isp,
        "language": lang,
        "carrier": carrier,
    }
    for c, r, city, dma, isp, lang, carrier in _GEOS
]

# platform, os_version, device_type, brand, device_model, browser, user agent
_DEVICES = [
    (
        "iOS",
        "17.4",
        "Mobile",
        "Apple",
        "iPhone",
        "Safari",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",  # noqa: E501
    ),
    (
        "iOS",
        "16.6",
        "Tablet",
        "Apple",
        "iPad",
        "Safari",
        "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1",  # noqa: E501
    ),
    (
        "Android",
        "14",
        "Mobile",
        "Samsung",
        "SM-S918B",
        "Chrome Mobile",
        "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",  # noqa: E501
    ),
    (
        "Android",
        "13",
        "Mobile",
        "Google",
        "Pixel 7",
        "Chrome Mobile",
        "Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Mobile Safari/537.36",  # noqa: E501
    ),
    (
        "Android",
        "12",
        "Mobile",
        "Xiaomi",
        "Redmi Note 11",
        "Chrome Mobile",
        "Mozilla/5.0 (Linux; Android 12; Redmi Note 11) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",  # noqa: E501
    ),
    (
        "Windows",
        "10",
        "PC",
        "Microsoft",
        "Desktop",
        "Chrome",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",  # noqa: E501
    ),
    (
        "Windows",
        "11",
        "PC",
        "Microsoft",
        "Desktop",
        "Edge",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.0.0",  # noqa: E501
    ),
    (
        "Mac OS",
        "14.4",
        "PC",
        "Apple",
        "Macintosh",
        "Safari",
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",  # noqa: E501
    ),
    (
        "Mac OS",
        "13.6",
        "PC",
        "Apple",
        "Macintosh",
        "Chrome",
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 13_6) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Safari/537.36",  # noqa: E501
    ),
    (
        "Linux",
        "6.5",
        "PC",
        "Unknown",
        "Desktop",
        "Firefox",
        "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    ),
]
DEV_FRAGS: list[dict[str, Any]] = [
    {
        "platform": p,
        "os_version": v,
        "device_type": t,
        "brand": b,
        "device_model": m,
        "browser": br,
        "http_user_agent": ua,
    }
    for p, v, t, b, m, br, ua in _DEVICES
]
GEO_JSON = [orjson.dumps(g).decode()[1:-1] for g in GEO_FRAGS]
DEV_JSON = [orjson.dumps(d).decode()[1:-1] for d in DEV_FRAGS]
#: Per-record top-level keys, first in every record (geo and device fields follow).
RECORD_KEYS = (
    "conversion_id",
    "transaction_id",
    "status",
    "is_event",
    "event",
    "conversion_unix_timestamp",
    "click_unix_timestamp",
    "conversion_user_ip",
    "session_user_ip",
)
#: Per-record keys that follow the geo and device fields.
RECORD_TAIL_KEYS = (
    "sub1",
    "sub2",
    "sub3",
    "order_id",
    "payout",
    "revenue",
    "sale_amount",
    "currency_id",
    "network_offer_payout_revenue_id",
)
#: Per-record relationship keys, last in every relationship.
REL_KEYS = (
    "adv_global_event",
    "candidate_clicks",
    "events_count",
    "on_hold_snapshots",
    "snapshots",
    "unix_timestamp_postback",
)


def _in_duplicate_burst(c: DayCtx, i: int) -> bool:
    """Whether conversion ``i`` is one of the 3 or 4 rows of a duplicate-IP burst in its block."""
    b = i // DUP_BLOCK
    if (b + 1) * DUP_BLOCK > c.n:
        return False
    bh = mix(c.bkey ^ b)
    if (bh & 0xFFFF) >= c.dup_thr:
        return False
    d = i - b * DUP_BLOCK - (bh >> 16) % (DUP_BLOCK - 30)
    return d in (0, 7, 19) or (d == 29 and bool((bh >> 32) & 1))


class PairT:
    """Precomputed template of one (offer, affiliate) pair: dicts and JSON chunks."""

    __slots__ = (
        "adj_payout",
        "adj_revenue",
        "adv_id",
        "age",
        "age_ev",
        "age_ev_j",
        "age_j",
        "base_sale",
        "cand_j",
        "cand_rel",
        "cdig",
        "cur",
        "ev_name",
        "ev_payout",
        "ev_prid",
        "ev_revenue",
        "fid",
        "group_id",
        "oid",
        "payout",
        "prid",
        "rel",
        "rel_j",
        "revenue",
        "sub1s",
        "top",
        "top_j",
    )

    oid: int
    fid: int
    adv_id: int
    group_id: int
    #: The offer's currency and the digits of its minor unit (amounts below are in it).
    cur: str
    cdig: int
    payout: float | int
    revenue: float | int
    prid: int
    base_sale: float | int
    ev_name: str
    ev_prid: int
    ev_payout: float | int
    ev_revenue: float | int
    #: A planted adjustment's amounts (negative; choices.ADJUSTMENT_FRACTION of the couple's).
    adj_payout: float | int
    adj_revenue: float | int
    sub1s: tuple[str, ...]
    #: Dict templates (record top level, relationship, advertiser global event, candidates).
    top: dict[str, Any]
    rel: dict[str, Any]
    age: dict[str, Any]
    age_ev: dict[str, Any]
    cand_rel: dict[str, Any]
    #: The same static parts as JSON chunks.
    top_j: str
    rel_j: str
    age_j: str
    age_ev_j: str
    cand_j: str


# First octets of ordinary (unique within a day) IPs. 185.x.x.x is reserved for planted
# duplicate-IP groups, so the two never collide.
_FIRST_OCTETS = (24, 47, 50, 66, 68, 71, 73, 76, 77, 81, 82, 86, 88, 90, 92, 98, 104, 108, 174, 203)
_SOURCES = ("fb", "gg", "tt", "nat", "em", "push")
_CREATIVES = tuple(f"cr-{k:02d}" for k in range(40))
_SUB2_SPACE = 200_000


class DayCtx:
    """Per-(world, UTC day) constants used by the hot path."""

    __slots__ = (
        "bkey",
        "del_r",
        "dkey",
        "dup_thr",
        "e",
        "iokey",
        "late_r",
        "lkey",
        "n",
        "oh_thr",
        "ord",
        "rev_r",
        "start",
        "vbase",
        "xkey",
    )

    def __init__(self, gen: Generator, ordinal: int) -> None:
        cfg = gen.cfg
        self.ord = ordinal
        day = dt.date.fromordinal(ordinal)
        self.start = int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp())
        in_window = gen.first_ord <= ordinal <= gen.last_ord
        self.n = cfg.conversions_per_day if in_window else 0
        self.e = round(self.n * cfg.event_share) if in_window else 0
        self.dkey = derive(gen.seed, f"day:{ordinal}")
        self.bkey = derive(gen.seed, f"dup:{ordinal}")
        self.iokey = self.dkey & 0xFFFFFF
        # Duplicate-IP groups scale with the on-hold share (fraud is what gets held); their
        # members (3.5 per selected block of DUP_BLOCK on average) count toward the share.
        dup_share = min(0.5, cfg.on_hold_share * DUP_BLOCKS_PER_ON_HOLD)
        self.dup_thr = int(dup_share * 65536)
        ordinary = max(0.0, cfg.on_hold_share - dup_share * 3.5 / DUP_BLOCK)
        self.oh_thr = int(ordinary * 65536)
        self.vbase = ordinal << INDEX_BITS
        # Late and deleted conversions: every k-th index from a per-day offset (enumerable in
        # O(range / k), no scan of the day).
        self.lkey = derive(gen.seed, f"late:{ordinal}")
        self.xkey = derive(gen.seed, f"del:{ordinal}")
        self.late_r = self.lkey % gen.late_every if gen.late_every else 0
        self.del_r = self.xkey % gen.del_every if gen.del_every else 0
        # Reversals and adjustments: every k-th index from a per-day offset, like the above.
        self.rev_r = derive(gen.seed, f"rev:{ordinal}") % gen.rev_every if gen.rev_every else 0


class Segment:
    """A contiguous index range ``[lo, hi)`` of one kind of record of one UTC day."""

    __slots__ = ("ctx", "hi", "kind", "lo")

    def __init__(self, kind: int, ctx: DayCtx, lo: int, hi: int) -> None:
        self.kind = kind
        self.ctx = ctx
        self.lo = lo
        self.hi = hi

    def __len__(self) -> int:
        return self.hi - self.lo


class Generator:
    """Builds the records of one world.

    :param cfg: data configuration.
    :param seed: world seed.
    :param catalog: the world's catalog.
    :param state: the world's write overlay (read when building records).
    :param visible_end: the sandbox clock's exclusive end of what has happened (records with a
        timestamp below it exist); None: no clock, every record of the config exists.
    """

    def __init__(
        self,
        cfg: DataConfig,
        seed: int,
        catalog: Catalog,
        state: State,
        visible_end: Callable[[], int] | None = None,
    ) -> None:
        self.cfg = cfg
        self.visible_end = visible_end or _no_clock
        self.seed = seed
        self.catalog = catalog
        self.state = state
        self.nid = catalog.network_id
        self.first_ord = cfg.first_date.toordinal()
        self.last_ord = cfg.end_date.toordinal()
        self.conv_ids = IdCodec(derive(seed, "cid1"), derive(seed, "cid2"))
        self.event_ids = IdCodec(derive(seed, "eid1"), derive(seed, "eid2"))
        self.txn_ids = IdCodec(derive(seed, "tid1"), derive(seed, "tid2"))
        self.onhold_ids = IdCodec(derive(seed, "oid1"), derive(seed, "oid2"))
        self.offer_ids = list(catalog.offer_info)
        self.aff_ids = list(catalog.affiliates)
        self.n_aff = len(self.aff_ids)
        self.pairs = len(self.offer_ids) * self.n_aff
        self.late_every = round(1 / cfg.late_share) if cfg.late_share > 0 else 0
        self.del_every = round(1 / cfg.deletion_share) if cfg.deletion_share > 0 else 0
        self.rev_every = round(1 / cfg.reversal_share) if cfg.reversal_share > 0 else 0
        self._days: dict[int, DayCtx] = {}
        self._pairs: dict[int, PairT] = {}
        self._seg_cache: dict[tuple[int, int, int, bool, bool], list[Segment]] = {}
        #: Nested template objects shared by the couples of one offer or one affiliate (never
        #: mutated: records copy the top level only).
        self._intern: dict[tuple[str, int], dict[str, Any]] = {}
        #: Work counters (exposed by ``GET /_sandbox/stats``; tests assert on them).
        self.records_built = 0
        self.cores_computed = 0

    # --- days and windows -----------------------------------------------------------------------

    def day(self, ordinal: int) -> DayCtx:
        ctx = self._days.get(ordinal)
        if ctx is None:
            if len(self._days) > 4096:
                self._days.clear()
            ctx = self._days[ordinal] = DayCtx(self, ordinal)
        return ctx

    def conv_ts(self, c: DayCtx, i: int) -> int:
        self.cores_computed += 1
        u = mix(c.dkey + i * GOLDEN)
        return c.start + (i * DAY + u % DAY) // c.n

    def event_parent(self, c: DayCtx, j: int) -> int:
        return (j * c.n) // c.e

    def event_ts(self, c: DayCtx, j: int) -> int:
        return self.conv_ts(c, (j * c.n) // c.e) + EVENT_DELAY_S

    def _first_at_or_after(self, fn: Any, c: DayCtx, n: int, t: int) -> int:
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if fn(c, mid) < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def segments(
        self, t0: int, t1: int, *, conversions: bool = True, events: bool = False
    ) -> list[Segment]:
        """Index ranges of the records with timestamps in ``[t0, t1)``, in report order.

        Records later than the sandbox's clock do not exist yet: ``t1`` stops at the clock.
        """
        ve = self.visible_end()
        t1 = min(t1, ve)
        if not self.changes_with_clock:
            return self._segments(t0, t1, ve, conversions, events)
        # With late and deleted records a window is split around its holes (thousands a day at
        # a million conversions a day): every page of a pull asks the same split again.
        key = (t0, t1, ve, conversions, events)
        hit = self._seg_cache.get(key)
        if hit is None:
            hit = self._seg_cache[key] = self._segments(t0, t1, ve, conversions, events)
            while len(self._seg_cache) > 8:
                del self._seg_cache[next(iter(self._seg_cache))]
        return list(hit)

    def _segments(
        self, t0: int, t1: int, ve: int, conversions: bool, events: bool
    ) -> list[Segment]:
        out: list[Segment] = []
        if t1 <= t0:
            return out
        first = max(self.first_ord, dt.datetime.fromtimestamp(t0 - DAY, dt.UTC).date().toordinal())
        last = min(self.last_ord, dt.datetime.fromtimestamp(t1, dt.UTC).date().toordinal())
        if conversions:
            for o in range(first, last + 1):
                c = self.day(o)
                if c.n == 0 or c.start >= t1 or c.start + DAY <= t0:
                    continue
                lo = 0 if t0 <= c.start else self._first_at_or_after(self.conv_ts, c, c.n, t0)
                hi = (
                    c.n
                    if t1 >= c.start + DAY
                    else self._first_at_or_after(self.conv_ts, c, c.n, t1)
                )
                if hi > lo:
                    out.extend(self._split(KIND_CONVERSION, c, lo, hi, ve))
        if events:
            for o in range(first, last + 1):
                c = self.day(o)
                if c.e == 0:
                    continue
                s0, s1 = c.start + EVENT_DELAY_S, c.start + DAY + EVENT_DELAY_S
                if s0 >= t1 or s1 <= t0:
                    continue
                lo = 0 if t0 <= s0 else self._first_at_or_after(self.event_ts, c, c.e, t0)
                hi = c.e if t1 >= s1 else self._first_at_or_after(self.event_ts, c, c.e, t1)
                if hi > lo:
                    out.extend(self._split(KIND_EVENT, c, lo, hi, ve))
        return out

    # --- late and deleted records ---------------------------------------------------------------

    @property
    def changes_with_clock(self) -> bool:
        """Whether records of a past window appear (late) or vanish (deleted) as the clock runs:
        then caches of a window must key on the clock too."""
        return bool(self.late_every or self.del_every)

    def late_delay(self, c: DayCtx, i: int) -> int:
        """Seconds between conversion ``i``'s timestamp and its recording (0: on time)."""
        k = self.late_every
        if not k or (i - c.late_r) % k:
            return 0
        return 3601 + mix(c.lkey ^ i) % (self.cfg.late_max_s - 3600)

    def deleted_at(self, c: DayCtx, i: int, ts: int | None = None) -> int | None:
        """When conversion ``i`` (and its event) is deleted: after its recording; None: never."""
        k = self.del_every
        if not k or (i - c.del_r) % k:
            return None
        if ts is None:
            ts = self.conv_ts(c, i)
        after = 3600 + mix(c.xkey ^ i) % (self.cfg.deletion_max_s - 3599)
        return ts + self.late_delay(c, i) + after

    def conv_hidden(self, c: DayCtx, i: int, ve: int, ts: int | None = None) -> bool:
        """Whether conversion ``i`` (timestamp before ``ve``) is not served at clock end ``ve``:
        recorded at or after it (late), or deleted before it."""
        if not (self.late_every or self.del_every):
            return False
        if ts is None:
            ts = self.conv_ts(c, i)
        delay = self.late_delay(c, i)
        if delay and ts + delay >= ve:
            return True
        gone = self.deleted_at(c, i, ts)
        return gone is not None and gone < ve

    def event_hidden(self, c: DayCtx, j: int, ve: int) -> bool:
        """Whether event ``j`` is not served: its conversion is recorded late (the event with
        it, the same delay after its own timestamp) or deleted (the event with it)."""
        if not (self.late_every or self.del_every):
            return False
        i = self.event_parent(c, j)
        ts = self.conv_ts(c, i)
        delay = self.late_delay(c, i)
        if delay and ts + EVENT_DELAY_S + delay >= ve:
            return True
        gone = self.deleted_at(c, i, ts)
        return gone is not None and gone < ve

    def _hidden_parents(self, c: DayCtx, lo: int, hi: int, ve: int, lag: int) -> list[int]:
        """Conversions ``lo <= i < hi`` hidden at ``ve`` (``lag``: 0 for the conversion itself,
        EVENT_DELAY_S for its event, which is recorded that much later)."""
        out: set[int] = set()
        k = self.late_every
        if k:
            max_s = self.cfg.late_max_s
            # Only conversions within late_max_s of the clock can still be unrecorded.
            if c.start + DAY + lag + max_s >= ve:
                start = lo
                if ve - lag - max_s > c.start:
                    start = max(lo, self._first_at_or_after(self.conv_ts, c, c.n, ve - lag - max_s))
                first = start + (c.late_r - start) % k
                for i in range(first, hi, k):
                    if self.conv_ts(c, i) + lag + self.late_delay(c, i) >= ve:
                        out.add(i)
        k = self.del_every
        if k:
            first = lo + (c.del_r - lo) % k
            if c.start + DAY + self.cfg.late_max_s + self.cfg.deletion_max_s < ve:
                out.update(range(first, hi, k))  # the whole day's deletions are done
            else:
                for i in range(first, hi, k):
                    gone = self.deleted_at(c, i)
                    if gone is not None and gone < ve:
                        out.add(i)
        return sorted(out)

    def _split(self, kind: int, c: DayCtx, lo: int, hi: int, ve: int) -> list[Segment]:
        """``[lo, hi)`` of one day as segments without the records hidden at ``ve``."""
        if not (self.late_every or self.del_every):
            return [Segment(kind, c, lo, hi)]
        if kind == KIND_CONVERSION:
            holes = self._hidden_parents(c, lo, hi, ve, 0)
        else:
            p_lo, p_hi = self.event_parent(c, lo), self.event_parent(c, hi - 1) + 1
            holes = []
            for i in self._hidden_parents(c, p_lo, p_hi, ve, EVENT_DELAY_S):
                j = self.has_event(c, i)
                if j is not None and lo <= j < hi:
                    holes.append(j)
        out = []
        start = lo
        for h in holes:
            if h > start:
                out.append(Segment(kind, c, start, h))
            start = h + 1
        if hi > start:
            out.append(Segment(kind, c, start, hi))
        return out

    # --- the per-record core ---------------------------------------------------------------------

    def core(self, c: DayCtx, i: int) -> tuple[int, int, int, bool]:
        """``(hash, conversion timestamp, pattern, on_hold)`` of conversion ``i`` of a day."""
        self.cores_computed += 1
        u = mix(c.dkey + i * GOLDEN)
        ts = c.start + (i * DAY + u % DAY) // c.n
        if c.dup_thr and _in_duplicate_burst(c, i):
            return u, ts, P_DUP, True
        pattern = P_NONE
        oh = (u & 0xFFFF) < c.oh_thr
        if oh:
            # Among ordinary on-hold conversions, u >> 56 (0..255) picks the pattern:
            # PATTERN_SLOTS each for fast_click, blocklisted_sub, outlier_sale_amount and
            # ip_mismatch, in that order; the rest: none (a clean on-hold conversion).
            sel = u >> 56
            if sel < 4 * PATTERN_SLOTS:
                pattern = P_FAST + sel // PATTERN_SLOTS
        elif (
            self.rev_every
            and not (i - c.rev_r) % self.rev_every
            and (u >> 56) < REVERSAL_HELD_SLOTS
        ):
            oh = True  # a planted reversal or adjustment, held (reversal_of())
        return u, ts, pattern, oh

    def pattern_of(self, c: DayCtx, i: int) -> int:
        return self.core(c, i)[2]

    def reversal_of(self, c: DayCtx, i: int, pattern: int) -> int:
        """Whether conversion ``i`` (of planted ``pattern``) is a reversal, an adjustment or an
        ordinary conversion (``R_*``): every ``rev_every``-th index from the day's offset, a
        reversal and an adjustment in turn; never one with a planted pattern."""
        k = self.rev_every
        if not k or pattern != P_NONE:
            return R_NONE
        d = i - c.rev_r
        if d % k:
            return R_NONE
        return R_REVERSAL if (d // k) % 2 == 0 else R_ADJUSTMENT

    def has_event(self, c: DayCtx, i: int) -> int | None:
        """Index of the event attached to conversion ``i``, or ``None``."""
        if not c.e:
            return None
        j = (i * c.e + c.n - 1) // c.n
        if j < c.e and (j * c.n) // c.e == i:
            return j
        return None

    # --- templates -------------------------------------------------------------------------------

    def pair(self, p: int) -> PairT:
        t = self._pairs.get(p)
        if t is None:
            t = self._pairs[p] = self._build_pair(p)
        return t

    def _build_pair(self, p: int) -> PairT:
        cat = self.catalog
        nid = self.nid
        k, f = divmod(p, self.n_aff)
        oid = self.offer_ids[k]
        fid = self.aff_ids[f]
        info = cat.offer_info[oid]
        offer = cat.offers[oid]
        adv = cat.advertisers[info["advertiser_id"]]
        aff = cat.affiliates[fid]
        group = cat.offer_groups[info["group_id"]]
        emp = cat.employees
        url_ids = [u for u, d in cat.offer_urls.items() if d["network_offer_id"] == oid]
        url = cat.offer_urls[url_ids[f % len(url_ids)]]
        cpr = next(
            (
                s
                for s in cat.cpr_settings.values()
                if s["network_offer_id"] == oid
                and (s["is_apply_all_affiliates"] or fid in s["network_affiliate_ids"])
            ),
            None,
        )
        tiered = next(
            (
                t
                for t in cat.tiered.values()
                if oid in t["relationship"]["network_offer_ids"]
                and (
                    t["is_apply_all_affiliates"]
                    or fid in t["relationship"]["network_affiliate_ids"]
                )
            ),
            None,
        )
        t = PairT()
        t.oid = oid
        t.fid = fid
        t.adv_id = info["advertiser_id"]
        t.group_id = info["group_id"]
        t.cur = info["currency_id"]
        t.cdig = minor_digits(t.cur)
        t.payout = cpr["payout_amount"] if cpr else info["payout"]
        t.revenue = (
            cpr["revenue_amount"] if cpr and cpr["is_custom_revenue_enabled"] else info["revenue"]
        )
        t.prid = info["payout_revenue_id"]
        t.base_sale = info["base_sale"]
        t.ev_name = info["event_name"]
        t.ev_prid = info["event_payout_revenue_id"]
        t.ev_payout = info["event_payout"]
        t.ev_revenue = info["event_revenue"]
        t.adj_payout = _adjustment(t.payout, t.cur)
        t.adj_revenue = _adjustment(t.revenue, t.cur)
        aff_code = "".join(ch for ch in aff["name"].lower() if ch.isalnum())[:10]
        t.sub1s = tuple(f"{aff_code}-{s}" for s in _SOURCES)
        referer = f"https://www.{aff_code}.example/"
        static_top: dict[str, Any] = {
            **{f"adv{n}": "" for n in range(1, 11)},
            "android_id": "",
            "android_id_md5": "",
            "android_id_sha1": "",
            "app_id": "",
            "coupon_code": "",
            "email": "",
            "error_message": "",
            "google_ad_id": "",
            "google_ad_id_md5": "",
            "google_ad_id_sha1": "",
            "idfa": "",
            "idfa_md5": "",
            "idfa_sha1": "",
            "notes": "",
            "payout_type": "cpa",
            "referer": referer,
            "revenue_type": "rpa",
            "source_id": f"{aff_code}-{oid}",
            **{f"sub{n}": "" for n in range(4, 11)},
            "url": url["destination_url"].split("?")[0],
            "error_code": 0,
            "previous_network_offer_id": 0,
            "is_scrub": False,
            "is_view_through": False,
        }
        static_rel: dict[str, Any] = {
            "account_manager": emp[info["advertiser_id"] % len(emp)],
            "affiliate_manager": emp[fid % len(emp)],
            "advertiser": {
                "account_status": adv["account_status"],
                "name": adv["name"],
                "network_advertiser_id": adv["network_advertiser_id"],
                "network_id": nid,
            },
            "affiliate": {
                "account_status": aff["account_status"],
                "name": aff["name"],
                "network_affiliate_id": fid,
                "network_id": nid,
            },
            "affiliate_tier": {
                "name": ("Gold", "Silver", "Bronze")[f % 3],
                "network_affiliate_tier_id": TIER_BASE + f % 3,
                "network_id": nid,
                "status": "active",
            },
            "campaign": {
                "campaign_name": f"{aff['name']} / {offer['name']}",
                "campaign_status": "active",
                "network_campaign_id": CAMPAIGN_BASE + p,
                "network_id": nid,
            },
            "custom_payout_revenue": (
                {
                    "name": cpr["name"],
                    "network_custom_payout_revenue_setting_id": cpr[
                        "network_custom_payout_revenue_setting_id"
                    ],
                    "network_id": nid,
                }
                if cpr
                else None
            ),
            "line_items_custom_payout_revenue_settings": [],
            "offer": {
                "name": offer["name"],
                "network_id": nid,
                "network_offer_id": oid,
                "offer_status": offer["offer_status"],
            },
            "offer_group": {
                "name": group["name"],
                "network_advertiser_id": group["network_advertiser_id"],
                "network_id": nid,
                "network_offer_group_id": info["group_id"],
                "offer_count": len(group["network_offer_ids"]),
                "offer_group_status": group["offer_group_status"],
            },
            "offer_url": {
                "name": url["name"],
                "network_id": nid,
                "network_offer_id": oid,
                "network_offer_url_id": url["network_offer_url_id"],
            },
            "order_line_items": [],
            "postback_control": {
                "name": "Default",
                "network_id": nid,
                "network_postback_control_id": POSTBACK_CONTROL_BASE + 1,
            },
            "tiered_commission": (
                {
                    "name": tiered["name"],
                    "network_id": nid,
                    "network_tiered_commission_id": tiered["network_tiered_commission_id"],
                }
                if tiered
                else None
            ),
            "attribution_method": "cookie",
            "click_attribution_method": "last_touch",
            "conversion_referer": "",
            "redirect_url": url["destination_url"],
            "referer": referer,
            "is_enforce_caps": False,
            "usm_data": {},
            "query_parameters": {},
        }
        t.age = {
            "advertiser_id": adv["network_advertiser_id"],
            "entry_name": "Base",
            "network_advertiser_global_event_id": 0,
            "network_id": nid,
        }
        t.age_ev = {
            "advertiser_id": adv["network_advertiser_id"],
            "entry_name": info["event_name"],
            "network_advertiser_global_event_id": info["event_payout_revenue_id"],
            "network_id": nid,
        }
        # One shared copy of each nested object that couples of one offer or one affiliate have
        # in common (18,000 couples in the large world: a third of a template's memory).
        # Keyed by what each one depends on (cheap; the other members vary per couple).
        owner = {
            "advertiser": oid,
            "offer": oid,
            "offer_group": oid,
            "offer_url": url["network_offer_url_id"],
            "affiliate": fid,
            "affiliate_tier": fid,
        }
        for name, key in owner.items():
            static_rel[name] = self._intern.setdefault((name, key), static_rel[name])
        t.age = self._intern.setdefault(("age", oid), t.age)
        t.age_ev = self._intern.setdefault(("age_ev", oid), t.age_ev)
        t.cand_rel = self._intern.setdefault(("cand", fid), {"affiliate": static_rel["affiliate"]})
        # Dict templates: per-record keys first (placeholders), in the same order as the JSON.
        t.top = dict.fromkeys(RECORD_KEYS)
        t.top.update(GEO_FRAGS[0])
        t.top.update(DEV_FRAGS[0])
        t.top.update(dict.fromkeys(RECORD_TAIL_KEYS))
        t.top.update(static_top)
        t.top["relationship"] = None
        t.rel = dict(static_rel)
        t.rel.update(dict.fromkeys(REL_KEYS))
        # JSON chunks of the static parts (escaped once by orjson).
        t.top_j = orjson.dumps(static_top).decode()[1:-1]
        t.rel_j = orjson.dumps(static_rel).decode()[1:-1]
        t.age_j = orjson.dumps(t.age).decode()
        t.age_ev_j = orjson.dumps(t.age_ev).decode()
        t.cand_j = orjson.dumps(t.cand_rel).decode()
        return t

    # --- building records ------------------------------------------------------------------------

    def record_dict(self, kind: int, c: DayCtx, idx: int) -> dict[str, Any]:
        """Conversion or event ``idx`` of a day as a dict (filters, aggregation, flowchart).

        Amounts are in the offer's currency (``currency_id``), at its minor unit.
        """
        return cast("dict[str, Any]", self._record(kind, c, idx, False))

    def record_json(self, kind: int, c: DayCtx, idx: int) -> str:
        """The same record as :meth:`record_dict`, formatted straight to JSON text (hot path)."""
        return cast(str, self._record(kind, c, idx, True))

    def _record(self, kind: int, c: DayCtx, idx: int, as_json: bool) -> dict[str, Any] | str:
        """Conversion or event ``idx`` of a day (writes applied), as a dict or as JSON text.

        One computation of the values, then the two forms side by side: they cannot drift
        apart (a unit test keeps them equal, key order included). The JSON text is formatted
        directly (no dict built, then dumped): it is the page hot path.
        """
        i = idx if kind == KIND_CONVERSION else (idx * c.n) // c.e
        # Hot path: core(), mix() and IdCodec.encode() inlined (same arithmetic; the tests
        # compare these records with core()-based truth, filters and lookups).
        self.cores_computed += 1
        x = (c.dkey + i * GOLDEN) & M64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
        u = x ^ (x >> 31)
        ts = c.start + (i * DAY + u % DAY) // c.n
        pattern = P_NONE
        oh = False
        if c.dup_thr and _in_duplicate_burst(c, i):
            pattern, oh = P_DUP, True
        if not oh and (u & 0xFFFF) < c.oh_thr:
            oh = True
            sel = u >> 56
            if sel < 4 * PATTERN_SLOTS:
                pattern = P_FAST + sel // PATTERN_SLOTS
        elif (
            not oh
            and self.rev_every
            and not (i - c.rev_r) % self.rev_every
            and (u >> 56) < REVERSAL_HELD_SLOTS
        ):
            oh = True  # a planted reversal or adjustment, held (as in core())
        p = (u >> 16) % self.pairs
        t = self._pairs.get(p) or self.pair(p)
        x = u ^ 0x5851F42D4C957F2D
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
        u2 = x ^ (x >> 31)
        vc = c.vbase | i
        codec = self.txn_ids
        hi = ((vc ^ codec.k1) * _C1) & M64
        tid = f"{hi:016x}{((hi ^ codec.k2) * _C2) & M64:016x}"
        fo = (u2 >> 40) % 20
        if pattern == P_DUP:
            b = i // DUP_BLOCK
            ip = f"185.{100 + c.ord % 50}.{(b >> 8) & 255}.{b & 255}"
            sess = ip
        else:
            p24 = ((i * 0x9E3779) & 0xFFFFFF) ^ c.iokey
            ip = f"{_FIRST_OCTETS[fo]}.{p24 >> 16}.{(p24 >> 8) & 255}.{p24 & 255}"
            if pattern == P_MISMATCH:
                q = ((i * 0x6A09E7) & 0xFFFFFF) ^ (c.iokey >> 1)
                sess = f"{_FIRST_OCTETS[(fo + 7) % 20]}.{q >> 16}.{(q >> 8) & 255}.{q & 255}"
            else:
                sess = ip
        click_ts = ts - (1 + u2 % 9 if pattern == P_FAST else 60 + u2 % DAY)
        sub1 = choices.BLOCKLISTED_SUB1[u2 % 6] if pattern == P_BLK else t.sub1s[(u2 >> 8) % 6]
        sub2 = f"s2-{(u2 >> 12) % _SUB2_SPACE:06d}"
        sub3 = _CREATIVES[(u2 >> 36) % 40]
        st = self.state
        notes = ""
        # None: no snapshots; True: only the initial one (built at the end); else the list.
        onhold_snaps: list[dict[str, Any]] | bool | None = None
        snaps = None
        if kind == KIND_CONVERSION:
            v = vc
            codec = self.conv_ids
            hi = ((v ^ codec.k1) * _C1) & M64
            cid = f"{hi:016x}{((hi ^ codec.k2) * _C2) & M64:016x}"
            if pattern == P_OUTLIER:
                # Rounded: the float sum printed 16-17 digits (11397.189999999999), an amount
                # no network sends and that the landing refuses (more than 6 decimals).
                sale = round(5000.0 + ((u2 >> 20) % 1_500_000) / 100, 2)
                if t.cur != "USD":
                    sale = from_usd(sale, t.cur)
            else:
                sale = round(t.base_sale * (500 + (u2 >> 20) % 1000) / 1000, t.cdig)
                if not t.cdig:
                    sale = int(sale)
            order_id = f"ORD-{c.ord % 100000:05d}-{i:07d}"
            payout, revenue, prid = t.payout, t.revenue, t.prid
            if self.rev_every and pattern == P_NONE and not (i - c.rev_r) % self.rev_every:
                # A planted reversal or adjustment (reversal_of(), inlined; choices.py).
                if ((i - c.rev_r) // self.rev_every) % 2 == 0:
                    payout, revenue, sale = 0 - payout, 0 - revenue, 0 - sale
                    notes = choices.REVERSAL_NOTES
                else:
                    payout, revenue = t.adj_payout, t.adj_revenue
                    sale = 0.0 if t.cdig else 0
                    notes = choices.ADJUSTMENT_NOTES
            ev_count = 0
            if c.e:  # inline has_event(): is there a j with (j * n) // e == i?
                j = (i * c.e + c.n - 1) // c.n
                ev_count = 1 if j < c.e and (j * c.n) // c.e == i else 0
            if oh:
                status = choices.STATUS_PENDING
                utp = 0
                extra = st.onhold.get(v) if st.onhold else None
                if extra:
                    onhold_snaps = [self._base_snapshot(c, v, ts), *extra]
                    status = extra[-1]["status"]
                    utp = extra[-1]["unix_timestamp"]
                else:
                    onhold_snaps = True  # the single initial snapshot
            else:
                status = choices.STATUS_APPROVED
                utp = ts + 1
            ev_name = ""
        else:
            v = c.vbase | idx
            cid = self.event_ids.encode(v)
            ts += EVENT_DELAY_S
            sale = 0.0 if t.cdig else 0
            order_id = ""
            payout, revenue, prid = t.ev_payout, t.ev_revenue, t.ev_prid
            ev_count = 0
            status = choices.STATUS_APPROVED
            utp = ts + 1
            ev_name = t.ev_name
        if st.sale:
            fix = st.sale.get((kind, v))
            if fix:
                sale = fix[-1]["sale_amount"]
                snaps = fix
        geo, dev = (u >> 32) % 20, (u >> 40) % 10
        if as_json:
            if onhold_snaps is None:
                ohs = "[]"
            elif onhold_snaps is True:
                ohs = (
                    f'[{{"initiator":"{choices.SNAPSHOT_INITIATOR}","network_employee":"",'
                    f'"network_id":{self.nid},"on_hold_conversion_history_snapshot_id":{v * 8},'
                    f'"on_hold_conversion_id":"{self.onhold_ids.encode(v)}",'
                    f'"snapshot_type":"status","status":"on_hold","unix_timestamp":{ts}}}]'
                )
            else:
                ohs = orjson.dumps(onhold_snaps).decode()
            sn = orjson.dumps(snaps).decode() if snaps else "[]"
            if kind == KIND_EVENT:
                isev, age = "true", t.age_ev_j
            else:
                isev, age = "false", t.age_j
            top_j = t.top_j
            if notes:  # a planted reversal or adjustment (rare: the template's text, edited)
                top_j = top_j.replace('"notes":""', f'"notes":"{notes}"', 1)
            return (
                f'{{"conversion_id":"{cid}","transaction_id":"{tid}","status":"{status}",'
                f'"is_event":{isev},"event":"{ev_name}","conversion_unix_timestamp":{ts},'
                f'"click_unix_timestamp":{click_ts},"conversion_user_ip":"{ip}",'
                f'"session_user_ip":"{sess}",{GEO_JSON[geo]},{DEV_JSON[dev]},"sub1":"{sub1}",'
                f'"sub2":"{sub2}","sub3":"{sub3}","order_id":"{order_id}","payout":{payout!r},'
                f'"revenue":{revenue!r},"sale_amount":{sale!r},"currency_id":"{t.cur}",'
                f'"network_offer_payout_revenue_id":{prid},{top_j},"relationship":{{{t.rel_j},'
                f'"adv_global_event":{age},"candidate_clicks":[{{"relationship":{t.cand_j},'
                f'"transaction_id":"{tid}","unix_timestamp":{click_ts}}}],'
                f'"events_count":{ev_count},"on_hold_snapshots":{ohs},"snapshots":{sn},'
                f'"unix_timestamp_postback":{utp}}}}}'
            )
        rec: dict[str, Any] = t.top.copy()
        rec["conversion_id"] = cid
        rec["transaction_id"] = tid
        rec["status"] = status
        rec["is_event"] = kind == KIND_EVENT
        rec["event"] = ev_name
        rec["conversion_unix_timestamp"] = ts
        rec["click_unix_timestamp"] = click_ts
        rec["conversion_user_ip"] = ip
        rec["session_user_ip"] = sess
        rec.update(GEO_FRAGS[geo])
        rec.update(DEV_FRAGS[dev])
        rec["sub1"] = sub1
        rec["sub2"] = sub2
        rec["sub3"] = sub3
        rec["order_id"] = order_id
        rec["payout"] = payout
        rec["revenue"] = revenue
        rec["sale_amount"] = sale
        rec["currency_id"] = t.cur
        rec["network_offer_payout_revenue_id"] = prid
        if notes:
            rec["notes"] = notes
        rel = t.rel.copy()
        rel["adv_global_event"] = t.age_ev if kind == KIND_EVENT else t.age
        rel["candidate_clicks"] = [
            {"relationship": t.cand_rel, "transaction_id": tid, "unix_timestamp": click_ts}
        ]
        rel["events_count"] = ev_count
        if onhold_snaps is True:
            onhold_snaps = [self._base_snapshot(c, v, ts)]
        rel["on_hold_snapshots"] = onhold_snaps or []
        rel["snapshots"] = snaps or []
        rel["unix_timestamp_postback"] = utp
        rec["relationship"] = rel
        return rec

    def _base_snapshot(self, c: DayCtx, v: int, ts: int) -> dict[str, Any]:
        return {
            "initiator": choices.SNAPSHOT_INITIATOR,
            "network_employee": "",
            "network_id": self.nid,
            "on_hold_conversion_history_snapshot_id": v * 8,
            "on_hold_conversion_id": self.onhold_ids.encode(v),
            "snapshot_type": "status",
            "status": "on_hold",
            "unix_timestamp": ts,
        }

    def build_conversion(self, c: DayCtx, i: int) -> dict[str, Any]:
        """The full conversion record ``i`` of a day (writes applied)."""
        self.records_built += 1
        return self.record_dict(KIND_CONVERSION, c, i)

    def build_event(self, c: DayCtx, j: int) -> dict[str, Any]:
        """Event ``j`` of a day: attached to conversion ``(j * n) // e`` (same transaction)."""
        self.records_built += 1
        return self.record_dict(KIND_EVENT, c, j)

    def build(self, seg: Segment, idx: int) -> dict[str, Any]:
        self.records_built += 1
        return self.record_dict(seg.kind, seg.ctx, idx)

    def json_range(self, seg: Segment, lo: int, hi: int) -> list[str]:
        """JSON texts of records ``lo..hi`` of a segment (the page hot path)."""
        self.records_built += hi - lo
        record, kind, c = self._record, seg.kind, seg.ctx
        return cast("list[str]", [record(kind, c, i, True) for i in range(lo, hi)])

    def dict_range(self, seg: Segment, lo: int, hi: int) -> list[dict[str, Any]]:
        self.records_built += hi - lo
        record, kind, c = self._record, seg.kind, seg.ctx
        return cast("list[dict[str, Any]]", [record(kind, c, i, False) for i in range(lo, hi)])

    # --- ids -------------------------------------------------------------------------------------

    def locate(self, value: int | None) -> tuple[DayCtx, int] | None:
        if value is None:
            return None
        ordinal, idx = value >> INDEX_BITS, value & ((1 << INDEX_BITS) - 1)
        if not self.first_ord <= ordinal <= self.last_ord:
            return None
        return self.day(ordinal), idx

    def find_conversion(self, conversion_id: str) -> tuple[int, DayCtx, int] | None:
        """``(kind, day, index)`` of a conversion or event id of this world."""
        ve = self.visible_end()
        hit = self.locate(self.conv_ids.decode(conversion_id))
        if hit and hit[1] < hit[0].n:
            ts = self.conv_ts(*hit)
            if ts < ve and not self.conv_hidden(hit[0], hit[1], ve, ts):
                return KIND_CONVERSION, hit[0], hit[1]
        hit = self.locate(self.event_ids.decode(conversion_id))
        if (
            hit
            and hit[1] < hit[0].e
            and self.event_ts(*hit) < ve
            and not self.event_hidden(hit[0], hit[1], ve)
        ):
            return KIND_EVENT, hit[0], hit[1]
        return None

    def conv_visible(self, c: DayCtx, i: int, ve: int | None = None) -> bool:
        """Whether conversion ``i`` is served at the clock (happened, recorded, not deleted)."""
        if ve is None:
            ve = self.visible_end()
        ts = self.conv_ts(c, i)
        return ts < ve and not self.conv_hidden(c, i, ve, ts)

    def find_transaction(self, transaction_id: str) -> tuple[DayCtx, int] | None:
        hit = self.locate(self.txn_ids.decode(transaction_id))
        if hit and hit[1] < hit[0].n and self.conv_visible(*hit):
            return hit
        return None

    def find_on_hold(self, on_hold_id: str) -> tuple[DayCtx, int] | None:
        hit = self.locate(self.onhold_ids.decode(on_hold_id))
        if hit and hit[1] < hit[0].n:
            _u, ts, _pattern, oh = self.core(hit[0], hit[1])
            ve = self.visible_end()
            if oh and ts < ve and not self.conv_hidden(hit[0], hit[1], ve, ts):
                return hit
        return None

    def on_hold_value(self, c: DayCtx, i: int) -> int:
        return c.vbase | i

    # --- windows ---------------------------------------------------------------------------------

    def window(self, from_date: dt.date, to_date: dt.date, timezone: str) -> tuple[int, int]:
        """UTC ``[t0, t1)`` of local days ``from_date``..``to_date`` in ``timezone``."""
        tz = zoneinfo.ZoneInfo(timezone)
        t0 = dt.datetime(from_date.year, from_date.month, from_date.day, tzinfo=tz)
        end = to_date + dt.timedelta(days=1)
        t1 = dt.datetime(end.year, end.month, end.day, tzinfo=tz)
        return int(t0.timestamp()), int(t1.timestamp())

    def sample_on_hold_ids(self, limit: int = 200) -> list[str]:
        out: list[str] = []
        end = self.visible_end()
        for o in range(self.last_ord, self.first_ord - 1, -1):
            c = self.day(o)
            for i in range(c.n):
                _u, ts, _pattern, oh = self.core(c, i)
                if oh and ts < end and not self.conv_hidden(c, i, end, ts):
                    out.append(self.onhold_ids.encode(c.vbase | i))
                    if len(out) >= limit:
                        return out
        return out

    def sample_transaction_ids(self, limit: int = 50) -> list[str]:
        out: list[str] = []
        end = self.visible_end()
        for o in range(self.last_ord, self.first_ord - 1, -1):
            c = self.day(o)
            step = max(1, c.n // 10)
            for i in range(0, c.n, step):
                if self.conv_ts(c, i) >= end:
                    break
                if self.conv_hidden(c, i, end):
                    continue
                out.append(self.txn_ids.encode(c.vbase | i))
                if len(out) >= limit:
                    return out
        return out


def _adjustment(amount: float | int, currency: str) -> float | int:
    """A planted adjustment's amount: minus ``choices.ADJUSTMENT_FRACTION`` of ``amount``,
    rounded half-up to ``currency``'s minor unit (0 stays 0, never -0.0)."""
    part = (Decimal(repr(amount)) * choices.ADJUSTMENT_FRACTION).quantize(
        quantum(currency), rounding=ROUND_HALF_UP
    )
    return json_amount(0 - part, currency) if part else amount * 0


def _no_clock() -> int:
    # A generator built without a clock (unit tests, benchmarks): every record exists.
    return 2**62


def locate_page(segments: list[Segment], offset: int, count: int) -> list[tuple[Segment, int, int]]:
    """Split ``[offset, offset + count)`` of the concatenated segments into per-segment ranges."""
    out = []
    starts = []
    total = 0
    for seg in segments:
        starts.append(total)
        total += len(seg)
    k = bisect.bisect_right(starts, offset) - 1
    remaining = count
    while remaining > 0 and 0 <= k < len(segments):
        seg = segments[k]
        lo = seg.lo + (offset - starts[k]) if offset > starts[k] else seg.lo
        hi = min(seg.hi, lo + remaining)
        if hi > lo:
            out.append((seg, lo, hi))
            remaining -= hi - lo
        offset = starts[k] + len(seg)
        k += 1
    return out
