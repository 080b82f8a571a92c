"""The rules engine on hand-built records: operators, paths, nesting, derived fields, aggregates."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from affiliate_network.rules.engine import RuleSet
from affiliate_network.rules.loader import loads_rules

NOW = 1_800_000_000.0


def rec(n: int, **fields: Any) -> dict[str, Any]:
    """A conversion record in the spec's shape with what the tests below read."""
    base: dict[str, Any] = {
        "conversion_id": f"c{n}",
        "conversion_unix_timestamp": int(NOW) - 86_400,
        "click_unix_timestamp": int(NOW) - 90_000,
        "conversion_user_ip": f"10.0.0.{n}",
        "session_user_ip": f"10.0.0.{n}",
        "sub1": "ok",
        "email": f"u{n}@example.com",
        "sale_amount": 100.0,
        "payout": 10.0,
        "is_event": False,
        "relationship": {
            "affiliate": {"network_affiliate_id": 1, "account_status": "active"},
            "offer": {"network_offer_id": 7},
            "on_hold_snapshots": [
                {
                    "on_hold_conversion_id": f"oh{n}",
                    "status": "on_hold",
                    "unix_timestamp": NOW - 86_400,
                }
            ],
        },
    }
    relationship = fields.pop("relationship", None)
    base.update(fields)
    if relationship:
        base["relationship"] = {**base["relationship"], **relationship}
    return base


def decide(rules_yaml: str, records: list[dict], **kwargs: Any) -> dict[str, str]:
    """conversion_id -> rule id that decided it (unmatched records are absent)."""
    ruleset = RuleSet(loads_rules(textwrap.dedent(rules_yaml)))
    evaluation = ruleset.evaluate(records, now=NOW, **kwargs)
    return {records[d.index]["conversion_id"]: d.rule_id for d in evaluation.decisions}


def one_rule(condition: str, action: str = "reject") -> str:
    return f"rules:\n  - id: r\n    description: d\n    action: {action}\n    when: {condition}\n"


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("{field: sale_amount, eq: 100}", {"c1", "c3"}),
        ("{field: sale_amount, ne: 100}", {"c2"}),
        ("{field: sub1, in: [blk, x]}", {"c2"}),
        ("{field: sub1, not_in: [blk]}", {"c1", "c3"}),
        ("{field: sale_amount, gt: 100}", {"c2"}),
        ("{field: sale_amount, ge: 100}", {"c1", "c2", "c3"}),
        ("{field: sale_amount, lt: 100}", set()),
        ("{field: sale_amount, le: 100}", {"c1", "c3"}),
        ("{field: sale_amount, between: [150, 6000]}", {"c2"}),
        ("{field: email, regex: '@corp\\.'}", {"c3"}),
        ("{field: coupon_code, exists: true}", {"c3"}),
        ("{field: coupon_code, missing: true}", {"c1", "c2"}),
        ("{field: sale_amount, op: gt, value: 100}", {"c2"}),
    ],
)
def test_operators(condition: str, expected: set[str]) -> None:
    records = [
        rec(1, coupon_code=""),
        rec(2, sub1="blk", sale_amount=5000.0),
        rec(3, email="boss@corp.example", coupon_code="SAVE10"),
    ]
    assert set(decide(one_rule(condition), records)) == expected


def test_first_match_wins_and_unmatched_stay_undecided() -> None:
    rules = """\
    rules:
      - id: reject-big
        description: d
        action: reject
        when: {field: sale_amount, gt: 1000}
      - id: approve-all-big-or-small
        description: d
        action: approve
        when: {field: sale_amount, gt: 50}
      - id: disabled
        description: d
        action: reject
        enabled: false
        when: {field: sale_amount, lt: 50}
    """
    records = [rec(1, sale_amount=5000.0), rec(2, sale_amount=60.0), rec(3, sale_amount=10.0)]
    assert decide(rules, records) == {"c1": "reject-big", "c2": "approve-all-big-or-small"}


def test_nested_all_any_not() -> None:
    condition = textwrap.indent(
        textwrap.dedent(
            """
            all:
              - any:
                  - {field: sub1, eq: blk}
                  - {field: sale_amount, ge: 1000}
              - not:
                  any:
                    - {field: relationship.affiliate.network_affiliate_id, eq: 9}
                    - {field: email, regex: "@trusted\\\\.example$"}
            """
        ),
        "      ",
    )
    records = [
        rec(1, sub1="blk"),  # any via sub1, not excluded -> match
        rec(2, sale_amount=2000.0),  # any via amount -> match
        rec(3, sub1="blk", relationship={"affiliate": {"network_affiliate_id": 9}}),  # excluded
        rec(4, sub1="blk", email="x@trusted.example"),  # excluded by the regex
        rec(5),  # neither branch of any
    ]
    assert set(decide(one_rule(condition), records)) == {"c1", "c2"}


