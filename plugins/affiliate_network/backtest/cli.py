"""``affiliate-network-rules``: check on-hold rules files, and try them on landed data.

Commands:

* ``validate FILE...``, ``fields`` - the rules language's checks
  (:mod:`affiliate_network.rules.cli`).
* ``evaluate FILE --records PATH [--now UNIX] [--decisions OUT.jsonl]`` - decide conversions
  and print the count per rule: try a rule change on real data before it is merged. ``PATH``
  is what the package lands (a ``part-*.parquet`` or ``part-*.jsonl.gz`` file, a partition
  folder ``date=YYYY-MM-DD``, or a dataset folder of them) or rows exported from it (JSON Lines
  or a JSON array, optionally gzipped). ``--decisions`` writes one line per record
  (``conversion_id``, ``rule``, ``action``).
* ``backtest FILE --records DATASET --from D1 --to D2`` - decide the landed history day by day
  as the on-hold review would, and print per rule and per day the conversions and payout at
  stake beside what the network decided (see :mod:`affiliate_network.backtest.job` and
  ``backtest --help``); ``--decisions OUT.csv|OUT.jsonl`` writes one row per conversion.

Also runs as ``python -m affiliate_network.backtest``. Help, ``validate`` and ``fields`` import
no Airflow; ``evaluate`` of Parquet and ``backtest`` import pyarrow, never Airflow.

Bad input never ends in a traceback: a number that is not one (NaN, an infinity, text), out of
its range, an impossible or out-of-range date, an unknown option, is one line on stderr naming
the option (or the environment variable a default came from), and exit 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from affiliate_network.backtest.job import (
    FIRST_DAY,
    LAST_DAY,
    MAX_HOURS,
    MAX_LOOKBACK_DAYS,
)
from affiliate_network.backtest.records import load_records
from affiliate_network.exceptions import ConfigValidationError, StorageError, UsageError
from affiliate_network.rules.cli import (
    PROG,
    Parser,
    add_language_commands,
    run_language_command,
)

if TYPE_CHECKING:
    from affiliate_network.backtest.job import Backtest
    from affiliate_network.backtest.landed import LandedDay
    from affiliate_network.rules.model import ReviewSettings


def _write_decisions(out: str, records: Sequence[dict[str, Any]], evaluation: Any) -> None:
    with open(out, "w", encoding="utf-8") as handle:
        for index, record in enumerate(records):
            decision = evaluation.for_index(index)
            line = {
                "conversion_id": record.get("conversion_id"),
                "rule": decision.rule_id if decision else None,
                "action": decision.action if decision else "hold",
            }
            handle.write(json.dumps(line) + "\n")


def _evaluate(rules: str, records_path: str, now: float | None, decisions: str | None) -> int:
    from affiliate_network.rules.engine import RuleSet

    try:
        ruleset = RuleSet.from_file(rules)
        records = load_records(records_path)
    except (ConfigValidationError, StorageError) as err:
        print(str(err), file=sys.stderr)
        return 1
    evaluation = ruleset.evaluate(records, now=now)
    if decisions:
        _write_decisions(decisions, records, evaluation)
    width = max((len(r.id) for r in ruleset.rules), default=4)
    for rule in ruleset.rules:
        print(f"{rule.id:<{width}}  {rule.action:<7}  {evaluation.per_rule.get(rule.id, 0):>8}")
    print(f"{'(no rule)':<{width}}  {'hold':<7}  {evaluation.unmatched:>8}")
    print(f"{len(records)} records decided in {evaluation.cpu_seconds:.3f} s CPU")
    return 0


BACKTEST_HELP = """\
Decide landed conversions day by day as the on-hold review would, and compare with what the
network decided.

