"""Top-level fields of the spec's conversion record, by JSON type (spec: "Conversion record").

One list for the Parquet schema (:mod:`affiliate_network.reports.schema`) and the rules engine
(:mod:`affiliate_network.review.fields`). No imports: DAG parsing may read it.
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