def test_paths_into_relationship_lists() -> None:
    held_then_approved = [
        {"on_hold_conversion_id": "oh2", "status": "on_hold", "unix_timestamp": NOW - 10},
        {"on_hold_conversion_id": "oh2", "status": "approved", "unix_timestamp": NOW},
    ]
    records = [rec(1), rec(2, relationship={"on_hold_snapshots": held_then_approved})]
    # Any element (no index) vs the last element ([-1]) vs the derived current state.
    any_on_hold = "{field: relationship.on_hold_snapshots.status, eq: on_hold}"
    last_on_hold = "{field: 'relationship.on_hold_snapshots[-1].status', eq: on_hold}"
    none_approved = "{field: relationship.on_hold_snapshots.status, ne: approved}"
    assert set(decide(one_rule(any_on_hold), records)) == {"c1", "c2"}
    assert set(decide(one_rule(last_on_hold), records)) == {"c1"}
    assert set(decide(one_rule("{field: on_hold_status, eq: on_hold}"), records)) == {"c1"}
    assert set(decide(one_rule(none_approved), records)) == {"c1"}
    assert set(decide(one_rule("{field: on_hold_conversion_id, eq: oh2}"), records)) == {"c2"}


def test_derived_fields() -> None:
    records = [
        rec(1, click_unix_timestamp=int(NOW) - 86_400 - 5),  # 5 s click to conversion
        rec(2, session_user_ip="172.16.0.1"),  # IP mismatch
        rec(3, conversion_unix_timestamp=int(NOW) - 1800),  # half an hour old
        rec(4, email="Someone@MAILINATOR.com"),
    ]
    assert set(decide(one_rule("{field: click_to_conversion_seconds, lt: 10}"), records)) == {"c1"}
    assert set(decide(one_rule("{field: ip_mismatch, eq: true}"), records)) == {"c2"}
    assert set(decide(one_rule("{field: age_hours, lt: 1}"), records)) == {"c3"}
    assert set(decide(one_rule("{field: age_seconds, ge: 86400}"), records)) == {"c1", "c2", "c4"}
    assert set(decide(one_rule("{field: email_domain, eq: mailinator.com}"), records)) == {"c4"}
    assert set(decide(one_rule("{field: hold_age_hours, ge: 24}"), records)) == {
        "c1",
        "c2",
        "c3",
        "c4",
    }


def test_count_same_within_a_time_window() -> None:
    hour = 3600
    t0 = int(NOW) - 10 * 86_400
    shared = "185.1.1.1"
    records = [
        # Four conversions from one IP inside 24 h: all four are caught, not just the 4th.
        *(
            rec(i, conversion_user_ip=shared, conversion_unix_timestamp=t0 + i * hour)
            for i in range(1, 5)
        ),
        # The same IP again 3 days later, alone in its window.
        rec(5, conversion_user_ip=shared, conversion_unix_timestamp=t0 + 72 * hour),
        # Empty IPs never share a value.
        rec(6, conversion_user_ip=""),
        rec(7, conversion_user_ip=""),
    ]
    rule = one_rule("{agg: {count_same: conversion_user_ip, within_hours: 24}, gt: 3}")
    assert set(decide(rule, records)) == {"c1", "c2", "c3", "c4"}
    no_window = one_rule("{agg: {count_same: conversion_user_ip}, ge: 5}")
    assert set(decide(no_window, records)) == {"c1", "c2", "c3", "c4", "c5"}
    assert decide(one_rule("{agg: {count_same: conversion_user_ip}, missing: true}"), records) == {
        "c6": "r",
        "c7": "r",
    }


def test_count_same_over_several_fields_and_per_group() -> None:
    records = [
        rec(1, email="a@x.com", order_id="o1"),
        rec(2, email="a@x.com", order_id="o1"),
        rec(3, email="a@x.com", order_id="o2"),
        rec(4, email="b@x.com", order_id="o1", relationship={"offer": {"network_offer_id": 8}}),
    ]
    assert set(decide(one_rule("{agg: {count_same: [email, order_id]}, gt: 1}"), records)) == {
        "c1",
        "c2",
    }
    per_offer = "{agg: {count_same: order_id, per: relationship.offer.network_offer_id}, gt: 1}"
    assert set(decide(one_rule(per_offer), records)) == {"c1", "c2"}


