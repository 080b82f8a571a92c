"""Field paths into a conversion record, the record's known schema, and derived fields.

A rule names a value with a dotted path (``sale_amount``, ``relationship.affiliate.name``).
A path segment may carry an index: ``relationship.on_hold_snapshots[-1].status`` is the last
snapshot's status, ``[0]`` the first. A path that walks *through* a list without an index
(``relationship.on_hold_snapshots.status``, or ``[*]``) is multi-valued: a condition on it holds
when ANY element satisfies it (and ``ne``/``not_in``/``missing`` when NONE does).

The known schema (the spec's "Conversion record" section, in
:mod:`affiliate_network.api.record_fields`, typed below for rules) lets validation reject typos
(``conversion_ip``) and wrong value types (``sale_amount: {gt: "abc"}``) before anything is
pulled. Members the spec leaves open (``usm_data``, ``query_parameters``) accept any subpath.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from affiliate_network.api.record_fields import (
    BOOLEAN_FIELDS,
    INTEGER_FIELDS,
    NUMBER_FIELDS,
    RELATIONSHIP_MEMBERS,
    STRING_FIELDS,
)
from affiliate_network.exceptions import PathError

FieldType = Literal["string", "integer", "number", "boolean", "object", "any"]


#: Top-level fields of the conversion record and their JSON types (spec: Conversion record).
RECORD_FIELDS: dict[str, FieldType] = {
    **dict.fromkeys(STRING_FIELDS, "string"),
    **dict.fromkeys(INTEGER_FIELDS, "integer"),
    **dict.fromkeys(NUMBER_FIELDS, "number"),
    **dict.fromkeys(BOOLEAN_FIELDS, "boolean"),
    "relationship": "object",
}

_RELATIONSHIP_SCALAR_TYPES: dict[str, FieldType] = {
    "attribution_method": "string",
    "click_attribution_method": "string",
    "conversion_referer": "string",
    "redirect_url": "string",
    "referer": "string",
    "events_count": "integer",
    "is_enforce_caps": "boolean",
    "unix_timestamp_postback": "integer",
}


# ---------------------------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------------------------

_SEGMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[(-?\d+|\*)\])?$")


@dataclass(frozen=True)
class Segment:
    """One step of a path: a key, then optionally an index (int) or ``"*"`` (every element)."""

    key: str
    index: int | Literal["*"] | None = None


@functools.lru_cache(maxsize=4096)
def parse_path(path: str) -> tuple[Segment, ...]:
    """Split ``a.b[-1].c`` into segments; raise :class:`PathError` when malformed."""
    if not path or not isinstance(path, str):
        raise PathError("a field path must be a non-empty string")
    segments = []
    for part in path.split("."):
        match = _SEGMENT.match(part)
        if match is None:
            raise PathError(
                f"malformed path segment {part!r} in {path!r} "
                "(expected name, name[0], name[-1] or name[*])"
            )
        key, idx = match.groups()
        index: int | Literal["*"] | None = None
        if idx == "*":
            index = "*"
        elif idx is not None:
            index = int(idx)
        segments.append(Segment(key, index))
    return tuple(segments)


@dataclass(frozen=True)
class PathInfo:
    """What validation learned about a path: its type and whether it yields several values."""

    type: FieldType
    multi: bool
    derived: bool = False


def _suggest(name: str, candidates: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def describe_path(path: str) -> PathInfo:
    """Check a path against the known record schema and derived fields.

    :param path: dotted path as written in a rule.
    :raises PathError: unknown field, indexing a non-list, or malformed syntax.
    """
    segments = parse_path(path)
    head = segments[0]
    if len(segments) == 1 and head.key in DERIVED_FIELDS and head.index is None:
        return PathInfo(DERIVED_FIELDS[head.key].type, multi=False, derived=True)
    if head.key not in RECORD_FIELDS:
        raise PathError(
            f"unknown field {head.key!r}"
            + _suggest(head.key, [*RECORD_FIELDS, *DERIVED_FIELDS])
            + "; use a conversion record field, a relationship.* path or a derived field"
        )
    if head.index is not None:
        raise PathError(f"{head.key!r} is not a list and cannot be indexed")
    if head.key != "relationship":
        if len(segments) > 1:
            raise PathError(f"{head.key!r} is a {RECORD_FIELDS[head.key]}, it has no sub-fields")
        return PathInfo(RECORD_FIELDS[head.key], multi=False)
    if len(segments) == 1:
        return PathInfo("object", multi=False)
    member = segments[1]
    if member.key not in RELATIONSHIP_MEMBERS:
        raise PathError(
            f"unknown relationship member {member.key!r}"
            + _suggest(member.key, list(RELATIONSHIP_MEMBERS))
        )
    is_list, subfields = RELATIONSHIP_MEMBERS[member.key]
    if member.index is not None and not is_list:
        raise PathError(f"relationship.{member.key} is not a list and cannot be indexed")
    multi = is_list and member.index in (None, "*")
    rest = segments[2:]
    if subfields is not None and not subfields and rest:
        raise PathError(f"relationship.{member.key} is a scalar, it has no sub-fields")
    if rest and subfields:
        sub = rest[0]
        if sub.key not in subfields:
            raise PathError(
                f"unknown field {sub.key!r} of relationship.{member.key}"
                + _suggest(sub.key, sorted(subfields))
            )
    # Anything below a known member may itself be a list; only explicit [*] makes it multi there.
    multi = multi or any(seg.index == "*" for seg in rest)
    if not rest:
        if subfields is not None and not subfields:
            return PathInfo(_RELATIONSHIP_SCALAR_TYPES.get(member.key, "any"), multi=False)
        return PathInfo("any" if is_list and member.index is not None else "object", multi=multi)
    leaf = rest[-1].key
    ftype: FieldType = "any"
    if leaf in ("unix_timestamp", "payout", "revenue", "sale_amount", "price", "quantity"):
        ftype = "number"
    elif leaf in ("status", "name", "initiator", "snapshot_type", "on_hold_conversion_id"):
        ftype = "string"
    return PathInfo(ftype, multi=multi)


_MISSING = object()


def compile_getter(path: str) -> Callable[[dict[str, Any]], Any]:
    """Return a fast function ``record -> value`` for a path.

    A multi-valued path returns a tuple of the values found (possibly empty); a single-valued
    path returns the value or ``None`` when any step is absent or of the wrong shape.
    """
    segments = parse_path(path)
    if len(segments) == 1 and segments[0].index is None:
        key = segments[0].key
        return lambda record: record.get(key)
    if len(segments) == 2 and segments[0].index is None and segments[1].index is None:
        k1, k2 = segments[0].key, segments[1].key

        def get2(record: dict[str, Any]) -> Any:
            inner = record.get(k1)
            return inner.get(k2) if isinstance(inner, dict) else None

        return get2
    info_multi = _path_is_multi(segments)

    def get(record: dict[str, Any]) -> Any:
        values: list[Any] = [record]
        for segment in segments:
            key, index = segment.key, segment.index
            found: list[Any] = []
            for value in values:
                # A list reached without an index is walked element by element (any-semantics).
                for element in value if isinstance(value, list) else (value,):
                    if not isinstance(element, dict):
                        continue
                    item = element.get(key, _MISSING)
                    if item is _MISSING:
                        continue
                    if index is None:
                        found.append(item)
                    elif isinstance(item, list):
                        if index == "*":
                            found.extend(item)
                        elif -len(item) <= index < len(item):
                            found.append(item[index])
            values = found
            if not values:
                break
        if info_multi:
            return tuple(values)
        return values[0] if values else None

    return get


def _path_is_multi(segments: Sequence[Segment]) -> bool:
    """Multi-valued: goes through a known list member without an index, or uses ``[*]``."""
    if any(seg.index == "*" for seg in segments):
        return True
    if len(segments) >= 2 and segments[0].key == "relationship":
        member = RELATIONSHIP_MEMBERS.get(segments[1].key)
        if member is not None and member[0] and segments[1].index is None:
            # relationship.on_hold_snapshots itself is "the list"; below it, each element.
            return len(segments) > 2
    return False


def path_is_multi(path: str) -> bool:
    """Whether the getter for ``path`` returns a tuple of values (any-element semantics)."""
    return _path_is_multi(parse_path(path))


# ---------------------------------------------------------------------------------------------
# Derived fields: computed per batch, column-wise
# ---------------------------------------------------------------------------------------------


class ColumnSource(Protocol):
    """What a derived field reads: cached columns of the batch and the evaluation time."""

    now: float

    def column(self, path: str) -> Sequence[Any]: ...

    def numeric(self, path: str) -> Sequence[Any]: ...


@dataclass(frozen=True)
class DerivedField:
    """A value computed from a record (and the evaluation time) that rules can test like a field.

    :param type: JSON type of the value, for validation of the rule's value.
    :param description: one line for the docs and ``affiliate-network-rules fields``.
    :param compute: ``batch -> list`` of one value per record (``None`` when unknown), built
        from the batch's cached columns.
    :param needs: plain paths it reads (prefetched with the columns the rules read).
    """

    type: FieldType
    description: str
    compute: Callable[[ColumnSource], list[Any]]
    needs: tuple[str, ...] = ()


def _num(value: Any) -> float | None:
    if type(value) is int or type(value) is float:
        return value
    return None


def _click_to_conversion(b: ColumnSource) -> list[Any]:
    conv, click = b.numeric("conversion_unix_timestamp"), b.numeric("click_unix_timestamp")
    return [
        c - k if c is not None and k is not None and k > 0 else None
        for c, k in zip(conv, click, strict=True)
    ]


def _ip_mismatch(b: ColumnSource) -> list[Any]:
    conv, sess = b.column("conversion_user_ip"), b.column("session_user_ip")
    return [bool(a) and bool(s) and a != s for a, s in zip(conv, sess, strict=True)]


def _age_seconds(b: ColumnSource) -> list[Any]:
    now = b.now
    return [None if t is None else now - t for t in b.numeric("conversion_unix_timestamp")]


def _age_hours(b: ColumnSource) -> list[Any]:
    return [None if s is None else s / 3600.0 for s in b.column("age_seconds")]


def _snapshots(record: dict[str, Any]) -> list[Any]:
    rel = record.get("relationship")
    snaps = rel.get("on_hold_snapshots") if isinstance(rel, dict) else None
    return snaps if isinstance(snaps, list) else []


def last_on_hold_snapshot(record: dict[str, Any]) -> dict[str, Any] | None:
    """The CURRENT on-hold state: the last snapshot of ``relationship.on_hold_snapshots``."""
    snaps = _snapshots(record)
    last = snaps[-1] if snaps else None
    return last if isinstance(last, dict) else None


def on_hold_status(record: dict[str, Any]) -> str | None:
    """``on_hold``, ``approved``, ``rejected``... or ``None`` for a conversion never held."""
    last = last_on_hold_snapshot(record)
    return last.get("status") if last else None


def on_hold_conversion_id(record: dict[str, Any]) -> str | None:
    """The ID the on-hold PATCH takes (from the latest snapshot carrying one)."""
    for snap in reversed(_snapshots(record)):
        if isinstance(snap, dict) and snap.get("on_hold_conversion_id"):
            return str(snap["on_hold_conversion_id"])
    return None


def on_hold_since(record: dict[str, Any]) -> float | None:
    """When the conversion went on hold: the first snapshot's ``unix_timestamp``."""
    for snap in _snapshots(record):
        since = _num(snap.get("unix_timestamp")) if isinstance(snap, dict) else None
        if since is not None:
            return since
    return None


