"""A world = one network (default region or EU): catalog, generator and write overlay.

Also the read/write logic of every endpoint that works on a world's data. HTTP concerns
(routing, auth, faults, rate limit) live in :mod:`.app`.
"""

from __future__ import annotations

import datetime as dt
import time
import zoneinfo
from collections import OrderedDict
from typing import Any

from affiliate_network.sandbox import choices
from affiliate_network.sandbox import validate as v
from affiliate_network.sandbox.config import DataConfig
from affiliate_network.sandbox.data import (
    DEV_FRAGS,
    GEO_FRAGS,
    KIND_CONVERSION,
    KIND_EVENT,
    P_NONE,
    PATTERN_NAMES,
    Generator,
    Segment,
    locate_page,
)
from affiliate_network.sandbox.entities import (
    ASSIGNMENT_BASE,
    CATEGORY_BASE,
    Catalog,
)
from affiliate_network.sandbox.errors import invalid, not_found
from affiliate_network.sandbox.ids import derive, encode_tracking_id
from affiliate_network.sandbox.state import State

EU_SEED_OFFSET = 1_000_003
SCRUB_RATE_BASE = 6000


class Raw:
    """A JSON response already rendered as byte chunks (sent without re-encoding)."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks


def _now() -> int:
    return int(time.time())


class World:
    """One network's data.

    :param cfg: data configuration.
    :param region: ``default`` or ``eu``.
    """

    def __init__(self, cfg: DataConfig, region: str) -> None:
        self.cfg = cfg
        self.region = region
        self.seed = cfg.seed if region == "default" else cfg.seed + EU_SEED_OFFSET
        self.network_id = choices.NETWORK_ID if region == "default" else choices.EU_NETWORK_ID
        self.catalog = Catalog(cfg, self.seed, self.network_id)
        self.state = State()
        self.gen = Generator(cfg, self.seed, self.catalog, self.state)
        self.encode_key = derive(self.network_id, "encode")
        self._scan_cache: OrderedDict[tuple, list[tuple[int, int]]] = OrderedDict()
        self._truth_cache: OrderedDict[tuple, dict] = OrderedDict()

    # ============================================================================================
    # Common request pieces
    # ============================================================================================

    @staticmethod
    def timezone(body: dict) -> tuple[int, str]:
        tz = body.get("timezone_id", choices.DEFAULT_TIMEZONE_ID)
        if tz is None:
            tz = choices.DEFAULT_TIMEZONE_ID
        if not v.is_int(tz) or tz not in choices.TIMEZONES:
            raise invalid("unknown timezone_id")
        return tz, choices.TIMEZONES[tz]

    @staticmethod
    def currency(body: dict) -> str:
        cur = body.get("currency_id") or choices.DEFAULT_CURRENCY
        if cur not in choices.CURRENCY_RATES:
            raise invalid("unknown currency_id")
        return cur

    def window(self, body: dict) -> tuple[int, int]:
        start = v.date(v.req(body, "from"), "from")
        end = v.date(v.req(body, "to"), "to")
        if end < start:
            raise invalid("to must not be before from")
        _, tzname = self.timezone(body)
        return self.gen.window(start, end, tzname)

    @staticmethod
    def filters(raw: Any, allowed: dict[str, str]) -> dict[str, set[str]]:
        """``query.filters`` items -> {resource_type: {values}} (AND across, OR within)."""
        if raw is None:
            return {}
        if not isinstance(raw, list):
            raise invalid("query.filters must be a list")
        out: dict[str, set[str]] = {}
        for item in raw:
            if not isinstance(item, dict):
                raise invalid("filter items must be objects")
            rtype = item.get("resource_type")
            value = item.get("filter_id_value")
            if rtype not in allowed:
                raise invalid(f"unknown filter resource_type {rtype!r}")
            if v.is_int(value):
                value = str(value)
            if not isinstance(value, str):
                raise invalid("filter_id_value must be a string")
            out.setdefault(rtype, set()).add(value)
        return out

    # ============================================================================================
    # Fast per-record attributes (no record built): used by filters, truth and aggregation
    # ============================================================================================

    def quick(self, kind: int, c: Any, idx: int) -> dict[str, str]:
        gen = self.gen
        i = idx if kind == KIND_CONVERSION else (idx * c.n) // c.e
        u, _ts, _pattern, oh = gen.core(c, i)
        t = gen.pair((u >> 16) % gen.pairs)
        geo = GEO_FRAGS[(u >> 32) % 20]
        dev = DEV_FRAGS[(u >> 40) % 10]
        return {
            "offer": str(t.oid),
            "affiliate": str(t.fid),
            "advertiser": str(t.adv_id),
            "offer_group": str(t.group_id),
            "status": self.status_of(kind, c, i, oh),
            "country": geo["country"],
            "platform": dev["platform"],
            "device_type": dev["device_type"],
        }

    def status_of(self, kind: int, c: Any, i: int, oh: bool) -> str:
        if kind == KIND_EVENT or not oh:
            return choices.STATUS_APPROVED
        extra = self.state.onhold.get(c.vbase | i) if self.state.onhold else None
        return extra[-1]["status"] if extra else choices.STATUS_PENDING

    # ============================================================================================
    # POST /networks/reporting/conversions
    # ============================================================================================

    def conversion_report(self, body: Any, page: int, size: int) -> Raw:
        body = v.obj(body)
        t0, t1 = self.window(body)
        currency = self.currency(body)
        show_c = body.get("show_conversions", True)
        show_e = body.get("show_events", False)
        show_c = True if show_c is None else v.boolean(show_c, "show_conversions")
        show_e = False if show_e is None else v.boolean(show_e, "show_events")
        query = body.get("query") or {}
        if not isinstance(query, dict):
            raise invalid("query must be an object")
        flt = self.filters(query.get("filters"), choices.CONVERSION_FILTER_FIELDS)
        terms = self._search_terms(query.get("search_terms"))
        segs = self.gen.segments(t0, t1, conversions=show_c, events=show_e)
        gen = self.gen
        paging_tail = b""
        if not flt and not terms:
            total = sum(len(s) for s in segs)
            parts: list[str] = []
            for seg, lo, hi in locate_page(segs, (page - 1) * size, size):
                parts.extend(gen.json_range(seg, lo, hi, currency))
        else:
            hits = self._matches(segs, flt, terms, (t0, t1, show_c, show_e))
            total = len(hits)
            start = (page - 1) * size
            parts = []
            for si, idx in hits[start : start + size]:
                seg = segs[si]
                parts.append(
                    gen.to_json(
                        gen.values(seg.kind, seg.ctx, idx, choices.CURRENCY_RATES[currency]),
                        currency,
                    )
                )
                gen.records_built += 1
        paging_tail = (
            f'],"paging":{{"page":{page},"page_size":{size},"total_count":{total}}}}}'
        ).encode()
        return Raw([b'{"conversions":[', ",".join(parts).encode(), paging_tail])

    def _search_terms(self, raw: Any) -> list[tuple[str, str]]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise invalid("query.search_terms must be a list")
        out = []
        for item in raw:
            if not isinstance(item, dict):
                raise invalid("search term items must be objects")
            stype, value = item.get("search_type"), item.get("value")
            if not isinstance(stype, str) or not isinstance(value, str):
                raise invalid("search_type and value must be strings")
            if stype not in choices.ID_SEARCH_TYPES and stype not in self.gen.pair(0).top:
                raise invalid(f"unknown search_type {stype!r}")
            out.append((stype, value))
        return out

    def _matches(
        self,
        segs: list[Segment],
        flt: dict[str, set[str]],
        terms: list[tuple[str, str]],
        key: tuple,
    ) -> list[tuple[int, int]]:
        """(segment index, record index) of matching records, in report order (cached)."""
        ckey = (
            self.state.version,
            key,
            tuple(sorted((k, tuple(sorted(s))) for k, s in flt.items())),
            tuple(terms),
        )
        hit = self._scan_cache.get(ckey)
        if hit is not None:
            self._scan_cache.move_to_end(ckey)
            return hit
        gen = self.gen

        def keep(kind: int, c: Any, idx: int) -> bool:
            if not flt:
                return True
            q = self.quick(kind, c, idx)
            return all(q[k] in vals for k, vals in flt.items())

        out: list[tuple[int, int]] = []
        if terms:
            id_terms = [(t, val) for t, val in terms if t in choices.ID_SEARCH_TYPES]
            field_terms = [(t, val) for t, val in terms if t not in choices.ID_SEARCH_TYPES]
            found: set[tuple[int, int]] = set()
            for stype, value in id_terms:
                for kind, c, idx in self._lookup(stype, value):
                    for si, seg in enumerate(segs):
                        if seg.kind == kind and seg.ctx.ord == c.ord and seg.lo <= idx < seg.hi:
                            found.add((si, idx))
            if field_terms:
                for si, seg in enumerate(segs):
                    for idx in range(seg.lo, seg.hi):
                        rec = gen.to_dict(gen.values(seg.kind, seg.ctx, idx))
                        if any(str(rec.get(t)) == val for t, val in field_terms):
                            found.add((si, idx))
            out = sorted(p for p in found if keep(segs[p[0]].kind, segs[p[0]].ctx, p[1]))
        else:
            for si, seg in enumerate(segs):
                c, kind = seg.ctx, seg.kind
                out.extend((si, idx) for idx in range(seg.lo, seg.hi) if keep(kind, c, idx))
        self._scan_cache[ckey] = out
        while len(self._scan_cache) > 16:
            self._scan_cache.popitem(last=False)
        return out

    def _lookup(self, stype: str, value: str) -> list[tuple[int, Any, int]]:
        gen = self.gen
        if stype == "conversion_id":
            hit = gen.find_conversion(value)
            return [hit] if hit else []
        if stype == "transaction_id":
            hit = gen.find_transaction(value)
            if not hit:
                return []
            c, i = hit
            out = [(KIND_CONVERSION, c, i)]
            j = gen.has_event(c, i)
            if j is not None:
                out.append((KIND_EVENT, c, j))
            return out
        hit = gen.find_on_hold(value)
        return [(KIND_CONVERSION, hit[0], hit[1])] if hit else []

    # ============================================================================================
    # PATCH /networks/reporting/onhold
    # ============================================================================================

    def patch_onhold(self, body: Any, ignore_ids: list[str]) -> dict:
        body = v.obj(body)
        ids = v.str_list(v.req(body, "on_hold_conversion_ids"), "on_hold_conversion_ids")
        if not ids:
            raise invalid("on_hold_conversion_ids must not be empty")
        status = v.enum(v.req(body, "status"), "status", choices.ONHOLD_PATCH_STATUSES)
        located = []
        for ohid in ids:
            hit = self.gen.find_on_hold(ohid)
            if hit is None:
                raise not_found()
            located.append((ohid, hit))
        ignore = set(ignore_ids)
        now = _now()
        changed = False
        for ohid, (c, i) in located:
            if ohid in ignore:
                continue  # fault: reported as applied, applied "later" (never)
            value = c.vbase | i
            extra = self.state.onhold.setdefault(value, [])
            current = extra[-1]["status"] if extra else "on_hold"
            if current == status:
                continue
            extra.append(
                {
                    "initiator": choices.SNAPSHOT_INITIATOR,
                    "network_employee": "api",
                    "network_id": self.network_id,
                    "on_hold_conversion_history_snapshot_id": value * 8 + min(len(extra) + 1, 7),
                    "on_hold_conversion_id": ohid,
                    "snapshot_type": "status",
                    "status": status,
                    "unix_timestamp": now,
                }
            )
            changed = True
        if changed:
            self.state.touch()
        return {"result": True}

    # ============================================================================================
    # PUT /networks/reporting/conversions/{id}/saleamount
    # ============================================================================================

    def put_sale_amount(self, conversion_id: str, body: Any) -> dict:
        body = v.obj(body)
        amount = v.number(v.req(body, "sale_amount"), "sale_amount", lo=0)
        is_event = body.get("is_event", False)
        is_event = False if is_event is None else v.boolean(is_event, "is_event")
        hit = self.gen.find_conversion(conversion_id)
        if hit is None or (hit[0] == KIND_EVENT) != is_event:
            raise not_found()
        kind, c, idx = hit
        rec = self.gen.to_dict(self.gen.values(kind, c, idx))
        key = (kind, c.vbase | idx)
        snaps = self.state.sale.setdefault(key, [])
        self.state.snapshot_seq += 1
        snaps.append(
            {
                "conversion_history_snapshot_id": self.state.snapshot_seq,
                "conversion_id": conversion_id,
                "error_code": 0,
                "initiator": choices.SNAPSHOT_INITIATOR,
                "network_employee": "api",
                "network_id": self.network_id,
                "payout": rec["payout"],
                "revenue": rec["revenue"],
                "sale_amount": float(amount),
                "snapshot_type": "sale_amount",
                "status": rec["status"],
                "unix_timestamp": _now(),
            }
        )
        self.state.touch()
        return {"result": True}

    # ============================================================================================
    # GET /networks/reporting/transactions/{id}/flowchart
    # ============================================================================================

    def flowchart(self, transaction_id: str) -> dict:
        gen = self.gen
        hit = gen.find_transaction(transaction_id)
        if hit is None:
            raise not_found()
        c, i = hit
        recs = [gen.build_conversion(c, i)]
        j = gen.has_event(c, i)
        if j is not None:
            recs.append(gen.build_event(c, j))
        base = recs[0]
        rel = base["relationship"]
        cpr = rel["custom_payout_revenue"]
        clicks = [
            {
                "transaction_id": transaction_id,
                "unix_timestamp": base["click_unix_timestamp"],
                "network_offer_id": rel["offer"]["network_offer_id"],
                "network_advertiser_id": rel["advertiser"]["network_advertiser_id"],
                "network_affiliate_id": rel["affiliate"]["network_affiliate_id"],
                "currency_id": "USD",
                "referrer": base["referer"],
                "payout_type": "cpa",
                "revenue_type": "rpa",
                "error_code": 0,
                "is_view_through": False,
                "payout": 0.0,
                "revenue": 0.0,
                "relationship": {"internal_redirect_count": 0},
            }
        ]
        conversions = []
        pixel_logs = []
        pixel_id = self.catalog.affiliate_pixel.get(rel["affiliate"]["network_affiliate_id"])
        for rec in recs:
            r = rec["relationship"]
            item = {
                "transaction_id": transaction_id,
                "conversion_id": rec["conversion_id"],
                "unix_timestamp": rec["conversion_unix_timestamp"],
                "status": rec["status"],
                "currency_id": rec["currency_id"],
                "event_name": rec["event"],
                "coupon_code": rec["coupon_code"],
                "email": rec["email"],
                "payout_type": rec["payout_type"],
                "revenue_type": rec["revenue_type"],
                "payout": rec["payout"],
                "revenue": rec["revenue"],
                "sale_amount": rec["sale_amount"],
                "is_scrub": rec["is_scrub"],
                "network_advertiser_global_event_id": r["adv_global_event"][
                    "network_advertiser_global_event_id"
                ],
                "network_offer_payout_revenue_id": rec["network_offer_payout_revenue_id"],
                "network_custom_payout_revenue_setting_id": (
                    cpr["network_custom_payout_revenue_setting_id"] if cpr else 0
                ),
                "error_code": 0,
                "relationship": {
                    "attribution_method": r["attribution_method"],
                    "advertiser_event": {},
                    "offer_payout_revenue": {},
                    "custom_payout_revenue_setting": {},
                    "network_coupon_code_id": 0,
                },
            }
            snaps = r["on_hold_snapshots"]
            if snaps:
                item["relationship"]["on_hold"] = {
                    "on_hold_conversion_id": snaps[0]["on_hold_conversion_id"],
                    "holding_period_end": rec["conversion_unix_timestamp"]
                    + choices.HOLDING_PERIOD_S,
                    "status": snaps[-1]["status"],
                }
            conversions.append(item)
            # Postbacks fire for approved conversions and events of affiliates with a pixel.
            if pixel_id and rec["status"] == choices.STATUS_APPROVED:
                pixel_logs.append(
                    {
                        "conversion_id": rec["conversion_id"],
                        "unix_timestamp": r["unix_timestamp_postback"],
                        "is_success": True,
                        "pixel_id": pixel_id,
                        "relationship": {},
                    }
                )
        return {"clicks": clicks, "conversions": conversions, "pixel_logs": pixel_logs}

    # ============================================================================================
    # POST /affiliates/reporting/entity/table
    # ============================================================================================

    def entity_table(self, affiliate_id: int, body: Any) -> dict:
        body = v.obj(body)
        t0, t1 = self.window(body)
        _, tzname = self.timezone(body)
        currency = self.currency(body)
        rate = choices.CURRENCY_RATES[currency]
        cols_raw = v.req(body, "columns")
        if not isinstance(cols_raw, list) or not 1 <= len(cols_raw) <= choices.MAX_COLUMNS:
            raise invalid(f"columns must hold 1 to {choices.MAX_COLUMNS} items")
        cols: list[str] = []
        for item in cols_raw:
            name = item.get("column") if isinstance(item, dict) else None
            if name not in choices.ENTITY_COLUMNS and name not in choices.TIME_COLUMNS:
                raise invalid(f"unknown column {name!r}")
            if name in cols:
                raise invalid(f"duplicate column {name!r}")
            cols.append(name)
        if sum(1 for c in cols if c in choices.TIME_COLUMNS) > 1:
            raise invalid("at most one time column")
        query = body.get("query") or {}
        if not isinstance(query, dict):
            raise invalid("query must be an object")
        allowed = {k: p for k, p in choices.CONVERSION_FILTER_FIELDS.items() if k != "affiliate"}
        flt = self.filters(query.get("filters"), allowed)

        tz = zoneinfo.ZoneInfo(tzname)
        gen = self.gen
        cat = self.catalog
        groups: dict[tuple, dict[str, float]] = {}
        labels: dict[tuple, list[dict]] = {}
        for seg in gen.segments(t0, t1, conversions=True, events=True):
            c, kind = seg.ctx, seg.kind
            for idx in range(seg.lo, seg.hi):
                i = idx if kind == KIND_CONVERSION else (idx * c.n) // c.e
                u = gen.core(c, i)[0]
                if gen.pair((u >> 16) % gen.pairs).fid != affiliate_id:
                    continue
                if flt:
                    q = self.quick(kind, c, idx)
                    if not all(q[k] in vals for k, vals in flt.items()):
                        continue
                rec = gen.to_dict(gen.values(kind, c, idx, rate), currency)
                key_parts = []
                col_objs = []
                for col in cols:
                    cid, label = self._column_value(col, rec, tz, cat)
                    key_parts.append(cid)
                    col_objs.append({"column_type": col, "id": cid, "label": label})
                key = tuple(key_parts)
                agg = groups.get(key)
                if agg is None:
                    agg = groups[key] = dict.fromkeys(
                        ("clicks", "cv", "event", "revenue", "oh", "oh_rev"), 0.0
                    )
                    labels[key] = col_objs
                if kind == KIND_EVENT:
                    agg["event"] += 1
                    agg["revenue"] += rec["payout"]
                    continue
                lo_c, hi_c = choices.CLICKS_PER_CONVERSION_RANGE
                agg["clicks"] += lo_c + (u >> 48) % (hi_c - lo_c + 1)
                if rec["status"] == choices.STATUS_APPROVED:
                    agg["cv"] += 1
                    agg["revenue"] += rec["payout"]
                elif rec["status"] == choices.STATUS_PENDING:
                    agg["oh"] += 1
                    agg["oh_rev"] += rec["payout"]
        rows = []
        for key in sorted(groups):
            rows.append({"columns": labels[key], "reporting": _reporting(groups[key])})
            if len(rows) >= choices.MAX_TABLE_ROWS:
                break
        return {"table": rows}

    @staticmethod
    def _column_value(col: str, rec: dict, tz: Any, cat: Catalog) -> tuple[str, str]:
        rel = rec["relationship"]
        if col == "offer":
            return str(rel["offer"]["network_offer_id"]), rel["offer"]["name"]
        if col == "advertiser":
            adv = rel["advertiser"]
            return str(adv["network_advertiser_id"]), adv["name"]
        if col in choices.TIME_COLUMNS:
            local = dt.datetime.fromtimestamp(rec["conversion_unix_timestamp"], tz)
            if col == "hour":
                value = f"{local.hour:02d}"
                return value, f"{value}:00"
            if col == "date":
                value = local.date().isoformat()
            elif col == "week":
                value = (local.date() - dt.timedelta(days=local.weekday())).isoformat()
            elif col == "month":
                value = f"{local.year:04d}-{local.month:02d}"
            else:
                value = f"{local.year:04d}"
            return value, value
        value = str(rec[col])
        return value, value

    # ============================================================================================
    # Truth (admin)
    # ============================================================================================

    def truth(self, t0: int, t1: int) -> dict:
        key = (self.state.version, t0, t1)
        hit = self._truth_cache.get(key)
        if hit is not None:
            return hit
        gen = self.gen
        segs = gen.segments(t0, t1, conversions=True, events=True)
        conv = sum(len(s) for s in segs if s.kind == KIND_CONVERSION)
        events = sum(len(s) for s in segs if s.kind == KIND_EVENT)
        on_hold = 0
        statuses = {
            choices.STATUS_APPROVED: 0,
            choices.STATUS_PENDING: 0,
            choices.STATUS_REJECTED: 0,
        }
        planted = dict.fromkeys(PATTERN_NAMES.values(), 0)
        planted_ids: dict[str, list[str]] = {name: [] for name in PATTERN_NAMES.values()}
        planted_oh: dict[str, list[str]] = {name: [] for name in PATTERN_NAMES.values()}
        clean_on_hold: list[str] = []
        for seg in segs:
            if seg.kind != KIND_CONVERSION:
                continue
            c = seg.ctx
            for i in range(seg.lo, seg.hi):
                _u, _ts, pattern, oh = gen.core(c, i)
                statuses[self.status_of(KIND_CONVERSION, c, i, oh)] += 1
                if not oh:
                    continue
                on_hold += 1
                value = c.vbase | i
                if pattern == P_NONE:
                    clean_on_hold.append(gen.conv_ids.encode(value))
                    continue
                name = PATTERN_NAMES[pattern]
                planted[name] += 1
                planted_ids[name].append(gen.conv_ids.encode(value))
                planted_oh[name].append(gen.onhold_ids.encode(value))
        out = {
            "conversions": conv,
            "events": events,
            "total": conv + events,
            "on_hold": on_hold,
            "on_hold_pending": statuses[choices.STATUS_PENDING],
            "approved": statuses[choices.STATUS_APPROVED],
            "rejected": statuses[choices.STATUS_REJECTED],
            "planted": planted,
            "clean_on_hold": len(clean_on_hold),
            "_ids": (planted_ids, planted_oh, clean_on_hold),
        }
        self._truth_cache[key] = out
        while len(self._truth_cache) > 8:
            self._truth_cache.popitem(last=False)
        return out

    # ============================================================================================
    # Catalog objects with the overlay
    # ============================================================================================

    def _objects(self, kind: str) -> dict[int, dict]:
        return self.state.objects[kind]

    def advertiser(self, aid: int) -> dict:
        return self.catalog.advertisers[aid]

    def offer_fields(self, oid: int) -> dict | None:
        return self._objects("offers").get(oid) or self.catalog.offers.get(oid)

    def offer_group_fields(self, gid: int) -> dict | None:
        return self._objects("offer_groups").get(gid) or self.catalog.offer_groups.get(gid)

    def offer_url(self, uid: int) -> dict | None:
        return self._objects("offer_urls").get(uid) or self.catalog.offer_urls.get(uid)

    def channel(self, cid: int) -> dict | None:
        return self._objects("channels").get(cid) or self.catalog.channels.get(cid)

    def assignments(self) -> dict[int, dict]:
        merged = dict(self.catalog.assignments)
        merged.update(self._objects("tracking_domains"))
        return merged

    # --- offer groups ----------------------------------------------------------------------------

    def offer_group_record(self, gid: int, f: dict) -> dict:
        caps_on = f["is_caps_enabled"]
        remaining = {}
        for period in choices.CAP_PERIODS:
            for metric in ("payout", "revenue", "conversion", "click"):
                cap = f[f"{period}_{metric}_cap"]
                remaining[f"remaining_{period}_{metric}_cap"] = cap if caps_on else 0
        rec = {
            "network_offer_group_id": gid,
            "network_id": self.network_id,
            "network_advertiser_id": f["network_advertiser_id"],
            "name": f["name"],
            "internal_notes": f["internal_notes"],
            "offer_group_status": f["offer_group_status"],
            "currency_id": f["currency_id"],
            "is_caps_enabled": caps_on,
            "is_soft_cap": f["is_soft_cap"],
            **{cap: f[cap] for cap in choices.CAP_FIELDS},
            "time_created": f["time_created"],
            "time_saved": f["time_saved"],
            "relationship": {
                "advertiser": self.advertiser(f["network_advertiser_id"]),
                "labels": {"total": len(f["labels"]), "entries": list(f["labels"])},
                "network_offer_ids": list(f["network_offer_ids"]),
                "remaining_caps": remaining,
            },
        }
        return rec

    def put_offer_group(self, gid: int, body: Any) -> dict:
        current = self.offer_group_fields(gid)
        if current is None:
            raise not_found()
        body = v.obj(body)
        known = (
            set(choices.OFFER_GROUP_REQUIRED)
            | set(choices.OFFER_GROUP_DEFAULTS)
            | set(choices.CAP_FIELDS)
            | set(choices.READ_ONLY_FIELDS)
            | {"network_offer_group_id"}
        )
        unknown = set(body) - known
        if unknown:
            raise invalid(f"unknown fields: {', '.join(sorted(unknown))}")
        if "network_offer_group_id" in body and body["network_offer_group_id"] != gid:
            raise invalid("network_offer_group_id does not match the path")
        name = v.string(v.req(body, "name"), "name")
        adv = v.integer(v.req(body, "network_advertiser_id"), "network_advertiser_id")
        if adv not in self.catalog.advertisers:
            raise invalid("network_advertiser_id does not exist")
        f = {**choices.OFFER_GROUP_DEFAULTS, **{cap: 0 for cap in choices.CAP_FIELDS}}
        f["network_offer_ids"] = []
        f["labels"] = []
        f["name"] = name
        f["network_advertiser_id"] = adv
        if body.get("offer_group_status") is not None:
            f["offer_group_status"] = v.enum(
                body["offer_group_status"], "offer_group_status", choices.OFFER_GROUP_STATUSES
            )
        if body.get("internal_notes") is not None:
            f["internal_notes"] = v.string(body["internal_notes"], "internal_notes", empty=True)
        if body.get("currency_id") is not None:
            f["currency_id"] = v.enum(body["currency_id"], "currency_id", choices.CURRENCY_RATES)
        for flag in ("is_caps_enabled", "is_soft_cap"):
            if body.get(flag) is not None:
                f[flag] = v.boolean(body[flag], flag)
        for cap in choices.CAP_FIELDS:
            if body.get(cap) is not None:
                f[cap] = v.number(body[cap], cap, lo=0)
        if body.get("labels") is not None:
            f["labels"] = list(dict.fromkeys(v.str_list(body["labels"], "labels")))
        if body.get("network_offer_ids") is not None:
            ids = v.int_list(body["network_offer_ids"], "network_offer_ids")
            for oid in ids:
                of = self.offer_fields(oid)
                if of is None or of["network_advertiser_id"] != adv:
                    raise invalid("network_offer_ids must be offers of network_advertiser_id")
            f["network_offer_ids"] = list(dict.fromkeys(ids))
        f["time_created"] = current["time_created"]
        f["time_saved"] = _now()
        self._objects("offer_groups")[gid] = f
        self.state.touch()
        return self.offer_group_record(gid, f)

    # --- offers ----------------------------------------------------------------------------------

    def offer_record(self, oid: int, f: dict) -> dict:
        nid = self.network_id
        adv = self.advertiser(f["network_advertiser_id"])
        category = self._category(f["network_category_id"])
        entries = []
        for pr in f["payout_revenue"]:
            entries.append(
                {
                    **pr,
                    "network_id": nid,
                    "network_offer_id": oid,
                    "time_created": f["time_created"],
                    "global_advertiser_event_id": 0
                    if pr["is_default"]
                    else pr["network_offer_payout_revenue_id"],
                }
            )
        empty = {"total": 0, "entries": []}
        urls = [u for u in self._all_offer_urls() if u["network_offer_id"] == oid]
        caps_on = f["is_caps_enabled"]
        remaining = {
            f"remaining_{p}_{m}_cap": (f[f"{p}_{m}_cap"] if caps_on else 0)
            for p in choices.CAP_PERIODS
            for m in ("payout", "revenue", "conversion", "click")
        }
        reporting_keys = [
            "imp",
            "total_click",
            "unique_click",
            "invalid_click",
            "duplicate_click",
            "gross_click",
            "ctr",
            "cv",
            "invalid_cv_scrub",
            "view_through_cv",
            "total_cv",
            "event",
            "cvr",
            "evr",
            "cpc",
            "cpm",
            "cpa",
            "epc",
            "rpc",
            "rpa",
            "rpm",
            "payout",
            "revenue",
            "event_revenue",
            "gross_sales",
            "profit",
            "margin",
            "roas",
            "avg_sale_value",
            "media_buying_cost",
            "on_hold_potential_revenue",
            "on_hold_potential_payout",
            "on_hold_conversion_count",
            "public_events",
        ]
        record = {
            "network_offer_id": oid,
            "network_id": nid,
            **{k: val for k, val in f.items() if k != "payout_revenue"},
            "encoded_value": encode_tracking_id(oid, self.encode_key),
            "payout_revenue": [dict(pr) for pr in f["payout_revenue"]],
            "relationship": {
                "advertiser": adv,
                "category": category,
                **{
                    name: dict(empty)
                    for name in [
                        "creatives",
                        "traffic_filters",
                        "custom_cap_settings",
                        "custom_scrub_rate_settings",
                        "custom_payout_revenue_settings",
                        "audits",
                        "source_names",
                        "custom_creative_settings",
                        "channels",
                        "requirement_kpis",
                        "requirement_tracking_parameters",
                    ]
                },
                "labels": {"total": len(f["labels"]), "entries": list(f["labels"])},
                "urls": {"total": len(urls), "entries": urls},
                "payout_revenue": {"total": len(entries), "entries": entries},
                "reporting": dict.fromkeys(reporting_keys, 0),
                "visibility": {
                    "network_id": nid,
                    "network_offer_id": oid,
                    "network_affiliate_visible_ids": [],
                    "network_affiliate_rejected_ids": [],
                    "network_affiliate_hidden_ids": [],
                },
                "integrations": {},
                "ruleset": _ruleset(nid),
                "encoded_value": encode_tracking_id(oid, self.encode_key),
                "remaining_caps": remaining,
                "is_locked_currency": False,
                "is_locked_caps_timezone": False,
                "meta": {
                    "network_offer_id": oid,
                    "network_id": nid,
                    "app_id": "",
                    "meta_platform": "",
                    "advertiser_campaign_name": "",
                    "bundle_id": "",
                    "category": "",
                    "store_url": "",
                    "developer": "",
                    "version": "",
                    "score_rating": 0,
                    "total_rating": 0,
                    "size": 0,
                    "is_app_unavailable": False,
                    "time_created": f["time_created"],
                    "time_app_data_saved": 0,
                    "time_saved": f["time_saved"],
                },
            },
        }
        return record

    def _category(self, cid: int) -> dict | None:
        return self._objects("categories").get(cid) or self.catalog.categories.get(cid)

    def put_offer(self, oid: int, body: Any) -> dict:
        current = self.offer_fields(oid)
        if current is None:
            raise not_found()
        body = v.obj(body)
        known = (
            set(choices.OFFER_DEFAULTS)
            | set(choices.OFFER_REQUIRED)
            | set(choices.READ_ONLY_FIELDS)
            | {"network_offer_id", "network_offer_group_id", "payout_revenue", "encoded_value"}
        )
        unknown = set(body) - known
        if unknown:
            raise invalid(f"unknown fields: {', '.join(sorted(unknown))}")
        if "network_offer_id" in body and body["network_offer_id"] != oid:
            raise invalid("network_offer_id does not match the path")
        f = dict(choices.OFFER_DEFAULTS)
        f["labels"] = []
        f["name"] = v.string(v.req(body, "name"), "name")
        adv = v.integer(v.req(body, "network_advertiser_id"), "network_advertiser_id")
        if adv not in self.catalog.advertisers:
            raise invalid("network_advertiser_id does not exist")
        f["network_advertiser_id"] = adv
        f["offer_status"] = v.enum(
            v.req(body, "offer_status"), "offer_status", choices.OFFER_STATUSES
        )
        f["network_offer_group_id"] = current.get("network_offer_group_id", 0)
        enums = {
            "visibility": choices.OFFER_VISIBILITIES,
            "conversion_method": choices.OFFER_CONVERSION_METHODS,
            "redirect_mode": choices.OFFER_REDIRECT_MODES,
            "session_definition": choices.OFFER_SESSION_DEFINITIONS,
            "currency_id": tuple(choices.CURRENCY_RATES),
        }
        for name, default in choices.OFFER_DEFAULTS.items():
            if body.get(name) is None:
                continue
            value = body[name]
            if name in enums:
                f[name] = v.enum(value, name, enums[name])
            elif name == "labels":
                f[name] = v.str_list(value, name)
            elif isinstance(default, bool):
                f[name] = v.boolean(value, name)
            elif (
                isinstance(default, int) and name in choices.CAP_FIELDS
            ) or name == "scrub_rate_percentage":
                f[name] = v.number(
                    value, name, lo=0, hi=100 if name == "scrub_rate_percentage" else None
                )
            elif isinstance(default, int):
                f[name] = v.integer(value, name, minimum=0)
            else:
                f[name] = v.string(value, name, empty=True)
        if f["network_category_id"] and self._category(f["network_category_id"]) is None:
            raise invalid("network_category_id does not exist")
        if f["network_tracking_domain_id"] and (
            f["network_tracking_domain_id"] not in self.catalog.tracking_domains
        ):
            raise invalid("network_tracking_domain_id does not exist")
        f["payout_revenue"] = self._payout_revenue(oid, body.get("payout_revenue"), current)
        f["time_created"] = current["time_created"]
        f["time_saved"] = _now()
        self._objects("offers")[oid] = f
        self.state.touch()
        return self.offer_record(oid, f)

    def _payout_revenue(self, oid: int, raw: Any, current: dict) -> list[dict]:
        if raw is None:
            base_id = current["payout_revenue"][0]["network_offer_payout_revenue_id"]
            return [{**choices.DEFAULT_PAYOUT_REVENUE, "network_offer_payout_revenue_id": base_id}]
        if not isinstance(raw, list) or not raw:
            raise invalid("payout_revenue must be a non-empty list")
        existing = {pr["network_offer_payout_revenue_id"] for pr in current["payout_revenue"]}
        next_id = max(existing) + 1
        out = []
        for item in raw:
            if not isinstance(item, dict):
                raise invalid("payout_revenue entries must be objects")
            entry = dict(choices.DEFAULT_PAYOUT_REVENUE)
            entry["entry_name"] = item.get("entry_name") or (
                "Base" if item.get("is_default") else ""
            )
            entry["payout_type"] = v.enum(
                item.get("payout_type"), "payout_type", choices.PAYOUT_TYPES
            )
            entry["revenue_type"] = v.enum(
                item.get("revenue_type"), "revenue_type", choices.REVENUE_TYPES
            )
            for num in (
                "payout_amount",
                "revenue_amount",
                "payout_percentage",
                "revenue_percentage",
            ):
                if item.get(num) is not None:
                    entry[num] = v.number(item[num], num, lo=0)
            for flag in (
                "is_default",
                "is_private",
                "is_postback_disabled",
                "is_enforce_caps",
                "is_must_approve_conversion",
                "is_allow_duplicate_conversion",
                "is_email_attribution_default_event",
            ):
                if item.get(flag) is not None:
                    entry[flag] = v.boolean(item[flag], flag)
            pr_id = item.get("network_offer_payout_revenue_id")
            if v.is_int(pr_id) and pr_id in existing:
                entry["network_offer_payout_revenue_id"] = pr_id
            else:
                entry["network_offer_payout_revenue_id"] = next_id
                next_id += 1
            out.append(entry)
        if sum(1 for e in out if e["is_default"]) != 1:
            raise invalid("payout_revenue needs exactly one entry with is_default true")
        return out

    # --- custom scrub rate -----------------------------------------------------------------------

    def post_scrub_rate(self, body: Any) -> dict:
        body = v.obj(body)
        oid = v.integer(v.req(body, "network_offer_id"), "network_offer_id")
        fid = v.integer(v.req(body, "network_affiliate_id"), "network_affiliate_id")
        if self.offer_fields(oid) is None or fid not in self.catalog.affiliates:
            raise invalid("network_offer_id or network_affiliate_id does not exist")
        name = v.string(v.req(body, "name"), "name")
        status = v.enum(
            v.req(body, "custom_setting_status"),
            "custom_setting_status",
            choices.CUSTOM_SETTING_STATUSES,
        )
        pct = v.number(v.req(body, "scrub_rate_percentage"), "scrub_rate_percentage", lo=0, hi=100)
        scrub_status = v.enum(
            v.req(body, "scrub_rate_status"), "scrub_rate_status", choices.SCRUB_RATE_STATUSES
        )
        variables = body.get("variables") or []
        if not isinstance(variables, list) or not all(isinstance(x, dict) for x in variables):
            raise invalid("variables must be a list of objects")
        ruleset = body.get("ruleset")
        if ruleset is not None and not isinstance(ruleset, dict):
            raise invalid("ruleset must be an object")
        sid = self.state.new_id("scrub", SCRUB_RATE_BASE + 1)
        now = _now()
        entries = []
        for k, var in enumerate(variables):
            entries.append(
                {
                    "network_custom_scrub_rate_setting_variable_id": sid * 100 + k + 1,
                    "network_custom_scrub_rate_setting_id": sid,
                    "comparison_method": str(var.get("comparison_method", "")),
                    "variable": str(var.get("variable", "")),
                    "variable_value": str(var.get("variable_value", "")),
                    "variable_secondary_value": str(var.get("variable_secondary_value", "")),
                }
            )
        rec = {
            "network_custom_scrub_rate_setting_id": sid,
            "network_id": self.network_id,
            "network_offer_id": oid,
            "network_affiliate_id": fid,
            "name": name,
            "custom_setting_status": status,
            "scrub_rate_percentage": pct,
            "scrub_rate_status": scrub_status,
            "time_created": now,
            "time_saved": now,
            "relationship": {
                "affiliate": self.catalog.affiliates[fid],
                "offer": self.catalog.offer_summary(oid, self.offer_fields(oid)),
                "ruleset": ruleset if ruleset is not None else _ruleset(self.network_id),
                "variables": {"total": len(entries), "entries": entries},
            },
        }
        self._objects("custom_scrub_rates")[sid] = rec
        self.state.touch()
        return rec

    # --- tracking domains ------------------------------------------------------------------------

    def assignment_record(self, a: dict) -> dict:
        rec = dict(a)
        rel = {
            "affiliate": self.catalog.affiliate_small(a["network_affiliate_id"]),
            "tracking_domain": self.catalog.tracking_domains[a["network_tracking_domain_id"]],
        }
        if a["network_offer_id"]:
            rel["offer"] = self.catalog.offer_summary(
                a["network_offer_id"], self.offer_fields(a["network_offer_id"])
            )
        rec["relationship"] = rel
        return rec

    def put_tracking_domain(self, affiliate_id: int, body: Any) -> dict:
        if affiliate_id not in self.catalog.affiliates:
            raise not_found()
        body = v.obj(body)
        if body.get("network_affiliate_id") not in (None, affiliate_id):
            raise invalid("network_affiliate_id does not match the path")
        td = v.integer(v.req(body, "network_tracking_domain_id"), "network_tracking_domain_id")
        if td not in self.catalog.tracking_domains:
            raise invalid("network_tracking_domain_id does not exist")
        apply_all = body.get("is_apply_all_offers", False)
        apply_all = False if apply_all is None else v.boolean(apply_all, "is_apply_all_offers")
        oid = body.get("network_offer_id") or 0
        oid = v.integer(oid, "network_offer_id", minimum=0)
        if oid and self.offer_fields(oid) is None:
            raise invalid("network_offer_id does not exist")
        if apply_all and oid:
            apply_all = False  # the spec's rule: a specific offer wins
        assignments = self.assignments()
        aid = body.get("network_affiliate_tracking_domain_id") or 0
        aid = v.integer(aid, "network_affiliate_tracking_domain_id", minimum=0)
        if aid:
            existing = assignments.get(aid)
            if existing is None or existing["network_affiliate_id"] != affiliate_id:
                raise not_found()
        else:
            aid = next(
                (
                    k
                    for k, a in assignments.items()
                    if a["network_affiliate_id"] == affiliate_id and a["network_offer_id"] == oid
                ),
                0,
            ) or self.state.new_id("assignment", ASSIGNMENT_BASE + 1000)
        a = {
            "network_affiliate_tracking_domain_id": aid,
            "network_id": self.network_id,
            "network_affiliate_id": affiliate_id,
            "network_tracking_domain_id": td,
            "is_apply_all_offers": apply_all,
            "network_offer_id": oid,
        }
        self._objects("tracking_domains")[aid] = a
        self.state.touch()
        return self.assignment_record(a)

    # --- channels, categories --------------------------------------------------------------------

    def put_channel(self, cid: int, body: Any) -> dict:
        current = self.channel(cid)
        if current is None:
            raise not_found()
        body = v.obj(body)
        name = v.string(v.req(body, "name"), "name")
        status = v.enum(v.req(body, "status"), "status", choices.CHANNEL_STATUSES)
        rec = {**current, "name": name, "status": status, "time_saved": _now()}
        self._objects("channels")[cid] = rec
        self.state.touch()
        return rec

    def post_category(self, body: Any) -> dict:
        body = v.obj(body)
        name = v.string(v.req(body, "name"), "name")
        status = v.enum(v.req(body, "status"), "status", choices.CATEGORY_STATUSES)
        cid = self.state.new_id("category", CATEGORY_BASE + 100)
        now = _now()
        rec = {
            "network_category_id": cid,
            "network_id": self.network_id,
            "name": name,
            "status": status,
            "time_created": now,
            "time_saved": now,
        }
        self._objects("categories")[cid] = rec
        self.state.touch()
        return rec

    # --- offer urls ------------------------------------------------------------------------------

    def _all_offer_urls(self) -> list[dict]:
        merged = dict(self.catalog.offer_urls)
        merged.update(self._objects("offer_urls"))
        return [self._url_record(u) for u in merged.values()]

    def _url_record(self, u: dict) -> dict:
        now = u["time_created"]
        return {
            **u,
            "remote_offer_resource": {
                "network_offer_id": u["network_offer_id"],
                "network_id": self.network_id,
                "resource_type": "offer_url",
                "remote_resource_id": "",
                "resource_id": u["network_offer_url_id"],
                "last_value_md5": "",
                "json_config": "{}",
                "json_data": "{}",
                "time_created": now,
                "time_saved": now,
            },
        }

    def get_offer_url(self, uid: int) -> dict:
        u = self.offer_url(uid)
        if u is None:
            raise not_found()
        return self._url_record(u)

    def patch_offer_urls(self, body: Any) -> dict:
        body = v.obj(body)
        oid = v.integer(v.req(body, "network_offer_id"), "network_offer_id")
        if self.offer_fields(oid) is None:
            raise invalid("network_offer_id does not exist")
        ids = v.int_list(v.req(body, "network_offer_url_ids"), "network_offer_url_ids")
        if not ids:
            raise invalid("network_offer_url_ids must not be empty")
        urls = {}
        for uid in ids:
            u = self.offer_url(uid)
            if u is None or u["network_offer_id"] != oid:
                raise invalid("every offer URL must belong to network_offer_id")
            urls[uid] = dict(u, network_affiliate_ids=list(u["network_affiliate_ids"]))
        fields = v.req(body, "fields")
        if not isinstance(fields, list) or not fields:
            raise invalid("fields must be a non-empty list")
        ops = []
        for item in fields:
            if not isinstance(item, dict):
                raise invalid("fields items must be objects")
            ftype = v.enum(item.get("field_type"), "field_type", choices.OFFER_URL_FIELD_TYPES)
            op = v.enum(item.get("operator"), "operator", choices.OFFER_URL_OPERATORS)
            if op != "overwrite" and ftype not in choices.OFFER_URL_MULTI_VALUE:
                raise invalid(f"operator {op} applies only to multi-value fields")
            if "field_value" not in item:
                raise invalid("field_value is required")
            value = item["field_value"]
            if ftype == "url_status":
                v.enum(value, "url_status", choices.URL_STATUSES)
            elif ftype in ("is_apply_specific_affiliates", "is_hidden_affiliate"):
                v.boolean(value, ftype)
            elif ftype == "name":
                v.string(value, "name")
            elif ftype == "destination_url_replace":
                if not isinstance(value, dict) or set(value) != {"find", "replace"}:
                    raise invalid('destination_url_replace needs {"find": ..., "replace": ...}')
                v.string(value["find"], "find")
                v.string(value["replace"], "replace", empty=True)
            elif op != "clear":
                for fid in v.int_list(value, "network_affiliate_ids"):
                    if fid not in self.catalog.affiliates:
                        raise invalid("network_affiliate_ids must be existing affiliates")
            ops.append((ftype, op, value))
        now = _now()
        for u in urls.values():
            for ftype, op, value in ops:
                if ftype == "network_affiliate_ids":
                    cur = u["network_affiliate_ids"]
                    if op == "overwrite":
                        cur = list(dict.fromkeys(value))
                    elif op == "append":
                        cur = list(dict.fromkeys([*cur, *value]))
                    elif op == "delete":
                        cur = [x for x in cur if x not in set(value)]
                    else:
                        cur = []
                    u["network_affiliate_ids"] = cur
                elif ftype == "destination_url_replace":
                    u["destination_url"] = u["destination_url"].replace(
                        value["find"], value["replace"]
                    )
                else:
                    u[ftype] = value
            u["time_saved"] = now
            self._objects("offer_urls")[u["network_offer_url_id"]] = u
        self.state.touch()
        return {"result": True}

    # --- reads -----------------------------------------------------------------------------------

    def get_label(self, label: str) -> dict:
        rec = self.catalog.labels.get(label)
        if rec is None:
            raise not_found()
        out = dict(rec)
        out["relationship"] = {
            "offers": {
                "total": len(rec["offer_ids"]),
                "entries": [
                    self.catalog.offer_summary(o, self.offer_fields(o)) for o in rec["offer_ids"]
                ],
            },
            "affiliates": {
                "total": len(rec["affiliate_ids"]),
                "entries": [self.catalog.affiliate_small(a) for a in rec["affiliate_ids"]],
            },
        }
        return out

    def get_payout_revenue(self, sid: int, expand: bool) -> dict:
        s = self.catalog.cpr_settings.get(sid)
        if s is None:
            raise not_found()
        rec = dict(s)
        if not expand:
            rec["relationship"] = {}
            return rec
        oid = s["network_offer_id"]
        offer = self.offer_fields(oid)
        base = offer["payout_revenue"][0]
        affs = (
            list(self.catalog.affiliates)
            if s["is_apply_all_affiliates"]
            else s["network_affiliate_ids"]
        )
        rec["relationship"] = {
            "affiliates": {
                "total": len(affs),
                "entries": [self.catalog.affiliates[a] for a in affs],
            },
            "offer": self.catalog.offer_summary(oid, offer),
            "payout_revenue": dict(base),
            "currency_id": offer["currency_id"],
            "ruleset": _ruleset(self.network_id),
            "variables": {"total": 0, "entries": []},
            "offer_urls": [
                {
                    "network_offer_url_id": u,
                    "network_id": self.network_id,
                    "network_offer_id": oid,
                    "name": self.offer_url(u)["name"],
                }
                for u in s["network_offer_url_ids"]
            ],
        }
        return rec

    def tiered_commissions(self, body: Any, page: int, size: int) -> dict:
        body = v.obj(body)
        terms = _find_terms(body.get("search_terms"), ("name",))
        flt = body.get("filters") or {}
        if not isinstance(flt, dict):
            raise invalid("filters must be an object")
        lists = {}
        for name in ("network_affiliate_ids", "network_offer_ids", "network_advertiser_ids"):
            if flt.get(name):
                lists[name] = set(v.int_list(flt[name], f"filters.{name}"))
        unknown = set(flt) - {
            "network_affiliate_ids",
            "network_offer_ids",
            "network_advertiser_ids",
        }
        if unknown:
            raise invalid(f"unknown filters: {', '.join(sorted(unknown))}")
        out = []
        for tid in sorted(self.catalog.tiered):
            t = self.catalog.tiered[tid]
            if terms and not any(val.lower() in str(t.get(f, "")).lower() for f, val in terms):
                continue
            rel = t["relationship"]
            ok = True
            for name, wanted in lists.items():
                have = set(rel[name])
                if name == "network_affiliate_ids" and t["is_apply_all_affiliates"]:
                    continue
                if not have & wanted:
                    ok = False
            if ok:
                out.append(t)
        start = (page - 1) * size
        return {
            "commissions": out[start : start + size],
            "paging": {"page": page, "page_size": size, "total_count": len(out)},
        }

    def pixels(self, body: Any, page: int, size: int) -> dict:
        body = v.obj(body)
        query = body.get("query") or {}
        if not isinstance(query, dict):
            raise invalid("query must be an object")
        string_fields = tuple(
            k for k, val in next(iter(self.catalog.pixels.values())).items() if isinstance(val, str)
        )
        terms = _find_terms(query.get("search_terms"), string_fields)
        flt = query.get("filters") or {}
        if not isinstance(flt, dict):
            raise invalid("filters must be an object")
        ptype = flt.get("pixel_type")
        if ptype is not None:
            v.string(ptype, "pixel_type")
        offers = (
            set(v.int_list(flt["network_offer_ids"], "network_offer_ids"))
            if flt.get("network_offer_ids")
            else None
        )
        out = []
        for pid in sorted(self.catalog.pixels):
            p = self.catalog.pixels[pid]
            if ptype is not None and p["pixel_type"] != ptype:
                continue
            if offers is not None and p["network_offer_id"] not in offers:
                continue
            if terms and not any(val.lower() in str(p.get(f, "")).lower() for f, val in terms):
                continue
            out.append(p)
        start = (page - 1) * size
        return {
            "pixels": out[start : start + size],
            "paging": {"page": page, "page_size": size, "total_count": len(out)},
        }

    def encode(self, body: Any) -> dict:
        from affiliate_network.sandbox.ids import MAX_ENCODABLE

        body = v.obj(body)
        v.enum(v.req(body, "type"), "type", choices.ENCODE_TYPES)
        ids = v.int_list(v.req(body, "ids"), "ids")
        for i in ids:
            if not 0 < i <= MAX_ENCODABLE:
                raise invalid("ids must be positive integers")
        return {
            "values": [
                {"decoded": i, "encoded": encode_tracking_id(i, self.encode_key)} for i in ids
            ]
        }

    # --- admin views -----------------------------------------------------------------------------

    def catalog_listing(self) -> dict:
        cat = self.catalog
        return {
            "region": self.region,
            "network_id": self.network_id,
            "network_offer_ids": sorted(cat.offers),
            "network_offer_group_ids": sorted(cat.offer_groups),
            "network_offer_url_ids": sorted(cat.offer_urls),
            "network_affiliate_ids": sorted(cat.affiliates),
            "network_advertiser_ids": sorted(cat.advertisers),
            "network_custom_payout_revenue_setting_ids": sorted(cat.cpr_settings),
            "labels": sorted(cat.labels),
            "network_channel_ids": sorted(cat.channels),
            "network_category_ids": sorted(set(cat.categories) | set(self._objects("categories"))),
            "network_tracking_domain_ids": sorted(cat.tracking_domains),
            "network_affiliate_tracking_domain_ids": sorted(self.assignments()),
            "network_tiered_commission_ids": sorted(cat.tiered),
            "network_pixel_ids": sorted(cat.pixels),
            "transaction_ids": self.gen.sample_transaction_ids(),
            "on_hold_conversion_ids": self.gen.sample_on_hold_ids(),
            "first_date": self.cfg.first_date.isoformat(),
            "last_date": self.cfg.end_date.isoformat(),
            "offers": {
                str(o): {
                    "network_advertiser_id": info["advertiser_id"],
                    "network_offer_group_id": info["group_id"],
                    "network_offer_url_ids": [
                        u for u, d in cat.offer_urls.items() if d["network_offer_id"] == o
                    ],
                }
                for o, info in cat.offer_info.items()
            },
        }


def _find_terms(raw: Any, fields: tuple[str, ...]) -> list[tuple[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise invalid("search_terms must be a list")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise invalid("search term items must be objects")
        stype, value = item.get("search_type"), item.get("value")
        if stype not in fields or not isinstance(value, str):
            raise invalid(f"unknown search_type {stype!r}")
        out.append((stype, value))
    return out


def _ruleset(nid: int) -> dict:
    lists = [
        "platforms",
        "device_types",
        "os_versions",
        "browsers",
        "languages",
        "countries",
        "regions",
        "cities",
        "dmas",
        "mobile_carriers",
        "connection_types",
        "ips",
        "isps",
        "brands",
        "postal_codes",
        "days_parting",
    ]
    return {
        "network_id": nid,
        "network_ruleset_id": 0,
        "time_created": 0,
        "time_saved": 0,
        **{name: [] for name in lists},
        "is_block_proxy": False,
        "is_use_day_parting": False,
        "day_parting_apply_to": "",
        "day_parting_timezone_id": 0,
    }


def _reporting(a: dict[str, float]) -> dict[str, float]:
    total = int(a["clicks"])
    unique = round(total * 0.92)
    invalid_c = round(total * 0.02)
    imp = total * 20
    cv = int(a["cv"])
    event = int(a["event"])
    revenue = round(a["revenue"], 2)
    return {
        "imp": imp,
        "total_click": total,
        "unique_click": unique,
        "invalid_click": invalid_c,
        "duplicate_click": total - unique,
        "ctr": round(total / imp * 100, 4) if imp else 0,
        "cv": cv,
        "view_through_cv": 0,
        "event": event,
        "cvr": round(cv / unique * 100, 4) if unique else 0,
        "evr": round(event / unique * 100, 4) if unique else 0,
        "rpc": round(revenue / total, 4) if total else 0,
        "rpm": round(revenue / imp * 1000, 4) if imp else 0,
        "revenue": revenue,
        "redirect_traffic_revenue": 0,
        "on_hold_conversion_count": int(a["oh"]),
        "on_hold_potential_revenue": round(a["oh_rev"], 2),
    }
