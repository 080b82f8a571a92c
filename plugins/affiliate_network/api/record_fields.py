"""The spec's conversion record (spec: "Conversion record"): top-level fields by JSON type, and
the members of its ``relationship`` object.

One schema for the Parquet schema (:mod:`affiliate_network.reports.schema`) and the rules
language (:mod:`affiliate_network.rules.fields`). No imports: DAG parsing may read it.
"""

from __future__ import annotations

STRING_FIELDS: tuple[str, ...] = (
    *(f"adv{n}" for n in range(1, 11)),
    "android_id",
    "android_id_md5",
    "android_id_sha1",
    "app_id",
    "brand",
    "browser",
    "carrier",
    "city",
    "conversion_id",
    "conversion_user_ip",
    "country",
    "coupon_code",
    "currency_id",
    "device_model",
    "device_type",
    "email",
    "error_message",
    "event",
    "google_ad_id",
    "google_ad_id_md5",
    "google_ad_id_sha1",
    "http_user_agent",
    "idfa",
    "idfa_md5",
    "idfa_sha1",
    "isp",
    "language",
    "notes",
    "order_id",
    "os_version",
    "payout_type",
    "platform",
    "referer",
    "region",
    "revenue_type",
    "session_user_ip",
    "source_id",
    "status",
    *(f"sub{n}" for n in range(1, 11)),
    "transaction_id",
    "url",
)
INTEGER_FIELDS: tuple[str, ...] = (
    "click_unix_timestamp",
    "conversion_unix_timestamp",
    "dma",
    "error_code",
    "network_offer_payout_revenue_id",
    "previous_network_offer_id",
)
NUMBER_FIELDS: tuple[str, ...] = ("payout", "revenue", "sale_amount")
BOOLEAN_FIELDS: tuple[str, ...] = ("is_event", "is_scrub", "is_view_through")

#: A ``relationship`` member: (is a list, its known sub-fields; empty for a scalar, ``None`` when
#: the spec leaves its contents open).
Member = tuple[bool, frozenset[str] | None]


def _object(*subfields: str) -> Member:
    """A member holding one object with these sub-fields."""
    return (False, frozenset(subfields))


def _objects(*subfields: str) -> Member:
    """A member holding a list of objects with these sub-fields."""
    return (True, frozenset(subfields))


_SCALAR: Member = (False, frozenset())
_OPEN: Member = (False, None)
_EMPLOYEE = ("account_status", "first_name", "full_name", "last_name", "network_employee_id")
_SETTING = ("name", "network_custom_payout_revenue_setting_id")

#: ``relationship`` members: name -> (is a list, known sub-fields or None when open-ended).
RELATIONSHIP_MEMBERS: dict[str, Member] = {
    "account_manager": _object(*_EMPLOYEE, "network_id"),
    "affiliate_manager": _object(*_EMPLOYEE, "network_id"),
    "adv_global_event": _object(
        "advertiser_id", "entry_name", "network_advertiser_global_event_id", "network_id"
    ),
    "advertiser": _object("account_status", "name", "network_advertiser_id", "network_id"),
    "affiliate": _object("account_status", "name", "network_affiliate_id", "network_id"),
    "affiliate_tier": _object("name", "network_affiliate_tier_id", "network_id", "status"),
    "campaign": _object("campaign_name", "campaign_status", "network_campaign_id", "network_id"),
    "candidate_clicks": _objects("relationship", "transaction_id", "unix_timestamp"),
    "custom_payout_revenue": _object(*_SETTING, "network_id"),
    "line_items_custom_payout_revenue_settings": _objects(*_SETTING, "network_id"),
    "offer": _object("name", "network_id", "network_offer_id", "offer_status"),
    "offer_group": _object(
        "name",
        "network_advertiser_id",
        "network_id",
        "network_offer_group_id",
        "offer_count",
        "offer_group_status",
    ),
    "offer_url": _object("name", "network_id", "network_offer_id", "network_offer_url_id"),
    "on_hold_snapshots": _objects(
        "initiator",
        "network_employee",
        "network_id",
        "on_hold_conversion_history_snapshot_id",
        "on_hold_conversion_id",
        "snapshot_type",
        "status",
        "unix_timestamp",
    ),
    "order_line_items": _objects(
        "discount",
        "name",
        "network_order_line_item_id",
        "order_id",
        "order_number",
        "price",
        "product_id",
        "quantity",
        "sku",
    ),
    "postback_control": _object("name", "network_id", "network_postback_control_id"),
    "snapshots": _objects(
        "conversion_history_snapshot_id",
        "conversion_id",
        "error_code",
        "initiator",
        "network_employee",
        "network_id",
        "payout",
        "revenue",
        "sale_amount",
        "snapshot_type",
        "status",
        "unix_timestamp",
    ),
    "tiered_commission": _object("name", "network_id", "network_tiered_commission_id"),
    # Scalar members.
    "attribution_method": _SCALAR,
    "click_attribution_method": _SCALAR,
    "conversion_referer": _SCALAR,
    "redirect_url": _SCALAR,
    "referer": _SCALAR,
    "events_count": _SCALAR,
    "is_enforce_caps": _SCALAR,
    "unix_timestamp_postback": _SCALAR,
    # Objects whose contents the spec does not show: any sub-path is accepted.
    "usm_data": _OPEN,
    "query_parameters": _OPEN,
}
