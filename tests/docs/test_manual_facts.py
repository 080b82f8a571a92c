"""The manual cannot drift: README.md, docs/*.md and the DAGs' own docs checked against the code.

Each test reads every page (``tests/docs/manual.py``) and judges one kind of fact:

- every ``airflow ...`` command of a shell block is parsed by the installed Airflow's own
  argparse parser (the runbook's advice included); an inline ``airflow ...`` span names an
  existing subcommand and flags of it; a lone ``--flag`` span is a flag of some command line;
- every ``AFFILIATE_*``/``AFN_*`` name exists in the code, every one the tests, benchmarks and
  CI scripts read is listed in docs/configuration.md, and no page tells anyone to set a
  variable the review refuses;
- the connection extras docs/configuration.md lists are exactly those the hook reads, and every
  connection's JSON in the pages uses only those;
- every range and default docs/configuration.md states is the one the code enforces (probed:
  the bounds are accepted, one step outside is refused naming the field);
- every relative link and ``#anchor`` resolves (GitHub's heading slugs);
- every repository path named exists, with its ``:name`` or ``::test`` where one is given;
- every Python name in backticks (``Class.attr``, ``package.module.name``, ``self.method(...)``
  of the hook) resolves by import and ``getattr``;
- the Airflow requirement the pages state is pyproject's; the DAGs' retries, the e2e
  backfill's days, the manifest example and connection/pool/Variable ids are the code's.

Facts that cannot be checked are listed with a reason where they are skipped
(``OTHER_TOOLS_FLAGS``, ``UNPROBED``, the folders .gitignore names).

Run against the pages (and ``hooks/_budget.py``) of main at fdb49d0, 18 of these tests fail,
naming every wrong fact this module was written for.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import tomllib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs.manual import (
    PACKAGE,
    ROOT,
    Page,
    airflow_argv,
    anchors,
    commands,
    markdown_pages,
    pages,
    shell_lines,
    table_rows,
)

CONFIGURATION = ROOT / "docs" / "configuration.md"
SHELL = {"", "bash", "sh", "shell", "console", "text"}


def _ids(pages_: tuple[Page, ...]) -> list[str]:
    return [p.name for p in pages_]


ALL = pages()
MARKDOWN = markdown_pages()


# =============================================================================== (a) commands
@cache
def _parser() -> Any:
    from airflow.cli import cli_parser

    return cli_parser.get_parser()


def _subparsers(parser: Any) -> dict[str, Any]:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _leaf(argv: list[str]) -> tuple[Any, list[str], list[str]]:
    """The parser of the deepest subcommand ``argv`` names, the words taken, the rest."""
    parser, taken, rest = _parser(), [], list(argv)
    while rest and (children := _subparsers(parser)):
        if rest[0] not in children:
            break
        taken.append(rest.pop(0))
        parser = children[taken[-1]]
    return parser, taken, rest


def _parse_error(argv: list[str]) -> str | None:
    """What Airflow's parser says about ``airflow argv`` (None: it parses)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            _parser().parse_args(argv)
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                return err.getvalue().strip().splitlines()[-1] if err.getvalue() else "refused"
    return None


def _shell_blocks(page: Page) -> Iterator[tuple[list[str], int]]:
    for block in page.blocks:
        if block.lang not in SHELL:
            continue
        for line, number in shell_lines(block):
            for argv in commands(line):
                yield argv, number


def _airflow_commands(page: Page) -> Iterator[tuple[list[str], int]]:
    for argv, number in _shell_blocks(page):
        rest = airflow_argv(argv)
        if rest is not None:
            yield rest, number


@pytest.mark.parametrize("page", MARKDOWN, ids=_ids(MARKDOWN))
def test_every_airflow_command_of_a_shell_block_parses(page: Page) -> None:
    wrong = [
        f"{page.where(n)}: airflow {' '.join(argv)}: {error}"
        for argv, n in _airflow_commands(page)
        if (error := _parse_error(argv))
    ]
    assert not wrong, "\n".join(wrong)


def _flags(parser: Any) -> set[str]:
    return set(parser._option_string_actions)


def _span_command_error(argv: list[str]) -> str | None:
    """An inline ``airflow ...`` span: its subcommands exist and its flags are theirs."""
    parser, taken, rest = _leaf(argv)
    if _subparsers(parser):
        return f"no subcommand {rest[0]!r} of 'airflow {' '.join(taken)}'" if rest else None
    unknown = [
        tok.split("=")[0]
        for tok in rest
        if tok.startswith("-") and not re.fullmatch(r"-\d+", tok)
        if tok.split("=")[0] not in _flags(parser)
    ]
    return f"'airflow {' '.join(taken)}' has no {unknown}" if unknown else None


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_inline_airflow_command_exists(page: Page) -> None:
    wrong = []
    for span in page.spans():
        if not span.text.startswith("airflow "):
            continue
        argv = commands(span.text)
        for words in argv:
            if (rest := airflow_argv(words)) is not None and (error := _span_command_error(rest)):
                wrong.append(f"{page.where(span.line)}: `{span.text}`: {error}")
    assert not wrong, "\n".join(wrong)


#: Flags of command lines that are neither Airflow's nor this repository's.
OTHER_TOOLS_FLAGS = {
    "-n": "pytest-xdist's worker count (docs/development.md)",
    "-m": "pytest's marker expression",
    "-s": "pytest's no-capture",
    "--durations": "pytest's slowest-tests report",
    "--frozen": "uv's lock flag",
    "-d": "curl's request body (the runbook's sandbox fault)",
}


