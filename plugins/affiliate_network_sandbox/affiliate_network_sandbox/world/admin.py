"""Admin views of a world: truth counts and the catalog listing (``/_sandbox/...``)."""

from decimal import Decimal
from typing import Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.data import (
    KIND_CONVERSION,
    KIND_EVENT,
    P_NONE,
    PATTERN_NAMES,
    R_ADJUSTMENT,
    R_NONE,
    R_REVERSAL,
    REVERSAL_NAMES,
)
from affiliate_network_sandbox.money import quantum
from affiliate_network_sandbox.world.base import WorldBase

#: Column of each base-conversion status in the per-couple counts of :meth:`money_truth`; a
#: reversal's is 3 further, an adjustment's 6 (``R_* x 3 + status``); events come last.
_STATUS_COL = {choices.STATUS_APPROVED: 0, choices.STATUS_PENDING: 1, choices.STATUS_REJECTED: 2}
_EVENTS_COL = 9
_STATUS_NAME = {col: st for st, col in _STATUS_COL.items()}


class AdminArea(WorldBase):
    """Admin views of a world: truth counts and the catalog listing (``/_sandbox/...``)."""

    # ============================================================================================
    # Truth (admin)
    # ============================================================================================

    def truth(self, t0: int, t1: int) -> dict[str, Any]:
        key = (
            self.state.version,
            t0,
            t1,
            self.gen.visible_end() if self.gen.changes_with_clock else 0,
        )
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
        # Planted reversals and adjustments (choices.REVERSAL_NOTES): their conversion ids, and
        # the on-hold ids of those held.
        negative_ids: dict[str, list[str]] = {name: [] for name in REVERSAL_NAMES.values()}
        negative_oh: dict[str, list[str]] = {name: [] for name in REVERSAL_NAMES.values()}
        for seg in segs:
            if seg.kind != KIND_CONVERSION:
                continue
            c = seg.ctx
            for i in range(seg.lo, seg.hi):
                _u, _ts, pattern, oh = gen.core(c, i)
                statuses[self.status_of(KIND_CONVERSION, c, i, oh)] += 1
                value = c.vbase | i
                negative = gen.reversal_of(c, i, pattern)
                if negative:
                    name = REVERSAL_NAMES[negative]
                    negative_ids[name].append(gen.conv_ids.encode(value))
                    if oh:
                        negative_oh[name].append(gen.onhold_ids.encode(value))
                if not oh:
                    continue
                on_hold += 1
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
            "reversals": {name: len(ids) for name, ids in negative_ids.items()},
            "reversals_on_hold": {name: len(ids) for name, ids in negative_oh.items()},
            "_ids": (planted_ids, planted_oh, clean_on_hold, negative_ids, negative_oh),
        }
        self._truth_cache[key] = out
        while len(self._truth_cache) > 8:
            self._truth_cache.popitem(last=False)
        return out

    def money_truth(self, t0: int, t1: int, cells: bool = True) -> dict[str, Any]:
        """Exact money of a window per currency and per (affiliate, offer) couple, at the clock.

        Computed from the per-record core draws and the couples' amounts (counts times the
        amount: every record of a couple pays the same, its planted reversals and adjustments
        their own negative amounts), not from the report code paths, so it checks them. Amounts
        are exact decimal strings at the currency's minor unit. Per currency, ``conversions``
        counts every base conversion (reversals and adjustments included) and ``reversals``
        the reversals and adjustments apart, per status.

        :param t0: window start (UTC seconds).
        :param t1: window end, exclusive (already cut at the clock).
        :param cells: include the per-couple list (it holds up to affiliates x offers items).
        """
        gen = self.gen
        counts: dict[int, list[int]] = {}
        pairs = gen.pairs
        core, status_of, parent = gen.core, self.status_of, gen.event_parent
        reversal_of = gen.reversal_of
        for seg in gen.segments(t0, t1, conversions=True, events=True):
            c = seg.ctx
            if seg.kind == KIND_CONVERSION:
                for i in range(seg.lo, seg.hi):
                    u, _ts, pattern, oh = core(c, i)
                    p = (u >> 16) % pairs
                    row = counts.get(p)
                    if row is None:
                        row = counts[p] = [0] * (_EVENTS_COL + 1)
                    # Not held: approved from the start (status_of only for held ones).
                    col = _STATUS_COL[status_of(KIND_CONVERSION, c, i, oh)] if oh else 0
                    row[3 * reversal_of(c, i, pattern) + col] += 1
            else:
                for j in range(seg.lo, seg.hi):
                    u = core(c, parent(c, j))[0]
                    p = (u >> 16) % pairs
                    row = counts.get(p)
                    if row is None:
                        row = counts[p] = [0] * (_EVENTS_COL + 1)
                    row[_EVENTS_COL] += 1
        zero = Decimal(0)
        per_cur: dict[str, dict[str, Any]] = {}
        cell_rows: list[dict[str, Any]] = []
        with_conversions = 0
        for p in sorted(counts, key=lambda q: (gen.pair(q).fid, gen.pair(q).oid)):
            row = counts[p]
            t = gen.pair(p)
            q = quantum(t.cur)
            pay, rev = Decimal(repr(t.payout)), Decimal(repr(t.revenue))
            ev_pay, ev_rev = Decimal(repr(t.ev_payout)), Decimal(repr(t.ev_revenue))
            # (payout, revenue) of an ordinary conversion, a reversal and an adjustment (R_*).
            amounts = {
                R_NONE: (pay, rev),
                R_REVERSAL: (-pay, -rev),
                R_ADJUSTMENT: (Decimal(repr(t.adj_payout)), Decimal(repr(t.adj_revenue))),
            }
            cur = per_cur.get(t.cur)
            if cur is None:
                cur = per_cur[t.cur] = {
                    "conversions": {
                        st: {"count": 0, "payout": zero, "revenue": zero} for st in _STATUS_COL
                    },
                    "reversals": {
                        name: {
                            st: {"count": 0, "payout": zero, "revenue": zero} for st in _STATUS_COL
                        }
                        for name in REVERSAL_NAMES.values()
                    },
                    "events": {"count": 0, "payout": zero, "revenue": zero},
                    "cells": 0,
                }
            # Per status: count, payout and revenue over the three kinds of conversion.
            by_status: dict[int, tuple[int, Decimal, Decimal]] = {}
            for col in _STATUS_COL.values():
                n, p_sum, r_sum = 0, zero, zero
                for kind, (k_pay, k_rev) in amounts.items():
                    k_n = row[3 * kind + col]
                    n, p_sum, r_sum = n + k_n, p_sum + k_n * k_pay, r_sum + k_n * k_rev
                    if kind != R_NONE:
                        agg = cur["reversals"][REVERSAL_NAMES[kind]][_STATUS_NAME[col]]
                        agg["count"] += k_n
                        agg["payout"] += k_n * k_pay
                        agg["revenue"] += k_n * k_rev
                by_status[col] = (n, p_sum, r_sum)
            for st, col in _STATUS_COL.items():
                agg = cur["conversions"][st]
                n, p_sum, r_sum = by_status[col]
                agg["count"] += n
                agg["payout"] += p_sum
                agg["revenue"] += r_sum
            ev = cur["events"]
            ev["count"] += row[_EVENTS_COL]
            ev["payout"] += row[_EVENTS_COL] * ev_pay
            ev["revenue"] += row[_EVENTS_COL] * ev_rev
            cur["cells"] += 1
            if any(row[:_EVENTS_COL]):
                with_conversions += 1
            if cells:
                (approved, a_pay, a_rev), (held, h_pay, h_rev) = by_status[0], by_status[1]
                payout = a_pay + row[_EVENTS_COL] * ev_pay
                revenue = a_rev + row[_EVENTS_COL] * ev_rev
                cell_rows.append(
                    {
                        "network_affiliate_id": t.fid,
                        "network_offer_id": t.oid,
                        "currency_id": t.cur,
                        "cv": approved,
                        "event": row[_EVENTS_COL],
                        "payout": str(payout.quantize(q)),
                        "revenue": str(revenue.quantize(q)),
                        "on_hold_conversion_count": held,
                        "on_hold_potential_payout": str(h_pay.quantize(q)),
                        "on_hold_potential_revenue": str(h_rev.quantize(q)),
                        "rejected_conversion_count": by_status[2][0],
                    }
                )
        currencies: dict[str, Any] = {}
        for code, cur in sorted(per_cur.items()):
            q = quantum(code)
            conv = cur["conversions"]
            ev = cur["events"]
            approved = conv[choices.STATUS_APPROVED]
            held = conv[choices.STATUS_PENDING]
            currencies[code] = {
                "conversions": {
                    st: {
                        "count": agg["count"],
                        "payout": str(agg["payout"].quantize(q)),
                        "revenue": str(agg["revenue"].quantize(q)),
                    }
                    for st, agg in conv.items()
                },
                "reversals": {
                    name: {
                        st: {
                            "count": agg["count"],
                            "payout": str(agg["payout"].quantize(q)),
                            "revenue": str(agg["revenue"].quantize(q)),
                        }
                        for st, agg in per_status.items()
                    }
                    for name, per_status in cur["reversals"].items()
                },
                "events": {
                    "count": ev["count"],
                    "payout": str(ev["payout"].quantize(q)),
                    "revenue": str(ev["revenue"].quantize(q)),
                },
                # What the network entity table serves for this currency's offers when asked
                # in this currency (approved conversions and events; on-hold = pending).
                "entity": {
                    "cv": approved["count"],
                    "event": ev["count"],
                    "payout": str((approved["payout"] + ev["payout"]).quantize(q)),
                    "revenue": str((approved["revenue"] + ev["revenue"]).quantize(q)),
                    "on_hold_conversion_count": held["count"],
                    "on_hold_potential_payout": str(held["payout"].quantize(q)),
                    "on_hold_potential_revenue": str(held["revenue"].quantize(q)),
                },
                "cells": cur["cells"],
            }
        out: dict[str, Any] = {
            "clock": gen.visible_end() - 1,
            "currencies": currencies,
            "cell_count": len(counts),
            "cells_with_conversions": with_conversions,
        }
        if cells:
            out["cells"] = cell_rows
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
                    "currency_id": info["currency_id"],
                    "network_offer_url_ids": [
                        u for u, d in cat.offer_urls.items() if d["network_offer_id"] == o
                    ],
                }
                for o, info in cat.offer_info.items()
            },
        }