For each day D of --from..--to (local days of the network's timezone) the review run that
decides D is replayed: it runs --decide-after-hours after D ends (default: the rules' widest
within_hours, at least --min-age-hours), its aggregates count ALL landed conversions of its
window (--lookback-days days ending with its day, plus the horizon before), and it decides the
conversions of D that have been on hold (whatever their landed state) and are old enough.
Partitions outside --from..--to are read for that look-back (and look-ahead) only. Landed
events (is_event true) are left out, as the review pulls conversions only; so is a partition
landed with filters, search terms or without conversions (named on stderr).

Network status (the landed on-hold state: rel_on_hold_status, else status):
  approved   the network approved it
  rejected   the network rejected it (any final on-hold status other than approved)
  on_hold    still on hold (status pending)
  other      no status landed

Agreement of a rule's action with the network status:
  agree      approve & approved, reject & rejected
  disagree   approve & rejected, reject & approved
  open       approve or reject, but the network has not decided (still on hold)
  none       review, hold or no rule: the rules take no side (counted, not scored)

Output: one line per day and rule (count, network statuses, agree, disagree, open, then the
payout at stake per currency, never added across currencies; negative payouts, reversals and
adjustments, apart with their count: "payout 12.50 EUR, 300 JPY; negative -4.10 EUR (1)"),
then the totals per rule. A rule's approve of a negative payout is counted as review, as the
review sends it to a person. Exit 1 with one line on stderr on a bad argument
(NaN, infinite or out-of-range number, impossible date), a bad date range, a missing records
folder or an invalid rules file. Dates from 1970-01-01 to 9998-11-26.
"""


#: Unix seconds ``--now`` may be: 1970-01-01 to 9999-12-31 23:59:59 UTC.
MAX_UNIX_SECONDS = 253_402_300_799
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_WHOLE = re.compile(r"[+-]?\d{1,18}\Z")


def _shown(text: str) -> str:
    """The value as quoted in an error: repr (one line whatever it holds), cut when long."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _number(text: str, *, whole: bool, low: float, high: float) -> float:
    """``text`` as a finite number from ``low`` to ``high`` (a whole one if ``whole``).

    :raises ValueError: with the reason, quoting the text (never a traceback's words).
    """
    value = text.strip()
    if whole:
        if not _WHOLE.match(value):
            if re.fullmatch(r"[+-]?\d+", value):
                raise ValueError(f"{_shown(text)} is out of range ({low:g} to {high:g})")
            raise ValueError(f"{_shown(text)} is not a whole number")
        number: float = int(value)
    else:
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{_shown(text)} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"{_shown(text)} is not a finite number")
    if not low <= number <= high:
        raise ValueError(f"{_shown(text)} is out of range ({low:g} to {high:g})")
    return number


def _number_arg(*, whole: bool, low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type`` for :func:`_number` (argparse names the option in its error)."""

    def parse(text: str) -> float:
        try:
            return _number(text, whole=whole, low=low, high=high)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return parse


def _date_arg(value: str) -> dt.date:
    """A ``YYYY-MM-DD`` day that exists, within the backtest's range."""
    text = value.strip()
    if not _ISO_DAY.match(text):
        raise argparse.ArgumentTypeError(f"{_shown(value)} is not a YYYY-MM-DD date")
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:  # 2026-02-30, month 13, year 0
        raise argparse.ArgumentTypeError(f"{_shown(value)} is not a calendar date") from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise argparse.ArgumentTypeError(
            f"{_shown(value)} is out of range ({FIRST_DAY} to {LAST_DAY})"
        )
    return day


def _timezone_arg(value: str) -> int:
    """An API timezone id (``GET /meta/timezones``)."""
    from affiliate_network.api.timezones import TIMEZONES

    try:
        tz_id = int(_number(value, whole=True, low=min(TIMEZONES), high=max(TIMEZONES)))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err}: not an API timezone id") from None
    if tz_id not in TIMEZONES:
        raise argparse.ArgumentTypeError(f"{_shown(value)} is not an API timezone id")
    return tz_id


def _money(value: Decimal) -> str:
    """An exact amount for people: cents when exact to the cent, every digit otherwise."""
    cents = value.quantize(Decimal("0.01"))
    return f"{cents:.2f}" if cents == value else f"{value.normalize():f}"


_COLUMNS = ("approved", "rejected", "on_hold", "other", "agree", "disagree", "open")


def _per_currency(amounts: dict[str, Decimal], counts: Any = None) -> str:
    """``12.50 EUR, 300 JPY`` (currencies in code order; ``(n)`` after each with ``counts``)."""
    return ", ".join(
        f"{_money(amount)} {currency}" + (f" ({counts[currency]})" if counts is not None else "")
        for currency, amount in sorted(amounts.items())
    )


def _tally_line(label: str, rule: str, action: str, tally: Any, width: int) -> str:
    counts = [*(tally.network[c] for c in _COLUMNS[:4]), *(tally.scores[c] for c in _COLUMNS[4:])]
    cells = "".join(f"{n:>9}" for n in counts)
    money = f"payout {_per_currency(tally.payout) or '0'}"
    if tally.negative:
        money += f"; negative {_per_currency(tally.negative, tally.negative_count)}"
    return f"{label:<10}  {rule:<{width}}  {action:<7} {tally.count:>7}{cells}  {money}"