_ADD_ARGUMENT = re.compile(r"(?:add_argument|addoption)\(\s*((?:[\"'][^\"']+[\"']\s*,\s*)+)")


@cache
def _repository_flags() -> frozenset[str]:
    """Every flag an argparse parser (or pytest option) of this repository declares."""
    found: set[str] = set()
    for folder in ("plugins", "bench", "demo", "tests", ".ci"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if "add_argument" not in text and "addoption" not in text:
                continue
            for match in _ADD_ARGUMENT.finditer(text):
                found.update(
                    f for f in re.findall(r"[\"']([^\"']+)[\"']", match.group(1)) if f[0] == "-"
                )
    return frozenset(found)


@cache
def _airflow_flags() -> frozenset[str]:
    found: set[str] = set()

    def walk(parser: Any) -> None:
        found.update(_flags(parser))
        for child in _subparsers(parser).values():
            walk(child)

    walk(_parser())
    return frozenset(found)


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_lone_flag_belongs_to_a_command_line(page: Page) -> None:
    known = _airflow_flags() | _repository_flags() | set(OTHER_TOOLS_FLAGS)
    wrong = []
    for span in page.spans():
        match = re.match(r"^(--?[A-Za-z][\w-]*)(?:\s|=|$)", span.text)
        if match and match.group(1) not in known:
            wrong.append(f"{page.where(span.line)}: `{span.text}`")
    assert not wrong, "\n".join(wrong)


# =============================================================================== (b) env vars
_ENV = re.compile(r"(?<![A-Za-z0-9_])((?:AFFILIATE|AFN)_[A-Z0-9_]*[A-Z0-9])(_\*|\*|_\.\.\.|…)?")
_ABBREVIATED = re.compile(r"(?:\.\.\.|…)(_[A-Z][A-Z0-9_]*[A-Z0-9])")


@cache
def _code_env_names() -> frozenset[str]:
    """``AFFILIATE_*``/``AFN_*`` names in the code, the tests, the CI scripts and the stacks."""
    files = [
        *(ROOT / "plugins").rglob("*.py"),
        *(ROOT / "dags").glob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "bench").rglob("*.py"),
        *(ROOT / "demo").rglob("*.py"),
        *(p for p in (ROOT / ".ci").rglob("*") if p.is_file() and "constraints" not in p.parts),
        ROOT / "docker-compose.yaml",
        ROOT / ".env.example",
    ]
    names: set[str] = set()
    for path in files:
        if ROOT / "tests" / "docs" in path.parents:
            continue
        names.update(m.group(1) for m in _ENV.finditer(path.read_text(encoding="utf-8")))
    return frozenset(names)


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_environment_variable_named_exists_in_the_code(page: Page) -> None:
    code = _code_env_names()
    wrong = []
    for match in _ENV.finditer(page.text):
        name, wildcard = match.group(1), match.group(2)
        line = page.text.count("\n", 0, match.start()) + 1
        if wildcard:
            if not any(c.startswith(name) for c in code):
                wrong.append(f"{page.where(line)}: {name}{wildcard} (no such prefix)")
        elif name not in code:
            wrong.append(f"{page.where(line)}: {name}")
    assert not wrong, "\n".join(wrong)


def _env_reads(folder: str) -> set[str]:
    names: set[str] = set()
    for path in (ROOT / folder).rglob("*"):
        if path.is_file() and path.suffix in ("", ".py", ".sh") and "constraints" not in path.parts:
            if ROOT / "tests" / "docs" in path.parents:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            names.update(m.group(1) for m in _ENV.finditer(text) if m.group(1).startswith("AFN_"))
    return names


def test_every_variable_the_tests_benchmarks_and_ci_read_is_listed() -> None:
    """The package's and the DAGs' are checked by tests/test_configuration_doc.py."""
    listed = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", CONFIGURATION.read_text(encoding="utf-8")))
    read = _env_reads("tests") | _env_reads("bench") | _env_reads(".ci")
    assert not read - listed, sorted(read - listed)


def _moved_variables() -> dict[str, str]:
    from affiliate_network.review.options import MOVED_VARIABLES

    return dict(MOVED_VARIABLES)


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_no_page_tells_anyone_to_set_a_refused_variable(page: Page) -> None:
    """The review's settings moved to the rules file; setting one fails the run.

    A page may name them (configuration.md lists them; the runbook says what the refusal
    means) but never give one a value or name one by its end (``..._MAX_REJECT_COUNT``), which
    reads as "set this".
    """
    moved = _moved_variables()
    wrong = []
    for number, line in enumerate(page.text.split("\n"), 1):
        for name in moved:
            if re.search(rf"\b{name}=", line) or re.search(rf"\b{name}\b.*\braise\b", line):
                wrong.append(f"{page.where(number)}: sets {name}")
        for match in _ABBREVIATED.finditer(line):
            whole = [n for n in moved if n.endswith(match.group(1))]
            if whole:
                wrong.append(f"{page.where(number)}: ...{match.group(1)} is {whole[0]}, refused")
    assert not wrong, "\n".join(wrong)


# =============================================================================== (c) extras
@cache
def _code_extras() -> frozenset[str]:
    from affiliate_network.hooks._budget import QUOTA_EXTRAS
    from affiliate_network.hooks._network_identity import NETWORK_EXTRAS
    from affiliate_network.hooks._transport import TRANSPORT_EXTRAS
    from affiliate_network.provider_info import PROVIDER_INFO

    (conn_type,) = PROVIDER_INFO["connection-types"]
    return frozenset({*conn_type["conn-fields"], *QUOTA_EXTRAS, *NETWORK_EXTRAS, *TRANSPORT_EXTRAS})


