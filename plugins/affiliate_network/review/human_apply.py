"""Apply reviewers' answers to the review's ``review`` decisions, callable with a plain hook.

Only the exact options write: "Approve all" approves, "Reject all" rejects. "Keep on hold"
keeps, and is remembered (:mod:`affiliate_network.review.human_decisions`). Any other answer
(a renamed option, an empty or missing answer, a timeout without a person) keeps the
conversions on hold and is asked again next run. Writes hold the network's write lease and go
through :class:`~affiliate_network.review.apply.OnHoldWriter`, so a rerun never writes twice.

The ``keep_on_hold`` ids a reviewer lists are matched without regard to case, against the
request's conversion ids and on-hold ids (either names the conversion). An id that matches
none of them means the answer is not what the reviewer meant (a typo, an id of another
request): nothing of that request is written, its conversions stay on hold and are asked about
again, and the step fails naming the ids once the other requests are applied. So nothing a
person tried to hold is ever approved or rejected.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import AffiliateNetworkError, ReviewAnswerError
from affiliate_network.helpers.tasklog import TaskLog
from affiliate_network.review.apply import ApplyOutcome, apply_under_lease, outcome_reasons
from affiliate_network.review.audit import read_jsonl, write_jsonl_atomic
from affiliate_network.review.human_requests import (
    KEEP_PARAM,
    OPTION_APPROVE,
    OPTION_KEEP,
    OPTION_REJECT,
    REVIEW_OPTIONS,
    UNANSWERED,
    rule_of_subject,
)
from affiliate_network.review.options import APPROVED, check_reject_status

if TYPE_CHECKING:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.identity import RunIdentity

_LOG = logging.getLogger(__name__)

#: On-hold id -> (choice, who answered).
Decided = dict[str, tuple[str, str]]
#: Audit value of the conversions of a request whose ``keep_on_hold`` names an id matching none
#: of them: nothing of that request is written.
STOPPED = "stopped: unmatched keep_on_hold ids"
#: Between the ids of a ``keep_on_hold`` answer (quotes and backticks of a copied id too).
_KEEP_SEPARATORS = re.compile(r"[\s,;`'\"]+")


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
    :param stopped: rule id -> the ``keep_on_hold`` ids of its request that matched none of its
        conversions (nothing of those requests was written).
    """

    requests: int
    applied: dict[str, int]
    kept_on_hold: int
    unanswered: int
    readback_mismatches: int
    audit_path: ObjectStoragePath
    accepted_not_landed: int = 0
    stopped: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        requests: int,
        per_status: dict[str, ApplyOutcome],
        choices: HumanChoices,
        audit_path: ObjectStoragePath,
    ) -> HumanApplyResult:
        """Counts from the writes' outcomes and the choices."""
        decided = [c for c, _ in choices.decided.values()]
        return cls(
            requests=requests,
            applied={s: len(o.applied) for s, o in per_status.items()},
            kept_on_hold=decided.count(OPTION_KEEP),
            unanswered=decided.count(UNANSWERED),
            readback_mismatches=sum(len(o.mismatches) for o in per_status.values()),
            audit_path=audit_path,
            accepted_not_landed=sum(len(o.not_landed) for o in per_status.values()),
            stopped=dict(choices.stopped),
        )


@dataclass
class HumanChoices:
    """What the answers ask for (:func:`plan_choices`).

    :param plan: status -> on-hold ids to send.
    :param decided: on-hold id -> (choice, responder), every conversion of every request.
    :param stopped: rule id -> the ``keep_on_hold`` ids of its request that match none of its
        conversions (its conversions are :data:`STOPPED`, none is in ``plan``).
    """

    plan: dict[str, list[str]]
    decided: Decided
    stopped: dict[str, list[str]]


def keep_ids(text: object) -> list[str]:
    """The ids a ``keep_on_hold`` answer lists, in order, once each (comma, semicolon or space
    separated; quotes and backticks around a copied id dropped).

    :param text: the form field's value (``None``: none).
    """
    tokens = _KEEP_SEPARATORS.split(str(text or "").strip())
    return list(dict.fromkeys(t for t in tokens if t))


