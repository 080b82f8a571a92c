"""The one loader of the project's YAML files: read, guard, parse with line numbers, validate.

Every YAML file of the project goes through here: ``include/network.yaml`` and ``reports.yaml``
(:mod:`affiliate_network.settings.models`), the rules files (:mod:`affiliate_network.rules.loader`)
and the desired state (:mod:`affiliate_network.sync.loader`). :func:`load` reads a file and
validates it against a pydantic model; :func:`read` and :func:`parse` stop after the parse, for
the loaders that validate section by section with messages of their own (rule ids, object
labels), on the same :class:`Document`.

What every file gets, whichever loader reads it:

* UTF-8 or a clear error naming the byte and its line (:mod:`affiliate_network.settings.textfile`);
* the alias-bomb guard: recursive, exponentially aliased (more than
  :data:`~affiliate_network.settings.yamlguard.MAX_NODES` values) or too deeply nested documents are
  refused with the line where they start (:mod:`affiliate_network.settings.yamlguard`);
* a repeated mapping key is an error, not YAML's silent "the last one wins";
* every error names the file, the line and the field path (the column too for a syntax error),
  never with PyYAML's snippet of the file, and never chained to the ``YAMLError`` (a traceback
  would print the snippet); with ``show_values`` False no value of the file is quoted at all
  (for a file that is not the deployment's own configuration, say a worker's ``airflow.cfg``).

Bottom layer: imports only pydantic, PyYAML and the package's bottom modules, so the rules
language, the settings and the sync can all use it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from affiliate_network.exceptions import ConfigValidationError, FieldError, NotUtf8Error
from affiliate_network.settings import yamlguard
from affiliate_network.settings.textfile import read_utf8

#: A place in a document: mapping keys and list indexes, ``("affiliates", 1, "conn_id")``.
Loc = tuple[Any, ...]
ModelT = TypeVar("ModelT", bound=BaseModel)

#: A repr of a value longer than this is not quoted in a message.
_MAX_SHOWN = 80


@dataclass(frozen=True)
class Problem:
    """One problem found in a YAML file.

    :param source: the file's name as messages show it (usually its path).
    :param line: 1-based line, or ``None`` when unknown (an unreadable file).
    :param field: the field path, e.g. ``affiliate_reports.affiliates[1].format`` (``""`` for
        the file as a whole).
    :param message: what is wrong and what is expected.
    :param column: 1-based column where known (YAML syntax errors), else ``None``.
    """

    source: str
    line: int | None
    field: str
    message: str
    column: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


def field_path(loc: Iterable[Any]) -> str:
    """``a.b[2].c`` for ``("a", "b", 2, "c")`` (keys YAML allows but text does not, as text)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def duplicate_message(key: object, first_line: int) -> str:
    """The message for a mapping key written twice (YAML itself would keep the last)."""
    return (
        f"key {key!r} appears twice (first at line {first_line}); YAML would silently keep the last"
    )


@dataclass(frozen=True)
class Document:
    """A parsed YAML file: the data, the line of every key and item, the repeated keys.

    :param source: the file's name as messages show it.
    :param data: the loaded data (``None`` for an empty document).
    :param lines: 1-based line of every place: ``lines[("a", 2, "b")]`` is the line of
        ``a[2].b``; ``lines[()]`` the document's first line.
    :param duplicates: each repeated mapping key as ``(place, line, line of the first one)``.
    """

    source: str
    data: Any
    lines: Mapping[Loc, int]
    duplicates: tuple[tuple[Loc, int, int], ...] = ()

    def line_of(self, loc: Loc) -> int:
        """The line of ``loc``, else of its nearest ancestor in the file (a missing field points
        at the mapping that lacks it); 1 for an empty document."""
        for end in range(len(loc), -1, -1):
            line = self.lines.get(tuple(loc[:end]))
            if line is not None:
                return line
        return 1

    def problem(self, loc: Loc, message: str) -> Problem:
        """A :class:`Problem` at ``loc`` of this file."""
        return Problem(self.source, self.line_of(loc), field_path(loc), message)

    def duplicate_problems(self) -> list[Problem]:
        """One problem per repeated key, at the repetition's line."""
        return [
            Problem(self.source, line, field_path(loc), duplicate_message(loc[-1], first))
            for loc, line, first in self.duplicates
        ]


