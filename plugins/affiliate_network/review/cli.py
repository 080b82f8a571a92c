"""``affiliate-network-rules``: check on-hold rules files from the shell and in CI.

Commands:

* ``validate FILE...`` - validate each file; print one line per problem
  (``FILE:LINE: rule 'ID': FIELD: MESSAGE``) and exit 1 if any file is invalid.
* ``fields`` - list the derived fields and the aggregate kinds rules can use.
* ``evaluate FILE --records RECORDS.jsonl [--now UNIX]`` - decide conversions saved as JSON Lines
  (one conversion record per line) and print the count per rule: try a rule change on real
  data before it is merged.

Also runs as ``python -m affiliate_network.review``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from affiliate_network.exceptions import ConfigValidationError


def _validate(files: Sequence[str]) -> int:
    from affiliate_network.review.loader import load_rules

    failed = 0
    for name in files:
        try:
            rules_file = load_rules(name)
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
    from affiliate_network.review.fields import DERIVED_FIELDS

    print("Derived fields (use like record fields in `field:`):")
    for name, derived in DERIVED_FIELDS.items():
        print(f"  {name:<30} {derived.type:<8} {derived.description}")
    print("\nAggregates (`agg:`), computed over every on-hold candidate of the run:")
    print("  count_same: F [per: G] [within_hours: H]   conversions sharing F (within H hours)")
    print("  share_same: F [per: G]                     that count / all (or / the G group)")
    print("  count_distinct: F, per: G                  distinct F values in the G group")
    print("  ratio_to_median: F [per: G]                F / median of F (in the G group)")
    return 0


def _evaluate(rules: str, records_path: str, now: float | None) -> int:
    from affiliate_network.review.engine import RuleSet

    try:
        ruleset = RuleSet.from_file(rules)
    except ConfigValidationError as err:
        print(str(err), file=sys.stderr)
        return 1
    with open(records_path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    evaluation = ruleset.evaluate(records, now=now)
    width = max((len(r.id) for r in ruleset.rules), default=4)
    for rule in ruleset.rules:
        print(f"{rule.id:<{width}}  {rule.action:<7}  {evaluation.per_rule.get(rule.id, 0):>8}")
    print(f"{'(no rule)':<{width}}  {'hold':<7}  {evaluation.unmatched:>8}")
    print(f"{len(records)} records decided in {evaluation.cpu_seconds:.3f} s CPU")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``affiliate-network-rules`` console script."""
    parser = argparse.ArgumentParser(
        prog="affiliate-network-rules", description="Check and try on-hold review rules files."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="validate rules files (exit 1 when invalid)")
    validate.add_argument("files", nargs="+", metavar="FILE")
    sub.add_parser("fields", help="list derived fields and aggregates")
    evaluate = sub.add_parser("evaluate", help="decide records saved as JSON Lines")
    evaluate.add_argument("rules", metavar="FILE")
    evaluate.add_argument("--records", required=True, help="JSON Lines of conversion records")
    evaluate.add_argument("--now", type=float, default=None, help="evaluation time (unix s)")
    args = parser.parse_args(argv)
    if args.command == "validate":
        return _validate(args.files)
    if args.command == "fields":
        return _fields()
    return _evaluate(args.rules, args.records, args.now)


if __name__ == "__main__":
    sys.exit(main())
