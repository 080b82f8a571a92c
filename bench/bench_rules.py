"""Benchmark: decide 100,000 on-hold conversions against 30 rules (with batch aggregates).

Target: under 1 s of CPU (``time.process_time()``) for validation-free evaluation: columns,
derived fields, aggregates and all 30 rules. Records are generated locally in the shape of the
spec's conversion record (the fields rules read, plus a realistic ``relationship``), with the
same kinds of planted patterns as the sandbox: shared IPs, fast clicks, blocklisted sub IDs,
outlier sale amounts, IP mismatch.

Run: ``uv run python bench/bench_rules.py [--records N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

from affiliate_network.rules.engine import RuleSet
from affiliate_network.rules.loader import loads_rules

NOW = 1_800_000_000

RULES_YAML = """
version: 1
lists:
  blocked_sub1: [blk-botnet-01, blk-botnet-02, blk-incent-07, blk-cookie-stuff, blk-adware-33]
  trusted_affiliates: [1, 2]
  risky_countries: [XX, ZZ]
rules:
  - id: blocked-sub1
    description: Traffic from blocklisted sub IDs
    action: reject
    when: {field: sub1, in: $blocked_sub1}
  - id: dup-ip-24h
    description: More than 3 conversions share an IP within 24 hours
    action: reject
    when:
      agg: {count_same: conversion_user_ip, within_hours: 24}
      gt: 3
  - id: dup-order-id
    description: The same order id converted twice
    action: reject
    when:
      all:
        - {field: order_id, exists: true}
        - {agg: {count_same: order_id}, gt: 1}
  - id: dup-email-per-offer
    description: One email converting more than twice on one offer
    action: reject
    when:
      agg: {count_same: email, per: relationship.offer.network_offer_id}
      gt: 2
  - id: many-ips-per-email
    description: One email from more than 4 IPs
    action: review
    when:
      agg: {count_distinct: conversion_user_ip, per: email}
      gt: 4
  - id: fast-click
    description: Conversion less than 10 s after the click
    action: reject
    when: {field: click_to_conversion_seconds, between: [0, 9.999]}
  - id: outlier-sale
    description: Sale amount far above the offer's median
    action: review
    when:
      any:
        - {field: sale_amount, ge: 5000}
        - {agg: {ratio_to_median: sale_amount, per: relationship.offer.network_offer_id}, gt: 20}
  - id: ip-mismatch-risky
    description: IP mismatch from a risky country
    action: reject
    when:
      all:
        - {field: ip_mismatch, eq: true}
        - {field: country, in: $risky_countries}
  - id: ip-mismatch
    description: Conversion IP differs from session IP
    action: review
    when: {field: ip_mismatch, eq: true}
  - id: affiliate-dominates-sub
    description: One sub1 is over 60% of an affiliate's held conversions
    action: review
    when:
      all:
        - {field: sub1, exists: true}
        - agg: {share_same: sub1, per: relationship.affiliate.network_affiliate_id}
          gt: 0.6
        - agg: {count_same: relationship.affiliate.network_affiliate_id}
          gt: 50
  - id: scrub-flag
    description: Already flagged as scrub
    action: reject
    when: {field: is_scrub, eq: true}
  - id: error-code
    description: Conversion carries an error code
    action: review
    when: {field: error_code, ne: 0}
  - id: bad-ua
    description: Automation user agents
    action: reject
    when: {field: http_user_agent, regex: "(?i)(headless|phantomjs|python-requests|curl/)"}
  - id: disposable-email
    description: Disposable email domains
    action: reject
    when: {field: email_domain, in: [mailinator.com, tempmail.dev, 10minutemail.com]}
  - id: no-email-high-payout
    description: No email and payout above 50
    action: review
    when:
      all:
        - {field: email, missing: true}
        - {field: payout, gt: 50}
  - id: coupon-abuse
    description: One coupon code used more than 10 times
    action: review
    when:
      agg: {count_same: coupon_code, within_hours: 6}
      gt: 10
  - id: sub2-burst
    description: Many conversions with one sub2 in an hour
    action: review
    when:
      agg: {count_same: [sub2, conversion_user_ip], within_hours: 1}
      ge: 3
  - id: view-through-high
    description: View-through conversion with a high payout
    action: review
    when:
      all:
        - {field: is_view_through, eq: true}
        - {field: payout, gt: 30}
  - id: paused-offer
    description: Offer no longer active
    action: hold
    when: {field: relationship.offer.offer_status, ne: active}
  - id: inactive-affiliate
    description: Affiliate account not active
    action: reject
    when: {field: relationship.affiliate.account_status, in: [inactive, suspended]}
  - id: manual-hold
    description: Put on hold manually by an employee
    action: hold
    when: {field: relationship.on_hold_snapshots.initiator, eq: manual_employee}
  - id: too-young
    description: Held for less than 1 hour
    action: hold
    when: {field: hold_age_hours, lt: 1}
  - id: payout-ratio
    description: Payout above 80% of the sale
    action: review
    when: {field: payout_to_sale_ratio, gt: 0.8}
  - id: device-mismatch
    description: Desktop platform on a mobile device type
    action: review
    when:
      all:
        - {field: platform, in: [Windows, macOS, Linux]}
        - {field: device_type, eq: Mobile}
  - id: no-click
    description: No click timestamp
    action: review
    when: {field: click_unix_timestamp, missing: true}
  - id: old-click
    description: Click more than 30 days before the conversion
    action: review
    when: {field: click_to_conversion_seconds, gt: 2592000}
  - id: trusted-affiliate
    description: Trusted affiliates approved
    action: approve
    when:
      all:
        - {field: relationship.affiliate.network_affiliate_id, in: $trusted_affiliates}
        - not: {field: ip_mismatch, eq: true}
  - id: small-clean
    description: Small, clean conversions approved
    action: approve
    when:
      all:
        - {field: sale_amount, lt: 100}
        - {field: age_hours, ge: 2}
        - any:
            - {field: country, in: [US, CA, GB, DE]}
            - {field: language, eq: en}
  - id: known-email-domain
    description: Mainstream email providers approved after a day
    action: approve
    when:
      all:
        - {field: email_domain, regex: "^(gmail|yahoo|outlook)\\\\.com$"}
        - {field: age_hours, ge: 24}
  - id: catch-all-old
    description: Anything on hold for more than 72 h is approved
    action: approve
    when: {field: hold_age_hours, gt: 72}
