"""Reporting: the conversion report, on-hold status, sale amounts, flowchart, entity table."""

import datetime as dt
import zoneinfo
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import orjson

from affiliate_network_sandbox import choices
from affiliate_network_sandbox import validate as v
from affiliate_network_sandbox.data import (
    KIND_CONVERSION,
    KIND_EVENT,
    Segment,
    locate_page,
)
from affiliate_network_sandbox.entities import (
    Catalog,
)
from affiliate_network_sandbox.errors import invalid, not_found
from affiliate_network_sandbox.late_writes import LateWrites
from affiliate_network_sandbox.money import convert_sums, json_amount
from affiliate_network_sandbox.world.base import (
    Raw,
    WorldBase,
)


class ReportingArea(WorldBase):
    """Reporting: the conversion report, on-hold status, sale amounts, flowchart, entity table."""

    # ============================================================================================
    # POST /networks/reporting/conversions
    # ============================================================================================

    def conversion_report(self, body: Any, page: int, size: int) -> Raw:
        body = v.obj(body)
        t0, t1 = self.window(body)
        # Documented: raw conversion reports return amounts in the offer's currency; currency_id
        # is checked but not applied (each record carries its offer's currency_id).
        self.currency(body)
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
        rows = 0
        if not flt and not terms:
            total = sum(len(s) for s in segs)
            parts: list[str] = []
            for seg, lo, hi in locate_page(segs, (page - 1) * size, size):
                parts.extend(gen.json_range(seg, lo, hi))
                rows += hi - lo
        else:
            hits = self._matches(segs, flt, terms, (t0, t1, show_c, show_e))
            total = len(hits)
            start = (page - 1) * size
            parts = []
            for si, idx in hits[start : start + size]:
                seg = segs[si]
                parts.append(gen.record_json(seg.kind, seg.ctx, idx))
                gen.records_built += 1
                rows += 1
        paging_tail = (
            f'],"paging":{{"page":{page},"page_size":{size},"total_count":{total}}}}}'
        ).encode()
        return Raw([b'{"conversions":[', ",".join(parts).encode(), paging_tail], rows=rows)

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
        key: tuple[Any, ...],
    ) -> list[tuple[int, int]]:
        """(segment index, record index) of matching records, in report order (cached)."""
        ckey = (
            self.state.version,
            # Late and deleted records change a past window's content as the clock runs.
            self.gen.visible_end() if self.gen.changes_with_clock else 0,
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
                        rec = gen.record_dict(seg.kind, seg.ctx, idx)
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
            found = gen.find_conversion(value)
            return [found] if found else []
        if stype == "transaction_id":
            tx = gen.find_transaction(value)
            if not tx:
                return []
            c, i = tx
            out: list[tuple[int, Any, int]] = [(KIND_CONVERSION, c, i)]
            j = gen.has_event(c, i)
            if j is not None:
                out.append((KIND_EVENT, c, j))
            return out
        held = gen.find_on_hold(value)
        return [(KIND_CONVERSION, held[0], held[1])] if held else []

    # ============================================================================================
    # PATCH /networks/reporting/onhold
    # ============================================================================================

    def patch_onhold(
        self, body: Any, ignore_ids: list[str], late: LateWrites | None = None
    ) -> dict[str, Any]:
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
        for ohid, (c, i) in located:
            if ohid in ignore:
                continue  # fault: reported as applied, applied "later" (never)
            value = c.vbase | i
            if late is not None and late.defer(self, ohid, value, status):
                continue  # late-writes mode: lands after its delay, or never (late_writes.py)
            self.land_onhold(ohid, value, status)
        return {"result": True}

    def land_onhold(self, ohid: str, value: int, status: str) -> bool:
        """Make ``status`` the current on-hold status of one conversion (a status snapshot).

        :returns: whether anything changed (the same status again adds no snapshot).
        """
        extra = self.state.onhold.setdefault(value, [])
        current = extra[-1]["status"] if extra else "on_hold"
        if current == status:
            return False
        extra.append(
            {
                "initiator": choices.SNAPSHOT_INITIATOR,
                "network_employee": "api",
                "network_id": self.network_id,
                "on_hold_conversion_history_snapshot_id": value * 8 + min(len(extra) + 1, 7),
                "on_hold_conversion_id": ohid,
                "snapshot_type": "status",
                "status": status,
                "unix_timestamp": self.now(),
            }
        )
        self.state.touch()
        return True

    # ============================================================================================
    # PUT /networks/reporting/conversions/{id}/saleamount
    # ============================================================================================

    def put_sale_amount(self, conversion_id: str, body: Any) -> dict[str, Any]:
        body = v.obj(body)
        amount = v.number(v.req(body, "sale_amount"), "sale_amount", lo=0)
        is_event = body.get("is_event", False)
        is_event = False if is_event is None else v.boolean(is_event, "is_event")
        hit = self.gen.find_conversion(conversion_id)
        if hit is None or (hit[0] == KIND_EVENT) != is_event:
            raise not_found()
        kind, c, idx = hit
        rec = self.gen.record_dict(kind, c, idx)
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
                "unix_timestamp": self.now(),
            }
        )
        self.state.touch()
        return {"result": True}

    # ============================================================================================
    # GET /networks/reporting/transactions/{id}/flowchart
    # ============================================================================================

    def flowchart(self, transaction_id: str) -> dict[str, Any]:
        gen = self.gen
        hit = gen.find_transaction(transaction_id)
        if hit is None:
            raise not_found()
        c, i = hit
        recs = [gen.build_conversion(c, i)]
        j = gen.has_event(c, i)
        # The event follows its conversion by minutes: not shown before the clock reaches it.
        ve = gen.visible_end()
        if j is not None and gen.event_ts(c, j) < ve and not gen.event_hidden(c, j, ve):
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
                "currency_id": base["currency_id"],
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
            item = _flowchart_conversion(rec, transaction_id, cpr)
            conversions.append(item)
            # Postbacks fire for approved conversions and events of affiliates with a pixel.
            if pixel_id and rec["status"] == choices.STATUS_APPROVED:
                pixel_logs.append(
                    {
                        "conversion_id": rec["conversion_id"],
                        "unix_timestamp": rec["relationship"]["unix_timestamp_postback"],
                        "is_success": True,
                        "pixel_id": pixel_id,
                        "relationship": {},
                    }
                )
        return {"clicks": clicks, "conversions": conversions, "pixel_logs": pixel_logs}

    # ============================================================================================
    # POST /affiliates/reporting/entity/table
    # ============================================================================================

    def entity_table(self, affiliate_id: int, body: Any) -> dict[str, Any]:
        allowed = {k: p for k, p in choices.CONVERSION_FILTER_FIELDS.items() if k != "affiliate"}
        t0, t1, tz, currency, cols, flt = self._table_request(body, choices.ENTITY_COLUMNS, allowed)
        gen = self.gen
        cat = self.catalog
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        labels: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        rows = self._table_records(
            t0,
            t1,
            flt,
            keep=lambda u: gen.pair((u >> 16) % gen.pairs).fid == affiliate_id,
        )
        for kind, u, rec in rows:
            key, col_objs = self._row_key(cols, rec, tz, cat)
            agg = groups.get(key)
            if agg is None:
                agg = groups[key] = {"clicks": 0, "cv": 0, "event": 0, "oh": 0}
                agg["revenue"] = Sums()
                agg["oh_rev"] = Sums()
                labels[key] = col_objs
            cur = rec["currency_id"]
            if kind == KIND_EVENT:
                agg["event"] += 1
                agg["revenue"].add(cur, rec["payout"])
                continue
            lo_c, hi_c = choices.CLICKS_PER_CONVERSION_RANGE
            agg["clicks"] += lo_c + (u >> 48) % (hi_c - lo_c + 1)
            if rec["status"] == choices.STATUS_APPROVED:
                agg["cv"] += 1
                agg["revenue"].add(cur, rec["payout"])
            elif rec["status"] == choices.STATUS_PENDING:
                agg["oh"] += 1
                agg["oh_rev"].add(cur, rec["payout"])
        return _table(groups, labels, lambda a: _reporting(a, currency))

    # ============================================================================================
    # POST /networks/reporting/entity/table
    # ============================================================================================

    def network_entity_table(self, body: Any) -> dict[str, Any]:
        """The network's aggregated report, computed from the same records the conversion
        report serves, with their current statuses (``choices.NETWORK_COUNTED_STATUS``)."""
        t0, t1, tz, currency, cols, flt = self._table_request(
            body, choices.NETWORK_ENTITY_COLUMNS, choices.CONVERSION_FILTER_FIELDS
        )
        cat = self.catalog
        money = ("payout", "revenue", "oh_payout", "oh_revenue")
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        labels: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for kind, _u, rec in self._table_records(t0, t1, flt):
            key, col_objs = self._row_key(cols, rec, tz, cat)
            agg = groups.get(key)
            if agg is None:
                agg = groups[key] = {"cv": 0, "event": 0, "oh": 0}
                for name in money:
                    agg[name] = Sums()
                labels[key] = col_objs
            # Exact sums per currency of the amounts as served, converted and rounded once.
            cur, payout, revenue = rec["currency_id"], rec["payout"], rec["revenue"]
            status = rec["status"]
            if status == choices.NETWORK_COUNTED_STATUS:
                agg["event" if kind == KIND_EVENT else "cv"] += 1
                agg["payout"].add(cur, payout)
                agg["revenue"].add(cur, revenue)
            elif status == choices.NETWORK_ON_HOLD_STATUS and kind == KIND_CONVERSION:
                agg["oh"] += 1
                agg["oh_payout"].add(cur, payout)
                agg["oh_revenue"].add(cur, revenue)
        return _table(groups, labels, lambda a: _network_reporting(a, currency))

    def _table_request(
        self, body: Any, columns: Any, filter_fields: Any
    ) -> tuple[int, int, Any, str, list[str], dict[str, Any]]:
        """An aggregated report's body: window, timezone, currency, columns and filters.

        :returns: ``(t0, t1, tz, currency, columns, filters)``.
        """
        body = v.obj(body)
        t0, t1 = self.window(body, "aggregate")
        _, tzname = self.timezone(body)
        currency = self.currency(body)
        cols_raw = v.req(body, "columns")
        if not isinstance(cols_raw, list) or not 1 <= len(cols_raw) <= choices.MAX_COLUMNS:
            raise invalid(f"columns must hold 1 to {choices.MAX_COLUMNS} items")
        cols: list[str] = []
        for item in cols_raw:
            # Errors name the item as sent, in JSON (a plain string, null, a number...).
            sent = orjson.dumps(item).decode()[:100]
            if not isinstance(item, dict) or "column" not in item:
                raise invalid(f'columns items must be objects {{"column": "<name>"}}, got {sent}')
            name = item["column"]
            if not isinstance(name, str):
                raise invalid(f"column must be a string, got {sent}")
            if name not in columns and name not in choices.TIME_COLUMNS:
                raise invalid(f"unknown column {name!r}")
            if name in cols:
                raise invalid(f"duplicate column {name!r}")
            cols.append(name)
        if sum(1 for c in cols if c in choices.TIME_COLUMNS) > 1:
            raise invalid("at most one time column")
        query = body.get("query") or {}
        if not isinstance(query, dict):
            raise invalid("query must be an object")
        flt = self.filters(query.get("filters"), filter_fields)
        return t0, t1, zoneinfo.ZoneInfo(tzname), currency, cols, flt

    def _table_records(
        self,
        t0: int,
        t1: int,
        flt: dict[str, Any],
        keep: Any = None,
    ) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """The window's conversions and events that pass ``filters`` (and ``keep(u)``).

        :returns: ``(kind, u, record)``; ``u`` is the record's core draw (0 without ``keep``).
        """
        gen = self.gen
        for seg in gen.segments(t0, t1, conversions=True, events=True):
            c, kind = seg.ctx, seg.kind
            for idx in range(seg.lo, seg.hi):
                u = 0
                if keep is not None:
                    i = idx if kind == KIND_CONVERSION else (idx * c.n) // c.e
                    u = gen.core(c, i)[0]
                    if not keep(u):
                        continue
                if flt:
                    q = self.quick(kind, c, idx)
                    if not all(q[k] in vals for k, vals in flt.items()):
                        continue
                yield kind, u, gen.record_dict(kind, c, idx)

    def _row_key(
        self, cols: list[str], rec: dict[str, Any], tz: Any, cat: Catalog
    ) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
        """A record's group key and its ``columns`` items (``column_type``, ``id``, ``label``)."""
        key_parts = []
        col_objs = []
        for col in cols:
            cid, label = self._column_value(col, rec, tz, cat)
            key_parts.append(cid)
            col_objs.append({"column_type": col, "id": cid, "label": label})
        return tuple(key_parts), col_objs

    @staticmethod
    def _column_value(col: str, rec: dict[str, Any], tz: Any, cat: Catalog) -> tuple[str, str]:
        rel = rec["relationship"]
        if col == "affiliate":
            aff = rel["affiliate"]
            return str(aff["network_affiliate_id"]), aff["name"]
        if col == "offer":
            return str(rel["offer"]["network_offer_id"]), rel["offer"]["name"]
        if col == "advertiser":
            adv = rel["advertiser"]
            return str(adv["network_advertiser_id"]), adv["name"]
        if col == "offer_url":
            url = rel["offer_url"]
            return str(url["network_offer_url_id"]), url["name"]
        if col == "event_name":
            return rec["event"], rec["event"]
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


