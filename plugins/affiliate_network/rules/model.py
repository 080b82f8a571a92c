"""Pydantic model of a rules file (structure), plus the semantic checks pydantic cannot express.

Structure (unknown keys, unknown operators and actions, wrong shapes) is checked by pydantic;
meaning (field paths against the record schema, value types against field types, regexes that
compile, list references, duplicate rule ids) by :func:`semantic_errors`, which returns errors
with the same kind of location tuple so both are reported with file, rule id, field and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from affiliate_network.exceptions import PathError
from affiliate_network.rules.fields import describe_path

Action = Literal["approve", "reject", "review", "hold"]
ACTIONS: tuple[str, ...] = ("approve", "reject", "review", "hold")

Operator = Literal[
    "eq", "ne", "in", "not_in", "gt", "ge", "lt", "le", "between", "regex", "exists", "missing"
]
OPERATORS: tuple[str, ...] = (
    "eq",
    "ne",
    "in",
    "not_in",
    "gt",
    "ge",
    "lt",
    "le",
    "between",
    "regex",
    "exists",
    "missing",
)
NUMERIC_OPERATORS = frozenset(("gt", "ge", "lt", "le", "between"))
_AGG_KINDS = ("count_same", "share_same", "count_distinct", "ratio_to_median")

_RULE_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_LIST_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"

Scalar = str | int | float | bool | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Aggregate(_Strict):
    """A batch aggregate: a number computed once per batch over all candidates, per conversion.

    Exactly one of the four kinds:

    :param count_same: how many candidates share this conversion's value of the field (or of the
        combination of fields, given as a list), itself included.
    :param share_same: the same count divided by the number of candidates (or, with ``per``, by
        the number of candidates in the same ``per`` group): a share between 0 and 1.
    :param count_distinct: how many distinct values of this field the conversion's ``per``
        group has (e.g. distinct IPs per email).
    :param ratio_to_median: the field's value divided by the median of that field over the
        conversion's ``per`` group (or the whole batch).
    :param per: group field(s) for ``share_same``, ``count_distinct``, ``ratio_to_median``,
        and an extra grouping key for ``count_same``.
    :param within_hours: ``count_same`` only: count only conversions whose conversion time is
        within this many hours of this one (before or after).
    """

    count_same: str | list[str] | None = None
    share_same: str | list[str] | None = None
    count_distinct: str | None = None
    ratio_to_median: str | None = None
    per: str | list[str] | None = None
    within_hours: Annotated[float, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Aggregate:
        kinds = [k for k in _AGG_KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise PydanticCustomError(
                "aggregate_kind",
                "an aggregate needs exactly one of {kinds} (got {got})",
                {"kinds": ", ".join(_AGG_KINDS), "got": ", ".join(kinds) or "none"},
            )
        if self.within_hours is not None and self.count_same is None:
            raise PydanticCustomError(
                "aggregate_window", "within_hours only applies to count_same", {}
            )
        if self.count_distinct is not None and self.per is None:
            raise PydanticCustomError(
                "aggregate_per",
                "count_distinct needs per: the group whose distinct values are counted",
                {},
            )
        return self

    @property
    def kind(self) -> str:
        return next(k for k in _AGG_KINDS if getattr(self, k) is not None)

    @property
    def fields(self) -> tuple[str, ...]:
        value = getattr(self, self.kind)
        return tuple(value) if isinstance(value, list) else (value,)

    @property
    def per_fields(self) -> tuple[str, ...]:
        if self.per is None:
            return ()
        return tuple(self.per) if isinstance(self.per, list) else (self.per,)

    def label(self) -> str:
        """Short, stable description used as the key of matched values in the audit."""
        text = f"{self.kind}({','.join(self.fields)}"
        if self.per_fields:
            text += f" per {','.join(self.per_fields)}"
        if self.within_hours is not None:
            text += f" within {self.within_hours:g}h"
        return text + ")"


class Test(_Strict):
    """A leaf condition: a field (or an aggregate), an operator and a value.

    Written either ``{field: sale_amount, op: gt, value: 500}`` or, shorter,
    ``{field: sale_amount, gt: 500}``.
    """

    field: str | None = None
    agg: Aggregate | None = None
    op: Operator
    value: Any = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # {field: x, gt: 3} -> {field: x, op: gt, value: 3}; unknown keys stay for extra=forbid.
        if not isinstance(data, dict) or "op" in data:
            return data
        op_keys = [k for k in data if k in OPERATORS]
        if len(op_keys) > 1:
            raise PydanticCustomError(
                "several_operators",
                "a condition takes one operator, got {ops}; combine them with all/any",
                {"ops": ", ".join(op_keys)},
            )
        if not op_keys:
            unknown = [k for k in data if k not in ("field", "agg", "value")]
            if len(unknown) == 1 and ("field" in data or "agg" in data):
                # {field: x, greater: 5}: report it as an unknown operator, not a missing one.
                key = unknown[0]
                return {
                    **{k: v for k, v in data.items() if k != key},
                    "op": key,
                    "value": data[key],
                }
            return data
        key = op_keys[0]
        out = {k: v for k, v in data.items() if k != key}
        value = data[key]
        if key in ("exists", "missing"):
            if not isinstance(value, bool):
                raise PydanticCustomError(
                    "exists_value",
                    "{op} takes true or false, got {value!r}",
                    {"op": key, "value": value},
                )
            out["op"] = key if value else ("missing" if key == "exists" else "exists")
        else:
            out["op"] = key
            out["value"] = value
        return out

    @model_validator(mode="after")
    def _subject(self) -> Test:
        if (self.field is None) == (self.agg is None):
            raise PydanticCustomError(
                "test_subject", "a condition tests exactly one of field or agg", {}
            )
        return self

    def label(self) -> str:
        if self.agg is not None:
            return self.agg.label()
        assert self.field is not None  # _subject: exactly one of field and agg
        return self.field


class AllOf(_Strict):
    """True when every sub-condition is true."""

    all: Annotated[list[Condition], Field(min_length=1)]


class AnyOf(_Strict):
    """True when at least one sub-condition is true."""

    any: Annotated[list[Condition], Field(min_length=1)]


class NotOf(_Strict):
    """True when the sub-condition is false."""

    not_: Condition = Field(alias="not")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _condition_kind(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        return {AllOf: "all-of", AnyOf: "any-of", NotOf: "not-of", Test: "test"}.get(type(value))
    if not isinstance(value, dict):
        return None
    groups = [k for k in ("all", "any", "not") if k in value]
    if len(groups) == 1:
        return {"all": "all-of", "any": "any-of", "not": "not-of"}[groups[0]]
    if groups:
        return None
    if "field" in value or "agg" in value:
        return "test"
    return None


Condition = Annotated[
    Annotated[AllOf, Tag("all-of")]
    | Annotated[AnyOf, Tag("any-of")]
    | Annotated[NotOf, Tag("not-of")]
    | Annotated[Test, Tag("test")],
    Discriminator(
        _condition_kind,
        custom_error_type="condition_shape",
        custom_error_message=(
            "a condition is a mapping with exactly one of: all (list), any (list), not (condition),"
            " field or agg (a test)"
        ),
    ),
]

AllOf.model_rebuild()
AnyOf.model_rebuild()
NotOf.model_rebuild()


class Rule(_Strict):
    """One rule: when ``when`` holds, the conversion gets ``action`` (first matching rule wins).

    :param id: unique, stable identifier (letters, digits, ``_ . -``), quoted in the audit.
    :param description: why the rule exists, shown to reviewers and in the audit.
    :param action: ``approve``, ``reject``, ``review`` (ask a human) or ``hold`` (leave on hold
        and stop evaluating further rules).
    :param when: the condition.
    :param enabled: ``false`` keeps the rule in the file but skips it.
    """

    id: Annotated[str, Field(pattern=_RULE_ID)]
    description: Annotated[str, Field(min_length=1)]
    action: Action
    when: Condition
    enabled: bool = True


def _whole(low: int, high: int | None = None) -> Any:
    return Field(strict=True, ge=low, le=high)


def _finite(low: float, high: float) -> Any:
    """``nan`` and ``inf`` compare false with everything: a check they reach is switched off."""
    return Field(strict=True, ge=low, le=high, allow_inf_nan=False)


_Hours = Annotated[float, _finite(0, 87_600)]  # ten years: more is a typo
_Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$")]
_Ceiling = Annotated[Decimal, Field(ge=0, allow_inf_nan=False)]


class ReviewSettings(_Strict):
    """The on-hold review's guardrails and tuning: the rules file's ``review:`` section.

    Every key is optional; a missing one has the default shown (docs/configuration.md).

    :param lookback_days: days of conversions each review decides (1..366).
    :param min_age_hours: decide a conversion only once it has been on hold this long.
    :param chunk_size: on-hold ids per status write (1..2000).
    :param reject_status: the status a ``reject`` decision writes.
    :param max_reject_share: most rejections / conversions a rule decided (0..1; null: off).
    :param max_reject_count: most rejections in a run's plan (null: off).
    :param max_approved_payout: most payout of a run's approvals per currency
        (``{USD: 2000}``; null: off). Once set, approvals in a currency without one stop the run.
    :param keep_decision_hours: a reviewer's "Keep on hold" is not asked again for this long.
    :param review_minutes: how long a human review request waits before "Keep on hold" applies.
    :param late_arrival_hours: how late a conversion may be recorded and still be counted by the
        first run after its recording (0..168).
    """

    lookback_days: Annotated[int, _whole(1, 366)] = 7
    min_age_hours: _Hours = 1.0
    chunk_size: Annotated[int, _whole(1, 2000)] = 100
    reject_status: Annotated[str, Field(pattern=r"^[a-z][a-z_]*$")] = "rejected"
    max_reject_share: Annotated[float, _finite(0, 1)] | None = 0.5
    max_reject_count: Annotated[int, _whole(0)] | None = 1000
    max_approved_payout: dict[_Currency, _Ceiling] | None = None
    keep_decision_hours: _Hours = 24.0
    review_minutes: Annotated[int, _whole(1, 10_080)] = 50
    late_arrival_hours: Annotated[float, _finite(0, 168)] = 6.0

    @field_validator("reject_status")
    @classmethod
    def _not_approved(cls, status: str) -> str:
        if status == "approved":
            raise ValueError("a rejection cannot write 'approved'")
        return status


class RulesFile(_Strict):
    """A whole rules file.

    :param version: format version; only ``1`` exists.
    :param lists: named value lists (blocklists) that ``in``/``not_in`` can reference as
        ``$name``.
    :param rules: the ordered rules.
    :param review: the on-hold review's guardrails and tuning (:class:`ReviewSettings`).
    """

    version: Literal[1] = 1
    lists: dict[Annotated[str, Field(pattern=_LIST_NAME)], list[str | int | float]] = Field(
        default_factory=dict
    )
    rules: Annotated[list[Rule], Field(min_length=1)]
    review: ReviewSettings = Field(default_factory=ReviewSettings)


# ---------------------------------------------------------------------------------------------
# Semantic checks
# ---------------------------------------------------------------------------------------------

Loc = tuple[str | int, ...]


def iter_tests(condition: Any, loc: Loc) -> Iterator[tuple[Test, Loc]]:
    """Yield every leaf test with its location (keys as written in the file)."""
    if isinstance(condition, AllOf):
        for i, child in enumerate(condition.all):
            yield from iter_tests(child, (*loc, "all", i))
    elif isinstance(condition, AnyOf):
        for i, child in enumerate(condition.any):
            yield from iter_tests(child, (*loc, "any", i))
    elif isinstance(condition, NotOf):
        yield from iter_tests(condition.not_, (*loc, "not"))
    else:
        yield condition, loc


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_ok(ftype: str, value: Any) -> bool:
    if value is None:
        return True
    if ftype == "string":
        return isinstance(value, str)
    if ftype in ("integer", "number"):
        return _is_number(value)
    if ftype == "boolean":
        return isinstance(value, bool)
    if ftype == "object":
        return False
    return isinstance(value, str | int | float | bool)


def _check_value(test: Test, ftype: str, lists: dict[str, list[Any]]) -> tuple[str, str] | None:
    """Return (key, message) for the first problem of a test's op/value, or None."""
    op, value, given = test.op, test.value, "value" in test.model_fields_set
    subject = f"{test.label()!r} ({ftype})"
    if op in ("exists", "missing"):
        if given and value is not None:
            return "value", f"{op} takes no value"
        return None
    if not given:
        return "value", f"{op} needs a value"
    if ftype == "object":
        return "op", f"{subject} is an object: only exists/missing apply to it"
    if op in NUMERIC_OPERATORS:
        if ftype in ("string", "boolean"):
            return "op", f"{op} compares numbers but {subject} is not numeric"
        if op == "between":
            if not (isinstance(value, list) and len(value) == 2 and all(map(_is_number, value))):
                return "value", f"between takes [low, high] (two numbers), got {value!r}"
            if value[0] > value[1]:
                return "value", f"between needs low <= high, got {value!r}"
            return None
        if not _is_number(value):
            return "value", f"{op} takes a number, got {type(value).__name__} {value!r}"
        return None
    if op == "regex":
        if ftype not in ("string", "any"):
            return "op", f"regex applies to text but {subject} is not text"
        if not isinstance(value, str):
            return "value", f"regex takes a pattern string, got {value!r}"
        try:
            re.compile(value)
        except re.error as err:
            return "value", f"invalid regular expression {value!r}: {err}"
        return None
    if op in ("in", "not_in"):
        if isinstance(value, str) and value.startswith("$"):
            if value[1:] not in lists:
                known = ", ".join(sorted(map(str, lists))) or "none defined"
                return "value", f"unknown list {value!r} (lists: {known})"
            items = lists[value[1:]]
            if not isinstance(items, list):
                return "value", f"list {value!r} is not a list of values"
        elif isinstance(value, list) and value:
            items = value
        else:
            return "value", f"{op} takes a non-empty list or a $list reference, got {value!r}"
        bad = [v for v in items if isinstance(v, list | dict) or not _type_ok(ftype, v)]
        if bad:
            return "value", f"{op} values {bad!r} do not match {subject}"
        return None
    # eq / ne
    if isinstance(value, list | dict) or not _type_ok(ftype, value):
        return "value", f"{op} value {value!r} ({type(value).__name__}) does not match {subject}"
    return None