def _configuration_page() -> Page:
    return next(p for p in MARKDOWN if p.name == "docs/configuration.md")


def test_the_extras_listed_are_the_extras_the_hook_reads() -> None:
    listed = {
        name
        for cells, _ in table_rows(_configuration_page(), "Extras")
        for name in re.findall(r"`([a-z_]+)`", cells[0])
    }
    assert sorted(listed ^ _code_extras()) == []


def _json_objects(text: str) -> Iterator[dict[str, Any]]:
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_connection_example_uses_extras_the_hook_reads(page: Page) -> None:
    """A JSON object with a ``portal`` key is a connection's extras (or a connection holding
    them under ``extra``)."""
    wrong = []
    texts = [page.prose, *(b.text for b in page.blocks)]
    for obj in (o for text in texts for o in _json_objects(text)):
        extra = obj.get("extra") if isinstance(obj.get("extra"), dict) else obj
        if "portal" in extra:
            wrong += [
                f"{page.name}: extra {k!r} in {extra}" for k in extra if k not in _code_extras()
            ]
    assert not wrong, "\n".join(wrong)


# =============================================================================== (d) ranges
_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _stated_range(meaning: str) -> tuple[float | None, float | None] | None:
    """The range a table cell states: "1 to 10", "up to 30", "at least 1", ">= 0", "0 or more"."""
    if m := re.search(rf"(?:from )?({_NUMBER}) to ({_NUMBER})", meaning):
        return _num(m.group(1)), _num(m.group(2))
    if m := re.search(rf"up to ({_NUMBER})", meaning):
        return None, _num(m.group(1))
    if m := re.search(rf"(?:at least|>=) ?({_NUMBER})|({_NUMBER}) or more", meaning):
        return _num(m.group(1) or m.group(2)), None
    return None


def _stated_default(cell: str) -> Any:
    """The default a cell states: its first code span, read as YAML (``null``, ``7``...)."""
    m = re.search(r"`([^`]+)`", cell) or re.match(r"^\s*(\S+)", cell)
    if not m:
        return None
    try:
        return yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return m.group(1)


def _probe_quota(name: str, attr: str) -> Callable[[Any], Any]:
    def probe(value: Any) -> Any:
        from affiliate_network.hooks._budget import QuotaSettings

        extras = {} if value is None else {name: value}
        return getattr(QuotaSettings.from_extras(extras, "probe"), attr)

    return probe


def _probe_hook(name: str) -> Callable[[Any], Any]:
    def probe(value: Any) -> Any:
        from airflow.models.connection import Connection

        from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

        extras: dict[str, Any] = {"portal": "network", "quota": "local"}
        if value is not None:
            extras[name] = value
        hook = AffiliateNetworkHook("probe")
        hook.get_connection = lambda _: Connection(  # type: ignore[method-assign]
            conn_id="probe",
            conn_type="affiliate_network",
            host="http://127.0.0.1:9/v1",
            password="probe-key",
            extra=json.dumps(extras),
        )
        connected = hook._ready
        return {"timeout": connected.timeout_s}.get(name, getattr(connected, name, None))

    return probe


def _probe_review(name: str) -> Callable[[Any], Any]:
    def probe(value: Any) -> Any:
        from affiliate_network.rules.model import ReviewSettings

        return getattr(ReviewSettings(**({} if value is None else {name: value})), name)

    return probe


def _probe_pool_slots(value: Any) -> Any:
    import os
    from unittest import mock

    from affiliate_network.operators.pools import POOL_ENV, SLOTS_ENV, reporting_pool

    env = {POOL_ENV: "probe"} | ({} if value is None else {SLOTS_ENV: str(value)})
    with mock.patch.dict(os.environ, env):
        if value is None:
            os.environ.pop(SLOTS_ENV, None)
        return reporting_pool()["pool_slots"]


#: Every setting of docs/configuration.md whose row states a range or a number as default:
#: how to read it the way the code does. A row with a range and no probe fails the test.
PROBES: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("Extras", "timeout"): _probe_hook("timeout"),
    ("Extras", "page_size"): _probe_hook("page_size"),
    ("Extras", "concurrency"): _probe_hook("concurrency"),
    ("Extras", "rate_limit"): _probe_quota("rate_limit", "rate_limit"),
    ("Extras", "rate_window_s"): _probe_quota("rate_window_s", "window_s"),
    ("Extras", "reporting_concurrency_cap"): _probe_quota(
        "reporting_concurrency_cap", "reporting_concurrency"
    ),
    ("Extras", "granular_per_hour"): _probe_quota("granular_per_hour", "granular_per_hour"),
    ("Extras", "granular_window_s"): _probe_quota("granular_window_s", "granular_window_s"),
    **{
        ("`onhold_rules*.yaml` (rules files)", key): _probe_review(key)
        for key in (
            "lookback_days",
            "min_age_hours",
            "chunk_size",
            "reject_status",
            "max_reject_share",
            "max_reject_count",
            "keep_decision_hours",
            "review_minutes",
            "late_arrival_hours",
        )
    },
    ("3. Environment variables", "AFFILIATE_NETWORK_REPORTING_POOL_SLOTS"): _probe_pool_slots,
}
#: Rows stating a range that no probe reads, and why.
UNPROBED = {
    "trailing_days": "a DAG param: its range is the Param's schema, checked by "
    "test_the_dag_params_ranges_are_the_params_schemas below",
    "defer_after_s": "an operator argument (no reader of its own to probe); a negative value is "
    "refused in operators/base.py:deferral_settings (tests/operators/test_deferral.py)",
    "max_approved_payout": "a mapping per currency, checked by test_every_rules_example_loads",
    "columns": "a list's length, checked by the reports.yaml model's own tests",
}