def match_keep_ids(
    ids: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> tuple[set[str], list[str]]:
    """The on-hold ids the ``keep_on_hold`` ids name among ``rows``, and the ids naming none.

    An id names a row when it equals, without regard to case, its ``conversion_id`` or its
    ``on_hold_conversion_id``.

    :param ids: from :func:`keep_ids`.
    :param rows: the audit rows of one request.
    :return: ``(on-hold ids named, ids matching no row)``.
    """
    by_name: dict[str, str] = {}
    for row in rows:
        oh_id = str(row["on_hold_conversion_id"])
        for name in (row.get("conversion_id"), oh_id):
            if name:
                by_name.setdefault(str(name).casefold(), oh_id)
    named = {by_name[i.casefold()] for i in ids if i.casefold() in by_name}
    return named, [i for i in ids if i.casefold() not in by_name]


def plan_choices(
    requests: Sequence[Mapping[str, Any]],
    responses: Sequence[Any],
    rows: Sequence[Mapping[str, Any]],
    reject_status: str,
    log: TaskLog | None = None,
) -> HumanChoices:
    """The writes the answers ask for, and every conversion's choice and responder.

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
    stopped: dict[str, list[str]] = {}
    by_rule: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_rule.setdefault(str(row["rule_id"]), []).append(row)
    for request, response in zip(requests, responses, strict=True):
        rule_id = rule_of_subject(request["subject"])
        response = response if isinstance(response, dict) else {}
        chosen, params = response.get("chosen_options") or [], response.get("params_input") or {}
        choice, who_name = _answer(rule_id, chosen, response.get("responded_by_user"), log)
        items = by_rule.get(rule_id, [])
        listed = keep_ids(params.get(KEEP_PARAM))
        kept, unmatched = match_keep_ids(listed, items)
        if unmatched and choice in (OPTION_APPROVE, OPTION_REJECT):
            # The answer is not what the reviewer meant (a typo, another request's id): writing
            # the rest could approve a conversion they tried to hold.
            stopped[rule_id] = unmatched
            choice = STOPPED
            log.error(
                "Rule %s: keep_on_hold ids %s match none of its %d conversions: nothing of "
                "this request is written (%s answered by %s); its conversions stay on hold and "
                "are asked about again next run",
                rule_id,
                _quoted(unmatched, rows),
                len(items),
                chosen,
                who_name or "nobody",
            )
        elif unmatched:
            log.warning(
                "Rule %s: keep_on_hold ids %s match none of its conversions (nothing is "
                "written for %r anyway)",
                rule_id,
                _quoted(unmatched, rows),
                choice,
            )
        writes = choice in (OPTION_APPROVE, OPTION_REJECT)
        really_kept = (
            len(kept) if writes else (0 if choice in (UNANSWERED, STOPPED) else len(items))
        )
        log.info(
            "Rule %s: %s chose %r: %d conversions, %d kept on hold (keep_on_hold listed %d)",
            rule_id,
            who_name or "nobody",
            choice,
            len(items),
            really_kept,
            len(listed),
        )
        for row in items:
            oh_id = str(row["on_hold_conversion_id"])
            if not writes:
                decided[oh_id] = (OPTION_KEEP if choice == OPTION_KEEP else choice, who_name)
            elif oh_id in kept:
                decided[oh_id] = (OPTION_KEEP, who_name)
            else:
                status = APPROVED if choice == OPTION_APPROVE else reject_status
                plan[status].append(oh_id)
                decided[oh_id] = (str(choice), who_name)
    return HumanChoices(plan, decided, stopped)


def _answer(rule_id: str, chosen: Any, who: Any, log: TaskLog) -> tuple[str, str]:
    """The option chosen (:data:`UNANSWERED` unless exactly one known option) and who chose."""
    who_name = str(((who.get("name") or who.get("id")) if isinstance(who, dict) else who) or "")
    choice = chosen[0] if len(chosen) == 1 and isinstance(chosen[0], str) else None
    if choice in REVIEW_OPTIONS:
        return str(choice), who_name
    # Only the exact options write; anything else changes nothing and is asked again.
    log.warning(
        "Rule %s: unexpected answer %r from %s: nothing written, the conversions "
        "stay on hold and are asked about again next run (options: %s)",
        rule_id,
        chosen,
        who_name or "nobody",
        REVIEW_OPTIONS,
    )
    return UNANSWERED, who_name


def _quoted(ids: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """``'c-12', 'abd' (a conversion of rule other's request)``: the ids, and where an id of
    another request belongs."""
    owner: dict[str, str] = {}
    for row in rows:
        for name in (row.get("conversion_id"), row.get("on_hold_conversion_id")):
            if name:
                owner.setdefault(str(name).casefold(), str(row["rule_id"]))
    parts = []
    for i in ids:
        rule = owner.get(i.casefold())
        parts.append(f"{i!r} (a conversion of rule {rule}'s request)" if rule else repr(i))
    return ", ".join(parts)


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
    :raises ReviewAnswerError: after the other requests were applied and the audit written,
        when a request's ``keep_on_hold`` names ids matching none of its conversions (nothing
        of that request was written; the message lists the ids per rule).
    """
    log = log or _LOG
    check_reject_status(reject_status)
    if len(responses) != len(requests):
        raise AffiliateNetworkError(
            f"{len(requests)} review requests but {len(responses)} responses"
        )
    rows = [r for r in read_jsonl(identity.audit_path) if r["action"] == "review"]
    choices = plan_choices(requests, responses, rows, reject_status, log)
    human_rows: list[dict[str, Any]] = []

    def remember(outcomes: dict[str, ApplyOutcome]) -> None:
        # Under the lease: two steps answering for one network do not interleave their writes.
        reasons = outcome_reasons(outcomes)
        human_rows.extend(_human_rows(rows, choices, reasons, identity.run.run_id))
        _remember(identity.state_dir, human_rows)

    per_status = apply_under_lease(
        hook,
        choices.plan,
        identity=identity,
        chunk_size=chunk_size,
        lease_wait_s=lease_wait_minutes * 60,
        log=log,
        while_held=remember,
    )
    audit_path = identity.audit_path.parent / f"human-attempt-{attempt}.jsonl"
    write_jsonl_atomic(audit_path, human_rows)
    result = HumanApplyResult.of(len(requests), per_status, choices, audit_path)
    if choices.stopped:
        raise ReviewAnswerError(
            "Review answers not applied: "
            + "; ".join(
                f"rule {rule}: keep_on_hold ids {_quoted(ids, rows)} match none of its "
                "conversions (neither a conversion id nor an on-hold id of that request)"
                for rule, ids in choices.stopped.items()
            )
            + ". Nothing of those requests was written: their conversions stay on hold and are "
            "asked about again next run (check the ids there). The other requests were applied"
            f" ({_applied_text(result.applied)}). Audit: {audit_path}"
        )
    return result


def _applied_text(applied: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in applied.items()) or "nothing to write"


def _human_rows(
    rows: Sequence[Mapping[str, Any]],
    choices: HumanChoices,
    outcomes: dict[str, tuple[bool, str]],
    run_id: str,
) -> list[dict[str, Any]]:
    """The review rows a person answered, with the choice, who, when and the outcome."""
    now = time.time()
    human_rows = []
    for row in rows:
        oh_id = row["on_hold_conversion_id"]
        if oh_id not in choices.decided:
            continue
        choice, who_name = choices.decided[oh_id]
        if choice == OPTION_KEEP:
            default = "kept on hold by reviewer"
        elif choice == STOPPED:
            unmatched = ", ".join(repr(i) for i in choices.stopped.get(str(row["rule_id"]), []))
            default = (
                f"not applied: keep_on_hold ids {unmatched} match none of this request's "
                "conversions; kept on hold, asked again next run"
            )
        else:
            default = "no valid answer: kept on hold, asked again next run"
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
        if r["human_choice"] not in (UNANSWERED, STOPPED)
        and (r["responded_by"] or r["human_choice"] != OPTION_KEEP)
    ]
    if answered:
        HumanDecisions(state).load().record(answered)
