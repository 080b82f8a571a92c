"""Desired-state models: what the network should hold, one pydantic model per object type.

Field names are the API's own (``offer_group_status``, ``network_offer_ids``...), so a definition
reads like the request it becomes and nothing is lost in a mapping. Models are strict: a number
written as a string, an unknown field or a value outside a closed enumeration is an error, never
coerced. Completeness (a PUT replaces the whole object) is checked by the loader against
:mod:`affiliate_network.sync.spec_fields` before these models run, so the error lists every
missing field at once.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StrictStr,
    create_model,
    field_validator,
)

from affiliate_network.sync import spec_fields as sf

#: A network id: positive integer (``*_id`` fields are integers).
NetworkId = Annotated[StrictInt, Field(gt=0)]
#: A reference to an optional related object: an id, or 0 for "none" (the API's default).
OptionalId = Annotated[StrictInt, Field(ge=0)]


def _number_check(
    *, ge: float | None = None, le: float | None = None
) -> Callable[[Any], int | float]:
    """A JSON number (int or float, not bool, not a string) within ``[ge, le]``; ints stay ints."""

    def check(value: Any) -> int | float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("Input should be a number")
        if not math.isfinite(value):  # YAML's .nan/.inf: no JSON number can carry them
            raise ValueError("Input should be a finite number")
        if ge is not None and value < ge:
            raise ValueError(f"Input should be greater than or equal to {ge}")
        if le is not None and value > le:
            raise ValueError(f"Input should be less than or equal to {le}")
        return value

    return check


def _whole_number_check(*, ge: int | None = None) -> Callable[[Any], int]:
    """A whole JSON number (an int; ``250.0`` is read as 250, ``250.5`` is an error), not bool."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("Input should be a number (a whole number)")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError("Input should be a whole number (caps have no fractional part)")
            value = int(value)
        if ge is not None and value < ge:
            raise ValueError(f"Input should be greater than or equal to {ge}")
        return int(value)

    return check


#: A money / count / rate value: a JSON number, never negative.
NonNegativeNumber: TypeAlias = Annotated[int | float, PlainValidator(_number_check(ge=0))]
#: A cap (conversions, clicks, payout or revenue per period): a whole number, 0 = no cap.
Cap: TypeAlias = Annotated[int, PlainValidator(_whole_number_check(ge=0))]
#: A percentage: 0 to 100.
Percentage: TypeAlias = Annotated[int | float, PlainValidator(_number_check(ge=0, le=100))]
#: The scrub rate a custom setting carries, within the spec's bounds.
ScrubRatePercentage: TypeAlias = Annotated[
    int | float,
    PlainValidator(_number_check(ge=sf.SCRUB_RATE_PERCENTAGE_MIN, le=sf.SCRUB_RATE_PERCENTAGE_MAX)),
]
#: Currency code string (USD, EUR, GBP...).
CurrencyCode = Annotated[StrictStr, Field(pattern=r"^[A-Z]{3}$")]
#: Value of an open enumeration (only some values are shown by the spec): lower_snake_case.
OpenEnum = Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_]*$")]
#: Stable name of a definition inside the desired state (the ledger key).
ObjectKey = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")]