_SECTIONS = ("Extras", "`onhold_rules*.yaml` (rules files)", "3. Environment variables")


def _range_rows() -> Iterator[tuple[str, str, str, str, int]]:
    """(section, name, meaning, default, line) of every settings row of configuration.md."""
    page = _configuration_page()
    for heading in _SECTIONS:
        for cells, line in table_rows(page, heading):
            names = re.findall(r"`([^`]+)`", cells[0])
            if names and len(cells) >= 3:
                yield heading, names[0], cells[1], cells[2], line


def _other_extra_rows() -> Iterator[tuple[str, str, str, str, int]]:
    """Rows ``| Extra `name` | meaning (default N) |`` of the other pages (hook.md's table)."""
    for page in MARKDOWN:
        if page.name == "docs/configuration.md":
            continue
        for number, line in enumerate(page.text.split("\n"), 1):
            if m := re.match(r"^\| Extra `(\w+)`[^|]*\| (.*) \|$", line):
                default = re.search(r"default (\S+?)[;)]", m.group(2))
                yield (
                    page.name,
                    m.group(1),
                    m.group(2),
                    f"`{default.group(1)}`" if default else "",
                    (number),
                )


def _whole(value: float) -> float | int:
    """A whole number as an ``int`` (the strict models refuse ``1.0`` for a whole number)."""
    return int(value) if float(value).is_integer() else value


def _refused(probe: Callable[[Any], Any], value: Any, name: str) -> bool:
    """Whether the code refuses ``value`` with an error naming the setting."""
    from pydantic import ValidationError

    from affiliate_network.exceptions import ConfigValidationError, ConnectionConfigError

    try:
        probe(_whole(value))
    except (ConnectionConfigError, ConfigValidationError, ValidationError) as error:
        message = str(error)
    else:
        return False
    if name not in message:
        raise AssertionError(f"the error does not name {name}: {message}")
    return True


def _outside(low: float | None, high: float | None) -> tuple[float | None, float | None]:
    """One step below ``low`` and above ``high``: 1 for whole bounds, half the bound else."""
    whole = all(b is None or float(b).is_integer() for b in (low, high))
    below = None if low is None else (low - 1 if whole else low - max(abs(low) / 2, 1e-4))
    above = None if high is None else (high + 1 if whole else high + max(abs(high) / 2, 1e-4))
    return below, above


def test_every_stated_range_and_default_is_the_one_the_code_enforces() -> None:
    wrong: list[str] = []
    for section, name, meaning, default, line in [*_range_rows(), *_other_extra_rows()]:
        stated = _stated_range(meaning)
        probe = PROBES.get((section, name)) or PROBES.get(("Extras", name))
        page = "docs/configuration.md" if section in _SECTIONS else section
        where = f"{page}:{line}: {name}"
        if probe is None:
            if stated and name not in UNPROBED:
                wrong.append(f"{where}: states a range and has no probe")
            continue
        if stated:
            (low, high), (below, above) = stated, _outside(*stated)
            if low is not None and (_refused(probe, low, name) or not _refused(probe, below, name)):
                wrong.append(f"{where}: the code's lower bound is not {low:g}")
            if high is not None and (
                _refused(probe, high, name) or not _refused(probe, above, name)
            ):
                wrong.append(f"{where}: the code's upper bound is not {high:g}")
        if default.startswith("`"):  # a value; prose ("the answers' ...") is not compared
            stated_default, actual = _stated_default(default), probe(None)
            if actual != stated_default:
                wrong.append(f"{where}: default {stated_default!r}, the code's {actual!r}")
    assert not wrong, "\n".join(wrong)


def test_every_setting_with_a_range_has_a_probe_or_a_reason() -> None:
    """The probes find the rows (a renamed heading would silently skip them)."""
    found = {(s, n) for s, n, *_ in _range_rows()}
    assert sorted(set(PROBES) - found) == []


def test_the_dag_params_ranges_are_the_params_schemas() -> None:
    page = _configuration_page()
    params = _dag_params()
    wrong = []
    for cells, line in table_rows(page, "5. DAG params"):
        dag, param, meaning, default = (re.sub(r"`", "", c) for c in cells[:4])
        dag = dag.split()[0]
        spec = params.get((dag, param))
        if spec is None:
            continue
        stated = _stated_range(meaning)
        if stated and (stated[0], stated[1]) != (spec.get("minimum"), spec.get("maximum")):
            wrong.append(f"docs/configuration.md:{line}: {param} {stated} vs the Param's {spec}")
        if re.fullmatch(r"\d+", default.split()[0]) and int(default.split()[0]) != spec.get(
            "default"
        ):
            wrong.append(f"docs/configuration.md:{line}: {param} default {default.split()[0]}")
    assert not wrong, "\n".join(wrong)


