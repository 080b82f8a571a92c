"""Load a rules file: YAML with line numbers, pydantic validation, one clear error.

The file is read and parsed by the one config loader (:mod:`affiliate_network.settings.loader`:
UTF-8, alias-bomb and nesting guards, line numbers, repeated keys); the rules' own messages (rule
id, field inside the rule, operator hints) are made here.

Every problem in the file is reported at once, each as
``FILE:LINE: rule 'ID': FIELD: MESSAGE``, inside a single
:class:`~affiliate_network.exceptions.ConfigValidationError` whose ``errors`` attribute holds
the same information as :class:`RuleError` items (for tests and tools).

Messages never quote PyYAML's snippet of the file, and for a file outside the include folder
they name file, line and key but no value of it (a file that is not a rules file at all, say a
worker's ``airflow.cfg``, must not reach a task log in pieces).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, NoReturn, ParamSpec, TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.rules.model import (
    ACTIONS,
    OPERATORS,
    Loc,
    Rule,
    RulesFile,
    Test,
    duplicate_id_errors,
    rule_semantic_errors,
    semantic_errors,
    test_semantic_errors,
)
from affiliate_network.settings import loader
from affiliate_network.settings.loader import duplicate_message, field_path, value_at

_TEST_KEYS = ("field", "agg", "op", "value")
_RULE_KEYS = ("id", "description", "action", "when", "enabled")
_AGG_KEYS = ("count_same", "share_same", "count_distinct", "ratio_to_median", "per", "within_hours")


@dataclass(frozen=True)
class RuleError:
    """One problem found in a rules file.

    :param source: file name (or ``<string>``).
    :param line: 1-based line, or ``None`` when unknown.
    :param rule_id: id of the rule concerned (``#N`` when the rule has no usable id), or ``None``.
    :param field: dotted location inside the rule (or the file), e.g. ``when.all[1].op``.
    :param message: what is wrong and what is expected.
    """

    source: str
    line: int | None
    rule_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        rule = f" rule {self.rule_id!r}:" if self.rule_id else ""
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{rule}{field} {self.message}"


def _clean_loc(loc: tuple[Any, ...], data: Any) -> Loc:
    """Drop pydantic's union/discriminator tags: keep only steps that exist in the data."""
    out: list[str | int] = []
    current = data
    for part in loc:
        in_dict = isinstance(current, dict) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if in_dict or in_list:
            out.append(part)
            current = current[part]
        elif (
            isinstance(current, dict)
            and not isinstance(part, int)
            and part
            in (
                *_TEST_KEYS,
                *_RULE_KEYS,
                *_AGG_KEYS,
                "rules",
                "lists",
                "version",
                "all",
                "any",
                "not",
            )
        ):
            # A required key that is absent: keep it in the message, the line is its parent's.
            out.append(part)
            current = None
        else:
            continue
    return tuple(out)


def _line_for(loc: Loc, lines: Mapping[loader.Loc, int], data: Any) -> int | None:
    probe = loc
    # A shorthand test has no 'op'/'value' key: point at its operator key instead.
    if probe and probe[-1] in ("op", "value") and probe not in lines:
        parent = value_at(data, probe[:-1])
        if isinstance(parent, dict):
            for key in parent:
                if key not in _TEST_KEYS:
                    return lines.get((*probe[:-1], key))
    while probe:
        if probe in lines:
            return lines[probe]
        probe = probe[:-1]
    return 1


def _rule_id(data: Any, loc: Loc) -> str | None:
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        rule = value_at(data, loc[:2])
        if (
            isinstance(rule, dict)
            and isinstance(rule.get("id"), str | int)
            and rule.get("id") != ""
        ):
            return str(rule["id"])
        return f"#{loc[1] + 1}"
    return None


def _message(error: ErrorDetails, loc: Loc, data: Any, show_values: bool = True) -> str:
    kind, last = error["type"], (loc[-1] if loc else None)
    given = f" {error.get('input')!r}" if show_values else ""
    if kind == "extra_forbidden":
        parent = value_at(data, loc[:-1])
        if isinstance(parent, dict) and ("field" in parent or "agg" in parent):
            return (
                f"unknown key {last!r} in a condition: expected field or agg, then op + value or "
                "one "
                f"operator key ({', '.join(OPERATORS)})"
            )
        if len(loc) == 3 and loc[0] == "rules":
            return f"unknown key {last!r} in a rule (allowed: {', '.join(_RULE_KEYS)})"
        if "agg" in loc[:-1]:
            return f"unknown key {last!r} in an aggregate (allowed: {', '.join(_AGG_KEYS)})"
        if len(loc) == 1:
            return f"unknown top-level key {last!r} (allowed: version, lists, rules, review)"
        return f"unknown key {last!r}"
    if kind == "literal_error" and last == "op":
        return f"unknown operator{given}; expected one of {', '.join(OPERATORS)}"
    if kind == "literal_error" and last == "action":
        return f"unknown action{given}; expected one of {', '.join(ACTIONS)}"
    if kind == "missing":
        if last == "op":
            return (
                "the condition has no operator: write op: NAME with value: X, or NAME: X "
                f"({', '.join(OPERATORS)})"
            )
        return f"required key {last!r} is missing"
    if kind == "string_pattern_mismatch" and last == "id":
        return (
            f"rule id{given} must be 1-64 letters, digits, '_', '.', '-' "
            "starting with a letter or digit"
        )
    message = error["msg"]
    if show_values and "input" in error and kind not in ("condition_shape", "aggregate_kind"):
        shown = repr(error["input"])
        if len(shown) <= 80:
            message += f" (got {shown})"
    return message


def _raise(source: str, errors: list[RuleError]) -> NoReturn:
    count = len(errors)
    text = (
        f"Invalid rules file {source} ({count} problem{'s' if count != 1 else ''}):\n"
        + "\n".join(f"  {e}" for e in errors)
    )
    exc = ConfigValidationError(text)
    exc.errors = errors
    raise exc


def loads_rules(text: str, source: str = "<string>", *, show_values: bool = True) -> RulesFile:
    """Parse and validate rules from YAML text.

    :param text: the YAML document.
    :param source: name used in error messages (usually the file path).
    :param show_values: quote the file's values in messages (the wrong operator, the input a
        field got); False names file, line and key only.
    :raises ConfigValidationError: listing every problem with file, line, rule id and field.
    """
    doc = _parse_yaml(text, source, show_values)
    data, lines = doc.data, doc.lines
    errors: list[RuleError] = [
        RuleError(
            source,
            line,
            _rule_id(data, loc),
            field_path(loc[2:] if loc[:1] == ("rules",) and len(loc) > 2 else loc),
            duplicate_message(loc[-1], first),
        )
        for loc, line, first in doc.duplicates
    ]
    if not isinstance(data, dict):
        errors.append(
            RuleError(source, 1, None, "", "the top level must be a mapping with a 'rules:' list")
        )
        _raise(source, errors)
    add = _error_adder(source, data, lines, errors)
    try:
        rules_file = RulesFile.model_validate(data)
    except ValidationError as err:
        _structural_errors(err, data, add, show_values)
        errors.sort(key=lambda e: e.line or 0)
        _raise(source, errors)
    for loc, message in semantic_errors(rules_file):
        add(loc, message)
    if errors:
        errors.sort(key=lambda e: e.line or 0)
        _raise(source, errors)
    return rules_file


def _parse_yaml(text: str, source: str, show_values: bool = True) -> loader.Document:
    """The document (data and the line of every key), or a ConfigValidationError.

    Parsed by the one config loader: the UTF-8, alias-bomb and nesting guards, no PyYAML
    snippet, nothing chained."""
    try:
        doc = loader.parse(text, source, show_values=show_values)
    except ConfigValidationError as err:
        problems = _rule_errors(source, err)
    else:
        if doc.lines:
            return doc
        problems = [RuleError(source, 1, None, "", "the file is empty; expected a 'rules:' list")]
    _raise(source, problems)


def _rule_errors(source: str, err: ConfigValidationError) -> list[RuleError]:
    """The config loader's problems (unreadable, not UTF-8, not YAML) as RuleErrors."""
    return [
        RuleError(p.source, p.line, None, p.field, p.message)
        if isinstance(p, loader.Problem)
        else RuleError(source, None, None, "", str(p))
        for p in err.errors or (err.message,)
    ]


def _error_adder(
    source: str, data: dict[str, Any], lines: Mapping[loader.Loc, int], errors: list[RuleError]
) -> Callable[[Loc, str], None]:
    """``add(loc, message)``: append a :class:`RuleError` with its line, rule id and field."""

    def add(loc: Loc, message: str) -> None:
        line = _line_for(loc, lines, data)
        if loc and loc[-1] in ("op", "value"):
            # Shorthand {field: x, gt: 3}: name the key as written rather than 'op'/'value'.
            parent = value_at(data, loc[:-1])
            if isinstance(parent, dict) and loc[-1] not in parent:
                written = [k for k in parent if k not in ("field", "agg", "op", "value")]
                if len(written) == 1:
                    loc = (*loc[:-1], written[0])
        field_loc = loc[2:] if loc[:1] == ("rules",) and len(loc) > 2 else loc
        errors.append(
            RuleError(
                source,
                line,
                _rule_id(data, loc),
                field_path(field_loc),
                message,
            )
        )

    return add


def _structural_errors(
    err: ValidationError,
    data: dict[str, Any],
    add: Callable[[Loc, str], None],
    show_values: bool = True,
) -> None:
    """The model's validation errors, one per location, then the semantic problems of the
    rules that are structurally fine."""
    seen: set[Loc] = set()
    broken_rules: set[int] = set()
    for item in err.errors():
        loc = _clean_loc(item["loc"], data)
        if loc in seen:
            continue  # a union reports one failure per member: keep the first
        seen.add(loc)
        if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
            broken_rules.add(loc[1])
        add(loc, _message(item, loc, data, show_values))
    _semantic_for_valid_rules(data, broken_rules, add)


def _semantic_for_valid_rules(data: dict[str, Any], broken: set[int], add: Any) -> None:
    rules = data.get("rules")
    if not isinstance(rules, list):
        return
    raw_lists = data.get("lists")
    lists: dict[str, Any] = raw_lists if isinstance(raw_lists, dict) else {}
    ids = [
        r.get("id") if isinstance(r, dict) and isinstance(r.get("id"), str) else None for r in rules
    ]
    for loc, message in duplicate_id_errors(ids):
        add(loc, message)
    for index, raw in enumerate(rules):
        if index in broken:
            # The rule is broken somewhere: still check each leaf condition that parses.
            if isinstance(raw, dict):
                _semantic_for_valid_tests(raw.get("when"), ("rules", index, "when"), lists, add)
            continue
        _semantic_if_valid(add, Rule, raw, rule_semantic_errors, index, lists)


_Model = TypeVar("_Model", Rule, Test)
_CheckArgs = ParamSpec("_CheckArgs")


def _semantic_if_valid(
    add: Any,
    model: type[_Model],
    raw: Any,
    check: Callable[Concatenate[_Model, _CheckArgs], list[tuple[Loc, str]]],
    *args: _CheckArgs.args,
    **kwargs: _CheckArgs.kwargs,
) -> None:
    """Add ``check``'s problems of ``raw`` read as ``model``; nothing when it does not validate
    (its structural errors are reported already)."""
    try:
        item = model.model_validate(raw)
    except ValidationError:
        return
    for loc, message in check(item, *args, **kwargs):
        add(loc, message)


def _semantic_for_valid_tests(raw: Any, loc: Loc, lists: dict[str, Any], add: Any) -> None:
    if not isinstance(raw, dict):
        return
    if "field" in raw or "agg" in raw:
        _semantic_if_valid(add, Test, raw, test_semantic_errors, loc, lists)
        return
    for key in ("all", "any"):
        if isinstance(raw.get(key), list):
            for i, child in enumerate(raw[key]):
                _semantic_for_valid_tests(child, (*loc, key, i), lists, add)
    if "not" in raw:
        _semantic_for_valid_tests(raw["not"], (*loc, "not"), lists, add)


def load_rules(path: str | Path, *, show_values: bool | None = None) -> RulesFile:
    """Read and validate a rules file.

    :param path: local path of the YAML file.
    :param show_values: quote the file's values in error messages; default: only for a file in
        the include folder (the deployment's own configuration).
    :raises ConfigValidationError: the file is missing, unreadable or invalid.
    """
    source = str(path)
    if show_values is None:
        show_values = _in_include_dir(path)
    try:
        text = loader.read_text(path, source)
    except ConfigValidationError as err:
        problems = _rule_errors(source, err)
    else:
        return loads_rules(text, source, show_values=show_values)
    _raise(source, problems)


def _in_include_dir(path: str | Path) -> bool:
    """Whether ``path`` lies in the include folder (where the deployment's rules live)."""
    from affiliate_network.settings.paths import include_dir

    try:
        return Path(path).resolve().is_relative_to(include_dir().resolve())
    except (OSError, RuntimeError, ImportError, ValueError):  # no folder, no Airflow config
        return False
