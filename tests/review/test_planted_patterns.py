"""The shipped rules catch exactly the sandbox's planted fraud patterns (its ground truth)."""

from __future__ import annotations

import time

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.rules.engine import RuleSet
from affiliate_network.rules.fields import on_hold_conversion_id, on_hold_since, on_hold_status
from affiliate_network.settings.paths import include_dir

#: Rule id in include/onhold_rules.yaml -> planted pattern it must catch, and the action.
EXPECTED = {
    "blocked-sub1": ("blocklisted_sub", "reject"),
    "duplicate-ip-24h": ("duplicate_ip", "reject"),
    "click-to-conversion-under-10s": ("fast_click", "reject"),
    "outlier-sale-amount": ("outlier_sale_amount", "review"),
    "ip-mismatch": ("ip_mismatch", "review"),
}


def test_include_rules_decide_exactly_the_planted_conversions(sandbox, network_conn) -> None:
    catalog = sandbox.catalog()
    first, last = catalog["first_date"], catalog["last_date"]
    hook = AffiliateNetworkHook(affiliate_network_conn_id=network_conn)
    records = [
        r
        for r in hook.iter_conversions(from_date=first, to_date=last, timezone_id=67)
        if on_hold_status(r) == "on_hold"
    ]
    truth = sandbox.planted(first, last)
    assert len(records) == sum(map(len, truth["on_hold_conversion_ids"].values())) + len(
        truth["clean_on_hold_conversion_ids"]
    )

    ruleset = RuleSet.from_file(include_dir() / "onhold_rules.yaml")
    now = time.time()
    evaluation = ruleset.evaluate(records, now=now)
    decided: dict[str, set[str]] = {}
    actions: dict[str, str] = {}
    for d in evaluation.decisions:
        decided.setdefault(d.rule_id, set()).add(on_hold_conversion_id(records[d.index]))
        actions[d.rule_id] = d.action

    for rule_id, (pattern, action) in EXPECTED.items():
        expected = set(truth["on_hold_conversion_ids"][pattern])
        assert expected, pattern
        assert decided.get(rule_id, set()) == expected, rule_id
        assert actions[rule_id] == action

    # Clean conversions (the truth lists their conversion ids) are approved once on hold for
    # 72 h, else left on hold.
    clean = set(truth["clean_on_hold_conversion_ids"])
    old_enough = {
        on_hold_conversion_id(r)
        for r in records
        if r["conversion_id"] in clean and now - on_hold_since(r) >= 72 * 3600
    }
    assert old_enough
    assert len(old_enough) < len(clean)
    assert decided["clean-after-72h"] == old_enough
    assert evaluation.unmatched == len(clean) - len(old_enough)