def _dag_params() -> dict[tuple[str, str], dict[str, Any]]:
    """``Param(default, minimum=..., maximum=...)`` of every DAG file, read from the AST."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in (ROOT / "dags").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        dag_id = next(
            (
                kw.value.value
                for node in ast.walk(tree)
                if isinstance(node, ast.Call)
                for kw in node.keywords
                if kw.arg == "dag_id" and isinstance(kw.value, ast.Constant)
            ),
            path.stem,
        )
        constants = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            for t in n.targets
            if isinstance(t, ast.Name)
        }

        def value(node: ast.expr, constants: dict[str, Any] = constants) -> Any:
            if isinstance(node, ast.Constant):
                return node.value
            if isinstance(node, ast.Name):
                return constants.get(node.id)
            return None

        for node in ast.walk(tree):
            if not isinstance(node, ast.Dict):
                continue
            for key, call in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(call, ast.Call)
                    and getattr(call.func, "id", None) == "Param"
                ):
                    spec = {kw.arg: value(kw.value) for kw in call.keywords if kw.arg}
                    spec["default"] = value(call.args[0]) if call.args else None
                    found[(dag_id, key.value)] = spec
    return found


@pytest.mark.parametrize("page", MARKDOWN, ids=_ids(MARKDOWN))
def test_every_rules_example_loads(page: Page) -> None:
    """A YAML block (or a ``review.max_approved_payout: ...`` span) of the rules file's
    ``review:`` section is accepted by the model the review reads."""
    from affiliate_network.rules.model import ReviewSettings

    wrong = []
    for block in page.blocks:
        if block.lang not in ("yaml", "yml"):
            continue
        try:
            data = yaml.safe_load(block.text)
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and isinstance(data.get("review"), dict):
            try:
                ReviewSettings(**data["review"])
            except Exception as error:
                wrong.append(f"{page.where(block.line)}: {error}")
    for span in page.spans():
        m = re.match(r"^(?:review\.)?(max_approved_payout): (.+)$", span.text)
        if m:
            try:
                ReviewSettings(**{m.group(1): yaml.safe_load(m.group(2))})
            except Exception as error:
                wrong.append(f"{page.where(span.line)}: `{span.text}`: {error}")
    for paragraph in re.split(r"\n\s*\n", page.text):
        # the per-currency ceilings written as the environment variable's old text
        if "max_approved_payout" in paragraph.lower() and re.search(r"`[A-Z]{3}=\d", paragraph):
            wrong.append(f"{page.name}: max_approved_payout as CODE=AMOUNT text: {paragraph[:80]}")
    assert not wrong, "\n".join(wrong)


# =============================================================================== (e) links
@pytest.mark.parametrize("page", MARKDOWN, ids=_ids(MARKDOWN))
def test_every_relative_link_and_anchor_resolves(page: Page) -> None:
    wrong = []
    for target, line in page.links():
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_text, _, anchor = target.partition("#")
        path = (page.path.parent / path_text).resolve() if path_text else page.path
        if not path.exists():
            wrong.append(f"{page.where(line)}: {target}: no file {path_text}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            wrong.append(f"{page.where(line)}: {target}: no heading #{anchor}")
    assert not wrong, "\n".join(wrong)


# =============================================================================== (f, g) paths
_ROOTS = ("include", "dags", "plugins", "docs", "tests", "bench", "demo", ".ci")
_PACKAGE_DIRS = tuple(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
_PATH = re.compile(
    rf"(?<![\w/.<$-])((?:{'|'.join(map(re.escape, _ROOTS + _PACKAGE_DIRS))})/[\w./-]*[\w])"
    r"(?:(::|:)([A-Za-z_][\w.]*))?"
)


def _resolve_path(text: str) -> Path | None:
    for base in (ROOT, PACKAGE, ROOT / "plugins"):
        if (base / text).exists():
            return base / text
    return None


@cache
def _module_names(path: Path) -> frozenset[str]:
    """Top-level names of a Python file, and ``Class.attr`` for its classes' members."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{node.name}.{item.name}")
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(f"{node.name}.{item.target.id}")
                elif isinstance(item, ast.Assign):
                    names.update(
                        f"{node.name}.{t.id}" for t in item.targets if isinstance(t, ast.Name)
                    )
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom | ast.Import):  # re-exported names
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


@cache
def _ignored() -> tuple[str, ...]:
    """Folders .gitignore names: output the code writes there (bench/results/...), not files."""
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").split("\n")
    return tuple(line.strip() for line in lines if line.strip().endswith("/") and "/" in line[:-1])


def _split_module_attr(text: str) -> tuple[Path, str] | None:
    """``hooks/_memory.prefer_system_arrow_pool``: a module written with its attribute."""
    folder, _, last = text.rpartition("/")
    module, dot, attr = last.partition(".")
    if dot and (path := _resolve_path(f"{folder}/{module}.py")) is not None:
        return path, attr
    return None


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_repository_path_and_name_exists(page: Page) -> None:
    wrong = []
    for match in _PATH.finditer(page.prose):
        text, sep, name = match.group(1), match.group(2), match.group(3)
        where = page.where(page.line_of(match.start()))
        after = page.prose[match.end(1) : match.end(1) + 1]
        if after in ("*", "<", "{") or any(mark in text for mark in ("YYYY", "=")):
            continue  # a pattern or a data path (date=...), not one file
        if (text + "/").startswith(_ignored()):
            continue
        path = _resolve_path(text)
        if path is None and (split := _split_module_attr(text)):
            path, sep, name = split[0], ":", split[1]
        if path is None:
            if "." in text.rsplit("/", 1)[-1] or text.split("/")[0] in _ROOTS:
                wrong.append(f"{where}: {text} does not exist")
            continue  # a data folder such as conversions/_announced
        if name and path.suffix == ".py":
            name = name.rstrip(".").split("::")[0]
            names = _module_names(path)
            if name not in names and name.split(".")[0] not in names:
                wrong.append(f"{where}: {text}{sep}{name}: no such name")
            elif name not in names and not _has_attr(path, name):
                wrong.append(f"{where}: {text}{sep}{name}: no such attribute")
    assert not wrong, "\n".join(wrong)


