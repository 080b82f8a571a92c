"""``affiliate-network-rules``: every numeric and date argument refuses what it cannot use.

NaN, infinities, out-of-range numbers, impossible or out-of-range dates: the installed console
script (run as a user runs it) exits 1 with one line on stderr naming the option (or the
environment variable a default came from), never a traceback. A property test then throws any
text at each option in-process: the command ends in one refusal line or runs, nothing escapes.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affiliate_network.backtest.cli import main

SCRIPT = Path(sys.executable).parent / "affiliate-network-rules"
RULES = """\
rules:
  - id: dup-ip
    description: three conversions of one IP within a day
    action: reject
    when: {agg: {count_same: conversion_user_ip, within_hours: 24}, ge: 3}
"""
#: Options of the backtest and what each is refused with, beside a good value of the others.
GOOD = ["--from", "2026-03-01", "--to", "2026-03-02"]


@pytest.fixture(scope="module")
def rules(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "rules.yaml"
    path.write_text(RULES)
    return path


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--lookback-days", "nan", "'nan' is not a whole number"),
        ("--lookback-days", "inf", "'inf' is not a whole number"),
        ("--lookback-days", "99999999999999999999999", "is out of range (1 to 365)"),
        ("--lookback-days", "0", "'0' is out of range (1 to 365)"),
        ("--min-age-hours", "nan", "'nan' is not a finite number"),
        ("--min-age-hours", "-inf", "'-inf' is not a finite number"),
        ("--min-age-hours", "-1", "'-1' is out of range (0 to 8760)"),
        ("--decide-after-hours", "inf", "'inf' is not a finite number"),
        ("--decide-after-hours", "1e308", "'1e308' is out of range (0 to 8760)"),
        ("--decide-after-hours", "1e999", "'1e999' is not a finite number"),
        ("--timezone-id", "nan", "'nan' is not a whole number"),
        ("--timezone-id", "1000000000000000000000", "is out of range (1 to 99)"),
        ("--from", "0001-01-01", "'0001-01-01' is out of range (1970-01-01 to 9998-11-26)"),
        ("--to", "9999-12-31", "'9999-12-31' is out of range (1970-01-01 to 9998-11-26)"),
        ("--from", "2026-02-30", "'2026-02-30' is not a calendar date"),
        ("--to", "20260301", "'20260301' is not a YYYY-MM-DD date"),
    ],
)
def test_a_bad_backtest_argument_is_one_line_naming_the_option(
    rules, tmp_path, option, value, says
) -> None:
    args = {**dict(zip(GOOD[::2], GOOD[1::2], strict=True)), option: value}
    # ``--option=value``: argparse would read a value starting with "-" as an option.
    flat = [f"{k}={v}" for k, v in args.items()]
    # The records folder exists: only the argument can be what stops the command.
    done = _run("backtest", str(rules), "--records", str(tmp_path), *flat)
    line = _one_line(done)
    assert line.startswith(f"affiliate-network-rules backtest: argument {option}: "), line
    assert says in line


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e999", "253402300800", "soon"])
def test_a_bad_evaluate_now_is_one_line_naming_the_option(rules, tmp_path, value) -> None:
    records = tmp_path / "rows.jsonl"
    records.write_text('{"conversion_id": "c1", "conversion_user_ip": "10.0.0.1"}\n')
    done = _run("evaluate", str(rules), "--records", str(records), f"--now={value}")
    line = _one_line(done)
    assert line.startswith("affiliate-network-rules evaluate: argument --now: "), line
    assert repr(value) in line


@pytest.mark.parametrize(
    ("key", "value"),
    [("lookback_days", ".nan"), ("lookback_days", ".inf"), ("min_age_hours", "1e400")],
)
def test_a_bad_review_default_in_the_rules_file_names_file_line_and_key(
    tmp_path, key, value
) -> None:
    """The backtest's look-back and min age default to the rules file's ``review:`` section."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES + f"review:\n  {key}: {value}\n")
    done = _run("backtest", str(rules), "--records", str(tmp_path), *GOOD)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    # The rules loader's own report: a heading, then one line per problem.
    assert f"rules.yaml:7: review.{key}: " in done.stderr.splitlines()[-1], done.stderr


def test_rules_whose_window_is_infinite_are_refused_by_the_backtest(tmp_path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.replace("within_hours: 24", "within_hours: .inf"))
    done = _run("backtest", str(rules), "--records", str(tmp_path), *GOOD)
    line = _one_line(done)
    assert line == (
        "affiliate-network-rules backtest: the rules' widest within_hours must be a number "
        "from 0 to 8760, got inf"
    )


def test_an_unknown_option_is_one_line_too(rules, tmp_path) -> None:
    done = _run("backtest", str(rules), "--records", str(tmp_path), *GOOD, "--bogus", "3")
    line = _one_line(done)
    assert line.startswith("affiliate-network-rules: unrecognized arguments: --bogus 3")


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["nan", "NaN", "-nan", "inf", "Infinity", "1e309", "0x10", "1_0", " 7 ", ""]),
    st.text(max_size=12),
)
DATES = st.one_of(
    st.dates().map(lambda d: d.isoformat()),
    st.from_regex(r"\d{4}-\d{2}-\d{2}", fullmatch=True),
    st.text(max_size=12),
)
OPTIONS = {
    "--lookback-days": NUMBERS,
    "--min-age-hours": NUMBERS,
    "--decide-after-hours": NUMBERS,
    "--timezone-id": NUMBERS,
    "--from": DATES,
    "--to": DATES,
}


@settings(
    max_examples=int(os.environ.get("AFN_FUZZ_EXAMPLES", "150")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_value_of_any_option_ends_in_one_line_or_a_run(rules, tmp_path, data) -> None:
    option = data.draw(st.sampled_from(sorted(OPTIONS)))
    value = data.draw(OPTIONS[option])
    args = {**dict(zip(GOOD[::2], GOOD[1::2], strict=True)), option: value}
    flat = [f"{k}={v}" for k, v in args.items()]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["backtest", str(rules), "--records", str(tmp_path / "none"), *flat])
    lines = err.getvalue().splitlines()
    assert code == 1
    assert len(lines) == 1, lines
    # Either the value was refused naming its option, or the command got as far as the data
    # (an empty range of good days is refused as such).
    assert (
        f"argument {option}: " in lines[0]
        or "no such folder" in lines[0]
        or "is after --to" in lines[0]
        or "is no longer in it" in lines[0]  # a run so late that the day left its window
    ), lines[0]