def test_share_count_distinct_and_ratio_to_median() -> None:
    aff = "relationship.affiliate.network_affiliate_id"
    records = [
        rec(1, sub1="s-a", relationship={"affiliate": {"network_affiliate_id": 1}}),
        rec(2, sub1="s-a", relationship={"affiliate": {"network_affiliate_id": 1}}),
        rec(3, sub1="s-a", relationship={"affiliate": {"network_affiliate_id": 1}}),
        rec(4, sub1="s-b", relationship={"affiliate": {"network_affiliate_id": 1}}),
        rec(
            5,
            sub1="s-a",
            relationship={"affiliate": {"network_affiliate_id": 2}},
            sale_amount=4000.0,
        ),
    ]
    # s-a is 3/4 of affiliate 1's conversions, and 1/1 of affiliate 2's.
    share = f"{{agg: {{share_same: sub1, per: {aff}}}, ge: 0.75}}"
    assert set(decide(one_rule(share), records)) == {"c1", "c2", "c3", "c5"}
    # Affiliate 1 is 4/5 of the batch.
    assert set(decide(one_rule(f"{{agg: {{share_same: {aff}}}, gt: 0.5}}"), records)) == {
        "c1",
        "c2",
        "c3",
        "c4",
    }
    # Two distinct sub1 values for affiliate 1.
    distinct = f"{{agg: {{count_distinct: sub1, per: {aff}}}, ge: 2}}"
    assert set(decide(one_rule(distinct), records)) == {"c1", "c2", "c3", "c4"}
    # Median sale is 100: 4000 is 40x.
    assert set(decide(one_rule("{agg: {ratio_to_median: sale_amount}, gt: 20}"), records)) == {"c5"}


def test_aggregates_count_ineligible_records_but_decide_only_eligible() -> None:
    shared = "185.9.9.9"
    records = [rec(i, conversion_user_ip=shared) for i in range(1, 4)]
    rule = one_rule("{agg: {count_same: conversion_user_ip}, ge: 3}")
    assert set(decide(rule, records, eligible=[0])) == {"c1"}


def test_matched_values_and_counts_per_rule() -> None:
    ruleset = RuleSet(
        loads_rules(one_rule("{all: [{field: sub1, eq: blk}, {agg: {count_same: sub1}, ge: 2}]}"))
    )
    records = [rec(1, sub1="blk"), rec(2, sub1="blk"), rec(3)]
    evaluation = ruleset.evaluate(records, now=NOW)
    assert evaluation.per_rule == {"r": 2}
    assert evaluation.per_action == {"approve": 0, "reject": 2, "review": 0, "hold": 0}
    assert evaluation.unmatched == 1
    assert evaluation.decisions[0].matched == {"sub1": "blk", "count_same(sub1)": 2}


def test_hold_action_stops_later_rules() -> None:
    rules = """\
    rules:
      - id: keep
        description: d
        action: hold
        when: {field: relationship.affiliate.account_status, ne: active}
      - id: approve-rest
        description: d
        action: approve
        when: {field: sale_amount, gt: 0}
    """
    records = [rec(1, relationship={"affiliate": {"account_status": "suspended"}}), rec(2)]
    assert decide(rules, records) == {"c1": "keep", "c2": "approve-rest"}


def test_lists_are_usable_in_in_and_not_in() -> None:
    rules = """\
    lists:
      blocked: [blk-1, blk-2]
    rules:
      - id: r
        description: d
        action: reject
        when: {field: sub1, in: $blocked}
    """
    records = [rec(1, sub1="blk-2"), rec(2)]
    assert decide(rules, records) == {"c1": "r"}


def test_records_with_missing_fields_do_not_break_evaluation() -> None:
    records = [{"conversion_id": "bare"}, rec(1)]
    rules = one_rule(
        "{any: [{field: sale_amount, gt: 50}, {field: relationship.offer.network_offer_id, eq: 7},"
        " {agg: {count_same: email, within_hours: 1}, ge: 1}, {field: hold_age_hours, gt: 1}]}"
    )
    assert decide(rules, records) == {"c1": "r"}


def test_untyped_paths_with_objects_and_lists() -> None:
    records = [
        rec(1, relationship={"usm_data": {"campaign": "spring-sale", "tags": ["a"]}}),
        rec(2, relationship={"usm_data": {"campaign": {"nested": True}, "tags": "b"}}),
        rec(3),
    ]
    assert decide(
        one_rule("{field: relationship.usm_data.campaign, regex: '^spring'}"), records
    ) == {"c1": "r"}
    assert set(decide(one_rule("{field: relationship.usm_data.tags, in: [b, a]}"), records)) == {
        "c2"
    }
    assert set(decide(one_rule("{field: relationship.usm_data.tags, not_in: [b]}"), records)) == {
        "c1",
        "c3",
    }
    assert set(
        decide(one_rule("{field: relationship.usm_data.campaign, exists: true}"), records)
    ) == {
        "c1",
        "c2",
    }
    first_snapshot = "{field: 'relationship.on_hold_snapshots[0]', exists: true}"
    assert set(decide(one_rule(first_snapshot), records)) == {"c1", "c2", "c3"}