def raise_problems(source: str, problems: list[Problem]) -> NoReturn:
    """Raise one :class:`ConfigValidationError` for ``problems`` (in line order).

    One problem reads ``FILE:LINE: FIELD: MESSAGE``; several get a header line naming the file
    and the count. The exception's ``errors`` holds the :class:`Problem` items.
    """
    ordered = sorted(problems, key=lambda p: p.line or 0)
    if len(ordered) == 1:
        text = str(ordered[0])
    else:
        text = "\n".join([f"{source}: {len(ordered)} problems", *(f"  {p}" for p in ordered)])
    exc = ConfigValidationError(text)
    exc.errors = tuple(ordered)
    raise exc


def read_text(path: str | Path, source: str | None = None) -> str:
    """The file's text, or a :class:`ConfigValidationError` naming the file (and the line of a
    byte that is not UTF-8)."""
    source = source or str(path)
    problem: Problem | None = None
    try:
        text = read_utf8(path)
    except OSError as err:
        problem = Problem(source, None, "", f"cannot read the file: {err.strerror or err}")
    except NotUtf8Error as err:
        problem = Problem(source, err.line, "", str(err))
    if problem is not None:  # raised outside the except: nothing chained
        raise_problems(source, [problem])
    return text


def read(path: str | Path, *, source: str | None = None, show_values: bool = True) -> Document:
    """Read and parse a YAML file (see :func:`parse`).

    :param path: the file.
    :param source: how messages name the file (default: the path).
    :param show_values: quote the file's fragments in a syntax error's message.
    :raises ConfigValidationError: unreadable, not UTF-8, not YAML, or refused by the guard.
    """
    source = source or str(path)
    return parse(read_text(path, source), source, show_values=show_values)


def parse(text: str, source: str = "<string>", *, show_values: bool = True) -> Document:
    """Parse YAML text into a :class:`Document`, guarded against alias bombs and deep nesting.

    Repeated keys are recorded in :attr:`Document.duplicates`, not raised: a loader that
    collects every problem of a file reports them with the rest (:func:`load` raises them).

    :raises ConfigValidationError: not YAML (a syntax error, a tag no safe constructor knows,
        such as ``!!python/name``), recursive, too large or too deep; it names the line (and
        the column of a syntax error).
    """
    problem: Problem | None = None
    try:
        node = yamlguard.compose(text)
    except yaml.YAMLError as err:
        problem = _yaml_problem(source, err, show_values)
    if problem is not None:
        raise_problems(source, [problem])
    # Recursive or exponentially aliased documents, before anything walks them.
    if (graph := yamlguard.graph_problem(node)) is not None:
        raise_problems(source, [Problem(source, graph[0], "", graph[1])])
    if node is None:
        return Document(source, None, {})
    try:
        # Indexed before construction: constructing merges ``<<`` keys into the node in place.
        lines, duplicates = _index(node)
        data = yaml.SafeLoader("").construct_document(node)
    except yaml.YAMLError as err:
        problem = _yaml_problem(source, err, show_values)
    except (ValueError, LookupError, TypeError):
        # ``!!int abc``, ``!!bool maybe``: PyYAML's own error quotes the value, with no line.
        problem = Problem(
            source, None, "", "not valid YAML: a value does not read as the type its tag names"
        )
    if problem is not None:
        raise_problems(source, [problem])
    return Document(source, data, lines, tuple(duplicates))


def _yaml_problem(source: str, err: yaml.YAMLError, show_values: bool) -> Problem:
    """A syntax or construction error without PyYAML's snippet of the file."""
    line, text = yamlguard.describe_error(err, show_values=show_values)
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    column = mark.column + 1 if mark is not None else None
    return Problem(source, line, "", f"not valid YAML: {text}", column)


