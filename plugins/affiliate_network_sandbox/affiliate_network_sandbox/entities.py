"""The catalog of a world: advertisers, offers, affiliates and the other configured objects.

Small (tens to thousands of objects), built once per reset with a seeded ``random.Random``.
Writes never modify these base objects; the state overlay stores replacements.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.config import DataConfig
from affiliate_network_sandbox.money import from_usd, json_amount, to_minor

# Id ranges differ per resource so an id of one kind passed as another is caught.
ADVERTISER_BASE = 5000
OFFER_BASE = 100
AFFILIATE_BASE = 2000
OFFER_GROUP_BASE = 300
OFFER_URL_BASE = 700
CPR_SETTING_BASE = 900
TIERED_BASE = 80
PIXEL_BASE = 1200
CHANNEL_BASE = 40
CATEGORY_BASE = 10
TRACKING_DOMAIN_BASE = 60
ASSIGNMENT_BASE = 3000
EMPLOYEE_BASE = 70
TIER_BASE = 20
CAMPAIGN_BASE = 4000
POSTBACK_CONTROL_BASE = 90
PAYOUT_REVENUE_BASE = 10000

_BRANDS = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Wonka",
    "Tyrell",
    "Cyberdyne",
    "Soylent",
    "Oscorp",
    "Aperture",
    "Monarch",
]
_PRODUCTS = [
    "VPN",
    "Meal Kit",
    "Credit Card",
    "Insurance Quote",
    "Mobile Game",
    "Dating App",
    "Language App",
    "Solar Panels",
    "Streaming",
    "Fitness Tracker",
    "Crypto Wallet",
    "Travel Deals",
]
_AFFILIATE_NAMES = [
    "CouponCrowd",
    "DealDigger",
    "NativeNinja",
    "PushPros",
    "ReviewRoost",
    "SocialSpark",
    "EmailEmpire",
    "CashbackCove",
    "SearchSurge",
    "InfluenceHub",
    "AppAdvance",
    "ContentCraft",
]
_EVENTS = ["Purchase", "Upsell", "Registration", "Deposit", "Subscription", "Install"]
_FIRST = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hana"]
_LAST = ["Ortiz", "Nakamura", "Schmidt", "Okafor", "Larsen", "Moreau", "Kowalski", "Singh"]
_LABELS = ["vip", "cpa", "mobile", "seasonal", "test-traffic"]


def _ts(day: dt.date, seconds: int = 0) -> int:
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()) + seconds


def _scaled(amount: float | int, factor: str, currency: str) -> float | int:
    """``amount`` times ``factor`` at ``currency``'s minor unit (custom payout/revenue amounts).

    USD keeps the float arithmetic the one-currency world always used (same values).
    """
    if currency == "USD":
        return round(float(amount) * float(factor), 2)
    value = to_minor(Decimal(repr(amount)) * Decimal(factor), currency)
    return json_amount(value, currency)


def _named_records(
    base: int, id_field: str, names: list[str], nid: int, created: int
) -> dict[int, dict[str, Any]]:
    """Active named records (categories, channels) with ids ``base + 1``, ``base + 2``..."""
    return {
        base + 1 + k: {
            id_field: base + 1 + k,
            "network_id": nid,
            "name": name,
            "status": "active",
            "time_created": created,
            "time_saved": created,
        }
        for k, name in enumerate(names)
    }


class Catalog:
    """Base objects of a world, each a plain dict in the spec's shape.

    :param cfg: the data configuration.
    :param seed: world seed (the EU world uses a different one).
    :param network_id: network id stamped on every object.
    """

    def __init__(self, cfg: DataConfig, seed: int, network_id: int) -> None:
        rng = random.Random(seed * 7919 + 17)
        self.network_id = nid = network_id
        created = _ts(cfg.first_date - dt.timedelta(days=400))
        self.created = created
        self.employees = [
            {
                "account_status": "active",
                "first_name": _FIRST[k],
                "full_name": f"{_FIRST[k]} {_LAST[k]}",
                "last_name": _LAST[k],
                "network_employee_id": EMPLOYEE_BASE + k,
                "network_id": nid,
            }
            for k in range(len(_FIRST))
        ]

        self.advertisers: dict[int, dict[str, Any]] = {}
        for a in range(cfg.advertisers):
            aid = ADVERTISER_BASE + 1 + a
            brand = _BRANDS[a % len(_BRANDS)] + ("" if a < len(_BRANDS) else f" {a}")
            self.advertisers[aid] = {
                "network_advertiser_id": aid,
                "network_id": nid,
                "name": f"{brand} Inc.",
                "account_status": "active",
                "network_employee_id": EMPLOYEE_BASE + a % len(_FIRST),
                "sales_manager_id": EMPLOYEE_BASE + (a + 1) % len(_FIRST),
                "address_id": 0,
                "is_contact_address_enabled": False,
                "default_currency_id": "USD",
                "platform_name": "",
                "platform_url": "",
                "platform_username": "",
                "offer_id_macro": "oid",
                "affiliate_id_macro": "affid",
                "accounting_contact_email": f"billing@{brand.lower().replace(' ', '')}.example",
                "internal_notes": "",
                "attribution_method": "last_touch",
                "email_attribution_method": "last_affiliate_attribution",
                "attribution_priority": "click",
                "verification_token": f"vt{aid:06d}",
                "is_expose_publisher_reporting_data": False,
                "reporting_timezone_id": cfg.reporting_timezone_id,
                "time_created": created,
                "time_saved": created,
            }
        adv_ids = list(self.advertisers)

        self.categories = _named_records(
            CATEGORY_BASE,
            "network_category_id",
            ["Finance", "Gaming", "Lifestyle", "Travel", "Utilities"],
            nid,
            created,
        )
        cat_ids = list(self.categories)

        self.tracking_domains: dict[int, dict[str, Any]] = {}
        for k, host in enumerate(["trk.example-net.com", "go.example-net.com", "click.partner.io"]):
            tid = TRACKING_DOMAIN_BASE + 1 + k
            self.tracking_domains[tid] = {
                "network_tracking_domain_id": tid,
                "network_id": nid,
                "url": f"https://{host}",
                "is_primary_domain": k == 0,
                "domain_status": "active",
                "is_unassignable": False,
                "ownership": "network",
                "is_ssl_enabled": True,
                "html_static_redirect": "",
                "url_redirect": "",
                "public_notes": "",
                "time_created": created,
                "time_saved": created,
            }
        td_ids = list(self.tracking_domains)

        # Offers: offer k belongs to advertiser k % A and to one of that advertiser's 2 groups.
        self.offers: dict[int, dict[str, Any]] = {}
        self.offer_info: dict[int, dict[str, Any]] = {}
        n_adv = len(adv_ids)
        for k in range(cfg.offers):
            oid = OFFER_BASE + 1 + k
            a = k % n_adv
            adv = adv_ids[a]
            group = OFFER_GROUP_BASE + 1 + a * 2 + (k // n_adv) % 2
            brand = self.advertisers[adv]["name"].removesuffix(" Inc.")
            product = _PRODUCTS[k % len(_PRODUCTS)]
            payout = round(rng.uniform(2, 40), 2)
            revenue = round(payout * rng.uniform(1.2, 1.8), 2)
            pr_id = PAYOUT_REVENUE_BASE + oid * 10
            event = _EVENTS[k % len(_EVENTS)]
            slug = product.lower().replace(" ", "-")
            dest = f"https://www.{brand.lower().replace(' ', '')}.example/{slug}"
            # The USD draws come first (same draws whatever the currencies), then each amount
            # is expressed in the offer's currency at its minor unit.
            cur = cfg.offer_currencies[k % len(cfg.offer_currencies)]
            base_sale = round(rng.uniform(20, 200), 2)
            self.offer_info[oid] = {
                "advertiser_id": adv,
                "group_id": group,
                "name": f"{brand} - {product} (CPA)",
                "currency_id": cur,
                "payout": from_usd(payout, cur),
                "revenue": from_usd(revenue, cur),
                "event_payout": from_usd(round(payout / 4, 2), cur),
                "event_revenue": from_usd(round(revenue / 4, 2), cur),
                "base_sale": from_usd(base_sale, cur),
                "payout_revenue_id": pr_id,
                "event_payout_revenue_id": pr_id + 1,
                "event_name": event,
                "destination_url": dest + "?tid={transaction_id}",
                "category_id": cat_ids[k % len(cat_ids)],
                "tracking_domain_id": td_ids[k % len(td_ids)],
            }
            self.offers[oid] = self._offer_fields(oid)

        self.affiliates: dict[int, dict[str, Any]] = {}
        for f in range(cfg.affiliates):
            fid = AFFILIATE_BASE + 1 + f
            name = _AFFILIATE_NAMES[f % len(_AFFILIATE_NAMES)] + (
                "" if f < len(_AFFILIATE_NAMES) else f" {f}"
            )
            self.affiliates[fid] = {
                "network_affiliate_id": fid,
                "network_id": nid,
                "name": name,
                "account_status": "active",
                "network_employee_id": EMPLOYEE_BASE + f % len(_FIRST),
                "internal_notes": "",
                "has_notifications": True,
                "network_traffic_source_id": 1 + f % 5,
                "account_executive_id": EMPLOYEE_BASE + (f + 3) % len(_FIRST),
                "adress_id": 0,
                "default_currency_id": "USD",
                "is_contact_address_enabled": False,
                "enable_media_cost_tracking_links": False,
                "time_created": created,
                "time_saved": created,
                "referrer_id": 0,
            }

        self.offer_groups: dict[int, dict[str, Any]] = {}
        for a, adv in enumerate(adv_ids):
            adv_short = self.advertisers[adv]["name"].removesuffix(" Inc.")
            for half in range(2):
                gid = OFFER_GROUP_BASE + 1 + a * 2 + half
                members = [o for o, info in self.offer_info.items() if info["group_id"] == gid]
                self.offer_groups[gid] = {
                    "network_advertiser_id": adv,
                    "name": f"{adv_short} group {half + 1}",
                    "offer_group_status": "active",
                    "internal_notes": "",
                    # The currency of its first offer (sandbox choice; the default world's
                    # offers are all USD).
                    "currency_id": (
                        self.offer_info[members[0]]["currency_id"] if members else "USD"
                    ),
                    "network_offer_ids": members,
                    "labels": [],
                    "is_caps_enabled": False,
                    "is_soft_cap": False,
                    **{cap: 0 for cap in choices.CAP_FIELDS},
                    "time_created": created,
                    "time_saved": created,
                }

        self.offer_urls: dict[int, dict[str, Any]] = {}
        n = 0
        for oid, info in self.offer_info.items():
            for variant in ("Landing A", "Landing B"):
                n += 1
                uid = OFFER_URL_BASE + n
                self.offer_urls[uid] = {
                    "network_offer_url_id": uid,
                    "network_id": nid,
                    "network_offer_id": oid,
                    "name": variant,
                    "destination_url": info["destination_url"].replace(
                        "?", f"/{variant[-1].lower()}?"
                    ),
                    "preview_url": info["destination_url"].split("?")[0],
                    "url_status": "active",
                    "network_affiliate_ids": [],
                    "is_apply_specific_affiliates": False,
                    "is_hidden_affiliate": False,
                    "time_created": created,
                    "time_saved": created,
                }

        self.cpr_settings: dict[int, dict[str, Any]] = {}
        aff_ids = list(self.affiliates)
        for k, oid in enumerate(self.offer_info):
            sid = CPR_SETTING_BASE + 1 + k
            info = self.offer_info[oid]
            specific = aff_ids[k % len(aff_ids) : k % len(aff_ids) + 2]
            self.cpr_settings[sid] = {
                "network_custom_payout_revenue_setting_id": sid,
                "network_id": nid,
                "network_offer_id": oid,
                "network_offer_payout_revenue_id": 0,
                "name": f"{info['name']} boost",
                "custom_setting_status": "active",
                "is_apply_all_affiliates": k % 3 == 0,
                "is_custom_payout_enabled": True,
                "payout_type": "cpa",
                "payout_amount": _scaled(info["payout"], "1.1", info["currency_id"]),
                "payout_percentage": 0,
                "is_custom_revenue_enabled": k % 2 == 0,
                "revenue_type": "rpa" if k % 2 == 0 else "blank",
                "revenue_amount": (
                    _scaled(info["revenue"], "1.05", info["currency_id"]) if k % 2 == 0 else 0
                ),
                "revenue_percentage": 0,
                "description": "volume bonus",
                "public_description": "Bonus payout for top partners",
                "is_postback_disabled": False,
                "date_valid_from": "",
                "date_valid_to": "",
                "is_apply_specific_offer_urls": k % 4 == 1,
                "network_affiliate_ids": [] if k % 3 == 0 else specific,
                "network_offer_url_ids": [
                    u for u, d in self.offer_urls.items() if d["network_offer_id"] == oid
                ][:1]
                if k % 4 == 1
                else [],
                "time_created": created,
                "time_saved": created,
            }

        self.tiered: dict[int, dict[str, Any]] = {}
        offer_ids = list(self.offer_info)
        for k in range(max(1, (cfg.offers + 1) // 2)):
            tid = TIERED_BASE + 1 + k
            offers = offer_ids[2 * k : 2 * k + 2]
            affs = [aff_ids[k % len(aff_ids)]]
            advs = sorted({self.offer_info[o]["advertiser_id"] for o in offers})
            self.tiered[tid] = {
                "network_tiered_commission_id": tid,
                "network_id": nid,
                "name": f"Tier ladder {k + 1}",
                "notes": "",
                "status": "active",
                "start_date": cfg.first_date.isoformat(),
                "end_date": (cfg.end_date + dt.timedelta(days=90)).isoformat(),
                "period": "daily",
                "network_offer_payout_revenue_id": self.offer_info[offers[0]]["payout_revenue_id"],
                "is_apply_all_affiliates": k % 2 == 1,
                "is_payout_enabled": True,
                "is_revenue_enabled": False,
                "payout_action": "increase",
                "revenue_action": "increase",
                "payout_value": 1.5,
                "revenue_value": 0,
                "payout_goal": 0,
                "revenue_goal": 0,
                "sale_amount_goal": 0,
                "conversion_goal": 50 * (k + 1),
                "event_goal": 0,
                "payout_max": 0,
                "revenue_max": 0,
                "sale_amount_max": 0,
                "conversion_max": 0,
                "event_max": 0,
                "relationship": {
                    "network_offer_ids": offers,
                    "network_affiliate_ids": [] if k % 2 == 1 else affs,
                    "network_advertiser_ids": advs,
                },
                "time_created": created,
                "time_saved": created,
            }

        self.pixels: dict[int, dict[str, Any]] = {}
        n = 0
        for f, fid in enumerate(aff_ids):
            targets = [0] + ([offer_ids[f % len(offer_ids)]] if f % 2 == 0 else [])
            for oid in targets:
                n += 1
                pid = PIXEL_BASE + n
                aff = self.affiliates[fid]
                self.pixels[pid] = {
                    "network_pixel_id": pid,
                    "network_id": nid,
                    "network_offer_payout_revenue_id": 0,
                    "delivery_method": "postback",
                    "pixel_level": "global" if oid == 0 else "specific",
                    "pixel_status": "active",
                    "pixel_type": "conversion",
                    "postback_url": f"https://postback.{aff['name'].lower()}.example/cb"
                    "?click={sub1}&amount={payout}",
                    "html_code": "",
                    "network_affiliate_name": aff["name"],
                    "network_offer_name": self.offer_info[oid]["name"] if oid else "",
                    "description": "global conversion postback" if oid == 0 else "offer postback",
                    "network_affiliate_id": fid,
                    "network_offer_id": oid,
                    "delay_ms": 0,
                    "time_created": created,
                    "time_saved": created,
                    "relationship": {},
                }
        # The pixel that fires for an affiliate's conversions (its global one).
        self.affiliate_pixel = {
            p["network_affiliate_id"]: pid
            for pid, p in self.pixels.items()
            if p["network_offer_id"] == 0
        }

        self.channels = _named_records(
            CHANNEL_BASE,
            "network_channel_id",
            ["Search", "Social", "Email", "Native"],
            nid,
            created,
        )
        for channel in self.channels.values():
            channel["relationship"] = {}

        self.assignments: dict[int, dict[str, Any]] = {}
        for f, fid in enumerate(aff_ids):
            aid = ASSIGNMENT_BASE + 1 + f
            self.assignments[aid] = {
                "network_affiliate_tracking_domain_id": aid,
                "network_id": nid,
                "network_affiliate_id": fid,
                "network_tracking_domain_id": td_ids[f % len(td_ids)],
                "is_apply_all_offers": True,
                "network_offer_id": 0,
            }

        self.labels: dict[str, dict[str, Any]] = {}
        for k, label in enumerate(_LABELS):
            self.labels[label] = {
                "label": label,
                "advertiser_ids": adv_ids[k % n_adv : k % n_adv + 1],
                "affiliate_ids": aff_ids[k % len(aff_ids) :: 3],
                "campaign_ids": None,
                "offer_ids": offer_ids[k::4],
                "offer_group_ids": [OFFER_GROUP_BASE + 1 + k % (2 * n_adv)],
                "affiliate_tier_ids": [],
            }

    # --- offer records -------------------------------------------------------------------------

    def _offer_fields(self, oid: int) -> dict[str, Any]:
        """The writable fields of a generated offer (the state stores replacements of these)."""
        info = self.offer_info[oid]
        fields = dict(choices.OFFER_DEFAULTS)
        fields.update(
            {
                "name": info["name"],
                "network_advertiser_id": info["advertiser_id"],
                "network_offer_group_id": info["group_id"],
                "offer_status": "active",
                "destination_url": info["destination_url"],
                "preview_url": info["destination_url"].split("?")[0],
                "network_category_id": info["category_id"],
                "network_tracking_domain_id": info["tracking_domain_id"],
                "currency_id": info["currency_id"],
                "payout_revenue": [
                    {
                        **choices.DEFAULT_PAYOUT_REVENUE,
                        "network_offer_payout_revenue_id": info["payout_revenue_id"],
                        "entry_name": "Base",
                        "payout_amount": info["payout"],
                        "revenue_amount": info["revenue"],
                    },
                    {
                        **choices.DEFAULT_PAYOUT_REVENUE,
                        "network_offer_payout_revenue_id": info["event_payout_revenue_id"],
                        "entry_name": info["event_name"],
                        "payout_amount": info["event_payout"],
                        "revenue_amount": info["event_revenue"],
                        "is_default": False,
                    },
                ],
                "time_created": self.created,
                "time_saved": self.created,
            }
        )
        return fields

    def offer_summary(self, oid: int, fields: dict[str, Any] | None = None) -> dict[str, Any]:
        f = fields or self.offers[oid]
        return {
            "network_offer_id": oid,
            "network_id": self.network_id,
            "network_advertiser_id": f["network_advertiser_id"],
            "network_offer_group_id": f.get("network_offer_group_id", 0),
            "name": f["name"],
            "offer_status": f["offer_status"],
            "network_tracking_domain_id": f["network_tracking_domain_id"],
            "visibility": f["visibility"],
            "currency_id": f["currency_id"],
        }

    def affiliate_small(self, fid: int) -> dict[str, Any]:
        a = self.affiliates[fid]
        return {
            "network_affiliate_id": fid,
            "network_id": self.network_id,
            "name": a["name"],
            "account_status": a["account_status"],
            "network_traffic_source_id": a["network_traffic_source_id"],
        }