def _last_snapshot_values(b: ColumnSource, key: str) -> list[Any]:
    out: list[Any] = []
    for snaps in b.column("relationship.on_hold_snapshots"):
        last = snaps[-1] if type(snaps) is list and snaps else None
        out.append(last.get(key) if type(last) is dict else None)
    return out


def _on_hold_ids(b: ColumnSource) -> list[Any]:
    out: list[Any] = []
    for snaps in b.column("relationship.on_hold_snapshots"):
        value = None
        if type(snaps) is list and snaps:
            last = snaps[-1]
            value = last.get("on_hold_conversion_id") if type(last) is dict else None
            if not value:  # rare: fall back to the latest snapshot that carries an id
                value = on_hold_conversion_id({"relationship": {"on_hold_snapshots": snaps}})
        out.append(str(value) if value else None)
    return out


def _hold_age_hours(b: ColumnSource) -> list[Any]:
    now = b.now
    column = b.column("relationship.on_hold_snapshots")
    try:
        # Fast path: every record has snapshots with a numeric first timestamp.
        return [(now - snaps[0]["unix_timestamp"]) / 3600.0 for snaps in column]
    except (TypeError, KeyError, IndexError):
        pass
    out: list[Any] = []
    for snaps in b.column("relationship.on_hold_snapshots"):
        first = snaps[0] if type(snaps) is list and snaps else None
        t = first.get("unix_timestamp") if type(first) is dict else None
        if type(t) is not int and type(t) is not float:
            t = on_hold_since({"relationship": {"on_hold_snapshots": snaps}})
        out.append(None if t is None else (now - t) / 3600.0)
    return out


