"""Read a desired-state YAML file into a :class:`DesiredState`, or say exactly what is wrong.

Every problem is collected (not just the first) and raised as one
:class:`~affiliate_network.exceptions.ConfigValidationError` whose lines read
``FILE:LINE: SECTION[i] (IDENTITY): field 'FIELD': PROBLEM``. The file is read and parsed by
the one config loader (:mod:`affiliate_network.settings.loader`: UTF-8, alias-bomb and nesting
guards, the line of every key, repeated keys, no PyYAML snippet in a message); the per-object
validation and its messages are made here.

File layout (every section optional)::

    version: 1
    offer_groups: [...]   # whole offer group objects (PUT)
    offers: [...]         # whole offer objects (PUT)
    scrub_rates: [...]    # custom scrub rates (create once)
    channels: [...]       # channels (PUT)
    categories: [...]     # categories (create once)
    offer_urls: [...]     # offer URL status (bulk edit)

A value written as a template's placeholder, ``"<FILL IN: what to write>"`` (the shipped
``include/offer_state.yaml`` holds one for every network id), is refused wherever it is read:
the file cannot tell a sandbox from a real network, so a template never reaches any network's
objects. Each one is a problem naming its line, field and what to fill in.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.settings import loader
from affiliate_network.settings.loader import duplicate_message, field_path
from affiliate_network.sync import spec_fields as sf
from affiliate_network.sync.models import SECTIONS, DesiredObject, DesiredState, Offer, OfferGroup

SUPPORTED_VERSIONS = (1,)
#: A template's placeholder: ``"<FILL IN: the id of ...>"`` (any case); group 1 says what to write.
PLACEHOLDER = re.compile(r"\s*<\s*FILL IN\b:?\s*(.*?)\s*>\s*", re.IGNORECASE | re.DOTALL)
#: Path inside the document: keys and list indexes.
DocPath = tuple[str | int, ...]


class _Problems:
    """Collects problems with their document path and renders them with line numbers."""

    def __init__(self, doc: loader.Document) -> None:
        self.source = doc.source
        self.doc = doc
        self.items: list[tuple[int, str]] = []

    def add(self, path: DocPath, where: str, message: str) -> None:
        # The deepest known ancestor: a missing field points at its object.
        self.items.append((self.doc.line_of(path), f"{where}: {message}"))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        rendered = [f"{self.source}:{line}: {text}" for line, text in sorted(self.items)]
        count = len(rendered)
        header = f"{self.source}: {count} problem{'s' if count != 1 else ''} in the desired state"
        raise ConfigValidationError("\n".join([header, *rendered]))


def _placeholders(node: Any, loc: DocPath = ()) -> list[tuple[DocPath, str]]:
    """Every template placeholder under ``node``: its path and what it asks to write."""
    if isinstance(node, str):
        match = PLACEHOLDER.fullmatch(node)
        return [(loc, match.group(1) or "your network's value")] if match else []
    if isinstance(node, dict):
        return [found for key, value in node.items() for found in _placeholders(value, (*loc, key))]
    if isinstance(node, list):
        return [found for i, value in enumerate(node) for found in _placeholders(value, (*loc, i))]
    return []


def _object_label(section: str, index: int, raw: Any) -> str:
    """``offer_groups[0] (key 'spring', network_offer_group_id 3)`` from the raw mapping."""
    ident = []
    if isinstance(raw, dict):
        model = SECTIONS[section]
        if raw.get("key") is not None:
            ident.append(f"key {raw['key']!r}")
        if (
            model.id_field
            and raw.get(model.id_field) is not None
            and not _placeholders(raw[model.id_field])
        ):
            ident.append(f"{model.id_field} {raw[model.id_field]!r}")
        if not ident and raw.get("name") is not None:
            ident.append(f"name {raw['name']!r}")
    return f"{section}[{index}]" + (f" ({', '.join(ident)})" if ident else "")


def _missing_fields(raw: dict[str, Any], required: Iterable[str]) -> list[str]:
    return [field for field in required if field not in raw or raw[field] is None]


def load_desired_state(path: str | Path, *, display_name: str | None = None) -> DesiredState:
    """Read and validate a desired-state file.

    :param path: the YAML file.
    :param display_name: how the file is named in messages (defaults to the path).
    :raises ConfigValidationError: naming the file, the object, the field and the line of every
        problem, including definitions that omit fields a PUT would reset.
    """
    source = display_name or str(path)
    return parse_desired_state(loader.read_text(path, source), source=source)


def parse_desired_state(text: str, *, source: str = "<string>") -> DesiredState:
    """Validate desired-state YAML text (see :func:`load_desired_state`)."""
    doc = loader.parse(text, source)
    problems = _Problems(doc)
    for loc, line, first in doc.duplicates:
        where = field_path(loc[:-1]) or "top level"
        problems.items.append((line, f"{where}: {duplicate_message(loc[-1], first)}"))
    data = {} if doc.data is None else doc.data
    if not isinstance(data, dict):
        problems.add((), "top level", "must be a mapping of sections (offer_groups, offers...)")
        problems.raise_if_any()

    for key in data:
        if key != "version" and key not in SECTIONS:
            allowed = ["version", *SECTIONS]
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.add(
                (key,),
                f"section {key!r}",
                f"unknown section{hint} (allowed: {', '.join(allowed)})",
            )
    version = data.get("version", 1)
    if version not in SUPPORTED_VERSIONS:
        problems.add(("version",), "version", f"unsupported version {version!r} (supported: 1)")

    # section -> (index in the file, definition) of the definitions that validated.
    objects: dict[str, list[tuple[int, DesiredObject]]] = {}
    for section, model in SECTIONS.items():
        raw_items = data.get(section)
        if raw_items is None:
            continue
        if not isinstance(raw_items, list):
            problems.add((section,), section, "must be a list of definitions")
            continue
        for index, raw in enumerate(raw_items):
            obj = _validate_object(section, index, raw, model, problems)
            if obj is not None:
                objects.setdefault(section, []).append((index, obj))

    _cross_checks(objects, data, problems)
    problems.raise_if_any()
    return DesiredState(
        source=source,
        objects={section: tuple(obj for _, obj in items) for section, items in objects.items()},
    )


def _validate_object(
    section: str, index: int, raw: Any, model: type[DesiredObject], problems: _Problems
) -> DesiredObject | None:
    where = _object_label(section, index, raw)
    path: DocPath = (section, index)
    if not isinstance(raw, dict):
        problems.add(path, where, f"must be a mapping, got {type(raw).__name__}")
        return None

    # A template's placeholder, never sent: it says what to write in its place.
    unfilled = _placeholders(raw)
    for loc, what in unfilled:
        problems.add(
            (*path, *loc),
            where,
            f"field '{field_path(loc)}': the template's placeholder, never sent: write {what} "
            "(or delete this definition)",
        )
    unfilled_locs = {loc for loc, _ in unfilled}

    # Whole-object check first: one message listing every field a PUT would reset.
    complete = True
    missing = _missing_fields(raw, sf.WHOLE_FIELDS[section])
    if missing:
        complete = False
        verb = "created with" if model.create_only else "sent whole (PUT replaces the object)"
        problems.add(
            path,
            where,
            f"incomplete definition: missing {', '.join(missing)}. It is {verb}; an omitted "
            "field would be reset to its default on the network, so nothing is sent until every "
            "field is written out",
        )
    for (nested_section, list_field), required in sf.NESTED_WHOLE_FIELDS.items():
        entries = raw.get(list_field) if nested_section == section else None
        if not isinstance(entries, list):
            continue
        for entry_index, entry in enumerate(entries):
            if isinstance(entry, dict) and (gone := _missing_fields(entry, required)):
                complete = False
                problems.add(
                    (*path, list_field, entry_index),
                    where,
                    f"field '{list_field}[{entry_index}]': incomplete entry: missing "
                    f"{', '.join(gone)}",
                )

    try:
        obj = model.model_validate(raw)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            # Missing fields were already reported together above.
            if error["type"] == "missing" and not complete:
                continue
            if loc in unfilled_locs:  # reported above, as a placeholder
                continue
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] not in {"missing", "extra_forbidden"} and "input" in error:
                message += f" (got {error['input']!r})"
            if error["type"] == "extra_forbidden":
                message = _unknown_field_message(model, loc)
            problems.add((*path, *loc), where, f"field '{field_path(loc)}': {message}")
        return None
    return obj if complete and not unfilled else None


def _unknown_field_message(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """``unknown field; did you mean 'x'? Fields of an offer group: ...``."""
    holder = loader.model_at(model, loc)
    message = "unknown field (not part of this object in the spec)"
    if holder is None:
        return message
    if close := loader.close_field(holder, loc[-1]):
        message += f"; did you mean {close!r}?"
    return f"{message} Fields here: {', '.join(holder.model_fields)}"


def _cross_checks(
    objects: dict[str, list[tuple[int, DesiredObject]]],
    data: dict[str, Any],
    problems: _Problems,
) -> None:
    """Checks spanning definitions: unique keys and ids, offers vs their group's advertiser."""
    for section, items in objects.items():
        seen_keys: dict[str, int] = {}
        seen_ids: dict[int, int] = {}
        for index, obj in items:
            where = _object_label(section, index, data[section][index])
            if obj.object_key in seen_keys:
                problems.add(
                    (section, index),
                    where,
                    f"key {obj.object_key!r} is already used by "
                    f"{section}[{seen_keys[obj.object_key]}]",
                )
            seen_keys.setdefault(obj.object_key, index)
            if obj.network_id is not None:
                if obj.network_id in seen_ids:
                    problems.add(
                        (section, index, obj.id_field or ""),
                        where,
                        f"field '{obj.id_field}': the same object is defined by "
                        f"{section}[{seen_ids[obj.network_id]}] too",
                    )
                seen_ids.setdefault(obj.network_id, index)

    # The PUT rule "the offers must belong to that advertiser", checkable when both are here.
    offers = {o.network_id: o for _, o in objects.get("offers", []) if isinstance(o, Offer)}
    for index, group in objects.get("offer_groups", []):
        if not isinstance(group, OfferGroup):
            continue
        for offer_id in group.network_offer_ids:
            offer = offers.get(offer_id)
            if offer is not None and offer.network_advertiser_id != group.network_advertiser_id:
                problems.add(
                    ("offer_groups", index, "network_offer_ids"),
                    _object_label("offer_groups", index, data["offer_groups"][index]),
                    f"field 'network_offer_ids': offer {offer_id} belongs to advertiser "
                    f"{offer.network_advertiser_id}, not {group.network_advertiser_id}",
                )
