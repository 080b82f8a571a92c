"""Admin views of a world: truth counts and the catalog listing (``/_sandbox/...``)."""

from typing import Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.data import (
    KIND_CONVERSION,
    KIND_EVENT,
    P_NONE,
    PATTERN_NAMES,
)
from affiliate_network_sandbox.world.base import WorldBase


class AdminArea(WorldBase):
    """Admin views of a world: truth counts and the catalog listing (``/_sandbox/...``)."""

    # ============================================================================================
    # Truth (admin)
    # ============================================================================================

    def truth(self, t0: int, t1: int) -> dict[str, Any]:
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

    # --- admin views -----------------------------------------------------------------------------

    def catalog_listing(self) -> dict[str, Any]:
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
