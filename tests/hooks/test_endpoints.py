"""One behaviour per endpoint method, plus the outcome-unknown rule for non-idempotent writes."""

from __future__ import annotations

import pytest

from affiliate_network.exceptions import (
    AffiliateNetworkError,
    InvalidRequestError,
    OutcomeUnknownError,
    ReportRowLimitError,
)


def _scrub_body(catalog: dict, name: str) -> dict:
    return {
        "network_offer_id": catalog["network_offer_ids"][0],
        "network_affiliate_id": catalog["network_affiliate_ids"][0],
        "name": name,
        "custom_setting_status": "active",
        "scrub_rate_percentage": 12.5,
        "scrub_rate_status": "pending",
    }


def test_create_scrub_rate_outcome_unknown_is_applied_exactly_once(
    sandbox, make_connection, make_hook
):
    conn = make_connection(
        "an_slow", host=sandbox.base_url, key=sandbox.keys["network"], timeout=0.5
    )
    catalog = sandbox.catalog()
    before = len(sandbox.objects("custom_scrub_rates"))
    sandbox.set_faults(
        apply_then_delay_paths=["/networks/custom/scrubrate"], apply_then_delay_s=1.5
    )
    hook = make_hook(conn, max_attempts=5)
    with pytest.raises(OutcomeUnknownError) as info:
        hook.create_custom_scrub_rate(_scrub_body(catalog, "outcome-unknown"))
    assert "not re-sent" in str(info.value)
    posts = [e for e in sandbox.requests_log() if e["path"].endswith("/networks/custom/scrubrate")]
    assert len(posts) == 1
    stored = sandbox.objects("custom_scrub_rates")
    assert len(stored) == before + 1
    assert [s["name"] for s in stored.values()].count("outcome-unknown") == 1


def test_create_category_outcome_unknown_on_timeout(sandbox, make_connection, make_hook):
    conn = make_connection(
        "an_slow2", host=sandbox.base_url, key=sandbox.keys["network"], timeout=0.5
    )
    sandbox.set_faults(apply_then_delay_paths=["/networks/categories"], apply_then_delay_s=1.5)
    with pytest.raises(OutcomeUnknownError):
        make_hook(conn).create_category(name="only-once", status="active")
    names = [c["name"] for c in sandbox.objects("categories").values()]
    assert names.count("only-once") == 1
    assert sum(1 for e in sandbox.requests_log() if e["path"].endswith("/networks/categories")) == 1


def test_idempotent_put_is_retried_after_timeouts(sandbox, make_connection, make_hook):
    conn = make_connection(
        "an_slow3", host=sandbox.base_url, key=sandbox.keys["network"], timeout=0.3
    )
    channel_id = sandbox.catalog()["network_channel_ids"][0]
    sandbox.set_faults(apply_then_delay_paths=["/networks/channels"], apply_then_delay_s=1.0)
    with pytest.raises(AffiliateNetworkError) as info:
        make_hook(conn, max_attempts=3).update_channel(
            channel_id, name="retried", status="inactive"
        )
    assert not isinstance(info.value, OutcomeUnknownError)
    assert "timeout on attempt 3 of 3" in str(info.value)
    assert sum(1 for e in sandbox.requests_log() if "/networks/channels/" in e["path"]) == 3