class Sums:
    """Exact sums of amounts per currency (never added across currencies until converted)."""

    __slots__ = ("by_currency",)

    def __init__(self) -> None:
        self.by_currency: dict[str, Decimal] = {}

    def add(self, currency: str, amount: float | int) -> None:
        # The amount's shortest text is the decimal the record serves.
        value = Decimal(repr(amount))
        self.by_currency[currency] = self.by_currency.get(currency, Decimal(0)) + value

    def total(self, target: str) -> Decimal:
        """The sums converted to ``target`` (exact when every amount is in it), rounded once."""
        return convert_sums(self.by_currency, target)


def _reporting(a: dict[str, Any], currency: str) -> dict[str, Any]:
    total = int(a["clicks"])
    unique = round(total * 0.92)
    invalid_c = round(total * 0.02)
    imp = total * 20
    cv = int(a["cv"])
    event = int(a["event"])
    revenue = json_amount(a["revenue"].total(currency), currency)
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
        "on_hold_potential_revenue": json_amount(a["oh_rev"].total(currency), currency),
    }


def _network_reporting(a: dict[str, Any], currency: str) -> dict[str, Any]:
    """The network report's metrics of one row (``choices.NETWORK_COUNTED_STATUS``), in
    ``currency`` (:func:`~affiliate_network_sandbox.money.convert_sums`)."""
    cv, event = int(a["cv"]), int(a["event"])
    payout, revenue = a["payout"].total(currency), a["revenue"].total(currency)
    return {
        "cv": cv,
        "total_cv": cv,
        "view_through_cv": 0,
        "event": event,
        "payout": json_amount(payout, currency),
        "revenue": json_amount(revenue, currency),
        "profit": json_amount(revenue - payout, currency),
        "on_hold_conversion_count": int(a["oh"]),
        "on_hold_potential_payout": json_amount(a["oh_payout"].total(currency), currency),
        "on_hold_potential_revenue": json_amount(a["oh_revenue"].total(currency), currency),
    }


def _flowchart_conversion(
    rec: dict[str, Any], transaction_id: str, cpr: dict[str, Any] | None
) -> dict[str, Any]:
    """One conversion (or event) of a transaction's flowchart, from its report record."""
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
            "holding_period_end": rec["conversion_unix_timestamp"] + choices.HOLDING_PERIOD_S,
            "status": snaps[-1]["status"],
        }
    return item


def _table(
    groups: dict[tuple[Any, ...], Any],
    labels: dict[tuple[Any, ...], list[dict[str, Any]]],
    reporting: Any,
) -> dict[str, Any]:
    """The ``table`` answer, capped; a capped answer carries ``incomplete_results: true``."""
    rows = [
        {"columns": labels[key], "reporting": reporting(groups[key])}
        for key in sorted(groups)[: choices.MAX_TABLE_ROWS]
    ]
    doc: dict[str, Any] = {"table": rows}
    if len(groups) > choices.MAX_TABLE_ROWS:
        doc["incomplete_results"] = True
    return doc