"""

COUNTRIES = ["FR", "BR", "IN", "MX", "JP", "ES", "IT", "XX"]
DOMAINS = ["gmail.com", "yahoo.com", "outlook.com", "proton.me", "gmx.de", "corp.example"]
UAS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0) Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14) Chrome/120 Mobile",
]
PLATFORM_DEVICE = [
    ("Windows", "Desktop"),
    ("macOS", "Desktop"),
    ("iOS", "Mobile"),
    ("Android", "Mobile"),
]


def make_records(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """On-hold conversions in the spec's conversion record shape, with planted patterns."""
    rng = random.Random(seed)
    records = []
    for n in range(count):
        ts = NOW - rng.randint(0, 3 * 86400)
        roll = rng.random()
        ip = f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        gap = rng.randint(60, 86400)
        sub1 = f"s{rng.randint(1, 500)}"
        sale = round(rng.uniform(5, 300), 2)
        session_ip = ip
        if roll < 0.01:
            ip = f"192.168.0.{rng.randint(1, 20)}"  # shared IPs
        elif roll < 0.02:
            gap = rng.randint(1, 9)  # fast click
        elif roll < 0.03:
            sub1 = rng.choice(["blk-botnet-01", "blk-incent-07"])
        elif roll < 0.04:
            sale = rng.uniform(5000, 20000)
        elif roll < 0.05:
            session_ip = f"172.16.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        platform, device = rng.choice(PLATFORM_DEVICE)
        affiliate_id = rng.randint(1, 40)
        offer_id = rng.randint(1, 60)
        hold_id = f"oh-{n:08d}"
        records.append(
            {
                "conversion_id": f"c-{n:08d}",
                "transaction_id": f"t-{n:08d}",
                "status": "pending",
                "conversion_unix_timestamp": ts,
                "click_unix_timestamp": ts - gap,
                "conversion_user_ip": ip,
                "session_user_ip": session_ip,
                "sub1": sub1,
                "sub2": f"p{rng.randint(1, 3000)}",
                "email": f"u{rng.randint(1, 60000)}@{rng.choice(DOMAINS)}",
                "order_id": f"o-{n:08d}" if rng.random() > 0.002 else "o-dup",
                "coupon_code": "" if rng.random() < 0.8 else f"CPN{rng.randint(1, 300)}",
                "country": rng.choice(COUNTRIES),
                "language": rng.choice(["de", "fr", "pt", "es"]),
                "platform": platform,
                "device_type": device,
                "http_user_agent": rng.choice(UAS),
                "payout": round(sale * rng.uniform(0.02, 0.15), 2),
                "revenue": round(rng.uniform(2, 90), 2),
                "sale_amount": sale,
                "error_code": 0,
                "is_scrub": False,
                "is_event": False,
                "is_view_through": rng.random() < 0.05,
                "relationship": {
                    "affiliate": {
                        "network_affiliate_id": affiliate_id,
                        "name": f"Affiliate {affiliate_id}",
                        "account_status": "active",
                        "network_id": 1,
                    },
                    "offer": {
                        "network_offer_id": offer_id,
                        "name": f"Offer {offer_id}",
                        "offer_status": "active",
                        "network_id": 1,
                    },
                    "on_hold_snapshots": [
                        {
                            "on_hold_conversion_id": hold_id,
                            "on_hold_conversion_history_snapshot_id": n,
                            "initiator": "manual",
                            "snapshot_type": "status",
                            "status": "on_hold",
                            "unix_timestamp": ts + 5,
                            "network_id": 1,
                        }
                    ],
                },
            }
        )
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    parser.add_argument("--budget", type=float, default=1.0, help="CPU seconds allowed")
    args = parser.parse_args(argv)

    rules_file = loads_rules(RULES_YAML, "bench")
    ruleset = RuleSet(rules_file)
    n_rules = len(ruleset.compiled)
    n_aggs = sum(1 for c in ruleset.compiled for t in c.tests if t.agg is not None)
    records = make_records(args.records)

    best = float("inf")
    evaluation = None
    for _ in range(args.repeat):
        started = time.process_time()
        evaluation = ruleset.evaluate(records, now=NOW)
        best = min(best, time.process_time() - started)
    assert evaluation is not None
    decided = len(evaluation.decisions)
    print(
        f"rules engine: {args.records:,} on-hold conversions x {n_rules} rules "
        f"({n_aggs} aggregate conditions): {best:.3f} s CPU (best of {args.repeat}); "
        f"decided {decided:,}, left on hold {evaluation.unmatched:,}"
    )
    print("  per action:", evaluation.per_action)
    top = sorted(evaluation.per_rule.items(), key=lambda kv: -kv[1])[:8]
    print("  top rules:", ", ".join(f"{k}={v}" for k, v in top))
    ok = best < args.budget
    print(f"  budget {args.budget:.1f} s CPU: {'OK' if ok else 'OVER BUDGET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
