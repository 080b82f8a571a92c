"""The rules language's checks from the shell and in CI (``python -m affiliate_network.rules``).

* ``validate FILE...`` - validate each file; print one line per problem
  (``FILE:LINE: rule 'ID': FIELD: MESSAGE``) and exit 1 if any file is invalid.
* ``fields`` - list the derived fields and the aggregate kinds rules can use.

The ``affiliate-network-rules`` command (:mod:`affiliate_network.backtest.cli`) has these and
the commands that read landed data (``evaluate``, ``backtest``). Help, ``validate`` and
``fields`` import no Airflow (seconds to import). A bad command line is one line on stderr and
exit 1, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from affiliate_network.exceptions import ConfigValidationError, UsageError

PROG = "affiliate-network-rules"


def _validate(files: Sequence[str]) -> int:
    from affiliate_network.rules.loader import load_rules

    failed = 0
    for name in files:
        try:
            # The author's own file in their own terminal: quote its values (a review task
            # reads the include folder's rules files only, and hides values of any other).
            rules_file = load_rules(name, show_values=True)
        except ConfigValidationError as err:
            failed += 1
            for error in getattr(err, "errors", None) or [str(err)]:
                print(str(error), file=sys.stderr)
            continue
        actions: dict[str, int] = {}
        for rule in rules_file.rules:
            actions[rule.action] = actions.get(rule.action, 0) + 1
        summary = ", ".join(f"{n} {a}" for a, n in sorted(actions.items()))
        print(f"{name}: OK ({len(rules_file.rules)} rules: {summary})")
    if failed:
        print(f"{failed} of {len(files)} file(s) invalid", file=sys.stderr)
    return 1 if failed else 0


def _fields() -> int:
    from affiliate_network.rules.fields import DERIVED_FIELDS

    print("Derived fields (use like record fields in `field:`):")
    for name, derived in DERIVED_FIELDS.items():
        print(f"  {name:<30} {derived.type:<8} {derived.description}")
    print("\nAggregates (`agg:`), computed over every on-hold candidate of the run:")
    print("  count_same: F [per: G] [within_hours: H]   conversions sharing F (within H hours)")
    print("  share_same: F [per: G]                     that count / all (or / the G group)")
    print("  count_distinct: F, per: G                  distinct F values in the G group")
    print("  ratio_to_median: F [per: G]                F / median of F (in the G group)")
    return 0


class Parser(argparse.ArgumentParser):
    """argparse with its errors as :class:`UsageError` (one line, exit 1) instead of a usage
    block and exit 2: a bad value ends like every other refusal of the command."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {' '.join(message.split())} (see --help)")


def add_language_commands(sub: Any) -> None:
    """Add ``validate`` and ``fields`` to an argparse subparsers object."""
    validate = sub.add_parser("validate", help="validate rules files (exit 1 when invalid)")
    validate.add_argument("files", nargs="+", metavar="FILE")
    sub.add_parser("fields", help="list derived fields and aggregates")


def run_language_command(args: argparse.Namespace) -> int:
    """Run ``validate`` or ``fields`` as parsed by :func:`add_language_commands`."""
    if args.command == "validate":
        return _validate(args.files)
    return _fields()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m affiliate_network.rules``: ``validate`` and ``fields``."""
    parser = Parser(prog=PROG, description="Check on-hold review rules files.")
    add_language_commands(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        print(str(err), file=sys.stderr)
        return 1
    return run_language_command(args)


if __name__ == "__main__":
    sys.exit(main())
