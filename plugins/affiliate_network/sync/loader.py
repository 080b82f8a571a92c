"""Read a desired-state YAML file into a :class:`DesiredState`, or say exactly what is wrong.

Every problem is collected (not just the first) and raised as one
:class:`~affiliate_network.exceptions.ConfigValidationError` whose lines read
``FILE:LINE: SECTION[i] (IDENTITY): field 'FIELD': PROBLEM``. Line numbers come from the YAML
node tree, parsed once together with the data.

File layout (every section optional)::

    version: 1
    offer_groups: [...]   # whole offer group objects (PUT)
    offers: [...]         # whole offer objects (PUT)
    scrub_rates: [...]    # custom scrub rates (create once)
    channels: [...]       # channels (PUT)
    categories: [...]     # categories (create once)
    offer_urls: [...]     # offer URL status (bulk edit)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from affiliate_network import yamlguard
from affiliate_network.exceptions import ConfigValidationError, NotUtf8Error
from affiliate_network.sync import spec_fields as sf
from affiliate_network.sync.models import SECTIONS, DesiredObject, DesiredState, Offer, OfferGroup
from affiliate_network.textfile import read_utf8

SUPPORTED_VERSIONS = (1,)
#: Path inside the document: keys and list indexes.
DocPath = tuple[str | int, ...]


class _Problems:
    """Collects problems with their document path and renders them with line numbers."""

    def __init__(self, source: str, lines: dict[DocPath, int]) -> None:
        self.source = source
        self.lines = lines
        self.items: list[tuple[int, str]] = []

    def line_of(self, path: DocPath) -> int:
        # The deepest known ancestor: a missing field points at its object.
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return 1

    def add(self, path: DocPath, where: str, message: str) -> None:
        self.items.append((self.line_of(path), f"{where}: {message}"))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        rendered = [f"{self.source}:{line}: {text}" for line, text in sorted(self.items)]
        count = len(rendered)
        header = f"{self.source}: {count} problem{'s' if count != 1 else ''} in the desired state"
        raise ConfigValidationError("\n".join([header, *rendered]))


def _field_path(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _object_label(section: str, index: int, raw: Any) -> str:
    """``offer_groups[0] (key 'spring', network_offer_group_id 3)`` from the raw mapping."""
    ident = []
    if isinstance(raw, dict):
        model = SECTIONS[section]
        if raw.get("key") is not None:
            ident.append(f"key {raw['key']!r}")
        if model.id_field and raw.get(model.id_field) is not None:
            ident.append(f"{model.id_field} {raw[model.id_field]!r}")
        if not ident and raw.get("name") is not None:
            ident.append(f"name {raw['name']!r}")
    return f"{section}[{index}]" + (f" ({', '.join(ident)})" if ident else "")


def _line_map(
    node: yaml.Node, path: DocPath, lines: dict[DocPath, int], problems: list[Any]
) -> None:
    """Record the 1-based line of every path; note duplicate mapping keys (YAML keeps the last)."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                problems.append((path, key, key_node.start_mark.line + 1))
            seen.add(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _line_map(value_node, (*path, key), lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _line_map(item, (*path, index), lines, problems)


def _parse(text: str, source: str) -> tuple[Any, dict[DocPath, int], list[Any]]:
    try:
        node = yamlguard.compose(text)
        # Recursive or exponentially aliased documents, before anything walks them.
        problem = yamlguard.graph_problem(node)
        if problem is not None:
            raise ConfigValidationError(f"{source}:{problem[0]}: {problem[1]}")
        data = yaml.SafeLoader("").construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigValidationError(f"{source}{line}: not valid YAML: {exc}") from exc
    lines: dict[DocPath, int] = {}
    duplicates: list[Any] = []
    if node is not None:
        _line_map(node, (), lines, duplicates)
    return data, lines, duplicates


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
    try:
        text = read_utf8(path)
    except OSError as exc:
        raise ConfigValidationError(f"{source}: cannot read the desired-state file: {exc}") from exc
    except NotUtf8Error as exc:
        raise ConfigValidationError(f"{source}:{exc.line}: {exc}") from None
    return parse_desired_state(text, source=source)


def parse_desired_state(text: str, *, source: str = "<string>") -> DesiredState:
    """Validate desired-state YAML text (see :func:`load_desired_state`)."""
    data, lines, duplicates = _parse(text, source)
    problems = _Problems(source, lines)
    for path, key, line in duplicates:
        problems.items.append(
            (line, f"{_field_path(path) or 'top level'}: key {key!r} is repeated")
        )
    if data is None:
        data = {}
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
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] not in {"missing", "extra_forbidden"} and "input" in error:
                message += f" (got {error['input']!r})"
            if error["type"] == "extra_forbidden":
                message = _unknown_field_message(model, loc)
            problems.add((*path, *loc), where, f"field '{_field_path(loc)}': {message}")
        return None
    return obj if complete else None


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model holding the field at ``loc`` (``payout_revenue.0.x`` -> the entry model)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        current = _find_model(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _find_model(annotation: Any) -> type[BaseModel] | None:
    """The first pydantic model inside ``list[...]``, ``X | None``, ``Annotated[...]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def _unknown_field_message(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """``unknown field; did you mean 'x'? Fields of an offer group: ...``."""
    holder = _model_at(model, loc)
    if holder is None:
        return "unknown field (not part of this object in the spec)"
    fields = list(holder.model_fields)
    message = "unknown field (not part of this object in the spec)"
    close = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.6)
    if close:
        message += f"; did you mean {close[0]!r}?"
    return f"{message} Fields here: {', '.join(fields)}"


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
