"""Catalog entities: tracking-domain assignments, channels, categories, labels, pixels, encode."""

from typing import Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox import validate as v
from affiliate_network_sandbox.entities import (
    ASSIGNMENT_BASE,
    CATEGORY_BASE,
)
from affiliate_network_sandbox.errors import invalid, not_found
from affiliate_network_sandbox.ids import encode_tracking_id
from affiliate_network_sandbox.world.base import WorldBase, _find_terms


class CatalogArea(WorldBase):
    """Catalog entities: tracking domains, channels, categories, labels, pixels, encode."""

    def assignment_record(self, a: dict[str, Any]) -> dict[str, Any]:
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

    def put_tracking_domain(self, affiliate_id: int, body: Any) -> dict[str, Any]:
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

    def put_channel(self, cid: int, body: Any) -> dict[str, Any]:
        current = self.channel(cid)
        if current is None:
            raise not_found()
        body = v.obj(body)
        name = v.string(v.req(body, "name"), "name")
        status = v.enum(v.req(body, "status"), "status", choices.CHANNEL_STATUSES)
        rec = {**current, "name": name, "status": status, "time_saved": self.now()}
        self._objects("channels")[cid] = rec
        self.state.touch()
        return rec

    def post_category(self, body: Any) -> dict[str, Any]:
        body = v.obj(body)
        name = v.string(v.req(body, "name"), "name")
        status = v.enum(v.req(body, "status"), "status", choices.CATEGORY_STATUSES)
        cid = self.state.new_id("category", CATEGORY_BASE + 100)
        now = self.now()
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

    def get_label(self, label: str) -> dict[str, Any]:
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

    def pixels(self, body: Any, page: int, size: int) -> dict[str, Any]:
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

    def encode(self, body: Any) -> dict[str, Any]:
        from affiliate_network_sandbox.ids import MAX_ENCODABLE

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
