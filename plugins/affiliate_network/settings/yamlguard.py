"""Checks on a composed YAML node graph before it is turned into Python objects.

YAML aliases can make a document refer to itself (``&a {x: *a}``: walking it never ends) or
expand exponentially (each level lists the previous one ten times: a few hundred bytes that
stand for billions of values). Deep nesting overflows recursive walkers. A configuration file
needs none of these, so they are refused with the line where the problem starts.
"""

from __future__ import annotations

import re

import yaml

#: Nodes a document may expand to (aliases counted every time they are used).
MAX_NODES = 200_000
#: Nesting depth a document may reach.
MAX_DEPTH = 64


def compose(text: str) -> yaml.Node | None:
    """The document's node graph (``None`` for an empty document).

    :raises yaml.YAMLError: the text is not YAML, or it nests deeper than Python can compose
        (reported as a YAML error with the reason).
    """
    loader = yaml.SafeLoader(text)
    try:
        return loader.get_single_node()
    except RecursionError:
        raise yaml.YAMLError(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()


def graph_problem(root: yaml.Node | None) -> tuple[int, str] | None:
    """``(line, message)`` when the graph is recursive, too large or too deep, else ``None``."""
    if root is None:
        return None
    seen = 0
    on_path: set[int] = set()
    # (node, depth, entering): an explicit stack, so a deep document cannot overflow this walk.
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, True)]
    while stack:
        node, depth, entering = stack.pop()
        if not entering:
            on_path.discard(id(node))
            continue
        line = node.start_mark.line + 1
        if id(node) in on_path:
            return line, "an alias refers to a node that contains it (a recursive document)"
        seen += 1
        if seen > MAX_NODES:
            return line, f"the document expands to more than {MAX_NODES:,} values (aliases)"
        if depth > MAX_DEPTH:
            return line, f"nested too deeply (more than {MAX_DEPTH} levels)"
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            continue
        on_path.add(id(node))
        stack.append((node, depth, False))
        stack.extend((child, depth + 1, True) for child in reversed(children))
    return None


#: A quoted fragment of the file in a PyYAML problem; token names such as '<scalar>' are not.
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_TOKEN = re.compile(r"'<[a-z ]+>'")


def describe_error(err: yaml.YAMLError, *, show_values: bool = True) -> tuple[int | None, str]:
    """``(line, text)`` of a YAML error without PyYAML's snippet of the file.

    ``str(err)`` quotes the lines around the problem (for a file that is not YAML at all, such
    as an ``airflow.cfg``, its secrets); the text here is what went wrong and the column only.
    With ``show_values`` False the quoted fragments of the problem (a character, a tag, an
    alias name) are hidden too: for files that are not the deployment's own configuration.

    :param err: the error from composing or loading.
    :param show_values: keep the quoted fragments of the file in the text.
    :return: the 1-based line (``None`` when unknown) and the text.
    """
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None)
    if problem is None:  # our own YAMLError (nesting) carries its text; others: the type only
        problem = str(err) if type(err) is yaml.YAMLError else type(err).__name__
    context = getattr(err, "context", None)
    text = f"{context}: {problem}" if context else str(problem)
    if not show_values:
        text = _QUOTED.sub(lambda m: m[0] if _TOKEN.fullmatch(m[0]) else "'…'", text)
    if mark is not None:
        text += f" (column {mark.column + 1})"
    return (mark.line + 1 if mark is not None else None), text