def definition_json(value: Any) -> str:
    """Deterministic JSON text (sorted keys, no spaces) that a ledger definition hash is taken of.

    Not ``reports.schema.canonical_json`` (orjson bytes of a landed record, for the manifest's
    content checksum): the two differ on NaN/infinity and on integers beyond 64 bits, and each
    hash is stored (sync ledger, report manifests), so neither may change to match the other.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def definition_hash(body: dict[str, Any]) -> str:
    """SHA-256 of the definition JSON of a request body."""
    return "sha256:" + hashlib.sha256(definition_json(body).encode()).hexdigest()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class DesiredObject(_Strict):
    """Base of every definition.

    :param key: stable name of the definition (the ledger key); defaults to the network id for
        objects addressed by id.
    """

    #: Top-level YAML section of this object type.
    section: ClassVar[str]
    #: Human name of the object type in messages.
    label: ClassVar[str]
    #: Name of the id field addressing the object in the URL path (PUT kinds), else ``None``.
    id_field: ClassVar[str | None] = None
    #: True when the API only creates this object (no update, no read): exactly-once semantics.
    create_only: ClassVar[bool] = False

    key: ObjectKey | None = None

    def __init_subclass__(
        cls,
        *,
        section: str | None = None,
        label: str | None = None,
        id_field: str | None = None,
        create_only: bool = False,
        **kwargs: Any,
    ) -> None:
        """An object kind names itself in its class line, e.g. ``class Channel(DesiredObject,
        section="channels", label="channel", id_field="network_channel_id")``."""
        super().__init_subclass__(**kwargs)
        if section is not None and label is not None:
            cls.section, cls.label = section, label
            cls.id_field, cls.create_only = id_field, create_only

    @property
    def network_id(self) -> int | None:
        """Id of the object on the network when the definition addresses it by id."""
        return getattr(self, self.id_field) if self.id_field else None

    @property
    def object_key(self) -> str:
        """The definition's key (explicit, else derived from the id)."""
        if self.key:
            return self.key
        return str(self.network_id)

    @property
    def ledger_key(self) -> str:
        """``<section>/<key>``: the key of this object in the ledger."""
        return f"{self.section}/{self.object_key}"

    def body(self) -> dict[str, Any]:
        """The request body: every field except the key and the path id, JSON-ready."""
        exclude = {"key"} | ({self.id_field} if self.id_field else set())
        return self.model_dump(mode="json", exclude=exclude, exclude_none=True)

    def definition_hash(self) -> str:
        """Hash of :meth:`body` (what the ledger compares)."""
        return definition_hash(self.body())

    def describe(self) -> str:
        """Short human label, e.g. ``offer group 'spring' (id 3)``."""
        name = getattr(self, "name", None)
        if self.network_id is not None and not self.key:
            parts = [f"{self.label} {self.network_id}"]
        else:
            parts = [f"{self.label} '{self.object_key}'"]
            if self.network_id is not None:
                parts.append(f"(id {self.network_id})")
        if name and name != self.object_key:
            parts.append(f"name {name!r}")
        return " ".join(parts)


class OfferGroup(
    DesiredObject, section="offer_groups", label="offer group", id_field="network_offer_group_id"
):
    """An offer group, sent whole with ``PUT /networks/offergroups/{id}``.

    :param network_offer_group_id: the group to update (there is no create endpoint).
    :param network_offer_ids: offers of the group; they must belong to the advertiser.
    :param labels: labels to assign.
    :param is_caps_enabled: when false every cap value is ignored by the network.
    """

    network_offer_group_id: NetworkId
    name: Annotated[StrictStr, Field(min_length=1)]
    offer_group_status: sf.OfferGroupStatus
    network_advertiser_id: NetworkId
    network_offer_ids: list[NetworkId]
    currency_id: CurrencyCode
    labels: list[Annotated[StrictStr, Field(min_length=1)]]
    internal_notes: StrictStr
    is_caps_enabled: StrictBool
    is_soft_cap: StrictBool
    daily_conversion_cap: Cap
    daily_payout_cap: Cap
    daily_revenue_cap: Cap
    daily_click_cap: Cap
    weekly_conversion_cap: Cap
    weekly_payout_cap: Cap
    weekly_revenue_cap: Cap
    weekly_click_cap: Cap
    monthly_conversion_cap: Cap
    monthly_payout_cap: Cap
    monthly_revenue_cap: Cap
    monthly_click_cap: Cap
    global_conversion_cap: Cap
    global_payout_cap: Cap
    global_revenue_cap: Cap
    global_click_cap: Cap

    @field_validator("network_offer_ids", "labels")
    @classmethod
    def _no_duplicates(cls, value: list[Any]) -> list[Any]:
        duplicates = sorted({str(v) for v in value if value.count(v) > 1})
        if duplicates:
            raise ValueError(f"lists {', '.join(duplicates)} more than once")
        return value


class PayoutRevenueEntry(_Strict):
    """One payout/revenue entry of an offer (the request uses the first five fields).

    :param is_default: the base entry; an offer has exactly one.
    """

    payout_type: sf.PayoutType
    payout_amount: NonNegativeNumber
    revenue_type: sf.RevenueType
    revenue_amount: NonNegativeNumber
    is_default: StrictBool
    # Optional record fields: sent only when written in the definition.
    network_offer_payout_revenue_id: NetworkId | None = None
    entry_name: StrictStr | None = None
    payout_percentage: Percentage | None = None
    revenue_percentage: Percentage | None = None
    is_private: StrictBool | None = None
    is_postback_disabled: StrictBool | None = None
    is_enforce_caps: StrictBool | None = None
    is_must_approve_conversion: StrictBool | None = None
    is_allow_duplicate_conversion: StrictBool | None = None
    is_email_attribution_default_event: StrictBool | None = None