def _email_domain(b: ColumnSource) -> list[Any]:
    return [
        e.rpartition("@")[2].lower() if type(e) is str and "@" in e else None
        for e in b.column("email")
    ]


def _payout_to_sale(b: ColumnSource) -> list[Any]:
    payout, sale = b.numeric("payout"), b.numeric("sale_amount")
    return [p / s if p is not None and s else None for p, s in zip(payout, sale, strict=True)]


#: Derived fields, usable in ``field:`` like record fields.
DERIVED_FIELDS: dict[str, DerivedField] = {
    "click_to_conversion_seconds": DerivedField(
        "number",
        "conversion_unix_timestamp - click_unix_timestamp (seconds from click to conversion)",
        _click_to_conversion,
        ("conversion_unix_timestamp", "click_unix_timestamp"),
    ),
    "ip_mismatch": DerivedField(
        "boolean",
        "true when conversion_user_ip and session_user_ip are both set and differ",
        _ip_mismatch,
        ("conversion_user_ip", "session_user_ip"),
    ),
    "age_seconds": DerivedField(
        "number",
        "seconds since the conversion (evaluation time - conversion time)",
        _age_seconds,
        ("conversion_unix_timestamp",),
    ),
    "age_hours": DerivedField(
        "number", "age_seconds / 3600", _age_hours, ("conversion_unix_timestamp",)
    ),
    "hold_age_hours": DerivedField(
        "number",
        "hours since the conversion went on hold (first on-hold snapshot)",
        _hold_age_hours,
        ("relationship.on_hold_snapshots",),
    ),
    "on_hold_status": DerivedField(
        "string",
        "current on-hold state: status of the LAST relationship.on_hold_snapshots entry",
        lambda b: _last_snapshot_values(b, "status"),
        ("relationship.on_hold_snapshots",),
    ),
    "on_hold_conversion_id": DerivedField(
        "string",
        "the on-hold ID the approve/reject PATCH takes",
        _on_hold_ids,
        ("relationship.on_hold_snapshots",),
    ),
    "email_domain": DerivedField(
        "string", "lower-cased part of email after '@'", _email_domain, ("email",)
    ),
    "payout_to_sale_ratio": DerivedField(
        "number",
        "payout / sale_amount (unset when sale_amount is 0 or missing)",
        _payout_to_sale,
        ("payout", "sale_amount"),
    ),
}
