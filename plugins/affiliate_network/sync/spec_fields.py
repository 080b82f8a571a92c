"""Field lists and enumerations of the writable objects, taken from the API spec in one place.

Every PUT of the spec "replaces the whole object; omitted non-required fields revert to
defaults", and the spec shows no GET for offer groups or offers. A definition that leaves out a
field the PUT body carries would therefore silently reset that field on the network. The
``*_WHOLE_FIELDS`` tuples below are the fields a definition MUST hold for each object type; the
loader refuses a definition missing any of them (listing them all) before anything is sent.

Sections of ``affiliate-network-api.md`` each list is copied from are named in the comments.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

#: Offer group, "Cap fields on the offer group": period x metric, 16 numbers.
CAP_PERIODS: tuple[str, ...] = ("daily", "weekly", "monthly", "global")
CAP_METRICS: tuple[str, ...] = ("conversion", "payout", "revenue", "click")
CAP_FIELDS: tuple[str, ...] = tuple(f"{p}_{m}_cap" for p in CAP_PERIODS for m in CAP_METRICS)

#: "PUT /networks/offergroups/{offerGroupId}": the body fields (the id is the path parameter).
OFFER_GROUP_WHOLE_FIELDS: tuple[str, ...] = (
    "name",
    "offer_group_status",
    "network_advertiser_id",
    "network_offer_ids",
    "currency_id",
    "labels",
    "internal_notes",
    "is_caps_enabled",
    "is_soft_cap",
    *CAP_FIELDS,
)

#: "PUT /networks/offers/{offerId}": "Fields used in the request". The complete list of accepted
#: request fields is not shown by the spec, so these are the fields we send and require.
OFFER_WHOLE_FIELDS: tuple[str, ...] = (
    "offer_status",
    "redirect_mode",
    "conversion_method",
    "session_definition",
    "network_advertiser_id",
    "name",
    "network_category_id",
    "destination_url",
    "currency_id",
    "network_tracking_domain_id",
    "visibility",
    "payout_revenue",
)

#: Offer "payout_revenue (array of entries with payout_type, payout_amount, revenue_type,
#: revenue_amount, is_default)": required in every entry.
PAYOUT_REVENUE_WHOLE_FIELDS: tuple[str, ...] = (
    "payout_type",
    "payout_amount",
    "revenue_type",
    "revenue_amount",
    "is_default",
)

#: "POST /networks/custom/scrubrate": required body fields (variables and ruleset are optional).
SCRUB_RATE_WHOLE_FIELDS: tuple[str, ...] = (
    "network_offer_id",
    "network_affiliate_id",
    "name",
    "custom_setting_status",
    "scrub_rate_percentage",
    "scrub_rate_status",
)

#: "PUT /networks/channels/{channelId}": "Body (all fields required)".
CHANNEL_WHOLE_FIELDS: tuple[str, ...] = ("name", "status")

#: "POST /networks/categories".
CATEGORY_WHOLE_FIELDS: tuple[str, ...] = ("name", "status")

#: "PATCH /networks/patch/offerurls/apply" with field_type ``url_status``, operator ``overwrite``.
OFFER_URL_STATUS_WHOLE_FIELDS: tuple[str, ...] = (
    "network_offer_id",
    "network_offer_url_ids",
    "url_status",
)

#: Object type (the top-level YAML section) -> fields a definition must hold.
WHOLE_FIELDS: dict[str, tuple[str, ...]] = {
    "offer_groups": OFFER_GROUP_WHOLE_FIELDS,
    "offers": OFFER_WHOLE_FIELDS,
    "scrub_rates": SCRUB_RATE_WHOLE_FIELDS,
    "channels": CHANNEL_WHOLE_FIELDS,
    "categories": CATEGORY_WHOLE_FIELDS,
    "offer_urls": OFFER_URL_STATUS_WHOLE_FIELDS,
}
#: Nested lists whose entries have their own required fields: (section, list field) -> fields.
NESTED_WHOLE_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("offers", "payout_revenue"): PAYOUT_REVENUE_WHOLE_FIELDS,
}

# --- Closed enumerations ("States and transitions" table and the endpoint bodies). ---
# Each is a Literal type (the models' field types) and the tuple of its values (messages, checks).
OfferGroupStatus: TypeAlias = Literal["active", "paused", "deleted"]
OfferUrlStatus: TypeAlias = Literal["active", "paused", "deleted"]
CustomSettingStatus: TypeAlias = Literal["active", "inactive"]
ScrubRateStatus: TypeAlias = Literal["rejected", "pending"]
ChannelStatus: TypeAlias = Literal["active", "inactive"]
CategoryStatus: TypeAlias = Literal["active", "inactive"]
#: "Custom payout/revenue setting" lists the full payout and revenue type enumerations; the offer
#: payout entries use the same types ("cpa"/"rpa" seen). ``blank`` only means "custom payout not
#: enabled" on custom settings, so it is not accepted on an offer entry.
PayoutType: TypeAlias = Literal[
    "cpc",
    "cpa",
    "cpm",
    "cps",
    "cpa_cps",
    "prv",
    "cpa_sku",
    "cps_sku",
    "cpa_cps_sku",
    "prv_sku",
]
RevenueType: TypeAlias = Literal[
    "rpc",
    "rpa",
    "rpm",
    "rps",
    "rpa_rps",
    "rpa_sku",
    "rps_sku",
    "rpa_rps_sku",
]
OFFER_GROUP_STATUSES: tuple[str, ...] = get_args(OfferGroupStatus)
OFFER_URL_STATUSES: tuple[str, ...] = get_args(OfferUrlStatus)
CUSTOM_SETTING_STATUSES: tuple[str, ...] = get_args(CustomSettingStatus)
SCRUB_RATE_STATUSES: tuple[str, ...] = get_args(ScrubRateStatus)
CHANNEL_STATUSES: tuple[str, ...] = get_args(ChannelStatus)
CATEGORY_STATUSES: tuple[str, ...] = get_args(CategoryStatus)
PAYOUT_TYPES: tuple[str, ...] = get_args(PayoutType)
REVENUE_TYPES: tuple[str, ...] = get_args(RevenueType)
#: Scrub rate percentage bounds ("Limits").
SCRUB_RATE_PERCENTAGE_MIN = 0
SCRUB_RATE_PERCENTAGE_MAX = 100

# --- Open enumerations: the spec lists only the values "seen"; others are "not shown". ---
#: A value outside these passes validation (it must still look like an enum value) but the plan
#: carries a warning, so a reviewer sees that the value is undocumented.
OFFER_SEEN_VALUES: dict[str, tuple[str, ...]] = {
    "offer_status": ("active",),
    "visibility": ("public",),
    "conversion_method": ("server_postback",),
    "redirect_mode": ("standard",),
    "session_definition": ("cookie",),
    "redirect_routing_method": ("internal",),
    "redirect_internal_routing_type": ("priority",),
    "attribution_method": ("first_touch",),
    "duplicate_filter_targeting_action": ("unknown",),
    "already_converted_action": ("unknown",),
    "scrub_rate_status": ("rejected",),
    "email_attribution_method": ("unknown",),
    "email_attribution_window_type": ("unknown",),
}

#: Offer-group caps: the fields the caps operator pushes, shown first in diffs.
CAP_CONTROL_FIELDS: tuple[str, ...] = ("is_caps_enabled", "is_soft_cap", *CAP_FIELDS)

# --- Offer record fields beyond the documented request fields ("Offer" section). ---
#: "The body is the offer object": these record fields may be written in a definition and are
#: then sent too. A PUT resets any of them left out to the network default, so a definition
#: that must keep e.g. ``preview_url`` writes it out. Grouped by the spec's types.
OFFER_OPTIONAL_STRINGS: tuple[str, ...] = (
    "thumbnail_url",
    "server_side_url",
    "preview_url",
    "html_description",
    "internal_notes",
    "project_id",
    "date_live_until",
    "app_identifier",
    "terms_and_conditions",
    "session_tracking_start_on",
    "view_through_destination_url",
)
OFFER_OPTIONAL_ENUMS: tuple[str, ...] = (
    "redirect_routing_method",
    "redirect_internal_routing_type",
    "attribution_method",
    "duplicate_filter_targeting_action",
    "already_converted_action",
    "scrub_rate_status",
    "email_attribution_method",
    "email_attribution_window_type",
)
OFFER_OPTIONAL_INTEGERS: tuple[str, ...] = (
    "session_duration",
    "caps_timezone_id",
    "suppression_list_id",
    "session_tracking_lifespan_hour",
    "session_tracking_minimum_lifespan_second",
    "email_attribution_window_minute",
    "view_through_session_tracking_lifespan_minute",
    "view_through_session_tracking_minimal_lifespan_second",
)
OFFER_OPTIONAL_BOOLEANS: tuple[str, ...] = (
    "is_caps_enabled",
    "is_soft_cap",
    "is_use_scrub_rate",
    "is_duplicate_filter_enabled",
    "is_block_already_converted",
    "is_use_secure_link",
    "is_allow_deep_link",
    "is_session_tracking_enabled",
    "is_whitelist_check_enabled",
    "is_seo_friendly",
    "is_use_direct_linking",
    "is_view_through_enabled",
    "is_fail_traffic_enabled",
    "is_using_suppression_list",
    "is_using_explicit_terms_and_conditions",
    "is_force_terms_and_conditions",
    "is_must_approve_conversion",
    "is_allow_duplicate_conversion",
    "is_description_plain_text",
    "is_email_attribution_enabled",
    "is_email_attribution_window_enabled",
    "is_view_through_session_tracking_enabled",
)
#: Numbers: the offer-level caps and scrub rate percentage.
OFFER_OPTIONAL_NUMBERS: tuple[str, ...] = (*CAP_FIELDS, "scrub_rate_percentage")