class _DecisionWriter:
    """``--decisions``: CSV when the name ends in ``.csv``, else JSON Lines."""

    FIELDS = (
        "conversion_id",
        "on_hold_conversion_id",
        "day",
        "rule",
        "action",
        "network_status",
        "agreement",
        "payout",
        "currency_id",
    )

    def __init__(self, out: str) -> None:
        import csv

        self.handle = open(out, "w", encoding="utf-8", newline="")  # noqa: SIM115 - closed in close()
        self.csv = csv.writer(self.handle) if out.lower().endswith(".csv") else None
        if self.csv is not None:
            self.csv.writerow(self.FIELDS)

    def write(self, row: Any) -> None:
        values = [getattr(row, name) for name in self.FIELDS]
        values[self.FIELDS.index("payout")] = f"{row.payout:f}"  # exact: no binary float
        if self.csv is not None:
            self.csv.writerow(values)
        else:
            self.handle.write(json.dumps(dict(zip(self.FIELDS, values, strict=True))) + "\n")

    def close(self) -> None:
        self.handle.close()


def _review_defaults(args: argparse.Namespace, review: ReviewSettings) -> None:
    """The review's look-back and min age (the rules file's ``review:`` section, as the review
    DAG reads it) where the command line gives none."""
    if args.lookback_days is None:
        args.lookback_days = review.lookback_days
    if args.min_age_hours is None:
        args.min_age_hours = review.min_age_hours


def _prepare(args: argparse.Namespace) -> tuple[Backtest, int, list[LandedDay], dict[dt.date, str]]:
    """The backtest in the landed days' timezone, the days it reads, and the days left out
    (landed as part of a day's traffic only), by day.

    :raises ConfigValidationError: a bad date range or rules file.
    :raises StorageError: no complete partition in range, or no single timezone.
    """
    from affiliate_network.api.timezones import TIMEZONES
    from affiliate_network.backtest.job import Backtest
    from affiliate_network.backtest.landed import landed_days
    from affiliate_network.rules.engine import RuleSet

    if args.date_from > args.date_to:
        raise ConfigValidationError(f"--from {args.date_from} is after --to {args.date_to}")
    ruleset = RuleSet.from_file(args.rules)
    _review_defaults(args, ruleset.rules_file.review)

    def backtest_in(timezone: str) -> Backtest:
        return Backtest(
            ruleset,
            timezone=timezone,
            lookback_days=args.lookback_days,
            min_age_hours=args.min_age_hours,
            decide_after_hours=args.decide_after_hours,
        )

    # Widened by a day each side: the partitions' timezone is known once they are listed.
    need_first, need_last = backtest_in("UTC").days_needed(args.date_from, args.date_to)
    days = landed_days(
        args.records, need_first - dt.timedelta(days=1), need_last + dt.timedelta(days=1)
    )
    partial = {d.day: d.partial for d in days if d.partial}
    days = [d for d in days if not d.partial]  # missing, like a day never landed
    if not any(args.date_from <= d.day <= args.date_to for d in days):
        raise StorageError(
            f"{args.records}: no complete partition from {args.date_from} to {args.date_to}"
        )
    tz_id = args.timezone_id
    if tz_id is None:
        landed_tz = {d.timezone_id for d in days if d.timezone_id is not None}
        if len(landed_tz) > 1:
            raise StorageError(
                f"{args.records}: days landed in several timezones {sorted(landed_tz)}; "
                "choose one with --timezone-id"
            )
        tz_id = landed_tz.pop() if landed_tz else 67
    if tz_id not in TIMEZONES:  # a manifest's id (--timezone-id is checked when parsed)
        raise StorageError(f"{args.records}: landed in timezone {tz_id}, not an API timezone id")
    return backtest_in(TIMEZONES[tz_id]), tz_id, days, partial


def _report(
    args: argparse.Namespace,
    backtest: Backtest,
    tz_id: int,
    days: list[LandedDay],
    writer: _DecisionWriter | None,
) -> set[dt.date]:
    """Run the backtest, printing a line per day and rule, then the totals; the days missing."""
    from affiliate_network.api.timezones import TIMEZONES
    from affiliate_network.backtest.job import NO_RULE, Tally

    need_first, need_last = backtest.days_needed(args.date_from, args.date_to)
    columns = backtest.columns()
    stream = ((d.day, d.batches(columns)) for d in days if need_first <= d.day <= need_last)
    actions = {rule.id: rule.action for rule in backtest.ruleset.rules}
    actions[NO_RULE] = "hold"
    width = max(len(r) for r in actions)
    print(
        f"Backtest of {args.rules} on {args.records}, {args.date_from}..{args.date_to} "
        f"(timezone {tz_id} {TIMEZONES[tz_id]}; look-back {backtest.lookback_days} days; "
        f"each day decided {backtest.decide_after_hours:g} h after it ends; on hold >= "
        f"{backtest.min_age_hours:g} h)"
    )
    header = "".join(f"{c:>9}" for c in _COLUMNS)
    print(f"{'day':<10}  {'rule':<{width}}  {'action':<7} {'count':>7}{header}  payout")
    totals = {rule: Tally() for rule in actions}
    missing: set[dt.date] = set()
    decided = 0
    on_row = writer.write if writer is not None else None
    for result in backtest.run(args.date_from, args.date_to, stream, on_row=on_row):
        missing.update(result.missing_days)
        decided += result.candidates
        for rule, tally in result.per_rule.items():
            totals[rule].merge(tally)
            if tally.count or args.all_rules:
                print(_tally_line(result.day.isoformat(), rule, actions[rule], tally, width))
    for rule, tally in totals.items():
        print(_tally_line("total", rule, actions[rule], tally, width))
    print(f"{decided} conversions decided over {(args.date_to - args.date_from).days + 1} days")
    return missing


