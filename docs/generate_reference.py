"""Write docs/reference.md: the hook and the operators, from their docstrings and signatures.

Run from the project root after changing a public signature or docstring:

    python3 -m uv run --frozen python docs/generate_reference.py          # writes the file
    python3 -m uv run --frozen python docs/generate_reference.py --check  # exit 1 if stale

``tests/docs/test_reference.py`` fails when the committed file differs from what this writes.
What is listed: :class:`AffiliateNetworkHook` (its constructor, public methods and properties)
and every operator class defined in ``affiliate_network.operators`` (constructor arguments,
``template_fields``, the class docstring with its ``:param:`` fields). Airflow's own Sphinx
reference of a provider is generated from the same docstrings; this is its Markdown twin, read
without building anything.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "reference.md"
HOOK = "affiliate_network.hooks.affiliate_network.AffiliateNetworkHook"
OPERATORS_PACKAGE = "affiliate_network.operators"

_ROLE = re.compile(r":(?:class|func|mod|meth|data|attr|exc|obj):`(~?)([^`]+)`")
_FIELD = re.compile(r"^:(param|raises|returns|return|yields|type)\s*([^:]*):\s*(.*)$")


def _role(match: re.Match[str]) -> str:
    target = match.group(2)
    if match.group(1) or "<" in target:  # ~a.b.C shows C; `text <target>` shows text
        target = target.split("<")[0].strip() or target
        target = target.rsplit(".", 1)[-1] if match.group(1) else target
    return f"`{target}`"


def _inline(text: str) -> str:
    """reST inline markup as Markdown: roles and double backticks become code spans."""
    return _ROLE.sub(_role, text).replace("``", "`")


def render_docstring(doc: str | None) -> str:
    """A docstring as Markdown: paragraphs kept, ``:param x:`` fields as a list."""
    if not doc:
        return "*(no docstring)*\n"
    lines = inspect.cleandoc(doc).splitlines()
    body: list[str] = []
    fields: list[str] = []
    for line in lines:
        match = _FIELD.match(line.strip())
        if match:
            kind, name, text = match.groups()
            label = {
                "param": f"`{name.strip()}`",
                "raises": f"raises `{name.strip()}`",
                "returns": "returns",
                "return": "returns",
                "yields": "yields",
                "type": f"type of `{name.strip()}`",
            }[kind]
            fields.append(f"- {label}: {_inline(text)}".rstrip())
        elif fields and line.startswith((" ", "\t")) and line.strip():
            fields[-1] += " " + _inline(line.strip())
        elif fields and not line.strip():
            continue
        elif fields:  # prose after the fields: keep it after them
            body.append(_inline(line))
        else:
            body.append(_inline(line))
    text = "\n".join(body).strip()
    if "::" in text:  # literal blocks: keep them readable as text
        text = text.replace("::\n", ":\n")
    out = text + "\n" if text else ""
    if fields:
        out += ("\n" if out else "") + "\n".join(fields) + "\n"
    return out


class _Raw(str):
    """An annotation kept as source text (``from __future__ import annotations``), unquoted."""

    def __repr__(self) -> str:
        return str(self)


def _signature(name: str, obj: Any) -> str:
    """``name(arg: type = default, ...) -> type``, without ``self``."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return f"{name}(...)"
    params = [
        p.replace(annotation=_Raw(p.annotation)) if isinstance(p.annotation, str) else p
        for p in sig.parameters.values()
        if p.name != "self"
    ]
    ret = sig.return_annotation
    sig = sig.replace(
        parameters=params, return_annotation=_Raw(ret) if isinstance(ret, str) else ret
    )
    return f"{name}{re.sub(r' at 0x[0-9a-f]+', '', str(sig))}"


def _hook_members(cls: type) -> list[tuple[str, Any]]:
    """Public methods and properties of the hook and its package bases, in source order."""
    seen: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("affiliate_network"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property):
                seen[name] = value
    return list(seen.items())


def _section_hook() -> list[str]:
    module, _, name = HOOK.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    out = [f"## `{name}`\n", f"`{HOOK}`\n", render_docstring(cls.__doc__)]
    out.append(f"```python\n{_signature(name, cls.__init__)}\n```\n")
    for member, value in _hook_members(cls):
        if isinstance(value, property):
            out.append(f"### `{member}` (property)\n")
            out.append(render_docstring(value.__doc__))
            continue
        out.append(f"### `{member}`\n")
        out.append(f"```python\n{_signature(member, value)}\n```\n")
        out.append(render_docstring(value.__doc__))
    return out


def _operator_classes() -> list[type]:
    from airflow.sdk import BaseOperator

    package = importlib.import_module(OPERATORS_PACKAGE)
    found: list[type] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{OPERATORS_PACKAGE}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == module.__name__
                and issubclass(cls, BaseOperator)
                and not cls.__name__.startswith("_")
            ):
                found.append(cls)
    return sorted(found, key=lambda c: (c.__module__, inspect.getsourcelines(c)[1]))


def _section_operators() -> list[str]:
    out = ["## Operators\n"]
    for cls in _operator_classes():
        out.append(f"### `{cls.__name__}`\n")
        out.append(f"`{cls.__module__}.{cls.__name__}`\n")
        out.append(render_docstring(cls.__doc__))
        out.append(f"```python\n{_signature(cls.__name__, cls.__init__)}\n```\n")
        fields = ", ".join(f"`{f}`" for f in cls.template_fields) or "none"
        out.append(f"Templated fields: {fields}.\n")
    return out


def render() -> str:
    """The whole reference, as written to ``docs/reference.md``."""
    head = [
        "# Reference: the hook and the operators\n",
        "Generated from the docstrings and signatures by `docs/generate_reference.py` "
        "(`tests/docs/test_reference.py` fails when this file is stale): do not edit by "
        "hand. The guides are [hook.md](hook.md), [daily-reports.md](daily-reports.md), "
        "[onhold-review.md](onhold-review.md) and [offer-sync.md](offer-sync.md); every "
        "setting is in [configuration.md](configuration.md).\n",
    ]
    text = "\n".join(head + _section_hook() + _section_operators())
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run python docs/generate_reference.py")
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT / "plugins")]
    sys.exit(main(sys.argv[1:]))
