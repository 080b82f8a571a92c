"""Reviewers' choices, kept beside the audit so a "keep on hold" answer sticks.

``<base>/onhold_review/_state/<conn id>/human_decisions.jsonl``: one line per conversion a
person decided (who, when, which rule, the choice, and fingerprints of the data they saw). The
review reads it before writing anything: while a "keep on hold" is live (``keep_hours`` since
the answer; an id listed in ``keep_on_hold`` under "Approve all" or "Reject all" is a keep too)
and the conversion's own data is the same, **no rule decides it**: whatever the rules now say
(``review`` again, or ``approve``/``reject`` because the traffic around it moved), it stays on
hold and the audit names the keep that held it. Traffic aggregates such as a ratio to the
offer's median do not count as the conversion's data: they move with every new conversion, so
a keep never expires because other conversions arrived, nor does a new rule match end it. When
the conversion's own data changed (another payout or sale amount, another sub id: see
:func:`~affiliate_network.review.audit.data_fingerprint`), a person is asked again: an
``approve``, ``reject`` or ``review`` decision becomes ``review``. Approvals and rejections are
recorded too (for the audit trail); they need no stickiness, as the conversion leaves the
on-hold state.

The file is rewritten atomically (read, merge, temp file, rename) under the network's write
lease, so two runs never interleave their updates.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.review.audit import conn_dir_name

KEEP = "Keep on hold"


def state_dir(base: str, conn_id: str) -> ObjectStoragePath:
    """``<base>/onhold_review/_state/<conn id>/``: state the review keeps between runs."""
    return ObjectStoragePath(base) / "onhold_review" / "_state" / conn_dir_name(conn_id)


#: Derived fields that move with the evaluation time, not with the conversion's data.
CLOCK_FIELDS = frozenset({"age_seconds", "age_hours", "hold_age_hours"})


def own_values(matched: Mapping[str, Any]) -> dict[str, Any]:
    """The conversion's own values among those a rule tested: record fields and derived fields
    of the record, not aggregates over the traffic (labels ``kind(...)``, which move with every
    new conversion) nor ages (which move with the clock)."""
    return {k: v for k, v in matched.items() if "(" not in k and k not in CLOCK_FIELDS}


def fingerprint(row: Mapping[str, Any]) -> str:
    """What a reviewer's answer is about: the rule and the conversion's own data (the fields the
    rule tested, payout, sale amount). Never traffic aggregates: a "keep on hold" must not
    expire because other conversions arrived (``ratio_to_median`` moves with each of them)."""
    seen = {
        "rule_id": row.get("rule_id"),
        "fields": own_values(row.get("matched") or {}),
        "payout": _as_sent(row.get("payout")),
        "sale_amount": _as_sent(row.get("sale_amount")),
    }
    text = json.dumps(seen, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _as_sent(amount: object) -> object:
    """An exact amount as the JSON number the API sent (when a float holds it exactly): the
    form the stored answers' fingerprints were taken of, so they keep matching."""
    if not isinstance(amount, Decimal) or not amount.is_finite():
        return amount
    if amount.as_tuple().exponent >= 0:  # type: ignore[operator]  # finite: an int
        return int(amount)
    as_float = float(amount)
    return as_float if Decimal(repr(as_float)) == amount else str(amount)