def _backtest(args: argparse.Namespace) -> int:
    writer: _DecisionWriter | None = None
    try:
        backtest, tz_id, days, partial = _prepare(args)
        if args.decisions:
            writer = _DecisionWriter(args.decisions)
        missing = _report(args, backtest, tz_id, days, writer)
        for gap in sorted(missing & set(partial)):
            print(f"warning: {gap} left out: {partial[gap]}", file=sys.stderr)
        if missing:
            shown = ", ".join(d.isoformat() for d in sorted(missing))
            print(
                f"warning: no complete partition for {shown}: those days' traffic is missing "
                "from the aggregates (and their conversions from the decisions)",
                file=sys.stderr,
            )
    except (ConfigValidationError, StorageError) as err:
        print(f"{PROG} backtest: {err}", file=sys.stderr)
        return 1
    finally:
        if writer is not None:
            writer.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``affiliate-network-rules`` console script."""
    parser = Parser(prog=PROG, description="Check and try on-hold review rules files.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_language_commands(sub)
    evaluate = sub.add_parser("evaluate", help="decide landed or exported conversion records")
    evaluate.add_argument("rules", metavar="FILE")
    evaluate.add_argument(
        "--records",
        required=True,
        help="a landed file or partition folder (.parquet, .jsonl.gz), or exported JSON rows",
    )
    evaluate.add_argument(
        "--now",
        type=_number_arg(whole=False, low=0, high=MAX_UNIX_SECONDS),
        default=None,
        help="evaluation time (unix s, 0 to 9999-12-31's last second)",
    )
    evaluate.add_argument(
        "--decisions", metavar="OUT", help="write each record's rule and action as JSON Lines"
    )
    backtest = sub.add_parser(
        "backtest",
        help="decide the landed history as the review would, beside the network's decisions",
        description=BACKTEST_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    backtest.add_argument("rules", metavar="RULES")
    backtest.add_argument(
        "--records", required=True, help="the landed dataset folder, e.g. data/conversions"
    )
    backtest.add_argument("--from", dest="date_from", required=True, type=_date_arg, metavar="D1")
    backtest.add_argument("--to", dest="date_to", required=True, type=_date_arg, metavar="D2")
    # Defaults read from the rules file when the backtest runs.
    backtest.add_argument(
        "--lookback-days",
        type=_number_arg(whole=True, low=1, high=MAX_LOOKBACK_DAYS),
        default=None,
        help=f"the review's window in days, 1 to {MAX_LOOKBACK_DAYS} (default: the rules "
        "file's review.lookback_days, as the review reads it)",
    )
    backtest.add_argument(
        "--min-age-hours",
        type=_number_arg(whole=False, low=0, high=MAX_HOURS),
        default=None,
        help=f"decide conversions on hold this long, 0 to {MAX_HOURS:g} (default: the rules "
        "file's review.min_age_hours, as the review reads it)",
    )
    backtest.add_argument(
        "--decide-after-hours",
        type=_number_arg(whole=False, low=0, high=MAX_HOURS),
        default=None,
        help=f"hours after a day ends that its run happens, 0 to {MAX_HOURS:g} (default: the "
        "rules' widest within_hours, at least --min-age-hours); raise it for rules on "
        "hold_age_hours",
    )
    backtest.add_argument(
        "--timezone-id",
        type=_timezone_arg,
        default=None,
        help="the network timezone of the landed days (default: the manifests' request)",
    )
    backtest.add_argument(
        "--decisions",
        metavar="OUT",
        help="write one row per decided conversion: CSV if OUT ends in .csv, else JSON Lines",
    )
    backtest.add_argument(
        "--all-rules", action="store_true", help="print rules that decided nothing on a day too"
    )
    try:
        args = parser.parse_args(argv)
        if args.command == "backtest":
            return _backtest(args)
    except UsageError as err:
        print(str(err), file=sys.stderr)
        return 1
    if args.command == "evaluate":
        return _evaluate(args.rules, args.records, args.now, args.decisions)
    return run_language_command(args)


if __name__ == "__main__":
    sys.exit(main())
