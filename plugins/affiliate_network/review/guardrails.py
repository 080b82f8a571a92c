"""The on-hold review's guardrails: ceilings checked on the run's whole plan before its first write.

The plan is what the rules decide over every conversion of the window that has been on hold
and is old enough, whatever its state now
(:func:`~affiliate_network.review.candidates.plan_positions`). Reading it, not only the part
still on hold, makes the verdict a function of the traffic: approvals that an attempt applied
before it died (approvals go first) leave "on hold" but not the plan, so the retry and the next
scheduled run reach the verdict of one clean run instead of a larger reject share.

Money is exact (``Decimal``) and kept per currency: the payout ceiling is a ceiling per
currency (:mod:`affiliate_network.review.money`), never a sum of several currencies' payouts.
It is held against what the approvals pay out: the sum of their payouts that are not negative.
A negative payout (a reversal, an adjustment, a charge-back) never nets against it, and is
never approved by a rule: :func:`send_negative_payouts_to_review` makes such an approval a
question for a person.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import GuardrailError
from affiliate_network.review.money import (
    amount_of,
    currency_of,
    highest_first,
    money_text,
    paid_out_by_currency,
    payout_ceilings,
    totals_by_currency,
    totals_text,
)
from affiliate_network.review.numbers import check_number

if TYPE_CHECKING:
    from affiliate_network.rules.engine import Decision, Evaluation


@dataclass(frozen=True)
class Guardrails:
    """Ceilings of one review run; ``None`` disables a ceiling. Checked when built.

    All three read the same decisions: the rules' decisions over the run's whole plan (see the
    module doc), conversions already approved or rejected included, so none of them moves when
    a crash leaves part of the plan applied.

    :param max_reject_share: rejections / decided conversions (those a rule matched) of the
        plan, 0..1.
    :param max_reject_count: rejections of the plan, a whole number >= 0.
    :param max_approved_payout: ceilings per currency of the payout of the plan's approvals
        (``{"USD": Decimal(2000)}``; the text form ``"USD=2000,EUR=1800"`` is read too:
        :func:`~affiliate_network.review.money.payout_ceilings`). Payouts of different
        currencies are never added: each currency's approvals are held to its own ceiling,
        and once any ceiling is set, approvals in a currency without one stop the run. The
        total held to a ceiling is the sum of the approvals' payouts that are not negative
        (:func:`~affiliate_network.review.money.paid_out_by_currency`): a negative payout never
        nets against it.
    :raises ConfigValidationError: a ceiling that is not a finite number in its range (``nan``
        would switch its check off), or a payout ceiling without a currency.
    """

    max_reject_share: float | None = 0.5
    max_reject_count: int | None = 1000
    max_approved_payout: Mapping[str, Decimal] | None = None

    def __post_init__(self) -> None:
        self.validate()
        # Stored checked: currency codes in upper case, amounts as Decimal.
        ceilings = payout_ceilings(self.max_approved_payout, "max_approved_payout")
        object.__setattr__(self, "max_approved_payout", ceilings)
        if self.max_reject_count is not None:
            object.__setattr__(self, "max_reject_count", int(self.max_reject_count))

    def validate(self) -> None:
        """Reject ceilings that make no sense (before anything is pulled).

        :raises ConfigValidationError: naming the argument.
        """
        if self.max_reject_share is not None:
            check_number(self.max_reject_share, "max_reject_share", low=0, high=1)
        if self.max_reject_count is not None:
            check_number(self.max_reject_count, "max_reject_count", low=0, whole=True)
        payout_ceilings(self.max_approved_payout, "max_approved_payout")

    def check(self, evaluation: Evaluation, records: Sequence[dict[str, Any]]) -> None:
        """Raise when the plan's decisions cross a ceiling.

        The reject share is rejections / conversions a rule decided (matched), undecided ones
        left out: the stricter of the two readings (a smaller denominator, a larger share), so
        a rules change that rejects most of what it matches trips the guardrail even when many
        conversions match no rule.

        :param evaluation: the rules' decisions over the run's whole plan (not only the
            conversions still on hold).
        :param records: the records the decisions index into (their ``payout`` and
            ``currency_id`` are read).
        :raises GuardrailError: every crossed ceiling in one message, with the top rejecting
            rules.
        :raises SchemaMismatchError: a payout of the plan's approvals that is not a number.
        """
        rejects = [d for d in evaluation.decisions if d.action == "reject"]
        decided = len(evaluation.decisions)
        problems = []
        if self.max_reject_count is not None and len(rejects) > self.max_reject_count:
            problems.append(f"{len(rejects)} rejections > max_reject_count {self.max_reject_count}")
        share = len(rejects) / decided if decided else 0.0
        if self.max_reject_share is not None and share > self.max_reject_share:
            problems.append(
                f"reject share {share:.1%} ({len(rejects)}/{decided} decided) > max_reject_share "
                f"{self.max_reject_share:.1%}"
            )
        if self.max_approved_payout is not None:
            problems += self._payout_problems(evaluation, records, self.max_approved_payout)
        if problems:
            top = Counter(d.rule_id for d in rejects).most_common(5)
            top_text = ", ".join(f"{rule} ({n})" for rule, n in top) or "none"
            raise GuardrailError(
                "On-hold review stopped before any write: "
                + "; ".join(problems)
                + f". Top rejecting rules: {top_text}. Check those rules (or the traffic), then "
                "rerun; raise the ceiling only if the volume is expected.",
                **_at_stake(evaluation, records, rejects),
                top_rules=top,
            )

    @staticmethod
    def _payout_problems(
        evaluation: Evaluation,
        records: Sequence[dict[str, Any]],
        ceilings: Mapping[str, Decimal],
    ) -> list[str]:
        """Each currency's approved payout (the approvals' payouts that are not negative: a
        reversal never nets against the others) against its own ceiling; a currency without
        one is a problem whatever its total (it cannot be compared with another currency's)."""
        approved = (records[d.index] for d in evaluation.decisions if d.action == "approve")
        problems = []
        for currency, total in paid_out_by_currency(approved, "payout").items():
            ceiling = ceilings.get(currency)
            if ceiling is None:
                problems.append(
                    f"approved payout {money_text(total, currency)} has no ceiling in "
                    f"max_approved_payout (ceilings: {totals_text(ceilings)}); payouts of "
                    "different currencies are never added, so a currency without a ceiling "
                    "stops the run"
                )
            elif total > ceiling:
                problems.append(
                    f"approved payout {money_text(total, currency)} > max_approved_payout "
                    f"{money_text(ceiling, currency)}"
                )
        return problems


#: Rejected conversion ids a :class:`GuardrailError` carries (highest payout first, per
#: currency: :func:`~affiliate_network.review.money.highest_first`).
SAMPLE_IDS = 10


def _at_stake(
    evaluation: Evaluation, records: Sequence[dict[str, Any]], rejects: Sequence[Decision]
) -> dict[str, Any]:
    """What a tripped guardrail held back: counts, payouts per currency, a sample of ids (for
    notifications)."""
    approved = [d for d in evaluation.decisions if d.action == "approve"]
    rejected_payout = totals_by_currency((records[d.index] for d in rejects), "payout")
    approved_payout = paid_out_by_currency((records[d.index] for d in approved), "payout")
    return {
        "rejections": len(rejects),
        "decided": len(evaluation.decisions),
        "rejected_payout": rejected_payout,
        "approved_payout": approved_payout,
        "currencies": sorted({*rejected_payout, *approved_payout}),
        "conversion_ids": [
            str(r.get("conversion_id"))
            for r in highest_first(records[d.index] for d in rejects)[:SAMPLE_IDS]
        ],
    }


def send_negative_payouts_to_review(rows: Sequence[dict[str, Any]]) -> int:
    """Make every ``approve`` of a conversion with a negative payout a ``review``: a person
    decides it.

    A negative payout on hold is a reversal, an adjustment or a charge-back: approving it takes
    money back from an affiliate, and nothing in a rule's conditions (built for sales) says
    whether that is right; a payout ceiling cannot judge it either (it holds what is paid out).
    A rejection is left to the rules (it moves no money). The row keeps its rule; its
    ``rule_action`` says the rules approved it, its ``review_reason`` why a person is asked.

    :param rows: the run's audit rows (changed in place).
    :return: how many approvals became reviews.
    :raises SchemaMismatchError: a payout that is not a finite number.
    """
    sent = 0
    for row in rows:
        if row["action"] != "approve":
            continue
        what = f"conversion {row.get('conversion_id')}: payout"
        payout = amount_of(row.get("payout"), what=what)
        if payout is None or payout >= 0:
            continue
        row["action"] = "review"
        row["rule_action"] = "approve"
        row["review_reason"] = (
            f"negative payout {money_text(payout, currency_of(row))} (a reversal, adjustment or "
            f"charge-back): rule {row.get('rule_id')} approves it, a person decides"
        )
        sent += 1
    return sent