def test_create_scrub_rate_and_category_succeed(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    created = hook.create_custom_scrub_rate(_scrub_body(sandbox.catalog(), "plain"))
    assert created["name"] == "plain"
    assert created["scrub_rate_percentage"] == 12.5
    category = hook.create_category(name="cat-a", status="inactive")
    assert category["name"] == "cat-a"
    assert str(category["network_category_id"]) in {str(k) for k in sandbox.objects("categories")}


def test_on_hold_status_is_applied(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    on_hold_id = sandbox.catalog()["on_hold_conversion_ids"][0]
    assert hook.set_on_hold_status([on_hold_id], "approved") is True
    (record,) = list(
        hook.iter_conversions(
            from_date=sandbox.catalog()["first_date"],
            to_date=sandbox.catalog()["last_date"],
            timezone_id=67,
            search_terms=[{"search_type": "on_hold_conversion_id", "value": on_hold_id}],
        )
    )
    assert record["relationship"]["on_hold_snapshots"][-1]["status"] == "approved"
    assert record["status"] == "approved"


def test_on_hold_status_that_is_no_status_word_is_refused_without_sending(
    network_conn, make_hook, sandbox
):
    with pytest.raises(InvalidRequestError, match="status word"):
        make_hook(network_conn).set_on_hold_status(["1"], "Reject me!")
    assert sandbox.requests_log() == []


def test_on_hold_rejecting_status_is_sent_as_configured(network_conn, make_hook, sandbox):
    """The spec does not show the rejecting value: the hook sends it, the server decides."""
    on_hold_id = sandbox.catalog()["on_hold_conversion_ids"][0]
    with pytest.raises(InvalidRequestError, match="Invalid parameters"):
        make_hook(network_conn).set_on_hold_status([on_hold_id], "declined")
    (sent,) = [e for e in sandbox.requests_log() if e["path"].endswith("/reporting/onhold")]
    assert sent["body"]["status"] == "declined"


def test_sale_amount(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    catalog = sandbox.catalog()
    record = next(
        hook.iter_conversions(
            from_date=catalog["last_date"], to_date=catalog["last_date"], timezone_id=67
        )
    )
    assert hook.set_sale_amount(record["conversion_id"], sale_amount=42.5) is True
    (after,) = list(
        hook.iter_conversions(
            from_date=catalog["last_date"],
            to_date=catalog["last_date"],
            timezone_id=67,
            search_terms=[{"search_type": "conversion_id", "value": record["conversion_id"]}],
        )
    )
    assert after["sale_amount"] == 42.5


def test_update_offer_group_and_channel(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    catalog = sandbox.catalog()
    group_id = catalog["network_offer_group_ids"][0]
    advertiser_id = catalog["network_advertiser_ids"][0]
    group = hook.update_offer_group(
        group_id,
        {"name": "renamed", "network_advertiser_id": advertiser_id, "offer_group_status": "paused"},
    )
    assert (group["name"], group["offer_group_status"]) == ("renamed", "paused")
    channel = hook.update_channel(catalog["network_channel_ids"][0], name="ch", status="inactive")
    assert (channel["name"], channel["status"]) == ("ch", "inactive")


def test_bulk_edit_offer_urls(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    url = hook.get_offer_url(sandbox.catalog()["network_offer_url_ids"][0])
    ok = hook.bulk_edit_offer_urls(
        network_offer_id=url["network_offer_id"],
        network_offer_url_ids=[url["network_offer_url_id"]],
        fields=[{"field_type": "url_status", "field_value": "paused", "operator": "overwrite"}],
    )
    assert ok is True
    assert hook.get_offer_url(url["network_offer_url_id"])["url_status"] == "paused"


def test_custom_payout_revenue_expand_all(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    setting_id = sandbox.catalog()["network_custom_payout_revenue_setting_ids"][0]
    plain = hook.get_custom_payout_revenue(setting_id)
    expanded = hook.get_custom_payout_revenue(setting_id, expand_all=True)
    assert plain["network_custom_payout_revenue_setting_id"] == setting_id
    assert expanded["relationship"]
    queries = [e["query"] for e in sandbox.requests_log() if "/payoutrevenue/" in e["path"]]
    assert queries[0].get("relationship") is None
    assert queries[1]["relationship"] == "all"


def test_flowchart_and_label(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    catalog = sandbox.catalog()
    flow = hook.get_transaction_flowchart(catalog["transaction_ids"][0])
    assert set(flow) >= {"clicks", "conversions", "pixel_logs"}
    label = catalog["labels"][0]
    assert hook.get_label(label)["label"] == label


def test_encode_ids(affiliate_conn, make_hook):
    values = make_hook(affiliate_conn).encode_ids([1, 22, 333])
    assert [v["decoded"] for v in values] == [1, 22, 333]
    assert all(isinstance(v["encoded"], str) and v["encoded"] for v in values)


def test_entity_table_returns_rows(affiliate_conn, make_hook, sandbox):
    catalog = sandbox.catalog()
    rows = make_hook(affiliate_conn).affiliate_entity_table(
        from_date=catalog["first_date"],
        to_date=catalog["last_date"],
        columns=["offer", "date"],
        timezone_id=67,
    )
    assert 0 < len(rows) < 10_000
    assert {c["column_type"] for c in rows[0]["columns"]} == {"offer", "date"}


def test_entity_table_raises_at_the_10000_row_cap(sandbox, make_connection, make_hook):
    sandbox.reset(days=2, affiliates=1, conversions_per_day=12000)
    keys = sandbox.keys
    conn = make_connection(
        "an_big_aff",
        host=sandbox.base_url,
        key=keys["affiliate"][sorted(keys["affiliate"], key=int)[0]],
        portal="affiliate",
    )
    catalog = sandbox.catalog()
    with pytest.raises(ReportRowLimitError) as info:
        make_hook(conn).affiliate_entity_table(
            from_date=catalog["first_date"],
            to_date=catalog["last_date"],
            columns=["hour", "sub1", "sub2", "country"],
            timezone_id=67,
        )
    assert "10,000" in str(info.value)


def test_entity_table_validates_columns_before_sending(affiliate_conn, make_hook, sandbox):
    hook = make_hook(affiliate_conn)
    with pytest.raises(InvalidRequestError):
        hook.affiliate_entity_table(
            from_date="2024-01-01", to_date="2024-01-01", columns=["date", "hour"], timezone_id=67
        )
    with pytest.raises(InvalidRequestError):
        hook.affiliate_entity_table(
            from_date="2024-01-01", to_date="2024-01-01", columns=[], timezone_id=67
        )
    assert sandbox.requests_log() == []


def test_update_offer(network_conn, make_hook, sandbox):
    catalog = sandbox.catalog()
    offer_id = catalog["network_offer_ids"][0]
    advertiser_id = catalog["offers"][str(offer_id)]["network_advertiser_id"]
    offer = make_hook(network_conn).update_offer(
        offer_id,
        {"name": "Renamed offer", "network_advertiser_id": advertiser_id, "offer_status": "paused"},
    )
    assert (offer["network_offer_id"], offer["name"], offer["offer_status"]) == (
        offer_id,
        "Renamed offer",
        "paused",
    )
    assert sandbox.objects("offers")[str(offer_id)]["offer_status"] == "paused"


def test_assign_affiliate_tracking_domain(network_conn, make_hook, sandbox):
    catalog = sandbox.catalog()
    affiliate_id = catalog["network_affiliate_ids"][0]
    domain_id = catalog["network_tracking_domain_ids"][-1]
    assignment = make_hook(network_conn).assign_affiliate_tracking_domain(
        affiliate_id,
        {
            "network_affiliate_id": affiliate_id,
            "network_tracking_domain_id": domain_id,
            "is_apply_all_offers": True,
        },
    )
    assert assignment["network_affiliate_id"] == affiliate_id
    assert assignment["network_tracking_domain_id"] == domain_id


def test_pixels_filter_by_offer(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    every = list(hook.iter_pixels())
    offer_id = every[0]["network_offer_id"]
    only = list(hook.iter_pixels(pixel_type="conversion", network_offer_ids=[offer_id]))
    assert only
    assert {p["network_offer_id"] for p in only} == {offer_id}
    assert len(only) <= len(every)


def test_create_gets_outcome_unknown_on_504_without_resending(network_conn, make_hook, sandbox):
    sandbox.set_faults(fail_hard=504, paths=["/networks/categories"])
    with pytest.raises(OutcomeUnknownError) as info:
        make_hook(network_conn, max_attempts=5).create_category(name="gw", status="active")
    assert info.value.status_code == 504
    assert sum(1 for e in sandbox.requests_log() if e["path"].endswith("/networks/categories")) == 1
