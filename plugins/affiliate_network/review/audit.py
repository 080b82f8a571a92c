"""The on-hold review's audit: one row per decision, JSON Lines per attempt, written atomically.

Layout under the data base: ``onhold_review/<dag id>/<run id>/`` per run (:func:`audit_dir`),
``onhold_review/_state/<conn id>/`` and ``onhold_review/_leases/<conn id>.json`` per network
(their folder names from :func:`conn_dir_name`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.helpers.run_records import safe_name
from affiliate_network.review.money import amount_of
from affiliate_network.rules.fields import on_hold_conversion_id

if TYPE_CHECKING:
    from affiliate_network.rules.engine import Evaluation, RuleSet

#: Fields copied from a conversion into the audit so a reviewer sees what was decided.
AUDIT_FIELDS = ("payout", "sale_amount", "conversion_unix_timestamp")
#: The amounts among them: exact (``Decimal``) in memory, decimal text in the file, in the
#: row's ``currency_id`` (:mod:`affiliate_network.review.money`).
MONEY_FIELDS = ("payout", "sale_amount")


def conn_dir_name(conn_id: str) -> str:
    """A connection id as a file or folder name (state and lease of that network)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in conn_id) or "conn"


def audit_dir(base: str, dag_id: str, run_id: str) -> ObjectStoragePath:
    """``<base>/onhold_review/<dag_id>/<run_id>/`` (the run id made path-safe)."""
    return ObjectStoragePath(base) / "onhold_review" / safe_name(dag_id) / safe_name(run_id)


def write_jsonl_atomic(path: ObjectStoragePath, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows as JSON Lines to a temporary sibling, then rename it onto ``path``.

    A reader never sees a half-written file: either the previous version or the new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True, default=str) + "\n")
            count += 1
    tmp.rename(path)
    return count


def read_jsonl(path: str | ObjectStoragePath) -> list[dict[str, Any]]:
    """Rows of a JSON Lines audit file; their :data:`MONEY_FIELDS` as ``Decimal``.

    Amounts are written as decimal text (``"12.5"``); a file written before that holds JSON
    numbers, read back by their shortest text as well.
    """
    target = path if isinstance(path, ObjectStoragePath) else ObjectStoragePath(path)
    with target.open("r", encoding="utf-8") as handle:
        return [_exact_money(json.loads(line)) for line in handle if line.strip()]


def _exact_money(row: dict[str, Any]) -> dict[str, Any]:
    for key in MONEY_FIELDS:
        if key in row:
            what = f"conversion {row.get('conversion_id')}: {key}"
            row[key] = amount_of(row[key], what=what)
    return row


#: ``relationship`` members that are not the conversion's data: the on-hold history moves with
#: each status write (a person's, a run's), not with what the conversion is.
_NOT_OWN_MEMBERS = frozenset({"on_hold_snapshots"})


def _canonical(value: object) -> object:
    """A JSON-ready form that is the same however the value was read: numbers as their exact
    decimal text (``12.5``, ``Decimal("12.50")`` and ``12.500`` alike; a float by its shortest
    text), mappings with sorted keys, lists in order."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float | int | Decimal):
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        if not exact.is_finite():
            return str(exact)
        return format(exact.normalize(), "f") if exact else "0"
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return str(value)


def data_fingerprint(record: Mapping[str, Any]) -> str:
    """What a conversion *is*, whatever the rules make of it: every field of the pulled record
    (amounts, IPs, sub ids, timestamps, its affiliate and offer) except its on-hold history.

    Unlike :func:`~affiliate_network.review.human_decisions.fingerprint` it names no rule and no
    tested value, so it is the same when another rule matches the same conversion because the
    traffic around it moved (an offer's median, a count per IP), and another one when the
    conversion itself changed (a corrected sale amount or payout, another sub id). The fields
    are those the review pulls (the rules' and the audit's): a rules file that reads other
    fields gives other fingerprints.

    :param record: the conversion as pulled
        (:func:`~affiliate_network.review.traffic.pull_review_traffic`).
    :return: 16 hex digits.
    """
    own: dict[str, Any] = {k: v for k, v in record.items() if k != "relationship"}
    rel = record.get("relationship")
    if isinstance(rel, Mapping):
        own["relationship"] = {k: v for k, v in rel.items() if k not in _NOT_OWN_MEMBERS}
    text = json.dumps(_canonical(own), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def audit_rows(
    records: Sequence[dict[str, Any]], evaluation: Evaluation, ruleset: RuleSet
) -> list[dict[str, Any]]:
    """One audit row per decision: ids, rule, action, the values it tested, who and what.

    :param records: the records the decisions index into.
    :param evaluation: the run's decisions.
    :param ruleset: the rules (for their descriptions).
    """
    descriptions = {rule.id: rule.description for rule in ruleset.rules}
    rows = []
    for decision in evaluation.decisions:
        record = records[decision.index]
        rel = record.get("relationship") or {}
        affiliate = rel.get("affiliate") or {}
        offer = rel.get("offer") or {}
        row = {
            "conversion_id": record.get("conversion_id"),
            "on_hold_conversion_id": on_hold_conversion_id(record),
            "rule_id": decision.rule_id,
            "rule_description": descriptions.get(decision.rule_id, ""),
            "action": decision.action,
            "matched": decision.matched,
            "affiliate_id": affiliate.get("network_affiliate_id"),
            "affiliate_name": affiliate.get("name"),
            "offer_id": offer.get("network_offer_id"),
            "offer_name": offer.get("name"),
            "currency_id": record.get("currency_id"),
            # What a reviewer's "Keep on hold" is about (human_decisions): not the rule's view.
            "data_fingerprint": data_fingerprint(record),
        }
        for key in AUDIT_FIELDS:
            row[key] = record.get(key)
        _exact_money(row)
        rows.append(row)
    return rows


def finish_rows(
    rows: Iterable[dict[str, Any]], outcomes: dict[str, tuple[bool, str]], default_reason: str
) -> None:
    """Set ``applied`` and ``reason`` of every row.

    :param outcomes: on-hold id -> (applied, why), from the writes' read-back.
    :param default_reason: for approvals and rejections without an outcome (dry run, not sent).
    """
    for row in rows:
        action = row["action"]
        if action == "review":
            row["applied"] = False
            row["reason"] = row.get("review_reason") or "waiting for a human decision"
        elif action == "hold":
            row["applied"] = False
            row["reason"] = row.get("hold_reason") or "rule says keep on hold"
        elif row["on_hold_conversion_id"] in outcomes:
            row["applied"], row["reason"] = outcomes[row["on_hold_conversion_id"]]
        else:
            row["applied"], row["reason"] = False, default_reason
