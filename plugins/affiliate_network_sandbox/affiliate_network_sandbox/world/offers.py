"""Offers and offer groups (PUT), their payout/revenue entries, offer URLs (GET, bulk edit)."""

from typing import Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox import validate as v
from affiliate_network_sandbox.errors import invalid, not_found
from affiliate_network_sandbox.ids import encode_tracking_id
from affiliate_network_sandbox.world.base import WorldBase, _ruleset


def _put_body(body: Any, known: set[str], id_field: str, object_id: int) -> dict[str, Any]:
    """The JSON object of a PUT, refused if it names an unknown field or another object's id.

    :param body: the decoded request body.
    :param known: the fields the resource accepts (read-only ones included; they are ignored).
    :param id_field: the body field that repeats the path's id.
    :param object_id: the id in the path.
    """
    checked = v.obj(body)
    unknown = set(checked) - known
    if unknown:
        raise invalid(f"unknown fields: {', '.join(sorted(unknown))}")
    if id_field in checked and checked[id_field] != object_id:
        raise invalid(f"{id_field} does not match the path")
    return checked


class OffersArea(WorldBase):
    """Offers and offer groups (PUT), their payout/revenue entries, offer URLs (GET, bulk edit)."""

    # --- offer groups ----------------------------------------------------------------------------

    def offer_group_record(self, gid: int, f: dict[str, Any]) -> dict[str, Any]:
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

    def put_offer_group(self, gid: int, body: Any) -> dict[str, Any]:
        current = self.offer_group_fields(gid)
        if current is None:
            raise not_found()
        known = (
            set(choices.OFFER_GROUP_REQUIRED)
            | set(choices.OFFER_GROUP_DEFAULTS)
            | set(choices.CAP_FIELDS)
            | set(choices.READ_ONLY_FIELDS)
            | {"network_offer_group_id"}
        )
        body = _put_body(body, known, "network_offer_group_id", gid)
        name = v.string(v.req(body, "name"), "name")
        adv = self._existing_advertiser(body)
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
        f["time_saved"] = self.now()
        self._objects("offer_groups")[gid] = f
        self.state.touch()
        return self.offer_group_record(gid, f)

    # --- offers ----------------------------------------------------------------------------------

    def offer_record(self, oid: int, f: dict[str, Any]) -> dict[str, Any]:
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

    def _existing_advertiser(self, body: dict[str, Any]) -> int:
        """The body's required ``network_advertiser_id``, refused unless the catalog holds it."""
        adv = v.integer(v.req(body, "network_advertiser_id"), "network_advertiser_id")
        if adv not in self.catalog.advertisers:
            raise invalid("network_advertiser_id does not exist")
        return adv

    def _category(self, cid: int) -> dict[str, Any] | None:
        return self._objects("categories").get(cid) or self.catalog.categories.get(cid)

    def put_offer(self, oid: int, body: Any) -> dict[str, Any]:
        current = self.offer_fields(oid)
        if current is None:
            raise not_found()
        known = (
            set(choices.OFFER_DEFAULTS)
            | set(choices.OFFER_REQUIRED)
            | set(choices.READ_ONLY_FIELDS)
            | {"network_offer_id", "network_offer_group_id", "payout_revenue", "encoded_value"}
        )
        body = _put_body(body, known, "network_offer_id", oid)
        f = dict(choices.OFFER_DEFAULTS)
        f["labels"] = []
        f["name"] = v.string(v.req(body, "name"), "name")
        f["network_advertiser_id"] = self._existing_advertiser(body)
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
        f["time_saved"] = self.now()
        self._objects("offers")[oid] = f
        self.state.touch()
        return self.offer_record(oid, f)

    def _payout_revenue(self, oid: int, raw: Any, current: dict[str, Any]) -> list[dict[str, Any]]:
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

    def _all_offer_urls(self) -> list[dict[str, Any]]:
        merged = dict(self.catalog.offer_urls)
        merged.update(self._objects("offer_urls"))
        return [self._url_record(u) for u in merged.values()]

    def _url_record(self, u: dict[str, Any]) -> dict[str, Any]:
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

    def get_offer_url(self, uid: int) -> dict[str, Any]:
        u = self.offer_url(uid)
        if u is None:
            raise not_found()
        return self._url_record(u)

    def patch_offer_urls(self, body: Any) -> dict[str, Any]:
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
        now = self.now()
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