def _optional_offer_fields() -> dict[str, Any]:
    """Pydantic field definitions of the optional offer record fields (all default ``None``)."""
    fields: dict[str, Any] = {}
    for name in sf.OFFER_OPTIONAL_STRINGS:
        fields[name] = (StrictStr | None, None)
    for name in sf.OFFER_OPTIONAL_ENUMS:
        fields[name] = (OpenEnum | None, None)
    for name in sf.OFFER_OPTIONAL_INTEGERS:
        fields[name] = (Annotated[StrictInt, Field(ge=0)] | None, None)
    for name in sf.OFFER_OPTIONAL_BOOLEANS:
        fields[name] = (StrictBool | None, None)
    for name in sf.OFFER_OPTIONAL_NUMBERS:
        kind = Cap if name in sf.CAP_FIELDS else NonNegativeNumber
        fields[name] = (kind | None, None)
    fields["labels"] = (list[Annotated[StrictStr, Field(min_length=1)]] | None, None)
    return fields


if TYPE_CHECKING:  # built at run time (create_model, from spec_fields): mypy sees the base
    _OfferOptionalFields = DesiredObject
else:
    _OfferOptionalFields = create_model(
        "_OfferOptionalFields", __base__=DesiredObject, **_optional_offer_fields()
    )


class Offer(_OfferOptionalFields, section="offers", label="offer", id_field="network_offer_id"):
    """An offer, sent whole with ``PUT /networks/offers/{id}``.

    :param network_offer_id: the offer to update (there is no create endpoint).
    :param network_category_id: the offer's category, 0 for none.
    :param destination_url: may contain the macro ``{transaction_id}``.
    :param payout_revenue: payout/revenue entries, exactly one with ``is_default: true``.

    The other fields of the offer record (``preview_url``, ``internal_notes``, caps, booleans...)
    are optional: written ones are sent, others are reset to the network default by the PUT.
    """

    network_offer_id: NetworkId
    name: Annotated[StrictStr, Field(min_length=1)]
    offer_status: OpenEnum
    redirect_mode: OpenEnum
    conversion_method: OpenEnum
    session_definition: OpenEnum
    network_advertiser_id: NetworkId
    network_category_id: OptionalId
    destination_url: Annotated[StrictStr, Field(pattern=r"^https?://\S+$")]
    currency_id: CurrencyCode
    network_tracking_domain_id: NetworkId
    visibility: OpenEnum
    payout_revenue: Annotated[list[PayoutRevenueEntry], Field(min_length=1)]

    @field_validator("payout_revenue")
    @classmethod
    def _one_default_entry(cls, value: list[PayoutRevenueEntry]) -> list[PayoutRevenueEntry]:
        defaults = sum(1 for entry in value if entry.is_default)
        if defaults != 1:
            raise ValueError(f"needs exactly one entry with is_default: true, found {defaults}")
        return value

    def body(self) -> dict[str, Any]:
        """The PUT body: the documented request fields first (readable diffs), then the rest."""
        body = super().body()
        first = {name: body[name] for name in sf.OFFER_WHOLE_FIELDS if name in body}
        return first | {name: value for name, value in body.items() if name not in first}

    def undocumented_values(self) -> list[str]:
        """Open-enumeration values the spec does not show (they become plan warnings)."""
        notes = []
        for field, seen in sf.OFFER_SEEN_VALUES.items():
            value = getattr(self, field)
            if value is not None and value not in seen:
                notes.append(
                    f"{field}={value!r} is not documented by the spec (seen: {', '.join(seen)})"
                )
        return notes


class ScrubRateVariable(_Strict):
    """A condition that must match for a scrub rate to take effect."""

    variable: Annotated[StrictStr, Field(min_length=1)]
    comparison_method: Annotated[StrictStr, Field(min_length=1)]
    variable_value: StrictStr
    variable_secondary_value: StrictStr | None = None


#: Element shapes of the ruleset lists are "not shown": scalars or objects are accepted.
RulesetItem = StrictStr | StrictInt | dict[str, Any]


class ScrubRateRuleset(_Strict):
    """Targeting restricting which traffic a scrub rate applies to (the spec's ruleset fields)."""

    platforms: list[RulesetItem] | None = None
    device_types: list[RulesetItem] | None = None
    os_versions: list[RulesetItem] | None = None
    browsers: list[RulesetItem] | None = None
    languages: list[RulesetItem] | None = None
    countries: list[RulesetItem] | None = None
    regions: list[RulesetItem] | None = None
    cities: list[RulesetItem] | None = None
    dmas: list[RulesetItem] | None = None
    mobile_carriers: list[RulesetItem] | None = None
    connection_types: list[RulesetItem] | None = None
    ips: list[RulesetItem] | None = None
    isps: list[RulesetItem] | None = None
    brands: list[RulesetItem] | None = None
    postal_codes: list[RulesetItem] | None = None
    days_parting: list[RulesetItem] | None = None
    is_block_proxy: StrictBool | None = None
    is_use_day_parting: StrictBool | None = None
    day_parting_apply_to: StrictStr | None = None
    day_parting_timezone_id: StrictInt | None = None


