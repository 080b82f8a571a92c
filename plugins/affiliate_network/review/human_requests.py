"""Human-in-the-loop requests of the on-hold review: one per rule, and the answers' vocabulary."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

#: Options a reviewer picks from, per rule, in the Airflow UI ("Required actions").
OPTION_APPROVE = "Approve all"
OPTION_REJECT = "Reject all"
OPTION_KEEP = "Keep on hold"
REVIEW_OPTIONS = [OPTION_APPROVE, OPTION_REJECT, OPTION_KEEP]
#: Audit value for an answer that is not one of the options (or no person answered).
UNANSWERED = "no valid answer"
#: HITL form field: conversion ids (comma/space separated) to leave on hold whatever the choice;
#: matched without regard to case, and an on-hold id names its conversion. An id that matches
#: none of the request's conversions stops that request (nothing of it is written).
KEEP_PARAM = "keep_on_hold"
#: Conversions listed in one request body (the choice applies to all of the rule's conversions).
BODY_ROWS = 50
#: Between the rule id and the count in a subject; never part of a rule id.
_SUBJECT_SEP = ": "
_OLD_SUBJECT_PREFIX = "On-hold review: "


def build_review_requests(
    summary: dict[str, Any], *, max_rows: int = BODY_ROWS
) -> list[dict[str, Any]]:
    """One human-in-the-loop request per rule with ``review`` decisions in the run's audit.

    :param summary: the :class:`OnHoldReviewOperator` return value (counts + ``audit_path``).
    :param max_rows: conversions listed in each body (the choice covers all of the rule's).
    :return: ``[{"subject": ..., "body": ...}]`` ready for ``HITLOperator.partial().expand_kwargs``;
        empty when nothing waits for review or on a dry run.
    """
    if not summary or summary.get("dry_run") or not summary.get("review_pending"):
        return []
    # Here, not at the top: the DAG file takes the options' vocabulary from this module at
    # parse time; the audit (object storage, record fields) and the money are execution work.
    from affiliate_network.review.audit import read_jsonl
    from affiliate_network.review.money import highest_first, totals_by_currency, totals_text

    rows = [r for r in read_jsonl(summary["audit_path"]) if r["action"] == "review"]
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_rule.setdefault(row["rule_id"], []).append(row)
    requests = []
    for rule_id, items in by_rule.items():
        description = items[0].get("rule_description") or ""
        # Money at stake per currency: amounts of different currencies are never added.
        total = totals_text(totals_by_currency(items, "payout"))
        lines = [
            f"**Rule `{rule_id}`** flagged **{len(items)}** on-hold conversions "
            f"(payout {total}). {description}".strip(),
            "",
            f"Your choice applies to all {len(items)}. To leave some on hold, list their "
            f"conversion ids (or on-hold ids) in `{KEEP_PARAM}`; an id that matches none of "
            "them stops this request: nothing of it is written, it is asked again next run.",
            "",
            "| conversion | affiliate | offer | payout | sale | matched |",
            "|---|---|---|---|---|---|",
        ]
        shown = highest_first(items)[:max_rows]
        for r in shown:
            matched = ", ".join(f"{k}={_number(v)}" for k, v in (r.get("matched") or {}).items())
            affiliate = _named(r.get("affiliate_name"), r.get("affiliate_id"))
            offer = _named(r.get("offer_name"), r.get("offer_id"))
            lines.append(
                f"| `{r['conversion_id']}` | {affiliate} | {offer} | "
                f"{_money(r.get('payout'), r.get('currency_id'))} | "
                f"{_money(r.get('sale_amount'), r.get('currency_id'))} | {matched} |"
            )
        if len(items) > max_rows:
            lines.append(
                f"\n… and {len(items) - max_rows} more (highest payout shown first, per currency)."
            )
        lines.append(f"\nAudit file: `{summary['audit_path']}`")
        requests.append({"subject": review_subject(rule_id, len(items)), "body": "\n".join(lines)})
    return requests


def review_subject(rule_id: str, count: int) -> str:
    """``<rule id>: N conversion(s) to review``: short, the rule first.

    Airflow's "Required Actions" list cuts a subject after two lines; the rule id leads so it
    is never what is cut. Rule ids hold no ``:`` (letters, digits, ``_ . -``): it parses back.

    :param rule_id: the rule that flagged the conversions.
    :param count: how many it flagged.
    """
    return f"{rule_id}{_SUBJECT_SEP}{count} conversion{'' if count == 1 else 's'} to review"


def rule_of_subject(subject: str) -> str:
    """The rule id a request's subject names (see :func:`review_subject`).

    :param subject: the subject of a request this module built, new or older form.
    """
    # Older form, "On-hold review: N conversions flagged by rule <id>": a request still waiting
    # from before an upgrade is answered after it.
    if subject.startswith(_OLD_SUBJECT_PREFIX) and " rule " in subject:
        return subject.rsplit(" rule ", 1)[-1].strip()
    return subject.split(_SUBJECT_SEP, 1)[0].strip()


def _cell(text: str) -> str:
    """Markdown-table-safe text (a name may hold ``|`` or a line break)."""
    return text.replace("|", "\\|").replace("\n", " ")


def _named(name: object, ident: object) -> str:
    """``Name (id)``; the id alone when the record carries no name."""
    return f"{_cell(str(name))} ({ident})" if name else str(ident)


def _money(amount: object, currency: object) -> str:
    """An exact amount with the record's currency (raw reports are in the offer's currency)."""
    from affiliate_network.review.money import money_text  # see build_review_requests

    if isinstance(amount, Decimal) and amount.is_finite():
        return money_text(amount, str(currency) if currency else None)
    return "" if amount is None else _cell(str(amount))


def _number(value: object) -> str:
    """Matched values: floats to 2 decimals (a ratio of 70.58001095290253 is 70.58, a sale
    amount of 12996.41 is 12,996.41, never ``1.3e+04``); below 0.01, 2 significant digits."""
    if isinstance(value, float):
        return f"{value:,.2f}" if value == 0 or abs(value) >= 0.01 else f"{value:.2g}"
    return _cell(str(value))
