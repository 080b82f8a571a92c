"""Apply reviewers' answers to the review's ``review`` decisions, callable with a plain hook.

Only the exact options write: "Approve all" approves, "Reject all" rejects. "Keep on hold"
keeps, and is remembered (:mod:`affiliate_network.review.human_decisions`). Any other answer
(a renamed option, an empty or missing answer, a timeout without a person) keeps the
conversions on hold and is asked again next run. Writes hold the network's write lease and go
through :class:`~affiliate_network.review.apply.OnHoldWriter`, so a rerun never writes twice.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import AffiliateNetworkError
from affiliate_network.review.apply import (
    APPROVED,
    ApplyOutcome,
    apply_under_lease,
    check_reject_status,
    outcome_reasons,
)
from affiliate_network.review.audit import read_jsonl, write_jsonl_atomic
from affiliate_network.review.requests import (
    KEEP_PARAM,
    OPTION_APPROVE,
    OPTION_KEEP,
    REVIEW_OPTIONS,
    UNANSWERED,
    rule_of_subject,
)
from affiliate_network.tasklog import TaskLog

if TYPE_CHECKING:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.identity import RunIdentity

_LOG = logging.getLogger(__name__)

#: On-hold id -> (choice, who answered).
Decided = dict[str, tuple[str, str]]


@dataclass
class HumanApplyResult:
    """What :func:`apply_human_choices` did.

    :param requests: requests answered (or not) in this run.
    :param applied: status -> ids confirmed by the read-back.
    :param kept_on_hold: conversions kept on hold by a person's choice.
    :param unanswered: conversions without a valid answer (kept on hold, asked again).
    :param readback_mismatches: ids whose read-back shows another state.
    :param audit_path: ``human-attempt-N.jsonl`` beside the review's audit file.
    :param accepted_not_landed: ids accepted by the API but not visible within the read-back
        wait (a late or lost write: the conversion is still on hold, so the next review decides
        it again).
    """

    requests: int
    applied: dict[str, int]
    kept_on_hold: int
    unanswered: int
    readback_mismatches: int
    audit_path: ObjectStoragePath
    accepted_not_landed: int = 0

    @classmethod
    def of(
        cls,
        requests: int,
        per_status: dict[str, ApplyOutcome],
        decided: Decided,
        audit_path: ObjectStoragePath,
    ) -> HumanApplyResult:
        """Counts from the writes' outcomes and the choices."""
        choices = [c for c, _ in decided.values()]
        return cls(
            requests=requests,
            applied={s: len(o.applied) for s, o in per_status.items()},
            kept_on_hold=choices.count(OPTION_KEEP),
            unanswered=choices.count(UNANSWERED),
            readback_mismatches=sum(len(o.mismatches) for o in per_status.values()),
            audit_path=audit_path,
            accepted_not_landed=sum(len(o.not_landed) for o in per_status.values()),
        )


def plan_choices(
    requests: Sequence[Mapping[str, Any]],
    responses: Sequence[Any],
    rows: Sequence[Mapping[str, Any]],
    reject_status: str,
    log: TaskLog | None = None,
) -> tuple[dict[str, list[str]], Decided]:
    """Status -> on-hold ids to send, and on-hold id -> (choice, responder).

    :param requests: the requests shown (subjects name their rule), in map-index order.
    :param responses: the answers in the same order (``chosen_options``, ``params_input``,
        ``responded_by_user``); anything else counts as no valid answer.
    :param rows: the review's ``review`` audit rows.
    :param reject_status: PATCH status for "Reject all".
    :param log: logger (default: this module's).
    """
    log = log or _LOG
    plan: dict[str, list[str]] = {APPROVED: [], reject_status: []}
    decided: Decided = {}
    for request, response in zip(requests, responses, strict=True):
        rule_id = rule_of_subject(request["subject"])
        response = response if isinstance(response, dict) else {}
        chosen = response.get("chosen_options") or []
        params = response.get("params_input") or {}
        keep = set(re.split(r"[\s,;]+", str(params.get(KEEP_PARAM) or "").strip())) - {""}
        who = response.get("responded_by_user")
        who_name = (who.get("name") or who.get("id")) if isinstance(who, dict) else who
        choice = chosen[0] if len(chosen) == 1 and isinstance(chosen[0], str) else None
        if choice not in REVIEW_OPTIONS:
            # Only the exact options write; anything else changes nothing and is asked again.
            log.warning(
                "Rule %s: unexpected answer %r from %s: nothing written, the conversions "
                "stay on hold and are asked about again next run (options: %s)",
                rule_id,
                chosen,
                who_name or "nobody",
                REVIEW_OPTIONS,
            )
            choice = UNANSWERED
        log.info("Rule %s: %s chose %r (keep on hold: %d)", rule_id, who_name, choice, len(keep))
        for row in rows:
            if row["rule_id"] != rule_id:
                continue
            oh_id = row["on_hold_conversion_id"]
            if choice in (OPTION_KEEP, UNANSWERED) or row["conversion_id"] in keep:
                decided[oh_id] = (
                    UNANSWERED if choice == UNANSWERED else OPTION_KEEP,
                    str(who_name or ""),
                )
                continue
            status = APPROVED if choice == OPTION_APPROVE else reject_status
            plan[status].append(oh_id)
            decided[oh_id] = (choice, str(who_name or ""))
    return plan, decided