def _has_attr(path: Path, name: str) -> bool:
    """``Class.attr`` of a package module: read from the source, else by import and getattr
    (inherited members, generated fields)."""
    import importlib

    if name in _module_names(path):
        return True

    relative = path.relative_to(ROOT / "plugins").with_suffix("")
    module = importlib.import_module(".".join(relative.parts))
    obj: Any = module
    for part in name.split("."):
        fields = getattr(obj, "model_fields", None) or getattr(obj, "__dataclass_fields__", {})
        if not hasattr(obj, part) and part not in fields:
            return False
        obj = getattr(obj, part, None)
    return True


@cache
def _package_classes() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, path)
    return found


_CLASS_ATTR = re.compile(r"^([A-Z][A-Za-z0-9]+)\.([A-Za-z_]\w*)(?:\(.*\))?$")
_DOTTED = re.compile(r"^((?:affiliate_network\.)?[a-z_]+(?:\.[a-z_][a-z0-9_]*)+)(?:\(.*\))?$")
_SELF = re.compile(r"\bself\.(\w+)\(")


def _dotted_exists(parts: list[str]) -> bool:
    """``module.sub.name`` of the package: the longest module path that is a file, then the
    rest a name of it."""
    for cut in range(len(parts), 0, -1):
        folder = PACKAGE.joinpath(*parts[:cut])
        for path in (folder.with_suffix(".py"), folder / "__init__.py"):
            if path.exists():
                rest = ".".join(parts[cut:])
                return not rest or _has_attr(path, rest)
    return False


def _in_package(dotted: str, subpackages: set[str]) -> bool:
    parts = dotted.removeprefix("affiliate_network.").split(".")
    return parts[0] in subpackages


def _is_review_key(text: str) -> bool:
    """``review.lookback_days``: a key of the rules file's ``review:`` section, not Python."""
    from affiliate_network.rules.model import ReviewSettings

    first, _, rest = text.partition(".")
    return first == "review" and rest.split(":")[0] in ReviewSettings.model_fields


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_python_name_in_backticks_resolves(page: Page) -> None:
    hook = PACKAGE / "hooks" / "affiliate_network.py"
    classes = _package_classes()
    subpackages = {p.stem for p in PACKAGE.iterdir()} - {"__init__", "__pycache__"}
    wrong = []
    for span in page.spans():
        where = f"{page.where(span.line)}: `{span.text}`"
        if re.search(r"\.(py|ya?ml|md|json|jsonl|toml|txt|sh)$", span.text) or _is_review_key(
            span.text
        ):
            continue
        if (m := _CLASS_ATTR.match(span.text)) and m.group(1) in classes:
            if not _has_attr(classes[m.group(1)], f"{m.group(1)}.{m.group(2)}"):
                wrong.append(where)
        elif (
            (m := _DOTTED.match(span.text))
            and _in_package(m.group(1), subpackages)
            and not _dotted_exists(m.group(1).removeprefix("affiliate_network.").split("."))
        ):
            wrong.append(where)
        for method in _SELF.findall(span.text):
            if not _has_attr(hook, f"AffiliateNetworkHook.{method}"):
                wrong.append(f"{where}: the hook has no {method}")
    assert not wrong, "\n".join(wrong)


# =============================================================================== (h) and others
def _airflow_requirement() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (spec,) = [r for r in project["dependencies"] if re.match(r"apache-airflow\s*[<>=!~]", r)]
    return spec.replace(" ", "")


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_the_airflow_requirement_stated_is_pyprojects(page: Page) -> None:
    wanted = _airflow_requirement()
    stated = re.findall(r"apache-airflow(?:>=|<|~=)[\d.]+(?:,\s*<\d[\d.]*)?", page.text)
    assert [s for s in stated if s.replace(" ", "") != wanted] == []


def _default_retries() -> dict[str, int]:
    """Each DAG's ``default_args["retries"]``, read from the DAG files."""
    found = {}
    for path in (ROOT / "dags").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "retries":
                        assert isinstance(value, ast.Constant)
                        found[path.stem] = value.value
    return found


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_the_retries_stated_are_the_dags_default_args(page: Page) -> None:
    retries = _default_retries()
    wrong = []
    for paragraph in re.split(r"\n\s*\n", page.prose):
        if "retries" not in paragraph:
            continue
        flat = " ".join(paragraph.split())
        for m in re.finditer(r"default.args\W+(\d+)\b", flat):
            if {int(m.group(1))} != set(retries.values()):
                wrong.append(f"{page.name}: '{m.group(0)}': the DAGs retry {retries}")
        for m in re.finditer(r"`?(affiliate_\w+)`?:? (\d+) retr", flat):
            if m.group(1) in retries and retries[m.group(1)] != int(m.group(2)):
                wrong.append(f"{page.name}: '{m.group(0)}': {retries[m.group(1)]}")
    assert not wrong, "\n".join(wrong)


_BACKFILL_DAYS = re.compile(r"(\d+)[- ]day backfill|backfill\w* (?:of |over )?(\d+) days")


def test_the_e2e_backfill_days_stated_are_the_stages() -> None:
    source = (ROOT / "tests" / "e2e" / "test_celery_executor.py").read_text(encoding="utf-8")
    (default,) = re.findall(r'"AFN_E2E_BACKFILL_DAYS", "(\d+)"', source)
    wrong = []
    for page in ALL:
        for paragraph in re.split(r"\n\s*\n", page.prose):
            flat = " ".join(paragraph.split())
            if not re.search(r"e2e celery|Celery stage|celery_executor|Celery end-to-end", flat):
                continue
            for m in _BACKFILL_DAYS.finditer(flat):
                days = m.group(1) or m.group(2)
                if days != default and f"AFN_E2E_BACKFILL_DAYS={days}" not in flat:
                    wrong.append(f"{page.name}: '{m.group(0)}' (the stage backfills {default})")
    assert not wrong, "\n".join(wrong)


