"""Reading the manual: README.md, docs/*.md and the DAGs' own docs, as the checks see them.

A page is split into its fenced code blocks and its prose (the blocks blanked out, so line
numbers stay right); inline code spans are read from the prose. Nothing here judges: the
checks are in ``test_manual_facts.py``.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "plugins" / "affiliate_network"

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language tag, its first line's number and its text."""

    lang: str
    line: int
    text: str


@dataclass(frozen=True)
class Span:
    """An inline code span (newlines inside it read as spaces) and its line."""

    text: str
    line: int


@dataclass
class Page:
    """One page of the manual."""

    name: str  # relative to the repository root
    text: str
    prose: str = ""
    blocks: list[Block] = field(default_factory=list)

    def __post_init__(self) -> None:
        lines = self.text.split("\n")
        prose: list[str] = []
        fence: str | None = None
        lang, start, body = "", 0, []  # type: tuple[str, int, list[str]]
        for number, line in enumerate(lines, 1):
            match = _FENCE.match(line)
            if fence is None and match:
                fence, lang, start, body = match.group(1), match.group(2), number + 1, []
                prose.append("")
            elif fence is not None and line.strip().startswith(fence[:3]) and not line.strip("`~ "):
                self.blocks.append(Block(lang, start, "\n".join(body)))
                fence = None
                prose.append("")
            elif fence is not None:
                body.append(line)
                prose.append("")
            else:
                prose.append(line)
        self.prose = "\n".join(prose)

    @property
    def path(self) -> Path:
        return ROOT / self.name

    def line_of(self, offset: int) -> int:
        return self.prose.count("\n", 0, offset) + 1

    def spans(self) -> Iterator[Span]:
        for match in _SPAN.finditer(self.prose):
            text = match.group(1)
            if "\n\n" in text:  # an unmatched backtick, not a span
                continue
            yield Span(re.sub(r"\s*\n\s*", " ", text).strip(), self.line_of(match.start()))

    def links(self) -> Iterator[tuple[str, int]]:
        for match in _LINK.finditer(self.prose):
            yield match.group(2) or match.group(3), self.line_of(match.start())

    def where(self, line: int) -> str:
        return f"{self.name}:{line}"


def _dag_doc_pages() -> Iterator[Page]:
    """The DAG files' own docs: every long string (``doc_md``, docstrings) of each file."""
    for path in sorted((ROOT / "dags").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        texts = [
            node.value
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "\n" in node.value
            and len(node.value) > 200
        ]
        # One page per file; the strings are kept in the file's order, separated by blank lines.
        yield Page(str(path.relative_to(ROOT)), "\n\n".join(texts))


@cache
def pages() -> tuple[Page, ...]:
    """README.md, every docs/*.md, and the DAG files' docs."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return (
        *(Page(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in files),
        *_dag_doc_pages(),
    )


def markdown_pages() -> tuple[Page, ...]:
    return tuple(p for p in pages() if p.name.endswith(".md"))


# ------------------------------------------------------------------------------ shell commands
_SEPARATORS = {"|", "||", "&&", ";", "&"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def shell_lines(block: Block) -> Iterator[tuple[str, int]]:
    """Each logical line of a shell block (backslash continuations joined) and its number."""
    pending, first = "", block.line
    for number, line in enumerate(block.text.split("\n"), block.line):
        if not pending:
            first = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield pending + line, first
        pending = ""
    if pending:
        yield pending, first


def commands(line: str) -> Iterator[list[str]]:
    """The simple commands of a shell line, as argv lists (comments dropped)."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:  # unbalanced quotes: not shell
        return
    command: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if command:
                yield command
            command = []
        else:
            command.append(token)
    if command:
        yield command


def airflow_argv(argv: list[str]) -> list[str] | None:
    """The arguments after ``airflow`` when ``argv`` runs Airflow's CLI, else None.

    Leading ``NAME=value`` assignments, ``uv run [--frozen]`` and ``.venv/bin/`` are skipped.
    """
    rest = list(argv)
    while rest and _ASSIGNMENT.match(rest[0]):
        rest.pop(0)
    if rest[:2] == ["uv", "run"] or rest[:4] == ["python3", "-m", "uv", "run"]:
        rest = rest[rest.index("run") + 1 :]
        while rest and rest[0].startswith("--"):
            rest.pop(0)
    if rest and (rest[0] == "airflow" or rest[0].endswith("/airflow")):
        return rest[1:]
    return None


# ------------------------------------------------------------------------------ headings
def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading (before the ``-1`` suffix of duplicates)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a Markdown file's headings (GitHub's rules, duplicates numbered)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    page = Page(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
    for line in page.prose.split("\n"):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = github_slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


# ------------------------------------------------------------------------------ markdown tables
def table_rows(page: Page, heading: str) -> Iterator[tuple[list[str], int]]:
    """The cells and line of every body row of every table under ``heading`` (its text)."""
    inside = False
    row = 0  # 1: a table's header, 2: its |---| line, then its body
    for number, line in enumerate(page.text.split("\n"), 1):
        if re.match(r"^#{1,6}\s", line):
            if inside:
                return
            inside = line.lstrip("#").strip() == heading
            continue
        if not inside:
            continue
        if line.startswith("|"):
            row += 1
            if row > 2:
                yield [cell.strip() for cell in line.strip().strip("|").split(" | ")], number
        else:
            row = 0