def apply_human_choices(
    hook: AffiliateNetworkHook,
    identity: RunIdentity,
    requests: Sequence[Mapping[str, Any]],
    responses: Sequence[Any],
    *,
    attempt: int = 1,
    reject_status: str,
    chunk_size: int,
    lease_wait_minutes: float = 35.0,
    log: TaskLog | None = None,
) -> HumanApplyResult:
    """Apply the answers to the review run ``identity`` names (its audit file, window, write
    lease and state folder: :meth:`RunIdentity.from_summary` reads it from the review's
    summary).

    :param hook: the network hook.
    :param identity: the review run.
    :param requests: the requests shown to reviewers, in map-index order.
    :param responses: their answers, in the same order.
    :param attempt: the audit file of this attempt (``human-attempt-N.jsonl``).
    :param reject_status: PATCH status for rejections.
    :param chunk_size: on-hold ids per PATCH.
    :param lease_wait_minutes: how long to wait for another run's write lease.
    :param log: logger (default: this module's).
    :raises AffiliateNetworkError: not one response per request.
    """
    log = log or _LOG
    check_reject_status(reject_status)
    if len(responses) != len(requests):
        raise AffiliateNetworkError(
            f"{len(requests)} review requests but {len(responses)} responses"
        )
    rows = [r for r in read_jsonl(identity.audit_path) if r["action"] == "review"]
    plan, decided = plan_choices(requests, responses, rows, reject_status, log)
    human_rows: list[dict[str, Any]] = []

    def remember(outcomes: dict[str, ApplyOutcome]) -> None:
        # Under the lease: two steps answering for one network do not interleave their writes.
        reasons = outcome_reasons(outcomes)
        human_rows.extend(_human_rows(rows, decided, reasons, identity.run.run_id))
        _remember(identity.state_dir, human_rows)

    per_status = apply_under_lease(
        hook,
        plan,
        identity=identity,
        chunk_size=chunk_size,
        lease_wait_s=lease_wait_minutes * 60,
        log=log,
        while_held=remember,
    )
    audit_path = identity.audit_path.parent / f"human-attempt-{attempt}.jsonl"
    write_jsonl_atomic(audit_path, human_rows)
    return HumanApplyResult.of(len(requests), per_status, decided, audit_path)


def _human_rows(
    rows: Sequence[Mapping[str, Any]],
    decided: Decided,
    outcomes: dict[str, tuple[bool, str]],
    run_id: str,
) -> list[dict[str, Any]]:
    """The review rows a person answered, with the choice, who, when and the outcome."""
    now = time.time()
    human_rows = []
    for row in rows:
        oh_id = row["on_hold_conversion_id"]
        if oh_id not in decided:
            continue
        choice, who_name = decided[oh_id]
        default = "kept on hold by reviewer" if choice == OPTION_KEEP else (
            "no valid answer: kept on hold, asked again next run"
        )  # fmt: skip
        ok, why = outcomes.get(oh_id, (False, default))
        human_rows.append(
            {
                **row,
                "human_choice": choice,
                "responded_by": who_name,
                "decided_at": now,
                "run_id": run_id,
                "applied": ok,
                "reason": why,
            }
        )
    return human_rows


def _remember(state: ObjectStoragePath, human_rows: Sequence[Mapping[str, Any]]) -> None:
    """Store the answers (under the lease): a conversion a person kept on hold is not asked
    again soon. A timeout (defaults, no person) is not a decision to remember."""
    from affiliate_network.review.human_decisions import HumanDecisions

    answered = [
        {**r, "choice": r["human_choice"]}
        for r in human_rows
        if r["human_choice"] != UNANSWERED
        and (r["responded_by"] or r["human_choice"] != OPTION_KEEP)
    ]
    if answered:
        HumanDecisions(state).load().record(answered)
