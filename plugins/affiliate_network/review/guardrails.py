"""The on-hold review's guardrails: ceilings checked on the run's whole plan before its first write.

The plan is what the rules decide over every conversion of the window that has been on hold
and is old enough, whatever its state now
(:func:`~affiliate_network.review.candidates.plan_positions`). Reading it, not only the part
still on hold, makes the verdict a function of the traffic: approvals that an attempt applied
before it died (approvals go first) leave "on hold" but not the plan, so the retry and the next
scheduled run reach the verdict of one clean run instead of a larger reject share.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import ConfigValidationError, GuardrailError

if TYPE_CHECKING:
    from affiliate_network.rules.engine import Evaluation


@dataclass(frozen=True)
class Guardrails:
    """Ceilings of one review run; ``None`` disables a ceiling.

    All three read the same decisions: the rules' decisions over the run's whole plan (see the
    module doc), conversions already approved or rejected included, so none of them moves when
    a crash leaves part of the plan applied.

    :param max_reject_share: rejections / decided conversions (those a rule matched) of the
        plan, 0..1.
    :param max_reject_count: rejections of the plan.
    :param max_approved_payout: payout of the plan's approvals.
    """

    max_reject_share: float | None = 0.5
    max_reject_count: int | None = 1000
    max_approved_payout: float | None = None

    def validate(self) -> None:
        """Reject ceilings that make no sense (before anything is pulled).

        :raises ConfigValidationError: naming the argument.
        """
        share, count = self.max_reject_share, self.max_reject_count
        if share is not None and not 0 <= share <= 1:
            raise ConfigValidationError(f"max_reject_share must be in [0, 1], got {share}")
        if count is not None and count < 0:
            raise ConfigValidationError(f"max_reject_count must be >= 0, got {count}")

    def check(self, evaluation: Evaluation, records: Sequence[dict[str, Any]]) -> None:
        """Raise when the plan's decisions cross a ceiling.

        The reject share is rejections / conversions a rule decided (matched), undecided ones
        left out: the stricter of the two readings (a smaller denominator, a larger share), so
        a rules change that rejects most of what it matches trips the guardrail even when many
        conversions match no rule.

        :param evaluation: the rules' decisions over the run's whole plan (not only the
            conversions still on hold).
        :param records: the records the decisions index into (their ``payout`` is summed).
        :raises GuardrailError: every crossed ceiling in one message, with the top rejecting
            rules.
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
            payout = sum(
                float(records[d.index].get("payout") or 0)
                for d in evaluation.decisions
                if d.action == "approve"
            )
            if payout > self.max_approved_payout:
                problems.append(
                    f"approved payout {payout:.2f} > max_approved_payout "
                    f"{self.max_approved_payout:.2f}"
                )
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


#: Rejected conversion ids a :class:`GuardrailError` carries (highest payout first).
SAMPLE_IDS = 10


def _at_stake(
    evaluation: Evaluation, records: Sequence[dict[str, Any]], rejects: Sequence[Any]
) -> dict[str, Any]:
    """What a tripped guardrail held back: counts, payouts, a sample of ids (for notifications)."""

    def payout(index: int) -> float:
        return float(records[index].get("payout") or 0)

    approved = [d for d in evaluation.decisions if d.action == "approve"]
    sample = sorted(rejects, key=lambda d: payout(d.index), reverse=True)[:SAMPLE_IDS]
    currencies = {
        str(records[d.index]["currency_id"])
        for d in (*rejects, *approved)
        if records[d.index].get("currency_id")
    }
    return {
        "rejections": len(rejects),
        "decided": len(evaluation.decisions),
        "rejected_payout": round(sum(payout(d.index) for d in rejects), 2),
        "approved_payout": round(sum(payout(d.index) for d in approved), 2),
        "currencies": sorted(currencies),
        "conversion_ids": [str(records[d.index].get("conversion_id")) for d in sample],
    }