class ScrubRate(DesiredObject, section="scrub_rates", label="custom scrub rate", create_only=True):
    """A custom scrub rate setting, created once with ``POST /networks/custom/scrubrate``.

    The spec shows no update and no read for these settings: a definition is created exactly
    once and then only compared (a changed definition is drift, reported, never re-created).

    :param key: required: the setting's identity before it has a network id.
    :param scrub_rate_percentage: 0 to 100.
    :param scrub_rate_status: ``rejected`` (rejected at once) or ``pending`` (held for review).
    """

    key: ObjectKey
    network_offer_id: NetworkId
    network_affiliate_id: NetworkId
    name: Annotated[StrictStr, Field(min_length=1)]
    custom_setting_status: sf.CustomSettingStatus
    scrub_rate_percentage: ScrubRatePercentage
    scrub_rate_status: sf.ScrubRateStatus
    variables: list[ScrubRateVariable] | None = None
    ruleset: ScrubRateRuleset | None = None


class Channel(DesiredObject, section="channels", label="channel", id_field="network_channel_id"):
    """A channel, sent whole with ``PUT /networks/channels/{id}`` (all fields required)."""

    network_channel_id: NetworkId
    name: Annotated[StrictStr, Field(min_length=1)]
    status: sf.ChannelStatus


class Category(DesiredObject, section="categories", label="category", create_only=True):
    """An offer category, created once with ``POST /networks/categories``.

    :param key: required: the category's identity before it has a network id.
    """

    key: ObjectKey
    name: Annotated[StrictStr, Field(min_length=1)]
    status: sf.CategoryStatus


class OfferUrlStatus(DesiredObject, section="offer_urls", label="offer URL status"):
    """Status of some offer URLs, set with the bulk edit (``url_status``, ``overwrite``)."""

    network_offer_id: NetworkId
    network_offer_url_ids: Annotated[list[NetworkId], Field(min_length=1)]
    url_status: sf.OfferUrlStatus

    @property
    def object_key(self) -> str:
        if self.key:
            return self.key
        ids = "-".join(str(i) for i in sorted(self.network_offer_url_ids))
        return f"{self.network_offer_id}:{ids}"

    def body(self) -> dict[str, Any]:
        """The bulk-edit request body (one ``overwrite`` of ``url_status``)."""
        return {
            "network_offer_id": self.network_offer_id,
            "network_offer_url_ids": sorted(self.network_offer_url_ids),
            "fields": [
                {
                    "field_type": "url_status",
                    "field_value": self.url_status,
                    "operator": "overwrite",
                }
            ],
        }


#: YAML section -> model, in apply order.
SECTIONS: dict[str, type[DesiredObject]] = {
    "offer_groups": OfferGroup,
    "offers": Offer,
    "scrub_rates": ScrubRate,
    "channels": Channel,
    "categories": Category,
    "offer_urls": OfferUrlStatus,
}


class DesiredState(BaseModel):
    """A validated desired-state file.

    :param source: the file it was read from (for messages).
    :param objects: section -> definitions, in file order.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    source: str
    objects: dict[str, tuple[DesiredObject, ...]]

    def section(self, name: str) -> tuple[DesiredObject, ...]:
        """Definitions of one section (empty when the file has none)."""
        return self.objects.get(name, ())

    def all_objects(self) -> list[DesiredObject]:
        """Every definition, in apply order."""
        return [obj for name in SECTIONS for obj in self.section(name)]

    def counts(self) -> dict[str, int]:
        """Number of definitions per section."""
        return {name: len(self.section(name)) for name in SECTIONS}


def _check_models_match_spec() -> None:
    """The models and the spec field lists must agree (a guard against editing one only)."""
    for section, model in SECTIONS.items():
        missing = set(sf.WHOLE_FIELDS[section]) - set(model.model_fields)
        if missing:
            raise RuntimeError(f"{model.__name__} lacks spec fields {sorted(missing)}")
    missing = set(sf.PAYOUT_REVENUE_WHOLE_FIELDS) - set(PayoutRevenueEntry.model_fields)
    if missing:
        raise RuntimeError(f"PayoutRevenueEntry lacks spec fields {sorted(missing)}")


_check_models_match_spec()