def _index(root: yaml.Node) -> tuple[dict[Loc, int], list[tuple[Loc, int, int]]]:
    """The 1-based line of every mapping key and sequence item, and the repeated keys.

    Keys are the values the loaded data has (``1: x`` is the integer 1), so a place found in
    the data has its line here. Iterative: the guard has bounded the depth, but stay so.
    """
    constructor = yaml.constructor.SafeConstructor()
    lines: dict[Loc, int] = {(): root.start_mark.line + 1}
    duplicates: list[tuple[Loc, int, int]] = []
    stack: list[tuple[yaml.Node, Loc]] = [(root, ())]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = _key(key_node, constructor)
                line = key_node.start_mark.line + 1
                if key in seen:
                    duplicates.append(((*loc, key), line, seen[key]))
                seen[key] = line
                lines[(*loc, key)] = line
                stack.append((value_node, (*loc, key)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines[(*loc, i)] = item.start_mark.line + 1
                stack.append((item, (*loc, i)))
    duplicates.sort(key=lambda d: d[1])
    return lines, duplicates


def _key(node: yaml.Node, constructor: yaml.constructor.SafeConstructor) -> Any:
    if isinstance(node, yaml.ScalarNode):
        if node.tag in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"):
            return node.value
        # Keys like 1, true or null: constructed the way the data's keys are.
        value = constructor.construct_object(node)
        try:
            hash(value)
        except TypeError:
            return node.value
        return value
    return repr(node)  # a mapping or list used as a key: the construction refuses it anyway


# -- validation against a model -------------------------------------------------------------


def load(
    path: str | Path,
    model: type[ModelT],
    *,
    source: str | None = None,
    show_values: bool = True,
) -> ModelT:
    """Read a YAML file and validate it against ``model``.

    An empty file validates as an empty mapping (the model's defaults decide).

    :param path: the file.
    :param model: the pydantic model of the whole file (it should forbid extra keys).
    :param source: how messages name the file (default: the path).
    :param show_values: quote the file's values in messages (the input a field got).
    :raises ConfigValidationError: every problem of the file at once, each naming the file,
        the line and the field path; ``errors`` holds them as :class:`Problem` items.
    """
    doc = read(path, source=source, show_values=show_values)
    return validate(doc, model, show_values=show_values)


def validate(
    doc: Document,
    model: type[ModelT],
    *,
    show_values: bool = True,
) -> ModelT:
    """Validate a parsed :class:`Document` against ``model`` (see :func:`load`)."""
    problems = doc.duplicate_problems()
    data = {} if doc.data is None else doc.data
    try:
        result = model.model_validate(data)
    except ValidationError as err:
        problems += problems_of(err, doc, model, show_values=show_values)
    if problems:
        raise_problems(doc.source, problems)
    return result


def problems_of(
    err: ValidationError,
    doc: Document,
    model: type[BaseModel],
    *,
    base: Loc = (),
    show_values: bool = True,
) -> list[Problem]:
    """The problems of a pydantic error, each at its field's line (one per place).

    :param err: the model's validation error.
    :param doc: the document validated.
    :param model: the model validated.
    :param base: where the validated data sits in the document (``()`` for the whole file).
    :param show_values: quote the input a field got.
    """
    out: list[Problem] = []
    seen: set[Loc] = set()
    data = value_at({} if doc.data is None else doc.data, base)  # an empty file is validated as {}
    for item in err.errors():
        loc = clean_loc(item["loc"], data)
        cause = item.get("ctx", {}).get("error")
        if isinstance(cause, FieldError):
            loc = (*loc, *cause.loc)
        if loc in seen:
            continue  # a union reports one failure per member: keep the first
        seen.add(loc)
        out.append(doc.problem((*base, *loc), _message(item, model, loc, show_values)))
    return out


def clean_loc(loc: Iterable[Any], data: Any) -> Loc:
    """Pydantic's location as a place in the data: union and validator tags dropped.

    A step the data has is kept; a last key the mapping lacks (a missing field) is kept too;
    anything else (``function-after[...]``, ``int``, ``list[str]``...) is pydantic's own.
    """
    steps = list(loc)
    out: list[Any] = []
    current = data
    for index, part in enumerate(steps):
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        ):
            out.append(part)
            current = current[part]
        elif isinstance(current, dict) and index == len(steps) - 1 and isinstance(part, str):
            out.append(part)
            current = None
    return tuple(out)


def value_at(data: Any, loc: Loc) -> Any:
    """The value at ``loc`` in loaded data, or ``None`` when there is none."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _message(item: ErrorDetails, model: type[BaseModel], loc: Loc, show_values: bool) -> str:
    kind = item["type"]
    if kind in ("extra_forbidden", "invalid_key"):
        return unknown_field_message(model, loc)
    if kind == "missing":
        return "required"
    message = item["msg"].removeprefix("Value error, ")
    if kind != "value_error" and show_values and "input" in item:
        shown = repr(item["input"])
        if len(shown) <= _MAX_SHOWN:
            message += f" (got {shown})"
    return message


def model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model holding the field at ``loc`` (``affiliates.0.x`` -> the entry's model)."""
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


def close_field(model: type[BaseModel] | None, name: object) -> str | None:
    """The field of ``model`` that ``name`` most likely misspells, or ``None``."""
    if model is None:
        return None
    close = difflib.get_close_matches(str(name), list(model.model_fields), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_field_message(model: type[BaseModel], loc: Loc) -> str:
    """``unknown field (fields: a, b, c); did you mean 'b'?`` for the key at ``loc``."""
    holder = model_at(model, loc)
    if holder is None:
        return "unknown field"
    message = f"unknown field (fields: {', '.join(holder.model_fields)})"
    close = close_field(holder, loc[-1] if loc else "")
    return f"{message}; did you mean {close!r}?" if close else message
