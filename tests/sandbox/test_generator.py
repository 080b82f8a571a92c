"""The generator at scale and the planted review patterns."""

from __future__ import annotations

import collections

from affiliate_network_sandbox import choices
from tests.support.sandbox_api import day_body


def test_page_400_of_a_million_conversion_day_builds_only_that_page(api, sandbox):
    sandbox.reset(conversions_per_day=1_000_000, days=2)
    day = sandbox.catalog()["last_date"]
    before = sandbox.stats()["default"]
    resp = api.conversions(day_body(day), page=400, page_size=2000)
    after = sandbox.stats()["default"]
    data = resp.json()
    assert data["paging"] == {"page": 400, "page_size": 2000, "total_count": 1_000_000}
    assert len(data["conversions"]) == 2000
    assert after["records_built"] - before["records_built"] == 2000
    # The page's records plus a few binary-search probes, never the day.
    assert after["cores_computed"] - before["cores_computed"] < 2000 * 2 + 200
    last = api.conversions(day_body(day), page=500, page_size=2000).json()["conversions"]
    assert len(last) == 2000
    ts = [r["conversion_unix_timestamp"] for r in data["conversions"] + last]
    assert ts == sorted(ts)


def test_ids_are_unique_and_decodable_at_scale(api, sandbox):
    sandbox.reset(conversions_per_day=1_000_000, days=1)
    day = sandbox.catalog()["last_date"]
    rows = api.conversions(day_body(day), page=321, page_size=2000).json()["conversions"]
    assert len({r["conversion_id"] for r in rows}) == 2000
    probe = rows[1234]
    body = day_body(
        day,
        query={
            "search_terms": [{"search_type": "transaction_id", "value": probe["transaction_id"]}]
        },
    )
    before = sandbox.stats()["default"]["records_built"]
    assert api.conversions(body).json()["conversions"] == [probe]
    assert sandbox.stats()["default"]["records_built"] - before == 1


def _flags(rows):
    """The documented rules, applied to one UTC day of conversions."""
    convs = [r for r in rows if not r["is_event"]]
    per_ip = collections.Counter(r["conversion_user_ip"] for r in convs)
    out = collections.defaultdict(set)
    for r in convs:
        cid = r["conversion_id"]
        if per_ip[r["conversion_user_ip"]] >= choices.DUPLICATE_IP_MIN_CONVERSIONS:
            out["duplicate_ip"].add(cid)
        if (
            r["conversion_unix_timestamp"] - r["click_unix_timestamp"]
            < choices.FAST_CLICK_MAX_SECONDS
        ):
            out["fast_click"].add(cid)
        if r["sub1"] in choices.BLOCKLISTED_SUB1:
            out["blocklisted_sub"].add(cid)
        if r["sale_amount"] >= choices.OUTLIER_SALE_AMOUNT_MIN:
            out["outlier_sale_amount"].add(cid)
        if r["session_user_ip"] != r["conversion_user_ip"]:
            out["ip_mismatch"].add(cid)
    return out


def test_documented_rules_catch_exactly_the_planted_patterns(api, sandbox):
    sandbox.reset(conversions_per_day=3000, days=2)
    day = sandbox.catalog()["last_date"]
    rows = api.all_conversions(day_body(day))
    planted = sandbox.planted(day, day)
    truth = sandbox.truth(day, day)
    flags = _flags(rows)
    held = {r["conversion_id"] for r in rows if r["status"] == "pending"}
    for name in choices.PATTERNS:
        ids = set(planted["conversion_ids"][name])
        assert ids, name
        assert flags[name] == ids, name
        assert ids <= held, name  # planted patterns sit among on-hold conversions
        assert truth["planted"][name] == len(ids)
    flagged = set().union(*flags.values())
    assert set(planted["clean_on_hold_conversion_ids"]) == held - flagged
    # Patterns are exclusive: each flagged conversion matches one rule.
    assert sum(len(v) for v in flags.values()) == len(flagged)
    assert planted["rules"]["fast_click"]


def test_duplicate_ip_groups_have_three_or_four_members(api, sandbox):
    sandbox.reset(conversions_per_day=3000, days=1)
    day = sandbox.catalog()["last_date"]
    rows = api.all_conversions(day_body(day))
    per_ip = collections.Counter(r["conversion_user_ip"] for r in rows)
    sizes = {n for n in per_ip.values() if n > 1}
    assert sizes <= {3, 4}
    assert sizes


def test_planted_on_hold_ids_are_patchable(api, sandbox):
    day = sandbox.catalog()["last_date"]
    planted = sandbox.planted(day, day)
    ids = planted["on_hold_conversion_ids"]["fast_click"][:2]
    resp = api.call(
        "PATCH",
        "/networks/reporting/onhold",
        json={"on_hold_conversion_ids": ids, "status": "rejected"},
    )
    assert resp.status_code == 200
    assert sandbox.truth(day, day)["rejected"] == 2


def test_no_patterns_without_on_hold(api, sandbox):
    sandbox.reset(on_hold_share=0, days=1)
    day = sandbox.catalog()["last_date"]
    truth = sandbox.truth(day, day)
    assert truth["on_hold"] == 0
    assert sum(truth["planted"].values()) == 0
