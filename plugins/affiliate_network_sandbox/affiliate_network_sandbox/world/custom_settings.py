"""Custom settings: scrub rates (POST), payout/revenue (GET), tiered commissions (find)."""

from typing import Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox import validate as v
from affiliate_network_sandbox.errors import invalid, not_found
from affiliate_network_sandbox.world.base import (
    SCRUB_RATE_BASE,
    WorldBase,
    _find_terms,
    _ruleset,
)


class CustomSettingsArea(WorldBase):
    """Custom settings: scrub rates (POST), payout/revenue (GET), tiered commissions (find)."""

    def post_scrub_rate(self, body: Any) -> dict[str, Any]:
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
        now = self.now()
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

    def get_payout_revenue(self, sid: int, expand: bool) -> dict[str, Any]:
        s = self.catalog.cpr_settings.get(sid)
        if s is None:
            raise not_found()
        rec = dict(s)
        if not expand:
            rec["relationship"] = {}
            return rec
        oid = s["network_offer_id"]
        offer = self.offer_fields(oid)
        if offer is None:  # the setting names an offer the world no longer has
            raise not_found()
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
                    "name": (self.offer_url(u) or {}).get("name"),
                }
                for u in s["network_offer_url_ids"]
            ],
        }
        return rec

    def tiered_commissions(self, body: Any, page: int, size: int) -> dict[str, Any]:
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
