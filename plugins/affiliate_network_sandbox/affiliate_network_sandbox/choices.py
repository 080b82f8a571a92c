"""Every behaviour the spec marks "not shown", decided once, in one place.

Each constant names the spec section it fills in. The sandbox README lists the same choices;
clients may rely on these and nothing else. When a choice changes, change it here only.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

# --- Resources and their fields (conventions) --------------------------------------------------
#: Network id of the default-region network and of the EU network (not shown: any integer).
NETWORK_ID = 1
EU_NETWORK_ID = 2

# --- Endpoints: common conventions ---------------------------------------------------------------
#: Paging (shown): default page 1, size 50; maximum 2000 ("typically 2,000").
DEFAULT_PAGE = 1
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 2000

#: Sorting (not shown). Conversion report order: conversions first, then events; within each,
#: by UTC day ascending, then by time ascending (ties by generation index).
#: Other paged lists are sorted by id ascending.

#: Required request fields (not shown for most endpoints). Path ids that do not exist (or are not
#: integers where the path takes an integer) -> 404; body fields that reference ids that do not
#: exist -> 400 ``Invalid parameters.`` (a detail may follow the message; the shape stays).
OFFER_GROUP_REQUIRED = ("name", "network_advertiser_id")
OFFER_REQUIRED = ("name", "network_advertiser_id", "offer_status")
#: Unknown request fields on PUT bodies -> 400; read-only fields are accepted and ignored.
READ_ONLY_FIELDS = ("network_id", "time_created", "time_saved", "relationship")

# --- Timezones and currencies (not shown in the spec) ---------------------------------------------
#: timezone_id: the API's documented table (timezones.py, a copy of the provider's; ids 1..99,
#: 67 = UTC);
#: unknown id -> 400; omitted -> the network's reporting timezone (DataConfig
#: .reporting_timezone_id, 67 by default: a sandbox choice). See sandbox/reporting_window.py.
#: currency_id -> fixed sandbox rate: units of the currency per 1 USD (a sandbox choice; the
#: real service publishes no rates). Unknown code -> 400. See sandbox/money.py for how the
#: aggregated reports apply them.
CURRENCY_RATES: dict[str, Decimal] = {
    "USD": Decimal("1"),
    "EUR": Decimal("0.92"),
    "GBP": Decimal("0.79"),
    "JPY": Decimal("150"),
    "KWD": Decimal("0.307"),
    "IDR": Decimal("15800"),
}
#: Digits of each currency's minor unit (ISO 4217): amounts of raw records carry at most these.
CURRENCY_MINOR_DIGITS: dict[str, int] = {
    "USD": 2,
    "EUR": 2,
    "GBP": 2,
    "JPY": 0,
    "KWD": 3,
    "IDR": 2,
}
#: The network's default currency: an aggregated request without ``currency_id`` is answered
#: in it (sandbox choice; a real network's is in ``GET /networks``).
DEFAULT_CURRENCY = "USD"
#: Raw conversion reports are not converted (documented: amounts come in the offer's
#: currency; ``currency_id`` of the request is validated, not applied). Each generated offer
#: pays in one currency of ``DataConfig.offer_currencies`` (offer k: the k-th modulo the list);
#: its amounts are the USD draws times the rate, at the currency's minor unit. The aggregated
#: reports convert with CURRENCY_RATES (money.convert_sums).

# --- POST /networks/reporting/conversions: filter and search-term items (not shown) --------------
#: ``query.filters`` items: ``{"resource_type": T, "filter_id_value": "<string>"}``. AND across
#: types, OR within a type. T -> the record field it compares (dotted path inside the record).
CONVERSION_FILTER_FIELDS: dict[str, str] = {
    "offer": "relationship.offer.network_offer_id",
    "affiliate": "relationship.affiliate.network_affiliate_id",
    "advertiser": "relationship.advertiser.network_advertiser_id",
    "offer_group": "relationship.offer_group.network_offer_group_id",
    "status": "status",
    "country": "country",
    "platform": "platform",
    "device_type": "device_type",
}
#: ``query.search_terms`` items: ``{"search_type": F, "value": "<string>"}``; exact match of the
#: record field F, terms OR'ed. These three are decoded from the id in O(1); other string fields
#: of the record (sub1..sub10, order_id, conversion_user_ip, ...) are matched by a scan.
ID_SEARCH_TYPES = ("conversion_id", "transaction_id", "on_hold_conversion_id")

# --- Conversion statuses (States: only ``approved`` and ``on_hold`` shown) -----------------------
#: A conversion held for review has ``status: "pending"``; its on-hold state is the LAST entry of
#: ``relationship.on_hold_snapshots`` (``on_hold`` at first).
STATUS_APPROVED = "approved"
STATUS_PENDING = "pending"
STATUS_REJECTED = "rejected"
#: PATCH /networks/reporting/onhold: accepted status values (the rejecting value is not shown).
ONHOLD_PATCH_STATUSES = ("approved", "rejected")
#: Unknown / foreign on-hold ids in a PATCH -> 404, nothing applied (all-or-nothing).
#: Re-sending the current status is a no-op (no snapshot appended): the PATCH is idempotent.
#: Snapshot ``initiator`` is ``manual`` (the only value shown); ``network_employee`` is "api"
#: for PATCH-made snapshots and "" for the initial hold.
SNAPSHOT_INITIATOR = "manual"
#: Late writes. The service's documentation (real-service facts) says status updates are
#: processed asynchronously: a read right after may not show them yet ("up to a few seconds"),
#: and, rarely, the call answers ``result: true`` and the update then fails. It gives no numbers,
#: so both are sandbox settings, off by default (applied at once, never lost): the delay in real
#: monotonic seconds and the share of accepted updates that never land (``--write-delay-s``,
#: ``--lost-write-share``, ``PUT /_sandbox/late-writes``; see sandbox/late_writes.py). Which
#: updates are lost is drawn per on-hold id and per send of that id, so a re-send can land.
#: The timestamp of a landed update's snapshot is the moment it lands (a choice).
LATE_WRITE_DELAY_S = 0.0
LOST_WRITE_SHARE = 0.0
#: Holding period shown in the flowchart's ``on_hold.holding_period_end``: conversion time + 7 days.
HOLDING_PERIOD_S = 7 * 86400

# --- Reversals and adjustments (Resources: "Conversion record"; States: not shown) -------------
#: The spec shows ``payout``, ``revenue`` and ``sale_amount`` as numbers, with no sign rule, and
#: no conversion type for a reversal or an adjustment (nor an adjustments endpoint). Sandbox
#: choices, planted in the large world only (``DataConfig.reversal_share``; the default world
#: has none): a reversal or an adjustment is an ordinary base conversion record (``is_event``
#: false; counted in ``cv`` like any other) whose amounts are negative, in its offer's currency
#: at its minor unit:
#: - a reversal takes back a sale: ``payout`` and ``revenue`` are minus the couple's amounts,
#:   ``sale_amount`` minus the drawn sale amount;
#: - an adjustment takes back part of one: ``payout`` and ``revenue`` are minus
#:   ADJUSTMENT_FRACTION of the couple's amounts (rounded half-up to the minor unit),
#:   ``sale_amount`` 0.
#: Their ``notes`` field (a string the spec shows without meaning) says which, so a person
#: reading the report can tell; nothing else marks them. Their status is any conversion's:
#: approved, or held (``pending``, an on-hold snapshot), by the same on-hold draw or, for a
#: quarter of the others (``data.REVERSAL_HELD_SLOTS``), held for review as they are planted; a
#: held one is approved or rejected by the same PATCH. A conversion carrying a planted fraud
#: pattern is never one (so the planted patterns are unchanged; a held one is a clean on-hold
#: conversion of the truth). Events attached to them are unchanged.
REVERSAL_NOTES = "reversal"
ADJUSTMENT_NOTES = "adjustment"
ADJUSTMENT_FRACTION = Decimal("0.5")

# --- PUT /networks/reporting/conversions/{id}/saleamount -----------------------------------------
#: ``is_event`` selects events vs base conversions; an id of the other kind -> 404.
#: sale_amount must be a number >= 0. The change appends a ``sale_amount`` entry to
#: ``relationship.snapshots`` and shows in every later report.

# --- PUT /networks/offergroups/{id}: defaults of omitted non-required fields -------------------
OFFER_GROUP_DEFAULTS: dict[str, Any] = {
    "offer_group_status": "active",
    "internal_notes": "",
    "currency_id": "USD",
    "network_offer_ids": [],
    "labels": [],
    "is_caps_enabled": False,
    "is_soft_cap": False,
}
CAP_PERIODS = ("daily", "weekly", "monthly", "global")
CAP_METRICS = ("conversion", "payout", "revenue", "click")
#: The sixteen cap fields, default 0 (0 = no cap).
CAP_FIELDS = tuple(f"{p}_{m}_cap" for p in CAP_PERIODS for m in CAP_METRICS)
OFFER_GROUP_STATUSES = ("active", "paused", "deleted")

# --- PUT /networks/offers/{id} (accepted fields and enumerations not shown) ----------------------
OFFER_STATUSES = ("active", "paused", "pending", "deleted")
OFFER_VISIBILITIES = ("public", "require_approval", "private")
OFFER_CONVERSION_METHODS = ("server_postback", "https_image_pixel", "javascript", "html_pixel")
OFFER_REDIRECT_MODES = ("standard", "single_meta_refresh", "double_meta_refresh")
OFFER_SESSION_DEFINITIONS = ("cookie", "ip", "ip_user_agent", "google_ad_id", "idfa")
#: payout_revenue entries: payout_type / revenue_type values (as listed for custom payout/revenue);
#: when payout_revenue is given it must hold exactly one entry with ``is_default: true``.
PAYOUT_TYPES = ("cpc", "cpa", "cpm", "cps", "cpa_cps", "prv")
REVENUE_TYPES = ("rpc", "rpa", "rpm", "rps", "rpa_rps")
#: Omitted non-required offer fields reset to these (the offer record shows them).
OFFER_DEFAULTS: dict[str, Any] = {
    "thumbnail_url": "",
    "destination_url": "",
    "server_side_url": "",
    "preview_url": "",
    "html_description": "",
    "internal_notes": "",
    "project_id": "",
    "date_live_until": "",
    "app_identifier": "",
    "terms_and_conditions": "",
    "session_tracking_start_on": "click",
    "network_category_id": 0,
    "labels": [],
    "visibility": "public",
    "currency_id": "USD",
    "conversion_method": "server_postback",
    "redirect_mode": "standard",
    "redirect_routing_method": "internal",
    "redirect_internal_routing_type": "priority",
    "session_definition": "cookie",
    "attribution_method": "first_touch",
    "duplicate_filter_targeting_action": "unknown",
    "already_converted_action": "unknown",
    "scrub_rate_status": "rejected",
    "email_attribution_method": "unknown",
    "email_attribution_window_type": "unknown",
    "session_duration": 720,
    "network_tracking_domain_id": 0,
    "caps_timezone_id": 67,  # UTC in the API's timezone table
    "suppression_list_id": 0,
    "session_tracking_lifespan_hour": 0,
    "session_tracking_minimum_lifespan_second": 0,
    "email_attribution_window_minute": 0,
    "view_through_session_tracking_lifespan_minute": 0,
    "view_through_session_tracking_minimal_lifespan_second": 0,
    "scrub_rate_percentage": 0,
    "is_caps_enabled": False,
    "is_soft_cap": False,
    "is_use_scrub_rate": False,
    "is_duplicate_filter_enabled": False,
    "is_block_already_converted": False,
    "is_use_secure_link": False,
    "is_allow_deep_link": False,
    "is_session_tracking_enabled": False,
    "is_whitelist_check_enabled": False,
    "is_seo_friendly": False,
    "is_use_direct_linking": False,
    "is_view_through_enabled": False,
    "is_fail_traffic_enabled": False,
    "is_using_suppression_list": False,
    "is_using_explicit_terms_and_conditions": False,
    "is_force_terms_and_conditions": False,
    "is_must_approve_conversion": False,
    "is_allow_duplicate_conversion": False,
    "is_description_plain_text": False,
    "is_email_attribution_enabled": False,
    "is_email_attribution_window_enabled": False,
    "is_view_through_session_tracking_enabled": False,
    "view_through_destination_url": "",
    **{cap: 0 for cap in CAP_FIELDS},
}
#: Default payout_revenue when omitted: one default CPA entry paying 0 / earning 0.
DEFAULT_PAYOUT_REVENUE: dict[str, Any] = {
    "entry_name": "Base",
    "payout_type": "cpa",
    "payout_amount": 0,
    "payout_percentage": 0,
    "revenue_type": "rpa",
    "revenue_amount": 0,
    "revenue_percentage": 0,
    "is_default": True,
    "is_private": False,
    "is_postback_disabled": False,
    "is_enforce_caps": False,
    "is_must_approve_conversion": False,
    "is_allow_duplicate_conversion": False,
    "is_email_attribution_default_event": False,
}

# --- PUT /networks/affiliates/{id}/trackingdomains -----------------------------------------------
#: network_tracking_domain_id is required. network_affiliate_tracking_domain_id given -> that
#: assignment is updated (must exist and belong to the affiliate, else 404); omitted or 0 -> the
#: affiliate's assignment for the same network_offer_id (0 = all offers) is updated, or created.
#: A body network_affiliate_id different from the path id -> 400.

# --- PATCH /networks/patch/offerurls/apply -------------------------------------------------------
OFFER_URL_FIELD_TYPES = (
    "url_status",
    "is_apply_specific_affiliates",
    "network_affiliate_ids",
    "destination_url_replace",
    "name",
    "is_hidden_affiliate",
)
OFFER_URL_OPERATORS = ("overwrite", "append", "delete", "clear")
#: Multi-value fields (the only ones accepting append/delete/clear).
OFFER_URL_MULTI_VALUE = ("network_affiliate_ids",)
#: destination_url_replace field_value (key names not shown): ``{"find": str, "replace": str}``;
#: every occurrence of ``find`` in destination_url is replaced. Validation is all-or-nothing:
#: one bad field or one URL of another offer -> 400, nothing applied.
URL_STATUSES = ("active", "paused", "deleted")

# --- POST /networks/custom/scrubrate -------------------------------------------------------------
#: Required: network_offer_id, network_affiliate_id, name, custom_setting_status,
#: scrub_rate_percentage (0..100), scrub_rate_status. Every POST creates a new id.
CUSTOM_SETTING_STATUSES = ("active", "inactive")
SCRUB_RATE_STATUSES = ("rejected", "pending")

# --- PUT /networks/channels/{id}, POST /networks/categories --------------------------------------
CHANNEL_STATUSES = ("active", "inactive")
CATEGORY_STATUSES = ("active", "inactive")
#: relationship objects of channel, tiered commission, pixel and label records (not shown): {}
#: for channels and pixels; tiered commissions carry their offer/affiliate/advertiser id lists.

# --- POST /affiliates/encode ---------------------------------------------------------------------
#: Only ``tracking_link_affiliate`` is accepted (others -> 400). ids: positive integers < 2**40.
ENCODE_TYPES = ("tracking_link_affiliate",)

# --- POST /networks/tieredcommissions/table, POST /networks/pixelstable --------------------------
#: search_terms on these "find" endpoints: case-insensitive substring match of the field named by
#: search_type (tiered commissions: ``name``; pixels: any string field of the pixel). Unknown
#: search_type -> 400. pixel_type filter: equality (values other than ``conversion`` match none).

# --- GET /networks/custom/payoutrevenue/{id} -----------------------------------------------------
#: The expand parameter is ``relationship=all``; without it ``relationship`` is ``{}``.
EXPAND_PARAM = "relationship"
EXPAND_VALUE = "all"

# --- POST /affiliates/reporting/entity/table -----------------------------------------------------
ENTITY_COLUMNS = (
    "offer",
    "advertiser",
    "country",
    "platform",
    "device_type",
    "sub1",
    "sub2",
    "sub3",
    "sub4",
    "sub5",
    # Named by the public rate-limiting guide's granular list and sent by public clients
    # (real-service facts "entity-table columns"); all granular. ``offer_url`` groups by
    # network_offer_url_id (label: the URL's name), ``event_name`` by the record's ``event``
    # ("" for base conversions), the others by the record field of the same name.
    "offer_url",
    "source_id",
    "adv1",
    "adv2",
    "adv3",
    "adv4",
    "adv5",
    "event_name",
)
TIME_COLUMNS = ("hour", "date", "week", "month", "year")
MAX_COLUMNS = 10
#: ``columns`` items are objects ``{"column": "<name>"}``; anything else (a plain string, a
#: number, an object without ``column``) -> 400 naming the item as sent.
MAX_TABLE_ROWS = 10_000
#: Filter items as in the conversion report (resource types: offer, advertiser, country,
#: platform, device_type, status). Rows are sorted by their column ids.
#: Reporting numbers (affiliate point of view): ``cv`` = approved conversions, ``event`` =
#: events, ``revenue`` = sum of ``payout`` of approved conversions and events (the affiliate's
#: earnings), ``on_hold_conversion_count`` = conversions currently pending, and
#: ``on_hold_potential_revenue`` = their payout. Clicks are synthetic: each conversion carries
#: CLICKS_PER_CONVERSION_RANGE clicks, 92% unique, 2% invalid; imp = 20 x total_click.
CLICKS_PER_CONVERSION_RANGE = (8, 32)

# --- POST /networks/reporting/entity/table (the network's aggregated report) --------------------
#: Documented (public reference, "Aggregated Data Reports" / network "Reporting" pages): the
#: network key's entity table takes the same body as the affiliate one (``from``, ``to``,
#: ``timezone_id``, ``currency_id``, ``columns`` 1..10 with at most one time column,
#: ``query.filters``), groups by the columns (``offer`` and ``affiliate`` give one row per
#: offer/affiliate couple), answers ``{"table": [{"columns": [{"column_type", "id", "label"}],
#: "reporting": {...}}]}`` and caps the table at 10,000 rows with ``incomplete_results: true``.
#: The metrics ``cv`` ("the total count of base conversions", metrics dictionary), ``event``,
#: ``payout``, ``revenue``, ``on_hold_conversion_count``, ``on_hold_potential_payout`` and
#: ``on_hold_potential_revenue`` are named there. The affiliate column is accepted here (the
#: network key sees every affiliate); the other columns are the affiliate table's.
NETWORK_ENTITY_COLUMNS = (*ENTITY_COLUMNS, "affiliate")
#: Which statuses count (sandbox choice where the pages are silent; the on-hold help page says a
#: held conversion is "only nominally" a conversion until it is realised):
#: - ``cv`` counts base conversions whose *current* status is ``approved`` (an on-hold
#:   conversion later approved counts from then on; a rejected one never counts);
#: - ``payout`` and ``revenue`` sum the payout and revenue of those conversions and of the
#:   approved events (events count in money, not in ``cv``; their count is ``event``);
#: - ``on_hold_conversion_count`` / ``on_hold_potential_payout`` / ``on_hold_potential_revenue``
#:   count the conversions currently ``pending`` (on hold) and their amounts;
#: - rejected conversions appear in no metric. Amounts are summed exactly per currency of the
#:   records, converted to the request's currency_id (omitted: DEFAULT_CURRENCY) and rounded once
#:   (money.convert_sums); amounts already in the requested currency are not converted.
NETWORK_COUNTED_STATUS = STATUS_APPROVED
NETWORK_ON_HOLD_STATUS = STATUS_PENDING

# --- Authentication ------------------------------------------------------------------------------
#: Permission scope names (not shown). The sandbox's restricted network key has only ``read``;
#: every write endpoint needs ``write`` and answers 403 ``Insufficient permissions`` otherwise.
MSG_NO_HEADER = "Unable to authenticate request"
MSG_BAD_KEY = "No authentication method found"
MSG_OUT_OF_REALM = "Out of realm"
#: Key header: the spec's ``X-Svc-Api-Key``; the real API family's ``X-Eflow-API-Key`` (its
#: reference and public clients send it) is accepted as an alias. When both are sent the
#: spec's header is read (auth.HEADER, auth.HEADER_ALIAS).
MSG_NO_SCOPE = "Insufficient permissions"
#: Order of checks before an endpoint: rate limit 429 -> router 404 -> 405 -> 401 -> 403 ->
#: injected faults -> endpoint (so every /v1 response carries X-RateLimit-Remaining).
MSG_ROUTE_NOT_FOUND = "Not Found"
MSG_METHOD_NOT_ALLOWED = "Method Not Allowed"
#: ``/meta/*`` (metadata lookups): documented, not a choice: the public metadata reference
#: (OpenAPI "Everflow API - Metadata") declares ``security: []``, so no key is needed. Choice:
#: a key header that is sent is not looked at either (wrong, revoked or another region's key:
#: still 200), since the documented endpoint has no key to check. Requests are answered for
#: this principal (no portal) and count in the keyless rate-limit bucket.
META_PRINCIPAL = "anonymous"

# --- The sandbox's clock (sandbox/clock.py) ------------------------------------------------------
#: Documented by nature, not by a page: the service serves no record it has not received, so no
#: record with ``conversion_unix_timestamp`` (events: their own timestamp, 5 minutes after the
#: conversion) later than the clock is served by any read: conversion report, entity table,
#: id lookups (search terms, flowchart, on-hold PATCH, sale amount: a 404, the id does not
#: exist yet), the admin truth/planted/catalog views. Choices: the clock is the wall clock
#: unless ``--clock`` or ``PUT /_sandbox/clock`` freezes it; ``POST /_sandbox/reset`` returns
#: it to the startup setting; a frozen clock only moves forward (``advance_s`` >= 0, ``now``
#: may set any instant); writes are stamped with the clock's time; ``--clock`` without
#: ``--end-date`` makes the clock's UTC date the data's last day; days after ``end_date`` stay
#: empty whatever the clock says (records are a pure function of the data config).

# --- Errors --------------------------------------------------------------------------------------
MSG_INVALID = "Invalid parameters."
MSG_NOT_FOUND = "Can't find entry in the database"
#: Injected / limit errors: 429, 503, 504 come from the gateway (``Error``); 500 from the endpoint
#: (``error``).
FAULT_MESSAGES: dict[int, tuple[str, str]] = {
    429: ("Error", "Too Many Requests"),
    500: ("error", "Internal Server Error"),
    502: ("Error", "Bad Gateway"),
    503: ("Error", "Service Unavailable"),
    504: ("Error", "Gateway Timeout"),
}

# --- Limits: rate limiting (quota and window not shown in the spec) ------------------------------
#: "sandbox" (the default) is a token bucket per API key (the raw header value; requests without
#: a known key share one bucket), generous so tests and demos run fast: a sandbox choice, not the
#: API's. "documented" follows the public "Rate limiting" guide (docs/api-decisions.md): one
#: window per network (region) per user type, shared by every key of that type.
RATE_LIMIT_CAPACITY = 2000
RATE_LIMIT_REFILL_PER_SECOND = 1000.0
#: Documented (older page): network users 20 requests/s, affiliate/advertiser/partner 5/s, the
#: window resets every 30 s, so the limit per window is rate x 30. The newer page's token bucket
#: (30/s, burst 50) is not modelled: a fixed window is the stricter of the two for bursts.
#: "marketplace" is the guide's "partner". Keys the sandbox does not know share one "" window.
DOCUMENTED_WINDOW_S = 30.0
DOCUMENTED_RATE_PER_S: dict[str, float] = {
    "network": 20.0,
    "affiliate": 5.0,
    "advertiser": 5.0,
    "marketplace": 5.0,
    "": 5.0,
}
#: Documented: at most 10 concurrent requests to /v1/networks/reporting/* (per network).
DOCUMENTED_REPORTING_CONCURRENCY = 10
#: Documented: 1,000 granular queries per rolling 60 minutes per user type, network-wide.
DOCUMENTED_GRANULAR_PER_WINDOW = 1000
DOCUMENTED_GRANULAR_WINDOW_S = 3600.0
#: Not stated by the guide (sandbox choices):
#: - the 11th concurrent reporting request gets 429 ``{"Error": "Too many concurrent requests
#:   to /networks/reporting/* (limit 10)"}`` with ``Retry-After: 1``; it counts against the
#:   30-s window (it reached the server), and the window is checked first;
#: - a request over the granular quota gets 429 ``{"Error": "Granular report quota exceeded:
#:   1000 queries per rolling 3600 s"}`` with ``Retry-After`` = seconds until the oldest counted
#:   query leaves the rolling window and the usual ``X-RateLimit-*`` of the 30-s window (no
#:   header of its own for the hourly quota); a refused granular query is not counted;
#: - only requests that name columns (the entity tables) can be granular; the raw conversion
#:   report names none and never counts;
#: - an answer refused by the 30-s window carries ``Retry-After`` = seconds until that window
#:   resets, ``X-RateLimit-Remaining: 0``;
#: - windows start at the first request of a user type (not at clock multiples of 30 s).
#: Column names as the sandbox spells them; the guide's list is GRANULAR_COLUMNS below (the
#: sandbox keeps its own copy: it implements the documentation and shares no code with the
#: client, so a client that misreads the list is caught instead of agreeing with itself).
RATE_LIMIT_PROFILES: dict[str, dict[str, Any]] = {
    "sandbox": {
        "mode": "per_key",
        "capacity": RATE_LIMIT_CAPACITY,
        "refill_per_second": RATE_LIMIT_REFILL_PER_SECOND,
    },
    "documented": {
        "mode": "documented",
        "window_s": DOCUMENTED_WINDOW_S,
        "limits": {k: int(v * DOCUMENTED_WINDOW_S) for k, v in DOCUMENTED_RATE_PER_S.items()},
        "reporting_concurrency": DOCUMENTED_REPORTING_CONCURRENCY,
        "granular_per_window": DOCUMENTED_GRANULAR_PER_WINDOW,
        "granular_window_s": DOCUMENTED_GRANULAR_WINDOW_S,
    },
}

# --- Other endpoints named but not shown (GET /networks, /affiliates/affiliate, ...) -------------
#: Minimal read-only shapes so every portal has a cheap endpoint to test a key against:
#: GET /networks -> {network_id, name}; GET /affiliates/affiliate -> the affiliate summary;
#: GET /advertisers/advertiser -> the advertiser summary; GET /partners/connections ->
#: {connections: [{network_id, name}]}.

# --- Planted review patterns (data realism; documented rules) ------------------------------------
#: sub1 values treated as blocklisted (planted sub1 values come only from this list; normal sub1
#: values never start with ``blk-``).
BLOCKLISTED_SUB1 = (
    "blk-botnet-01",
    "blk-botnet-02",
    "blk-incent-07",
    "blk-cookie-stuff",
    "blk-adware-33",
    "blk-proxy-farm",
)
#: Pattern names used by the truth endpoints.
PATTERNS = (
    "duplicate_ip",
    "fast_click",
    "blocklisted_sub",
    "outlier_sale_amount",
    "ip_mismatch",
)
#: Rule thresholds the planted data is built around (see README "Planted patterns").
DUPLICATE_IP_MIN_CONVERSIONS = 3
FAST_CLICK_MAX_SECONDS = 10  # planted gaps are 1..9 s; normal gaps are >= 60 s
OUTLIER_SALE_AMOUNT_MIN = 5000.0  # planted outliers >= 5000; normal sale amounts <= 300


#: Columns that make a reporting request granular (public "Rate limiting" guide, newer page: such
#: a request counts against the hourly granular quota), in this API's snake_case spelling.
GRANULAR_COLUMNS: frozenset[str] = frozenset(
    {
        # geolocation
        *("country", "region", "city", "dma", "carrier", "isp", "connection_type"),
        *("postal_code", "is_proxy"),
        # device
        *("platform", "os_version", "device_type", "browser", "device_brand", "language"),
        *("device_model", "device_make"),
        # offer detail
        *("offer_group", "offer_url", "event_name", "advertiser_event_name", "payout_type"),
        *("payout_amount", "revenue_type", "revenue_amount", "custom_payout_revenue"),
        # miscellaneous
        *(f"adv{i}" for i in range(1, 6)),
        *(f"sub{i}" for i in range(1, 6)),
        *("source_id", "project_id", "referrer", "coupon_code", "tracking_domain", "order_id"),
        *("attribution_method", "account_referred_by"),
    }
)