def test_the_manifest_example_is_a_current_manifest() -> None:
    from dataclasses import fields

    from affiliate_network.partitions.manifest import MANIFEST_VERSION, Manifest
    from affiliate_network.reports.schema import CONVERSION_SCHEMA_VERSION

    page = next(p for p in MARKDOWN if p.name == "docs/daily-reports.md")
    examples = [
        json.loads(b.text.replace("…", ""))
        for b in page.blocks
        if b.lang == "json" and '"manifest_version"' in b.text
    ]
    assert examples
    for example in examples:
        assert sorted(example) == sorted(f.name for f in fields(Manifest))
        assert example["manifest_version"] == MANIFEST_VERSION
        assert example["schema"]["version"] == CONVERSION_SCHEMA_VERSION
        assert sorted(example["request"]) == _returned_keys("reports/pull.py", "record")
        assert sorted(example["stats"]) == _returned_keys("reports/landing.py", "_pull_stats")


def _returned_keys(module: str, function: str) -> list[str]:
    """The keys of the dict literal a function of the package returns."""
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    (node,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    (returned,) = [n.value for n in ast.walk(node) if isinstance(n, ast.Return)]
    assert isinstance(returned, ast.Dict)
    return sorted(k.value for k in returned.keys if isinstance(k, ast.Constant))


@cache
def _code_identifiers() -> frozenset[str]:
    """``affiliate_network_*`` names in the code, the DAGs, include/, demo/ and the tests."""
    files = [
        *(ROOT / "plugins").rglob("*.py"),
        *(ROOT / "dags").glob("*.py"),
        *(ROOT / "include").glob("*.yaml"),
        *(ROOT / "demo").rglob("*"),
        *(ROOT / "tests").rglob("*.py"),
        ROOT / "docker-compose.yaml",
        ROOT / ".env.example",
        ROOT / "pyproject.toml",
    ]
    found: set[str] = set()
    for path in files:
        if path.is_file() and ROOT / "tests" / "docs" not in path.parents:
            text = path.read_text(encoding="utf-8", errors="replace")
            found.update(re.findall(r"\baffiliate_network_\w+", text))
    return frozenset(found)


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_connection_pool_and_variable_id_exists(page: Page) -> None:
    """``affiliate_network_*`` ids (connections, the pool, the Variable, assets) are the code's."""
    wrong = [
        f"{page.where(page.text.count(chr(10), 0, m.start()) + 1)}: {m.group(0)}"
        for m in re.finditer(r"\baffiliate_network_[a-z0-9_]*[a-z0-9]\b", page.text)
        if m.group(0) not in _code_identifiers() and not (ROOT / "plugins" / m.group(0)).exists()
    ]
    assert not wrong, "\n".join(wrong)


def test_the_checks_find_what_they_judge() -> None:
    """The extractors see the facts they are meant to judge (an empty scan passes anything)."""
    runbook = next(p for p in MARKDOWN if p.name == "docs/runbook.md")
    assert any(argv[:2] == ["backfill", "create"] for argv, _ in _airflow_commands(runbook))
    assert any(argv[:2] == ["variables", "set"] for argv, _ in _airflow_commands(runbook))
    assert any(s.text.startswith("airflow ") for p in ALL for s in p.spans())
    assert "dags/affiliate_daily_reports.py" in {p.name for p in ALL}
    assert len(list(_range_rows())) > 20
    assert any(link for p in MARKDOWN for link in p.links())
    assert _parse_error(["dags", "backfill", "x"]) is not None
    assert _parse_error(["backfill", "create", "--dag-id", "x", "--run-conf", "{}"]) is not None
    assert "AFN_E2E_BACKFILL_DAYS" in _code_env_names()
    spans = [s.text for s in runbook.spans()]
    assert any(argv[0] == "affiliate-network-sandbox" for t in spans for argv in _project_argv(t))
    assert any(name == "rate_window_s" for _, name, *_ in _range_rows())
    assert any(page == "docs/hook.md" for page, *_ in _other_extra_rows())
    hook_md = next(p for p in MARKDOWN if p.name == "docs/hook.md")
    assert ("POST", "/auth/token") in {(m, p) for m, p, _ in _rest_calls(hook_md)}
    assert not _route_exists("POST", "/api/v2/dags/x/dagRun")
    trailing = _dag_params()[("affiliate_daily_reports", "trailing_days")]
    assert (trailing["minimum"], trailing["maximum"], trailing["default"]) == (0, 60, 7)


@cache
def _code_text() -> str:
    files = [*(ROOT / "plugins" / "affiliate_network").rglob("*.py"), *(ROOT / "dags").glob("*.py")]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_quoted_message_of_the_code_is_in_the_code(page: Page) -> None:
    """A quoted message with a gap ("no data interval ... the day before it") that names an
    identifier of the code (``data_interval_start``): each of its pieces is in the code."""
    code = " ".join(_code_text().split())
    wrong = []
    for match in re.finditer(r'"([^"\n]*(?:\.\.\.|…)[^"\n]*)"', page.prose):
        quote = match.group(1)
        if not re.search(r"[a-z]+_[a-z_]+", quote):
            continue
        pieces = [p.strip(" `") for p in re.split(r"\.\.\.|…", quote)]
        missing = [p for p in pieces if len(p) >= 8 and p not in code]
        if missing:
            wrong.append(f'{page.where(page.line_of(match.start()))}: "{quote}": {missing}')
    assert not wrong, "\n".join(wrong)


@cache
def _operator_arguments() -> frozenset[str]:
    names: set[str] = set()
    for path in (PACKAGE / "operators").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                args = node.args
                names.update(a.arg for a in [*args.args, *args.kwonlyargs])
    return frozenset(names)


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_operator_argument_named_exists(page: Page) -> None:
    flat = " ".join(page.prose.split())
    wrong = [
        f"{page.name}: {m.group(0)}"
        for m in re.finditer(r"[Oo]perator argument `(\w+)`", flat)
        if m.group(1) not in _operator_arguments()
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_ledger_path_is_the_one_the_sync_writes(page: Page) -> None:
    """``<base>/sync/ledger-<network>.json``: one ledger per network, never per connection (a
    bare ``ledger-<conn id>.json`` is the older name the sync renames, and may be named so)."""
    from affiliate_network.sync.ledger import default_ledger_path

    wanted = default_ledger_path("<network>", "<base>").removeprefix("<base>/")
    wrong = [
        f"{page.where(span.line)}: `{span.text}`, not {wanted}"
        for span in page.spans()
        for found in re.findall(r"sync/ledger-\S*?\.json", span.text)
        if found != wanted
    ]
    assert not wrong, "\n".join(wrong)


_PROJECT_COMMANDS = re.compile(
    r"^(affiliate-network-(?:rules|sync|sandbox)|python3? -m (?:demo|affiliate_network\S*)"
    r"|python3? bench/\S+\.py)\b"
)


def _project_argv(text: str) -> Iterator[list[str]]:
    """The repository's own command lines in a text (``uv run [--frozen]`` dropped)."""
    for argv in commands(text):
        while argv[:2] in (["python3", "-m"],) and argv[2:4] == ["uv", "run"]:
            argv = argv[4:]
        if argv[:2] == ["uv", "run"]:
            argv = argv[2:]
        while argv and argv[0].startswith("--"):
            argv = argv[1:]
        if argv and _PROJECT_COMMANDS.match(" ".join(argv)):
            yield argv


@pytest.mark.parametrize("page", ALL, ids=_ids(ALL))
def test_every_flag_of_the_repositorys_command_lines_exists(page: Page) -> None:
    """``affiliate-network-sync``, ``-sandbox``, ``-rules``, ``python -m demo`` and the
    benchmarks: each flag given is one a parser of the repository declares."""
    texts = [(s.text, s.line) for s in page.spans()]
    texts += [(line, n) for b in page.blocks if b.lang in SHELL for line, n in shell_lines(b)]
    wrong = [
        f"{page.where(n)}: {' '.join(argv)}: {token}"
        for text, n in texts
        for argv in _project_argv(text)
        for token in argv[1:]
        if token.startswith("--") and token.split("=")[0] not in _repository_flags()
    ]
    assert not wrong, "\n".join(wrong)


@cache
def _rest_routes() -> frozenset[tuple[str, str]]:
    """(METHOD, path template) of Airflow's REST API and its simple auth manager, read from the
    OpenAPI files the installed Airflow ships (no app is built)."""
    import airflow.api_fastapi as api

    folder = Path(api.__file__).parent
    routes: set[tuple[str, str]] = set()
    for spec in (
        folder / "core_api" / "openapi" / "v2-rest-api-generated.yaml",
        folder
        / "auth"
        / "managers"
        / "simple"
        / "openapi"
        / "v2-simple-auth-manager-generated.yaml",
    ):
        path = ""
        for line in spec.read_text(encoding="utf-8").split("\n"):
            if m := re.match(r"^  (/\S+):$", line):
                path = m.group(1)
            elif m := re.match(r"^    (get|post|put|patch|delete):$", line):
                routes.add((m.group(1).upper(), path))
    return frozenset(routes)


def _route_exists(method: str, path: str) -> bool:
    path = re.sub(r"[?#].*$", "", path).rstrip(".,")
    for known_method, template in _rest_routes():
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
        if known_method == method and re.fullmatch(pattern, path):
            return True
    return False


def _rest_calls(page: Page) -> Iterator[tuple[str, str, int]]:
    """(METHOD, path, line) of every ``curl`` to Airflow's API and every ``GET /api/v2/...``."""
    for argv, number in _shell_blocks(page):
        argv = [re.sub(r"^\w+=\$\(", "", argv[0]), *argv[1:]]  # TOKEN=$(curl ...)
        if argv[0] != "curl":
            continue
        method = argv[argv.index("-X") + 1] if "-X" in argv else "POST" if "-d" in argv else "GET"
        for token in argv:
            if m := re.search(r"https?://[^/]+(/(?:api/v2|auth)/\S*)", token):
                yield method, m.group(1), number
    for span in page.spans():
        if m := re.match(r"^(GET|POST|PUT|PATCH|DELETE) (/(?:api/v2|auth)/\S+)", span.text):
            yield m.group(1), m.group(2), span.line


@pytest.mark.parametrize("page", MARKDOWN, ids=_ids(MARKDOWN))
def test_every_rest_call_is_a_route_of_airflows_api(page: Page) -> None:
    wrong = [
        f"{page.where(n)}: {method} {path}"
        for method, path, n in _rest_calls(page)
        if "<" not in path.split("/")[-1] and not _route_exists(method, path)
    ]
    assert not wrong, "\n".join(wrong)
