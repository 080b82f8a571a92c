"""``affiliate-network-rules``: check on-hold rules files from the shell and in CI.

Commands:

* ``validate FILE...`` - validate each file; print one line per problem
  (``FILE:LINE: rule 'ID': FIELD: MESSAGE``) and exit 1 if any file is invalid.
* ``fields`` - list the derived fields and the aggregate kinds rules can use.
* ``evaluate FILE --records PATH [--now UNIX] [--decisions OUT.jsonl]`` - decide conversions
  and print the count per rule: try a rule change on real data before it is merged. ``PATH``
  is what the package lands (a ``part-*.parquet`` or ``part-*.jsonl.gz`` file, a partition
  folder ``date=YYYY-MM-DD``, or a dataset folder of them) or rows exported from it (JSON Lines
  or a JSON array, optionally gzipped). ``--decisions`` writes one line per record
  (``conversion_id``, ``rule``, ``action``).

Also runs as ``python -m affiliate_network.rules``. Help, ``validate`` and ``fields`` import no
Airflow (seconds to import); ``evaluate`` of Parquet imports pyarrow.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import itertools
import json
import sys
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from affiliate_network.exceptions import ConfigValidationError, StorageError

#: Suffixes of the files the package lands (reports/schema.py ``FORMAT_SUFFIX``) and of
#: exported rows; anything else in a folder is skipped (manifests, locks).
_READERS = (".parquet", ".jsonl.gz", ".json.gz", ".jsonl", ".json", ".ndjson")


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


def _record_files(path: Path) -> list[Path]:
    """The data files under ``path`` (itself if a file), skipping ``_``/``.`` folders.

    Like the query engines, in-flight ``_staging`` and replaced ``_trash`` data is never read.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise StorageError(f"{path}: no such file or folder")
    files = [
        f
        for f in sorted(path.rglob("*"))
        if f.is_file()
        and f.name.endswith(_READERS)
        and not any(p.startswith(("_", ".")) for p in f.relative_to(path).parts)
    ]
    if not files:
        raise StorageError(f"{path}: no {', '.join(_READERS)} file in this folder")
    return files


def _read_parquet(path: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=10_000):
        yield from batch.to_pylist()


def _read_json(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        head = handle.read(1)
        while head.isspace():
            head = handle.read(1)
        if head == "[":  # a JSON array of rows (pandas ``orient="records"``, DuckDB ARRAY)
            yield from json.loads(head + handle.read())
            return
        for line in itertools.chain([head + handle.readline()], handle):
            if line.strip():
                yield json.loads(line)


def _as_api_value(value: Any) -> Any:
    """A typed storage value as the API sends it (Unix seconds, plain numbers)."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return int(aware.timestamp())
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def _spec_typed(record: dict[str, Any]) -> None:
    """Exported text back to the spec's JSON types: numbers, and timestamps as Unix seconds.

    An export writes a typed timestamp as ISO text and a decimal as text; the API sends
    numbers, and the rules (ages, ``sale_amount``) compare numbers.
    """
    from affiliate_network.record_fields import INTEGER_FIELDS, NUMBER_FIELDS

    for key in (*INTEGER_FIELDS, *NUMBER_FIELDS):
        value = record.get(key)
        if not isinstance(value, str) or not value.strip():
            continue
        try:
            number = float(value)
        except ValueError:
            try:
                stamp = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                continue  # left as is: the rules see what the file holds
            record[key] = _as_api_value(stamp)
            continue
        record[key] = int(number) if key in INTEGER_FIELDS and number.is_integer() else number


def _decode_json(value: Any, what: str, source: Path) -> Any:
    if not isinstance(value, str) or not value:
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise StorageError(f"{source}: {what} is not valid JSON ({err.msg})") from None


def as_record(row: dict[str, Any], source: Path) -> dict[str, Any]:
    """A landed or exported row as the API's conversion record, which the rules expect.

    ``relationship`` stored as a JSON string (the Parquet column, any export of it) is decoded;
    top-level fields the schema keeps in ``extra_fields`` come back; typed values (timestamps,
    decimals) and their exported text become what the API sends (Unix seconds, numbers). The
    flattened ``rel_*`` columns stay: no rule can name them (unknown fields are rejected), so
    they change no decision.

    :param row: one row of a landed file or an export.
    :param source: the file, for error messages.
    """
    record = {key: _as_api_value(value) for key, value in row.items()}
    _spec_typed(record)
    if "relationship" in record:
        record["relationship"] = _decode_json(record["relationship"], "relationship", source)
    extra = _decode_json(record.pop("extra_fields", None), "extra_fields", source)
    if isinstance(extra, dict):
        for key, value in extra.items():
            record.setdefault(key, value)
    return record


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Conversion records from what the package lands or exports (see the module docstring).

    :param path: a file or a folder of files.
    :raises StorageError: nothing readable there, a file that is not what its name says, or a
        row that is not a JSON object.
    """
    records: list[dict[str, Any]] = []
    for file in _record_files(Path(path)):
        rows = _read_parquet(file) if file.name.endswith(".parquet") else _read_json(file)
        try:
            for row in rows:
                if not isinstance(row, dict):
                    raise StorageError(f"{file}: a row is a {type(row).__name__}, not an object")
                records.append(as_record(row, file))
        except (ValueError, OSError) as err:  # bad JSON, not Parquet, not gzip, not UTF-8
            raise StorageError(f"{file}: cannot be read as {_kind(file)} ({err})") from None
    return records


def _kind(file: Path) -> str:
    return "Parquet" if file.name.endswith(".parquet") else "JSON rows"


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``affiliate-network-rules`` console script."""
    parser = argparse.ArgumentParser(
        prog="affiliate-network-rules", description="Check and try on-hold review rules files."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="validate rules files (exit 1 when invalid)")
    validate.add_argument("files", nargs="+", metavar="FILE")
    sub.add_parser("fields", help="list derived fields and aggregates")
    evaluate = sub.add_parser("evaluate", help="decide landed or exported conversion records")
    evaluate.add_argument("rules", metavar="FILE")
    evaluate.add_argument(
        "--records",
        required=True,
        help="a landed file or partition folder (.parquet, .jsonl.gz), or exported JSON rows",
    )
    evaluate.add_argument("--now", type=float, default=None, help="evaluation time (unix s)")
    evaluate.add_argument(
        "--decisions", metavar="OUT", help="write each record's rule and action as JSON Lines"
    )
    args = parser.parse_args(argv)
    if args.command == "validate":
        return _validate(args.files)
    if args.command == "fields":
        return _fields()
    return _evaluate(args.rules, args.records, args.now, args.decisions)


if __name__ == "__main__":
    sys.exit(main())