class HumanDecisions:
    """The stored choices of one network, keyed by on-hold conversion id.

    :param folder: :func:`state_dir` of the network.
    """

    FILE = "human_decisions.jsonl"

    def __init__(self, folder: ObjectStoragePath) -> None:
        self.path = folder / self.FILE
        self.by_id: dict[str, dict[str, Any]] = {}

    def load(self) -> HumanDecisions:
        """Read the file (absent: nothing decided yet, which only means people get asked)."""
        try:
            with self.path.open("r", encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        rec = json.loads(line)
                        self.by_id[str(rec["on_hold_conversion_id"])] = rec
        except FileNotFoundError:
            pass
        return self

    def live_keep(
        self, row: Mapping[str, Any], *, now: float, keep_hours: float
    ) -> dict[str, Any] | None:
        """The stored "keep on hold" answer about this audit row's conversion given less than
        ``keep_hours`` ago, whatever its data now, else None.

        :param row: an audit row (its ``on_hold_conversion_id``).
        :param now: wall-clock time.
        :param keep_hours: how long a "keep on hold" answer covers a conversion.
        """
        rec = self.by_id.get(str(row.get("on_hold_conversion_id")))
        if not rec or rec.get("choice") != KEEP:
            return None
        if now - float(rec.get("decided_at") or 0) >= keep_hours * 3600:
            return None
        return rec

    @staticmethod
    def same_data(rec: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
        """Whether the conversion of ``row`` is the one the person saw (``rec``).

        Its :func:`~affiliate_network.review.audit.data_fingerprint` when both carry one. An
        answer stored before that existed has only the rule's :func:`fingerprint`: the same
        data when the same rule matched the same values; under another rule nothing tells, so
        the data counts as changed (a person is asked again, nothing is decided alone).

        :param rec: a stored answer.
        :param row: an audit row of this run.
        """
        stored, now_seen = rec.get("data_fingerprint"), row.get("data_fingerprint")
        if stored and now_seen:
            return bool(stored == now_seen)
        return bool(rec.get("fingerprint") == fingerprint(row))

    def kept(
        self, row: Mapping[str, Any], *, now: float, keep_hours: float
    ) -> dict[str, Any] | None:
        """The stored "keep on hold" answer that still covers this audit row (live, same data),
        else None."""
        rec = self.live_keep(row, now=now, keep_hours=keep_hours)
        return rec if rec is not None and self.same_data(rec, row) else None

    def record(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Merge decisions (each with on_hold_conversion_id, choice, responded_by, decided_at,
        rule_id, conversion_id and the row's data) and rewrite the file atomically."""
        import uuid

        count = 0
        for row in rows:
            oh_id = str(row["on_hold_conversion_id"])
            self.by_id[oh_id] = {
                "on_hold_conversion_id": oh_id,
                "conversion_id": row.get("conversion_id"),
                "rule_id": row.get("rule_id"),
                "choice": row.get("choice"),
                "responded_by": row.get("responded_by"),
                "decided_at": row.get("decided_at"),
                "run_id": row.get("run_id"),
                "fingerprint": fingerprint(row),
                "data_fingerprint": row.get("data_fingerprint"),
            }
            count += 1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.parent / f".{self.FILE}.{uuid.uuid4().hex}.tmp"
        with tmp.open("w", encoding="utf-8") as handle:
            for rec in self.by_id.values():
                handle.write(json.dumps(rec, sort_keys=True, default=str) + "\n")
        tmp.rename(self.path)
        return count


def apply_sticky_keeps(
    rows: Iterable[dict[str, Any]], folder: ObjectStoragePath, *, now: float, keep_hours: float
) -> int:
    """Hold every conversion a person kept on hold less than ``keep_hours`` ago, whatever the
    rules now decide; ask again about one whose own data changed since.

    A row with a live keep and the same data becomes ``hold`` (an ``approve`` or ``reject``
    too: the traffic around it moved, the conversion did not), with ``kept_by`` (who, when,
    the run, the rule they answered, until when) and ``rule_action`` (what the rules said). A
    row with a live keep whose data changed becomes ``review`` (unless the rules hold it),
    with ``review_reason`` naming the keep. Rows without a live keep are left as they are.

    :param rows: the run's audit rows (changed in place: ``action`` and the fields above).
    :param folder: :func:`state_dir` of the network.
    :param now: wall-clock time (how long ago a person answered; ``as_of`` only moves the
        traffic view).
    :param keep_hours: how long a "keep on hold" answer covers a conversion.
    :return: how many rows a keep turned (or left) ``hold``.
    """
    store = HumanDecisions(folder).load()
    kept = 0
    for row in rows:
        rec = store.live_keep(row, now=now, keep_hours=keep_hours)
        if rec is None:
            continue
        until = dt.datetime.fromtimestamp(float(rec["decided_at"]) + keep_hours * 3600, dt.UTC)
        who = rec.get("responded_by") or "a reviewer"
        keep = (
            f"kept on hold by {who} (run {rec.get('run_id')}, rule {rec.get('rule_id')}) until "
            f"{until:%Y-%m-%d %H:%M} UTC"
        )
        action = row["action"]
        if not store.same_data(rec, row):
            if action in ("approve", "reject", "review"):
                row["action"] = "review"
                row["rule_action"] = row.get("rule_action") or action
                row["review_reason"] = (
                    f"{keep}, but its own data changed since (rule {row.get('rule_id')} says "
                    f"{action}): waiting for a human decision"
                )
            continue
        row["action"] = "hold"
        row["rule_action"] = row.get("rule_action") or action
        row["kept_by"] = {
            "responded_by": rec.get("responded_by"),
            "decided_at": rec.get("decided_at"),
            "run_id": rec.get("run_id"),
            "rule_id": rec.get("rule_id"),
            "until": f"{until:%Y-%m-%dT%H:%M:%S}Z",
        }
        row["hold_reason"] = (
            f"{keep}; rule {row.get('rule_id')} says {action}, not applied: not decided nor "
            "asked again before then unless its data changes"
        )
        kept += 1
    return kept
