"""Human-in-the-loop requests of the on-hold review: one per rule, and the answers' vocabulary."""

from __future__ import annotations

import heapq
from typing import Any

from affiliate_network.review.audit import read_jsonl

#: Options a reviewer picks from, per rule, in the Airflow UI ("Required actions").
OPTION_APPROVE = "Approve all"
OPTION_REJECT = "Reject all"
OPTION_KEEP = "Keep on hold"
REVIEW_OPTIONS = [OPTION_APPROVE, OPTION_REJECT, OPTION_KEEP]
#: Audit value for an answer that is not one of the options (or no person answered).
UNANSWERED = "no valid answer"
#: HITL form field: conversion ids (comma/space separated) to leave on hold whatever the choice.
KEEP_PARAM = "keep_on_hold"
#: Conversions listed in one request body (the choice applies to all of the rule's conversions).
BODY_ROWS = 50


def build_review_requests(summary: dict[str, Any], *, max_rows: int = BODY_ROWS) -> list[dict]:
    """One human-in-the-loop request per rule with ``review`` decisions in the run's audit.

    :param summary: the :class:`OnHoldReviewOperator` return value (counts + ``audit_path``).
    :param max_rows: conversions listed in each body (the choice covers all of the rule's).
    :return: ``[{"subject": ..., "body": ...}]`` ready for ``HITLOperator.partial().expand_kwargs``;
        empty when nothing waits for review or on a dry run.
    """
    if not summary or summary.get("dry_run") or not summary.get("review_pending"):
        return []
    rows = [r for r in read_jsonl(summary["audit_path"]) if r["action"] == "review"]
    by_rule: dict[str, list[dict]] = {}
    for row in rows:
        by_rule.setdefault(row["rule_id"], []).append(row)
    requests = []
    for rule_id, items in by_rule.items():
        description = items[0].get("rule_description") or ""
        payout = sum(float(r.get("payout") or 0) for r in items)
        lines = [
            f"**Rule `{rule_id}`** flagged **{len(items)}** on-hold conversions "
            f"(payout {payout:.2f}). {description}".strip(),
            "",
            f"Your choice applies to all {len(items)}. To leave some on hold, list their "
            f"conversion ids in `{KEEP_PARAM}`.",
            "",
            "| conversion | affiliate | offer | payout | sale | matched |",
            "|---|---|---|---|---|---|",
        ]
        shown = heapq.nlargest(max_rows, items, key=lambda r: float(r.get("payout") or 0))
        for r in shown:
            matched = ", ".join(f"{k}={v}" for k, v in (r.get("matched") or {}).items())
            lines.append(
                f"| `{r['conversion_id']}` | {r.get('affiliate_id')} | {r.get('offer_id')} | "
                f"{r.get('payout')} | {r.get('sale_amount')} | {matched} |"
            )
        if len(items) > max_rows:
            lines.append(f"\n… and {len(items) - max_rows} more (highest payout shown first).")
        lines.append(f"\nAudit file: `{summary['audit_path']}`")
        requests.append(
            {
                "subject": f"On-hold review: {len(items)} conversions flagged by rule {rule_id}",
                "body": "\n".join(lines),
            }
        )
    return requests


def rule_of_subject(subject: str) -> str:
    return subject.rsplit(" rule ", 1)[-1].strip()