def semantic_errors(rules_file: RulesFile) -> list[tuple[Loc, str]]:
    """Check what the structure cannot: paths, value types, regexes, list refs, unique ids."""
    errors: list[tuple[Loc, str]] = duplicate_id_errors([r.id for r in rules_file.rules])
    for index, rule in enumerate(rules_file.rules):
        errors.extend(rule_semantic_errors(rule, index, rules_file.lists))
    return errors


def duplicate_id_errors(ids: list[Any]) -> list[tuple[Loc, str]]:
    """One error per repeated rule id, at the repetition."""
    errors: list[tuple[Loc, str]] = []
    seen: dict[Any, int] = {}
    for index, rule_id in enumerate(ids):
        if rule_id is None:
            continue
        if rule_id in seen:
            first = seen[rule_id] + 1
            errors.append(
                (
                    ("rules", index, "id"),
                    f"duplicate rule id {rule_id!r} (first used by rule #{first})",
                )
            )
        else:
            seen[rule_id] = index
    return errors


def _agg_errors(agg: Aggregate, loc: Loc) -> list[tuple[Loc, str]]:
    errors: list[tuple[Loc, str]] = []
    for key, paths in ((agg.kind, agg.fields), ("per", agg.per_fields)):
        for path in paths:
            try:
                info = describe_path(path)
            except PathError as err:
                errors.append(((*loc, "agg", key), str(err)))
                continue
            if info.type == "object":
                errors.append(
                    ((*loc, "agg", key), f"{path!r} is an object, not a value to group by")
                )
            elif (
                agg.kind == "ratio_to_median"
                and key == agg.kind
                and info.type
                in (
                    "string",
                    "boolean",
                )
            ):
                message = f"ratio_to_median needs a numeric field, {path!r} is {info.type}"
                errors.append(((*loc, "agg", key), message))
    return errors


def rule_semantic_errors(
    rule: Rule, index: int, lists: dict[str, list[Any]]
) -> list[tuple[Loc, str]]:
    """Semantic errors of one structurally valid rule."""
    errors: list[tuple[Loc, str]] = []
    for test, loc in iter_tests(rule.when, ("rules", index, "when")):
        errors.extend(test_semantic_errors(test, loc, lists))
    return errors


def test_semantic_errors(
    test: Test, loc: Loc, lists: dict[str, list[Any]]
) -> list[tuple[Loc, str]]:
    """Semantic errors of one structurally valid leaf condition at ``loc``."""
    if test.field is not None:
        try:
            ftype = describe_path(test.field).type
        except PathError as err:
            return [((*loc, "field"), str(err))]
    else:
        assert test.agg is not None
        agg_errors = _agg_errors(test.agg, loc)
        if agg_errors:
            return agg_errors
        ftype = "number"
    found = _check_value(test, ftype, lists)
    if found is None:
        return []
    key, message = found
    return [((*loc, key), message)]
